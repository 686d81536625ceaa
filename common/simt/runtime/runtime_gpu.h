// The GPU backend: what simt.h means under nvcc. Nothing is emulated here; every name is a thin
// wrapper over the CUDA runtime, with the same spelling as the CPU backend, so that the chapters'
// host code is written once.
//
//   launch<Kernel>(grid, block, bytes, args...)  Kernel<<<grid, block, bytes>>>(args...), then
//                                                 cudaGetLastError and cudaDeviceSynchronize checked
//   launch_async<Kernel>(grid, block, bytes, ...) Kernel<<<...>>>(...), then cudaGetLastError only
//   launch<Kernel>(mode, grid, block, bytes, ...) one of the two, as the LaunchMode says
//   set_max_dynamic_shared_bytes<Kernel>(bytes)   cudaFuncSetAttribute(Kernel,
//                                                 cudaFuncAttributeMaxDynamicSharedMemorySize),
//                                                 once per kernel and size
//   DeviceBuffer<T>                               cudaMalloc / cudaMemcpy / cudaMemset / cudaFree
//   SIMT_DYNAMIC_SHARED(T, name)                  extern __shared__ (16-byte aligned)
//
// Every CUDA call is checked with SIMT_CUDA_CHECK: a failure throws std::runtime_error with the call,
// the CUDA error, the file and the line; a launch failure also names the kernel.
//
// SIMT_POISON (1 unless NDEBUG is defined, i.e. in every preset of this project, whose Release
// builds keep assertions; build with -DSIMT_POISON=0 in CMAKE_CUDA_FLAGS, or with NDEBUG, to
// turn it off): memory a kernel finds before anything wrote it is filled with 0xff bytes, NaN for
// float and double, as on the CPU (buffer.h, block.cpp), so that a read of unwritten memory shows
// as NaN on the GPU too instead of whatever the last kernel left there:
//   DeviceBuffer<T>(count)  cudaMemset(0xff) after cudaMalloc
//   SIMT_DYNAMIC_SHARED     at the kernel's entry every thread of the block fills its share of the
//                           dynamic shared memory (its size from the PTX special register
//                           %dynamic_smem_size) and the block meets at a __syncthreads(). So
//                           SIMT_DYNAMIC_SHARED must come once per kernel, at its top, before any
//                           return and outside any branch, where every thread of the block reaches
//                           it (as the chapters' kernels have it), never in a __device__ helper.
// The fill costs one pass of 16-byte stores over the block's dynamic shared memory per block.
// compute-sanitizer's initcheck sees poisoned buffers as written, so SIMT_POISON=0 in the
// environment turns the DeviceBuffer fills (of a fresh buffer, and poison()) off at run time
// (scripts/gpu_check.sh does for initcheck, which tracks global memory only: the shared-memory
// fill stays).
// Source: CUDA Runtime API, cudaMemset, cudaFuncSetAttribute; PTX ISA, "Special Registers:
// %dynamic_smem_size"; CUDA C++ Programming Guide, "__syncthreads()".
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/simt/runtime/backend.h"
#include "common/simt/runtime/cuda_check.h"
#include "common/simt/runtime/launch_checks.h"
#include "common/simt/runtime/launch_mode.h"

#ifndef SIMT_POISON
#if defined(NDEBUG)
#define SIMT_POISON 0
#else
#define SIMT_POISON 1
#endif
#endif

