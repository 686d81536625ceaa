// What the PTX ISA says each lane holds, written from its figures, for the tensor-core tests on the
// CPU (simt_tensor_core_test.cpp) and on a GPU (simt_tensor_core_gpu_test.cpp).
//
// The emulation (common/simt/instructions/detail/tensor_core_cpu.cpp) goes from a lane and a register to a row and a
// column, by the formulas of the PTX ISA's text. These tables go the other way, from a matrix
// element to the lane and register that hold it, as one reads the figures:
//   "MMA .m16n8k16 fragment layout for matrix A with .f16/.bf16 type": row r of A is held by the
//     four lanes 4 (r % 8) .. 4 (r % 8) + 3, two columns each; rows 0-7 in a0, a1 (columns 0-7)
//     and a4, a5 (columns 8-15), rows 8-15 in a2, a3 and a6, a7;
//   "... for matrix B": column n of B is held by lanes 4n .. 4n + 3, two rows (k) each; rows 0-7
//     in b0, b1, rows 8-15 in b2, b3;
//   "... for accumulator matrix C/D": like A's first eight columns: row r by lanes 4 (r % 8) ..,
//     c0, c1 for rows 0-7, c2, c3 for rows 8-15;
//   "ldmatrix fragment layout": row j of each 8x8 matrix by lanes 4j .. 4j + 3, two elements each;
//     with .trans the same picture read down the columns.
// Element e of the figures sits in register e / 2, bits 0-15 for even e.
#pragma once

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "catch.h"

namespace simt_tensor_test {

// Where a matrix element lives: lane, register, and which half of the register.
struct Slot {
  unsigned lane, reg, high;
};

inline Slot a_slot(unsigned row, unsigned col) {  // A: 16 x 16
  const unsigned element = (col % 2) + 2 * (row >= 8 ? 1 : 0) + 4 * (col >= 8 ? 1 : 0);
  return {4 * (row % 8) + (col % 8) / 2, element / 2, element % 2};
}
inline Slot b_slot(unsigned k, unsigned n) {  // B: 16 x 8
  const unsigned element = (k % 2) + 2 * (k >= 8 ? 1 : 0);
  return {4 * n + (k % 8) / 2, element / 2, element % 2};
}
inline Slot c_slot(unsigned row, unsigned col) {  // C and D: 16 x 8, one float per "register"
  return {4 * (row % 8) + col / 2, (col % 2) + 2 * (row >= 8 ? 1 : 0), 0};
}

inline void put_half(std::vector<std::uint32_t>& regs, unsigned regs_per_lane, Slot s, std::uint16_t bits) {
  std::uint32_t& r = regs[s.lane * regs_per_lane + s.reg];
  r = s.high != 0 ? (r & 0x0000ffffu) | (std::uint32_t{bits} << 16) : (r & 0xffff0000u) | bits;
}

// One mma problem per warp: small integers, so that every product and sum is exact in float.
struct MmaProblem {
  std::array<std::array<float, 16>, 16> A;
  std::array<std::array<float, 8>, 16> B;  // B[k][n]
  std::array<std::array<float, 8>, 16> C;
  std::array<std::array<float, 8>, 16> D() const {  // the exact A B + C (integers below 2^24)
    std::array<std::array<float, 8>, 16> d{};
    for (unsigned i = 0; i < 16; ++i) {
      for (unsigned j = 0; j < 8; ++j) {
        long long sum = static_cast<long long>(C[i][j]);
        for (unsigned k = 0; k < 16; ++k) sum += static_cast<long long>(A[i][k]) * static_cast<long long>(B[k][j]);
        d[i][j] = static_cast<float>(sum);
      }
    }
    return d;
  }
};

// Entries in -4..4 (A, B) and -50..50 (C): all exact in bf16 and f16, and every entry of a problem
// differs from its neighbours, so that an element in the wrong place changes the product.
inline MmaProblem mma_problem(unsigned variant) {
  MmaProblem p{};
  for (unsigned i = 0; i < 16; ++i) {
    for (unsigned k = 0; k < 16; ++k)
      p.A[i][k] = static_cast<float>(static_cast<int>((i * 7 + k * 3 + variant) % 9) - 4);
  }
  for (unsigned k = 0; k < 16; ++k) {
    for (unsigned j = 0; j < 8; ++j)
      p.B[k][j] = static_cast<float>(static_cast<int>((k * 5 + j * 11 + 2 * variant) % 9) - 4);
  }
  for (unsigned i = 0; i < 16; ++i) {
    for (unsigned j = 0; j < 8; ++j)
      p.C[i][j] = static_cast<float>(static_cast<int>((i * 13 + j * 29 + variant) % 101) - 50);
  }
  return p;
}

// The 2-byte encodings of small integers, written out (so that the tables do not use simt's
// conversions): bf16 is the top half of the float; f16 of an integer |v| <= 16 is sign, exponent
// 15 + e, 10 fraction bits.
inline std::uint16_t bf16_of_small_integer(float v) {
  return static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(v) >>
                                    16);  // exact for integers of up to 8 significant bits
}
inline std::uint16_t f16_of_small_integer(float v) {
  if (v == 0.0f) return 0;
  const std::uint16_t sign = v < 0 ? 0x8000 : 0;
  unsigned m = static_cast<unsigned>(v < 0 ? -v : v);
  unsigned e = 0;
  while ((m >> e) > 1) ++e;  // m = 1.f * 2^e
  const unsigned fraction = (m - (1u << e)) << (10 - e);
  return static_cast<std::uint16_t>(sign | ((15 + e) << 10) | fraction);
}

