// hopper.h under nvcc: each function is one PTX instruction (inline asm). Shared-memory operands
// are 32-bit .shared::cta addresses (__cvta_generic_to_shared).
//
// Architectures. wgmma and setmaxnreg exist on sm_90a only (the "a" features of the H100/H200,
// __CUDA_ARCH_FEAT_SM90_ALL); mbarrier's try_wait and expect_tx, fence.proxy.async and
// cp.async.bulk.tensor need sm_90. The project builds its GPU code for sm_80 without a GPU
// (cmake/Options.cmake): compiled for an architecture that lacks them, these functions trap at
// run time instead of failing the build, as tensor_core_gpu.h does for sm_80's.
// Register ordering: the compiler sees wgmma's accumulators written at the wgmma's asm and knows
// nothing of the wait, so it could move a read of d above wgmma_wait_group. wgmma_fence_operand(d)
// (an empty asm that "reads and writes" every register of d) pins them: call it on the
// accumulators after the wait that covers them, and before wgmma_fence when ordinary code wrote
// them. On the CPU it does nothing.
// Source: PTX ISA, "wgmma.mma_async", "wgmma.fence", "wgmma.commit_group", "wgmma.wait_group",
// "mbarrier.init", "mbarrier.arrive", "mbarrier.expect_tx", "mbarrier.test_wait/try_wait",
// "fence.mbarrier_init" and "fence.proxy.async" ("membar/fence"), "bar, barrier", "setmaxnreg",
// "cp.async.bulk.tensor" (each with its Target ISA notes); CUTLASS cute/arch/mma_sm90_gmma.hpp
// (warpgroup_fence_operand, for the register ordering).
#pragma once

#include <cstdint>

#include "common/simt/instructions/detail/hopper_gpu_wgmma.h"
#include "common/simt/instructions/detail/tensor_core_gpu.h"
#include "common/simt/instructions/half_precision.h"
#include "common/simt/instructions/tensor_map.h"

#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define SIMT_HAVE_SM90A 1
#else
#define SIMT_HAVE_SM90A 0
#endif
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define SIMT_HAVE_SM90 1
#else
#define SIMT_HAVE_SM90 0
#endif

// The body of an instruction that exists from sm_90 on (SIMT_SM90_ONLY) or only on sm_90a
// (SIMT_SM90A_ONLY): the PTX itself there, a trap elsewhere, so that a kernel compiled for another
// architecture that calls it stops at once instead of computing garbage.
#if SIMT_HAVE_SM90
#define SIMT_SM90_ONLY(...) __VA_ARGS__
#else
#define SIMT_SM90_ONLY(...) __trap()
#endif
#if SIMT_HAVE_SM90A
#define SIMT_SM90A_ONLY(...) __VA_ARGS__
#else
#define SIMT_SM90A_ONLY(...) __trap()
#endif

