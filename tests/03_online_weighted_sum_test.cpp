// Chapter 03 tests, in two parts.
//   The online weighted sum of one query: the worked example figure by figure, agreement
//   with the all-at-once form built on chapter 02 for every block size, and the conventions for
//   very negative, -inf and NaN scores.
//   Whole attention on the CPU: against a long-double all-at-once evaluation written here with its
//   own index arithmetic, for several shapes, causal and not, with batch 2 and 3 heads (so a wrong
//   batch or head index shows), and its errors.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "catch.h"
#include "chapters/03_online_weighted_sum/attention.h"
#include "chapters/03_online_weighted_sum/online_weighted_sum.h"
#include "common/compare.h"
#include "common/random.h"
#include "common/tensor.h"

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();
constexpr double not_a_number = std::numeric_limits<double>::quiet_NaN();

// A [rows, cols] view of a vector of values (rows = values.size() / cols).
fa::MatrixView<const double> matrix(const std::vector<double>& values, std::size_t cols) {
  return {std::span<const double>(values), values.size() / cols, cols};
}

// The worked example: scores 1, 3, 5, 2 and values 10, 20, 30, 40, in blocks of two.
const std::vector<double> example_scores{1.0, 3.0, 5.0, 2.0};
const std::vector<double> example_values{10.0, 20.0, 30.0, 40.0};

// The worked example rounds each figure to four places from the unrounded number, so the exact figure lies
// within half a unit of the fourth place of the printed one (1e-12 more for our own rounding).
constexpr double four_places = 0.5e-4 + 1e-12;

// The chapter's bound for one query (its reason is beside ch03::kSameSumBound); the values here are
// below ~5, so max(1, max |v|) is at most 5 and the bound applies to the difference as it is.
constexpr double same_sum_tolerance = ch03::kSameSumBound;

}  // namespace

// ---------------------------------------------------------------------------------------------
// Part 1: one query.

TEST_CASE("the worked example reproduces every figure of docs/03", "[ch03]") {
  const auto steps = ch03::trace_online_weighted_sum(example_scores, matrix(example_values, 1), 2);
  REQUIRE(steps.size() == 2);
  const ch03::BlockStep& b1 = steps[0];
  const ch03::BlockStep& b2 = steps[1];
  CHECK(b1.first == 0);
  CHECK(b1.count == 2);
  CHECK(b2.first == 2);
  REQUIRE(b1.p.size() == 2);
  // Every figure the worked example prints, to its four places.
  const auto near = [](const char* what, double computed, double printed) {
    INFO(what << ": computed " << computed << ", the worked example prints " << printed);
    CHECK(std::fabs(computed - printed) <= four_places);
  };
  // What each block's line prints: m_new, its own l and acc, and the totals l, acc and acc / l.
  const auto block = [&](const ch03::BlockStep& b, std::array<double, 6> printed) {
    const std::array<double, 6> computed{b.m_new, b.l_block, b.acc_block[0], b.l, b.acc[0], b.output[0]};
    for (std::size_t k = 0; k < 6; ++k) {
      const std::string what = "the block from key " + std::to_string(b.first) + ", figure " + std::to_string(k + 1);
      near(what.c_str(), computed[k], printed[k]);
    }
  };
  block(b1, {3.0, 1.1353, 21.3534, 1.1353, 21.3534, 18.8080});
  block(b2, {5.0, 1.0498, 31.9915, 1.2034, 34.8813, 28.9847});
  near("block 1's weights p_0", b1.p[0], 0.1353);
  near("block 1's weights p_1", b1.p[1], 1.0);
  near("block 2's m_old", b2.m_old, 3.0);
  near("block 2's rescale", b2.rescale, 0.1353);
  near("block 2's l carried", b2.l_carried, 0.1537);
  near("block 2's acc carried", b2.acc_carried[0], 2.8899);
  near("all at once", ch03::weighted_sum_all_at_once(example_scores, matrix(example_values, 1))[0], 28.9847);
}

