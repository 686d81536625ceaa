// common/simt's Hopper instructions on the CPU (hopper.h): wgmma reads every layout and swizzle of
// the PTX ISA's figures (simt_hopper_reference.h) and multiplies exactly, TMA places each 16-byte
// chunk where a wgmma descriptor of the same swizzle reads it back, mbarrier phases and named
// barriers order a producer and its consumers, under every schedule; and every misuse is reported
// with the kernel, the block, the warpgroup and the line, never as a hang.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "catch.h"
#include "simt_hopper_kernels.cuh"
#include "simt_hopper_problems.h"
#include "simt_test_support.h"

namespace {

using namespace simt_hopper_test;
using namespace simt_test;  // ControlsGuard, for_each_schedule, runtime_error_of, check_mentions
using simt::Major;
using simt::Swizzle;

constexpr Swizzle all_swizzles[] = {Swizzle::none, Swizzle::b32, Swizzle::b64, Swizzle::b128};

// D from the kernel equals the plain loop's, element for element: every value of these problems
// is a small integer or a power of two times one, so both sums are exact (no tolerance).
void check_d(const std::vector<float>& registers, const std::vector<float>& expected, unsigned n,
             const std::string& what) {
  const std::vector<float> D = d_matrix(registers, n);
  unsigned wrong = 0;
  for (unsigned i = 0; i < D.size() && wrong < 5; ++i) {
    if (D[i] == expected[i]) continue;
    ++wrong;
    INFO(what << ": D[" << i / n << "][" << i % n << "] = " << D[i] << ", expected " << expected[i]);
    CHECK(D[i] == expected[i]);
  }
  CHECK(wrong == 0);
}

}  // namespace

TEST_CASE("wgmma's figures, read by hand: a few threads' registers", "[simt]") {
  // "WGMMA .m64nNk16 register fragment layout for accumulator matrix D": row 0 is held by threads
  // 0-3 of warp 0, two columns each (T0: d0, d1 = D[0][0], D[0][1]); row 8 by the same threads in
  // d2, d3; columns 8-15 in d4..d7; warp 1 starts at row 16.
  CHECK((d_slot(0, 1).thread == 0 && d_slot(0, 1).reg == 1));
  CHECK((d_slot(8, 0).thread == 0 && d_slot(8, 0).reg == 2));
  CHECK((d_slot(0, 9).thread == 0 && d_slot(0, 9).reg == 5));
  CHECK((d_slot(17, 6).thread == 32 + 4 + 3 && d_slot(17, 6).reg == 0));
  CHECK((d_slot(63, 255).thread == 127 && d_slot(63, 255).reg == 127));
  // "... for matrix A": as mma.m16n8k16's A per warp; lane 5 of warp 2 holds A[33][10], A[33][11]
  // in a[2] (row groupID 1, columns 8 + 2 threadID_in_group), the second in bits 16-31.
  CHECK((a_slot(33, 10).thread == 64 + 5 && a_slot(33, 10).reg == 2 && a_slot(33, 11).high == 1));
  // The swizzle figures: 128B moves chunk 1 of row 3 to chunk 2; 64B leaves rows 0-1 alone and
  // moves chunk 0 of row 7 to chunk 3; 32B moves chunk 0 of row 4 to chunk 1.
  CHECK(figure_chunk(Swizzle::b128, 3, 1) == 2);
  CHECK(figure_chunk(Swizzle::b64, 1, 2) == 2);
  CHECK(figure_chunk(Swizzle::b64, 7, 0) == 3);
  CHECK(figure_chunk(Swizzle::b32, 4, 0) == 1);
}

TEST_CASE("the wgmma descriptor holds the PTX ISA's fields and gives them back", "[simt]") {
  const std::uint64_t d = simt::wgmma_descriptor(0x12340, Swizzle::b128, 0x40, 0x400);
  CHECK((d & 0x3fff) == 0x1234);        // bits 0-13: start address >> 4
  CHECK(((d >> 16) & 0x3fff) == 0x4);   // bits 16-29: leading byte offset >> 4
  CHECK(((d >> 32) & 0x3fff) == 0x40);  // bits 32-45: stride byte offset >> 4
  CHECK((d >> 62) == 1);                // 128B swizzle is 1; 64B 2; 32B 3; none 0
  CHECK((simt::wgmma_descriptor(0, Swizzle::b64, 0, 0) >> 62) == 2);
  CHECK((simt::wgmma_descriptor(0, Swizzle::b32, 0, 0) >> 62) == 3);
  CHECK(((simt::wgmma_descriptor(0, Swizzle::none, 0, 0, 5) >> 49) & 7) == 5);  // bits 49-51: base offset
  const auto f = simt::decode_wgmma_descriptor(simt::wgmma_descriptor(0x3fff0, Swizzle::b32, 0x120, 0x2000, 3));
  CHECK(f.start_address == 0x3fff0);
  CHECK(f.leading_byte_offset == 0x120);
  CHECK(f.stride_byte_offset == 0x2000);
  CHECK(f.base_offset == 3);
  CHECK(f.swizzle == Swizzle::b32);
  // The swizzle of an address: bits 4-6 XOR bits 7-9 for 128B.
  CHECK(simt::swizzled_address(0x0380 + 0x10, Swizzle::b128) == 0x0380 + 0x60);
  CHECK(simt::swizzled_address(0x0110, Swizzle::b64) == 0x0130);  // 64-byte row 4 of its atom: chunk 1 to 1 XOR 2
  CHECK(simt::swizzled_address(0x0090, Swizzle::none) == 0x0090);
}

