// Chapter 04 tests: the three naive kernels agree with chapter 03's CPU attention.
//
// Compiled twice: 04_naive_attention_test runs the kernels on the CPU through common/simt;
// 04_naive_attention_gpu_test (FA_TEST_ON_GPU) runs the same cases on a GPU, and is SKIPPED
// where there is none.
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "attention_inputs.h"
#include "catch.h"
#include "chapters/01_safe_softmax/safe_softmax.h"
#include "chapters/03_online_weighted_sum/attention.h"
#include "chapters/04_naive_attention/lab/vs_chapter_03.h"
#include "chapters/04_naive_attention/naive_attention.h"
#include "common/attention_shapes.h"
#include "common/compare.h"

namespace {

using fa_test::kDevice;

// Float32 kernels against chapter 03's float64 recurrence on the same float32 inputs, within the
// chapter's bound (lab/vs_chapter_03.h, the demo's too): twice the error of a plain float32 evaluation of
// the same formula on the same input, plus float32's unit roundoff. With scores of order 1 that is
// about 1e-6; a wrong mask, index or normalisation gives errors of order 1e-2 to 1.

struct Case {
  std::size_t seq_len_q, seq_len_k, head_dim;
  bool causal;
};

void check_case(const Case& c, std::uint64_t seed) {
  const std::size_t batch = fa_test::kCaseBatch, heads = fa_test::kCaseHeads;
  const double scale = fa::default_scale(c.head_dim);
  const auto in =
      fa_test::make_inputs(batch, heads, c.seq_len_q, c.seq_len_k, c.head_dim, scale, fa_test::Scores::normal, seed);
  const auto ref = ch03::attention(in.Q, in.K, in.V, {.scale = scale, .causal = c.causal});
  const auto out = ch04::naive_attention(in.Q, in.K, in.V, {.scale = scale, .causal = c.causal}, kDevice);

  const auto err = fa::compare(out.O.values, ref.O.values);
  const ch04::Agreement bound = ch04::agreement_bound(in.Q, in.K, in.V, {.scale = scale, .causal = c.causal});
  INFO("seq_len_q " << c.seq_len_q << ", seq_len_k " << c.seq_len_k << ", head_dim " << c.head_dim
                    << (c.causal ? ", causal" : "") << ", seed " << seed << ": O " << fa::describe(err) << "; bound "
                    << bound.bound);
  CHECK(fa::agrees(err, bound.bound));

  // Every row of P sums to 1, or is all zeros when the causal mask hides every key of the row.
  for (std::size_t r = 0; r < batch * heads * c.seq_len_q; ++r) {
    const std::size_t i = r % c.seq_len_q;
    double sum = 0.0;
    for (std::size_t j = 0; j < c.seq_len_k; ++j) sum += out.P[r * c.seq_len_k + j];
    const bool sees_keys = !c.causal || fa::causal_visible_keys(i, c.seq_len_q, c.seq_len_k) > 0;
    INFO("row " << r << " of P sums to " << sum);
    // A float row sum of seq_len_k weights, each rounded once: within seq_len_k * u of 1.
    if (sees_keys)
      REQUIRE(std::fabs(sum - 1.0) <= 1e-7 * static_cast<double>(c.seq_len_k) + 1e-7);
    else
      REQUIRE(sum == 0.0);
  }
}

}  // namespace

TEST_CASE("naive attention agrees with chapter 03 for every shape of the list", "[ch04][sanitizer]") {
  const auto shapes = fa_test::sequence_lengths();
  const std::size_t k = GENERATE_COPY(range(std::size_t{0}, shapes.size()));
  const bool causal = GENERATE(false, true);
#if FA_SANITIZER_BUILD
  // Under the sanitizers one head dim per shape and mask, in turn: every shape with and without the
  // mask, every head dim, at a third of the time. The naive kernels start a thread per score, and
  // each is a fiber that ThreadSanitizer follows: this test took 10 minutes under it with all three.
  const std::size_t head_dim = std::size_t{32} << ((k + (causal ? 1 : 0)) % 3);
#else
  const std::size_t head_dim = GENERATE(32u, 64u, 128u);
#endif
  const auto [seq_len_q, seq_len_k] = shapes[k];
  check_case({seq_len_q, seq_len_k, head_dim, causal}, 4000 + seq_len_q * 7 + seq_len_k + head_dim);
}

