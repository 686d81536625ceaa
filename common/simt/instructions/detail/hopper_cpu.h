// hopper.h for the host compiler: the instructions as calls into the emulation (hopper.cpp), each
// with the place it is called from, for the error messages.
//
// wgmma and setmaxnreg wait at the warpgroup's rendezvous (block.cpp): the call returns when all
// 128 threads of the warpgroup have arrived at the same instruction, at the same place. The last
// thread to arrive computes D for the whole warpgroup at once, but hands nobody the result yet:
// each thread's d is filled with wgmma_pending_bits (a NaN) until that thread's
// wgmma_wait_group<N> covers the wgmma's group, which writes the result into d. A read of d in
// between sees NaN; a write to d in between is an error at the wait.
// mbarrier waits and named barriers suspend the thread until the phase or the barrier completes
// (or report a wait that can never end). A TMA copy is recorded when it is issued and lands, and
// completes its bytes on its mbarrier, when a thread waits on that mbarrier.
// Every function throws std::logic_error when called outside a kernel started by simt::launch; a
// misuse inside a kernel makes simt::launch throw std::runtime_error with the report.
#pragma once

#include <cstdint>
#include <source_location>

#include "common/simt/instructions/tensor_map.h"
#include "common/simt/runtime/backend.h"

// A __grid_constant__ kernel parameter (a tensor map) is an ordinary one on the CPU.
#ifndef __grid_constant__
#define __grid_constant__
#endif

