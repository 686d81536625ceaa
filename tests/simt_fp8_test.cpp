// common/simt's FP8 types and conversions on the CPU (fp8.h), against the formats' definitions:
// every one of the 256 codes of e4m3 and e5m2 decodes to the value its sign, exponent and fraction
// fields define (written here from the PTX ISA's "Alternate Floating Point Data Formats", not from
// the emulation); every finite code comes back from its own value; every midpoint between two
// adjacent codes rounds to the even one and the floats beside it to the nearer; beyond the largest
// finite value, and at +-inf, the conversion saturates (.satfinite); NaN stays NaN; zero keeps its
// sign; the x2 forms put the lower element in the lower byte or half. Where the build has the CUDA
// Toolkit, CUDA's own host conversions (cuda_fp8.h) agree bit for bit.
// Every comparison is exact: each FP8 value, each midpoint and each binary16 value here is a float
// (no tolerance anywhere).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "catch.h"
#include "common/simt/instructions/fp8.h"

#if FA_HAVE_CUDA
#include <cuda_fp8.h>
#endif

namespace {

// One format as its definition gives it, and simt's functions for it.
struct Definition {
  const char* name;
  int exponent_bits;
  int mantissa_bits;
  int bias;
  bool has_infinity;  // e5m2: E all ones is +-inf (M = 0) or NaN; e4m3: only S.1111.111 is special (NaN)
};
struct Functions {
  std::uint8_t (*encode)(float);
  float (*decode)(std::uint8_t);
  std::uint16_t (*cvt_x2)(float lo, float hi);
  std::uint32_t (*cvt_f16x2)(std::uint16_t pair);
};
struct Fp8 : Definition, Functions {};

const Fp8 e4m3{
    {"e4m3", 4, 3, 7, false},
    {simt::float_to_e4m3_bits, simt::e4m3_bits_to_float, simt::cvt_rn_satfinite_e4m3x2_f32, simt::cvt_f16x2_e4m3x2}};
const Fp8 e5m2{
    {"e5m2", 5, 2, 15, true},
    {simt::float_to_e5m2_bits, simt::e5m2_bits_to_float, simt::cvt_rn_satfinite_e5m2x2_f32, simt::cvt_f16x2_e5m2x2}};
const Fp8* const formats[] = {&e4m3, &e5m2};

constexpr double nan = std::numeric_limits<double>::quiet_NaN();
constexpr double inf = std::numeric_limits<double>::infinity();

// The value of a code by the definition: S, E, M its fields, with 0.M and 1.M the fraction read
// as a binary number behind the point,
//   E = 0:                     (-1)^S * 0.M * 2^(1 - bias)    (zero and the subnormals)
//   E all ones, with infinity: (-1)^S * inf if M = 0, NaN otherwise
//   E and M all ones, e4m3:    NaN
//   otherwise:                 (-1)^S * 1.M * 2^(E - bias)
double defined_value(std::uint8_t code, const Fp8& f) {
  const int sign = code >> 7;
  const int exponent = (code >> f.mantissa_bits) & ((1 << f.exponent_bits) - 1);
  const int fraction = code & ((1 << f.mantissa_bits) - 1);
  const bool exponent_all_ones = exponent == (1 << f.exponent_bits) - 1;
  const bool fraction_all_ones = fraction == (1 << f.mantissa_bits) - 1;
  const double point_m = std::ldexp(static_cast<double>(fraction), -f.mantissa_bits);  // 0.M
  double magnitude = 0;
  if (exponent_all_ones && f.has_infinity) {
    magnitude = fraction == 0 ? inf : nan;
  } else if (exponent_all_ones && fraction_all_ones) {
    magnitude = nan;
  } else if (exponent == 0) {
    magnitude = std::ldexp(point_m, 1 - f.bias);
  } else {
    magnitude = std::ldexp(1.0 + point_m, exponent - f.bias);
  }
  return sign != 0 ? -magnitude : magnitude;
}

// The value of an IEEE binary16 by the same definition (5 exponent bits, bias 15, 10 fraction bits).
double defined_f16_value(std::uint16_t bits) {
  const int sign = bits >> 15;
  const int exponent = (bits >> 10) & 0x1f;
  const int fraction = bits & 0x3ff;
  const double point_m = std::ldexp(static_cast<double>(fraction), -10);
  double magnitude = 0;
  if (exponent == 0x1f) {
    magnitude = fraction == 0 ? inf : nan;
  } else if (exponent == 0) {
    magnitude = std::ldexp(point_m, -14);
  } else {
    magnitude = std::ldexp(1.0 + point_m, exponent - 15);
  }
  return sign != 0 ? -magnitude : magnitude;
}

// Two values are the same: both NaN, or equal with the same sign (so -0 is not +0).
bool same(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

// The codes of the finite values >= 0, in increasing order of value (codes 0, 1, 2, ... up to the
// largest finite one), and their values by the definition.
struct Ladder {
  std::vector<std::uint8_t> codes;
  std::vector<double> values;
};

Ladder finite_ladder(const Fp8& f) {
  Ladder ladder;
  for (unsigned code = 0; code < 0x80; ++code) {
    const double value = defined_value(static_cast<std::uint8_t>(code), f);
    if (!std::isfinite(value)) continue;
    ladder.codes.push_back(static_cast<std::uint8_t>(code));
    ladder.values.push_back(value);
  }
  return ladder;
}

// float -> code by the definition of round to nearest even with .satfinite, by search rather than
// by bits: the finite value nearest to |x| (a tie to the one with the even code), |x| beyond the
// largest finite value (inf too) to the largest, NaN to 0x7f. The differences are exact in double:
// a float and its two neighbours on the ladder have at most 24 significant bits and are within a
// factor 2 of each other (or one of them is zero).
std::uint8_t nearest_code(float x, const Ladder& ladder) {
  if (std::isnan(x)) return 0x7f;
  const auto sign = static_cast<std::uint8_t>(std::signbit(x) ? 0x80 : 0x00);
  const double magnitude = std::fabs(static_cast<double>(x));
  const auto above = std::lower_bound(ladder.values.begin(), ladder.values.end(), magnitude);
  if (above == ladder.values.end()) return static_cast<std::uint8_t>(sign | ladder.codes.back());
  const auto i = static_cast<std::size_t>(above - ladder.values.begin());
  if (*above == magnitude || i == 0) return static_cast<std::uint8_t>(sign | ladder.codes[i]);
  const double to_below = magnitude - ladder.values[i - 1];
  const double to_above = ladder.values[i] - magnitude;
  std::size_t pick = to_below < to_above ? i - 1 : i;
  if (to_below == to_above) pick = ladder.codes[i] % 2 == 0 ? i : i - 1;
  return static_cast<std::uint8_t>(sign | ladder.codes[pick]);
}

// Floats from every part of the range: every 4099th bit pattern of the 2^32 (both signs, the
// subnormals, the NaNs and everything between), about a million of them.
std::vector<float> float_sweep() {
  std::vector<float> x;
  for (std::uint64_t bits = 0; bits <= 0xffffffffu; bits += 4099) {
    x.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(bits)));
  }
  return x;
}

}  // namespace

