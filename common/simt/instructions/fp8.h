// The 1-byte floating-point types of FP8 attention (FlashAttention-3's e4m3), and the conversions
// that the GPU does in one instruction for two of them at a time.
//
//   simt::e4m3   1 sign bit, 4 exponent bits (bias 7), 3 fraction bits: S.EEEE.MMM
//                  normal (E = 1..15):  (-1)^S * 2^(E-7) * (1 + M/8)
//                  subnormal (E = 0):   (-1)^S * M * 2^-9
//                  NaN: S.1111.111 (0x7f, 0xff) and nothing else; no infinity, so S.1111.000 to
//                  S.1111.110 are finite: the largest finite value is 0x7e = 448, the smallest
//                  normal 2^-6, the smallest subnormal 2^-9
//   simt::e5m2   1 sign bit, 5 exponent bits (bias 15), 2 fraction bits: S.EEEEE.MM, IEEE-like
//                  normal (E = 1..30):  (-1)^S * 2^(E-15) * (1 + M/4)
//                  subnormal (E = 0):   (-1)^S * M * 2^-16
//                  E = 31: infinity if M = 0 (0x7c, 0xfc), NaN otherwise; the largest finite
//                  value is 0x7b = 57344, the smallest normal 2^-14, the smallest subnormal 2^-16
//                  (e5m2 is the upper byte of an IEEE binary16)
//
//   cvt_rn_satfinite_e4m3x2_f32(lo, hi), cvt_rn_satfinite_e5m2x2_f32(lo, hi)
//       cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32 d, hi, lo: two floats to one 16-bit register, `lo`'s
//       code in bits 0-7 and `hi`'s in bits 8-15. The PTX ISA ("cvt", Semantics) puts its first
//       source, a, in the upper byte (d[15:8] = convert(a); d[7:0] = convert(b)), as cvt.f16x2.f32
//       does with halves; here, as in pack_f16x2 (half_precision.h), the lower element comes
//       first, and the asm passes (hi, lo).
//   cvt_f16x2_e4m3x2(pair), cvt_f16x2_e5m2x2(pair)
//       cvt.rn.f16x2.{e4m3x2,e5m2x2} d, a: the two codes of a 16-bit register to two IEEE
//       binary16 in one 32-bit register, the lower byte's in bits 0-15, the upper byte's in bits
//       16-31 (PTX ISA, "cvt": "the value converted from the upper 8 bits of a is stored in the
//       upper 16 bits of d").
//   float_to_e4m3_bits(x), float_to_e5m2_bits(x), e4m3_bits_to_float(code), e5m2_bits_to_float
//       one element each way, with the rounding and saturation of the x2 forms.
//
// From float (cvt.rn.satfinite):
//   - round to nearest, ties to even (the `.rn`), subnormals kept (no flush to zero); below half
//     the smallest subnormal a value becomes a zero of its own sign;
//   - .satfinite: a value whose rounded magnitude would exceed the largest finite one becomes that
//     largest value with its sign (e4m3: +-448, e5m2: +-57344), and so do +-inf: neither format
//     gets an infinity out of these conversions;
//   - a NaN (of either sign, quiet or signalling) becomes a NaN: 0x7f for both formats, the code
//     CUDA's own conversion (__nv_cvt_float_to_fp8, cuda_fp8.hpp) gives. The PTX ISA says only
//     "NaN", not which one.
// To binary16 or float: exact, since every e4m3 and e5m2 value is a binary16 value. A NaN becomes
// binary16 0x7fff (CUDA's canonical NaN, cuda_fp8.hpp's __nv_cvt_fp8_to_halfraw) or float 0x7fffffff.
//
// Under nvcc the types are CUDA's own __nv_fp8_e4m3 and __nv_fp8_e5m2 (cuda_fp8.h), and in device
// code each function is the PTX instruction itself (inline asm), which exists from sm_89 (Ada) on:
// compiled for an older architecture (the project builds for sm_80 when no GPU is present), the
// functions trap at run time instead of failing the build, as tensor_core_gpu.h does. On the host,
// for nvcc and for the host compiler alike, the functions are the emulation below
// (simt::fp8_emulation), and for the host compiler the types are simt's own 1-byte classes with
// CUDA's behaviour: explicit from float (cvt.rn.satfinite), explicit to float (exact). Both are
// trivially copyable 1-byte types, so std::bit_cast<std::uint8_t>(x) is the code of x.
//
// Nothing here throws; every function takes and returns plain values.
// Source: PTX ISA, "Alternate Floating Point Data Formats" (the layouts), "cvt" (Semantics, the
// .satfinite modifier, Target ISA notes: sm_89); P. Micikevicius et al., "FP8 Formats for Deep
// Learning", 2022, arXiv:2209.05433 (Table 1: the two formats, e4m3's single NaN and no infinity).
#pragma once