namespace simt {
inline namespace gpu {
namespace detail {

// The bytes of dynamic shared memory this launch gave the block (PTX ISA: %dynamic_smem_size).
__device__ __forceinline__ unsigned dynamic_shared_size() {
  unsigned bytes;
  asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(bytes));
  return bytes;
}

// The block's dynamic shared memory (`base`, 16-byte aligned), filled with 0xff bytes under
// SIMT_POISON: each thread stores every blockDim-th 16-byte word, then the whole block waits at a
// barrier, so no thread reads before the fill is complete. Every thread of the block must call it.
__device__ __forceinline__ unsigned char* prepared_dynamic_shared(unsigned char* base) {
#if SIMT_POISON
  const unsigned bytes = dynamic_shared_size();
  const unsigned threads = blockDim.x * blockDim.y * blockDim.z;
  const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  uint4* words = reinterpret_cast<uint4*>(base);
  const uint4 ones = make_uint4(~0u, ~0u, ~0u, ~0u);
  for (unsigned i = t; i < bytes / 16; i += threads) words[i] = ones;
  for (unsigned i = bytes / 16 * 16 + t; i < bytes; i += threads) base[i] = 0xff;  // a ragged tail
  __syncthreads();
#endif
  return base;
}

// Whether this run may fill device memory with 0xff bytes: not where the environment says
// SIMT_POISON=0 (read once), as for compute-sanitizer's initcheck, to which a filled buffer reads
// as written.
inline bool poison_allowed_in_this_run() {
  static const bool on = [] {
    const char* value = std::getenv("SIMT_POISON");
    return value == nullptr || std::string_view(value) != "0";
  }();
  return on;
}

// Whether a fresh DeviceBuffer is filled: under SIMT_POISON, unless the environment says
// SIMT_POISON=0.
inline bool poison_device_memory() { return SIMT_POISON != 0 && poison_allowed_in_this_run(); }

// The size set_max_dynamic_shared_bytes last gave each kernel (0: never), so that it calls the
// runtime once per kernel and size.
template <auto Kernel>
inline std::atomic<std::size_t> applied_max_dynamic_shared_bytes{0};

}  // namespace detail
}  // namespace gpu
}  // namespace simt

// One name for every kernel's dynamic shared memory, declared as bytes: CUDA forbids declaring the
// same extern __shared__ array with two different types. Under SIMT_POISON it is filled with 0xff
// bytes first (see the top of this file: once per kernel, at its top, reached by every thread).
#define SIMT_DYNAMIC_SHARED(T, name)                                         \
  extern __shared__ __align__(16) unsigned char simt_dynamic_shared_bytes[]; \
  T* name = reinterpret_cast<T*>(::simt::gpu::detail::prepared_dynamic_shared(simt_dynamic_shared_bytes))