namespace simt {
inline namespace cpu {

// The bits a pending accumulator register holds between its wgmma and the wait that covers it: a
// signalling NaN. Copied, it stays the same; any arithmetic on it (acc *= rescale) gives a quiet
// NaN, so the wait can tell that the register was written.
inline constexpr std::uint32_t wgmma_pending_bits = 0x7f86a3a0u;

namespace detail {

enum class WgmmaInput { bf16, f16, e4m3, e5m2 };
struct WgmmaShape {
  WgmmaInput input_a;
  int n;
  Major major_a;  // ignored when A comes from registers
  Major major_b;
  bool a_in_registers;
  WgmmaInput input_b = input_a;  // FP8 only may have another type for B
};
void wgmma(const WgmmaShape& shape, float* d, const std::uint32_t* a, std::uint64_t desc_a, std::uint64_t desc_b,
           bool scale_d, const std::source_location& site);
void wgmma_fence(const std::source_location& site);
void wgmma_commit_group(const std::source_location& site);
void wgmma_wait_group(int n, const std::source_location& site);

std::uint32_t shared_address(const void* pointer, const std::source_location& site);

void mbarrier_init(std::uint64_t* bar, unsigned count, const std::source_location& site);
void mbarrier_arrive(std::uint64_t* bar, unsigned tx_bytes, bool arrive, const std::source_location& site);
bool mbarrier_try_wait_parity(std::uint64_t* bar, unsigned parity, const std::source_location& site);
void named_barrier(unsigned id, unsigned count, bool wait, const std::source_location& site);
void setmaxnreg(bool increase, int count, const std::source_location& site);
void check_in_kernel(const char* what);
void fence_proxy_async_shared_cta();

void cp_async_bulk_tensor_to_shared(void* dst, const TensorMap* map, int rank, const int* coordinates,
                                    std::uint64_t* bar, const std::source_location& site);
void cp_async_bulk_tensor_to_global(const TensorMap* map, int rank, const int* coordinates, const void* src,
                                    const std::source_location& site);
void cp_async_bulk_commit_group(const std::source_location& site);
void cp_async_bulk_wait_group(int n, const std::source_location& site);

}  // namespace detail

inline std::uint32_t shared_address(const void* pointer, std::source_location site = std::source_location::current()) {
  return detail::shared_address(pointer, site);
}

inline std::uint64_t make_wgmma_descriptor(const void* pointer, Swizzle swizzle, std::uint32_t leading_byte_offset,
                                           std::uint32_t stride_byte_offset,
                                           std::source_location site = std::source_location::current()) {
  return wgmma_descriptor(detail::shared_address(pointer, site), swizzle, leading_byte_offset, stride_byte_offset);
}

// ---- wgmma ------------------------------------------------------------------------------------

template <int N, Major major_a = Major::k, Major major_b = Major::k>
void wgmma_m64nNk16_bf16(float (&d)[N / 2], std::uint64_t desc_a, std::uint64_t desc_b, bool scale_d,
                         std::source_location site = std::source_location::current()) {
  static_assert(wgmma_n_supported(N), "wgmma .m64nNk16: N is one of 8, 16, 32, 64, 96, 128, 192, 256 here");
  detail::wgmma({detail::WgmmaInput::bf16, N, major_a, major_b, false}, d, nullptr, desc_a, desc_b, scale_d, site);
}
template <int N, Major major_a = Major::k, Major major_b = Major::k>
void wgmma_m64nNk16_f16(float (&d)[N / 2], std::uint64_t desc_a, std::uint64_t desc_b, bool scale_d,
                        std::source_location site = std::source_location::current()) {
  static_assert(wgmma_n_supported(N), "wgmma .m64nNk16: N is one of 8, 16, 32, 64, 96, 128, 192, 256 here");
  detail::wgmma({detail::WgmmaInput::f16, N, major_a, major_b, false}, d, nullptr, desc_a, desc_b, scale_d, site);
}
template <int N, Major major_b = Major::k>
void wgmma_m64nNk16_bf16(float (&d)[N / 2], const std::uint32_t (&a)[4], std::uint64_t desc_b, bool scale_d,
                         std::source_location site = std::source_location::current()) {
  static_assert(wgmma_n_supported(N), "wgmma .m64nNk16: N is one of 8, 16, 32, 64, 96, 128, 192, 256 here");
  detail::wgmma({detail::WgmmaInput::bf16, N, Major::k, major_b, true}, d, a, 0, desc_b, scale_d, site);
}
template <int N, Major major_b = Major::k>
void wgmma_m64nNk16_f16(float (&d)[N / 2], const std::uint32_t (&a)[4], std::uint64_t desc_b, bool scale_d,
                        std::source_location site = std::source_location::current()) {
  static_assert(wgmma_n_supported(N), "wgmma .m64nNk16: N is one of 8, 16, 32, 64, 96, 128, 192, 256 here");
  detail::wgmma({detail::WgmmaInput::f16, N, Major::k, major_b, true}, d, a, 0, desc_b, scale_d, site);
}

// The FP8 wgmma of hopper.h (.m64nNk32): NAME with A of type A_TYPE and B of B_TYPE, from shared
// memory and with A from registers. Both operands K-major: a Major::mn is an error at the wgmma.
#define SIMT_WGMMA_K32_CPU(NAME, A_TYPE, B_TYPE)                                                                    \
  template <int N, Major major_a = Major::k, Major major_b = Major::k>                                              \
  void NAME(float(&d)[N / 2], std::uint64_t desc_a, std::uint64_t desc_b, bool scale_d,                             \
            std::source_location site = std::source_location::current()) {                                          \
    static_assert(wgmma_n_supported(N), "wgmma .m64nNk32: N is one of 8, 16, 32, 64, 96, 128, 192, 256 here");      \
    detail::wgmma({detail::WgmmaInput::A_TYPE, N, major_a, major_b, false, detail::WgmmaInput::B_TYPE}, d, nullptr, \
                  desc_a, desc_b, scale_d, site);                                                                   \
  }                                                                                                                 \
  template <int N, Major major_b = Major::k>                                                                        \
  void NAME(float(&d)[N / 2], const std::uint32_t(&a)[4], std::uint64_t desc_b, bool scale_d,                       \
            std::source_location site = std::source_location::current()) {                                          \
    static_assert(wgmma_n_supported(N), "wgmma .m64nNk32: N is one of 8, 16, 32, 64, 96, 128, 192, 256 here");      \
    detail::wgmma({detail::WgmmaInput::A_TYPE, N, Major::k, major_b, true, detail::WgmmaInput::B_TYPE}, d, a, 0,    \
                  desc_b, scale_d, site);                                                                           \
  }
SIMT_WGMMA_K32_CPU(wgmma_m64nNk32_e4m3, e4m3, e4m3)
SIMT_WGMMA_K32_CPU(wgmma_m64nNk32_e5m2, e5m2, e5m2)
SIMT_WGMMA_K32_CPU(wgmma_m64nNk32_e4m3_e5m2, e4m3, e5m2)
SIMT_WGMMA_K32_CPU(wgmma_m64nNk32_e5m2_e4m3, e5m2, e4m3)
#undef SIMT_WGMMA_K32_CPU

// How FP8 wgmma adds its 32 products to D on the CPU (hopper.h, "Accumulation"): exact, the
// default, or truncated14. For the whole process, from the next wgmma on (blocks running at the
// time may see either). Throws nothing.
void set_fp8_accumulation(Fp8Accumulation mode);
Fp8Accumulation fp8_accumulation();

// On the GPU an empty asm that pins the accumulators' register accesses on either side of it
// (hopper_gpu.h); nothing to do on the CPU, whose d is memory.
template <int K>
void wgmma_fence_operand(float (&)[K]) {}

inline void wgmma_fence(std::source_location site = std::source_location::current()) { detail::wgmma_fence(site); }
inline void wgmma_commit_group(std::source_location site = std::source_location::current()) {
  detail::wgmma_commit_group(site);
}
template <int N>
void wgmma_wait_group(std::source_location site = std::source_location::current()) {
  static_assert(N >= 0 && N <= 7, "wgmma.wait_group N: N is 0 .. 7");
  detail::wgmma_wait_group(N, site);
}

// ---- mbarrier, fences, named barriers, setmaxnreg ----------------------------------------------

inline void mbarrier_init(std::uint64_t* bar, unsigned count,
                          std::source_location site = std::source_location::current()) {
  detail::mbarrier_init(bar, count, site);
}
inline void fence_mbarrier_init() { detail::check_in_kernel("fence_mbarrier_init"); }
inline void mbarrier_arrive(std::uint64_t* bar, std::source_location site = std::source_location::current()) {
  detail::mbarrier_arrive(bar, 0, true, site);
}
inline void mbarrier_arrive_expect_tx(std::uint64_t* bar, unsigned bytes,
                                      std::source_location site = std::source_location::current()) {
  detail::mbarrier_arrive(bar, bytes, true, site);
}
inline void mbarrier_expect_tx(std::uint64_t* bar, unsigned bytes,
                               std::source_location site = std::source_location::current()) {
  detail::mbarrier_arrive(bar, bytes, false, site);
}
inline bool mbarrier_try_wait_parity(std::uint64_t* bar, unsigned parity,
                                     std::source_location site = std::source_location::current()) {
  return detail::mbarrier_try_wait_parity(bar, parity, site);
}
inline void mbarrier_wait_parity(std::uint64_t* bar, unsigned parity,
                                 std::source_location site = std::source_location::current()) {
  while (!detail::mbarrier_try_wait_parity(bar, parity, site)) {
  }
}
inline void fence_proxy_async_shared_cta() { detail::fence_proxy_async_shared_cta(); }
inline void named_barrier_sync(unsigned id, unsigned count,
                               std::source_location site = std::source_location::current()) {
  detail::named_barrier(id, count, true, site);
}
inline void named_barrier_arrive(unsigned id, unsigned count,
                                 std::source_location site = std::source_location::current()) {
  detail::named_barrier(id, count, false, site);
}
template <int count>
void setmaxnreg_inc(std::source_location site = std::source_location::current()) {
  static_assert(count >= 24 && count <= 256 && count % 8 == 0, "setmaxnreg: 24 .. 256, a multiple of 8");
  detail::setmaxnreg(true, count, site);
}
template <int count>
void setmaxnreg_dec(std::source_location site = std::source_location::current()) {
  static_assert(count >= 24 && count <= 256 && count % 8 == 0, "setmaxnreg: 24 .. 256, a multiple of 8");
  detail::setmaxnreg(false, count, site);
}

// ---- TMA ---------------------------------------------------------------------------------------

inline void cp_async_bulk_tensor_2d_global_to_shared(void* dst, const TensorMap* map, int c0, int c1,
                                                     std::uint64_t* bar,
                                                     std::source_location site = std::source_location::current()) {
  const int c[2] = {c0, c1};
  detail::cp_async_bulk_tensor_to_shared(dst, map, 2, c, bar, site);
}
inline void cp_async_bulk_tensor_3d_global_to_shared(void* dst, const TensorMap* map, int c0, int c1, int c2,
                                                     std::uint64_t* bar,
                                                     std::source_location site = std::source_location::current()) {
  const int c[3] = {c0, c1, c2};
  detail::cp_async_bulk_tensor_to_shared(dst, map, 3, c, bar, site);
}

inline void cp_async_bulk_tensor_2d_shared_to_global(const TensorMap* map, int c0, int c1, const void* src,
                                                     std::source_location site = std::source_location::current()) {
  const int c[2] = {c0, c1};
  detail::cp_async_bulk_tensor_to_global(map, 2, c, src, site);
}
inline void cp_async_bulk_tensor_3d_shared_to_global(const TensorMap* map, int c0, int c1, int c2, const void* src,
                                                     std::source_location site = std::source_location::current()) {
  const int c[3] = {c0, c1, c2};
  detail::cp_async_bulk_tensor_to_global(map, 3, c, src, site);
}
// The waits for this thread's bulk groups (.read: for the reads of the source only; on the CPU the
// stores land whole at either wait), and the commit that closes a group.
template <int N>
void cp_async_bulk_wait_group(std::source_location site = std::source_location::current()) {
  static_assert(N >= 0, "cp.async.bulk.wait_group N: N >= 0");
  detail::cp_async_bulk_wait_group(N, site);
}
template <int N>
void cp_async_bulk_wait_group_read(std::source_location site = std::source_location::current()) {
  cp_async_bulk_wait_group<N>(site);
}
inline void cp_async_bulk_commit_group(std::source_location site = std::source_location::current()) {
  detail::cp_async_bulk_commit_group(site);
}

}  // namespace cpu
}  // namespace simt