// A problem as a kernel finds it in memory: A (16x16) and B ([k][n], 16x8) as 2-byte bits, C
// (16x8) as floats, all row-major.
struct RowMajorProblem {
  std::vector<std::uint16_t> A, B;
  std::vector<float> C;
};
inline RowMajorProblem row_major(const MmaProblem& p, bool bf16) {
  const auto encode = [&](float v) { return bf16 ? bf16_of_small_integer(v) : f16_of_small_integer(v); };
  RowMajorProblem m{std::vector<std::uint16_t>(16 * 16), std::vector<std::uint16_t>(16 * 8),
                    std::vector<float>(16 * 8)};
  for (unsigned r = 0; r < 16; ++r) {
    for (unsigned k = 0; k < 16; ++k) m.A[r * 16 + k] = encode(p.A[r][k]);
    for (unsigned n = 0; n < 8; ++n) m.C[r * 8 + n] = p.C[r][n];
  }
  for (unsigned k = 0; k < 16; ++k) {
    for (unsigned n = 0; n < 8; ++n) m.B[k * 8 + n] = encode(p.B[k][n]);
  }
  return m;
}

// The registers of every lane for `warps` problems, in the figures' layout.
struct MmaFragments {
  std::vector<std::uint32_t> a, b;
  std::vector<float> c;
};
inline MmaFragments mma_fragments_of(const std::vector<MmaProblem>& problems, bool bf16) {
  MmaFragments f;
  f.a.assign(problems.size() * 32 * 4, 0);
  f.b.assign(problems.size() * 32 * 2, 0);
  f.c.assign(problems.size() * 32 * 4, 0.0f);
  const auto encode = [&](float v) { return bf16 ? bf16_of_small_integer(v) : f16_of_small_integer(v); };
  for (std::size_t w = 0; w < problems.size(); ++w) {
    const MmaProblem& p = problems[w];
    for (unsigned r = 0; r < 16; ++r) {
      for (unsigned k = 0; k < 16; ++k) {
        Slot s = a_slot(r, k);
        s.lane += static_cast<unsigned>(32 * w);
        put_half(f.a, 4, s, encode(p.A[r][k]));
      }
    }
    for (unsigned k = 0; k < 16; ++k) {
      for (unsigned n = 0; n < 8; ++n) {
        Slot s = b_slot(k, n);
        s.lane += static_cast<unsigned>(32 * w);
        put_half(f.b, 2, s, encode(p.B[k][n]));
      }
    }
    for (unsigned r = 0; r < 16; ++r) {
      for (unsigned n = 0; n < 8; ++n) {
        const Slot s = c_slot(r, n);
        f.c[(32 * w + s.lane) * 4 + s.reg] = p.C[r][n];
      }
    }
  }
  return f;
}