#include <bit>
#include <cstdint>

#if defined(__CUDACC__)
#include <cuda_fp8.h>
#endif

namespace simt {

// What the conversions compute, bit by bit, in plain C++: the host compiler's functions, and the
// host side of nvcc's. The same source in both compilations (no inline namespace needed).
namespace fp8_emulation {

// One FP8 format: what the encoder and decoder need to know of it.
struct Format {
  unsigned mantissa_bits;     // 3 (e4m3) or 2 (e5m2)
  unsigned bias;              // 7 or 15
  bool has_infinity;          // e5m2 has +-inf (S.11111.00); e4m3 spends that code on finite values
  std::uint8_t largest_code;  // the largest finite magnitude's code: 0x7e (448) or 0x7b (57344)
  float largest;              // its value
};

inline constexpr Format e4m3{3, 7, false, 0x7e, 448.0f};
inline constexpr Format e5m2{2, 15, true, 0x7b, 57344.0f};

inline constexpr std::uint8_t canonical_nan = 0x7f;       // the NaN that a conversion from float gives
inline constexpr std::uint16_t canonical_nan16 = 0x7fff;  // and a conversion to binary16
inline constexpr std::uint32_t canonical_nan32 = 0x7fffffffu;

// Shifts `magnitude` right by `shift` (>= 1) bits, rounding to nearest, ties to even.
constexpr std::uint32_t shift_right_round_even(std::uint32_t magnitude, unsigned shift) {
  if (shift >= 32) return 0;  // callers' magnitudes are below 2^24, far below half of 2^32
  const std::uint32_t kept = magnitude >> shift;
  const std::uint32_t dropped = magnitude & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1);
  return kept + ((dropped > half || (dropped == half && (kept & 1u))) ? 1u : 0u);
}

// binary32 -> FP8, round to nearest even, .satfinite. With E the float's exponent field, three
// ranges of |value|:
//   >= the largest finite value (inf included): the largest finite code. A value above it rounds
//      to it or to something larger, which .satfinite clamps back to it;
//   below the smallest normal, 2^(1 - bias): a subnormal, code = |value| / 2^(1 - bias - M)
//      rounded; |value| = significand * 2^(E - 150), so that is the significand shifted right by
//      151 - bias - M - E bits. A carry out of the fraction gives the smallest normal's code;
//   otherwise: rebias the exponent field (127 -> bias) and drop 23 - M fraction bits with
//      rounding; a carry into the exponent field is the correctly rounded next binade.
constexpr std::uint8_t encode(float value, const Format& format) {
  const auto u = std::bit_cast<std::uint32_t>(value);
  const auto sign = static_cast<std::uint8_t>((u >> 24) & 0x80u);
  const std::uint32_t magnitude = u & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return canonical_nan;
  if (magnitude >= std::bit_cast<std::uint32_t>(format.largest)) {
    return static_cast<std::uint8_t>(sign | format.largest_code);
  }
  const std::uint32_t exponent = magnitude >> 23;
  if (exponent < 128 - format.bias) {
    if (exponent == 0) return sign;  // zero or a float subnormal (< 2^-126): rounds to zero
    const std::uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
    const unsigned shift = 151 - format.bias - format.mantissa_bits - exponent;
    return static_cast<std::uint8_t>(sign | shift_right_round_even(significand, shift));
  }
  const std::uint32_t rebiased = magnitude - ((127u - format.bias) << 23);
  return static_cast<std::uint8_t>(sign | shift_right_round_even(rebiased, 23 - format.mantissa_bits));
}

constexpr bool is_nan(std::uint8_t code, const Format& format) {
  const unsigned magnitude = code & 0x7fu;
  if (!format.has_infinity) return magnitude == 0x7fu;  // e4m3: S.1111.111 only
  return magnitude > 0x7cu;                             // e5m2: S.11111.01, .10, .11
}

// FP8 -> binary32, exact: the exponent field rebiased (bias -> 127) with the fraction bits moved
// to the top of float's fraction; a subnormal is M * 2^(1 - bias - M), a product exact in float.
constexpr float decode(std::uint8_t code, const Format& format) {
  if (is_nan(code, format)) return std::bit_cast<float>(canonical_nan32);
  const std::uint32_t sign = static_cast<std::uint32_t>(code & 0x80u) << 24;
  const unsigned m = format.mantissa_bits;
  const std::uint32_t exponent = (code & 0x7fu) >> m;
  const std::uint32_t fraction = code & ((1u << m) - 1u);
  if (format.has_infinity && exponent == (0x7fu >> m)) return std::bit_cast<float>(sign | 0x7f800000u);
  if (exponent == 0) {
    // 2^(1 - bias - M) as a float: its exponent field is 127 + 1 - bias - M (>= 111 here).
    const float unit = std::bit_cast<float>((128u - format.bias - m) << 23);
    const float magnitude = static_cast<float>(fraction) * unit;
    return sign != 0 ? -magnitude : magnitude;
  }
  return std::bit_cast<float>(sign | ((exponent + 127u - format.bias) << 23) | (fraction << (23 - m)));
}

// FP8 -> binary16, exact. e5m2 has binary16's exponent width and bias: it is the upper byte. An
// e4m3 value (2^-9 <= |v| <= 448, or zero) is a normal binary16 with at most 3 fraction bits:
// rebias its float exponent (127 -> 15) and keep the top 10 fraction bits, which are all of them.
constexpr std::uint16_t to_f16_bits(std::uint8_t code, const Format& format) {
  if (is_nan(code, format)) return canonical_nan16;
  if (format.has_infinity) return static_cast<std::uint16_t>(code << 8);
  const auto u = std::bit_cast<std::uint32_t>(decode(code, format));
  const auto sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  if ((u & 0x7fffffffu) == 0) return sign;
  return static_cast<std::uint16_t>(sign | ((((u >> 23) & 0xffu) - 112u) << 10) | ((u & 0x7fffffu) >> 13));
}

constexpr std::uint16_t pack_x2(float lo, float hi, const Format& format) {
  return static_cast<std::uint16_t>(encode(lo, format) | (encode(hi, format) << 8));
}

constexpr std::uint32_t unpack_f16x2(std::uint16_t pair, const Format& format) {
  const auto lo = static_cast<std::uint8_t>(pair & 0xffu);
  const auto hi = static_cast<std::uint8_t>(pair >> 8);
  return static_cast<std::uint32_t>(to_f16_bits(lo, format)) |
         (static_cast<std::uint32_t>(to_f16_bits(hi, format)) << 16);
}

}  // namespace fp8_emulation

}  // namespace simt