TEST_CASE("wgmma from shared memory reads every layout and swizzle the figures draw", "[simt]") {
  ControlsGuard guard;
  const Swizzle swizzle = GENERATE(Swizzle::none, Swizzle::b32, Swizzle::b64, Swizzle::b128);
  const Major major_a = GENERATE(Major::k, Major::mn);
  const Major major_b = GENERATE(Major::k, Major::mn);
  const unsigned n = GENERATE(64u, 128u, 256u);
  const bool bf16 = GENERATE(true, false);
  LayoutCase c{swizzle, major_a, major_b};
  std::uint32_t seed = 7;
  for (Content content : {Content::a_shows, Content::b_shows, Content::product}) {
    const Matrices m = make_matrices(content, n, 16, seed++);
    const WgmmaProblemImage p = make_image(c, m, bf16, true);
    const auto expected = product(m, true);
    for_each_schedule([&] {
      check_d(cpu::wgmma(p), expected, n,
              describe(c) + ", n " + std::to_string(n) + (bf16 ? ", bf16, " : ", f16, ") + to_string(content));
    });
  }
}

TEST_CASE("wgmma with A from registers, the A fragment of the figures", "[simt]") {
  ControlsGuard guard;
  const Swizzle swizzle = GENERATE(Swizzle::none, Swizzle::b128);
  const Major major_b = GENERATE(Major::k, Major::mn);
  const unsigned n = GENERATE(64u, 256u);
  const bool bf16 = GENERATE(true, false);
  LayoutCase c{swizzle, Major::k, major_b, true};
  for (Content content : {Content::a_shows, Content::product}) {
    const Matrices m = make_matrices(content, n, 16, 11);
    const WgmmaProblemImage p = make_image(c, m, bf16, true);
    const auto expected = product(m, true);
    for_each_schedule([&] { check_d(cpu::wgmma(p), expected, n, describe(c) + ", " + to_string(content)); });
  }
}

TEST_CASE("wgmma: scale-d false ignores C, and K-major descriptors moved along k read the next 16", "[simt]") {
  ControlsGuard guard;
  const Matrices m = make_matrices(Content::product, 128, 16, 3);
  const auto without_c = product(m, false);
  for (Swizzle swizzle : all_swizzles) {
    LayoutCase c{swizzle, Major::k, Major::mn};
    check_d(cpu::wgmma(make_image(c, m, true, false)), without_c, 128, describe(c) + ", scale-d false");
  }
  // The last 16 k of a 64B and a 128B row, and the middle of a 128B one: the descriptor's start
  // moves 2 k_first bytes, and the swizzle (on the address) still finds every chunk.
  const auto with_c = product(m, true);
  for (const auto& [swizzle, k_first] :
       std::vector<std::pair<Swizzle, unsigned>>{{Swizzle::b64, 16}, {Swizzle::b128, 48}, {Swizzle::b128, 16}}) {
    LayoutCase c{swizzle, Major::k, Major::k};
    c.k_first = k_first;
    for_each_schedule([&] { check_d(cpu::wgmma(make_image(c, m, false, true)), with_c, 128, describe(c)); });
  }
  // No swizzle, core matrices ordered by k first (another LBO and SBO for the same elements).
  LayoutCase c{Swizzle::none, Major::k, Major::k};
  c.alternative = true;
  check_d(cpu::wgmma(make_image(c, m, true, true)), with_c, 128, describe(c));
}

// ---- FP8 wgmma (.m64nNk32) ----------------------------------------------------------------------

