// Chapter 02 tests: the online softmax (one pass for m and l, any block size) against chapter 01's
// safe softmax, on random rows and on the rows that exercise each branch of the recurrence (the max
// rising at every score, never rising, constant rows, huge magnitudes, -inf, NaN); the running
// state's invariant; and the trace that the demo and the figures are drawn from.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "catch.h"
#include "chapters/01_safe_softmax/safe_softmax.h"
#include "chapters/02_online_softmax/online_softmax.h"
#include "chapters/02_online_softmax/trace.h"
#include "common/compare.h"
#include "common/random.h"

namespace {

template <class T>
constexpr double eps = std::numeric_limits<T>::epsilon();
template <class T>
constexpr T inf = std::numeric_limits<T>::infinity();
template <class T>
constexpr T quiet_nan = std::numeric_limits<T>::quiet_NaN();

// The chapter's bound, 16 sqrt(n + 1) eps: its reason is beside ch02::order_bound.
template <class T>
double order_tolerance(std::size_t n) {
  return ch02::order_bound<T>(n);
}

struct Difference {
  double max_rel = 0;     // max_i |got_i - expected_i| / max(|expected_i|, smallest normal)
  std::size_t worst = 0;  // the index where it is reached
  double got = 0;
  double expected = 0;
};

// Relative difference per element, against the larger of |expected| and the smallest normal number:
// a weight that underflows into the subnormals keeps only a few bits, and both forms may round it
// differently, so below the smallest normal the difference is measured in units of that number.
// Both NaN counts as equal; one NaN as an infinite difference.
template <class T>
Difference difference(const std::vector<T>& got, const std::vector<T>& expected) {
  Difference d;
  for (std::size_t i = 0; i < got.size(); ++i) {
    double rel = 0;
    if (std::isnan(got[i]) || std::isnan(expected[i])) {
      rel = std::isnan(got[i]) && std::isnan(expected[i]) ? 0.0 : inf<double>;
    } else {
      const double scale = std::max<double>(std::fabs(expected[i]), std::numeric_limits<T>::min());
      rel = std::fabs(static_cast<double>(got[i]) - static_cast<double>(expected[i])) / scale;
    }
    if (i == 0 || rel > d.max_rel) d = {rel, i, static_cast<double>(got[i]), static_cast<double>(expected[i])};
  }
  return d;
}

// online_softmax(x, block) against ch01::safe_softmax(x), within `tolerance` relative.
template <class T>
void check_agrees_with_chapter_01(const std::vector<T>& x, std::size_t block, double tolerance,
                                  const std::string& what) {
  const auto online = ch02::online_softmax(x, block);
  const auto safe = ch01::safe_softmax(x);
  REQUIRE(online.size() == x.size());
  const auto d = difference(online, safe);
  INFO(what << ", n = " << x.size() << ", block = " << block << ": max rel difference " << d.max_rel << " ("
            << d.max_rel / eps<T> << " eps, tolerance " << tolerance / eps<T> << " eps) at index " << d.worst
            << ": online " << d.got << ", chapter 01 " << d.expected);
  CHECK(d.max_rel <= tolerance);
}

// The block sizes tried: 1, 2, 3, 7, 64, n - 1, n, n + 1 (n - 1 only where it is >= 1).
std::vector<std::size_t> block_sizes(std::size_t n) {
  std::vector<std::size_t> blocks{1, 2, 3, 7, 64, n, n + 1};
  if (n > 1) blocks.push_back(n - 1);
  return blocks;
}

// sum_j exp(x_j - max) in long double: the exact l, to compare the running state against.
long double exact_l(std::span<const double> seen) {
  long double m = -inf<long double>;
  for (double v : seen) m = std::max<long double>(m, v);
  long double l = 0;
  for (double v : seen) l += std::exp(static_cast<long double>(v) - m);
  return l;
}

}  // namespace

