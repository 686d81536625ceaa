// The test kernels of common/simt, each behind a host function that allocates device buffers,
// launches it and copies the result back. Declared here for both backends, defined once in
// simt_test_kernels.cuh: simt_test::cpu:: by the host compiler, simt_test::gpu:: by nvcc. A test
// program can hold both and compare them, which is what a chapter's GPU test does too.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

// Every runner, once, for the two namespaces below.
#define SIMT_TEST_RUNNERS                                                                            \
  /* One sum per block of `block` threads (a power of 2, <= 256), by a tree in shared memory. */     \
  std::vector<float> block_sums(std::span<const float> in, unsigned block);                          \
  /* The same with the __syncthreads() after the loads removed: wrong under some schedule. */        \
  std::vector<float> block_sums_missing_barrier(std::span<const float> in, unsigned block);          \
  /* One sum per warp of 32 values, by __shfl_xor_sync, in blocks of 128 threads. */                 \
  std::vector<float> warp_sums(std::span<const float> in);                                           \
  /* Per thread of a 64-thread block: xor-reduction, down-shifted, inclusive up-scan, lane-5         \
     broadcast, and an xor-reduction within 8-lane segments (width 8): 5 ints per thread. */         \
  std::vector<int> warp_shuffles(std::span<const int> in);                                           \
  /* Per thread of the grid, in linear order: threadIdx x,y,z, blockIdx x,y,z, blockDim x,y,z,       \
     gridDim x,y,z (12 values each). */                                                              \
  std::vector<unsigned> thread_indices(std::array<unsigned, 3> grid, std::array<unsigned, 3> block); \
  /* Each block reverses its slice through dynamic shared memory. */                                 \
  std::vector<float> reverse_blocks(std::span<const float> in, unsigned block);                      \
  /* What each thread finds in dynamic shared memory before anyone writes it. */                     \
  std::vector<float> unwritten_dynamic_shared(unsigned blocks, unsigned block);                      \
  /* out[b] = sum of block b's slice by float atomicAdd (order: the block's schedule). */            \
  std::vector<float> block_atomic_sums(std::span<const float> in, unsigned block);                   \
  /* How many of `in` are negative, counted by int atomicAdd from every block. */                    \
  int count_negative(std::span<const float> in);

namespace simt_test::cpu {
SIMT_TEST_RUNNERS
}  // namespace simt_test::cpu

// The profiled copy (built for tests/simt_racecheck_test.cpp): every access seen by simt's race
// checker (common/simt/tools/racecheck.h).
namespace simt_test::cpu_profiled {
SIMT_TEST_RUNNERS
}  // namespace simt_test::cpu_profiled

namespace simt_test::gpu {
SIMT_TEST_RUNNERS
}  // namespace simt_test::gpu

#undef SIMT_TEST_RUNNERS