TEST_CASE("the worked example's output is 28.98474626", "[ch03]") {
  // Eight places: the exact output is within 0.5e-8 of them (ch03::kWorkedExampleBound).
  const auto online = ch03::online_weighted_sum(example_scores, matrix(example_values, 1), 2);
  const auto all_at_once = ch03::weighted_sum_all_at_once(example_scores, matrix(example_values, 1));
  CHECK(std::fabs(online[0] - ch03::kWorkedExampleOutput) <= ch03::kWorkedExampleBound);
  CHECK(std::fabs(all_at_once[0] - ch03::kWorkedExampleOutput) <= ch03::kWorkedExampleBound);
}

TEST_CASE("1000 scores drawn normal(0, 4) in blocks of 64 agree with the all-at-once form", "[ch03]") {
  const std::uint64_t seed = GENERATE(0u, 1u, 2u, 3u);
  const auto scores = fa::normal(1000, 300 + seed, 0.0, 4.0);
  const auto values = fa::normal(1000 * 8, 400 + seed);
  const auto online = ch03::online_weighted_sum(scores, matrix(values, 8), 64);
  const auto reference = ch03::weighted_sum_all_at_once(scores, matrix(values, 8));
  const auto err = fa::compare(online, reference);
  INFO("seed " << seed << ": " << fa::describe(err));
  CHECK(err.max_abs <= same_sum_tolerance);
}

TEST_CASE("every block size from 1 to n + 1 gives the all-at-once result", "[ch03]") {
  const std::size_t n = GENERATE(1u, 2u, 3u, 4u, 5u, 7u, 8u, 13u);
  const auto scores = fa::normal(n, 500 + n, 0.0, 4.0);
  const auto values = fa::normal(n * 3, 600 + n);
  const auto reference = ch03::weighted_sum_all_at_once(scores, matrix(values, 3));
  for (std::size_t block = 1; block <= n + 1; ++block) {
    const auto err = fa::compare(ch03::online_weighted_sum(scores, matrix(values, 3), block), reference);
    INFO("n " << n << ", block " << block << ", seed " << 500 + n << ": " << fa::describe(err));
    CHECK(err.max_abs <= same_sum_tolerance);
  }
  // A block of n and a block of n + 1 are both one block: the same operations, the same bits.
  CHECK(ch03::online_weighted_sum(scores, matrix(values, 3), n) ==
        ch03::online_weighted_sum(scores, matrix(values, 3), n + 1));
}

TEST_CASE("the trace records what each block did, and ends on online_weighted_sum's result", "[ch03]") {
  const auto scores = fa::normal(23, 700, 0.0, 4.0);
  const auto values = fa::normal(23 * 2, 701);
  const auto steps = ch03::trace_online_weighted_sum(scores, matrix(values, 2), 5);
  REQUIRE(steps.size() == 5);  // 5 + 5 + 5 + 5 + 3: the tail block is shorter
  CHECK(steps.back().first == 20);
  CHECK(steps.back().count == 3);
  for (std::size_t b = 1; b < steps.size(); ++b) {
    const auto& prev = steps[b - 1];
    const auto& st = steps[b];
    INFO("block " << b + 1);
    CHECK(st.m_old == prev.m_new);
    CHECK(st.m_new == std::max(st.m_old, st.block_max));
    CHECK(st.rescale == std::exp(st.m_old - st.m_new));
    CHECK(st.l_carried == st.rescale * prev.l);
    CHECK(st.acc_carried[1] == st.rescale * prev.acc[1]);
    CHECK(st.l == st.l_carried + st.l_block);
    CHECK(st.output[0] == st.acc[0] / st.l);
  }
  CHECK(steps.back().m_new == *std::max_element(scores.begin(), scores.end()));
  CHECK(steps.back().output == ch03::online_weighted_sum(scores, matrix(values, 2), 5));
}

