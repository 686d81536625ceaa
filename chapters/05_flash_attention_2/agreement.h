// Chapter 05: how close the kernel must come to chapter 04 (or, where chapter 04 cannot run the
// problem, to chapter 03 on a sample of rows): the bounds that the demo, the tests and the tour use.
//
//   O  relative L2 within ch04::agreement_bound (common/tolerance.h): twice the error of a plain
//      float32 evaluation against float64, plus float32's unit roundoff. Chapters 04 and 05 are
//      both float32 and each is within about that of the exact result, so they are within about
//      twice that of each other.
//   L  per row, against the log-sum-exp of the reference's row of scores in double: L = m + log(l)
//      in float, m exact (it is a score) and log(l) carrying the float sum's error (about
//      seq_len_k * u relative in l, i.e. absolute in log l), so
//        |L - L_ref| <= u (|L_ref| + seq_len_k + 1)      with u rounded up to 1.2e-7.
//      A row that sees no key must be -inf in both; a NaN row must be NaN in both.
//      Against chapter 03 (double scores, where chapter 04 cannot run) L also carries the float
//      rounding of the scores themselves; each row's bound then gains twice the error of the plain
//      float32 evaluation's L on that row (common/tolerance.h's rule, per row).
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <stdexcept>
#include <vector>

#include "common/compare.h"

namespace ch05 {

inline constexpr double kLUnitRoundoff = 1.2e-7;

// The bound on |L - L_ref| for one row (see above); 0 for an infinite or NaN reference, which
// must then be matched exactly. Never throws.
inline double L_bound(double L_ref, std::size_t seq_len_k) {
  if (!std::isfinite(L_ref)) return 0.0;
  return kLUnitRoundoff * (std::fabs(L_ref) + static_cast<double>(seq_len_k) + 1.0);
}

// log(sum_j exp(s_j)) of one row of scores, in double: -inf for a row of only -inf (no key seen),
// NaN when any score is NaN (the kernel's L is NaN there too). Never throws.
inline double logsumexp(std::span<const float> s) {
  double m = -std::numeric_limits<double>::infinity();
  for (float x : s) {
    if (std::isnan(x)) return std::numeric_limits<double>::quiet_NaN();
    m = std::max(m, static_cast<double>(x));
  }
  if (m == -std::numeric_limits<double>::infinity()) return m;
  double l = 0.0;
  for (float x : s) l += std::exp(static_cast<double>(x) - m);
  return m + std::log(l);
}

// The row of L closest to (or furthest past) its bound.
struct WorstL {
  double error = 0.0;  // |L - L_ref| of that row (fa::abs_difference: NaN or inf on one side: inf)
  double bound = 0.0;  // L_bound of that row
  std::size_t row = 0;
  bool pass = true;  // every row within its bound
};

// Compares L with L_ref row by row (both [rows]); `allowance`, when given ([rows]), is added to
// each row's bound. Throws std::invalid_argument for different sizes.
inline WorstL worst_L(std::span<const float> L, std::span<const double> L_ref, std::size_t seq_len_k,
                      std::span<const double> allowance = {}) {
  if (L.size() != L_ref.size() || (!allowance.empty() && allowance.size() != L.size())) {
    throw std::invalid_argument("worst_L: L, L_ref and the allowance differ in size");
  }
  WorstL worst{0.0, L_ref.empty() ? 0.0 : L_bound(L_ref[0], seq_len_k), 0, true};
  double worst_ratio = -1.0;
  for (std::size_t r = 0; r < L.size(); ++r) {
    const double error = fa::abs_difference(L[r], L_ref[r]);
    const double bound = L_bound(L_ref[r], seq_len_k) + (allowance.empty() ? 0.0 : allowance[r]);
    const double ratio = error == 0.0 ? 0.0 : bound > 0.0 ? error / bound : INFINITY;
    if (error > bound) worst.pass = false;
    if (ratio > worst_ratio) {
      worst_ratio = ratio;
      worst.error = error;
      worst.bound = bound;
      worst.row = r;
    }
  }
  return worst;
}

}  // namespace ch05
