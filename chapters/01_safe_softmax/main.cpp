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
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include "chapters/01_safe_softmax/safe_softmax.h"
#include "common/program.h"

namespace {

// How far the safe weights of one row are from the definition, and how far they may be.
struct RowError {
  double max_rel = 0.0;   // largest relative error of a weight
  double bound = 0.0;     // ch01::definition_bound for the row
  std::string nonfinite;  // NaN and infinities found, in words (fa::nonfinite_report); empty if none
};

// "double 1.7e-16" and, where the row holds NaN or inf, what the comparison found of them.
std::string error_text(const char* type, const RowError& e) {
  std::string text = fmt::format("{} {:.2g}", type, e.max_rel);
  if (!e.nonfinite.empty()) text += fmt::format(" ({})", e.nonfinite);
  return text;
}

// The definition p_i = exp(x_i) / sum_j exp(x_j) in long double (64-bit mantissa), by chapter 01's
// textbook_softmax: code apart from safe_softmax, so that a mistake in safe_softmax cannot hide in
// its own reference. The scores are first shifted by their largest finite value, which leaves the
// definition unchanged and keeps long double's exp in range (it overflows at ~11356). A row of only
// -inf is all zeros (the book's convention for a fully masked row; the definition itself would give
// 0 / 0).
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
  return {std::isfinite(err.max_abs) ? err.max_rel : INFINITY, ch01::definition_bound<T>(x.size()),
          fa::nonfinite_report(err)};
}

}  // namespace

int main(int argc, char** argv) {
  fa::Program program(1, "Chapter 01: the textbook softmax next to the safe softmax (subtract the max first).");
  std::vector<double> scores;
  fa::cli::add_number_list(program.app(), "--scores", scores,
                           "comma-separated scores to run in float and in double, e.g. 1,3,5,2")
      ->default_str("the two overflow examples");
  try {
    program.parse(argc, argv);
    fa::Plan plan;
    plan.add_input_values("--scores", scores, true);  // -inf: a masked score
    program.check(plan);
    program.start(
        fa::Banner{"safe softmax",
                   R"(p_i = exp(x_i - max) / sum_j exp(x_j - max): the same weights as exp(x_i) / sum_j exp(x_j),
but no exp() ever sees a positive argument, so nothing overflows.)"});

    RowError in_double, in_float;
    if (!scores.empty()) {
      in_double = show<double>("double", scores);
      in_float = show<float>("float", scores);
    } else {
      fmt::print("exp(1000) overflows a double (the largest is about 1.8e308 = exp(709.8)):\n");
      in_double = show<double>("double", {1000.0, 999.0});
      fmt::print("\nexp(100) overflows a float (the largest is about 3.4e38 = exp(88.7)):\n");
      in_float = show<float>("float", {100.0, 99.0});
      fmt::print(
          "\nThe safe weights are exp(0) / (1 + exp(-1)) = 0.731059 and exp(-1) / (1 + exp(-1)) = 0.268941,\n"
          "whatever constant is added to both scores.\n");
    }
    return program.finish(
        fa::Check{"01", "safe softmax vs the definition in long double",
                  fmt::format("{}, {} (max rel)", error_text("double", in_double), error_text("float", in_float)),
                  fmt::format("{:.1e}, {:.1e}", in_double.bound, in_float.bound),
                  in_double.max_rel <= in_double.bound && in_float.max_rel <= in_float.bound});
  } catch (...) {
    return program.exit_on_error();
  }
}