TEST_CASE("after every block, l and acc are the sums over the keys seen so far, acc not divided by l",
          "[ch03][graded03a]") {
  const std::size_t block = GENERATE(1u, 3u, 8u, 40u);
  const std::size_t n = 29, head_dim = 3;
  const auto scores = fa::normal(n, 1000 + block, 0.0, 4.0);
  const auto values = fa::normal(n * head_dim, 1100 + block);
  ch03::RowState state(head_dim);
  for (std::size_t first = 0, count = 0; first < n; first += count) {
    count = std::min(block, n - first);
    state.fold(std::span<const double>(scores).subspan(first, count),
               fa::MatrixView<const double>(values.data() + first * head_dim, count, head_dim));
    // The invariant, in long double against the state's own m: l = sum_j exp(s_j - m) and
    // acc = sum_j exp(s_j - m) v_j over the keys 0 .. first + count - 1.
    long double l = 0;
    std::vector<long double> acc(head_dim, 0), magnitude(head_dim, 0);
    for (std::size_t j = 0; j < first + count; ++j) {
      const long double w = std::exp(static_cast<long double>(scores[j]) - state.m);
      l += w;
      for (std::size_t d = 0; d < head_dim; ++d) {
        acc[d] += w * values[j * head_dim + d];
        magnitude[d] += w * std::fabs(values[j * head_dim + d]);
      }
    }
    // Each term's exp is off by a few eps plus eps |s_j - m| (|s_j - m| < 30 here), and the sums of
    // at most 29 terms add 29 eps: 128 eps of the sum of magnitudes covers both. A missing rescale,
    // a lost block or an acc divided by l is off by O(1).
    const double tolerance = 128 * std::numeric_limits<double>::epsilon();
    INFO("block " << block << ", keys 0.." << first + count - 1);
    CHECK(std::fabs(state.l - static_cast<double>(l)) <= tolerance * static_cast<double>(l));
    for (std::size_t d = 0; d < head_dim; ++d) {
      INFO("acc[" << d << "] = " << state.acc[d] << ", expected " << static_cast<double>(acc[d]));
      CHECK(std::fabs(state.acc[d] - static_cast<double>(acc[d])) <= tolerance * static_cast<double>(magnitude[d]));
    }
  }
}

TEST_CASE("the output is acc / l, divided once at the end: 28.98474626, and zeros for a query of only -inf",
          "[ch03][graded03b]") {
  for (std::size_t block = 1; block <= 5; ++block) {
    const auto online = ch03::online_weighted_sum(example_scores, matrix(example_values, 1), block);
    INFO("the worked example in blocks of " << block << ": " << online[0]);
    CHECK(std::fabs(online[0] - ch03::kWorkedExampleOutput) <= ch03::kWorkedExampleBound);
    const auto none = ch03::online_weighted_sum(std::vector<double>(5, -inf), matrix(fa::normal(5 * 3, 970), 3), block);
    CHECK(none == std::vector<double>(3, 0.0));
  }
  ch03::RowState state(1);
  state.fold(example_scores, matrix(example_values, 1));
  CHECK(state.finish() == std::vector<double>{state.acc[0] / state.l});  // one division, nothing else
}

TEST_CASE("scores all below -100 do not underflow to a zero sum", "[ch03]") {
  const auto base = fa::normal(50, 800, 0.0, 4.0);
  std::vector<double> low(base);
  for (double& s : low) s -= 1000.0;
  const auto values = fa::normal(50 * 2, 801);
  // The premise: every exp(s) underflows to 0, so the textbook form would divide 0 by 0.
  for (double s : low) REQUIRE(std::exp(s) == 0.0);
  const std::size_t block = GENERATE(1u, 7u, 64u);
  const auto out = ch03::online_weighted_sum(low, matrix(values, 2), block);
  const auto reference = ch03::online_weighted_sum(base, matrix(values, 2), block);
  const auto err = fa::compare(out, reference);
  INFO("block " << block << ": " << fa::describe(err));
  // Softmax ignores a common shift. s - 1000 is rounded to the ulp of 1000 (~1.1e-13), which moves
  // each weight by that much relatively and the output by at most 2 * 1.1e-13 * max |v| (< 5).
  CHECK(err.max_abs <= 1e-12);
}