namespace {

using simt::Fp8Accumulation;

const char* to_string(Fp8Types t) {
  const char* names[] = {"none", "e4m3", "e5m2", "e4m3 x e5m2", "e5m2 x e4m3"};  // in the enum's order
  return names[static_cast<unsigned>(t)];
}

// The types that run at n: all four at 64 and 256, e4m3 at every n (simt_hopper_kernels.cuh).
std::vector<Fp8Types> fp8_types_at(unsigned n) {
  if (n != 64 && n != 256) return {Fp8Types::e4m3};
  return {Fp8Types::e4m3, Fp8Types::e5m2, Fp8Types::e4m3_e5m2, Fp8Types::e5m2_e4m3};
}

// The accumulation of FP8 wgmma for one test, and the default (exact) back after it.
class Fp8AccumulationGuard {
 public:
  explicit Fp8AccumulationGuard(Fp8Accumulation mode) { simt::set_fp8_accumulation(mode); }
  ~Fp8AccumulationGuard() { simt::set_fp8_accumulation(Fp8Accumulation::exact); }
  Fp8AccumulationGuard(const Fp8AccumulationGuard&) = delete;
  Fp8AccumulationGuard& operator=(const Fp8AccumulationGuard&) = delete;
};

// The plain loop under truncated14's assumption (hopper.h): each product's bits below 2^(E - 13)
// cut off toward zero, E the largest product's exponent, then the sum and C. In double, which
// holds every product, cut product and sum of make_fp8_matrices exactly.
std::vector<float> product_truncated14(const Matrices& m, bool with_c) {
  std::vector<float> D(64 * m.n);
  for (unsigned r = 0; r < 64; ++r) {
    for (unsigned c = 0; c < m.n; ++c) {
      double products[32], largest = 0.0;
      for (unsigned i = 0; i < 32; ++i) {
        products[i] = double(m.A[r * 32 + i]) * m.B[i * m.n + c];
        largest = std::max(largest, std::fabs(products[i]));
      }
      double sum = with_c ? m.C[r * m.n + c] : 0.0;
      const double unit = largest > 0.0 ? std::ldexp(1.0, std::ilogb(largest) - 13) : 1.0;
      for (double product : products) sum += std::trunc(product / unit) * unit;
      D[r * m.n + c] = static_cast<float>(sum);
    }
  }
  return D;
}

}  // namespace

TEST_CASE("FP8 wgmma's A fragment, read by hand from the figure", "[simt]") {
  // "WGMMA .m64nNk32 register fragment layout for matrix A": T0 holds A[0][0..3] in a[0] (the
  // lowest k in bits 0-7), A[8][0..3] in a[1], A[0][16..19] in a[2]; lane 5 of warp 2 holds
  // A[33][4..7] and A[41][20..23].
  CHECK((a_slot_fp8(0, 3).thread == 0 && a_slot_fp8(0, 3).reg == 0 && a_slot_fp8(0, 3).high == 3));
  CHECK((a_slot_fp8(8, 0).thread == 0 && a_slot_fp8(8, 0).reg == 1));
  CHECK((a_slot_fp8(0, 16).thread == 0 && a_slot_fp8(0, 16).reg == 2));
  CHECK((a_slot_fp8(33, 6).thread == 64 + 5 && a_slot_fp8(33, 6).reg == 0 && a_slot_fp8(33, 6).high == 2));
  CHECK((a_slot_fp8(41, 20).thread == 64 + 5 && a_slot_fp8(41, 20).reg == 3 && a_slot_fp8(41, 20).high == 0));
}

TEST_CASE("FP8 wgmma from shared memory: every swizzle, every N, each pair of types", "[simt]") {
  ControlsGuard guard;
  const Swizzle swizzle = GENERATE(Swizzle::none, Swizzle::b32, Swizzle::b64, Swizzle::b128);
  const unsigned n = GENERATE(8u, 16u, 32u, 64u, 96u, 128u, 192u, 256u);
  const LayoutCase c{swizzle, Major::k, Major::k};
  for (Fp8Types types : fp8_types_at(n)) {
    const Matrices m = make_fp8_matrices(types, n, 17 + n);
    const WgmmaProblemImage p = make_fp8_image(c, m, types, true);
    const std::string what = describe(c) + ", n " + std::to_string(n) + ", " + to_string(types);
    if (n == 64) {
      for_each_schedule([&] { check_d(cpu::wgmma(p), product(m, true), n, what); });
    } else {
      check_d(cpu::wgmma(p), product(m, true), n, what);
    }
  }
}