TEST_CASE("online softmax equals safe softmax for every block size", "[ch02][graded02b]") {
  const std::size_t n = GENERATE(1u, 2u, 3u, 5u, 63u, 64u, 65u, 129u, 1000u, 10000u, 100000u);
  for (std::size_t block : block_sizes(n)) {
    const std::uint64_t seed = 2000 + 17 * n + block;
    const auto drawn = fa::normal<double>(n, seed, 0.0, 5.0);
    const std::string what = "normal(0, 5) scores, seed " + std::to_string(seed);
    check_agrees_with_chapter_01(drawn, block, order_tolerance<double>(n), what + ", double");
    check_agrees_with_chapter_01(std::vector<float>(drawn.begin(), drawn.end()), block, order_tolerance<float>(n),
                                 what + ", float");
  }
}

TEST_CASE("online softmax is as close to the exact softmax as chapter 01 is", "[ch02]") {
  const std::size_t n = GENERATE(10u, 1000u, 100000u);
  const std::size_t block = GENERATE(1u, 7u, 64u);
  const std::uint64_t seed = 3000 + n + block;
  const auto x = fa::normal<double>(n, seed, 0.0, 5.0);
  // The exact weights, to long-double precision: the definition with the max subtracted.
  const long double m = *std::max_element(x.begin(), x.end());
  const long double l = exact_l(x);
  std::vector<long double> exact;
  for (double v : x) exact.push_back(std::exp(static_cast<long double>(v) - m) / l);
  const auto err = fa::compare(ch02::online_softmax(x, block), exact);
  INFO("n = " << n << ", block = " << block << ", seed " << seed << ": " << fa::describe(err));
  // Chapter 01's test gives the safe softmax 64 * sqrt(n + 1) * eps against the same reference
  // (exp's rounding, amplified by |x_i - m|, plus the sum's); the online form must fit the same budget.
  CHECK(err.max_rel <= 64 * eps<double> * std::sqrt(static_cast<double>(n) + 1));
}

TEST_CASE("when the max rises at every score, every step rescales and the result still agrees", "[ch02]") {
  // Increasing scores x_j = j * step. The ranges (up to 500 in double, 50 in float) keep every
  // weight a normal number, so the relative difference means something at every index.
  const double step = GENERATE(1.0, 0.1, 0.001);
  const std::size_t n = 500;
  std::vector<double> x(n);
  for (std::size_t j = 0; j < n; ++j) x[j] = step * static_cast<double>(j);

  // Blocks of 1: the max rises at every score, so every step after the first has c < 1.
  const auto trace = ch02::online_softmax_trace(x, 1);
  for (std::size_t k = 1; k < trace.steps.size(); ++k) {
    INFO("step " << k << ", step size " << step);
    CHECK(trace.steps[k].m_after > trace.steps[k].m_before);
    CHECK(trace.steps[k].rescale < 1.0);
  }
  for (std::size_t block : block_sizes(n)) {
    check_agrees_with_chapter_01(x, block, order_tolerance<double>(n), "increasing, double");
    std::vector<float> xf(n);
    for (std::size_t j = 0; j < n; ++j) xf[j] = static_cast<float>(x[j] / 10);
    check_agrees_with_chapter_01(xf, block, order_tolerance<float>(n), "increasing, float");
  }
}

TEST_CASE("when the max never rises after the first score, the rescale factor is exactly 1", "[ch02]") {
  const std::size_t n = 1000;
  std::vector<double> x(n);
  for (std::size_t j = 0; j < n; ++j) x[j] = 30.0 - 0.05 * static_cast<double>(j);  // decreasing
  for (std::size_t block : block_sizes(n)) {
    const auto trace = ch02::online_softmax_trace(x, block);
    for (std::size_t k = 1; k < trace.steps.size(); ++k) {
      INFO("block " << block << ", step " << k);
      CHECK(trace.steps[k].rescale == 1.0);  // exp(0) is exactly 1: no rounding
      CHECK(trace.steps[k].m_after == x[0]);
    }
    check_agrees_with_chapter_01(x, block, order_tolerance<double>(n), "decreasing");
  }
}

