// Chapter 05 tests: the FlashAttention-2 kernel agrees with chapter 04's naive kernels.
//
// Compiled twice: 05_flash_attention_2_test runs both chapters' kernels on the CPU through
// common/simt; 05_flash_attention_2_gpu_test (FA_TEST_ON_GPU) runs them on a GPU, and is SKIPPED
// where there is none. Every run starts from outputs filled with NaN (run_flash_attention_2 poisons
// O and L), so an element the kernel forgets to write cannot pass.
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "attention_inputs.h"
#include "catch.h"
#include "chapters/04_naive_attention/lab/vs_chapter_03.h"
#include "chapters/04_naive_attention/naive_attention.h"
#include "chapters/05_flash_attention_2/flash_attention_2.h"
#include "chapters/05_flash_attention_2/lab/vs_chapter_04.h"
#include "common/attention_shapes.h"
#include "common/compare.h"
#include "definition.h"
#include "doc_table.h"

namespace {

using fa_test::kDevice;

// The chapter's bounds (lab/vs_chapter_04.h, the demo's too). O: both kernels are float32 and each is
// within about the error of a plain float32 evaluation of the exact result, so ch04::agreement_bound
// (twice that error plus float32's unit roundoff) holds between them; measured distances are ~1e-7
// for scores of order 1, and a missed rescale, a wrong mask or a lost tile gives 1e-3 to 1. L: per
// row, u (M + ln(seq_len_k) + seq_len_k + 1) against the log-sum-exp of chapter 04's row of S, with
// M = |scale| |q| max_j |k_j| from the inputs (ch05::L_magnitudes).

struct Case {
  std::size_t seq_len_q, seq_len_k, head_dim;
  bool causal;
  std::optional<double> scale;  // 1/sqrt(head_dim) when not given
  fa_test::Scores scores;
  std::optional<fa::Tile> tile;  // ch05::choose_tile's when not given (kDefaultTile on the CPU)
};

std::string describe(const Case& c, std::uint64_t seed) {
  return "seq_len_q " + std::to_string(c.seq_len_q) + ", seq_len_k " + std::to_string(c.seq_len_k) + ", head_dim " +
         std::to_string(c.head_dim) + (c.causal ? ", causal" : "") + ", scale " +
         (c.scale ? std::to_string(*c.scale) : std::string("1/sqrt(head_dim)")) + ", scores " +
         fa_test::to_string(c.scores) + ", tile " +
         (c.tile ? fa::tile_name(*c.tile) : std::string("the chapter's choice")) + ", seed " + std::to_string(seed);
}

// Runs chapter 04 once and chapter 05 once per tile shape in `tiles` on the same inputs, and checks
// O and L of each against chapter 04.
void check_case(const Case& c, std::span<const std::optional<fa::Tile>> tiles) {
  const std::size_t batch = fa_test::kCaseBatch, heads = fa_test::kCaseHeads;
  const std::uint64_t seed = 5000 + 131 * c.seq_len_q + 17 * c.seq_len_k + c.head_dim +
                             static_cast<std::uint64_t>(c.scores) * 7 + (c.causal ? 3 : 0);
  const double scale = c.scale.value_or(fa::default_scale(c.head_dim));
  const auto in = fa_test::make_inputs(batch, heads, c.seq_len_q, c.seq_len_k, c.head_dim, scale, c.scores, seed);
  const auto naive = ch04::naive_attention(in.Q, in.K, in.V, {.scale = c.scale, .causal = c.causal}, kDevice);
  const ch04::Agreement bound = ch04::agreement_bound(in.Q, in.K, in.V, {.scale = c.scale, .causal = c.causal});
  std::vector<double> L_ref(naive.O.values.size() / c.head_dim);
  for (std::size_t r = 0; r < L_ref.size(); ++r) {
    L_ref[r] = ch05::logsumexp(std::span<const float>(naive.S).subspan(r * c.seq_len_k, c.seq_len_k));
  }
  const std::vector<double> magnitudes = ch05::L_magnitudes(in.Q, in.K, scale);

  for (const std::optional<fa::Tile>& tile : tiles) {
    Case with_tile = c;
    with_tile.tile = tile;
    INFO(describe(with_tile, seed));
    const auto flash =
        ch05::flash_attention_2(in.Q, in.K, in.V, {.scale = c.scale, .causal = c.causal, .tile = tile}, kDevice);
    const auto err = fa::compare(flash.O.values, naive.O.values);
    INFO("O: " << fa::describe(err) << "; bound " << bound.bound);
    CHECK(fa::agrees(err, bound.bound));

    // L against the log-sum-exp of chapter 04's rows of S; a row that sees no key is -inf in both.
    const ch05::WorstL L_worst = ch05::worst_L(flash.L, L_ref, magnitudes, c.seq_len_k);
    INFO("L of row " << L_worst.row << ": " << flash.L[L_worst.row] << ", from S: " << L_ref[L_worst.row] << ", bound "
                     << L_worst.bound);
    CHECK(L_worst.pass);
  }
}

void check_case(const Case& c) { check_case(c, std::span<const std::optional<fa::Tile>>(&c.tile, 1)); }

// The tiles compiled for head_dim that the device of these tests holds (fa_test::tiles_that_fit: on
// a T4's GPU, those within its 64 KiB per block).
std::vector<fa::Tile> tiles_to_test(std::size_t head_dim) {
  const int d = static_cast<int>(head_dim);
  return fa_test::tiles_that_fit(fa::tiles_of(ch05::kCompiled, d),
                                 [d](fa::Tile tile) { return ch05::shared_bytes(d, tile); });
}

}  // namespace

