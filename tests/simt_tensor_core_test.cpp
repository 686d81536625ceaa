// common/simt's tensor-core instructions on the CPU: mma.sync m16n8k16, ldmatrix and cp.async give
// what the PTX ISA's figures say (simt_tensor_core_tables.h) under every schedule, the 2-byte types
// round as IEEE 754 says, cp.async lands only at the wait, and every misuse is reported.
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "catch.h"
#include "simt_tensor_core_kernels.cuh"
#include "simt_tensor_core_tables.h"
#include "simt_test_support.h"

namespace {

using namespace simt_tensor_test;
using namespace simt_test;  // ControlsGuard, for_each_schedule, launch_error, check_mentions, ...

std::vector<std::uint32_t> words(std::size_t n, std::uint32_t first) {
  std::vector<std::uint32_t> w(n);
  for (std::size_t i = 0; i < n; ++i) w[i] = first + static_cast<std::uint32_t>(i) * 0x01010101u;
  return w;
}

}  // namespace

TEST_CASE("mma m16n8k16 with the PTX fragments gives the exact A B + C, bf16 and f16", "[simt]") {
  ControlsGuard guard;
  const bool bf16 = GENERATE(true, false);
  const std::vector<MmaProblem> problems{mma_problem(0), mma_problem(1), mma_problem(2), mma_problem(3)};
  const MmaFragments f = mma_fragments_of(problems, bf16);
  for (const auto& s : all_schedules) {
    simt::set_schedule(s.schedule, s.seed);
    check_mma_result(cpu::mma_fragments(bf16, f.a, f.b, f.c), problems,
                     std::string(bf16 ? "bf16" : "f16") + ", schedule " + name(s));
  }
}

TEST_CASE("mma fragments: a few lanes' registers, read straight off the PTX figures", "[simt]") {
  // "MMA .m16n8k16 fragment layout for matrix A": lane 5 (groupID 1, threadID_in_group 1) holds
  // a6, a7 = A[9][10], A[9][11] in a[3]; lane 31 holds a0, a1 = A[7][6], A[7][7] in a[0].
  CHECK((a_slot(9, 10).lane == 5 && a_slot(9, 10).reg == 3 && a_slot(9, 10).high == 0));
  CHECK((a_slot(9, 11).lane == 5 && a_slot(9, 11).reg == 3 && a_slot(9, 11).high == 1));
  CHECK((a_slot(7, 7).lane == 31 && a_slot(7, 7).reg == 0 && a_slot(7, 7).high == 1));
  // "... for matrix B": lane 6 (groupID 1, threadID_in_group 2) holds b2, b3 = B[12][1], B[13][1].
  CHECK((b_slot(12, 1).lane == 6 && b_slot(12, 1).reg == 1 && b_slot(13, 1).high == 1));
  // "... for accumulator matrix C/D": lane 7 holds c2, c3 = C[9][6], C[9][7].
  CHECK((c_slot(9, 6).lane == 7 && c_slot(9, 6).reg == 2 && c_slot(9, 7).reg == 3));
}

TEST_CASE("mma through ldmatrix, as a FlashAttention-2 kernel loads its operands, is exact", "[simt]") {
  ControlsGuard guard;
  const bool bf16 = GENERATE(true, false);
  const MmaProblem p = mma_problem(5);
  const RowMajorProblem m = row_major(p, bf16);
  const auto D = p.D();
  for (const auto& s : all_schedules) {
    simt::set_schedule(s.schedule, s.seed);
    const auto d = cpu::mma_through_ldmatrix(bf16, m.A, m.B, m.C);
    for (unsigned r = 0; r < 16; ++r) {
      for (unsigned n = 0; n < 8; ++n) {
        INFO((bf16 ? "bf16" : "f16") << ", D[" << r << "][" << n << "], schedule " << name(s));
        CHECK(d[r * 8 + n] == D[r][n]);  // exact: integers below 2^24
      }
    }
  }
}