#if defined(__CUDACC__)

// cvt with .e4m3x2 or .e5m2x2 exists from sm_89 on (PTX ISA, "cvt", Target ISA notes). Compiled
// for an older architecture, the device side of each function traps, so that a kernel that calls
// it stops at once instead of computing garbage, and every other kernel still builds.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 890
#define SIMT_SM89_ONLY(...) __VA_ARGS__
#else
#define SIMT_SM89_ONLY(...) __trap()
#endif

namespace simt {
inline namespace gpu {

// CUDA's own types: one byte, the code in member __x; explicit from float (satfinite), explicit to
// float. CUDA Math API, "FP8 Intrinsics" (__nv_fp8_e4m3, __nv_fp8_e5m2).
using e4m3 = __nv_fp8_e4m3;
using e5m2 = __nv_fp8_e5m2;
static_assert(sizeof(e4m3) == 1 && sizeof(e5m2) == 1, "1-byte types");

namespace fp8_detail {

enum class Kind { e4m3, e5m2 };

template <Kind kind>
constexpr const fp8_emulation::Format& format() {
  return kind == Kind::e4m3 ? fp8_emulation::e4m3 : fp8_emulation::e5m2;
}

// cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32 d, a, b: the PTX's first source, a, goes to the upper byte,
// so a = hi and b = lo. An asm string must be a literal: one per format.
template <Kind kind>
__host__ __device__ inline std::uint16_t cvt_x2_f32(float lo, float hi) {
#if defined(__CUDA_ARCH__)
  std::uint16_t pair = 0;
  if constexpr (kind == Kind::e4m3) {
    SIMT_SM89_ONLY(asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(pair) : "f"(hi), "f"(lo)));
  } else {
    SIMT_SM89_ONLY(asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(pair) : "f"(hi), "f"(lo)));
  }
  return pair;
#else
  return fp8_emulation::pack_x2(lo, hi, format<kind>());
#endif
}

// cvt.rn.f16x2.{e4m3x2,e5m2x2} d, a: the lower byte of a to the lower half of d.
template <Kind kind>
__host__ __device__ inline std::uint32_t cvt_f16x2(std::uint16_t pair) {
#if defined(__CUDA_ARCH__)
  std::uint32_t halves = 0;
  if constexpr (kind == Kind::e4m3) {
    SIMT_SM89_ONLY(asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(halves) : "h"(pair)));
  } else {
    SIMT_SM89_ONLY(asm("cvt.rn.f16x2.e5m2x2 %0, %1;" : "=r"(halves) : "h"(pair)));
  }
  return halves;
#else
  return fp8_emulation::unpack_f16x2(pair, format<kind>());
#endif
}

