// ch01_safe_softmax: the textbook softmax overflows where the safe one does not.
//
//   ch01_safe_softmax                         the two examples below, in double and in float
//   ch01_safe_softmax --scores 1,3,5,2        your own scores, in both types
//   ch01_safe_softmax --summary tour.tsv      ... and append the check to tour.tsv (the tour does)
//
// The check at the end: every safe weight printed against the definition evaluated in long double,
// within the bound of tests/01_safe_softmax_test.cpp.
#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "chapters/01_safe_softmax/safe_softmax.h"
#include "common/compare.h"
#include "common/demo.h"

namespace {

// The bound of tests/01_safe_softmax_test.cpp for n scores in type T: exp's rounding (amplified by
// the rounding of x_i - m) plus the rounding of a sum of n terms, 64 eps sqrt(n + 1) with room.
template <class T>
double chapter_01_bound(std::size_t n) {
  return 64.0 * std::numeric_limits<T>::epsilon() * std::sqrt(static_cast<double>(n) + 1.0);
}

// How far the safe weights of one row are from the definition, and how far they may be.
struct RowError {
  double max_rel = 0.0;  // largest relative error of a weight
  double bound = 0.0;    // chapter_01_bound for the row
};

// The definition p_i = exp(x_i) / sum_j exp(x_j) in long double (64-bit mantissa), by chapter 01's
// textbook_softmax: code apart from safe_softmax, so that a mistake in safe_softmax cannot hide in
// its own reference. The scores are first shifted by their largest finite value, which leaves the
// definition unchanged and keeps long double's exp in range (it overflows at ~11356). A row of only
// -inf is all zeros (DESIGN.md's convention; the definition itself would give 0 / 0).
template <class T>
std::vector<long double> definition(const std::vector<T>& x) {
  if (std::all_of(x.begin(), x.end(), [](T v) { return v == -std::numeric_limits<T>::infinity(); })) {
    return std::vector<long double>(x.size(), 0.0L);
  }
  long double shift = 0.0L;
  bool found = false;
  for (T v : x) {
    if (!std::isfinite(v)) continue;
    shift = found ? std::max(shift, static_cast<long double>(v)) : static_cast<long double>(v);
    found = true;
  }
  std::vector<long double> shifted;
  for (T v : x) shifted.push_back(static_cast<long double>(v) - shift);
  return ch01::textbook_softmax(std::span<const long double>(shifted));
}

// Prints one row's scores, textbook weights and safe weights in type T. Returns the safe weights'
// error against the definition.
template <class T>
RowError show(const char* type, const std::vector<double>& scores) {
  std::vector<T> x(scores.begin(), scores.end());
  const auto textbook = ch01::textbook_softmax(std::span<const T>(x));
  const auto safe = ch01::safe_softmax(std::span<const T>(x));
  fmt::print("  {:<6} scores   {}\n", type, fmt::join(x, ", "));
  fmt::print("         textbook {:.6g}\n", fmt::join(textbook, ", "));
  fmt::print("         safe     {:.6g}\n", fmt::join(safe, ", "));
  const fa::ErrorStats err = fa::compare(safe, definition(x));
  // max_rel skips weights whose reference is 0; a NaN or an infinity there shows in max_abs.
  return {std::isfinite(err.max_abs) ? err.max_rel : INFINITY, chapter_01_bound<T>(x.size())};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Chapter 01: the textbook softmax next to the safe softmax (subtract the max first)."};
  std::vector<double> scores;
  std::string summary_path;
  app.add_option("--scores", scores, "comma-separated scores to run in float and in double, e.g. 1,3,5,2")
      ->delimiter(',');
  app.add_option("--summary", summary_path, "append the check against the definition to this file (the tour's)");
  CLI11_PARSE(app, argc, argv);

  try {
    fa::demo::print_heading(1, "safe softmax");
    fa::demo::print_shows(
        "p_i = exp(x_i - max) / sum_j exp(x_j - max): the same weights as exp(x_i) / sum_j exp(x_j),\n"
        "but no exp() ever sees a positive argument, so nothing overflows.");
    RowError in_double, in_float;
    if (!scores.empty()) {
      in_double = show<double>("double", scores);
      in_float = show<float>("float", scores);
    } else {
      fmt::print("exp(1000) overflows a double (the largest is about 1.8e308 = exp(709.8)):\n");
      in_double = show<double>("double", {1000.0, 999.0});
      fmt::print("\nexp(100) overflows a float (the largest is about 3.4e38 = exp(88.7)):\n");
      in_float = show<float>("float", {100.0, 99.0});
      fmt::print("\nThe safe weights are exp(0) / (1 + exp(-1)) = 0.731059 and exp(-1) / (1 + exp(-1)) = 0.268941,\n"
                 "whatever constant is added to both scores.\n");
    }
    const fa::demo::Check check{
        "01", "safe softmax vs the definition in long double",
        fmt::format("double {:.2g}, float {:.2g} (max rel)", in_double.max_rel, in_float.max_rel),
        fmt::format("{:.1e}, {:.1e}", in_double.bound, in_float.bound),
        in_double.max_rel <= in_double.bound && in_float.max_rel <= in_float.bound};
    fa::demo::print_verdict(check);
    if (!summary_path.empty()) fa::demo::append_summary(summary_path, check);
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}