TEST_CASE("FP8 wgmma with A from registers, the k32 A fragment of the figure", "[simt]") {
  ControlsGuard guard;
  const Swizzle swizzle = GENERATE(Swizzle::none, Swizzle::b128);
  const unsigned n = GENERATE(8u, 64u, 256u);
  const LayoutCase c{swizzle, Major::k, Major::k, true};
  for (Fp8Types types : fp8_types_at(n)) {
    const Matrices m = make_fp8_matrices(types, n, 29 + n);
    check_d(cpu::wgmma(make_fp8_image(c, m, types, true)), product(m, true), n,
            describe(c) + ", n " + std::to_string(n) + ", " + to_string(types));
  }
}

TEST_CASE("FP8 wgmma: scale-d false ignores C, and K-major descriptors moved along k read the next 32", "[simt]") {
  ControlsGuard guard;
  const Matrices m = make_fp8_matrices(Fp8Types::e4m3, 128, 3);
  for (Swizzle swizzle : all_swizzles) {
    const LayoutCase c{swizzle, Major::k, Major::k};
    check_d(cpu::wgmma(make_fp8_image(c, m, Fp8Types::e4m3, false)), product(m, false), 128,
            describe(c) + ", scale-d false");
  }
  // A 64B row holds 64 codes of k, a 128B row 128: the descriptor moves k_first bytes.
  for (const auto& [swizzle, k_first] :
       std::vector<std::pair<Swizzle, unsigned>>{{Swizzle::b64, 32}, {Swizzle::b128, 96}, {Swizzle::b128, 32}}) {
    LayoutCase c{swizzle, Major::k, Major::k};
    c.k_first = k_first;
    check_d(cpu::wgmma(make_fp8_image(c, m, Fp8Types::e4m3, true)), product(m, true), 128, describe(c));
  }
  LayoutCase c{Swizzle::none, Major::k, Major::k};
  c.alternative = true;
  check_d(cpu::wgmma(make_fp8_image(c, m, Fp8Types::e4m3, true)), product(m, true), 128, describe(c));
}

TEST_CASE("FP8 accumulation: exact keeps what a large term's cancellation leaves, truncated14 drops it", "[simt]") {
  ControlsGuard guard;
  const LayoutCase c{Swizzle::b32, Major::k, Major::k};
  CHECK(simt::fp8_accumulation() == Fp8Accumulation::exact);  // the default
  for (float c0 : {0.0f, 1.0f}) {
    const Matrices m = make_fp8_cancellation(c0);
    const WgmmaProblemImage p = make_fp8_image(c, m, Fp8Types::e4m3, true);
    const std::vector<float> exact = d_matrix(cpu::wgmma(p), 8);
    CHECK(exact == product(m, true));  // the double loop: exact for these values
    CHECK(exact[0] == c0 + 0.46875f);  // 256 - 256 + 30 * 2^-6
    Fp8AccumulationGuard truncated(Fp8Accumulation::truncated14);
    CHECK(simt::fp8_accumulation() == Fp8Accumulation::truncated14);
    const std::vector<float> cut = d_matrix(cpu::wgmma(p), 8);
    CHECK(cut == std::vector<float>(64 * 8, c0));  // 2^-6 lies below 2^(8 - 13)
  }
  // Spread values: the switch changes many elements, each as the plain loop of the assumption says.
  const Matrices m = make_fp8_matrices(Fp8Types::e4m3, 64, 41);
  const WgmmaProblemImage p = make_fp8_image(c, m, Fp8Types::e4m3, true);
  const std::vector<float> exact = cpu::wgmma(p);
  check_d(exact, product(m, true), 64, "exact");
  Fp8AccumulationGuard truncated(Fp8Accumulation::truncated14);
  const std::vector<float> cut = cpu::wgmma(p);
  check_d(cut, product_truncated14(m, true), 64, "truncated14");
  CHECK(std::count(exact.begin(), exact.end(), 0.0f) < 64 * 64);
  unsigned changed = 0;
  for (unsigned i = 0; i < cut.size(); ++i) changed += cut[i] != exact[i] ? 1u : 0u;
  CHECK(changed > 64 * 64 / 4);
}

TEST_CASE("FP8 wgmma: a NaN code or an infinity gives NaN or an infinity, as IEEE arithmetic would", "[simt]") {
  ControlsGuard guard;
  Matrices m = make_fp8_matrices(Fp8Types::e5m2, 64, 9, false);
  m.A[3 * 32 + 5] = std::numeric_limits<float>::infinity();  // e5m2 has infinities
  m.B[7 * 64 + 10] = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> D = d_matrix(cpu::wgmma(make_fp8_image({}, m, Fp8Types::e5m2, true)), 64);
  CHECK(std::isnan(D[0 * 64 + 10]));  // row 0 meets B's NaN at column 10
  const float b = m.B[5 * 64 + 0];    // what A's infinity in row 3 meets in column 0
  CHECK((b == 0.0f ? std::isnan(D[3 * 64 + 0]) : D[3 * 64 + 0] == b * m.A[3 * 32 + 5]));  // inf * 0 is NaN
  CHECK(D[0] == product(m, true)[0]);  // elsewhere the sum is as it was
}