TEST_CASE("FlashAttention-2 agrees with naive attention for every shape of the list and every tile",
          "[ch05][sanitizer]") {
  const auto shapes = fa_test::sequence_lengths();
  const std::size_t k = GENERATE_COPY(range(std::size_t{0}, shapes.size()));
  const std::size_t h = GENERATE(0u, 1u, 2u);
  const bool causal = GENERATE(false, true);
  const auto [seq_len_q, seq_len_k] = shapes[k];
  const std::size_t head_dim = std::size_t{32} << h;
  const Case c{seq_len_q, seq_len_k, head_dim, causal, std::nullopt, fa_test::Scores::normal, {}};
  const std::vector<fa::Tile> fit = tiles_to_test(head_dim);
  std::vector<std::optional<fa::Tile>> tiles(fit.begin(), fit.end());
#if FA_SANITIZER_BUILD
  // Under the sanitizers (10 to 50 times slower) one tile per case, in turn (a Latin square over the
  // shape and the head dim): every tile still meets every shape and every head dim, at a third of the
  // CPU time (the tile loop is the same code for every tile; only its bounds differ).
  tiles = {tiles[(k + h + (causal ? 1 : 0)) % tiles.size()]};
#endif
  check_case(c, tiles);
}

#if !FA_SANITIZER_BUILD
// The longest case of the list; left out under the sanitizers, where it would take minutes.
TEST_CASE("FlashAttention-2 agrees with naive attention at seq_len 1000", "[ch05]") {
  const std::size_t head_dim = GENERATE(32u, 64u, 128u);
  const bool causal = GENERATE(false, true);
  check_case({1000, 1000, head_dim, causal, std::nullopt, fa_test::Scores::normal, std::nullopt});
}
#endif

TEST_CASE("FlashAttention-2 agrees with naive attention for scale 0.5, large and very low scores", "[ch05]") {
#if FA_SANITIZER_BUILD
  // Under the sanitizers (10-50x slower): two shapes and one head dim, still every scale and kind.
  const auto [seq_len_q, seq_len_k] = GENERATE(table<std::size_t, std::size_t>({{1, 257}, {203, 113}}));
  const std::size_t head_dim = 64;
#else
  const auto [seq_len_q, seq_len_k] =
      GENERATE(table<std::size_t, std::size_t>({{1, 257}, {33, 33}, {113, 203}, {203, 113}}));
  const std::size_t head_dim = GENERATE(32u, 64u, 128u);
#endif
  const bool causal = GENERATE(false, true);
  const std::optional<double> scale = GENERATE(std::optional<double>(), std::optional<double>(0.5));
  const auto scores = GENERATE(fa_test::Scores::normal, fa_test::Scores::large, fa_test::Scores::very_low);
  check_case({seq_len_q, seq_len_k, head_dim, causal, scale, scores, std::nullopt});
}