TEST_CASE("every e4m3 and e5m2 code decodes to the value its sign, exponent and fraction define", "[simt][fp8]") {
  for (const Fp8* f : formats) {
    int nans = 0;
    int infinities = 0;
    for (unsigned code = 0; code < 256; ++code) {
      const auto c = static_cast<std::uint8_t>(code);
      const double expected = defined_value(c, *f);
      const float got = f->decode(c);
      INFO(f->name << " code 0x" << std::hex << code << std::dec << ": " << got << ", defined " << expected);
      CHECK(same(got, expected));
      nans += std::isnan(expected) ? 1 : 0;
      infinities += std::isinf(expected) ? 1 : 0;
    }
    INFO(f->name);
    CHECK(nans == (f->has_infinity ? 6 : 2));  // e5m2: S.11111.{01,10,11}; e4m3: S.1111.111
    CHECK(infinities == (f->has_infinity ? 2 : 0));
  }
  // The landmarks the PTX ISA and the FP8 paper quote, from the definition above.
  CHECK(defined_value(0x7e, e4m3) == 448.0);  // S.1111.110: the largest finite e4m3
  CHECK(defined_value(0x08, e4m3) == std::ldexp(1.0, -6));
  CHECK(defined_value(0x01, e4m3) == std::ldexp(1.0, -9));
  CHECK(defined_value(0x7b, e5m2) == 57344.0);  // S.11110.11: the largest finite e5m2
  CHECK(defined_value(0x04, e5m2) == std::ldexp(1.0, -14));
  CHECK(defined_value(0x01, e5m2) == std::ldexp(1.0, -16));
  CHECK(defined_value(0x7c, e5m2) == inf);
  CHECK(defined_value(0xfc, e5m2) == -inf);
}