TEST_CASE("an FP8 wgmma with an N-major operand is an error naming the line", "[simt]") {
  ControlsGuard guard;
  WgmmaProblemImage p = make_fp8_image({}, make_fp8_matrices(Fp8Types::e4m3, 64, 1), Fp8Types::e4m3, true);
  p.major_b = Major::mn;
  check_mentions(runtime_error_of([&] { (void)cpu::wgmma(p); }),
                 {"wgmma_m64nNk32_e4m3 (tests/simt_hopper_kernels.cuh:", "operand B is N-major (Major::mn)",
                  "FP8 wgmma reads K-major operands only", "no transpose (imm-trans) for 8-bit types"});
}

TEST_CASE("TMA puts each 16-byte chunk where a wgmma descriptor of the same swizzle reads it back", "[simt]") {
  ControlsGuard guard;
  const Swizzle swizzle = GENERATE(Swizzle::none, Swizzle::b32, Swizzle::b64, Swizzle::b128);
  const Major major_b = GENERATE(Major::k, Major::mn);
  const unsigned n = GENERATE(64u, 128u);
  const bool bf16 = GENERATE(true, false);
  const TmaRoundTrip p = tma_round_trip(swizzle, major_b, n, bf16, 5);
  const std::vector<float>& expected = p.expected;
  for_each_schedule([&] {
    INFO("swizzle " << simt::swizzle_span(swizzle) << ", B " << (major_b == Major::k ? "K" : "N") << "-major, n " << n);
    const auto D = d_matrix(cpu::tma_wgmma(p), n);
    unsigned wrong = 0;
    for (unsigned i = 0; i < D.size(); ++i) wrong += D[i] != expected[i];
    CHECK(wrong == 0);  // exact: small integers
    CHECK(D[0 * n + 0] == expected[0]);
  });
}

TEST_CASE("TMA without a swizzle writes the box densely, and zeros outside the tensor", "[simt]") {
  // The same round trip read by hand: with A's box at rows 24.., row 56 of the box is global row
  // 80, outside: D's row 56 is zero whatever B is.
  ControlsGuard guard;
  const TmaRoundTrip p = tma_round_trip(Swizzle::none, Major::k, 64, true, 9);
  const std::vector<float>& expected = p.expected;
  const auto D = d_matrix(cpu::tma_wgmma(p), 64);
  for (unsigned j = 0; j < 64; ++j) CHECK(D[56 * 64 + j] == 0.0f);
  CHECK(D == expected);
}

TEST_CASE("a TMA load places every element where the swizzle figures say, zeros outside the tensor", "[simt]") {
  ControlsGuard guard;
  const Swizzle swizzle = GENERATE(Swizzle::none, Swizzle::b32, Swizzle::b64, Swizzle::b128);
  const int c0 = GENERATE(-8, 40, 96);  // left of the tensor, inside, past its right edge (104 columns)
  const std::uint32_t inner = swizzle == Swizzle::none ? 8 : simt::swizzle_span(swizzle) / 2;
  const TmaBox b = make_box(2, {104, 40, 1}, {inner, 16, 1}, {1, 1, 1}, swizzle, {c0, 30, 0});  // rows 40.. outside
  const auto expected = expected_load(b);
  for_each_schedule([&] {
    INFO("swizzle " << simt::swizzle_span(swizzle) << ", box at column " << c0);
    CHECK(cpu::tma_load(b) == expected);
  });
}

TEST_CASE("a 3D TMA load, and element strides that take every other row", "[simt]") {
  ControlsGuard guard;
  // 4 planes of 20 x 24: the box of 2 planes x 8 x 8 at (16, 16, 3) has half its rows and its second
  // plane outside.
  const TmaBox b3 = make_box(3, {24, 20, 4}, {8, 8, 2}, {1, 1, 1}, Swizzle::none, {16, 16, 3});
  const auto image3 = cpu::tma_load(b3);
  CHECK(image3 == expected_load(b3));
  std::uint16_t first;
  std::memcpy(&first, image3.data(), 2);
  CHECK(first == (3 * 20 + 16) * 24 + 16 + 1);  // element (16, 16, 3) of the tensor, which holds index + 1
  // Element strides {1, 2}: a box of 8 rows takes rows 0, 2, 4, 6 of it: 4 rows land.
  const TmaBox strided = make_box(2, {64, 32, 1}, {16, 8, 1}, {1, 2, 1}, Swizzle::none, {8, 4, 0});
  CHECK(strided.bytes == 16 * 4 * 2);
  CHECK(cpu::tma_load(strided) == expected_load(strided));
}

