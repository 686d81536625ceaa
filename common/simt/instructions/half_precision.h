// The 2-byte floating-point types of the tensor cores, and how two of them share a register.
//
//   simt::bf16   bfloat16: 1 sign bit, 8 exponent bits (float's range), 7 fraction bits
//   simt::f16    IEEE 754 binary16: 1 sign bit, 5 exponent bits, 10 fraction bits; largest finite
//                value 65504, subnormals down to 2^-24
//   pack_bf16x2(lo, hi), pack_f16x2(lo, hi)
//                one 32-bit register of two elements: `lo` in bits 0-15, `hi` in bits 16-31. The
//                PTX ISA's .bf16x2 and .f16x2 operands hold the element with the lower index in
//                the lower half ("Matrix Fragments for mma.m16n8k16": a0 and a1 share the first
//                register, a0 in bits 0-15), so `lo` is the element of the lower column (A, C) or
//                row (B).
//
// Under nvcc these are CUDA's own __nv_bfloat16 and __half (cuda_bf16.h, cuda_fp16.h), and the pack
// functions use __floats2bfloat162_rn / __floats2half2_rn. For the host compiler they are defined
// here (with CUDA's scalar conversion intrinsics __float2bfloat16[_rn], __bfloat162float,
// __float2half[_rn], __half2float), with the same behaviour:
//   - from float: round to nearest, ties to even (the `.rn` of cvt); a NaN stays a NaN (0x7fff, as
//     CUDA's host conversion gives); a value beyond the largest finite one, after rounding, becomes
//     +-inf; f16 keeps subnormals (no flush to zero);
//   - to float: exact (every bf16 and f16 value is a float).
// Source: IEEE 754-2019 (binary16; roundTiesToEven); PTX ISA, "cvt" (.rn) and "Half Precision
// Floating Point Data Types"; CUDA Math API, "Bfloat16 Precision Conversion and Data Movement".
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstring>

namespace simt {
inline namespace gpu {

using bf16 = __nv_bfloat16;
using f16 = __half;

__host__ __device__ inline std::uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);  // .x = lo: the lower 16 bits
  std::uint32_t bits;
  std::memcpy(&bits, &pair, sizeof bits);
  return bits;
}

__host__ __device__ inline std::uint32_t pack_f16x2(float lo, float hi) {
  const __half2 pair = __floats2half2_rn(lo, hi);  // .x = lo: the lower 16 bits
  std::uint32_t bits;
  std::memcpy(&bits, &pair, sizeof bits);
  return bits;
}

}  // namespace gpu
}  // namespace simt

#else  // the host compiler

#include <bit>

