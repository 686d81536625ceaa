// tensor_core.h for the host compiler: the instructions as calls into the emulation
// (tensor_core.cpp), each with the place it is called from, for the error messages.
//
// mma, ldmatrix and __syncwarp wait at the warp's rendezvous (block.cpp) like the shuffles: the
// call returns when all 32 lanes of the warp have arrived at the same instruction, at the same
// place in the source. cp.async does not wait: it records the copy, which lands in shared memory
// when the copying thread's cp_async_wait_group<N> covers its group, or when the block has
// finished the kernel.
// Every function throws std::logic_error when called outside a kernel started by simt::launch; a
// misuse inside a kernel makes simt::launch throw std::runtime_error with the report.
#pragma once

#include <cstdint>
#include <source_location>

#include "common/simt/runtime/backend.h"

namespace simt {
inline namespace cpu {
namespace detail {

enum class MmaInput { bf16, f16 };
void mma_m16n8k16(MmaInput input, float* d, const std::uint32_t* a, const std::uint32_t* b, const float* c,
                  const std::source_location& site);
// matrices: 1, 2 or 4; r: that many registers.
void ldmatrix(int matrices, bool trans, std::uint32_t* r, const void* row_address, const std::source_location& site);
void cp_async_16(void* shared_dst, const void* global_src, bool valid, const std::source_location& site);
void cp_async_commit_group(const std::source_location& site);
void cp_async_wait_group(int n, const std::source_location& site);
void syncwarp(unsigned mask, const std::source_location& site);

}  // namespace detail

inline void mma_m16n8k16_bf16(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2],
                              const float (&c)[4], std::source_location site = std::source_location::current()) {
  detail::mma_m16n8k16(detail::MmaInput::bf16, d, a, b, c, site);
}
inline void mma_m16n8k16_f16(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2],
                             const float (&c)[4], std::source_location site = std::source_location::current()) {
  detail::mma_m16n8k16(detail::MmaInput::f16, d, a, b, c, site);
}

inline void ldmatrix_x1(std::uint32_t (&r)[1], const void* row_address,
                        std::source_location site = std::source_location::current()) {
  detail::ldmatrix(1, false, r, row_address, site);
}
inline void ldmatrix_x2(std::uint32_t (&r)[2], const void* row_address,
                        std::source_location site = std::source_location::current()) {
  detail::ldmatrix(2, false, r, row_address, site);
}
inline void ldmatrix_x4(std::uint32_t (&r)[4], const void* row_address,
                        std::source_location site = std::source_location::current()) {
  detail::ldmatrix(4, false, r, row_address, site);
}
inline void ldmatrix_x1_trans(std::uint32_t (&r)[1], const void* row_address,
                              std::source_location site = std::source_location::current()) {
  detail::ldmatrix(1, true, r, row_address, site);
}
inline void ldmatrix_x2_trans(std::uint32_t (&r)[2], const void* row_address,
                              std::source_location site = std::source_location::current()) {
  detail::ldmatrix(2, true, r, row_address, site);
}
inline void ldmatrix_x4_trans(std::uint32_t (&r)[4], const void* row_address,
                              std::source_location site = std::source_location::current()) {
  detail::ldmatrix(4, true, r, row_address, site);
}

inline void cp_async_16(void* shared_dst, const void* global_src, bool valid = true,
                        std::source_location site = std::source_location::current()) {
  detail::cp_async_16(shared_dst, global_src, valid, site);
}
inline void cp_async_commit_group(std::source_location site = std::source_location::current()) {
  detail::cp_async_commit_group(site);
}
template <int N>
void cp_async_wait_group(std::source_location site = std::source_location::current()) {
  static_assert(N >= 0, "cp.async.wait_group N: N is the number of groups left in flight, >= 0");
  detail::cp_async_wait_group(N, site);
}

}  // namespace cpu
}  // namespace simt

// CUDA's __syncwarp(mask): full mask only on the CPU, as for the shuffles.
inline void __syncwarp(unsigned mask = 0xffffffffu, std::source_location site = std::source_location::current()) {
  ::simt::cpu::detail::syncwarp(mask, site);
}
