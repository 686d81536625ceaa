// How close a low-precision kernel must come to its reference: a bound that follows the input.
//
// A fixed bound such as "relative L2 <= 1e-6" is right for scores of order 1 and wrong elsewhere:
// with peaked scores (a large scale, or Q and K with large entries) exp() amplifies the rounding of
// every score, and a correct float32 kernel measures 1.6e-6. So each chapter compares against the
// error that a plain evaluation of the same formula in the same precision makes against the float64
// reference (chapter 03's plain_attention_rows), on the same input:
//
//   err(kernel, float64 reference) <= 2 * err(plain evaluation, float64 reference) + u
//
// with u the unit roundoff of the precision (2^-24 for float32) as the small absolute term that
// keeps the bound above zero where the plain evaluation happens to be exact. This is the rule of
// FlashAttention's own tests (its test_flash_attn.py asserts the output's error is at most twice
// that of a PyTorch evaluation in the same precision, plus a small tolerance). It holds for a
// correct kernel whatever the input, and still fails at once for a lost tile, a wrong mask or a
// missing rescale (errors of order 1e-3 to 1). Errors are relative L2 distances (common/compare.h).
#pragma once

#include <cmath>
#include <string>

#include <fmt/format.h>

namespace fa {

inline constexpr double kFloat32UnitRoundoff = 0x1p-24;  // 5.96e-8

// The bound above, from the plain evaluation's error `plain_error` (relative L2) and the unit
// roundoff `u` of the precision. Never throws.
inline double bound_from_plain(double plain_error, double u = kFloat32UnitRoundoff) { return 2.0 * plain_error + u; }

// "2 x 3.1e-07 + 6e-08 = 6.8e-07": how the bound was made, for a demo to print; where the plain
// evaluation's error is infinite or NaN (it overflowed on this input), says that there is no bound,
// which every verdict counts as a FAIL (common/program.h, within). Never throws.
inline std::string explain_bound(double plain_error, double u = kFloat32UnitRoundoff) {
  const std::string made = fmt::format("2 x {:.2g} (a plain evaluation's error) + {:.1g} = {:.2g}", plain_error, u,
                                       bound_from_plain(plain_error, u));
  if (std::isfinite(plain_error)) return made;
  return made + ": no bound, since a plain float32 evaluation does not survive this input (a FAIL)";
}

}  // namespace fa