TEST_CASE("naive attention works for any head_dim, not only the ones chapter 05 compiles", "[ch04][sanitizer]") {
  const std::size_t head_dim = GENERATE(1u, 3u, 17u, 48u, 200u);
  const bool causal = GENERATE(false, true);
  check_case({37, 53, head_dim, causal}, 4100 + head_dim);
}

#if !FA_SANITIZER_BUILD
// The longest case of the list; left out under the sanitizers, where it would take minutes.
TEST_CASE("naive attention agrees with chapter 03 at seq_len 1000", "[ch04]") {
  const std::size_t head_dim = GENERATE(32u, 64u, 128u);
  const bool causal = GENERATE(false, true);
  check_case({1000, 1000, head_dim, causal}, 4200 + head_dim);
}
#endif

TEST_CASE("naive attention writes S and P as the chapter says", "[ch04]") {
  const auto in = fa_test::make_inputs(1, 2, 5, 7, 8, 0.5, fa_test::Scores::normal, 4300);
  const auto out = ch04::naive_attention(in.Q, in.K, in.V, {.scale = 0.5, .causal = true}, kDevice);
  for (std::size_t h = 0; h < 2; ++h) {
    for (std::size_t i = 0; i < 5; ++i) {
      for (std::size_t j = 0; j < 7; ++j) {
        const std::size_t at = (h * 5 + i) * 7 + j;
        // query i sees keys j <= i + 7 - 5
        if (j > i + 2) {
          CHECK(out.S[at] == -std::numeric_limits<float>::infinity());
          CHECK(out.P[at] == 0.0f);
          continue;
        }
        double dot = 0.0;
        for (std::size_t d = 0; d < 8; ++d) dot += double(in.Q.view()(0, h, i, d)) * in.K.view()(0, h, j, d);
        // An 8-term float dot product of normal(0,1) numbers: error well under 1e-5.
        CHECK(std::fabs(out.S[at] - 0.5 * dot) <= 1e-5);
      }
    }
  }
}

TEST_CASE("rows that see no key give zeros, not NaN", "[ch04][sanitizer]") {
  // seq_len_q > seq_len_k under the causal mask: the first 4 rows see nothing.
  const auto in = fa_test::make_inputs(1, 1, 9, 5, 4, 0.5, fa_test::Scores::normal, 4400);
  const auto out = ch04::naive_attention(in.Q, in.K, in.V, {.causal = true}, kDevice);
  for (std::size_t i = 0; i < 9; ++i) {
    for (std::size_t d = 0; d < 4; ++d) {
      const float o = out.O.view()(0, 0, i, d);
      INFO("row " << i << " column " << d << ": " << o);
      CHECK(!std::isnan(o));
      if (i < 4) CHECK(o == 0.0f);
    }
  }
}

TEST_CASE("NaN in the input reaches the outputs it touches", "[ch04]") {
  auto in = fa_test::make_inputs(1, 2, 3, 4, 4, 0.5, fa_test::Scores::normal, 4500);
  in.K.view()(0, 0, 2, 1) = std::numeric_limits<float>::quiet_NaN();  // head 0, key 2: every row sees it
  const auto out = ch04::naive_attention(in.Q, in.K, in.V, {}, kDevice);
  const auto ref = ch03::attention(in.Q, in.K, in.V);
  for (std::size_t i = 0; i < 3 * 4; ++i) CHECK(std::isnan(out.O.values[i]));             // head 0: all NaN
  for (std::size_t i = 3 * 4; i < 2 * 3 * 4; ++i) CHECK(std::isfinite(out.O.values[i]));  // head 1: untouched
  // The comparison counts them, finds them where chapter 03 has them too, and still checks head 1.
  const auto err = fa::compare(out.O.values, ref.O.values);
  CHECK(err.out_nan == 12);
  CHECK(err.ref_nan == 12);
  CHECK(err.nonfinite_mismatch == 0);
  CHECK(fa::nonfinite_report(err) == "12 NaN, all where the reference has them too");
  CHECK(fa::agrees(err, 1e-6));
}

// ---- The grading tests of the course's exercises 04a, 04b and 04c (docs/course.md): each kernel
// against the definition applied to its own input (S from Q and K, P from the kernel's S, O from the
// kernel's P), so that each fails for its own kernel's lines only.