TEST_CASE("-inf scores get no weight, even a whole block of them", "[ch03]") {
  const std::vector<double> scores{-inf, -inf, 2.0, -inf, 0.5, -inf, -inf, -inf, 1.0};
  const auto values = fa::normal(9 * 2, 900);
  // The same query without the masked keys: rows 2, 4 and 8 only.
  const std::vector<double> kept_scores{2.0, 0.5, 1.0};
  std::vector<double> kept_values;
  for (std::size_t j : {2u, 4u, 8u}) {
    kept_values.insert(kept_values.end(), values.begin() + 2 * j, values.begin() + 2 * j + 2);
  }
  const auto reference = ch03::weighted_sum_all_at_once(kept_scores, matrix(kept_values, 2));
  for (std::size_t block = 1; block <= 10; ++block) {  // block 2 and 3 start on a block of only -inf
    const auto err = fa::compare(ch03::online_weighted_sum(scores, matrix(values, 2), block), reference);
    INFO("block " << block << ": " << fa::describe(err));
    CHECK(err.max_abs <= same_sum_tolerance);
  }
}

TEST_CASE("a query whose scores are all -inf gives zeros, not NaN", "[ch03]") {
  const std::vector<double> scores(5, -inf);
  const auto values = fa::normal(5 * 3, 950);
  for (std::size_t block = 1; block <= 6; ++block) {
    INFO("block " << block);
    CHECK(ch03::online_weighted_sum(scores, matrix(values, 3), block) == std::vector<double>(3, 0.0));
    for (const auto& st : ch03::trace_online_weighted_sum(scores, matrix(values, 3), block)) {
      CHECK(st.l == 0.0);
      CHECK(st.output == std::vector<double>(3, 0.0));
    }
  }
  CHECK(ch03::weighted_sum_all_at_once(scores, matrix(values, 3)) == std::vector<double>(3, 0.0));
}

TEST_CASE("a NaN score makes the output NaN; a NaN value only its own column", "[ch03][graded03b]") {
  const auto values = fa::normal(4 * 2, 960);
  for (std::size_t block : {1u, 2u, 4u}) {
    for (double o :
         ch03::online_weighted_sum(std::vector<double>{1.0, not_a_number, 3.0, 2.0}, matrix(values, 2), block)) {
      CHECK(std::isnan(o));
    }
    std::vector<double> bad_values(values);
    bad_values[2 * 3 + 1] = not_a_number;  // row 3, column 1
    const auto out = ch03::online_weighted_sum(example_scores, matrix(bad_values, 2), block);
    CHECK(std::isnan(out[1]));
    const auto clean = ch03::online_weighted_sum(example_scores, matrix(values, 2), block);
    CHECK(out[0] == clean[0]);
  }
}

