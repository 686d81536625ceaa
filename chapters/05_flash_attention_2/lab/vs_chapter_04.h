// Chapter 05: how close the kernel must come to chapter 04 (or, where chapter 04 cannot run the
// problem, to chapter 03 on a sample of rows): the bounds that the demo, the tests and the tour use.
//
//   O  relative L2 within ch04::agreement_bound (common/tolerance.h): twice the error of a plain
//      float32 evaluation against float64, plus float32's unit roundoff. Chapters 04 and 05 are
//      both float32 and each is within about that of the exact result, so they are within about
//      twice that of each other.
//   L  per row, against the log-sum-exp of the reference's row of scores in double: L = m + log(l)
//      in float, m exact (it is a score) and log(l) carrying the float sum's error (about
//      seq_len_k * u relative in l, i.e. absolute in log l), and the sum m + log(l) rounded once,
//      by at most u |L|. |L| is bounded from the inputs alone, never from an evaluation under test
//      (L_magnitudes below: |L| <= M + ln(seq_len_k), M = |scale| |q| max_j |k_j|), so
//        |L - L_ref| <= u (M + ln(seq_len_k) + seq_len_k + 1)      with u rounded up to 1.2e-7,
//      and a broken reference cannot widen the bound it is checked with.
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
#include "common/tensor.h"

namespace ch05 {

inline constexpr double kLUnitRoundoff = 1.2e-7;

// An upper bound on |L| for every row, from the inputs alone: each score s_ij = scale q_i . k_j
// lies within M_i = |scale| |q_i| max_j |k_j| of 0 (Cauchy-Schwarz), and L_i = log sum_j exp(s_ij)
// lies between max_j s_ij >= -M_i and max_j s_ij + ln(seq_len_k) <= M_i + ln(seq_len_k). So
// |L_i| <= M_i + ln(seq_len_k), whatever the mask leaves of the row. Q: [batch, heads, seq_len_q,
// head_dim], K: [batch, heads, seq_len_k, head_dim], float32; the result, in double, is in L's
// order, [batch * heads * seq_len_q] (NaN for a row whose q holds a NaN). Throws
// std::invalid_argument for shapes that do not fit together.
inline std::vector<double> L_magnitudes(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, double scale) {
  const fa::Shape4 qs = Q.shape, ks = K.shape;
  if (qs.batch != ks.batch || qs.heads != ks.heads || qs.head_dim != ks.head_dim) {
    throw std::invalid_argument("L_magnitudes: Q " + qs.str() + " and K " + ks.str() +
                                " differ in batch, heads or head_dim");
  }
  const auto norm = [d = qs.head_dim](const float* x) {
    double sum = 0.0;
    for (std::size_t c = 0; c < d; ++c) sum += static_cast<double>(x[c]) * x[c];
    return std::sqrt(sum);
  };
  const double log_keys = ks.seq_len > 0 ? std::log(static_cast<double>(ks.seq_len)) : 0.0;
  std::vector<double> magnitudes;
  magnitudes.reserve(qs.batch * qs.heads * qs.seq_len);
  for (std::size_t bh = 0; bh < qs.batch * qs.heads; ++bh) {
    double k_max = 0.0;
    for (std::size_t j = 0; j < ks.seq_len; ++j)
      k_max = std::max(k_max, norm(&K.values[(bh * ks.seq_len + j) * ks.head_dim]));
    for (std::size_t i = 0; i < qs.seq_len; ++i) {
      magnitudes.push_back(std::fabs(scale) * norm(&Q.values[(bh * qs.seq_len + i) * qs.head_dim]) * k_max + log_keys);
    }
  }
  return magnitudes;
}

// The bound on |L - L_ref| for one row (see above): L_magnitude the row's bound on |L| from
// L_magnitudes. 0 for an infinite or NaN reference, which must then be matched exactly; infinite
// where L_magnitude is (a bound that checks nothing: worst_L fails the row). Never throws.
inline double L_bound(double L_ref, double L_magnitude, std::size_t seq_len_k) {
  if (!std::isfinite(L_ref)) return 0.0;
  if (!std::isfinite(L_magnitude)) return INFINITY;
  return kLUnitRoundoff * (L_magnitude + static_cast<double>(seq_len_k) + 1.0);
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
  double bound = 0.0;  // the bound of that row
  std::size_t row = 0;
  bool pass = true;  // every row within its bound
};

// Compares L with L_ref row by row, each row against its own bound (L, L_ref and bounds [rows]): the
// first row past its bound, or where every row is within, the one closest to it; and whether every
// row is within (so a FAIL's figures are those of a row that failed). A row whose bound is not
// finite fails: it would check nothing. Throws std::invalid_argument for different sizes.
inline WorstL worst_row(std::span<const float> L, std::span<const double> L_ref, std::span<const double> bounds) {
  if (L.size() != L_ref.size() || L.size() != bounds.size()) {
    throw std::invalid_argument("worst_row: L, L_ref and the bounds differ in size");
  }
  WorstL worst{0.0, bounds.empty() ? 0.0 : bounds[0], 0, true};
  double worst_ratio = -1.0;
  for (std::size_t r = 0; r < L.size(); ++r) {
    const double error = fa::abs_difference(L[r], L_ref[r]);
    const bool within = error <= bounds[r] && std::isfinite(bounds[r]);
    const double ratio = !within ? INFINITY : error == 0.0 ? 0.0 : bounds[r] > 0.0 ? error / bounds[r] : INFINITY;
    if (!within && !worst.pass) continue;  // the first row that fails stays the one named
    if (!within) worst.pass = false;
    if (ratio > worst_ratio || !within) {
      worst_ratio = ratio;
      worst = {error, bounds[r], r, worst.pass};
    }
  }
  return worst;
}

// worst_row with this chapter's bound, L_bound, for each row (L, L_ref and L_magnitude [rows];
// L_magnitude from L_magnitudes, on the same rows); `allowance`, when given ([rows]), is added to
// each row's bound. Throws std::invalid_argument for different sizes.
inline WorstL worst_L(std::span<const float> L, std::span<const double> L_ref, std::span<const double> L_magnitude,
                      std::size_t seq_len_k, std::span<const double> allowance = {}) {
  if (L_ref.size() != L_magnitude.size() || (!allowance.empty() && allowance.size() != L_ref.size())) {
    throw std::invalid_argument("worst_L: L, L_ref, L_magnitude and the allowance differ in size");
  }
  std::vector<double> bounds(L_ref.size());
  for (std::size_t r = 0; r < bounds.size(); ++r) {
    bounds[r] = L_bound(L_ref[r], L_magnitude[r], seq_len_k) + (allowance.empty() ? 0.0 : allowance[r]);
  }
  return worst_row(L, L_ref, bounds);
}

}  // namespace ch05