TEST_CASE("a constant row gives 1/n to every score, exactly", "[ch02]") {
  const std::size_t n = GENERATE(1u, 3u, 100u, 4097u);
  const double value = GENERATE(-7.25, 0.0, 1e300);
  for (std::size_t block : block_sizes(n)) {
    // Every term is exp(0) = 1 exactly and the rescale factor is exactly 1, so l = n exactly (a sum
    // of ones below 2^24 is exact even in float), and every weight is 1/n rounded once.
    const auto p = ch02::online_softmax(std::vector<double>(n, value), block);
    CHECK(p == std::vector<double>(n, 1.0 / static_cast<double>(n)));
    const auto valuef = static_cast<float>(std::clamp(value, -1e30, 1e30));  // 1e300 is no float
    const auto pf = ch02::online_softmax(std::vector<float>(n, valuef), block);
    CHECK(pf == std::vector<float>(n, 1.0f / static_cast<float>(n)));
  }
}

TEST_CASE("huge scores neither overflow nor lose the answer", "[ch02]") {
  SECTION("double, magnitudes up to 1e300 and the largest double") {
    // Differences of 1e300 make every weight 0 except at the max; two equal maxima share it.
    const std::vector<double> x{-1e300, 1e300, 5e299, 1e300, -1e300};
    for (std::size_t block : block_sizes(x.size())) {
      CHECK(ch02::online_softmax(x, block) == std::vector<double>{0.0, 0.5, 0.0, 0.5, 0.0});
    }
    // m - m_new = -max - max overflows to -inf on line 3, and exp(-inf) = 0: the right factor.
    const double big = std::numeric_limits<double>::max();
    CHECK(ch02::online_softmax(std::vector<double>{-big, big}) == std::vector<double>{0.0, 1.0});
    const auto scaled = fa::normal<double>(1000, 41, 0.0, 1e300);
    for (std::size_t block : block_sizes(scaled.size())) {
      check_agrees_with_chapter_01(scaled, block, order_tolerance<double>(1000), "normal(0, 1e300)");
    }
  }
  SECTION("float, scores around 80, where the textbook form already fails") {
    const auto drawn = fa::normal<double>(10000, 43, 80.0, 2.0);
    const std::vector<float> x(drawn.begin(), drawn.end());
    // exp(80) = 5.5e34; ten thousand of them overflow float's 3.4e38: the textbook weights are 0.
    const auto textbook = ch01::textbook_softmax(x);
    CHECK(std::accumulate(textbook.begin(), textbook.end(), 0.0) < 0.5);
    for (std::size_t block : block_sizes(x.size())) {
      check_agrees_with_chapter_01(x, block, order_tolerance<float>(x.size()), "normal(80, 2), float");
    }
    const float big = std::numeric_limits<float>::max();
    CHECK(ch02::online_softmax(std::vector<float>{-big, big}) == std::vector<float>{0.0f, 1.0f});
  }
}

TEST_CASE("-inf scores get weight 0 wherever they fall in a block", "[ch02][graded02b]") {
  // -inf first (the max is still -inf when it arrives: the exp(-inf - -inf) case), in runs that
  // fill whole blocks, between finite scores, and last.
  const std::vector<double> x{-inf<double>, -inf<double>, -inf<double>, 2.0,         -inf<double>,
                              1.0,          -inf<double>, 4.0,          -inf<double>};
  for (std::size_t block : {1u, 2u, 3u, 4u, 8u, 9u, 10u}) {
    const auto p = ch02::online_softmax(x, block);
    for (std::size_t j = 0; j < x.size(); ++j) {
      if (x[j] == -inf<double>) CHECK(p[j] == 0.0);
    }
    check_agrees_with_chapter_01(x, block, order_tolerance<double>(x.size()), "-inf entries");
    const std::vector<float> xf(x.begin(), x.end());
    check_agrees_with_chapter_01(xf, block, order_tolerance<float>(x.size()), "-inf entries, float");
  }
  // While only -inf has arrived, the state stays m = -inf, l = 0, with no NaN: the guard measures
  // against 0 (ch02::safe_max), so the factor is exp(-inf - 0) = 0 and nothing is carried.
  const auto trace = ch02::online_softmax_trace(x, 1);
  for (std::size_t k = 0; k < 3; ++k) {
    CHECK(trace.steps[k].m_after == -inf<double>);
    CHECK(trace.steps[k].l_after == 0.0);
    CHECK(trace.steps[k].rescale == 0.0);
    for (double t : trace.steps[k].terms) CHECK(t == 0.0);
  }
}