namespace simt {
inline namespace cpu {
namespace detail {

constexpr std::uint16_t canonical_nan16 = 0x7fff;

// bfloat16 is the upper half of a float: drop 16 fraction bits, rounding to nearest even. Adding
// 0x7fff plus the lowest kept bit carries into the kept part exactly when the dropped part is
// above one half, or one half with the kept part odd; a carry out of the largest finite value
// gives the infinity's bit pattern, with the sign kept.
constexpr std::uint16_t float_to_bf16_bits(float value) {
  const auto u = std::bit_cast<std::uint32_t>(value);
  if ((u & 0x7fffffffu) > 0x7f800000u) return canonical_nan16;
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

constexpr float bf16_bits_to_float(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

// Shifts `magnitude` right by `shift` (>= 1) bits, rounding to nearest, ties to even.
constexpr std::uint32_t shift_right_round_even(std::uint32_t magnitude, unsigned shift) {
  if (shift >= 32) return 0;
  const std::uint32_t kept = magnitude >> shift;
  const std::uint32_t dropped = magnitude & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1);
  return kept + ((dropped > half || (dropped == half && (kept & 1u))) ? 1u : 0u);
}

// binary32 -> binary16, round to nearest even. Three ranges of |value|:
//   >= 65520 (half-way between 65504 and 2^16; the tie goes to the even 2^16, which is inf): inf
//   <  2^-14 (the smallest normal f16): a subnormal m * 2^-24, m = |value| * 2^24 rounded
//   otherwise: rebias the exponent (127 -> 15), drop 13 fraction bits with rounding; a carry into
//              the exponent field is the correctly rounded next binade
constexpr std::uint16_t float_to_f16_bits(float value) {
  const auto u = std::bit_cast<std::uint32_t>(value);
  const auto sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t magnitude = u & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return canonical_nan16;
  if (magnitude >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);
  if (magnitude < 0x38800000u) {
    const int exponent = static_cast<int>(magnitude >> 23) - 127;  // value = significand * 2^(exponent-23)
    if (exponent < -26) return sign;  // below 2^-26: rounds to zero (so do float subnormals)
    const std::uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
    // |value| * 2^24 = significand * 2^(exponent + 1), and exponent + 1 <= -14 here.
    const auto shift = static_cast<unsigned>(-(exponent + 1));
    return static_cast<std::uint16_t>(sign | shift_right_round_even(significand, shift));
  }
  const std::uint32_t rebiased = magnitude - ((127u - 15u) << 23);
  return static_cast<std::uint16_t>(sign | shift_right_round_even(rebiased, 13));
}

constexpr float f16_bits_to_float(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1fu;
  const std::uint32_t fraction = bits & 0x3ffu;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (fraction << 13));  // inf, NaN
  if (exponent == 0) {  // zero or subnormal: fraction * 2^-24, exact in float
    const float magnitude = static_cast<float>(fraction) * 0x1p-24f;
    return sign != 0 ? -magnitude : magnitude;
  }
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (fraction << 13));
}

}  // namespace detail

// bfloat16 on the CPU. Converts from and to float implicitly, as CUDA's __nv_bfloat16 does.
class bf16 {
 public:
  bf16() = default;
  constexpr bf16(float value) : bits_(detail::float_to_bf16_bits(value)) {}  // NOLINT: implicit as in CUDA
  constexpr operator float() const { return detail::bf16_bits_to_float(bits_); }

 private:
  std::uint16_t bits_;
};

// IEEE binary16 on the CPU. Converts from and to float implicitly, as CUDA's __half does.
class f16 {
 public:
  f16() = default;
  constexpr f16(float value) : bits_(detail::float_to_f16_bits(value)) {}  // NOLINT: implicit as in CUDA
  constexpr operator float() const { return detail::f16_bits_to_float(bits_); }

 private:
  std::uint16_t bits_;
};

static_assert(sizeof(bf16) == 2 && sizeof(f16) == 2, "2-byte types, as on the GPU");

constexpr std::uint32_t pack_bf16x2(float lo, float hi) {
  return static_cast<std::uint32_t>(detail::float_to_bf16_bits(lo)) |
         (static_cast<std::uint32_t>(detail::float_to_bf16_bits(hi)) << 16);
}

constexpr std::uint32_t pack_f16x2(float lo, float hi) {
  return static_cast<std::uint32_t>(detail::float_to_f16_bits(lo)) |
         (static_cast<std::uint32_t>(detail::float_to_f16_bits(hi)) << 16);
}

}  // namespace cpu
}  // namespace simt

// CUDA's conversion intrinsics (cuda_bf16.h, cuda_fp16.h), so that a kernel written with them
// builds on the CPU too: round to nearest even from float, exact to float.
inline simt::cpu::bf16 __float2bfloat16(float value) { return simt::cpu::bf16(value); }
inline simt::cpu::bf16 __float2bfloat16_rn(float value) { return simt::cpu::bf16(value); }
inline float __bfloat162float(simt::cpu::bf16 value) { return static_cast<float>(value); }
inline simt::cpu::f16 __float2half(float value) { return simt::cpu::f16(value); }
inline simt::cpu::f16 __float2half_rn(float value) { return simt::cpu::f16(value); }
inline float __half2float(simt::cpu::f16 value) { return static_cast<float>(value); }

#endif
