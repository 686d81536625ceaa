// Error measures between a computed result and a reference, and a readable report of the worst
// element. Every chapter's tests compare against the chapter before with these.
//
//   max_abs  max_i |out_i - ref_i|
//   max_rel  max_i |out_i - ref_i| / |ref_i|            (over the i with ref_i != 0)
//   rel_l2   ||out - ref||_2 / ||ref||_2                (||out - ref||_2 when ref is all zeros)
//   ulp_distance(a, b)  how many representable numbers of the type lie between a and b
//
// Special values: where out_i and ref_i are both NaN, or the same infinity, the element counts as
// equal (difference 0); any other pairing with a NaN or an infinity counts as an infinite
// difference, so a NaN where a number was expected can never pass a tolerance. The NaN and
// infinities on each side are also counted (ErrorStats::out_nan ... nonfinite_mismatch), so that
// a report never says "agrees" over non-finite values without saying how many there are and
// whether they sit where the reference has the same value (nonfinite_report).
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <fmt/format.h>

namespace fa {

struct ErrorStats {
  double max_abs = 0.0;
  double max_rel = 0.0;
  double rel_l2 = 0.0;
  std::size_t count = 0;        // elements compared
  std::size_t worst_index = 0;  // index of the largest absolute difference
  double worst_out = 0.0;       // out[worst_index]
  double worst_ref = 0.0;       // ref[worst_index]
  std::size_t out_nan = 0;      // NaN in the result
  std::size_t out_inf = 0;      // +inf or -inf in the result
  std::size_t ref_nan = 0;      // NaN in the reference
  std::size_t ref_inf = 0;      // +inf or -inf in the reference
  // Elements where one side is non-finite and the other is not the same value (NaN against a
  // number, inf against -inf, a number against inf). Zero means: the same non-finite positions.
  std::size_t nonfinite_mismatch = 0;
  std::size_t first_mismatch = 0;  // index of the first such element (when there is one)
};

// True when out and ref are non-finite at the same positions with the same values, and the
// finite elements are within `bound` in relative L2. (rel_l2 is infinite when they are not, so
// this is the same as rel_l2 <= bound; it says why.)
inline bool agrees(const ErrorStats& s, double bound) { return s.nonfinite_mismatch == 0 && s.rel_l2 <= bound; }

// |a - b| with the special-value rules of this header.
inline double abs_difference(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) {
    return std::isnan(a) && std::isnan(b) ? 0.0 : std::numeric_limits<double>::infinity();
  }
  if (std::isinf(a) || std::isinf(b)) {
    return a == b ? 0.0 : std::numeric_limits<double>::infinity();
  }
  return std::fabs(a - b);
}

// Compares out against ref element by element. Throws std::invalid_argument when the sizes differ.
template <class A, class B>
ErrorStats compare(std::span<const A> out, std::span<const B> ref) {
  if (out.size() != ref.size()) {
    throw std::invalid_argument(
        fmt::format("compare: result has {} values but the reference has {}", out.size(), ref.size()));
  }
  ErrorStats s;
  s.count = out.size();
  long double diff2 = 0.0L;
  long double ref2 = 0.0L;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const double o = static_cast<double>(out[i]);
    const double r = static_cast<double>(ref[i]);
    const double d = abs_difference(o, r);
    s.out_nan += std::isnan(o);
    s.out_inf += std::isinf(o);
    s.ref_nan += std::isnan(r);
    s.ref_inf += std::isinf(r);
    if ((!std::isfinite(o) || !std::isfinite(r)) && d != 0.0) {
      if (s.nonfinite_mismatch++ == 0) s.first_mismatch = i;
    }
    if (i == 0 || d > s.max_abs) {
      s.max_abs = d;
      s.worst_index = i;
      s.worst_out = o;
      s.worst_ref = r;
    }
    if (r != 0.0 && std::isfinite(r)) s.max_rel = std::max(s.max_rel, d / std::fabs(r));
    diff2 += static_cast<long double>(d) * d;
    if (std::isfinite(r)) ref2 += static_cast<long double>(r) * r;
  }
  const double diff_norm = static_cast<double>(std::sqrt(diff2));
  const double ref_norm = static_cast<double>(std::sqrt(ref2));
  s.rel_l2 = ref_norm > 0.0 ? diff_norm / ref_norm : diff_norm;
  return s;
}

template <class A, class B>
ErrorStats compare(const A& out, const B& ref) {
  return compare(std::span<const typename A::value_type>(out), std::span<const typename B::value_type>(ref));
}

// What the comparison found of NaN and infinities, in words; empty when neither side has any:
//   "6400 NaN, all where the reference has NaN"
//   "3 NaN where the reference has a number (first at index 17); the reference has 0 NaN"
inline std::string nonfinite_report(const ErrorStats& s) {
  if (s.out_nan + s.out_inf + s.ref_nan + s.ref_inf == 0) return {};
  auto counts = [](std::size_t nan, std::size_t inf) {
    std::string text = fmt::format("{} NaN", nan);
    if (inf > 0) text += fmt::format(" and {} inf", inf);
    return text;
  };
  if (s.nonfinite_mismatch == 0) {
    return fmt::format("{}, all where the reference has them too", counts(s.out_nan, s.out_inf));
  }
  return fmt::format(
      "{} non-finite values where the reference differs (first at index {}); result {}, "
      "reference {}",
      s.nonfinite_mismatch, s.first_mismatch, counts(s.out_nan, s.out_inf), counts(s.ref_nan, s.ref_inf));
}

// One line that says how far apart two results are, and where they differ most:
//   "rel L2 3.1e-08, max abs 2.4e-07 at index 17 (got 0.51234, expected 0.51234024), 4096 values"
// followed by nonfinite_report() when either side holds NaN or an infinity.
inline std::string describe(const ErrorStats& s) {
  std::string text = fmt::format("rel L2 {:.3g}, max abs {:.3g} at index {} (got {:.17g}, expected {:.17g}), {} values",
                                 s.rel_l2, s.max_abs, s.worst_index, s.worst_out, s.worst_ref, s.count);
  if (const std::string nonfinite = nonfinite_report(s); !nonfinite.empty()) text += "; " + nonfinite;
  return text;
}

// The number of representable values of type T from a to b (0 when a == b; +0 and -0 are equal).
// Both NaN gives 0; one NaN gives the largest distance. Source: the usual mapping of IEEE-754 bit
// patterns onto a monotone integer line (sign-magnitude to two's complement order).
template <std::floating_point T>
requires(sizeof(T) == 4 || sizeof(T) == 8) std::uint64_t ulp_distance(T a, T b) {
  if (std::isnan(a) || std::isnan(b)) {
    return std::isnan(a) && std::isnan(b) ? 0 : std::numeric_limits<std::uint64_t>::max();
  }
  using Bits = std::conditional_t<sizeof(T) == 4, std::int32_t, std::int64_t>;
  auto ordered = [](T x) -> std::int64_t {
    const Bits bits = std::bit_cast<Bits>(x);
    // Negative numbers: flip so that the integer order matches the real order.
    return bits < 0 ? static_cast<std::int64_t>(std::numeric_limits<Bits>::min()) - bits
                    : static_cast<std::int64_t>(bits);
  };
  const std::int64_t ia = ordered(a);
  const std::int64_t ib = ordered(b);
  return ia > ib ? static_cast<std::uint64_t>(ia) - static_cast<std::uint64_t>(ib)
                 : static_cast<std::uint64_t>(ib) - static_cast<std::uint64_t>(ia);
}

}  // namespace fa
