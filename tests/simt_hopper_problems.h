// The problems of the Hopper tests (CPU and GPU): matrices whose product is exact in float32, laid
// out in shared memory or in global memory as simt_hopper_reference.h's figures say, and the plain
// loop that multiplies them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include "common/simt/instructions/fp8.h"
#include "common/simt/instructions/hopper.h"
#include "simt_hopper_reference.h"
#include "simt_hopper_runs.h"

namespace simt_hopper_test {

// The 2-byte pattern of x (exact: every value used here is representable in bf16 and f16).
inline std::uint16_t bits_of(float x, bool bf16) {
  return static_cast<std::uint16_t>((bf16 ? simt::pack_bf16x2(x, 0.0f) : simt::pack_f16x2(x, 0.0f)) & 0xffffu);
}

// What the entries of A and B are:
//   a_shows:  B[k][n] = 1 where k = n % 16, else 0; A[m][k] = (m + 1) 2^(k - 8), all distinct. Then
//             D[m][n] = A[m][n % 16]: every element of A lands in D where its place says.
//   b_shows:  A[m][k] = 1 where k = m % 16; B[k][n] = (n + 1) 2^(k - 8): D[m][n] = B[m % 16][n].
//   product:  small random integers, C too: D = A B + C exactly in float32 (|D| < 2^24).
enum class Content { a_shows, b_shows, product };

inline const char* to_string(Content c) {
  return c == Content::a_shows ? "A shows through" : c == Content::b_shows ? "B shows through" : "random integers";
}

struct Matrices {
  unsigned n = 0, k = 16;
  std::vector<float> A;  // 64 x k
  std::vector<float> B;  // k x n
  std::vector<float> C;  // 64 x n
};

inline float power_of_two(int e) { return e >= 0 ? static_cast<float>(1u << e) : 1.0f / static_cast<float>(1u << -e); }

inline Matrices make_matrices(Content content, unsigned n, unsigned k, std::uint32_t seed) {
  Matrices m;
  m.n = n;
  m.k = k;
  m.A.resize(64 * k);
  m.B.resize(k * n);
  m.C.assign(64 * n, 0.0f);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> small(-4, 4), wide(-64, 64);
  for (unsigned r = 0; r < 64; ++r) {
    for (unsigned c = 0; c < k; ++c) {
      const float v = content == Content::a_shows
                          ? static_cast<float>(r + 1) * power_of_two(static_cast<int>(c % 16) - 8)
                      : content == Content::b_shows ? (c == r % 16 ? 1.0f : 0.0f)
                                                    : static_cast<float>(small(rng));
      m.A[r * k + c] = v;
    }
  }
  for (unsigned r = 0; r < k; ++r) {
    for (unsigned c = 0; c < n; ++c) {
      const float v = content == Content::a_shows ? (r == c % 16 ? 1.0f : 0.0f)
                      : content == Content::b_shows
                          ? static_cast<float>(c + 1) * power_of_two(static_cast<int>(r % 16) - 8)
                          : static_cast<float>(small(rng));
      m.B[r * n + c] = v;
    }
  }
  if (content == Content::product) {
    for (float& c : m.C) c = static_cast<float>(wide(rng));
  }
  return m;
}

// D = A B (+ C): the plain loop.
inline std::vector<float> product(const Matrices& m, bool with_c) {
  std::vector<float> D(64 * m.n);
  for (unsigned r = 0; r < 64; ++r) {
    for (unsigned c = 0; c < m.n; ++c) {
      double sum = with_c ? m.C[r * m.n + c] : 0.0;
      for (unsigned i = 0; i < m.k; ++i) sum += double(m.A[r * m.k + i]) * m.B[i * m.n + c];
      D[r * m.n + c] = static_cast<float>(sum);
    }
  }
  return D;
}

// A layout case: the descriptor fields of A (64 rows) and B (n rows) for one swizzle and majorness,
// canonical and dense as a kernel would lay them out; `wide` K-major swizzled operands hold S / 2
// elements of k per row, of which the wgmma reads the 16 from k_first on (the descriptor moved on
// by 2 k_first bytes).
struct LayoutCase {
  simt::Swizzle swizzle = simt::Swizzle::none;
  simt::Major major_a = simt::Major::k, major_b = simt::Major::k;
  bool a_in_registers = false;
  bool alternative = false;  // K-major none: all of k 0..7 first, then k 8..15 (LBO large, SBO 128)
  unsigned k_first = 0;      // K-major swizzled: the first k the wgmma reads
};

inline std::string describe(const LayoutCase& c) {
  const char* names[] = {"none", "32B", "64B", "128B"};
  return std::string("swizzle ") + names[static_cast<unsigned>(c.swizzle)] + ", A " +
         (c.a_in_registers              ? "in registers"
          : c.major_a == simt::Major::k ? "K-major"
                                        : "M-major") +
         ", B " + (c.major_b == simt::Major::k ? "K-major" : "N-major") +
         (c.alternative ? ", core matrices by k" : "") +
         (c.k_first > 0 ? ", from k = " + std::to_string(c.k_first) : "");
}

// The fields, and the operand's bytes in the image, for `rows` rows (64 for A, n for B).
struct Placed {
  OperandLayout layout;
  std::uint32_t bytes = 0;
  unsigned k_total = 16;  // the k the image holds per row
};

inline Placed lay_out(const LayoutCase& c, simt::Major major, unsigned rows) {
  Placed p;
  const unsigned span = simt::swizzle_span(c.swizzle);
  p.layout.swizzle = c.swizzle;
  if (major == simt::Major::k) {
    if (c.swizzle == simt::Swizzle::none) {
      p.layout.lbo = c.alternative ? (rows / 8) * 128 : 128;
      p.layout.sbo = c.alternative ? 128 : 256;
      p.bytes = rows * 32;
    } else {
      p.k_total = span / 2;
      p.layout.lbo = 16;  // not used by a swizzled K-major operand
      p.layout.sbo = 8 * span;
      p.bytes = rows * span;
    }
  } else {
    if (c.swizzle == simt::Swizzle::none) {
      p.layout.lbo = 128;  // 8 k-rows of 16 bytes, then the next 8 k
      p.layout.sbo = 256;  // then the next 8 of M/N
      p.bytes = rows * 32;
    } else {
      p.layout.sbo = 8 * span;   // 8 k-rows of S bytes, then the next 8 k
      p.layout.lbo = 16 * span;  // both groups of k, then the next S / 2 of M/N
      p.bytes = (rows / (span / 2)) * 16 * span;
      if (rows % (span / 2) != 0) p.bytes += 16 * span;
    }
  }
  return p;
}

// The image of A (at 0) and B (at the next 1024 bytes) and the problem's registers, for m's A
// (64 x 16: its k are read from k_first on) and B (16 x n).
inline WgmmaProblemImage make_image(const LayoutCase& c, const Matrices& m, bool bf16, bool scale_d) {
  WgmmaProblemImage p;
  p.n = static_cast<int>(m.n);
  p.bf16 = bf16;
  p.major_a = c.major_a;
  p.major_b = c.major_b;
  p.scale_d = scale_d;
  const Placed pa = lay_out(c, c.major_a, 64);
  const Placed pb = lay_out(c, c.major_b, m.n);
  p.a = pa.layout;
  p.b = pb.layout;
  p.b.offset = (pa.bytes + 1023) / 1024 * 1024;
  const std::uint32_t total = p.b.offset + pb.bytes;
  std::vector<std::uint16_t> image(total / 2, 0x7fc0);  // a NaN in both types wherever nothing is placed
  // Wide rows: the columns before k_first and after it hold other values (k_first + 16 .. S / 2),
  // placed too, so that a descriptor that starts in the wrong place reads something else.
  const unsigned k_first = c.k_first;
  const unsigned a_cols = c.major_a == simt::Major::k ? pa.k_total : 16;
  for (unsigned r = 0; r < 64; ++r) {
    for (unsigned k = 0; k < a_cols; ++k) {
      const bool inside = k >= k_first && k < k_first + 16;
      const float v = inside ? m.A[r * 16 + (k - k_first)] : static_cast<float>(1000 + r);
      image[place(c.major_a, c.swizzle, pa.layout.lbo, pa.layout.sbo, r, k) / 2] = bits_of(v, bf16);
    }
  }
  const unsigned b_cols = c.major_b == simt::Major::k ? pb.k_total : 16;
  for (unsigned nn = 0; nn < m.n; ++nn) {
    for (unsigned k = 0; k < b_cols; ++k) {
      const bool inside = k >= k_first && k < k_first + 16;
      const float v = inside ? m.B[(k - k_first) * m.n + nn] : static_cast<float>(2000 + nn);
      image[(p.b.offset + place(c.major_b, c.swizzle, pb.layout.lbo, pb.layout.sbo, nn, k)) / 2] = bits_of(v, bf16);
    }
  }
  // The descriptors start k_first elements in (K-major: 2 k_first bytes along the row).
  if (c.major_a == simt::Major::k) p.a.offset += 2 * k_first;
  if (c.major_b == simt::Major::k) p.b.offset += 2 * k_first;
  p.image.resize(image.size() / 2);
  std::memcpy(p.image.data(), image.data(), p.image.size() * 4);
  if (c.a_in_registers) {
    p.a_registers.assign(128 * 4, 0u);
    for (unsigned r = 0; r < 64; ++r) {
      for (unsigned k = 0; k < 16; ++k) {
        const Slot s = a_slot(r, k);
        p.a_registers[s.thread * 4 + s.reg] |= std::uint32_t{bits_of(m.A[r * 16 + k], bf16)} << (16 * s.high);
      }
    }
  }
  p.c = d_registers(m.C, m.n);
  return p;
}

// ---- FP8 (.m64nNk32) ----------------------------------------------------------------------------

inline bool a_is_e4m3(Fp8Types t) { return t == Fp8Types::e4m3 || t == Fp8Types::e4m3_e5m2; }
inline bool b_is_e4m3(Fp8Types t) { return t == Fp8Types::e4m3 || t == Fp8Types::e5m2_e4m3; }

// The code of x in e4m3 or e5m2 (exact: every value placed is one of the type's; an infinity is
// e5m2's own code, where the conversion would saturate).
inline std::uint8_t fp8_code(float x, bool e4m3) {
  if (!e4m3 && std::isinf(x)) return x > 0 ? 0x7c : 0xfc;
  return e4m3 ? simt::float_to_e4m3_bits(x) : simt::float_to_e5m2_bits(x);
}

// A (64 x 32) and B (32 x n) of random values of their types, and C.
//   spread (the default): +-(1 + f) 2^e with every fraction f of the type (3 bits for e4m3, 2 for
//     e5m2) and e in -3 .. 3, and C random multiples of 1/8 in -8 .. 8. Every product is a multiple
//     of 2^-12 below 2^8, so the plain loop's double sum of 32 of them and C is exact (at most 25
//     bits), and its one rounding to float is the exact sum rounded once: what
//     Fp8Accumulation::exact gives, to the bit. truncated14 cuts the products below 2^(E - 13).
//   !spread: integers -4 .. 4 (both types hold them), C integers -64 .. 64: D = A B + C is exact
//     under every assumption of the accumulation (14 bits hold every product and the sum), so the
//     GPU must give it too.
inline Matrices make_fp8_matrices(Fp8Types types, unsigned n, std::uint32_t seed, bool spread = true) {
  Matrices m;
  m.n = n;
  m.k = 32;
  std::mt19937 rng(seed);
  const auto draw = [&rng, spread](bool e4m3) {
    if (!spread) return static_cast<float>(static_cast<int>(rng() % 9) - 4);
    const unsigned fractions = e4m3 ? 8u : 4u;
    const float significand = 1.0f + static_cast<float>(rng() % fractions) / static_cast<float>(fractions);
    const float v = std::ldexp(significand, static_cast<int>(rng() % 7) - 3);
    return rng() % 2 == 0 ? v : -v;
  };
  m.A.resize(64 * 32);
  for (float& a : m.A) a = draw(a_is_e4m3(types));
  m.B.resize(32 * n);
  for (float& b : m.B) b = draw(b_is_e4m3(types));
  m.C.resize(64 * n);
  for (float& c : m.C) c = static_cast<float>(static_cast<int>(rng() % 129) - 64) / (spread ? 8.0f : 1.0f);
  return m;
}

// A case built to show the accumulation (e4m3, n = 8): every row of A is 16, -16, then 30 ones;
// every column of B 16, 16, then 30 times 2^-6; C all c. The products are 256, -256 and 30 of
// 2^-6: exactly, D = c + 30 2^-6 = c + 0.46875; aligned to the largest product (2^8) and cut to 14
// bits (down to 2^-5), the small products vanish and D = c.
inline Matrices make_fp8_cancellation(float c) {
  Matrices m;
  m.n = 8;
  m.k = 32;
  m.A.assign(64 * 32, 1.0f);
  m.B.assign(32 * 8, 1.0f / 64.0f);
  for (unsigned r = 0; r < 64; ++r) {
    m.A[r * 32] = 16.0f;
    m.A[r * 32 + 1] = -16.0f;
  }
  for (unsigned j = 0; j < 8; ++j) m.B[j] = m.B[8 + j] = 16.0f;
  m.C.assign(64 * 8, c);
  return m;
}

// The image of A (at 0) and B (at the next 1024 bytes), both K-major, and the registers, for m's A
// (64 x 32, its k read from k_first on) and B (32 x n). The layouts are the bf16 ones (lay_out): a
// row of 32 bytes holds 32 codes, a swizzled row of S bytes S codes. Unread codes (before k_first,
// after it, between the operands) are 256 or NaN, so that a descriptor that reads the wrong place
// changes D.
inline WgmmaProblemImage make_fp8_image(const LayoutCase& c, const Matrices& m, Fp8Types types, bool scale_d) {
  WgmmaProblemImage p;
  p.n = static_cast<int>(m.n);
  p.fp8 = types;
  p.scale_d = scale_d;
  const Placed pa = lay_out(c, simt::Major::k, 64);
  const Placed pb = lay_out(c, simt::Major::k, m.n);
  p.a = pa.layout;
  p.b = pb.layout;
  p.b.offset = (pa.bytes + 1023) / 1024 * 1024;
  std::vector<std::uint8_t> image((p.b.offset + pb.bytes + 3) / 4 * 4, 0x7f);  // NaN in both types
  const auto put = [&](const Placed& where, std::uint32_t base, unsigned rows, bool e4m3, auto value_at) {
    for (unsigned mn = 0; mn < rows; ++mn) {
      for (unsigned k = 0; k < 2 * where.k_total; ++k) {
        const bool inside = k >= c.k_first && k < c.k_first + 32;
        const float v = inside ? value_at(mn, k - c.k_first) : 256.0f;
        image[base + place(simt::Major::k, c.swizzle, where.layout.lbo, where.layout.sbo, mn, k, 1)] =
            fp8_code(v, e4m3);
      }
    }
  };
  put(pa, 0, 64, a_is_e4m3(types), [&](unsigned r, unsigned k) { return m.A[r * 32 + k]; });
  put(pb, p.b.offset, m.n, b_is_e4m3(types), [&](unsigned nn, unsigned k) { return m.B[k * m.n + nn]; });
  p.a.offset += c.k_first;  // one byte per k along a K-major row
  p.b.offset += c.k_first;
  p.image.resize(image.size() / 4);
  std::memcpy(p.image.data(), image.data(), image.size());
  if (c.a_in_registers) {
    p.a_registers.assign(128 * 4, 0u);
    for (unsigned r = 0; r < 64; ++r) {
      for (unsigned k = 0; k < 32; ++k) {
        const Slot s = a_slot_fp8(r, k);
        p.a_registers[s.thread * 4 + s.reg] |= std::uint32_t{fp8_code(m.A[r * 32 + k], a_is_e4m3(types))}
                                               << (8 * s.high);
      }
    }
  }
  p.c = d_registers(m.C, m.n);
  return p;
}

// Where the byte at dense offset p of a box (dimension 0 fastest) lies in shared memory, from the
// swizzle figures: a swizzled box's rows are S bytes (its inner dimension fills the span), in atoms
// of 8 rows, and chunk c of row r moves to figure_chunk(S, r % 8, c).
inline std::uint32_t box_place(simt::Swizzle s, std::uint32_t p) {
  if (s == simt::Swizzle::none) return p;
  const std::uint32_t span = simt::swizzle_span(s), r = p / span, b = p % span;
  return r * span + figure_chunk(s, r % 8, b / 16) * 16 + b % 16;
}

// A TMA box over a tensor of distinct values (element i holds i + 1, below 2^16), and the shared
// memory image the figures say the load writes: element by element, the tensor's value or zero
// outside it, at box_place of its dense offset.
inline TmaBox make_box(unsigned rank, std::initializer_list<std::uint64_t> dims,
                       std::initializer_list<std::uint32_t> box, std::initializer_list<std::uint32_t> element_strides,
                       simt::Swizzle swizzle, std::initializer_list<int> coordinates) {
  TmaBox b;
  b.rank = rank;
  std::copy(dims.begin(), dims.end(), b.dims);
  std::copy(box.begin(), box.end(), b.box);
  std::copy(element_strides.begin(), element_strides.end(), b.element_strides);
  std::copy(coordinates.begin(), coordinates.end(), b.coordinates);
  b.swizzle = swizzle;
  b.global.resize(b.dims[0] * b.dims[1] * b.dims[2]);
  for (std::size_t i = 0; i < b.global.size(); ++i) b.global[i] = static_cast<std::uint16_t>(i + 1);
  b.bytes = 2;
  for (unsigned d = 0; d < 3; ++d) b.bytes *= (b.box[d] + b.element_strides[d] - 1) / b.element_strides[d];
  return b;
}

inline std::vector<std::uint8_t> expected_load(const TmaBox& b) {
  std::vector<std::uint8_t> image(b.bytes, 0);
  unsigned n[3];
  for (unsigned d = 0; d < 3; ++d) n[d] = (b.box[d] + b.element_strides[d] - 1) / b.element_strides[d];
  for (unsigned i2 = 0; i2 < n[2]; ++i2) {
    for (unsigned i1 = 0; i1 < n[1]; ++i1) {
      for (unsigned i0 = 0; i0 < n[0]; ++i0) {
        const long g0 = b.coordinates[0] + static_cast<long>(i0 * b.element_strides[0]);
        const long g1 = b.coordinates[1] + static_cast<long>(i1 * b.element_strides[1]);
        const long g2 = b.coordinates[2] + static_cast<long>(i2 * b.element_strides[2]);
        const bool inside = g0 >= 0 && g1 >= 0 && g2 >= 0 && g0 < static_cast<long>(b.dims[0]) &&
                            g1 < static_cast<long>(b.dims[1]) && g2 < static_cast<long>(b.dims[2]);
        const std::uint16_t v = inside
                                    ? b.global[static_cast<std::size_t>(
                                          (g2 * static_cast<long>(b.dims[1]) + g1) * static_cast<long>(b.dims[0]) + g0)]
                                    : 0;
        const std::uint32_t p = 2 * (i0 + n[0] * (i1 + n[1] * i2));
        std::memcpy(&image[box_place(b.swizzle, p)], &v, 2);
      }
    }
  }
  return image;
}

// A TMA store: the image that a load of the box at (0, 0, 0) of a tensor of distinct values writes
// (make_box, expected_load), stored at `at` into the same tensor filled with 0xffff; and that
// tensor after the store, from the figures: the box's elements inside the tensor, 0xffff elsewhere.
struct TmaStore {
  TmaBox target;
  std::vector<std::uint8_t> image;
  std::vector<std::uint16_t> expected;
};

inline TmaStore tma_store_problem(unsigned rank, std::initializer_list<std::uint64_t> dims,
                                  std::initializer_list<std::uint32_t> box, simt::Swizzle swizzle,
                                  std::initializer_list<int> at) {
  const TmaBox source = make_box(rank, dims, box, {1, 1, 1}, swizzle, {0, 0, 0});
  TmaStore p{source, expected_load(source), {}};
  std::copy(at.begin(), at.end(), p.target.coordinates);
  std::fill(p.target.global.begin(), p.target.global.end(), std::uint16_t{0xffff});
  p.expected = p.target.global;
  const std::uint64_t* n = source.dims;
  for (std::uint64_t i2 = 0; i2 < source.box[2]; ++i2) {
    for (std::uint64_t i1 = 0; i1 < source.box[1]; ++i1) {
      for (std::uint64_t i0 = 0; i0 < source.box[0]; ++i0) {
        const std::uint64_t g0 = p.target.coordinates[0] + i0, g1 = p.target.coordinates[1] + i1,
                            g2 = p.target.coordinates[2] + i2;
        if (g0 < n[0] && g1 < n[1] && g2 < n[2]) {
          p.expected[(g2 * n[1] + g1) * n[0] + g0] = source.global[(i2 * n[1] + i1) * n[0] + i0];
        }
      }
    }
  }
  return p;
}

// A TMA problem and the D its plain loop gives.
struct TmaRoundTrip : TmaProblem {
  std::vector<float> expected;  // 64 x n, row-major
};

// The TMA round trip: A (64 x K) cut from a global [80][96] matrix at (row 24, column 40), so
// rows 80..87 of the box lie outside and arrive as zeros; B (K x n) cut from a global K-like
// [n + 24][96] matrix (B[k][j] = Kg[row0 + j][col0 + k], K-major) or a V-like [48][n + 40] matrix
// (B[k][j] = Vg[row0 + k][col0 + j], N-major), also partly outside. K = S / 2 for a swizzle of span
// S (16 without one), as k_steps wgmma of 16.
inline TmaRoundTrip tma_round_trip(simt::Swizzle swizzle, simt::Major major_b, unsigned n, bool bf16,
                                   std::uint32_t seed) {
  TmaRoundTrip p;
  std::vector<float>& expected = p.expected;
  p.n = static_cast<int>(n);
  p.bf16 = bf16;
  p.major_b = major_b;
  const unsigned span = simt::swizzle_span(swizzle);
  const bool swizzled = swizzle != simt::Swizzle::none;
  const unsigned k_total = swizzled ? span / 2 : 16;
  p.k_steps = static_cast<int>(k_total / 16);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> small(-4, 4);
  const auto fill = [&](std::vector<std::uint16_t>& g, std::vector<float>& values, std::size_t count) {
    g.resize(count);
    values.resize(count);
    for (std::size_t i = 0; i < count; ++i) {
      values[i] = static_cast<float>(small(rng));
      g[i] = bits_of(values[i], bf16);
    }
  };
  std::vector<float> a_values, b_values;
  p.shape_a = {80, 96, 64, swizzled ? span / 2 : 8, swizzle};
  fill(p.a, a_values, 80 * 96);
  const int a_row = 24, a_col = 40;
  // A: one box (swizzled), or two boxes of 8 columns (no swizzle: core matrices of 16-byte rows,
  // k 0..7 then k 8..15 1024 bytes on).
  p.layout_a = {0, swizzle, swizzled ? 16u : 1024u, swizzled ? 8 * span : 128u};
  p.plan_a.count = swizzled ? 1 : 2;
  for (int i = 0; i < p.plan_a.count; ++i) {
    p.plan_a.dst[i] = 1024u * static_cast<unsigned>(i);
    p.plan_a.c0[i] = a_col + 8 * i;
    p.plan_a.c1[i] = a_row;
  }
  p.plan_a.bytes = 64 * k_total * 2;
  p.k_step_bytes_a = 32;
  const std::uint32_t b_offset = 8192;
  if (major_b == simt::Major::k) {
    const std::uint64_t rows = n + 24;
    p.shape_b = {rows, 96, n, swizzled ? span / 2 : 8, swizzle};
    fill(p.b, b_values, rows * 96);
    p.layout_b = {b_offset, swizzle, swizzled ? 16u : n * 16, swizzled ? 8 * span : 128u};
    p.plan_b.count = swizzled ? 1 : 2;
    for (int i = 0; i < p.plan_b.count; ++i) {
      p.plan_b.dst[i] = b_offset + n * 16 * static_cast<unsigned>(i);
      p.plan_b.c0[i] = 40 + 8 * i;
      p.plan_b.c1[i] = 32;
    }
    p.k_step_bytes_b = 32;
  } else {
    const std::uint64_t cols = n + 40;
    p.shape_b = {48, cols, k_total, swizzled ? span / 2 : 8, swizzle};
    fill(p.b, b_values, 48 * cols);
    const unsigned per_box = swizzled ? span / 2 : 8;  // columns of n per box
    const unsigned box_bytes = k_total * per_box * 2;
    p.layout_b = {b_offset, swizzle, swizzled ? box_bytes : 128u, swizzled ? 8 * span : box_bytes};
    p.plan_b.count = static_cast<int>(n / per_box);
    for (int i = 0; i < p.plan_b.count; ++i) {
      p.plan_b.dst[i] = b_offset + box_bytes * static_cast<unsigned>(i);
      p.plan_b.c0[i] = 24 + static_cast<int>(per_box) * i;
      p.plan_b.c1[i] = 40;  // rows 48.. lie outside
    }
    p.k_step_bytes_b = swizzled ? 16 * span : 256;  // 16 k: two groups of 8 k-rows
  }
  p.plan_b.bytes = n * k_total * 2;
  p.shared_bytes = b_offset + p.plan_b.bytes;
  // The plain loop over the same boxes, zeros outside the matrices.
  const auto a_at = [&](unsigned m, unsigned k) {
    const unsigned r = a_row + m, c = a_col + k;
    return r < 80 && c < 96 ? a_values[r * 96 + c] : 0.0f;
  };
  const auto b_at = [&](unsigned k, unsigned j) {
    if (major_b == simt::Major::k) {
      const unsigned r = 32 + j, c = 40 + k;
      return r < n + 24 && c < 96 ? b_values[r * 96 + c] : 0.0f;
    }
    const unsigned r = 40 + k, c = 24 + j;
    return r < 48 && c < n + 40 ? b_values[r * (n + 40) + c] : 0.0f;
  };
  expected.assign(64 * n, 0.0f);
  for (unsigned m = 0; m < 64; ++m) {
    for (unsigned j = 0; j < n; ++j) {
      float sum = 0.0f;  // exact: small integers
      for (unsigned k = 0; k < k_total; ++k) sum += a_at(m, k) * b_at(k, j);
      expected[m * n + j] = sum;
    }
  }
  return p;
}

}  // namespace simt_hopper_test