TEST_CASE("ldmatrix x1, x2, x4, with and without .trans, hands each lane the PTX ISA's elements", "[simt]") {
  ControlsGuard guard;
  const unsigned matrices = GENERATE(1u, 2u, 4u);
  const bool trans = GENERATE(false, true);
  const auto tile = encoded_tile();
  const auto rows = scrambled_rows();
  const auto expected = expected_ldmatrix(matrices, trans, rows);
  for (const auto& s : all_schedules) {
    simt::set_schedule(s.schedule, s.seed);
    const auto r = cpu::ldmatrix_registers(static_cast<int>(matrices), trans, tile, rows);
    REQUIRE(r.size() == expected.size());
    for (unsigned lane = 0; lane < 32; ++lane) {
      for (unsigned i = 0; i < matrices; ++i) {
        INFO("x" << matrices << (trans ? ".trans" : "") << ", lane " << lane << ", r[" << i << "] = " << std::hex
                 << r[lane * matrices + i] << ", expected " << expected[lane * matrices + i] << std::dec
                 << " (row << 8 | column, low half first), schedule " << name(s));
        CHECK(r[lane * matrices + i] == expected[lane * matrices + i]);
      }
    }
  }
}

TEST_CASE("ldmatrix: lanes 0, 5 and 31 with row l at lane l, read straight off the PTX figure", "[simt]") {
  std::vector<int> identity(32);
  for (int l = 0; l < 32; ++l) identity[l] = l;
  const auto tile = encoded_tile();
  const auto plain = cpu::ldmatrix_registers(1, false, tile, identity);
  CHECK(plain[0] == 0x00010000u);   // row 0, columns 0 (bits 0-15) and 1
  CHECK(plain[5] == 0x01030102u);   // row 1, columns 2 and 3
  CHECK(plain[31] == 0x07070706u);  // row 7, columns 6 and 7
  const auto trans = cpu::ldmatrix_registers(1, true, tile, identity);
  CHECK(trans[0] == 0x01000000u);   // column 0, rows 0 (bits 0-15) and 1
  CHECK(trans[5] == 0x03010201u);   // column 1, rows 2 and 3
  CHECK(trans[31] == 0x07070607u);  // column 7, rows 6 and 7
  const auto four = cpu::ldmatrix_registers(4, false, tile, identity);
  CHECK(four[4 * 0 + 3] == 0x18011800u);  // matrix 3 is tile rows 24..31: row 24 (0x18), columns 0, 1
}

TEST_CASE("pack_bf16x2 and pack_f16x2 put lo in bits 0-15 and hi in bits 16-31", "[simt]") {
  CHECK(simt::pack_bf16x2(1.0f, -2.0f) == 0xc0003f80u);
  CHECK(simt::pack_f16x2(1.0f, -2.0f) == 0xc0003c00u);
  const std::vector<float> in{1.0f, -2.0f, 0.5f};
  const auto k = cpu::conversions(in);  // the same in a kernel
  CHECK(k.bf16x2[0] == 0xc0003f80u);
  CHECK(k.f16x2[0] == 0xc0003c00u);
  CHECK(k.bf16x2[2] == 0x3f803f00u);  // (0.5, 1.0): wraps around to in[0]
}

TEST_CASE("bf16 and f16 round to nearest even, keep NaN, overflow to inf, keep f16 subnormals", "[simt]") {
  std::vector<float> in;
  for (const auto& c : rounding_cases) in.push_back(std::bit_cast<float>(c.float_bits));
  const auto k = cpu::conversions(in);
  for (std::size_t i = 0; i < rounding_cases.size(); ++i) {
    const RoundingCase& c = rounding_cases[i];
    INFO(c.what << std::hex << ": float 0x" << c.float_bits << " gave bf16 0x" << k.bf16_bits[i] << ", f16 0x"
                << k.f16_bits[i]);
    // One type: a NaN expected must come out a NaN (any of them), anything else bit for bit, and back
    // to float exactly.
    const auto check = [&](std::uint16_t expected, std::uint16_t got, bool got_nan, float back, float exact_back) {
      if (expected == nan16) {
        CHECK(got_nan);
        CHECK(std::isnan(back));
      } else {
        CHECK(got == expected);
        CHECK(std::bit_cast<std::uint32_t>(back) == std::bit_cast<std::uint32_t>(exact_back));
      }
    };
    check(c.bf16, k.bf16_bits[i], is_nan16_bf16(k.bf16_bits[i]), k.bf16_back[i], bf16_value(c.bf16));
    check(c.f16, k.f16_bits[i], is_nan16_f16(k.f16_bits[i]), k.f16_back[i], f16_value(c.f16));
  }
}