// One code to float: on the device, to binary16 by the x2 instruction, then cvt.f32.f16 (exact).
template <Kind kind>
__host__ __device__ inline float to_float(std::uint8_t code) {
#if defined(__CUDA_ARCH__)
  const auto half = static_cast<std::uint16_t>(cvt_f16x2<kind>(code) & 0xffffu);
  float value;
  asm("cvt.f32.f16 %0, %1;" : "=f"(value) : "h"(half));
  return value;
#else
  return fp8_emulation::decode(code, format<kind>());
#endif
}

}  // namespace fp8_detail

// cvt.rn.satfinite.e4m3x2.f32 d, hi, lo: `lo`'s code in bits 0-7, `hi`'s in bits 8-15, rounded to
// nearest even and saturated to +-448 (+-inf too); a NaN gives a NaN. Throws nothing. PTX ISA, "cvt".
__host__ __device__ inline std::uint16_t cvt_rn_satfinite_e4m3x2_f32(float lo, float hi) {
  return fp8_detail::cvt_x2_f32<fp8_detail::Kind::e4m3>(lo, hi);
}
// cvt.rn.satfinite.e5m2x2.f32 d, hi, lo: as above, saturated to +-57344 (no infinity comes out).
__host__ __device__ inline std::uint16_t cvt_rn_satfinite_e5m2x2_f32(float lo, float hi) {
  return fp8_detail::cvt_x2_f32<fp8_detail::Kind::e5m2>(lo, hi);
}

// cvt.rn.f16x2.{e4m3x2,e5m2x2} d, pair: the code in bits 0-7 to binary16 in bits 0-15, the code in
// bits 8-15 to bits 16-31; exact. Throws nothing. PTX ISA, "cvt".
__host__ __device__ inline std::uint32_t cvt_f16x2_e4m3x2(std::uint16_t pair) {
  return fp8_detail::cvt_f16x2<fp8_detail::Kind::e4m3>(pair);
}
__host__ __device__ inline std::uint32_t cvt_f16x2_e5m2x2(std::uint16_t pair) {
  return fp8_detail::cvt_f16x2<fp8_detail::Kind::e5m2>(pair);
}

// float -> e4m3 or e5m2 code: the lower byte of the x2 instruction, whose upper source is 0. Round
// to nearest even, .satfinite, NaN -> a NaN. Throws nothing. PTX ISA, "cvt".
__host__ __device__ inline std::uint8_t float_to_e4m3_bits(float value) {
  return static_cast<std::uint8_t>(cvt_rn_satfinite_e4m3x2_f32(value, 0.0f) & 0xffu);
}
__host__ __device__ inline std::uint8_t float_to_e5m2_bits(float value) {
  return static_cast<std::uint8_t>(cvt_rn_satfinite_e5m2x2_f32(value, 0.0f) & 0xffu);
}