TEST_CASE("every finite code comes back from its own value, and values grow with the code", "[simt][fp8]") {
  for (const Fp8* f : formats) {
    for (unsigned code = 0; code < 256; ++code) {
      const auto c = static_cast<std::uint8_t>(code);
      const double value = defined_value(c, *f);
      if (!std::isfinite(value)) continue;
      INFO(f->name << " code 0x" << std::hex << code << std::dec << " = " << value);
      CHECK(f->encode(static_cast<float>(value)) == c);
    }
    const Ladder ladder = finite_ladder(*f);
    INFO(f->name);
    CHECK(std::is_sorted(ladder.values.begin(), ladder.values.end()));
    CHECK(std::adjacent_find(ladder.values.begin(), ladder.values.end()) == ladder.values.end());
  }
}

TEST_CASE("a midpoint between two adjacent codes rounds to the even code, and the floats beside it to the nearer",
          "[simt][fp8]") {
  for (const Fp8* f : formats) {
    const Ladder ladder = finite_ladder(*f);
    for (std::size_t i = 0; i + 1 < ladder.codes.size(); ++i) {
      const std::uint8_t below = ladder.codes[i];
      const std::uint8_t above = ladder.codes[i + 1];
      const auto mid = static_cast<float>((ladder.values[i] + ladder.values[i + 1]) / 2);
      const std::uint8_t even = below % 2 == 0 ? below : above;
      INFO(f->name << ": between 0x" << std::hex << unsigned{below} << " and 0x" << unsigned{above} << std::dec
                   << ", midpoint " << mid);
      REQUIRE(static_cast<double>(mid) == (ladder.values[i] + ladder.values[i + 1]) / 2);  // exact in float
      CHECK(f->encode(mid) == even);
      CHECK(f->encode(std::nextafter(mid, 0.0f)) == below);
      CHECK(f->encode(std::nextafter(mid, std::numeric_limits<float>::infinity())) == above);
      CHECK(f->encode(-mid) == (0x80 | even));
      CHECK(f->encode(-std::nextafter(mid, 0.0f)) == (0x80 | below));
      CHECK(f->encode(-std::nextafter(mid, std::numeric_limits<float>::infinity())) == (0x80 | above));
    }
  }
}

TEST_CASE("beyond the largest finite value, and at +-inf, the conversion saturates (.satfinite)", "[simt][fp8]") {
  struct Case {
    const Fp8* f;
    float largest;
    std::uint8_t code;
    float next_step;  // the value one more code would have if the format went on: largest + ulp
  };
  // e4m3's next step would be 480 (S.1111.111, NaN instead); e5m2's 65536 (S.11111.00, inf).
  for (const Case& c : {Case{&e4m3, 448.0f, 0x7e, 480.0f}, Case{&e5m2, 57344.0f, 0x7b, 65536.0f}}) {
    const float beyond[] = {std::nextafter(c.largest, 1e30f),
                            (c.largest + c.next_step) / 2,  // the midpoint: even would be the next step
                            std::nextafter((c.largest + c.next_step) / 2, 1e30f),
                            c.next_step,
                            2 * c.largest,
                            std::numeric_limits<float>::max(),
                            std::numeric_limits<float>::infinity()};
    for (const float x : beyond) {
      INFO(c.f->name << ": x = " << x);
      CHECK(c.f->encode(x) == c.code);
      CHECK(c.f->encode(-x) == (0x80 | c.code));
    }
    INFO(c.f->name);
    CHECK(c.f->encode(c.largest) == c.code);
    CHECK(c.f->encode(std::nextafter(c.largest, 0.0f)) == c.code);  // rounds to it
    CHECK(c.f->decode(c.code) == c.largest);
  }
}

TEST_CASE("NaN stays NaN: every NaN float gives the NaN code 0x7f, and NaN codes decode to NaN", "[simt][fp8]") {
  const std::uint32_t nan_bits[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fffffffu, 0xffffffffu};
  for (const Fp8* f : formats) {
    for (const std::uint32_t bits : nan_bits) {
      INFO(f->name << ": float bits 0x" << std::hex << bits);
      const std::uint8_t code = f->encode(std::bit_cast<float>(bits));
      CHECK(code == 0x7f);
      CHECK(std::isnan(f->decode(code)));
    }
  }
  CHECK(std::isnan(e4m3.decode(0xff)));
  CHECK(std::isnan(e5m2.decode(0xfd)));
}