namespace {

constexpr double kUnitRoundoff = 0x1p-24;  // float32
// Below the smallest normal float a weight keeps few bits: differences under 1e-37 are not counted.
constexpr double kBelowNormal = 1e-37;

struct KernelRun {
  fa_test::AttentionInputs in;
  ch04::Result out;
  Case c;
  std::uint64_t seed;
};

// Tails in both directions, a decoding query against a ragged last block, and rows that see no key;
// 2 batches x 3 heads, so that a wrong batch or head index shows. Run once per test program and
// kept: the three kernels' test cases read the same runs (a third of the time under the sanitizers).
const std::vector<KernelRun>& grading_runs() {
  static const std::vector<KernelRun> kept = [] {
    std::vector<KernelRun> runs;
    for (const Case& c :
         {Case{37, 53, 32, false}, Case{37, 53, 32, true}, Case{1, 257, 64, true}, Case{203, 113, 16, true}}) {
      const std::uint64_t seed = 4700 + c.seq_len_q + c.seq_len_k + (c.causal ? 1 : 0);
      const double scale = fa::default_scale(c.head_dim);
      auto in = fa_test::make_inputs(2, 3, c.seq_len_q, c.seq_len_k, c.head_dim, scale, fa_test::Scores::normal, seed);
      auto out = ch04::naive_attention(in.Q, in.K, in.V, {.scale = scale, .causal = c.causal}, kDevice);
      runs.push_back({std::move(in), std::move(out), c, seed});
    }
    return runs;
  }();
  return kept;
}

std::string describe(const KernelRun& r) {
  return "seq_len_q " + std::to_string(r.c.seq_len_q) + ", seq_len_k " + std::to_string(r.c.seq_len_k) + ", head_dim " +
         std::to_string(r.c.head_dim) + (r.c.causal ? ", causal" : "") + ", seed " + std::to_string(r.seed);
}

// Runs `check` on every grading run, once the run's `input` (what the kernel before the one under
// test wrote: the scores kernel's S, the softmax kernel's P) holds no NaN: the kernel under test
// reads it, and its check means nothing otherwise. `writer` names the exercise that writes it.
template <typename Check>
void for_each_run_on(std::vector<float> ch04::Result::*input, const char* name, const char* writer, Check check) {
  for (const KernelRun& r : grading_runs()) {
    INFO(describe(r));
    {
      std::size_t nan = 0;
      for (float x : r.out.*input) nan += std::isnan(x) ? 1 : 0;
      INFO(name << " holds " << nan << " NaN: " << writer << " must work first");
      REQUIRE(nan == 0);
    }
    check(r);
  }
}

}  // namespace

TEST_CASE("the scores kernel writes scale * Q K^T for every batch and head, -inf where the mask hides the key",
          "[ch04][graded04a]") {
  for (const KernelRun& r : grading_runs()) {
    const std::size_t n_q = r.c.seq_len_q, n_k = r.c.seq_len_k, dim = r.c.head_dim;
    const double scale = fa::default_scale(dim);
    std::size_t wrong = 0;
    std::string first;
    for (std::size_t bh = 0; bh < 6; ++bh) {
      for (std::size_t i = 0; i < n_q; ++i) {
        const std::size_t visible = r.c.causal ? fa::causal_visible_keys(i, n_q, n_k) : n_k;
        for (std::size_t j = 0; j < n_k; ++j) {
          double dot = 0.0, magnitude = 0.0;
          for (std::size_t d = 0; d < dim; ++d) {
            const double product =
                double(r.in.Q.values[(bh * n_q + i) * dim + d]) * r.in.K.values[(bh * n_k + j) * dim + d];
            dot += product;
            magnitude += std::fabs(product);
          }
          const double got = r.out.S[(bh * n_q + i) * n_k + j];
          // A float dot product of head_dim terms is within head_dim u of the sum of their magnitudes;
          // one more u for the scale, doubled for a GPU's fused multiply-adds.
          const bool ok = j < visible ? std::fabs(got - scale * dot) <=
                                            2.0 * static_cast<double>(dim + 1) * kUnitRoundoff * scale * magnitude
                                      : got == -INFINITY;
          if (!ok && wrong++ == 0) {
            first = fmt::format("S[head {}][{}][{}] = {:.9g}, expected {}", bh, i, j, got,
                                j < visible ? fmt::format("{:.9g}", scale * dot) : "-inf (masked)");
          }
        }
      }
    }
    INFO(describe(r) << ": " << wrong << " of " << r.out.S.size() << " scores wrong; the first: " << first);
    CHECK(wrong == 0);
  }
}