TEST_CASE("every f16 and every bf16 converts to float and back to itself", "[simt]") {
  // Exactness of the way back: every 2-byte value is a float, so float(x) rounds to x again.
  for (std::uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const auto b = static_cast<std::uint16_t>(bits);
    const float fb = bf16_value(b), fh = f16_value(b);
    if (!is_nan16_bf16(b)) {
      simt::bf16 x = fb;
      INFO(std::hex << "bf16 0x" << bits);
      CHECK(simt::pack_bf16x2(static_cast<float>(x), 0.0f) == bits);
    }
    if (!is_nan16_f16(b)) {
      simt::f16 x = fh;
      INFO(std::hex << "f16 0x" << bits);
      CHECK(simt::pack_f16x2(static_cast<float>(x), 0.0f) == bits);
    }
  }
}

TEST_CASE("cp.async lands in shared memory only at cp_async_wait_group, and zero-fills", "[simt]") {
  ControlsGuard guard;
  const unsigned threads = 64;
  const auto src = words(4 * threads, 0x10203040u);
  for_each_schedule([&] {
    const auto run = cpu::async_copy(src, threads, true);
    // Before the wait the slot still holds what the block started with (0xff bytes).
    for (std::uint32_t w : run.before_wait) CHECK(w == 0xffffffffu);
    CHECK(run.after_wait == src);
    for (unsigned t = 0; t < threads; ++t) {
      for (unsigned i = 0; i < 4; ++i) CHECK(run.neighbour[4 * t + i] == src[4 * ((t + 1) % threads) + i]);
    }
    const auto zero = cpu::async_copy(src, threads, false);
    for (std::uint32_t w : zero.after_wait) CHECK(w == 0u);
    for (std::uint32_t w : zero.neighbour) CHECK(w == 0u);
  });
}

TEST_CASE("cp_async_wait_group<1> completes all groups but the newest", "[simt]") {
  ControlsGuard guard;
  const unsigned threads = 32;
  const auto src = words(8 * threads, 0x01000000u);
  for_each_schedule([&] {
    const auto run = cpu::async_copy_two_groups(src, threads);
    for (unsigned t = 0; t < threads; ++t) {
      for (unsigned i = 0; i < 4; ++i) {
        CHECK(run.first_after_wait1[4 * t + i] == src[8 * t + i]);
        CHECK(run.second_after_wait1[4 * t + i] == 0xffffffffu);  // group 1 still in flight
        CHECK(run.second_after_wait0[4 * t + i] == src[8 * t + 4 + i]);
      }
    }
  });
}

// On a GPU this kernel races; on the CPU the copies are still in flight at the read, under every
// schedule and under ThreadSanitizer too (they land when the block ends, after every read).
TEST_CASE("a __syncthreads() without cp_async_wait_group reads the old contents", "[simt]") {
  ControlsGuard guard;
  const unsigned threads = 64;
  const auto src = words(4 * threads, 0x0a0b0c0du);
  for_each_schedule([&] {
    for (std::uint32_t w : cpu::async_copy_barrier_only(src, threads)) CHECK(w == 0xffffffffu);
  });
}

TEST_CASE("mma called at two places by the two halves of a warp is reported with each lane's place", "[simt]") {
  const auto message = launch_error<cpu::mma_two_places_kernel>(64);
  check_mentions(message, {"mma_two_places_kernel", "block (0, 0, 0)",
                           "the lanes of warp 0 wait at different warp-collective instructions",
                           "lanes 0-15 at mma_m16n8k16_bf16 (tests/simt_tensor_core_kernels.cuh:",
                           "lanes 16-31 at mma_m16n8k16_bf16 (tests/simt_tensor_core_kernels.cuh:"});
}

TEST_CASE("mma that half a warp skips for a barrier is reported, not a hang", "[simt]") {
  const auto message = launch_error<cpu::mma_and_barrier_kernel>(32);
  check_mentions(message, {"16 of the 32 lanes of warp 0 wait at a warp-collective instruction",
                           "lanes 0-15 at mma_m16n8k16_f16", "lanes 16-31 at __syncthreads()"});
}

TEST_CASE("mma after some lanes have returned is reported", "[simt]") {
  const auto message = launch_error<cpu::mma_after_return_kernel>(32);
  check_mentions(message, {"24 of the 32 lanes of warp 0", "lanes 24-31 exited (returned from the kernel)"});
}

TEST_CASE("mma in a block that is not whole warps is an error, not a hang", "[simt]") {
  const auto message = launch_error<cpu::mma_any_block_kernel>(48);
  check_mentions(message, {"in a block of 48 threads", "must be a multiple of 32"});
}

