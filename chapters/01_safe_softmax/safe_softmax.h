// Chapter 01: softmax, the textbook form and the safe form.
//
// What this chapter adds: the starting point. Softmax turns a row of scores into weights that are
// positive and sum to 1. The textbook formula overflows for scores as small as 89 in float or 710
// in double; subtracting the row's maximum first gives the same weights and never overflows.
//
// The algorithm (safe form, three passes over x):
//   1. m   = max_j x_j                          (pass 1: the maximum)
//   2. l   = sum_j exp(x_j - m)                 (pass 2: the sum, every term <= 1)
//   3. p_i = exp(x_i - m) / l                   (pass 3: normalise)
// Subtracting m changes nothing in exact arithmetic: exp(-m) appears in every numerator and in
// the denominator, and cancels.
//
// Conventions (docs/conventions.md, "Numbers"):
//   - a score of -inf gets weight 0;
//   - a row that is entirely -inf (fully masked) gives all zeros, not NaN;
//   - a NaN anywhere in the row makes every weight NaN (it reaches every weight through l);
//   - an empty row throws std::invalid_argument.
//
// Source: any textbook definition of softmax; the safe form as every deep-learning library computes it
// (e.g. Milakov and Gimelshein 2018, section 2, "safe softmax").
// Run the demo: build/default/bin/ch01_safe_softmax
#pragma once

#include <algorithm>
#include <cmath>
#include <concepts>
#include <limits>
#include <span>
#include <stdexcept>
#include <vector>

namespace ch01 {

// The textbook formula p_i = exp(x_i) / sum_j exp(x_j), kept to show why it is not used: exp
// overflows to inf for x > ~88.7 (float) or ~709.8 (double), and inf/inf is NaN.
// x: one row of scores, length n >= 1. Returns n weights. Throws std::invalid_argument if x is empty.
template <std::floating_point T>
std::vector<T> textbook_softmax(std::span<const T> x) {
  if (x.empty()) throw std::invalid_argument("softmax of an empty row: give at least one score");
  T sum = 0;
  for (T xj : x) sum += std::exp(xj);
  std::vector<T> p(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) p[i] = std::exp(x[i]) / sum;
  return p;
}

// The safe softmax: subtract the row maximum before exponentiating (steps 1-3 above).
// x: one row of scores, length n >= 1. Returns n weights in [0, 1] that sum to 1 (all zeros for an
// all -inf row; all NaN if any score is NaN). Throws std::invalid_argument if x is empty.
template <std::floating_point T>
std::vector<T> safe_softmax(std::span<const T> x) {
  if (x.empty()) throw std::invalid_argument("softmax of an empty row: give at least one score");

  // 1. The maximum. std::fmax would skip a NaN; we want it to reach the output, so a NaN is
  //    carried by the sum below instead (exp(NaN - m) is NaN).
  T m = -std::numeric_limits<T>::infinity();
  for (T xj : x) m = xj > m ? xj : m;

  // No finite maximum: either every score is -inf (a fully masked row, defined as all zeros) or
  // the row holds NaN with nothing larger than -inf (NaN never compares greater, so it is never m).
  if (m == -std::numeric_limits<T>::infinity()) {
    const bool has_nan = std::any_of(x.begin(), x.end(), [](T xj) { return std::isnan(xj); });
    return std::vector<T>(x.size(), has_nan ? std::numeric_limits<T>::quiet_NaN() : T(0));
  }

  // 2. The sum of exp(x_j - m); every term is at most exp(0) = 1, so nothing overflows.
  T l = 0;
  for (T xj : x) l += std::exp(xj - m);

  // 3. Normalise.
  std::vector<T> p(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) p[i] = std::exp(x[i] - m) / l;
  return p;
}

// How far safe_softmax's weights may be from the definition evaluated exactly, relative to each
// weight, for n scores in type T: 64 eps sqrt(n + 1). Each weight is an exp (relative error about
// 1 ulp, amplified by |x_i - m|, up to ~40 ulp of the argument's rounding) divided by a sum of n
// terms (relative error at most n eps, in practice ~sqrt(n) eps); 64 covers the worst case measured
// with room, and a wrong formula is off by O(1). The demo and the tests both use it. Never throws.
template <std::floating_point T>
double definition_bound(std::size_t n) {
  return 64.0 * std::numeric_limits<T>::epsilon() * std::sqrt(static_cast<double>(n) + 1.0);
}

// Convenience overloads for a std::vector argument.
template <std::floating_point T>
std::vector<T> textbook_softmax(const std::vector<T>& x) {
  return textbook_softmax(std::span<const T>(x));
}
template <std::floating_point T>
std::vector<T> safe_softmax(const std::vector<T>& x) {
  return safe_softmax(std::span<const T>(x));
}

}  // namespace ch01