TEST_CASE("a row of only -inf gives all zeros", "[ch02][graded02b]") {
  for (std::size_t n : {1u, 5u, 100u}) {
    for (std::size_t block : block_sizes(n)) {
      CHECK(ch02::online_softmax(std::vector<double>(n, -inf<double>), block) == std::vector<double>(n, 0.0));
      CHECK(ch02::online_softmax(std::vector<float>(n, -inf<float>), block) == std::vector<float>(n, 0.0f));
    }
  }
}

TEST_CASE("a NaN score makes every weight NaN, as in chapter 01", "[ch02][graded02b]") {
  const double n_ = quiet_nan<double>;
  const double i_ = inf<double>;
  // NaN first, in the middle, last, alone, after -inf (the max still -inf), and before a finite max.
  const std::vector<std::vector<double>> rows{{n_},      {n_, 1.0, 2.0}, {1.0, n_, 2.0},     {1.0, 2.0, n_},
                                              {-i_, n_}, {n_, -i_, -i_}, {-i_, -i_, n_, 3.0}};
  for (const auto& x : rows) {
    for (std::size_t block : block_sizes(x.size())) {
      const auto p = ch02::online_softmax(x, block);
      for (std::size_t j = 0; j < p.size(); ++j) {
        INFO("n = " << x.size() << ", block = " << block << ", index " << j);
        CHECK(std::isnan(p[j]));
      }
    }
  }
  // +inf: exp(inf - inf) is NaN in both chapters; the online form must not hide it.
  const std::vector<double> with_inf{1.0, i_, 2.0};
  for (std::size_t block : block_sizes(with_inf.size())) {
    for (double p : ch02::online_softmax(with_inf, block)) CHECK(std::isnan(p));
  }
  for (double p : ch01::safe_softmax(with_inf)) CHECK(std::isnan(p));
}