// Checks d, the D fragments of mma_fragments for `problems` (one warp each, 4 floats per lane), against
// each problem's exact D = A B + C, element by element through the PTX C/D layout. The products and
// sums are integers below 2^24: exact in float32 whatever the order. `context` names the run.
inline void check_mma_result(const std::vector<float>& d, const std::vector<MmaProblem>& problems,
                             const std::string& context) {
  for (std::size_t w = 0; w < problems.size(); ++w) {
    const auto D = problems[w].D();
    for (unsigned r = 0; r < 16; ++r) {
      for (unsigned n = 0; n < 8; ++n) {
        const Slot slot = c_slot(r, n);
        INFO(context << ", warp " << w << ", D[" << r << "][" << n << "] (lane " << slot.lane << ", d[" << slot.reg
                     << "])");
        CHECK(d[(32 * w + slot.lane) * 4 + slot.reg] == D[r][n]);
      }
    }
  }
}

// The element of a 32-row tile of 8 b16 values: its row in the high byte, its column in the low.
inline std::uint16_t tile_entry(unsigned row, unsigned col) { return static_cast<std::uint16_t>(row << 8 | col); }
inline std::vector<std::uint16_t> encoded_tile() {
  std::vector<std::uint16_t> tile(32 * 8);
  for (unsigned r = 0; r < 32; ++r) {
    for (unsigned c = 0; c < 8; ++c) tile[r * 8 + c] = tile_entry(r, c);
  }
  return tile;
}

// Row addresses that are not simply lane l -> row l: lane l gives tile row (5 l + 3) % 32.
inline std::vector<int> scrambled_rows() {
  std::vector<int> rows(32);
  for (int l = 0; l < 32; ++l) rows[l] = (5 * l + 3) % 32;
  return rows;
}

// Every lane's registers after ldmatrix of `matrices` matrices, from the figure: matrix i's row j
// is the tile row whose address lane 8i + j gave (PTX ISA, "ldmatrix": "addresses addr0-addr7
// correspond to the rows of the first matrix, addresses addr8-addr15 ... the second"); element
// (j, c) goes to lane 4j + c/2 (without .trans) or, read down the columns, element (j, c) to lane
// 4c + j/2 (with .trans); register i.
inline std::vector<std::uint32_t> expected_ldmatrix(unsigned matrices, bool trans,
                                                    const std::vector<int>& row_of_lane) {
  std::vector<std::uint32_t> regs(32 * matrices, 0);
  for (unsigned i = 0; i < matrices; ++i) {
    for (unsigned j = 0; j < 8; ++j) {
      const auto tile_row = static_cast<unsigned>(row_of_lane[8 * i + j]);
      for (unsigned c = 0; c < 8; ++c) {
        const Slot s = trans ? Slot{4 * c + j / 2, i, j % 2} : Slot{4 * j + c / 2, i, c % 2};
        put_half(regs, matrices, s, tile_entry(tile_row, c));
      }
    }
  }
  return regs;
}