TEST_CASE("zero keeps its sign, and below half the smallest subnormal a value becomes zero", "[simt][fp8]") {
  for (const Fp8* f : formats) {
    const float smallest = f->decode(0x01);
    INFO(f->name << ": smallest subnormal " << smallest);
    CHECK(f->encode(0.0f) == 0x00);
    CHECK(f->encode(-0.0f) == 0x80);
    CHECK(std::signbit(f->decode(0x80)));
    CHECK(f->decode(0x80) == 0.0f);
    CHECK(f->encode(smallest / 2) == 0x00);  // a tie, to the even code 0
    CHECK(f->encode(-smallest / 2) == 0x80);
    CHECK(f->encode(std::nextafter(smallest / 2, 1.0f)) == 0x01);
    CHECK(f->encode(std::numeric_limits<float>::denorm_min()) == 0x00);
    CHECK(f->encode(-std::numeric_limits<float>::denorm_min()) == 0x80);
    CHECK(f->encode(-1e-30f) == 0x80);
  }
}

TEST_CASE("a million floats from the whole range round to the nearest finite value, found by search", "[simt][fp8]") {
  const std::vector<float> sweep = float_sweep();
  for (const Fp8* f : formats) {
    const Ladder ladder = finite_ladder(*f);
    int wrong = 0;
    for (const float x : sweep) {
      const std::uint8_t expected = nearest_code(x, ladder);
      if (f->encode(x) == expected) continue;
      INFO(f->name << ": float bits 0x" << std::hex << std::bit_cast<std::uint32_t>(x) << ", expected code 0x"
                   << unsigned{expected});
      CHECK(f->encode(x) == expected);
      if (++wrong == 5) break;
    }
    INFO(f->name << ": " << sweep.size() << " floats");
    CHECK(wrong == 0);
  }
}

TEST_CASE("the x2 forms put the lower element in the lower byte and the lower half", "[simt][fp8]") {
  // lo = 1 (e4m3 0x38 = 0.0111.000, e5m2 0x3c = 0.01111.00), hi = -2 (0xc0 in both). The PTX's
  // first source goes to the upper byte; simt's functions take (lo, hi).
  CHECK(simt::cvt_rn_satfinite_e4m3x2_f32(1.0f, -2.0f) == 0xc038);
  CHECK(simt::cvt_rn_satfinite_e5m2x2_f32(1.0f, -2.0f) == 0xc03c);
  // And back: binary16 1 = 0x3c00 in bits 0-15, -2 = 0xc000 in bits 16-31.
  CHECK(simt::cvt_f16x2_e4m3x2(0xc038) == 0xc0003c00u);
  CHECK(simt::cvt_f16x2_e5m2x2(0xc03c) == 0xc0003c00u);

  for (const Fp8* f : formats) {
    const Ladder ladder = finite_ladder(*f);
    std::vector<std::uint8_t> finite;  // both signs
    for (const std::uint8_t code : ladder.codes) {
      finite.push_back(code);
      finite.push_back(static_cast<std::uint8_t>(code | 0x80));
    }
    int wrong = 0;  // the first few differences are reported, the rest counted
    for (const std::uint8_t lo : finite) {
      for (const std::uint8_t hi : finite) {
        const auto expected = static_cast<std::uint16_t>(lo | (hi << 8));
        const std::uint16_t got = f->cvt_x2(f->decode(lo), f->decode(hi));
        if (got == expected || ++wrong > 5) continue;
        INFO(f->name << ": lo 0x" << std::hex << unsigned{lo} << ", hi 0x" << unsigned{hi});
        CHECK(got == expected);
      }
    }
    // Every 16-bit pair to two binary16: each half is the value of its byte, exactly; a NaN byte
    // gives binary16 0x7fff.
    for (unsigned pair = 0; pair <= 0xffff; ++pair) {
      const std::uint32_t halves = f->cvt_f16x2(static_cast<std::uint16_t>(pair));
      const auto lo = static_cast<std::uint16_t>(halves & 0xffffu);
      const auto hi = static_cast<std::uint16_t>(halves >> 16);
      const double lo_expected = defined_value(static_cast<std::uint8_t>(pair & 0xff), *f);
      const double hi_expected = defined_value(static_cast<std::uint8_t>(pair >> 8), *f);
      const bool lo_right = same(defined_f16_value(lo), lo_expected) && (!std::isnan(lo_expected) || lo == 0x7fff);
      const bool hi_right = same(defined_f16_value(hi), hi_expected) && (!std::isnan(hi_expected) || hi == 0x7fff);
      if ((lo_right && hi_right) || ++wrong > 5) continue;
      INFO(f->name << ": pair 0x" << std::hex << pair << " -> 0x" << halves);
      CHECK(lo_right);
      CHECK(hi_right);
    }
    INFO(f->name);
    CHECK(wrong == 0);
  }
}

