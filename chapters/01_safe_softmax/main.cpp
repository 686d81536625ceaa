// ch01_safe_softmax: the textbook softmax overflows where the safe one does not.
//
//   ch01_safe_softmax                         the two examples below, in double and in float
//   ch01_safe_softmax --scores 1,3,5,2        your own scores, in both types
#include <span>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "chapters/01_safe_softmax/safe_softmax.h"

namespace {

template <class T>
void show(const char* type, const std::vector<double>& scores) {
  std::vector<T> x(scores.begin(), scores.end());
  const auto textbook = ch01::textbook_softmax(std::span<const T>(x));
  const auto safe = ch01::safe_softmax(std::span<const T>(x));
  fmt::print("  {:<6} scores   {}\n", type, fmt::join(x, ", "));
  fmt::print("         textbook {:.6g}\n", fmt::join(textbook, ", "));
  fmt::print("         safe     {:.6g}\n", fmt::join(safe, ", "));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Chapter 01: the textbook softmax next to the safe softmax (subtract the max first)."};
  std::vector<double> scores;
  app.add_option("--scores", scores, "comma-separated scores to run in float and in double, e.g. 1,3,5,2")
      ->delimiter(',');
  CLI11_PARSE(app, argc, argv);

  try {
    fmt::print("Chapter 01 - safe softmax\n");
    fmt::print("p_i = exp(x_i - max) / sum_j exp(x_j - max): the same weights as exp(x_i) / sum_j exp(x_j),\n"
               "but no exp() ever sees a positive argument, so nothing overflows.\n\n");
    if (!scores.empty()) {
      show<double>("double", scores);
      show<float>("float", scores);
      return 0;
    }
    fmt::print("exp(1000) overflows a double (the largest is about 1.8e308 = exp(709.8)):\n");
    show<double>("double", {1000.0, 999.0});
    fmt::print("\nexp(100) overflows a float (the largest is about 3.4e38 = exp(88.7)):\n");
    show<float>("float", {100.0, 99.0});
    fmt::print("\nThe safe weights are exp(0) / (1 + exp(-1)) = 0.731059 and exp(-1) / (1 + exp(-1)) = 0.268941,\n"
               "whatever constant is added to both scores.\n");
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}