TEST_CASE("an empty row or a block size of 0 is refused with a message that says why", "[ch02]") {
  auto message = [](auto&& call) -> std::string {
    try {
      call();
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "(no std::invalid_argument thrown)";
  };
  const std::vector<double> x{1.0, 2.0};
  CHECK(message([] { ch02::online_softmax(std::vector<double>{}); }).find("empty row") != std::string::npos);
  CHECK(message([&] { ch02::online_softmax(x, 0); }).find("at least 1") != std::string::npos);
  CHECK(message([] { ch02::online_softmax_trace(std::vector<float>{}); }).find("empty row") != std::string::npos);
  CHECK(message([&] { ch02::online_softmax_trace(x, 0); }).find("at least 1") != std::string::npos);
}

TEST_CASE("the running state keeps l = sum of exp(x_j - m) over the scores seen so far", "[ch02][graded02a]") {
  const auto x = fa::peaked(300, 51);
  const std::size_t block = GENERATE(1u, 4u, 37u);
  ch02::OnlineState<double> state;
  for (std::size_t first = 0; first < x.size(); first += block) {
    const std::span<const double> seen(x.data(), std::min(x.size(), first + block));
    const double m_before = state.m;
    const double rescale = state.update(seen.subspan(first));
    INFO("block " << block << ", after scores 0.." << seen.size() - 1);
    CHECK(state.m == *std::max_element(seen.begin(), seen.end()));  // the max is exact: no rounding
    // The factor moves the old terms to the new max: exp(m_before - m_new), 0 before the first block.
    CHECK(rescale == std::exp(m_before - state.m));
    const double exact = static_cast<double>(exact_l(seen));
    // The invariant holds up to the summation error of the terms seen (see order_tolerance).
    const double bound = order_tolerance<double>(seen.size()) * exact;
    INFO("l " << state.l << ", sum of exp(x_j - m) " << exact << ", error " << std::fabs(state.l - exact) << ", bound "
              << bound);
    CHECK(std::fabs(state.l - exact) <= bound);
  }
  // An empty block changes nothing.
  const auto before = state;
  CHECK(state.update(std::span<const double>{}) == 1.0);
  CHECK(state.m == before.m);
  CHECK(state.l == before.l);
}

TEST_CASE("the worked example: scores 1, 3, 5, 2 in blocks of 2", "[ch02][graded02a]") {
  const auto trace = ch02::online_softmax_trace(std::vector<double>{1.0, 3.0, 5.0, 2.0}, 2);
  REQUIRE(trace.steps.size() == 2);
  const auto& first = trace.steps[0];
  const auto& second = trace.steps[1];
  // Block 1 (scores 1, 3): m = 3, l = exp(-2) + 1, which the worked example rounds to 1.1353.
  CHECK(first.m_after == 3.0);
  CHECK(first.rescale == 0.0);                      // nothing was there to rescale
  CHECK(std::fabs(first.l_after - 1.1353) < 5e-5);  // the worked example's four decimals
  // Block 2 (scores 5, 2): the max rises to 5, c = exp(3 - 5) ~ 0.1353, l ~ 1.2034.
  CHECK(second.m_after == 5.0);
  CHECK(std::fabs(second.rescale - 0.1353) < 5e-5);
  CHECK(std::fabs(second.l_before * second.rescale - 0.1537) < 5e-5);  // its rescaled sum
  CHECK(std::fabs(second.block_sum - 1.0498) < 5e-5);
  CHECK(std::fabs(second.l_after - 1.2034) < 5e-5);
  // And to full precision: exp(-4) + exp(-2) + 1 + exp(-3), four terms of a few roundings each.
  const double exact = static_cast<double>(std::exp(-4.0L) + std::exp(-2.0L) + 1.0L + std::exp(-3.0L));
  CHECK(std::fabs(second.l_after - exact) <= 8 * eps<double> * exact);
}

TEST_CASE("the trace records every step, and the earlier terms shrink together when the max rises",
          "[ch02][graded02a]") {
  const std::size_t block = GENERATE(1u, 2u, 3u, 5u);
  const auto x = fa::normal<double>(11, 61 + block, 0.0, 3.0);
  const auto trace = ch02::online_softmax_trace(x, block);

  CHECK(trace.p == ch02::online_softmax(x, block));  // the same code, the same bits
  REQUIRE(trace.steps.size() == (x.size() + block - 1) / block);
  std::size_t covered = 0;
  for (std::size_t k = 0; k < trace.steps.size(); ++k) {
    const auto& s = trace.steps[k];
    INFO("block " << block << ", step " << k);
    CHECK(s.first == covered);
    CHECK(s.count == std::min(block, x.size() - covered));  // the last one is the tail
    covered += s.count;
    REQUIRE(s.terms.size() == covered);
    CHECK(s.m_after == *std::max_element(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(covered)));
    // line 4, one rounding of a product and one of a sum: 2 eps.
    CHECK(std::fabs(s.l_after - (s.l_before * s.rescale + s.block_sum)) <= 2 * eps<double> * s.l_after);
    // l is the sum of the recorded terms, up to the summation error of `covered` terms.
    const double sum = std::accumulate(s.terms.begin(), s.terms.end(), 0.0);
    CHECK(std::fabs(s.l_after - sum) <= order_tolerance<double>(covered) * sum);
    if (k == 0) continue;
    // Every earlier term is the previous step's term times c: exp(x_j - m_before) * exp(m_before -
    // m_after) = exp(x_j - m_after). Three exp/multiply roundings (3 eps), plus the rounding of the
    // arguments x_j - m, whose absolute error eps * |x_j - m| becomes a relative error of the term.
    const auto& previous = trace.steps[k - 1].terms;
    for (std::size_t j = 0; j < previous.size(); ++j) {
      const double argument_error = eps<double> * (std::fabs(x[j]) + std::fabs(s.m_before) + std::fabs(s.m_after));
      INFO("term " << j << ": " << s.terms[j] << " vs " << previous[j] << " * " << s.rescale);
      CHECK(std::fabs(s.terms[j] - previous[j] * s.rescale) <= (3 * eps<double> + argument_error) * s.terms[j]);
    }
  }
}