TEST_CASE("rows that see no key give zeros in O and -inf in L, never NaN", "[ch05][sanitizer]") {
  // Causal with seq_len_q > seq_len_k: query i sees keys j <= i - 90, so rows 0..89 see none.
  const auto in = fa_test::make_inputs(2, 3, 203, 113, 64, 0.125, fa_test::Scores::normal, 5100);
  const auto tile = GENERATE(from_range(tiles_to_test(64)));
  const auto out = ch05::flash_attention_2(in.Q, in.K, in.V, {.causal = true, .tile = tile}, kDevice);
  fa_test::check_rows_that_see_no_key(out.O, out.L, 113, "tile " + fa::tile_name(tile));
}

// The bound on L comes from the inputs (ch05::L_magnitudes), never from the reference's own L: a
// broken reference whose L is far off cannot widen the bound it is checked with.
TEST_CASE("the bound on L grows with the inputs, not with the reference's L", "[ch05]") {
  const auto in = fa_test::make_inputs(1, 1, 3, 5, 4, 0.5, fa_test::Scores::normal, 77);
  const std::vector<double> magnitudes = ch05::L_magnitudes(in.Q, in.K, 0.5);
  for (std::size_t i = 0; i < 3; ++i) {
    // |L| <= |scale| |q| max_j |k_j| + ln(seq_len_k), checked against the definition in double.
    std::vector<float> s(5);
    for (std::size_t j = 0; j < 5; ++j) {
      double dot = 0.0;
      for (std::size_t c = 0; c < 4; ++c) dot += static_cast<double>(in.Q.values[i * 4 + c]) * in.K.values[j * 4 + c];
      s[j] = static_cast<float>(0.5 * dot);
    }
    CHECK(std::fabs(ch05::logsumexp(s)) <= magnitudes[i]);
  }
  CHECK(ch05::L_bound(1.0, magnitudes[0], 5) == ch05::L_bound(1e9, magnitudes[0], 5));
  // A reference 1e9 off: the row fails, whatever the reference's own L is.
  const std::vector<float> L{1.0f, 1.0f, 1.0f};
  CHECK_FALSE(ch05::worst_L(L, std::vector<double>{1e9, 1.0, 1.0}, magnitudes, 5).pass);
  CHECK(ch05::worst_L(L, std::vector<double>{1.0, 1.0, 1.0}, magnitudes, 5).pass);
  // A bound that is not finite checks nothing: the row fails.
  CHECK_FALSE(ch05::worst_L(L, std::vector<double>{1.0, 1.0, 1.0}, std::vector<double>{INFINITY, 1.0, 1.0}, 5).pass);
}

TEST_CASE("FlashAttention-2 refuses head dims, tiles and shapes it does not run, naming those it does", "[ch05]") {
  const auto d48 = fa_test::make_inputs(1, 1, 8, 8, 48, 0.1, fa_test::Scores::normal, 5200);
  fa_test::check_refused([&] { (void)ch05::flash_attention_2(d48.Q, d48.K, d48.V, {}, kDevice); },
                         {"48", "32, 64, 128"});
  // A tile compiled for no head dim, and one compiled for head dim 128 only (kSmallGpuShapes).
  const auto in = fa_test::make_inputs(1, 2, 8, 8, 32, 0.1, fa_test::Scores::normal, 5300);
  for (const fa::Tile tile : {fa::Tile{16, 16}, fa::Tile{32, 32}}) {
    fa_test::check_refused([&] { (void)ch05::flash_attention_2(in.Q, in.K, in.V, {.tile = tile}, kDevice); },
                           {"tile Br x Bc = " + fa::tile_name(tile) + " is not compiled", "64x64, 32x64, 64x32"});
  }
  const fa::Tensor4<float> other_heads(fa::Shape4{1, 3, 8, 32});
  CHECK_THROWS_AS(ch05::flash_attention_2(in.Q, other_heads, other_heads, {}, kDevice), std::invalid_argument);
  CHECK_THROWS_AS(ch05::flash_attention_2(in.Q, in.K, in.V, {.scale = INFINITY}, kDevice), std::invalid_argument);
}

