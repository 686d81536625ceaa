// What a kernel may write, for the host compiler: the CPU meaning of CUDA's kernel-side words.
//
// Included by simt.h when the compiler is not nvcc. Each CUDA word maps to plain C++:
//   __global__, __device__, __host__     nothing (every function is a host function here)
//   __forceinline__                      inline
//   threadIdx, blockIdx                  thread_local uint3 values that the scheduler sets before
//   blockDim, gridDim                    it switches to a CUDA thread (block.cpp)
//   warpSize                             32
//   __shared__                           static thread_local: one array per host thread, which is
//                                        one per block, since a block never leaves its host thread
//   SIMT_DYNAMIC_SHARED(T, name)         T* name = this block's dynamic shared memory (filled with
//                                        NaN bytes before the block starts)
//   __syncthreads()                      suspends this CUDA thread until every thread of the block
//                                        has arrived (or reports a divergent barrier)
//   __shfl_*_sync(mask, v, lane, width)  suspends until every lane of the warp has arrived, then
//                                        returns the value of the source lane
//   atomicAdd                            std::atomic_ref (blocks may run on different host threads)
//   __expf, __logf, rsqrtf               expf, logf, 1 / sqrtf (the GPU's are faster and coarser)
//
// Source: CUDA C++ Programming Guide, "C++ Language Extensions" (built-in variables, memory space
// specifiers, synchronization functions, warp shuffle functions, atomic functions, intrinsics);
// PTX ISA, "shfl.sync", for which lane a shuffle reads.
#pragma once

#include <math.h>  // expf, logf, fmaxf, ... and the float overloads of exp, log in the global namespace

#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <source_location>
#include <type_traits>

#include "common/simt/runtime/backend.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ static thread_local
// glibc declares __expf and __logf without exporting them; these names are CUDA's fast intrinsics.
#define __expf(x) ::expf(x)
#define __logf(x) ::logf(x)

namespace simt {
inline namespace cpu {

// CUDA's index types: uint3 for threadIdx and blockIdx, dim3 (every part 1 unless given) for
// blockDim, gridDim and the launch configuration.
struct uint3 {
  unsigned x, y, z;
};

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return {x, y, z}; }
};

namespace builtin {
// Set by the scheduler (block.cpp): blockIdx, blockDim, gridDim once per block, threadIdx before
// every switch to a CUDA thread. Read by kernels; a kernel must not write them.
inline thread_local uint3 threadIdx{0, 0, 0};
inline thread_local uint3 blockIdx{0, 0, 0};
inline thread_local dim3 blockDim{1, 1, 1};
inline thread_local dim3 gridDim{1, 1, 1};
}  // namespace builtin

namespace detail {

// Kernel-side entry points of the scheduler (block.cpp). Both throw std::logic_error when called
// outside a kernel started by simt::launch.
void syncthreads(const std::source_location& site);

enum class ShuffleMode { idx, up, down, bfly };
// One lane's part of a warp shuffle: `bits` is the lane's value, `operand` the source lane (idx),
// the delta (up, down) or the lane mask (bfly). Returns the bits of the value that the PTX rules
// choose for this lane. Throws std::invalid_argument for a mask other than 0xffffffff or a width
// that is not a power of 2 in [1, 32].
std::uint64_t shuffle(ShuffleMode mode, unsigned mask, std::uint64_t bits, int operand, int width,
                      const std::source_location& site);

template <class T>
T shuffle_value(ShuffleMode mode, unsigned mask, T value, int operand, int width, const std::source_location& site) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8,
                "warp shuffles move values of at most 8 bytes (int, float, double, ...)");
  std::uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  bits = shuffle(mode, mask, bits, operand, width, site);
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}

// The current block's dynamic shared memory and its size in bytes; set by the scheduler before
// each block.
inline thread_local std::byte* dynamic_shared_memory = nullptr;
inline thread_local std::size_t dynamic_shared_size = 0;

template <class T>
T* dynamic_shared() {
  return reinterpret_cast<T*>(dynamic_shared_memory);
}

}  // namespace detail
}  // namespace cpu
}  // namespace simt