TEST_CASE("the softmax kernel makes each row of P chapter 01's softmax of the same row of S", "[ch04][graded04b]") {
  for_each_run_on(&ch04::Result::S, "S", "the scores kernel (exercise 04a)", [](const KernelRun& r) {
    const std::size_t n_k = r.c.seq_len_k;
    std::size_t wrong = 0;
    std::string first;
    for (std::size_t row = 0; row < r.out.S.size() / n_k; ++row) {
      const std::vector<double> s(r.out.S.begin() + row * n_k, r.out.S.begin() + (row + 1) * n_k);
      const std::vector<double> p = ch01::safe_softmax(std::span<const double>(s));
      for (std::size_t j = 0; j < n_k; ++j) {
        const double got = r.out.P[row * n_k + j];
        // l is a float sum of n_k terms (n_k u), each an expf of a rounded difference (a few u for
        // scores of order 1), and one division: (n_k + 32) u relative covers them. A row of only
        // -inf must give zeros.
        if (!(std::fabs(got - p[j]) <= static_cast<double>(n_k + 32) * kUnitRoundoff * p[j] + kBelowNormal) &&
            wrong++ == 0) {
          first = fmt::format("P[row {}][{}] = {:.9g}, expected {:.9g}", row, j, got, p[j]);
        }
      }
    }
    INFO(wrong << " of " << r.out.P.size() << " weights wrong; the first: " << first);
    CHECK(wrong == 0);
  });
}

TEST_CASE("the P V kernel makes O = P V from the kernel's own P", "[ch04][graded04c]") {
  for_each_run_on(&ch04::Result::P, "P", "the softmax kernel (exercise 04b)", [](const KernelRun& r) {
    const std::size_t n_q = r.c.seq_len_q, n_k = r.c.seq_len_k, dim = r.c.head_dim;
    std::size_t wrong = 0;
    std::string first;
    for (std::size_t bh = 0; bh < 6; ++bh) {
      for (std::size_t i = 0; i < n_q; ++i) {
        for (std::size_t d = 0; d < dim; ++d) {
          double o = 0.0, magnitude = 0.0;
          for (std::size_t j = 0; j < n_k; ++j) {
            const double term = double(r.out.P[(bh * n_q + i) * n_k + j]) * r.in.V.values[(bh * n_k + j) * dim + d];
            o += term;
            magnitude += std::fabs(term);
          }
          const double got = r.out.O.values[(bh * n_q + i) * dim + d];
          // A float sum of n_k products: within (n_k + 1) u of the sum of their magnitudes, doubled for
          // a GPU's fused multiply-adds.
          if (!(std::fabs(got - o) <= 2.0 * static_cast<double>(n_k + 1) * kUnitRoundoff * magnitude + kBelowNormal) &&
              wrong++ == 0) {
            first = fmt::format("O[head {}][{}][{}] = {:.9g}, expected {:.9g}", bh, i, d, got, o);
          }
        }
      }
    }
    INFO(wrong << " of " << r.out.O.values.size() << " outputs wrong; the first: " << first);
    CHECK(wrong == 0);
  });
}

TEST_CASE("naive attention refuses shapes that do not fit together", "[ch04]") {
  const auto in = fa_test::make_inputs(1, 2, 4, 6, 8, 0.5, fa_test::Scores::normal, 4600);
  const fa::Tensor4<float> wrong_dim(fa::Shape4{1, 2, 6, 4});
  CHECK_THROWS_AS(ch04::naive_attention(in.Q, wrong_dim, wrong_dim, {}, kDevice), std::invalid_argument);
  CHECK_THROWS_AS(ch04::naive_attention(in.Q, in.K, in.Q, {}, kDevice), std::invalid_argument);
  CHECK_THROWS_AS(ch04::naive_attention(in.Q, in.K, in.V, {.scale = std::nan("")}, kDevice), std::invalid_argument);
}
