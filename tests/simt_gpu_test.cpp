// The simt test kernels on a real GPU (label gpu; SKIPPED without one): the same kernel source as
// simt_test.cpp, compiled by nvcc (simt_gpu_runs.cu). Results that do not depend on the order of
// the threads must equal the host references and the CPU emulation bit for bit.
#include <cmath>
#include <cstdint>
#include <vector>

#include "catch.h"
#include "common/random.h"
#include "simt_references.h"
#include "simt_test_kernels.cuh"  // the CPU build of the same kernels, simt_test::cpu::

using simt_test::same_bits;

namespace simt_test::gpu {  // simt_gpu_runs.cu
bool poisons();
bool poisons_fresh_buffers();
std::vector<float> fresh_buffer(std::size_t count);
}  // namespace simt_test::gpu

TEST_CASE("on the GPU the block reduction equals the host tree and the CPU emulation", "[simt][gpu]") {
  const unsigned block = GENERATE(32u, 64u, 256u);
  const auto in = fa::normal<float>(1000, 100 + block);
  const auto gpu = simt_test::gpu::block_sums(in, block);
  CHECK(same_bits(gpu, simt_test::tree_sums(in, block)));  // same additions, same order
  CHECK(same_bits(gpu, simt_test::cpu::block_sums(in, block)));
}

TEST_CASE("on the GPU the warp reduction and the shuffles equal the CPU emulation", "[simt][gpu]") {
  const auto x = fa::normal<float>(512, 7);
  CHECK(same_bits(simt_test::gpu::warp_sums(x), simt_test::butterfly_sums(x)));
  std::vector<int> in(128);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int>((i * 37) % 101) - 50;
  CHECK(simt_test::gpu::warp_shuffles(in) == simt_test::cpu::warp_shuffles(in));
}

TEST_CASE("on the GPU the built-in indices and dynamic shared memory equal the CPU emulation", "[simt][gpu]") {
  CHECK(simt_test::gpu::thread_indices({3, 2, 1}, {4, 3, 2}) == simt_test::cpu::thread_indices({3, 2, 1}, {4, 3, 2}));
  const auto in = fa::normal<float>(4 * 64, 5);
  CHECK(same_bits(simt_test::gpu::reverse_blocks(in, 64), simt_test::cpu::reverse_blocks(in, 64)));
}

TEST_CASE("on the GPU unwritten dynamic shared memory and a fresh DeviceBuffer read as NaN, as on the CPU",
          "[simt][gpu]") {
  if (!simt_test::gpu::poisons()) {
    WARN("built with SIMT_POISON=0 (or NDEBUG): the GPU path does not poison, nothing to check");
    return;
  }
  // Each block dirties its shared memory after reading it; every block must still start from NaN.
  const auto unwritten = simt_test::gpu::unwritten_dynamic_shared(64, 256);
  for (std::size_t i = 0; i < unwritten.size(); ++i) {
    INFO("thread " << i << " found " << unwritten[i]);
    REQUIRE(std::isnan(unwritten[i]));
  }
  if (!simt_test::gpu::poisons_fresh_buffers()) {
    WARN("SIMT_POISON=0 in the environment: fresh DeviceBuffers are not filled in this run");
    return;
  }
  for (float x : simt_test::gpu::fresh_buffer(1000)) REQUIRE(std::isnan(x));
}

TEST_CASE("on the GPU atomicAdd sums and counts", "[simt][gpu]") {
  const auto in = fa::normal<float>(64 * 128, 21);
  const auto gpu = simt_test::gpu::block_atomic_sums(in, 128);
  for (std::size_t b = 0; b < gpu.size(); ++b) {
    double sum = 0;
    for (std::size_t t = 0; t < 128; ++t) sum += in[b * 128 + t];
    // 128 float additions of values ~1 in the GPU's order: at most ~1e-3 off; a lost value is ~1.
    CHECK(std::fabs(gpu[b] - sum) < 1e-2);
  }
  const auto values = fa::normal<float>(10000, 3);
  CHECK(simt_test::gpu::count_negative(values) == simt_test::cpu::count_negative(values));
}
