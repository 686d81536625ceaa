// The GPU's fast base-2 exponential, for both backends: the one instruction a FlashAttention-2
// kernel spends on each score.
//
//   simt::ex2_approx_ftz(x)   ex2.approx.ftz.f32: 2^x, approximately, with subnormal inputs and
//                             results flushed to zero
//
// Under nvcc it is the PTX instruction itself (inline asm: one MUFU.EX2 in the machine code). The
// CUDA function exp2f compiles to the same approximation without .ftz, wrapped in a range check
// and two multiplies that keep subnormal results; nvcc's --use_fast_math would turn exp2f into
// this instruction for a whole program, which the chapters do not want.
//
// On the CPU it computes what the instruction promises, with std::exp2f in place of the
// approximation:
//   - an input whose magnitude is below 2^-126 (a subnormal, or zero) is 0, so the result is 1;
//   - a result below 2^-126 (2^x for x < -126) is +0;
//   - -inf gives +0, +inf gives +inf, NaN gives NaN.
// The two differ only in the approximation itself: the CUDA C++ Programming Guide gives exp2f
// (the same hardware approximation) a maximum error of 2 ulp, std::exp2f is within 1 ulp; both are
// far below the 2^-8 or 2^-11 to which a FlashAttention kernel then rounds P.
// Source: PTX ISA, "ex2" (.approx, .ftz: "subnormal inputs and results are flushed to
// sign-preserving zero"); CUDA C++ Programming Guide, "Mathematical Functions" (exp2f: 2 ulp).
#pragma once

#if defined(__CUDACC__)

namespace simt {
inline namespace gpu {

__device__ __forceinline__ float ex2_approx_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace gpu
}  // namespace simt

#else  // the host compiler

#include <cmath>

namespace simt {
inline namespace cpu {

inline float ex2_approx_ftz(float x) {
  constexpr float smallest_normal = 0x1p-126f;
  if (std::fabs(x) < smallest_normal) x = 0.0f;  // a subnormal input is flushed to zero
  const float y = std::exp2(x);
  return y < smallest_normal ? 0.0f : y;  // and so is a subnormal result (NaN fails the test: stays NaN)
}

}  // namespace cpu
}  // namespace simt

#endif