namespace simt {
inline namespace gpu {

// shared_address(pointer): tensor_core_gpu.h's (__cvta_generic_to_shared).
__device__ __forceinline__ std::uint64_t make_wgmma_descriptor(const void* pointer, Swizzle swizzle,
                                                               std::uint32_t leading_byte_offset,
                                                               std::uint32_t stride_byte_offset) {
  return wgmma_descriptor(shared_address(pointer), swizzle, leading_byte_offset, stride_byte_offset);
}

// ---- wgmma ------------------------------------------------------------------------------------

#if SIMT_HAVE_SM90A
#define SIMT_WGMMA_DISPATCH(KIND, TYPE) SIMT_WGMMA_BY_N(KIND, TYPE)
#else
#define SIMT_WGMMA_DISPATCH(KIND, TYPE) __trap()
#endif

template <int N, Major major_a = Major::k, Major major_b = Major::k>
__device__ __forceinline__ void wgmma_m64nNk16_bf16(float (&d)[N / 2], std::uint64_t desc_a, std::uint64_t desc_b,
                                                    bool scale_d) {
  static_assert(wgmma_n_supported(N), "wgmma .m64nNk16: N is one of 8, 16, 32, 64, 96, 128, 192, 256 here");
  SIMT_WGMMA_DISPATCH(SS, "bf16");
}
template <int N, Major major_a = Major::k, Major major_b = Major::k>
__device__ __forceinline__ void wgmma_m64nNk16_f16(float (&d)[N / 2], std::uint64_t desc_a, std::uint64_t desc_b,
                                                   bool scale_d) {
  static_assert(wgmma_n_supported(N), "wgmma .m64nNk16: N is one of 8, 16, 32, 64, 96, 128, 192, 256 here");
  SIMT_WGMMA_DISPATCH(SS, "f16");
}
template <int N, Major major_b = Major::k>
__device__ __forceinline__ void wgmma_m64nNk16_bf16(float (&d)[N / 2], const std::uint32_t (&a)[4],
                                                    std::uint64_t desc_b, bool scale_d) {
  static_assert(wgmma_n_supported(N), "wgmma .m64nNk16: N is one of 8, 16, 32, 64, 96, 128, 192, 256 here");
  SIMT_WGMMA_DISPATCH(RS, "bf16");
}
template <int N, Major major_b = Major::k>
__device__ __forceinline__ void wgmma_m64nNk16_f16(float (&d)[N / 2], const std::uint32_t (&a)[4], std::uint64_t desc_b,
                                                   bool scale_d) {
  static_assert(wgmma_n_supported(N), "wgmma .m64nNk16: N is one of 8, 16, 32, 64, 96, 128, 192, 256 here");
  SIMT_WGMMA_DISPATCH(RS, "f16");
}

// The FP8 wgmma of hopper.h (.m64nNk32): NAME with A of type ATYPE and B of BTYPE (PTX type
// names), from shared memory and with A from registers. The PTX has no imm-trans for FP8, so a
// Major::mn operand does not compile.
#if SIMT_HAVE_SM90A
#define SIMT_WGMMA_K32_DISPATCH(KIND, ATYPE, BTYPE) SIMT_WGMMA_K32_BY_N(KIND, ATYPE, BTYPE)
#else
#define SIMT_WGMMA_K32_DISPATCH(KIND, ATYPE, BTYPE) __trap()
#endif
#define SIMT_WGMMA_K32_GPU(NAME, ATYPE, BTYPE)                                                                       \
  template <int N, Major major_a = Major::k, Major major_b = Major::k>                                               \
  __device__ __forceinline__ void NAME(float(&d)[N / 2], std::uint64_t desc_a, std::uint64_t desc_b, bool scale_d) { \
    static_assert(wgmma_n_supported(N), "wgmma .m64nNk32: N is one of 8, 16, 32, 64, 96, 128, 192, 256 here");       \
    static_assert(major_a == Major::k && major_b == Major::k,                                                        \
                  "FP8 wgmma reads K-major operands only: the PTX ISA has no transpose for 8-bit types");            \
    SIMT_WGMMA_K32_DISPATCH(SS, ATYPE, BTYPE);                                                                       \
  }                                                                                                                  \
  template <int N, Major major_b = Major::k>                                                                         \
  __device__ __forceinline__ void NAME(float(&d)[N / 2], const std::uint32_t(&a)[4], std::uint64_t desc_b,           \
                                       bool scale_d) {                                                               \
    static_assert(wgmma_n_supported(N), "wgmma .m64nNk32: N is one of 8, 16, 32, 64, 96, 128, 192, 256 here");       \
    static_assert(major_b == Major::k,                                                                               \
                  "FP8 wgmma reads K-major operands only: the PTX ISA has no transpose for 8-bit types");            \
    SIMT_WGMMA_K32_DISPATCH(RS, ATYPE, BTYPE);                                                                       \
  }
SIMT_WGMMA_K32_GPU(wgmma_m64nNk32_e4m3, "e4m3", "e4m3")
SIMT_WGMMA_K32_GPU(wgmma_m64nNk32_e5m2, "e5m2", "e5m2")
SIMT_WGMMA_K32_GPU(wgmma_m64nNk32_e4m3_e5m2, "e4m3", "e5m2")
SIMT_WGMMA_K32_GPU(wgmma_m64nNk32_e5m2_e4m3, "e5m2", "e4m3")
#undef SIMT_WGMMA_K32_GPU

template <int K>
__device__ __forceinline__ void wgmma_fence_operand(float (&d)[K]) {
#pragma unroll
  for (int i = 0; i < K; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

__device__ __forceinline__ void wgmma_fence() {
  SIMT_SM90A_ONLY(asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"));
}
__device__ __forceinline__ void wgmma_commit_group() {
  SIMT_SM90A_ONLY(asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"));
}
template <int N>
__device__ __forceinline__ void wgmma_wait_group() {
  static_assert(N >= 0 && N <= 7, "wgmma.wait_group N: N is 0 .. 7");
  SIMT_SM90A_ONLY(asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"));
}

// ---- mbarrier, fences, named barriers, setmaxnreg ----------------------------------------------

__device__ __forceinline__ void mbarrier_init(std::uint64_t* bar, unsigned count) {
  SIMT_SM90_ONLY(asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(shared_address(bar)), "r"(count)
                              : "memory"));
}
__device__ __forceinline__ void fence_mbarrier_init() {
  SIMT_SM90_ONLY(asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"));
}
__device__ __forceinline__ void mbarrier_arrive(std::uint64_t* bar) {
  SIMT_SM90_ONLY(asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(shared_address(bar)) : "memory"));
}
__device__ __forceinline__ void mbarrier_arrive_expect_tx(std::uint64_t* bar, unsigned bytes) {
  SIMT_SM90_ONLY(
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(shared_address(bar)), "r"(bytes)
                   : "memory"));
}
__device__ __forceinline__ void mbarrier_expect_tx(std::uint64_t* bar, unsigned bytes) {
  SIMT_SM90_ONLY(
      asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(shared_address(bar)), "r"(bytes)
                   : "memory"));
}
__device__ __forceinline__ bool mbarrier_try_wait_parity(std::uint64_t* bar, unsigned parity) {
#if SIMT_HAVE_SM90
  std::uint32_t done;
  asm volatile(
      "{\n.reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(shared_address(bar)), "r"(parity)
      : "memory");
  return done != 0;
#else
  __trap();
  return false;
#endif
}
__device__ __forceinline__ void mbarrier_wait_parity(std::uint64_t* bar, unsigned parity) {
  while (!mbarrier_try_wait_parity(bar, parity)) {
  }
}
__device__ __forceinline__ void fence_proxy_async_shared_cta() {
  SIMT_SM90_ONLY(asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"));
}
__device__ __forceinline__ void named_barrier_sync(unsigned id, unsigned count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(unsigned id, unsigned count) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
template <int count>
__device__ __forceinline__ void setmaxnreg_inc() {
  static_assert(count >= 24 && count <= 256 && count % 8 == 0, "setmaxnreg: 24 .. 256, a multiple of 8");
  SIMT_SM90A_ONLY(asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(count)));
}
template <int count>
__device__ __forceinline__ void setmaxnreg_dec() {
  static_assert(count >= 24 && count <= 256 && count % 8 == 0, "setmaxnreg: 24 .. 256, a multiple of 8");
  SIMT_SM90A_ONLY(asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(count)));
}

// ---- TMA ---------------------------------------------------------------------------------------

__device__ __forceinline__ void cp_async_bulk_tensor_2d_global_to_shared(void* dst, const TensorMap* map, int c0,
                                                                         int c1, std::uint64_t* bar) {
  SIMT_SM90_ONLY(asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
          shared_address(dst)),
      "l"(&map->raw), "r"(c0), "r"(c1), "r"(shared_address(bar))
      : "memory"));
}
__device__ __forceinline__ void cp_async_bulk_tensor_3d_global_to_shared(void* dst, const TensorMap* map, int c0,
                                                                         int c1, int c2, std::uint64_t* bar) {
  SIMT_SM90_ONLY(asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];\n" ::"r"(shared_address(dst)),
      "l"(&map->raw), "r"(c0), "r"(c1), "r"(c2), "r"(shared_address(bar))
      : "memory"));
}