// The names a kernel uses unqualified, as CUDA has them in the global namespace.
using simt::cpu::dim3;
using simt::cpu::uint3;
using simt::cpu::builtin::blockDim;
using simt::cpu::builtin::blockIdx;
using simt::cpu::builtin::gridDim;
using simt::cpu::builtin::threadIdx;
inline constexpr int warpSize = 32;

#define SIMT_DYNAMIC_SHARED(T, name) T* name = ::simt::cpu::detail::dynamic_shared<T>()

// Waits until every thread of the block has called it; `site` tells a divergent barrier's report
// which __syncthreads() each thread waits at.
inline void __syncthreads(std::source_location site = std::source_location::current()) {
  ::simt::cpu::detail::syncthreads(site);
}

// Warp shuffles (full mask only on the CPU): the value of another lane of the same warp.
//   __shfl_sync      lane srcLane of this lane's width-sized segment
//   __shfl_up_sync   lane - delta, or this lane's own value if that leaves the segment
//   __shfl_down_sync lane + delta, or this lane's own value if that leaves the segment
//   __shfl_xor_sync  lane ^ laneMask (a butterfly: the step of a tree reduction)
template <class T>
T __shfl_sync(unsigned mask, T var, int srcLane, int width = warpSize,
              std::source_location site = std::source_location::current()) {
  return ::simt::cpu::detail::shuffle_value(::simt::cpu::detail::ShuffleMode::idx, mask, var, srcLane, width, site);
}
template <class T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize,
                 std::source_location site = std::source_location::current()) {
  return ::simt::cpu::detail::shuffle_value(::simt::cpu::detail::ShuffleMode::up, mask, var, static_cast<int>(delta),
                                            width, site);
}
template <class T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize,
                   std::source_location site = std::source_location::current()) {
  return ::simt::cpu::detail::shuffle_value(::simt::cpu::detail::ShuffleMode::down, mask, var, static_cast<int>(delta),
                                            width, site);
}
template <class T>
T __shfl_xor_sync(unsigned mask, T var, int laneMask, int width = warpSize,
                  std::source_location site = std::source_location::current()) {
  return ::simt::cpu::detail::shuffle_value(::simt::cpu::detail::ShuffleMode::bfly, mask, var, laneMask, width, site);
}

// atomicAdd: adds `value` to *address as one indivisible step and returns the old value. Blocks
// may run on different host threads, so these are real atomics.
#if SIMT_PROFILED
// In a profiled copy the add is made by simt (observer.cpp), which tells the race checker that
// this access is an atomic one (and, being compiled without the instrumentation, is not seen a
// second time as a plain load and store). A namespace of its own keeps these apart from the
// ordinary copy's atomicAdd, which is a different function.
namespace simt {
inline namespace cpu {
namespace detail {
float atomic_add_seen(float* address, float value, const std::source_location& site);
int atomic_add_seen(int* address, int value, const std::source_location& site);
unsigned atomic_add_seen(unsigned* address, unsigned value, const std::source_location& site);
}  // namespace detail
}  // namespace cpu
}  // namespace simt
namespace simt {
inline namespace cpu {
namespace profiled_atomics {
inline float atomicAdd(float* address, float value, std::source_location site = std::source_location::current()) {
  return detail::atomic_add_seen(address, value, site);
}
inline int atomicAdd(int* address, int value, std::source_location site = std::source_location::current()) {
  return detail::atomic_add_seen(address, value, site);
}
inline unsigned atomicAdd(unsigned* address, unsigned value,
                          std::source_location site = std::source_location::current()) {
  return detail::atomic_add_seen(address, value, site);
}
}  // namespace profiled_atomics
}  // namespace cpu
}  // namespace simt
using simt::cpu::profiled_atomics::atomicAdd;
#else
inline float atomicAdd(float* address, float value) {
  return std::atomic_ref<float>(*address).fetch_add(value, std::memory_order_relaxed);
}
inline int atomicAdd(int* address, int value) {
  return std::atomic_ref<int>(*address).fetch_add(value, std::memory_order_relaxed);
}
inline unsigned atomicAdd(unsigned* address, unsigned value) {
  return std::atomic_ref<unsigned>(*address).fetch_add(value, std::memory_order_relaxed);
}
#endif

// 1 / sqrt(x); CUDA has it as a fast approximate instruction, the C library does not have it.
inline float rsqrtf(float x) { return 1.0f / ::sqrtf(x); }