TEST_CASE("bad arguments to the online weighted sum are refused", "[ch03]") {
  const std::vector<double> none;
  CHECK_THROWS_AS(ch03::online_weighted_sum(none, matrix(none, 1), 2), std::invalid_argument);
  CHECK_THROWS_AS(ch03::online_weighted_sum(example_scores, matrix(example_values, 1), 0), std::invalid_argument);
  CHECK_THROWS_AS(ch03::online_weighted_sum(example_scores, matrix(example_values, 2), 2), std::invalid_argument);
  CHECK_THROWS_AS(ch03::online_weighted_sum(example_scores, fa::MatrixView<const double>(nullptr, 4, 0), 2),
                  std::invalid_argument);
  CHECK_THROWS_AS(ch03::trace_online_weighted_sum(example_scores, matrix(example_values, 1), 0), std::invalid_argument);
  CHECK_THROWS_AS(ch03::weighted_sum_all_at_once(none, matrix(none, 1)), std::invalid_argument);
  CHECK_THROWS_AS(ch03::weighted_sum_all_at_once(example_scores, matrix(example_values, 4)), std::invalid_argument);
  ch03::RowState state(2);
  CHECK_THROWS_AS(state.fold(example_scores, matrix(example_values, 1)), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------
// Part 2: whole attention.

namespace {

struct Problem {
  std::size_t batch, heads, seq_q, seq_k, head_dim;
  fa::Shape4 q_shape() const { return {batch, heads, seq_q, head_dim}; }
  fa::Shape4 kv_shape() const { return {batch, heads, seq_k, head_dim}; }
};

struct Reference {
  std::vector<long double> O;
  std::vector<long double> L;
};

// O = softmax(Q K^T * scale) V in long double, the whole row of S at once, with flat indices
// computed here (not through fa::Tensor4View) and the causal rule written out: key j is visible to
// query i when j <= i + seq_k - seq_q.
Reference reference_attention(const Problem& p, const std::vector<double>& q, const std::vector<double>& k,
                              const std::vector<double>& v, double scale, bool causal) {
  const std::size_t D = p.head_dim;
  Reference r{std::vector<long double>(p.batch * p.heads * p.seq_q * D),
              std::vector<long double>(p.batch * p.heads * p.seq_q)};
  for (std::size_t bh = 0; bh < p.batch * p.heads; ++bh) {
    for (std::size_t i = 0; i < p.seq_q; ++i) {
      const std::size_t row = bh * p.seq_q + i;
      std::vector<long double> s;
      long double max = -std::numeric_limits<long double>::infinity();
      for (std::size_t j = 0; j < p.seq_k; ++j) {
        const bool visible = !causal || static_cast<long long>(j) <=
                                            static_cast<long long>(i + p.seq_k) - static_cast<long long>(p.seq_q);
        if (!visible) continue;
        long double dot = 0;
        for (std::size_t d = 0; d < D; ++d) {
          dot += static_cast<long double>(q[row * D + d]) * k[(bh * p.seq_k + j) * D + d];
        }
        s.push_back(scale * dot);
        max = std::max(max, s.back());
      }
      if (s.empty()) {  // a row that sees no key: zeros, and L = -inf
        r.L[row] = -std::numeric_limits<long double>::infinity();
        continue;
      }
      long double l = 0;
      for (std::size_t j = 0; j < s.size(); ++j) {  // the visible keys are 0 .. s.size() - 1
        const long double w = std::exp(s[j] - max);
        l += w;
        for (std::size_t d = 0; d < D; ++d) r.O[row * D + d] += w * v[(bh * p.seq_k + j) * D + d];
      }
      for (std::size_t d = 0; d < D; ++d) r.O[row * D + d] /= l;
      r.L[row] = max + std::log(l);
    }
  }
  return r;
}

// The chapter's bound for whole attention: its reason is beside ch03::kAttentionBound.
constexpr double attention_tolerance = ch03::kAttentionBound;

// with_all_at_once: also check attention_all_at_once (built on chapter 02's online softmax).
template <class T>
void check_attention(const Problem& p, std::size_t key_block, bool causal, std::uint64_t seed,
                     bool with_all_at_once = true) {
  const auto q = fa::normal<T>(p.q_shape().size(), seed);
  const auto k = fa::normal<T>(p.kv_shape().size(), seed + 1);
  const auto v = fa::normal<T>(p.kv_shape().size(), seed + 2);
  const fa::Tensor4<T> Q(p.q_shape(), q), K(p.kv_shape(), k), V(p.kv_shape(), v);
  const double scale = 1.0 / std::sqrt(static_cast<double>(p.head_dim));
  const Reference ref =
      reference_attention(p, std::vector<double>(q.begin(), q.end()), std::vector<double>(k.begin(), k.end()),
                          std::vector<double>(v.begin(), v.end()), scale, causal);
  const ch03::AttentionOptions options{std::nullopt, causal, key_block};

  const ch03::AttentionResult out = ch03::attention(Q, K, V, options);
  REQUIRE(out.O.shape == p.q_shape());
  const auto o_err = fa::compare(out.O.values, ref.O);
  const auto l_err = fa::compare(out.L, ref.L);
  INFO("Q " << p.q_shape().str() << ", seq_len_k " << p.seq_k << ", key_block " << key_block << ", causal " << causal
            << ", seed " << seed);
  INFO("O: " << fa::describe(o_err));
  INFO("L: " << fa::describe(l_err));
  CHECK(o_err.max_abs <= attention_tolerance);
  CHECK(l_err.max_abs <= attention_tolerance);

  // The all-at-once form the demo compares against must agree with the reference too.
  if (!with_all_at_once) return;
  const ch03::AttentionResult all = ch03::attention_all_at_once(Q, K, V, options);
  CHECK(fa::compare(all.O.values, ref.O).max_abs <= attention_tolerance);
  CHECK(fa::compare(all.L, ref.L).max_abs <= attention_tolerance);
}

std::vector<double> mean_of_rows(const fa::MatrixView<const double>& m, std::size_t rows) {
  std::vector<double> mean(m.cols(), 0.0);
  for (std::size_t j = 0; j < rows; ++j) {
    for (std::size_t d = 0; d < m.cols(); ++d) mean[d] += m(j, d) / static_cast<double>(rows);
  }
  return mean;
}

}  // namespace

TEST_CASE("attention agrees with an all-at-once evaluation, batch 2 and 3 heads", "[ch03]") {
  struct Case {
    std::size_t seq_q, seq_k, head_dim, key_block;
  };
  // Equal lengths, tails shorter than a block, seq_q < seq_k, seq_q > seq_k (causal: rows that see
  // no key), one decoding query against 257 keys, blocks of 1 and blocks longer than the row.
  const Case c =
      GENERATE(Case{1, 1, 1, 64}, Case{5, 5, 4, 2}, Case{17, 17, 8, 4}, Case{7, 13, 16, 5}, Case{13, 7, 8, 3},
               Case{1, 257, 64, 64}, Case{33, 65, 32, 16}, Case{20, 20, 8, 1}, Case{9, 9, 4, 100});
  const bool causal = GENERATE(false, true);
  const Problem p{2, 3, c.seq_q, c.seq_k, c.head_dim};
  const std::uint64_t seed = 10000 + 100 * c.seq_q + c.seq_k + (causal ? 50000 : 0);
  check_attention<double>(p, c.key_block, causal, seed);
}

TEST_CASE("attention agrees with the long-double definition, rows that see no key included", "[ch03][graded03c]") {
  // The grading test of exercise 03c: chapter 03's attention alone against the definition, so that
  // it fails for chapter 03's own lines only.
  const bool causal = GENERATE(false, true);
  check_attention<double>(Problem{2, 3, 13, 7, 8}, 3, causal, 21000, false);
  check_attention<double>(Problem{2, 3, 7, 13, 16}, 5, causal, 22000, false);
  check_attention<float>(Problem{1, 2, 1, 257, 64}, 64, causal, 23000, false);
}

TEST_CASE("attention takes float inputs and computes in double", "[ch03]") {
  const bool causal = GENERATE(false, true);
  check_attention<float>(Problem{2, 3, 11, 19, 16}, 8, causal, 20000);
}

TEST_CASE("a single decoding query sees all 257 keys, causal or not", "[ch03]") {
  const Problem p{1, 2, 1, 257, 64};
  const fa::Tensor4<double> Q(p.q_shape(), fa::normal(p.q_shape().size(), 30000));
  const fa::Tensor4<double> K(p.kv_shape(), fa::normal(p.kv_shape().size(), 30001));
  const fa::Tensor4<double> V(p.kv_shape(), fa::normal(p.kv_shape().size(), 30002));
  // The same keys in the same blocks: the same bits.
  const auto plain = ch03::attention(Q, K, V, {std::nullopt, false, 64});
  const auto causal = ch03::attention(Q, K, V, {std::nullopt, true, 64});
  CHECK(plain.O.values == causal.O.values);
  CHECK(plain.L == causal.L);
  // Aligned to the top left instead, the query would see key 0 alone and its output would be V's row 0.
  for (std::size_t h = 0; h < 2; ++h) CHECK(causal.O.view()(0, h, 0, 0) != V.view()(0, h, 0, 0));
  // And it agrees with the reference.
  check_attention<double>(p, 64, true, 30000);
}

TEST_CASE("causal rows that see no key give zeros and L = -inf", "[ch03][graded03c]") {
  const Problem p{2, 3, 10, 4, 8};  // rows 0..5 see no key, row 6 sees key 0, ... row 9 all four
  const fa::Tensor4<double> Q(p.q_shape(), fa::normal(p.q_shape().size(), 40000));
  const fa::Tensor4<double> K(p.kv_shape(), fa::normal(p.kv_shape().size(), 40001));
  const fa::Tensor4<double> V(p.kv_shape(), fa::normal(p.kv_shape().size(), 40002));
  const auto out = ch03::attention(Q, K, V, {std::nullopt, true, 3});
  for (std::size_t b = 0; b < 2; ++b) {
    for (std::size_t h = 0; h < 3; ++h) {
      for (std::size_t i = 0; i < 10; ++i) {
        INFO("b " << b << ", h " << h << ", row " << i);
        const auto row = out.O.view().head(b, h).row(i);
        const double L = out.L[(b * 3 + h) * 10 + i];
        if (i < 6) {
          CHECK(std::all_of(row.begin(), row.end(), [](double o) { return o == 0.0; }));
          CHECK(L == -inf);
        } else {
          CHECK(std::isfinite(L));
          CHECK(std::any_of(row.begin(), row.end(), [](double o) { return o != 0.0; }));
        }
      }
    }
  }
  // Row 6 sees only key 0: its output is V's row 0, whatever the scores.
  const auto row6 = out.O.view().head(1, 2).row(6);
  const auto v0 = V.view().head(1, 2).row(0);
  for (std::size_t d = 0; d < 8; ++d) CHECK(row6[d] == v0[d]);  // weight exp(0) / exp(0) = 1 exactly
}

TEST_CASE("scale: 0 averages the visible values; an explicit 1/sqrt(head_dim) is the default", "[ch03][graded03c]") {
  const Problem p{2, 3, 6, 6, 4};
  const fa::Tensor4<double> Q(p.q_shape(), fa::normal(p.q_shape().size(), 50000));
  const fa::Tensor4<double> K(p.kv_shape(), fa::normal(p.kv_shape().size(), 50001));
  const fa::Tensor4<double> V(p.kv_shape(), fa::normal(p.kv_shape().size(), 50002));
  const auto flat = ch03::attention(Q, K, V, {0.0, true, 4});
  for (std::size_t i = 0; i < 6; ++i) {
    const auto mean = mean_of_rows(V.view().head(1, 1), i + 1);  // causal: row i sees keys 0..i
    const auto row = flat.O.view().head(1, 1).row(i);
    // Means of up to 6 values below ~5, added in different orders: a few eps.
    for (std::size_t d = 0; d < 4; ++d) CHECK(std::fabs(row[d] - mean[d]) <= 1e-14);
    CHECK(std::fabs(flat.L[(1 * 3 + 1) * 6 + i] - std::log(static_cast<double>(i + 1))) <= 1e-14);
  }
  const auto by_default = ch03::attention(Q, K, V);
  const auto explicit_scale = ch03::attention(Q, K, V, {0.5, false, 64});  // head_dim 4: 1/sqrt(4)
  CHECK(by_default.O.values == explicit_scale.O.values);
  // A different scale gives a different answer (the option is used).
  CHECK(ch03::attention(Q, K, V, {2.0, false, 64}).O.values != by_default.O.values);
}

TEST_CASE("NaN reaches only the outputs that see it", "[ch03][graded03c]") {
  const Problem p{2, 3, 8, 8, 4};
  const fa::Tensor4<double> Q(p.q_shape(), fa::normal(p.q_shape().size(), 60000));
  fa::Tensor4<double> K(p.kv_shape(), fa::normal(p.kv_shape().size(), 60001));
  const fa::Tensor4<double> V(p.kv_shape(), fa::normal(p.kv_shape().size(), 60002));
  K.view()(1, 2, 5, 3) = not_a_number;  // key 5 of batch 1, head 2
  const auto out = ch03::attention(Q, K, V, {std::nullopt, true, 2});
  for (std::size_t i = 0; i < 8; ++i) {
    INFO("row " << i);
    // Causal: rows 0..4 never visit key 5; rows 5..7 do, and every output of theirs is NaN.
    CHECK(std::isnan(out.O.view()(1, 2, i, 0)) == (i >= 5));
    CHECK(std::isnan(out.L[(1 * 3 + 2) * 8 + i]) == (i >= 5));
    CHECK(std::isfinite(out.O.view()(1, 1, i, 0)));  // the other heads are untouched
    CHECK(std::isfinite(out.O.view()(0, 2, i, 0)));
  }
}

TEST_CASE("bad shapes and options are refused with std::invalid_argument", "[ch03]") {
  const fa::Tensor4<double> Q(fa::Shape4{2, 3, 5, 4}, 1.0);
  const fa::Tensor4<double> K(fa::Shape4{2, 3, 7, 4}, 1.0);
  const fa::Tensor4<double> V(fa::Shape4{2, 3, 7, 4}, 1.0);
  CHECK_NOTHROW(ch03::attention(Q, K, V));
  CHECK_THROWS_AS(ch03::attention(Q, K, fa::Tensor4<double>(fa::Shape4{2, 3, 6, 4}, 1.0)), std::invalid_argument);
  CHECK_THROWS_AS(ch03::attention(Q, fa::Tensor4<double>(fa::Shape4{2, 3, 7, 8}, 1.0),
                                  fa::Tensor4<double>(fa::Shape4{2, 3, 7, 8}, 1.0)),
                  std::invalid_argument);
  CHECK_THROWS_AS(ch03::attention(fa::Tensor4<double>(fa::Shape4{1, 3, 5, 4}, 1.0), K, V), std::invalid_argument);
  CHECK_THROWS_AS(ch03::attention(fa::Tensor4<double>(fa::Shape4{2, 3, 0, 4}), K, V), std::invalid_argument);
  CHECK_THROWS_AS(ch03::attention(Q, K, V, {std::nullopt, false, 0}), std::invalid_argument);
  CHECK_THROWS_AS(ch03::attention(Q, K, V, {not_a_number, false, 64}), std::invalid_argument);
  CHECK_THROWS_AS(ch03::attention(Q, K, V, {inf, false, 64}), std::invalid_argument);
  CHECK_THROWS_AS(ch03::attention_all_at_once(Q, K, V, {-inf, false, 64}), std::invalid_argument);
  fa::Tensor4<double> short_q(Q);
  short_q.values.pop_back();  // values that no longer fill the shape
  CHECK_THROWS_AS(ch03::attention(short_q, K, V), std::invalid_argument);
}