TEST_CASE("ldmatrix row addresses outside shared memory or misaligned are reported with lane and address", "[simt]") {
  ControlsGuard guard;
  simt::DeviceBuffer<std::uint16_t> global(64);
  simt::DeviceBuffer<std::uint32_t> out(32);
  const auto outside = runtime_error_of([&] {
    simt::launch<cpu::ldmatrix_bad_address_kernel>(dim3(1), dim3(32), 0, global.data(), 3u, false, out.data());
  });
  check_mentions(outside, {"ldmatrix_x4 (tests/simt_tensor_core_kernels.cuh:", "lane 3 of warp 0 gives row address 0x",
                           "which is not 16 bytes of this block's shared memory"});

  // A row of the static __shared__ tile, 4 bytes on: shared memory, but not 16-byte aligned.
  const auto misaligned = runtime_error_of([&] {
    simt::launch<cpu::ldmatrix_bad_address_kernel>(dim3(1), dim3(32), 0, global.data(), 5u, true, out.data());
  });
  check_mentions(misaligned, {"lane 5 of warp 0 gives row address 0x", "which is not 16-byte aligned"});
}

TEST_CASE("ldmatrix x4 and x4.trans called by the two halves of a warp is reported", "[simt]") {
  ControlsGuard guard;
  simt::DeviceBuffer<std::uint32_t> out(32);
  const auto message =
      runtime_error_of([&] { simt::launch<cpu::ldmatrix_mixed_kernel>(dim3(1), dim3(32), 0, out.data()); });
  check_mentions(message, {"lanes 0-15 at ldmatrix_x4 (", "lanes 16-31 at ldmatrix_x4_trans ("});
}

TEST_CASE("cp_async_16 with a destination outside shared memory, past its end, or misaligned is reported", "[simt]") {
  ControlsGuard guard;
  simt::DeviceBuffer<std::uint32_t> global(32 * 4 + 4), src(32 * 4 + 4);
  const auto launch = [&](int mode) {
    return runtime_error_of([&] {
      simt::launch<cpu::cp_async_bad_kernel>(dim3(1), dim3(32), mode == 3 ? 24 : 0, global.data(), src.data(), mode);
    });
  };
  const auto not_shared = launch(0);
  check_mentions(not_shared,
                 {"cp_async_16 (tests/simt_tensor_core_kernels.cuh:", "lane 0 of warp 0 gives shared destination 0x",
                  "which is not 16 bytes of this block's shared memory"});
  const auto source = launch(1);
  check_mentions(source, {"gives global source 0x", "which is not 16-byte aligned"});
  const auto destination = launch(2);
  check_mentions(destination, {"gives shared destination 0x", "which is not 16-byte aligned"});
  const auto past_the_end = launch(3);
  check_mentions(past_the_end, {"which is not 16 bytes of this block's shared memory", " + 24 bytes"});
}

TEST_CASE("__syncwarp with a partial mask is an error on the CPU", "[simt]") {
  ControlsGuard guard;
  const auto message = runtime_error_of([&] { simt::launch<cpu::syncwarp_half_mask_kernel>(dim3(1), dim3(32), 0); });
  check_mentions(message, {"__syncwarp", "use the full mask 0xffffffff"});
}

TEST_CASE("the tensor-core instructions outside a kernel are errors", "[simt]") {
  std::uint32_t a[4] = {}, b[2] = {}, r[4];
  float c[4] = {}, d[4];
  CHECK_THROWS_AS(simt::mma_m16n8k16_bf16(d, a, b, c), std::logic_error);
  CHECK_THROWS_AS(simt::ldmatrix_x4(r, a), std::logic_error);
  CHECK_THROWS_AS(simt::cp_async_commit_group(), std::logic_error);
  CHECK_THROWS_AS(__syncwarp(), std::logic_error);
}

TEST_CASE("CUDA's conversion intrinsics round as simt::bf16 and simt::f16 do", "[simt]") {
  for (const auto& c : rounding_cases) {
    const float x = std::bit_cast<float>(c.float_bits);
    INFO(c.what);
    if (c.bf16 != nan16) {
      CHECK(__bfloat162float(__float2bfloat16(x)) == bf16_value(c.bf16));
      CHECK(__bfloat162float(__float2bfloat16_rn(x)) == bf16_value(c.bf16));
    }
    if (c.f16 != nan16) {
      CHECK(__half2float(__float2half(x)) == f16_value(c.f16));
      CHECK(__half2float(__float2half_rn(x)) == f16_value(c.f16));
    }
  }
}