__device__ __forceinline__ void cp_async_bulk_tensor_2d_shared_to_global(const TensorMap* map, int c0, int c1,
                                                                         const void* src) {
  SIMT_SM90_ONLY(
      asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(&map->raw),
                   "r"(c0), "r"(c1), "r"(shared_address(src))
                   : "memory"));
}
__device__ __forceinline__ void cp_async_bulk_tensor_3d_shared_to_global(const TensorMap* map, int c0, int c1, int c2,
                                                                         const void* src) {
  SIMT_SM90_ONLY(
      asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%1, %2, %3}], [%4];\n" ::"l"(&map->raw),
                   "r"(c0), "r"(c1), "r"(c2), "r"(shared_address(src))
                   : "memory"));
}
__device__ __forceinline__ void cp_async_bulk_commit_group() {
  SIMT_SM90_ONLY(asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"));
}
template <int N>
__device__ __forceinline__ void cp_async_bulk_wait_group() {
  static_assert(N >= 0, "cp.async.bulk.wait_group N: N >= 0");
  SIMT_SM90_ONLY(asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory"));
}
template <int N>
__device__ __forceinline__ void cp_async_bulk_wait_group_read() {
  static_assert(N >= 0, "cp.async.bulk.wait_group.read N: N >= 0");
  SIMT_SM90_ONLY(asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory"));
}

}  // namespace gpu
}  // namespace simt

#undef SIMT_WGMMA_DISPATCH
#undef SIMT_SM90A_ONLY
#undef SIMT_SM90_ONLY
#undef SIMT_HAVE_SM90A
#undef SIMT_HAVE_SM90
