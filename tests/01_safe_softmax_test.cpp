// Chapter 01 tests: the safe softmax against a long-double evaluation of the definition, and the
// book's conventions (docs/conventions.md) for -inf, NaN, one element and an empty row.
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include "catch.h"
#include "chapters/01_safe_softmax/safe_softmax.h"
#include "common/compare.h"
#include "common/random.h"

namespace {

// The definition p_i = exp(x_i) / sum_j exp(x_j), in long double and with the max subtracted
// (long double's own exp would overflow at ~11356). Used as the reference for both float and double.
std::vector<long double> reference_softmax(const std::vector<long double>& x) {
  long double m = x[0];
  for (long double v : x) m = std::max(m, v);
  long double l = 0;
  for (long double v : x) l += std::exp(v - m);
  std::vector<long double> p;
  for (long double v : x) p.push_back(std::exp(v - m) / l);
  return p;
}

template <class T>
void check_against_reference(std::size_t n, std::uint64_t seed, double tolerance) {
  const auto drawn = fa::normal<double>(n, seed, 0.0, 5.0);
  const std::vector<T> x(drawn.begin(), drawn.end());
  const auto p = ch01::safe_softmax(x);
  const auto ref = reference_softmax(std::vector<long double>(x.begin(), x.end()));
  const auto err = fa::compare(p, ref);
  INFO("n = " << n << ", seed = " << seed << ": " << fa::describe(err));
  CHECK(err.max_rel <= tolerance);
}

constexpr double inf = std::numeric_limits<double>::infinity();

}  // namespace

TEST_CASE("safe softmax agrees with a long-double evaluation of the definition", "[ch01]") {
  const std::size_t n = GENERATE(1u, 2u, 3u, 10u, 100u, 1000u, 10000u);
  const std::uint64_t seed = 1000 + n;
  // The chapter's bound, 64 eps sqrt(n + 1): its reason is beside ch01::definition_bound.
  check_against_reference<double>(n, seed, ch01::definition_bound<double>(n));
  check_against_reference<float>(n, seed, ch01::definition_bound<float>(n));
}

TEST_CASE("safe softmax weights sum to 1", "[ch01]") {
  const std::size_t n = GENERATE(1u, 7u, 1000u, 100000u);
  const auto x = fa::peaked(n, 77 + n);
  const auto p = ch01::safe_softmax(x);
  const double sum = std::accumulate(p.begin(), p.end(), 0.0);
  // Summing n terms in double rounds each addition by at most eps/2 relative: |sum - 1| <= n * eps.
  CHECK(std::fabs(sum - 1.0) <= static_cast<double>(n) * std::numeric_limits<double>::epsilon());
}

TEST_CASE("adding a constant to every score leaves the softmax unchanged", "[ch01]") {
  const auto x = fa::normal(257, 5);
  const double shift = GENERATE(-1000.0, -3.5, 0.25, 700.0, 1e5);
  std::vector<double> shifted(x);
  for (auto& v : shifted) v += shift;
  const auto err = fa::compare(ch01::safe_softmax(shifted), ch01::safe_softmax(x));
  INFO("shift " << shift << ": " << fa::describe(err));
  // x + shift is rounded to the ulp of the shift (1e5 * eps ~ 1.5e-11 absolute in each score), and
  // exp turns an absolute error in its argument into the same relative error in the weight.
  CHECK(err.max_rel <= 1e-10);
}

TEST_CASE("the textbook form overflows where the safe form does not", "[ch01]") {
  const std::vector<double> big{1000.0, 999.0};
  const auto textbook = ch01::textbook_softmax(big);
  CHECK(std::isnan(textbook[0]));  // inf / inf
  const auto safe = ch01::safe_softmax(big);
  // A few roundings of numbers near 1: a few eps.
  CHECK(std::fabs(safe[0] - 1.0 / (1.0 + std::exp(-1.0))) <= 4e-16);
  const std::vector<float> big_float{100.0f, 99.0f};
  CHECK(std::isnan(ch01::textbook_softmax(big_float)[0]));
  CHECK(std::fabs(ch01::safe_softmax(big_float)[0] - 0.7310585786f) <= 2e-7f);  // a few float eps
  // Where nothing overflows the two agree.
  const auto small = fa::normal(50, 9);
  CHECK(fa::compare(ch01::textbook_softmax(small), ch01::safe_softmax(small)).max_rel < 1e-13);
}

TEST_CASE("a -inf score gets weight 0", "[ch01]") {
  const auto p = ch01::safe_softmax(std::vector<double>{1.0, -inf, 3.0, -inf});
  CHECK(p[1] == 0.0);
  CHECK(p[3] == 0.0);
  // Two weights of a few roundings each: within a few eps of the exact values.
  CHECK(std::fabs(p[0] + p[2] - 1.0) <= 4e-16);
  CHECK(std::fabs(p[2] / p[0] / std::exp(2.0) - 1.0) <= 1e-15);
}

TEST_CASE("a row of only -inf gives all zeros", "[ch01]") {
  CHECK(ch01::safe_softmax(std::vector<double>(5, -inf)) == std::vector<double>(5, 0.0));
  const float finf = -std::numeric_limits<float>::infinity();
  CHECK(ch01::safe_softmax(std::vector<float>{finf}) == std::vector<float>{0.0f});
}

TEST_CASE("a NaN score makes every weight NaN", "[ch01]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const auto& x : {std::vector<double>{1.0, nan, 2.0}, std::vector<double>{nan}, std::vector<double>{-inf, nan},
                        std::vector<double>{nan, 5.0}}) {
    for (double p : ch01::safe_softmax(x)) CHECK(std::isnan(p));
  }
}

TEST_CASE("a single score gets weight 1", "[ch01]") {
  for (double x : {-1e300, -3.0, 0.0, 42.0, 1e300}) {
    CHECK(ch01::safe_softmax(std::vector<double>{x}) == std::vector<double>{1.0});
  }
}

TEST_CASE("an empty row is refused", "[ch01]") {
  CHECK_THROWS_AS(ch01::safe_softmax(std::vector<double>{}), std::invalid_argument);
  CHECK_THROWS_AS(ch01::textbook_softmax(std::vector<float>{}), std::invalid_argument);
}