TEST_CASE("a TMA store reads the swizzled tile back into the tensor and writes nothing outside it", "[simt]") {
  ControlsGuard guard;
  const Swizzle swizzle = GENERATE(Swizzle::none, Swizzle::b64, Swizzle::b128);
  const std::uint32_t inner = swizzle == Swizzle::none ? 8 : simt::swizzle_span(swizzle) / 2;
  // Stored at (96, 30) of a tensor of 104 x 40: only columns 96..103, rows 30..39 receive the tile.
  const TmaStore p = tma_store_problem(2, {104, 40, 1}, {inner, 16, 1}, swizzle, {96, 30, 0});
  for_each_schedule([&] {
    INFO("swizzle " << simt::swizzle_span(swizzle));
    CHECK(cpu::tma_store(p.target, p.image) == p.expected);
  });
}

TEST_CASE("a 3D TMA store clips its box at the end of a plane: the next plane's rows stay", "[simt]") {
  // Chapter 10 stores O by heads: 3 heads of 20 rows x 64 columns. The box of 16 rows at row 12 of
  // head 1 holds rows 12..27; rows 20..27 lie past head 1's last row (in a 2D view of the same
  // memory they would be head 2's rows 0..7), so only rows 12..19 of head 1 are written.
  ControlsGuard guard;
  const Swizzle swizzle = GENERATE(Swizzle::none, Swizzle::b128);
  const TmaStore p =
      tma_store_problem(3, {64, 20, 3}, {swizzle == Swizzle::none ? 8u : 64u, 16, 1}, swizzle, {0, 12, 1});
  std::size_t written = 0;
  for (std::uint16_t e : p.expected) written += e != 0xffff;
  CHECK(written == 8 * (swizzle == Swizzle::none ? 8u : 64u));  // rows 12..19 of head 1 alone
  for_each_schedule([&] {
    INFO("swizzle " << simt::swizzle_span(swizzle));
    CHECK(cpu::tma_store(p.target, p.image) == p.expected);
  });
}

TEST_CASE("make_tensor_map checks the driver's rules", "[simt]") {
  std::vector<std::uint16_t> g(64 * 64);
  const auto message = [&](auto make) { return fa_test::message_of<std::invalid_argument>(make); };
  check_mentions(message([&] { simt::make_tensor_map_2d(g.data(), 64, 64, 64, 64, 8, Swizzle::b64); }),
                 {"must have an inner dimension of exactly that many bytes"});
  check_mentions(message([&] { simt::make_tensor_map_2d(g.data(), 64, 64, 60, 64, 8, Swizzle::b128); }),
                 {"must be a multiple of 16 below 2^40"});
  check_mentions(message([&] { simt::make_tensor_map_2d(g.data() + 1, 64, 64, 64, 8, 8, Swizzle::none); }),
                 {"16-byte aligned"});
  check_mentions(message([&] { simt::make_tensor_map_2d(g.data(), 64, 64, 64, 8, 300, Swizzle::none); }),
                 {"box[1] = 300 must be 1 .. 256"});
  check_mentions(message([&] { simt::make_tensor_map_2d(g.data(), 64, 64, 64, 4, 8, Swizzle::none); }),
                 {"must be a multiple of 16 bytes"});
  const simt::TensorMap ok = simt::make_tensor_map_2d(g.data(), 64, 64, 64, 64, 8, Swizzle::b128);
  CHECK(ok.shape.box[0] == 64);
  CHECK(ok.shape.strides[1] == 128);
}

