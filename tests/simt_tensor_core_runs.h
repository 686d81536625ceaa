// The tensor-core test kernels of common/simt (simt_tensor_core_kernels.cuh), each behind a host
// function that allocates device buffers, launches it and copies the result back. Declared for
// both backends as in simt_test_runs.h: simt_tensor_test::cpu:: (host compiler) and
// simt_tensor_test::gpu:: (nvcc).
//
// Per-lane data is lane-major: lane l's k registers are at [l * k, l * k + k).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "simt_runs_support.h"

namespace simt_tensor_test {

// What a run of the cp.async kernel saw, per thread, 4 words each (the 16 bytes of its slot).
struct AsyncCopyRun {
  std::vector<std::uint32_t> before_wait;  // its slot, read right after starting and committing the copy
  std::vector<std::uint32_t> after_wait;   // its slot, after cp_async_wait_group<0>
  std::vector<std::uint32_t> neighbour;    // the next thread's slot, after the __syncthreads()
};

// The two-group run: per thread, 4 words each.
struct TwoGroupRun {
  std::vector<std::uint32_t> first_after_wait1;   // group 0's slot after wait_group<1>
  std::vector<std::uint32_t> second_after_wait1;  // group 1's slot after wait_group<1>
  std::vector<std::uint32_t> second_after_wait0;  // group 1's slot after wait_group<0>
};

// What converting each float gives: bf16 and f16 bits, back to float, and the two pack orders.
struct Conversions {
  std::vector<std::uint16_t> bf16_bits, f16_bits;
  std::vector<float> bf16_back, f16_back;
  std::vector<std::uint32_t> bf16x2, f16x2;  // pack_*x2(in[i], in[(i + 1) % n])
};

}  // namespace simt_tensor_test

#define SIMT_TENSOR_TEST_RUNNERS                                                                                  \
  /* One mma per warp: a[32 * 4], b[32 * 2], c[32 * 4] per warp, warps after each other; returns                  \
     d[32 * 4] per warp. Blocks of 64 threads (2 warps). bf16 or f16 inputs. */                                   \
  std::vector<float> mma_fragments(bool bf16, std::span<const std::uint32_t> a, std::span<const std::uint32_t> b, \
                                   std::span<const float> c);                                                     \
  /* ldmatrix of `matrices` (1, 2, 4) 8x8 matrices, with or without .trans, from a 32-row tile of                 \
     8 b16 elements per row in dynamic shared memory (the 256 elements of `tile`); lane l gives                   \
     the address of tile row row_of_lane[l]. Returns r[matrices] per lane. */                                     \
  std::vector<std::uint32_t> ldmatrix_registers(int matrices, bool trans, std::span<const std::uint16_t> tile,    \
                                                std::span<const int> row_of_lane);                                \
  /* D (16x8, row-major) = A (16x16, row-major) B (16x8, row-major [k][n]) + C, the operands                      \
     loaded through static __shared__ memory with ldmatrix_x4 (A) and ldmatrix_x2_trans (B), as a                 \
     FlashAttention-2 kernel loads them. A and B: bf16 or f16 bits. */                                            \
  std::vector<float> mma_through_ldmatrix(bool bf16, std::span<const std::uint16_t> A,                            \
                                          std::span<const std::uint16_t> B, std::span<const float> C);            \
  /* One block of `threads`: thread t copies src[4t .. 4t+3] to its shared slot with cp_async_16                  \
     (zero-filled when !valid). See AsyncCopyRun. */                                                              \
  simt_tensor_test::AsyncCopyRun async_copy(std::span<const std::uint32_t> src, unsigned threads, bool valid);    \
  /* Two groups per thread (src: 8 words per thread). See TwoGroupRun. */                                         \
  simt_tensor_test::TwoGroupRun async_copy_two_groups(std::span<const std::uint32_t> src, unsigned threads);      \
  /* A thread copies its slot, commits, and meets the block at __syncthreads() WITHOUT waiting;                   \
     returns what each thread then reads in the next thread's slot (4 words each). */                             \
  std::vector<std::uint32_t> async_copy_barrier_only(std::span<const std::uint32_t> src, unsigned threads);       \
  /* simt::bf16 / simt::f16 of each value, in a kernel. */                                                        \
  simt_tensor_test::Conversions conversions(std::span<const float> in);

SIMT_DECLARE_RUNNERS(simt_tensor_test, SIMT_TENSOR_TEST_RUNNERS)

// The profiled copy (built for tests/simt_racecheck_test.cpp): every access seen by simt's race
// checker (common/simt/tools/racecheck.h).
namespace simt_tensor_test::cpu_profiled {
SIMT_TENSOR_TEST_RUNNERS
}  // namespace simt_tensor_test::cpu_profiled

#undef SIMT_TENSOR_TEST_RUNNERS