TEST_CASE("NaN in Q or K reaches O and L where it should, and both checks count it, not fail", "[ch05]") {
  const bool in_K = GENERATE(false, true);
  auto in = fa_test::make_inputs(1, 2, 70, 90, 32, 0.2, fa_test::Scores::normal, 5350);
  // In K: head 0's key 5, which every row sees. In Q: head 0's row 3 only.
  (in_K ? in.K.view()(0, 0, 5, 1) : in.Q.view()(0, 0, 3, 1)) = std::numeric_limits<float>::quiet_NaN();
  const std::size_t nan_rows = in_K ? 70 : 1;
  const auto naive = ch04::naive_attention(in.Q, in.K, in.V, {}, kDevice);
  const auto flash = ch05::flash_attention_2(in.Q, in.K, in.V, {}, kDevice);
  const auto err = fa::compare(flash.O.values, naive.O.values);
  INFO((in_K ? "NaN in K: " : "NaN in Q: ") << fa::describe(err));
  CHECK(err.out_nan == nan_rows * 32);
  CHECK(err.nonfinite_mismatch == 0);
  CHECK(fa::agrees(err, ch04::agreement_bound(in.Q, in.K, in.V, {}).bound));
  std::vector<double> L_ref(flash.L.size());
  for (std::size_t r = 0; r < L_ref.size(); ++r) {
    L_ref[r] = ch05::logsumexp(std::span<const float>(naive.S).subspan(r * 90, 90));
  }
  std::size_t nan_L = 0;
  for (float L : flash.L) nan_L += std::isnan(L);
  CHECK(nan_L == nan_rows);
  CHECK(ch05::worst_L(flash.L, L_ref, ch05::L_magnitudes(in.Q, in.K, fa::default_scale(32)), 90).pass);
}

// ---- The grading tests of the course's exercises 05a and 05b (docs/course.md): the kernel against
// the definition (tests/definition.h) rather than against chapter 04, so that they fail for this
// chapter's own lines only.

namespace {

// O and L of every tile shape against the definition, within the chapter's bounds (O: twice a plain
// float32 evaluation's error plus u; L: chapter 05's per-row rule, with that evaluation's error on
// the row added). 2 batches x 3 heads, so that a wrong batch or head index shows.
void check_against_definition(std::size_t seq_len_q, std::size_t seq_len_k, std::size_t head_dim, bool causal) {
  const std::uint64_t seed = 5800 + 131 * seq_len_q + 17 * seq_len_k + head_dim + (causal ? 3 : 0);
  const auto in = fa_test::make_inputs(2, 3, seq_len_q, seq_len_k, head_dim, fa::default_scale(head_dim),
                                       fa_test::Scores::normal, seed);
  const fa_test::Definition definition = fa_test::definition(in.Q, in.K, in.V, {.causal = causal});
  const std::vector<double> allowance = definition.L_allowance();
  const std::vector<double> magnitudes = ch05::L_magnitudes(in.Q, in.K, fa::default_scale(head_dim));
  for (const fa::Tile& tile : tiles_to_test(head_dim)) {
    const auto out = ch05::flash_attention_2(in.Q, in.K, in.V, {.causal = causal, .tile = tile}, kDevice);
    INFO("seq_len_q " << seq_len_q << ", seq_len_k " << seq_len_k << ", head_dim " << head_dim
                      << (causal ? ", causal" : "") << ", tile " << fa::tile_name(tile) << ", seed " << seed);
    const auto err = fa::compare(out.O.values, definition.exact.O);
    INFO("O against the definition: " << fa::describe(err) << "; bound " << definition.O_bound());
    CHECK(fa::agrees(err, definition.O_bound()));
    const ch05::WorstL L = ch05::worst_L(out.L, definition.exact.L, magnitudes, seq_len_k, allowance);
    INFO("L of row " << L.row << ": " << out.L[L.row] << ", the definition's " << definition.exact.L[L.row]
                     << ", bound " << L.bound);
    CHECK(L.pass);
  }
}

}  // namespace

TEST_CASE("over several key tiles, O and L agree with the definition (no tile cut short, nothing masked)",
          "[ch05][graded05a]") {
  // seq_len_k a multiple of every tile's Bc (32 and 64), not causal: the mask has nothing to hide.
  const auto [seq_len_q, seq_len_k] = GENERATE(table<std::size_t, std::size_t>({{1, 192}, {33, 64}, {100, 128}}));
  const std::size_t head_dim = GENERATE(32u, 64u, 128u);
  check_against_definition(seq_len_q, seq_len_k, head_dim, false);
}