// Conversions, written out bit by bit (IEEE 754 binary16 and bfloat16, round to nearest even).
struct RoundingCase {
  std::uint32_t float_bits;
  std::uint16_t bf16, f16;
  const char* what;
};
inline constexpr std::uint16_t nan16 = 0xffff;  // "any NaN" in the table below
inline const std::vector<RoundingCase> rounding_cases = {
    {0x3f800000, 0x3f80, 0x3c00, "1"},
    {0xbfc00000, 0xbfc0, 0xbe00, "-1.5"},
    {0x80000000, 0x8000, 0x8000, "-0"},
    {0x3f808000, 0x3f80, 0x3c04, "1 + 2^-8: bf16 tie, to the even 1; exact in f16"},
    {0x3f818000, 0x3f82, 0x3c0c, "1 + 3 * 2^-8: bf16 tie, to the even 1 + 2^-6"},
    {0x3f808001, 0x3f81, 0x3c04, "just above a bf16 tie: up"},
    {0x3f801000, 0x3f80, 0x3c00, "1 + 2^-11: f16 tie, to the even 1"},
    {0x3f803000, 0x3f80, 0x3c02, "1 + 3 * 2^-11: f16 tie, to the even 1 + 2^-9"},
    {0x7f7f7fff, 0x7f7f, 0x7c00, "below bf16's largest tie: its largest finite; f16 overflows"},
    {0x7f7f8000, 0x7f80, 0x7c00, "bf16 tie above its largest finite (odd): to inf"},
    {0x7f7fffff, 0x7f80, 0x7c00, "the largest float: inf"},
    {0x477fe000, 0x4780, 0x7bff, "65504: f16's largest finite"},
    {0x477fefff, 0x4780, 0x7bff, "just below 65520: f16 65504"},
    {0x477ff000, 0x4780, 0x7c00, "65520: f16 tie above 65504 (odd): to inf"},
    {0x7f800000, 0x7f80, 0x7c00, "+inf"},
    {0xff800000, 0xff80, 0xfc00, "-inf"},
    {0x7fc00000, nan16, nan16, "NaN"},
    {0xff800001, nan16, nan16, "a negative signalling NaN"},
    {0x38800000, 0x3880, 0x0400, "2^-14: f16's smallest normal"},
    {0x387fc000, 0x3880, 0x03ff, "1023 * 2^-24: f16's largest subnormal, exact"},
    {0x387ff000, 0x3880, 0x0400, "1023.75 * 2^-24: the f16 subnormal rounds up to the smallest normal"},
    {0x33800000, 0x3380, 0x0001, "2^-24: f16's smallest subnormal"},
    {0xb3800000, 0xb380, 0x8001, "-2^-24"},
    {0x33000000, 0x3300, 0x0000, "2^-25: f16 tie between 0 and 2^-24, to the even 0"},
    {0x33000001, 0x3300, 0x0001, "just above 2^-25: up to 2^-24"},
    {0x33c00000, 0x33c0, 0x0002, "1.5 * 2^-24: f16 tie, to the even 2 * 2^-24"},
    {0x34a00000, 0x34a0, 0x0005, "5 * 2^-24: exact subnormal"},
    {0x00000001, 0x0000, 0x0000, "the smallest float subnormal: 0 in both"},
    {0x00018000, 0x0002, 0x0000, "bf16 subnormal tie (odd 1): up to 2"},
};

// The float that a bf16 or f16 bit pattern stands for, written out.
inline float bf16_value(std::uint16_t bits) { return std::bit_cast<float>(std::uint32_t{bits} << 16); }
inline float f16_value(std::uint16_t bits) {
  const int exponent = (bits >> 10) & 0x1f;
  const int fraction = bits & 0x3ff;
  float magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(fraction), -24);  // subnormal: fraction * 2^-24
  } else if (exponent == 31) {
    magnitude = fraction == 0 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
  } else {
    magnitude = std::ldexp(static_cast<float>(1024 + fraction), exponent - 25);  // 1.f * 2^(e - 15)
  }
  return (bits & 0x8000) != 0 ? -magnitude : magnitude;
}

inline bool is_nan16_bf16(std::uint16_t b) { return (b & 0x7f80) == 0x7f80 && (b & 0x007f) != 0; }
inline bool is_nan16_f16(std::uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0; }

}  // namespace simt_tensor_test