TEST_CASE("chapter 10's pipeline without the softmax: O = (Q K^T) V through a TMA ring and two wgmma per tile",
          "[simt]") {
  ControlsGuard guard;
  const int stages = GENERATE(1, 2);
  const int tiles = 3;
  std::mt19937 rng(17);
  std::uniform_int_distribution<int> small(-2, 2);
  const auto draw = [&](std::size_t count, std::vector<float>& values) {
    std::vector<std::uint16_t> bits(count);
    values.resize(count);
    for (std::size_t i = 0; i < count; ++i) {
      values[i] = static_cast<float>(small(rng));
      bits[i] = bits_of(values[i], true);
    }
    return bits;
  };
  std::vector<float> q, k, v;
  const auto q_bits = draw(64 * 64, q), k_bits = draw(64 * 64 * tiles, k), v_bits = draw(64 * 64 * tiles, v);
  // The plain loops. S: |S| <= 64 * 4 = 256, an integer, exact in bf16; O: integers below 2^24.
  std::vector<float> O(64 * 64, 0.0f);
  for (int i = 0; i < 64; ++i) {
    for (int key = 0; key < 64 * tiles; ++key) {
      float S = 0.0f;
      for (int c = 0; c < 64; ++c) S += q[i * 64 + c] * k[key * 64 + c];
      for (int c = 0; c < 64; ++c) O[i * 64 + c] += S * v[key * 64 + c];
    }
  }
  for_each_schedule([&] {
    INFO("stages " << stages);
    CHECK(d_matrix(cpu::gemm_pipeline(q_bits, k_bits, v_bits, tiles, stages), 64) == O);  // exact, see above
  });
}

TEST_CASE("mbarrier phases: arrivals complete a phase, its parity flips, the other parity passes at once", "[simt]") {
  ControlsGuard guard;
  for_each_schedule([&] {
    const MbarrierRun run = cpu::mbarrier_phases();
    for (unsigned t = 0; t < 64; ++t) {
      CHECK(run.passed_at_once[t] == 1u);
      CHECK(run.seen[t] == 100 + (t + 1) % 64);       // phase 0: the neighbour wrote before arriving
      CHECK(run.seen[64 + t] == 200 + (t + 1) % 64);  // phase 1 likewise
    }
  });
}

TEST_CASE("a producer and a consumer warpgroup on a ring of full and empty mbarriers", "[simt]") {
  ControlsGuard guard;
  const int stages = GENERATE(1, 2, 4);
  const int items = 9;
  for_each_schedule([&] {
    const auto totals = cpu::producer_consumer(items, stages);
    for (unsigned j = 0; j < 128; ++j) {
      float expected = 0.0f;  // exact: integers below 2^24
      for (int i = 0; i < items; ++i) expected += static_cast<float>(i * 1000 + static_cast<int>(j));
      INFO("stages " << stages << ", consumer thread " << j);
      CHECK(totals[j] == expected);
    }
  });
}

TEST_CASE("two warpgroups take turns through named barriers (ping-pong)", "[simt]") {
  ControlsGuard guard;
  for_each_schedule([&] {
    const auto order = cpu::ping_pong(5);
    for (unsigned i = 0; i < order.size(); ++i) CHECK(order[i] == static_cast<int>(i % 2));
  });
}

TEST_CASE("two wgmma groups in flight: wait_group<1> completes the older, the newer stays pending", "[simt]") {
  ControlsGuard guard;
  const Matrices m = make_matrices(Content::product, 128, 16, 21);
  const WgmmaProblemImage p = make_image(LayoutCase{Swizzle::b128, Major::k, Major::k}, m, true, false);
  const auto expected = product(m, false);
  float pending;
  std::memcpy(&pending, &simt::wgmma_pending_bits, sizeof pending);
  const auto is_pending = [&](float x) { return std::memcmp(&x, &pending, sizeof x) == 0; };
  for_each_schedule([&] {
    simt::DeviceBuffer<std::uint32_t> image(p.image);
    simt::DeviceBuffer<float> early(128 * 64), mid0(128 * 64), mid1(128 * 64), final1(128 * 64);
    simt::launch<cpu::wgmma_groups_kernel>(dim3(1), dim3(128), p.image.size() * 4, image.data(),
                                           static_cast<unsigned>(p.image.size()), p.a, p.b, early.data(), mid0.data(),
                                           mid1.data(), final1.data());
    unsigned early_pending = 0, mid1_pending = 0;
    for (float x : early.to_host()) early_pending += is_pending(x);
    for (float x : mid1.to_host()) mid1_pending += is_pending(x);
    CHECK(early_pending == 128 * 64);  // before any wait, every register of acc0 holds the pending NaN
    CHECK(mid1_pending == 128 * 64);   // group 1 is still in flight after wait_group<1>
    CHECK(d_matrix(mid0.to_host(), 128) == expected);
    CHECK(d_matrix(final1.to_host(), 128) == expected);
  });
}