TEST_CASE("where the mask matters, O and L agree with the definition: causal, a last key tile cut short",
          "[ch05][graded05b]") {
  // Tails of the last key tile (33, 257, 203, 113), both sides of a bottom-right diagonal, and rows
  // that see no key (203 queries, 113 keys, causal: rows 0 to 89), where O must be 0 and L -inf.
  const auto [seq_len_q, seq_len_k] =
      GENERATE(table<std::size_t, std::size_t>({{1, 257}, {33, 33}, {113, 203}, {203, 113}}));
  const bool causal = GENERATE(false, true);
  check_against_definition(seq_len_q, seq_len_k, 64, causal);
}

#if !FA_TEST_ON_GPU
namespace {

// The tile a GPU that gives a block `limit` bytes of shared memory runs at head_dim where no tile is
// named (what ch05::choose_tile gives on a GPU), computed here without one.
fa::TileChoice gpu_choice(int head_dim, std::size_t limit) {
  return fa::fit_tile(
      "flash_attention_2", ch05::kDefaultTile, head_dim, ch05::kCompiled,
      [head_dim](fa::Tile tile) { return ch05::shared_bytes(head_dim, tile); }, limit);
}

using fa_test::kT4SharedBytes, fa_test::kA100SharedBytes, fa_test::kH100SharedBytes;

}  // namespace

TEST_CASE("without --tile, a GPU runs the default tile where it fits, else the fitting tile with the most work",
          "[ch05]") {
  // A T4: 64x64 fits at head dim 32 only. At 64, 32x64 and 64x32 both fit with Br * Bc = 2048,
  // and the larger Br wins; at 128 only 32x32 fits.
  const fa::TileChoice d32 = gpu_choice(32, kT4SharedBytes), d64 = gpu_choice(64, kT4SharedBytes),
                       d128 = gpu_choice(128, kT4SharedBytes);
  CHECK(d32.tile == fa::Tile{64, 64});
  CHECK(d32.why.empty());
  CHECK(d64.tile == fa::Tile{64, 32});
  CHECK(d64.bytes == 41728);
  INFO(d64.why);
  CHECK(d64.why.find("64x64 needs 66560 bytes") != std::string::npos);
  CHECK(d64.why.find("65536") != std::string::npos);
  CHECK(d128.tile == fa::Tile{32, 32});
  CHECK(d128.bytes == 53760);
  // An A100 and an H100 hold the default at every head dim.
  for (std::size_t limit : {kA100SharedBytes, kH100SharedBytes}) {
    for (int head_dim : ch05::kHeadDims) {
      const fa::TileChoice c = gpu_choice(head_dim, limit);
      CHECK(c.tile == ch05::kDefaultTile);
      CHECK(c.why.empty());
    }
  }
  // A GPU that holds no tile of head dim 128: one line with the smallest tile's bytes and the limit.
  fa_test::check_refused([] { (void)gpu_choice(128, 49152); }, {"flash_attention_2", "53760", "49152", "--device cpu"});
  // The CPU has no such limit: the default, whatever the head dim.
  for (int head_dim : ch05::kHeadDims) {
    CHECK(ch05::choose_tile(head_dim, {}, fa::Device::cpu).tile == ch05::kDefaultTile);
  }
}

TEST_CASE("docs/workshop.md's T4 row of chapter 05 quotes the bytes the kernel asks for", "[ch05]") {
  fa_test::check_t4_row("05", {{{64, 64}, ch05::shared_bytes(64, {64, 64})},
                               {{64, 32}, ch05::shared_bytes(64, {64, 32})},
                               {{32, 32}, ch05::shared_bytes(128, {32, 32})}});
}

TEST_CASE("asking for the GPU where there is none is a clear error", "[ch05]") {
  if (fa::gpu_available()) FA_SKIP("this machine has a GPU: the error cannot be shown here");
  const auto in = fa_test::make_inputs(1, 1, 4, 4, 32, 0.1, fa_test::Scores::normal, 5400);
  CHECK_THROWS_AS(ch05::flash_attention_2(in.Q, in.K, in.V, {}, fa::Device::gpu), std::runtime_error);
}
#endif