TEST_CASE("simt::e4m3 and simt::e5m2 are one byte and convert as CUDA's types do", "[simt][fp8]") {
  static_assert(sizeof(simt::e4m3) == 1 && sizeof(simt::e5m2) == 1);
  static_assert(simt::float_to_e4m3_bits(448.0f) == 0x7e, "the conversions are constexpr");
  CHECK(std::bit_cast<std::uint8_t>(simt::e4m3(1.0f)) == 0x38);
  CHECK(std::bit_cast<std::uint8_t>(simt::e4m3(500.0f)) == 0x7e);
  CHECK(static_cast<float>(simt::e4m3(-1e9f)) == -448.0f);
  CHECK(static_cast<float>(simt::e4m3(0.3f)) == 0.3125f);  // 0.0101.010: 1.25 * 2^-2
  CHECK(std::bit_cast<std::uint8_t>(simt::e5m2(1.0f)) == 0x3c);
  CHECK(static_cast<float>(simt::e5m2(std::numeric_limits<float>::infinity())) == 57344.0f);
  CHECK(static_cast<float>(simt::e5m2(0.3f)) == 0.3125f);  // 0.01101.01: 1.25 * 2^-2
  CHECK(std::isnan(static_cast<float>(simt::e4m3(std::nanf("")))));
}

#if FA_HAVE_CUDA
TEST_CASE("the conversions agree bit for bit with CUDA's own host conversions (cuda_fp8.h)", "[simt][fp8]") {
  struct Kind {
    const Fp8* f;
    __nv_fp8_interpretation_t cuda;
  };
  std::vector<float> x = float_sweep();
  for (const Fp8* f : formats) {  // and every midpoint and its neighbours, both signs
    const Ladder ladder = finite_ladder(*f);
    for (std::size_t i = 0; i + 1 < ladder.values.size(); ++i) {
      const auto mid = static_cast<float>((ladder.values[i] + ladder.values[i + 1]) / 2);
      for (const float y : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)}) {
        x.push_back(y);
        x.push_back(-y);
      }
    }
  }
  for (const Kind kind : {Kind{&e4m3, __NV_E4M3}, Kind{&e5m2, __NV_E5M2}}) {
    const Fp8& f = *kind.f;
    for (unsigned code = 0; code < 256; ++code) {
      const __half_raw cuda = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(code), kind.cuda);
      INFO(f.name << " code 0x" << std::hex << code);
      CHECK(cuda.x == (f.cvt_f16x2(static_cast<std::uint16_t>(code)) & 0xffffu));
    }
    int wrong = 0;
    for (std::size_t i = 0; i < x.size() && wrong < 5; ++i) {
      const std::uint8_t cuda = __nv_cvt_float_to_fp8(x[i], __NV_SATFINITE, kind.cuda);
      const std::uint16_t cuda_x2 =
          __nv_cvt_float2_to_fp8x2(float2{x[i], x[x.size() - 1 - i]}, __NV_SATFINITE, kind.cuda);
      if (cuda == f.encode(x[i]) && cuda_x2 == f.cvt_x2(x[i], x[x.size() - 1 - i])) continue;
      ++wrong;
      INFO(f.name << ": float bits 0x" << std::hex << std::bit_cast<std::uint32_t>(x[i]));
      CHECK(unsigned{cuda} == unsigned{f.encode(x[i])});
      CHECK(cuda_x2 == f.cvt_x2(x[i], x[x.size() - 1 - i]));
    }
    INFO(f.name << ": " << x.size() << " floats");
    CHECK(wrong == 0);
  }
  // The types themselves: CUDA's constructor from float is its satfinite conversion.
  for (const float y : {1.0f, 0.3f, 500.0f, -1e9f, std::numeric_limits<float>::infinity()}) {
    INFO("x = " << y);
    CHECK(__nv_fp8_e4m3(y).__x == std::bit_cast<std::uint8_t>(simt::e4m3(y)));
    CHECK(__nv_fp8_e5m2(y).__x == std::bit_cast<std::uint8_t>(simt::e5m2(y)));
  }
}
#else
TEST_CASE("the conversions agree bit for bit with CUDA's own host conversions (cuda_fp8.h)", "[simt][fp8]") {
  FA_SKIP("this build has no CUDA Toolkit (FA_HAVE_CUDA is 0): cuda_fp8.h's conversions are not compared");
}
#endif
