// Chapter 05 tests: the FlashAttention-2 kernel agrees with chapter 04's naive kernels.
//
// Compiled twice: 05_flash_attention_2_test runs both chapters' kernels on the CPU through
// common/simt; 05_flash_attention_2_gpu_test (FA_TEST_ON_GPU) runs them on a GPU, and is SKIPPED
// where there is none. Every run starts from outputs filled with NaN (backends.h), so an element
// the kernel forgets to write cannot pass.
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "attention_inputs.h"
#include "catch.h"
#include "chapters/04_naive_attention/naive_attention.h"
#include "chapters/05_flash_attention_2/flash_attention_2.h"
#include "common/attention_shapes.h"
#include "common/compare.h"

namespace {

using fa_test::kDevice;

// Both kernels are float32 and compute every score S[i][j] with the same operations in the same
// order (flash_attention_2.cuh, "Agreement with chapter 04"), so S is the same bit for bit. They
// differ after that: chapter 04 normalises P before P V, chapter 05 rescales a running sum and
// divides at the end. Each of those roundings is ~1 unit roundoff (6e-8) per operation, and the
// measured relative L2 distance is ~1e-7; 1e-6 leaves room for that and fails at once for a
// missed rescale, a wrong mask or a lost tile (errors of order 1e-3 to 1).
constexpr double kRelL2 = 1e-6;

struct Case {
  std::size_t seq_len_q, seq_len_k, head_dim;
  bool causal;
  double scale;
  fa_test::Scores scores;
  ch05::TileShape tile;
};

std::string describe(const Case& c, std::uint64_t seed) {
  return "seq_len_q " + std::to_string(c.seq_len_q) + ", seq_len_k " + std::to_string(c.seq_len_k) +
         ", head_dim " + std::to_string(c.head_dim) + (c.causal ? ", causal" : "") + ", scale " +
         std::to_string(c.scale) + ", scores " + fa_test::to_string(c.scores) + ", tile " +
         std::to_string(c.tile.Br) + "x" + std::to_string(c.tile.Bc) + ", seed " + std::to_string(seed);
}

// log(sum_j exp(S[row][j])) in double, from chapter 04's S; -inf for a row of only -inf.
double logsumexp(const float* s, std::size_t n) {
  double m = -std::numeric_limits<double>::infinity();
  for (std::size_t j = 0; j < n; ++j) m = std::max(m, double(s[j]));
  if (m == -std::numeric_limits<double>::infinity()) return m;
  double l = 0.0;
  for (std::size_t j = 0; j < n; ++j) l += std::exp(double(s[j]) - m);
  return m + std::log(l);
}

// Runs chapter 04 once and chapter 05 once per tile shape in `tiles` on the same inputs, and checks
// O and L of each against chapter 04.
void check_case(const Case& c, std::span<const ch05::TileShape> tiles) {
  const std::size_t batch = 2, heads = 3;  // so that a wrong batch or head index shows
  const std::uint64_t seed = 5000 + 131 * c.seq_len_q + 17 * c.seq_len_k + c.head_dim +
                             static_cast<std::uint64_t>(c.scores) * 7 + (c.causal ? 3 : 0);
  const auto in = fa_test::make_inputs(batch, heads, c.seq_len_q, c.seq_len_k, c.head_dim, c.scale,
                                       c.scores, seed);
  const auto naive = ch04::naive_attention(in.Q, in.K, in.V, {.scale = c.scale, .causal = c.causal}, kDevice);
  std::vector<double> L_ref(naive.O.values.size() / c.head_dim);
  for (std::size_t r = 0; r < L_ref.size(); ++r) L_ref[r] = logsumexp(&naive.S[r * c.seq_len_k], c.seq_len_k);

  for (const ch05::TileShape& tile : tiles) {
    Case with_tile = c;
    with_tile.tile = tile;
    INFO(describe(with_tile, seed));
    const auto flash = ch05::flash_attention_2(in.Q, in.K, in.V,
                                               {.scale = c.scale, .causal = c.causal, .tile = tile}, kDevice);
    const auto err = fa::compare(flash.O.values, naive.O.values);
    INFO("O: " << fa::describe(err));
    CHECK(err.rel_l2 <= kRelL2);

    // L against the log-sum-exp of chapter 04's rows of S. L = m + log(l) in float: m is exact (a
    // score), log(l) carries the float sum's error (~seq_len_k * u relative in l, i.e. absolute in
    // log l); so |L - ref| <= u * |m| + seq_len_k * u, written below with u rounded up to 1.2e-7.
    for (std::size_t r = 0; r < L_ref.size(); ++r) {
      const double tol = 1.2e-7 * (std::fabs(L_ref[r]) + static_cast<double>(c.seq_len_k) + 1.0);
      INFO("L of row " << r << ": " << flash.L[r] << ", from S: " << L_ref[r]);
      if (std::isinf(L_ref[r])) REQUIRE(flash.L[r] == L_ref[r]);  // a row that sees no key: -inf
      else REQUIRE(std::fabs(flash.L[r] - L_ref[r]) <= tol);
    }
  }
}

void check_case(const Case& c) { check_case(c, std::span<const ch05::TileShape>(&c.tile, 1)); }

constexpr ch05::TileShape kDefaultTile{64, 64};

}  // namespace

