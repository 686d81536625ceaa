// The tensor-core instructions on a real GPU (label gpu; SKIPPED without one): the kernels of
// simt_tensor_core_test.cpp, compiled by nvcc (simt_tensor_core_gpu_runs.cu), checked against the
// same tables of the PTX ISA's figures (simt_tensor_core_tables.h), and against the CPU emulation.
// What only the CPU can show (a read before cp_async_wait_group sees the old contents) is not
// checked here: on a GPU such a read is a race whose result is undefined.
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "catch.h"
#include "simt_runs_support.h"           // SIMT_SKIP_UNLESS_CC
#include "simt_tensor_core_kernels.cuh"  // the CPU build of the same kernels, simt_tensor_test::cpu::
#include "simt_tensor_core_tables.h"

using namespace simt_tensor_test;

// mma.m16n8k16 with bf16 and cp.async need sm_80; built for an older GPU they trap
// (common/simt/instructions/detail/tensor_core_gpu.h). There the test case is skipped and says why.
#define SKIP_UNLESS_SM80() \
  SIMT_SKIP_UNLESS_CC([](int cc) { return cc >= 80; }, "the tensor-core instructions tested here need 8.0 or newer")

TEST_CASE("on the GPU mma m16n8k16 with the PTX fragments gives the exact A B + C", "[simt][gpu]") {
  SKIP_UNLESS_SM80();
  const bool bf16 = GENERATE(true, false);
  const std::vector<MmaProblem> problems{mma_problem(0), mma_problem(1), mma_problem(2), mma_problem(3)};
  const MmaFragments f = mma_fragments_of(problems, bf16);
  const auto d = gpu::mma_fragments(bf16, f.a, f.b, f.c);
  check_mma_result(d, problems, bf16 ? "bf16, GPU" : "f16, GPU");
  CHECK(d == cpu::mma_fragments(bf16, f.a, f.b, f.c));
}

TEST_CASE("on the GPU mma through ldmatrix equals the exact product and the CPU emulation", "[simt][gpu]") {
  SKIP_UNLESS_SM80();
  const bool bf16 = GENERATE(true, false);
  const MmaProblem p = mma_problem(5);
  const RowMajorProblem m = row_major(p, bf16);
  const auto d = gpu::mma_through_ldmatrix(bf16, m.A, m.B, m.C);
  const auto D = p.D();
  for (unsigned r = 0; r < 16; ++r) {
    for (unsigned n = 0; n < 8; ++n) CHECK(d[r * 8 + n] == D[r][n]);
  }
  CHECK(d == cpu::mma_through_ldmatrix(bf16, m.A, m.B, m.C));
}

TEST_CASE("on the GPU ldmatrix hands each lane the PTX ISA's elements, as the CPU does", "[simt][gpu]") {
  SKIP_UNLESS_SM80();
  const unsigned matrices = GENERATE(1u, 2u, 4u);
  const bool trans = GENERATE(false, true);
  const auto tile = encoded_tile();
  const auto rows = scrambled_rows();
  const auto r = gpu::ldmatrix_registers(static_cast<int>(matrices), trans, tile, rows);
  INFO("x" << matrices << (trans ? ".trans" : ""));
  CHECK(r == expected_ldmatrix(matrices, trans, rows));
  CHECK(r == cpu::ldmatrix_registers(static_cast<int>(matrices), trans, tile, rows));
}

TEST_CASE("on the GPU bf16 and f16 round as the table says, and pack lo into bits 0-15", "[simt][gpu]") {
  SKIP_UNLESS_SM80();
  std::vector<float> in;
  for (const auto& c : rounding_cases) in.push_back(std::bit_cast<float>(c.float_bits));
  const auto k = gpu::conversions(in);
  for (std::size_t i = 0; i < rounding_cases.size(); ++i) {
    const RoundingCase& c = rounding_cases[i];
    INFO(c.what << std::hex << ": bf16 0x" << k.bf16_bits[i] << ", f16 0x" << k.f16_bits[i]);
    CHECK((c.bf16 == nan16 ? is_nan16_bf16(k.bf16_bits[i]) : k.bf16_bits[i] == c.bf16));
    CHECK((c.f16 == nan16 ? is_nan16_f16(k.f16_bits[i]) : k.f16_bits[i] == c.f16));
  }
  const auto cpu_k = cpu::conversions(in);
  CHECK(k.bf16x2 == cpu_k.bf16x2);
  CHECK(k.f16x2 == cpu_k.f16x2);
}

TEST_CASE("on the GPU cp.async copies at the wait, zero-fills, and completes groups in order", "[simt][gpu]") {
  SKIP_UNLESS_SM80();
  const unsigned threads = 64;
  std::vector<std::uint32_t> src(8 * threads);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = 0x10203040u + static_cast<std::uint32_t>(i) * 0x01010101u;
  const std::vector<std::uint32_t> first(src.begin(), src.begin() + 4 * threads);
  const auto run = gpu::async_copy(first, threads, true);
  CHECK(run.after_wait == first);
  for (unsigned t = 0; t < threads; ++t) {
    for (unsigned i = 0; i < 4; ++i) CHECK(run.neighbour[4 * t + i] == first[4 * ((t + 1) % threads) + i]);
  }
  const auto zero = gpu::async_copy(first, threads, false);
  for (std::uint32_t w : zero.after_wait) CHECK(w == 0u);
  const auto two = gpu::async_copy_two_groups(src, threads);
  for (unsigned t = 0; t < threads; ++t) {
    for (unsigned i = 0; i < 4; ++i) {
      CHECK(two.first_after_wait1[4 * t + i] == src[8 * t + i]);
      CHECK(two.second_after_wait0[4 * t + i] == src[8 * t + 4 + i]);
    }
  }
}
