// The GPU backend: what simt.h means under nvcc. Nothing is emulated here; every name is a thin
// wrapper over the CUDA runtime, with the same spelling as the CPU backend, so that the chapters'
// host code is written once.
//
//   launch<Kernel>(grid, block, bytes, args...)  Kernel<<<grid, block, bytes>>>(args...), then
//                                                 cudaGetLastError and cudaDeviceSynchronize checked
//   set_max_dynamic_shared_bytes<Kernel>(bytes)   cudaFuncSetAttribute(Kernel,
//                                                 cudaFuncAttributeMaxDynamicSharedMemorySize)
//   DeviceBuffer<T>                               cudaMalloc / cudaMemcpy / cudaFree
//   SIMT_DYNAMIC_SHARED(T, name)                  extern __shared__ (16-byte aligned)
//
// Every CUDA call is checked with FA_CUDA_CHECK: a failure throws std::runtime_error with the call,
// the CUDA error, the file and the line; a launch failure also names the kernel.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/cuda_check.h"
#include "common/simt/backend.h"
#include "common/simt/launch_rules.h"

// One name for every kernel's dynamic shared memory, declared as bytes: CUDA forbids declaring the
// same extern __shared__ array with two different types.
#define SIMT_DYNAMIC_SHARED(T, name)                                         \
  extern __shared__ __align__(16) unsigned char simt_dynamic_shared_bytes[]; \
  T* name = reinterpret_cast<T*>(simt_dynamic_shared_bytes)

namespace simt {
inline namespace gpu {

// See launch.h (the CPU version) for the contract. Throws std::invalid_argument for a launch shape
// outside CUDA's limits (before launching), std::runtime_error when the launch or the kernel fails.
template <auto Kernel, class... Args>
void launch(dim3 grid, dim3 block, std::size_t dynamic_shared_bytes, Args&&... args) {
  const std::string_view name = rules::kernel_name<Kernel>();
  rules::check_launch_shape(name, grid, block);
  Kernel<<<grid, block, dynamic_shared_bytes>>>(std::forward<Args>(args)...);
  try {
    FA_CUDA_CHECK(cudaGetLastError());       // the launch itself (configuration, resources)
    FA_CUDA_CHECK(cudaDeviceSynchronize());  // the kernel's run (a bad address, a trap)
  } catch (const std::runtime_error& e) {
    throw std::runtime_error("simt::launch of " + std::string(name) + ": " + e.what());
  }
}

template <auto Kernel>
void set_max_dynamic_shared_bytes(std::size_t bytes) {
  FA_CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(bytes)));
}

template <class T>
class DeviceBuffer {
  static_assert(std::is_trivially_copyable_v<T>, "device memory holds trivially copyable values");

 public:
  explicit DeviceBuffer(std::size_t count) : size_(count) {
    FA_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data_), count * sizeof(T)));
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
    FA_CUDA_CHECK(cudaMemcpy(data_, host.data(), size_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  void copy_to_host(std::span<T> host) const {
    rules::check_same_size("copy_to_host", size_, host.size());
    FA_CUDA_CHECK(cudaMemcpy(host.data(), data_, size_ * sizeof(T), cudaMemcpyDeviceToHost));
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