TEST_CASE("FlashAttention-2 agrees with naive attention for every shape of the list and every tile", "[ch05][sanitizer]") {
  const auto [seq_len_q, seq_len_k] = GENERATE(from_range(fa_test::sequence_lengths()));
  const std::size_t head_dim = GENERATE(32u, 64u, 128u);
  const bool causal = GENERATE(false, true);
  check_case({seq_len_q, seq_len_k, head_dim, causal, fa::default_scale(head_dim), fa_test::Scores::normal, {}},
             ch05::kTileShapes);
}

#if !FA_SANITIZER_BUILD
// The longest case of the list; left out under the sanitizers, where it would take minutes.
TEST_CASE("FlashAttention-2 agrees with naive attention at seq_len 1000", "[ch05]") {
  const std::size_t head_dim = GENERATE(32u, 64u, 128u);
  const bool causal = GENERATE(false, true);
  check_case({1000, 1000, head_dim, causal, fa::default_scale(head_dim), fa_test::Scores::normal, kDefaultTile});
}
#endif

TEST_CASE("FlashAttention-2 agrees with naive attention for scale 0.5, large and very low scores", "[ch05]") {
#if FA_SANITIZER_BUILD
  // Under the sanitizers (10-50x slower): two shapes and one head dim, still every scale and kind.
  const auto [seq_len_q, seq_len_k] = GENERATE(table<std::size_t, std::size_t>({{1, 257}, {203, 113}}));
  const std::size_t head_dim = 64;
#else
  const auto [seq_len_q, seq_len_k] = GENERATE(table<std::size_t, std::size_t>(
      {{1, 257}, {33, 33}, {113, 203}, {203, 113}}));
  const std::size_t head_dim = GENERATE(32u, 64u, 128u);
#endif
  const bool causal = GENERATE(false, true);
  const double scale = GENERATE(0.0, 0.5);  // 0.0 stands for 1/sqrt(head_dim)
  const auto scores = GENERATE(fa_test::Scores::normal, fa_test::Scores::large, fa_test::Scores::very_low);
  check_case({seq_len_q, seq_len_k, head_dim, causal, scale == 0.0 ? fa::default_scale(head_dim) : scale,
              scores, kDefaultTile});
}

TEST_CASE("rows that see no key give zeros in O and -inf in L, never NaN", "[ch05][sanitizer]") {
  // Causal with seq_len_q > seq_len_k: query i sees keys j <= i - 90, so rows 0..89 see none.
  const auto in = fa_test::make_inputs(2, 3, 203, 113, 64, 0.125, fa_test::Scores::normal, 5100);
  const auto tile = GENERATE(from_range(ch05::kTileShapes.begin(), ch05::kTileShapes.end()));
  const auto out = ch05::flash_attention_2(in.Q, in.K, in.V, {.causal = true, .tile = tile}, kDevice);
  const auto O = out.O.view();
  for (std::size_t b = 0; b < 2; ++b) {
    for (std::size_t h = 0; h < 3; ++h) {
      for (std::size_t i = 0; i < 203; ++i) {
        const float L = out.L[(b * 3 + h) * 203 + i];
        INFO("batch " << b << " head " << h << " row " << i << ": L = " << L);
        REQUIRE(!std::isnan(L));
        if (i < 90) REQUIRE(L == -std::numeric_limits<float>::infinity());
        else REQUIRE(std::isfinite(L));
        for (std::size_t d = 0; d < 64; ++d) {
          REQUIRE(!std::isnan(O(b, h, i, d)));
          if (i < 90) REQUIRE(O(b, h, i, d) == 0.0f);
        }
      }
    }
  }
}

TEST_CASE("FlashAttention-2 refuses a head_dim it was not compiled for, naming the ones it was", "[ch05]") {
  const auto in = fa_test::make_inputs(1, 1, 8, 8, 48, 0.1, fa_test::Scores::normal, 5200);
  try {
    (void)ch05::flash_attention_2(in.Q, in.K, in.V, {}, kDevice);
    FAIL("head_dim 48 was accepted");
  } catch (const std::invalid_argument& e) {
    const std::string message = e.what();
    INFO(message);
    CHECK(message.find("48") != std::string::npos);
    CHECK(message.find("32, 64, 128") != std::string::npos);
  }
}

TEST_CASE("FlashAttention-2 refuses tiles it does not offer and shapes that do not fit", "[ch05]") {
  const auto in = fa_test::make_inputs(1, 2, 8, 8, 32, 0.1, fa_test::Scores::normal, 5300);
  CHECK_THROWS_AS(ch05::flash_attention_2(in.Q, in.K, in.V, {.tile = {16, 16}}, kDevice), std::invalid_argument);
  const fa::Tensor4<float> other_heads(fa::Shape4{1, 3, 8, 32});
  CHECK_THROWS_AS(ch05::flash_attention_2(in.Q, other_heads, other_heads, {}, kDevice), std::invalid_argument);
  CHECK_THROWS_AS(ch05::flash_attention_2(in.Q, in.K, in.V, {.scale = INFINITY}, kDevice), std::invalid_argument);
}

#if !FA_TEST_ON_GPU
TEST_CASE("asking for the GPU where there is none is a clear error", "[ch05]") {
  if (fa::gpu_available()) return;  // this machine has one: nothing to check here
  const auto in = fa_test::make_inputs(1, 1, 4, 4, 32, 0.1, fa_test::Scores::normal, 5400);
  CHECK_THROWS_AS(ch05::flash_attention_2(in.Q, in.K, in.V, {}, fa::Device::gpu), std::runtime_error);
}
#endif