namespace simt {
inline namespace gpu {

// See launch_mode.h: returns once the kernel is queued. Throws std::invalid_argument for a launch
// shape outside CUDA's limits (before launching), std::runtime_error naming the kernel when the
// launch itself fails (a bad configuration, too much shared memory, an earlier kernel's fault).
template <auto Kernel, class... Args>
void launch_async(dim3 grid, dim3 block, std::size_t dynamic_shared_bytes, Args&&... args) {
  const std::string_view name = rules::kernel_name<Kernel>();
  rules::check_launch_shape(name, grid, block);
  Kernel<<<grid, block, dynamic_shared_bytes>>>(std::forward<Args>(args)...);
  try {
    SIMT_CUDA_CHECK(cudaGetLastError());  // the launch itself (configuration, resources)
  } catch (const std::runtime_error& e) {
    throw std::runtime_error("simt::launch of " + std::string(name) + ": " + e.what());
  }
}

// See launch.h (the CPU version) for the contract. Throws std::invalid_argument for a launch shape
// outside CUDA's limits (before launching), std::runtime_error when the launch or the kernel fails.
template <auto Kernel, class... Args>
void launch(dim3 grid, dim3 block, std::size_t dynamic_shared_bytes, Args&&... args) {
  launch_async<Kernel>(grid, block, dynamic_shared_bytes, std::forward<Args>(args)...);
  try {
    SIMT_CUDA_CHECK(cudaDeviceSynchronize());  // the kernel's run (a bad address, a trap)
  } catch (const std::runtime_error& e) {
    throw std::runtime_error("simt::launch of " + std::string(rules::kernel_name<Kernel>()) + ": " + e.what());
  }
}

// launch() or launch_async(), as `mode` says.
template <auto Kernel, class... Args>
void launch(LaunchMode mode, dim3 grid, dim3 block, std::size_t dynamic_shared_bytes, Args&&... args) {
  if (mode == LaunchMode::asynchronous) {
    launch_async<Kernel>(grid, block, dynamic_shared_bytes, std::forward<Args>(args)...);
  } else {
    launch<Kernel>(grid, block, dynamic_shared_bytes, std::forward<Args>(args)...);
  }
}

// cudaFuncSetAttribute(MaxDynamicSharedMemorySize), made only when `bytes` differs from what this
// kernel was last given: a loop of launches then holds no runtime call but the launches. Throws
// std::runtime_error in one line, naming the kernel, the bytes and the GPU's limit, when the GPU
// cannot give a block that much (cudaDevAttrMaxSharedMemoryPerBlockOptin: 64 KiB on a T4, 163 KiB
// on an A100, 227 KiB on an H100), and as SIMT_CUDA_CHECK for a CUDA error.
template <auto Kernel>
void set_max_dynamic_shared_bytes(std::size_t bytes) {
  if (detail::applied_max_dynamic_shared_bytes<Kernel>.load() == bytes) return;
  int device = 0, limit = 0;
  SIMT_CUDA_CHECK(cudaGetDevice(&device));
  SIMT_CUDA_CHECK(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (bytes > static_cast<std::size_t>(limit)) {
    throw std::runtime_error(std::string(rules::kernel_name<Kernel>()) + " needs " + std::to_string(bytes) +
                             " bytes of shared memory per block; this GPU gives a block at most " +
                             std::to_string(limit) + ": give a smaller tile or head dim, or run it with --device cpu");
  }
  SIMT_CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  detail::applied_max_dynamic_shared_bytes<Kernel> = bytes;
}

template <class T>
class DeviceBuffer {
  static_assert(std::is_trivially_copyable_v<T>, "device memory holds trivially copyable values");

 public:
  // `count` elements; under SIMT_POISON filled with 0xff bytes (NaN for float), as on the CPU,
  // unless SIMT_POISON=0 is in the environment (detail::poison_device_memory).
  explicit DeviceBuffer(std::size_t count) : size_(count) {
    SIMT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data_), count * sizeof(T)));
    if (detail::poison_device_memory()) SIMT_CUDA_CHECK(cudaMemset(data_, 0xff, count * sizeof(T)));
  }
  explicit DeviceBuffer(std::span<const T> host) : DeviceBuffer(host.size()) { copy_from_host(host); }
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      release();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  ~DeviceBuffer() { release(); }

  void copy_from_host(std::span<const T> host) {
    rules::check_same_size("copy_from_host", size_, host.size());
    SIMT_CUDA_CHECK(cudaMemcpy(data_, host.data(), size_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  void copy_to_host(std::span<T> host) const {
    rules::check_same_size("copy_to_host", size_, host.size());
    SIMT_CUDA_CHECK(cudaMemcpy(host.data(), data_, size_ * sizeof(T), cudaMemcpyDeviceToHost));
  }
  std::vector<T> to_host() const {
    std::vector<T> host(size_);
    copy_to_host(std::span<T>(host.data(), host.size()));
    return host;
  }
  void fill(const T& value) {
    const std::vector<T> host(size_, value);
    copy_from_host(std::span<const T>(host.data(), host.size()));
  }
  // Every byte 0xff (NaN for float, double, bf16 and fp16), whatever the build's SIMT_POISON says:
  // the way to hand a kernel an output buffer, so that an element it forgets to write cannot pass
  // for a result. Not where the environment says SIMT_POISON=0: initcheck's run, where an output
  // read before it is written is initcheck's to report.
  void poison() {
    if (detail::poison_allowed_in_this_run()) SIMT_CUDA_CHECK(cudaMemset(data_, 0xff, size_ * sizeof(T)));
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  void release() noexcept {
    if (data_ != nullptr) (void)cudaFree(data_);  // a destructor must not throw
    data_ = nullptr;
  }
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace gpu
}  // namespace simt