namespace {

std::string wgmma_misuse(int mode, unsigned threads = 128) {
  ControlsGuard guard;
  simt::DeviceBuffer<float> out(threads);
  return runtime_error_of(
      [&] { simt::launch<cpu::wgmma_misuse_kernel>(dim3(1), dim3(threads), 4096, mode, out.data()); });
}

std::string barrier_misuse(int mode) {
  ControlsGuard guard;
  std::vector<std::uint16_t> host(64, 1);
  simt::DeviceBuffer<std::uint16_t> global(host);
  simt::DeviceBuffer<float> out(128);
  const simt::TensorMap map = simt::make_tensor_map_2d(global.data(), 8, 8, 8, 8, 8, Swizzle::none);
  return runtime_error_of(
      [&] { simt::launch<cpu::barrier_misuse_kernel>(dim3(1), dim3(128), 1024, mode, map, out.data()); });
}

}  // namespace

TEST_CASE("wgmma without wgmma_fence is reported", "[simt]") {
  check_mentions(wgmma_misuse(0), {"wgmma_misuse_kernel", "block (0, 0, 0)",
                                   "wgmma_m64nNk16_bf16 (tests/simt_hopper_kernels.cuh:", "warpgroup 0)",
                                   "has not executed wgmma_fence since the kernel began"});
}

TEST_CASE("an accumulator written between its wgmma and the wait is reported at the wait", "[simt]") {
  check_mentions(wgmma_misuse(1), {"wgmma_wait_group<0> (tests/simt_hopper_kernels.cuh:", "finds d[3] of the wgmma at",
                                   "overwritten", "only after the wgmma_wait_group that covers its group"});
}

TEST_CASE("a wgmma never waited for is reported when the block finishes", "[simt]") {
  check_mentions(wgmma_misuse(2), {"finished the kernel with the result of the wgmma at tests/simt_hopper_kernels.cuh:",
                                   "no wgmma_wait_group covered its group"});
}

TEST_CASE("a wgmma that half the warpgroup skips is reported with each thread's place, not a hang", "[simt]") {
  check_mentions(wgmma_misuse(3),
                 {"64 of the 128 threads of warpgroup 0 (warps 0-3)",
                  "threads 0-63 at wgmma_m64nNk16_bf16 (tests/simt_hopper_kernels.cuh:", "threads 64-127 exited"});
}

TEST_CASE("wgmma descriptors outside dynamic shared memory or misaligned for their swizzle are reported", "[simt]") {
  check_mentions(wgmma_misuse(4), {"gives pointer 0x", "which is not in this block's dynamic shared memory",
                                   "must lie in dynamic shared memory"});
  check_mentions(wgmma_misuse(5),
                 {"the descriptor of A", "swizzle 128B", "is not aligned for its swizzle", "start % 1024 < 128"});
  check_mentions(wgmma_misuse(6), {"thread 77 (warp 2, warpgroup 0) gives another descriptor of A"});
}

TEST_CASE("wgmma in a block whose warpgroup is not whole is an error", "[simt]") {
  check_mentions(wgmma_misuse(0, 96), {"in warpgroup 0 of a block of 96 threads", "only 3 warps"});
}

TEST_CASE("a wait on a phase that never completes is reported, not a hang", "[simt]") {
  check_mentions(barrier_misuse(0), {"barrier_misuse_kernel", "a wait that can never end",
                                     "mbarrier_try_wait_parity (tests/simt_hopper_kernels.cuh:",
                                     "still waits for 1 of 2 arrivals and 0 transaction bytes"});
  check_mentions(barrier_misuse(1), {"a wait that can never end", "0 of 1 arrivals and 128 transaction bytes"});
  check_mentions(barrier_misuse(2), {"which mbarrier_init has not initialised"});
  check_mentions(barrier_misuse(3),
                 {"named_barrier_sync (tests/simt_hopper_kernels.cuh:", "gives named barrier 3 the count",
                  "every thread of one use of a barrier must give the same count"});
  check_mentions(barrier_misuse(4), {"named barrier 4 has 64 of the 128 threads it waits for"});
  check_mentions(barrier_misuse(5), {"mbarrier_arrive_expect_tx (tests/simt_hopper_kernels.cuh:",
                                     "already has all 1 of its arrivals and waits for 128 transaction bytes only"});
}

TEST_CASE("the Hopper instructions outside a kernel are errors", "[simt]") {
  std::uint64_t bar = 0;
  float d[32] = {};
  CHECK_THROWS_AS(simt::mbarrier_init(&bar, 1), std::logic_error);
  CHECK_THROWS_AS(simt::wgmma_fence(), std::logic_error);
  CHECK_THROWS_AS((simt::wgmma_m64nNk16_bf16<64>(d, 0, 0, true)), std::logic_error);
  CHECK_THROWS_AS(simt::named_barrier_sync(1, 32), std::logic_error);
}