// e4m3 or e5m2 code -> float, exact (a NaN code gives a NaN). Throws nothing. PTX ISA, "cvt".
__host__ __device__ inline float e4m3_bits_to_float(std::uint8_t code) {
  return fp8_detail::to_float<fp8_detail::Kind::e4m3>(code);
}
__host__ __device__ inline float e5m2_bits_to_float(std::uint8_t code) {
  return fp8_detail::to_float<fp8_detail::Kind::e5m2>(code);
}

}  // namespace gpu
}  // namespace simt

#else  // the host compiler

#include <type_traits>

namespace simt {
inline namespace cpu {

// float -> e4m3 or e5m2 code: round to nearest even, saturate to the largest finite value (also
// +-inf), NaN -> 0x7f. Throws nothing. PTX ISA, "cvt" (.rn, .satfinite).
constexpr std::uint8_t float_to_e4m3_bits(float value) { return fp8_emulation::encode(value, fp8_emulation::e4m3); }
constexpr std::uint8_t float_to_e5m2_bits(float value) { return fp8_emulation::encode(value, fp8_emulation::e5m2); }

// e4m3 or e5m2 code -> float, exact; a NaN code gives a NaN, e5m2's infinities +-inf. Throws
// nothing. PTX ISA, "Alternate Floating Point Data Formats".
constexpr float e4m3_bits_to_float(std::uint8_t code) { return fp8_emulation::decode(code, fp8_emulation::e4m3); }
constexpr float e5m2_bits_to_float(std::uint8_t code) { return fp8_emulation::decode(code, fp8_emulation::e5m2); }

// cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32 d, hi, lo: `lo`'s code in bits 0-7, `hi`'s in bits 8-15,
// each as float_to_e4m3_bits / float_to_e5m2_bits. Throws nothing. PTX ISA, "cvt".
constexpr std::uint16_t cvt_rn_satfinite_e4m3x2_f32(float lo, float hi) {
  return fp8_emulation::pack_x2(lo, hi, fp8_emulation::e4m3);
}
constexpr std::uint16_t cvt_rn_satfinite_e5m2x2_f32(float lo, float hi) {
  return fp8_emulation::pack_x2(lo, hi, fp8_emulation::e5m2);
}

// cvt.rn.f16x2.{e4m3x2,e5m2x2} d, pair: the code in bits 0-7 to binary16 in bits 0-15, the code in
// bits 8-15 to bits 16-31; exact, a NaN code gives 0x7fff. Throws nothing. PTX ISA, "cvt".
constexpr std::uint32_t cvt_f16x2_e4m3x2(std::uint16_t pair) {
  return fp8_emulation::unpack_f16x2(pair, fp8_emulation::e4m3);
}
constexpr std::uint32_t cvt_f16x2_e5m2x2(std::uint16_t pair) {
  return fp8_emulation::unpack_f16x2(pair, fp8_emulation::e5m2);
}

// e4m3 and e5m2 on the CPU, with the conversions of CUDA's __nv_fp8_e4m3 and __nv_fp8_e5m2:
// explicit from float (round to nearest even, .satfinite), explicit to float (exact).
template <const fp8_emulation::Format& format>
class Float8 {
 public:
  Float8() = default;
  constexpr explicit Float8(float value) : bits_(fp8_emulation::encode(value, format)) {}
  constexpr explicit operator float() const { return fp8_emulation::decode(bits_, format); }

 private:
  std::uint8_t bits_;
};

using e4m3 = Float8<fp8_emulation::e4m3>;
using e5m2 = Float8<fp8_emulation::e5m2>;

static_assert(sizeof(e4m3) == 1 && sizeof(e5m2) == 1, "1-byte types, as on the GPU");
static_assert(std::is_trivially_copyable_v<e4m3> && std::is_trivially_copyable_v<e5m2>,
              "std::bit_cast<std::uint8_t> gives the code");

}  // namespace cpu
}  // namespace simt

#endif
