// Chapter 06 tests: FlashAttention-2 on tensor cores agrees with chapter 05's float32 kernel, run
// on the same inputs rounded to the element type, within the element type's error budget
// (chapters/06_tensor_cores/lab/error_budget.h: FlashAttention's rule).
//
// Compiled twice: 06_tensor_cores_test runs both chapters' kernels on the CPU through common/simt,
// which carries out mma.sync, ldmatrix and cp.async with the PTX ISA's fragment layouts;
// 06_tensor_cores_gpu_test (FA_TEST_ON_GPU) runs them on a GPU, and is SKIPPED where there is none.
// Every run starts from outputs filled with NaN (tensor_cores.cuh's run_tensor_cores), so an
// element the kernel forgets to write cannot pass. The tests tagged [sanitizer] are a small set
// that still reaches every path of the kernel (both element types, both head dims, both tiles,
// tails, the causal diagonal, rows that see no key): the GPU check runs them under
// compute-sanitizer.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "attention_inputs.h"
#include "catch.h"
#include "chapters/05_flash_attention_2/flash_attention_2.h"
#include "chapters/06_tensor_cores/lab/error_budget.h"
#include "chapters/06_tensor_cores/tensor_cores.h"
#include "common/attention_shapes.h"
#include "common/compare.h"
#include "definition.h"

namespace {

using ch06::ElementType;
using fa_test::kDevice;

struct Case {
  std::size_t seq_len_q, seq_len_k, head_dim;
  bool causal;
  double scale;
  fa_test::Scores scores;
  ElementType element;
};

std::string describe(const Case& c, std::uint64_t seed) {
  return "seq_len_q " + std::to_string(c.seq_len_q) + ", seq_len_k " + std::to_string(c.seq_len_k) + ", head_dim " +
         std::to_string(c.head_dim) + (c.causal ? ", causal" : "") + ", scale " + std::to_string(c.scale) +
         ", scores " + fa_test::to_string(c.scores) + ", " + std::string(ch06::to_string(c.element)) + ", seed " +
         std::to_string(seed);
}

// Runs chapter 05 once (float32, on the inputs rounded to the element type) and chapter 06 once per
// tile shape in `tiles` on the same inputs; checks O of each against the error budget and L
// against chapter 05's L.
void check_case(const Case& c, std::span<const fa::Tile> tiles) {
  // Two heads, so that a wrong head offset shows (the kernel folds batch and heads into one index,
  // blockIdx.y, so one batch entry is enough); chapter 05's tests use 2 x 3 at float32's speed.
  const std::size_t batch = 1, heads = 2;
  const std::uint64_t seed = 6000 + 131 * c.seq_len_q + 17 * c.seq_len_k + c.head_dim +
                             static_cast<std::uint64_t>(c.scores) * 7 + (c.causal ? 3 : 0) +
                             (c.element == ElementType::fp16 ? 11 : 0);
  const auto raw = fa_test::make_inputs(batch, heads, c.seq_len_q, c.seq_len_k, c.head_dim, c.scale, c.scores, seed);
  const auto Q = ch06::round_to(raw.Q, c.element, "Q");
  const auto K = ch06::round_to(raw.K, c.element, "K");
  const auto V = ch06::round_to(raw.V, c.element, "V");
  INFO(describe(c, seed));
  const auto ref =
      ch05::flash_attention_2(Q, K, V, {.scale = c.scale, .causal = c.causal, .tile = fa::Tile{64, 64}}, kDevice);
  const ch06::ErrorBudget budget = ch06::error_budget(Q, K, V, c.scale, c.causal, c.element);
  const std::vector<double> L_bound = ch06::L_bounds(Q, K, c.scale, ref.L);

  for (const fa::Tile& tile : tiles) {
    INFO("tile " << fa::tile_name(tile));
    const auto out = ch06::tensor_core_attention(
        Q, K, V, {.scale = c.scale, .causal = c.causal, .tile = tile, .element = c.element}, kDevice);
    const auto err = fa::compare(out.O.values, ref.O.values);
    INFO("O against chapter 05: " << fa::describe(err) << "; reference error " << budget.reference_rel_l2 << ", bound "
                                  << budget.bound);
    CHECK(err.rel_l2 <= budget.bound);

    // L against chapter 05's L, within error_budget.h's L_bounds (its comment gives the reasons).
    for (std::size_t r = 0; r < ref.L.size(); ++r) {
      INFO("L of row " << r << ": " << out.L[r] << ", chapter 05: " << ref.L[r] << ", bound " << L_bound[r]);
      if (std::isinf(ref.L[r])) {
        REQUIRE(out.L[r] == ref.L[r]);  // a row that sees no key: -inf in both
      } else {
        REQUIRE(std::fabs(out.L[r] - ref.L[r]) <= L_bound[r]);
      }
    }
  }
}

void check_case(const Case& c) { check_case(c, ch06::kTileShapes); }

}  // namespace

// The element type of a case of the shape list: every (shape, head dim, causal) combination runs
// once, with the type alternating like a Latin square, so that every shape, every head dim and both
// causal settings meet both types, at half the CPU time of running both everywhere. (Nothing in the
// kernel branches on the type: only the mma and the pair packing differ, and every case runs them.)
ElementType alternating(std::size_t shape_index, std::size_t head_dim, bool causal) {
  return (shape_index + (head_dim == 128 ? 1 : 0) + (causal ? 1 : 0)) % 2 == 0 ? ElementType::bf16 : ElementType::fp16;
}

TEST_CASE("tensor cores agree with chapter 05 within the budget, every shape of the list, head dim, tile", "[ch06]") {
  const auto shapes = fa_test::sequence_lengths();
  const std::size_t k = GENERATE_COPY(range(std::size_t{0}, shapes.size()));
#if FA_SANITIZER_BUILD
  // Under a sanitizer (10 to 50 times slower): head dim 64, causal on every other shape; head dim
  // 128 and the other causal settings run in the [sanitizer] set below.
  const std::size_t head_dim = 64;
  const bool causal = k % 2 == 1;
#else
  const std::size_t head_dim = GENERATE(64u, 128u);
  const bool causal = GENERATE(false, true);
#endif
  const auto [seq_len_q, seq_len_k] = shapes[k];
  check_case({seq_len_q, seq_len_k, head_dim, causal, fa::default_scale(head_dim), fa_test::Scores::normal,
              alternating(k, head_dim, causal)});
}

#if !FA_SANITIZER_BUILD
// The longest case of the list, one per element type (one causal, one not), with the default tile;
// left out under the sanitizers, where it would take minutes.
TEST_CASE("tensor cores agree with chapter 05 within the budget at seq_len 1000", "[ch06]") {
  const auto element = GENERATE(ElementType::bf16, ElementType::fp16);
  const bool causal = element == ElementType::fp16;
  const fa::Tile tile = ch06::Options{}.tile;
  check_case({1000, 1000, 64, causal, fa::default_scale(64), fa_test::Scores::normal, element},
             std::span<const fa::Tile>(&tile, 1));
}
#endif

TEST_CASE("tensor cores agree with chapter 05 for scale 0.5, large and very low scores", "[ch06]") {
  // Every kind of scores with both element types, causal and not, each with the default scale and
  // with 0.5 (the scale alternates with the shape and the causal setting), with the default tile
  // (the tile shapes have their cases above); the head dim alternates with the type and causal.
#if FA_SANITIZER_BUILD
  const std::vector<std::pair<std::size_t, std::size_t>> shapes{{203, 113}};
#else
  const std::vector<std::pair<std::size_t, std::size_t>> shapes{{113, 203}, {203, 113}};
#endif
  const std::size_t k = GENERATE_COPY(range(std::size_t{0}, shapes.size()));
  const auto element = GENERATE(ElementType::bf16, ElementType::fp16);
#if FA_SANITIZER_BUILD
  const bool causal = element == ElementType::fp16;
#else
  const bool causal = GENERATE(false, true);
#endif
  const auto scores = GENERATE(fa_test::Scores::normal, fa_test::Scores::large, fa_test::Scores::very_low);
  const std::size_t head_dim = causal == (element == ElementType::bf16) ? 128 : 64;
  const double scale = (k + (causal ? 1 : 0)) % 2 == 0 ? 0.5 : fa::default_scale(head_dim);
  const fa::Tile tile = ch06::Options{}.tile;
  check_case({shapes[k].first, shapes[k].second, head_dim, causal, scale, scores, element},
             std::span<const fa::Tile>(&tile, 1));
}

TEST_CASE("a small complete set: both types, head dims and tiles, tails, the diagonal", "[ch06][sanitizer]") {
  // A decoding row against a ragged key tile, and partial tiles with rows on both sides of the
  // causal diagonal; each head dim with both types across the two causal settings.
#if FA_SANITIZER_BUILD
  // Under a sanitizer: the one shape that has it all (tails, the diagonal, rows that see no key).
  const auto [seq_len_q, seq_len_k] = GENERATE(table<std::size_t, std::size_t>({{203, 113}}));
#else
  const auto [seq_len_q, seq_len_k] = GENERATE(table<std::size_t, std::size_t>({{1, 257}, {203, 113}}));
#endif
  const std::size_t head_dim = GENERATE(64u, 128u);
  const bool causal = GENERATE(false, true);
  check_case({seq_len_q, seq_len_k, head_dim, causal, fa::default_scale(head_dim), fa_test::Scores::normal,
              alternating(0, head_dim, causal)});
}

TEST_CASE("tensor cores agree with chapter 05 for a negative scale and for scale 0", "[ch06]") {
  // The kernel folds the scale into its exponent (exp2(S c - m c), c > 0) and moves the sign of a
  // scale <= 0 into Q_i once (tensor_cores.cuh): negative scales flip which key is the largest,
  // and scale 0 makes every visible key weigh the same.
  const double scale = GENERATE(-0.125, 0.0);
  const auto element = scale < 0 ? ElementType::bf16 : ElementType::fp16;
  const std::size_t head_dim = scale < 0 ? 64 : 128;
  check_case({113, 203, head_dim, true, scale, fa_test::Scores::normal, element},
             std::span<const fa::Tile>(ch06::kTileShapes));
}

TEST_CASE("weights below 2^-126 are dropped by the exponential and change nothing", "[ch06]") {
  // ex2.approx.ftz (simt::ex2_approx_ftz) flushes results below 2^-126 to 0. Here every query
  // scores 0 against key 0 and about -100 against the others: their weights, e^-100 = 3.7e-44,
  // are subnormal in float32 and become 0, where chapter 05's expf keeps them; float32 cannot hold
  // 1 + 3.7e-44 anyway, so O is exactly V's row 0 in both (V holds element values), and L is 0.
  const auto element = GENERATE(ElementType::bf16, ElementType::fp16);
  const std::size_t seq_len = 70, head_dim = 64;
  const auto raw = fa_test::make_inputs(1, 1, seq_len, seq_len, head_dim, 1.0, fa_test::Scores::normal, 6600);
  fa::Tensor4<float> Q(raw.Q.shape), K(raw.K.shape);
  for (std::size_t i = 0; i < seq_len; ++i) Q.values[i * head_dim] = 1.0f;     // q = e_0
  for (std::size_t j = 1; j < seq_len; ++j) K.values[j * head_dim] = -100.0f;  // k_0 = 0, k_j = -100 e_0
  const auto V = ch06::round_to(raw.V, element, "V");
  const auto out = ch06::tensor_core_attention(Q, K, V, {.scale = 1.0, .element = element}, kDevice);
  const auto ref = ch05::flash_attention_2(Q, K, V, {.scale = 1.0, .causal = false, .tile = fa::Tile{64, 64}}, kDevice);
  for (std::size_t i = 0; i < seq_len; ++i) {
    INFO(ch06::to_string(element) << ", row " << i);
    REQUIRE(out.L[i] == 0.0f);
    for (std::size_t d = 0; d < head_dim; ++d) {
      REQUIRE(out.O.values[i * head_dim + d] == V.values[d]);
      REQUIRE(ref.O.values[i * head_dim + d] == V.values[d]);
    }
  }
}

TEST_CASE("P is rounded to nearest: over many rows the signed error of O averages out", "[ch06]") {
  // The error budget bounds the size of the error, not its sign: a P rounded by truncation (each
  // weight pulled down, by 0.7 of a unit roundoff u on average, while l keeps the unrounded sum)
  // makes errors of about the same size as a faithful rounding, and on many inputs stays inside
  // it. But truncation pulls every output the same way: O shrinks by that same fraction. With V
  // positive (so every O is positive too), the signed mean relative error
  // sum(O - O_05) / sum(O_05) over 2 x 256 rows x 64 columns measures that bias. Rounding to
  // nearest leaves noise: measured -3.8e-5 for bf16 and -8e-7 for fp16. A copy of the kernel that
  // truncated P measured -2.7e-3 (bf16) and -3.4e-4 (fp16), -0.7 u. The bound, u / 8 (4.9e-4 and
  // 6.1e-5), lies between, 13 and 70 times above the first and 5.5 times below the second.
  const auto element = GENERATE(ElementType::bf16, ElementType::fp16);
  const auto raw = fa_test::make_inputs(1, 2, 256, 256, 64, 0.125, fa_test::Scores::normal, 6700);
  fa::Tensor4<float> V_positive = raw.V;
  for (float& v : V_positive.values) v = 1.0f + 0.25f * v;  // normal(1, 0.25): positive but for one in 10^4
  const auto Q = ch06::round_to(raw.Q, element, "Q");
  const auto K = ch06::round_to(raw.K, element, "K");
  const auto V = ch06::round_to(V_positive, element, "V");
  const auto ref =
      ch05::flash_attention_2(Q, K, V, {.scale = 0.125, .causal = false, .tile = fa::Tile{64, 64}}, kDevice);
  const auto out = ch06::tensor_core_attention(Q, K, V, {.scale = 0.125, .element = element}, kDevice);
  double signed_error = 0.0, total = 0.0;
  for (std::size_t n = 0; n < ref.O.values.size(); ++n) {
    signed_error += static_cast<double>(out.O.values[n]) - ref.O.values[n];
    total += ref.O.values[n];
  }
  const double bias = signed_error / total;
  const double u = ch06::unit_roundoff(element);
  INFO(ch06::to_string(element) << ": signed mean relative error " << bias << ", bound " << u / 8);
  CHECK(std::fabs(bias) <= u / 8);
}

TEST_CASE("rows that see no key give zeros in O and -inf in L, never NaN", "[ch06][sanitizer]") {
  // Causal with seq_len_q > seq_len_k: query i sees keys j <= i - 90, so rows 0..89 see none (and
  // with Br = 64 the whole first block sees none: it runs no key tile at all).
  const auto in = fa_test::make_inputs(2, 3, 203, 113, 64, 0.125, fa_test::Scores::normal, 6100);
  const auto tile = GENERATE(from_range(ch06::kTileShapes.begin(), ch06::kTileShapes.end()));
#if FA_SANITIZER_BUILD
  const auto element = tile == ch06::kTileShapes[0] ? ElementType::bf16 : ElementType::fp16;  // one type per tile
#else
  const auto element = GENERATE(ElementType::bf16, ElementType::fp16);
#endif
  const auto out =
      ch06::tensor_core_attention(in.Q, in.K, in.V, {.causal = true, .tile = tile, .element = element}, kDevice);
  fa_test::check_rows_that_see_no_key(out.O, out.L, 113, "tile " + fa::tile_name(tile));
}

TEST_CASE("the error budget is what a faithful bf16 or fp16 pipeline makes", "[ch06]") {
  // Normal inputs, seq_len 256, head_dim 64: a reference evaluation with P and O rounded measures
  // about 2e-3 for bf16 and 2.5e-4 for fp16 (the unit roundoffs 2^-8 and 2^-11 times ~0.55, the
  // mean relative rounding error of a uniform significand). A factor of 2 either way would mean the
  // reference rounds something else than P and O, or nothing at all.
  const auto element = GENERATE(ElementType::bf16, ElementType::fp16);
  const auto raw = fa_test::make_inputs(1, 2, 256, 256, 64, 0.125, fa_test::Scores::normal, 6200);
  const auto Q = ch06::round_to(raw.Q, element, "Q");
  const auto K = ch06::round_to(raw.K, element, "K");
  const auto V = ch06::round_to(raw.V, element, "V");
  const ch06::ErrorBudget budget = ch06::error_budget(Q, K, V, 0.125, false, element);
  const double expected = element == ElementType::bf16 ? 2e-3 : 2.5e-4;
  INFO(ch06::to_string(element) << ": reference error " << budget.reference_rel_l2);
  CHECK(budget.reference_rel_l2 >= expected / 2);
  CHECK(budget.reference_rel_l2 <= expected * 2);
  CHECK(budget.bound == ch06::kBudgetFactor * budget.reference_rel_l2 + ch06::kFloat32Floor);
}

TEST_CASE("round_to rounds to the element type and refuses what fp16 cannot hold", "[ch06]") {
  fa::Tensor4<float> x(fa::Shape4{1, 1, 1, 4},
                       std::vector<float>{1.0f + 0x1p-9f, 1.0f + 0x1p-11f + 0x1p-20f, -3.0f, 65504.0f});
  const auto b = ch06::round_to(x, ElementType::bf16, "x");
  CHECK(b.values[0] == 1.0f);  // bf16's step at 1 is 2^-7: both are below the tie 1 + 2^-8
  CHECK(b.values[1] == 1.0f);
  CHECK(b.values[2] == -3.0f);
  const auto h = ch06::round_to(x, ElementType::fp16, "x");
  CHECK(h.values[0] == 1.0f + 0x1p-9f);   // exact in fp16 (step 2^-10 at 1)
  CHECK(h.values[1] == 1.0f + 0x1p-10f);  // just above the tie 1 + 2^-11: rounds up
  CHECK(h.values[3] == 65504.0f);
  fa::Tensor4<float> big(fa::Shape4{1, 1, 1, 2}, std::vector<float>{1.0f, 70000.0f});
  try {
    (void)ch06::round_to(big, ElementType::fp16, "Q");
    FAIL("70000 was accepted as fp16");
  } catch (const std::invalid_argument& e) {
    const std::string message = e.what();
    INFO(message);
    CHECK(message.find("Q[1]") != std::string::npos);
    CHECK(message.find("65504") != std::string::npos);
  }
  CHECK(ch06::round_to(big, ElementType::bf16, "Q").values[1] == 70144.0f);  // bf16 has the range
}

TEST_CASE("the tensor-core kernel refuses a head_dim it was not compiled for, naming the ones it was", "[ch06]") {
  const auto in = fa_test::make_inputs(1, 1, 8, 8, 32, 0.1, fa_test::Scores::normal, 6300);
  fa_test::check_refused([&] { (void)ch06::tensor_core_attention(in.Q, in.K, in.V, {}, kDevice); }, {"32", "64, 128"});
}

TEST_CASE("the tensor-core kernel refuses tiles it does not offer, bad shapes, scales and inputs", "[ch06]") {
  const auto in = fa_test::make_inputs(1, 2, 8, 8, 64, 0.1, fa_test::Scores::normal, 6400);
  fa_test::check_refused(
      [&] {
        (void)ch06::tensor_core_attention(in.Q, in.K, in.V, {.tile = {32, 64}}, kDevice);
      },
      {"tile Br x Bc = 32x64 is not compiled", "128x64, 64x64"});
  const fa::Tensor4<float> other_heads(fa::Shape4{1, 3, 8, 64});
  CHECK_THROWS_AS(ch06::tensor_core_attention(in.Q, other_heads, other_heads, {}, kDevice), std::invalid_argument);
  CHECK_THROWS_AS(ch06::tensor_core_attention(in.Q, in.K, in.V, {.scale = INFINITY}, kDevice), std::invalid_argument);
  fa::Tensor4<float> huge = in.K;
  huge.values[5] = 1e6f;
  CHECK_THROWS_AS(ch06::tensor_core_attention(in.Q, huge, in.V, {.element = ElementType::fp16}, kDevice),
                  std::invalid_argument);
  CHECK_THROWS_AS(ch06::parse_element_type("fp32"), std::invalid_argument);
  CHECK(ch06::parse_element_type("fp16") == ElementType::fp16);
}

// ---- The grading tests of the course's exercises 06a, 06b and 06c (docs/course.md): the kernel
// against the definition in double on the same rounded inputs (tests/definition.h) rather than
// against chapter 05, so that they fail for this chapter's own lines only. O within the element
// type's error budget (error_budget.h: its reference error is measured against float64 too), L
// within L_bounds; exercise 06a and 06b's tests look at O alone, 06c's at L alone.

namespace {

enum class Look { O, L };

void check_against_definition(std::size_t seq_len_q, std::size_t seq_len_k, std::size_t head_dim, bool causal,
                              ElementType element, Look look) {
  const std::uint64_t seed = 6800 + 131 * seq_len_q + 17 * seq_len_k + head_dim + (causal ? 3 : 0);
  const double scale = fa::default_scale(head_dim);
  const auto raw = fa_test::make_inputs(1, 2, seq_len_q, seq_len_k, head_dim, scale, fa_test::Scores::normal, seed);
  const auto Q = ch06::round_to(raw.Q, element, "Q");
  const auto K = ch06::round_to(raw.K, element, "K");
  const auto V = ch06::round_to(raw.V, element, "V");
  const fa_test::Definition definition = fa_test::definition(Q, K, V, {.scale = scale, .causal = causal});
  const ch06::ErrorBudget budget = ch06::error_budget(Q, K, V, scale, causal, element);
  const std::vector<float> L_exact(definition.exact.L.begin(), definition.exact.L.end());
  const std::vector<double> L_bound = ch06::L_bounds(Q, K, scale, L_exact);
  for (const fa::Tile& tile : ch06::kTileShapes) {
    INFO("seq_len_q " << seq_len_q << ", seq_len_k " << seq_len_k << ", head_dim " << head_dim
                      << (causal ? ", causal" : "") << ", " << ch06::to_string(element) << ", tile "
                      << fa::tile_name(tile) << ", seed " << seed);
    const auto out = ch06::tensor_core_attention(
        Q, K, V, {.scale = scale, .causal = causal, .tile = tile, .element = element}, kDevice);
    if (look == Look::O) {
      const auto err = fa::compare(out.O.values, definition.exact.O);
      INFO("O against the definition: " << fa::describe(err) << "; bound " << budget.bound);
      CHECK(fa::agrees(err, budget.bound));
      continue;
    }
    for (std::size_t r = 0; r < L_exact.size(); ++r) {
      INFO("L of row " << r << ": " << out.L[r] << ", the definition's " << definition.exact.L[r] << ", bound "
                       << L_bound[r]);
      if (std::isinf(definition.exact.L[r])) {
        REQUIRE(out.L[r] == -std::numeric_limits<float>::infinity());  // a row that sees no key
      } else {
        REQUIRE(std::fabs(out.L[r] - definition.exact.L[r]) <= L_bound[r]);
      }
    }
  }
}

}  // namespace

TEST_CASE("P V on tensor cores: O agrees with the definition over whole key tiles, nothing masked",
          "[ch06][graded06a]") {
  // seq_len_k a multiple of Bc (64), not causal: the mask has nothing to hide. Query rows that fill
  // part of a block, one block and more than one; both types, both head dims.
  check_against_definition(1, 128, 64, false, ElementType::bf16, Look::O);
  check_against_definition(40, 64, 128, false, ElementType::fp16, Look::O);
  check_against_definition(130, 128, 64, false, ElementType::fp16, Look::O);
  check_against_definition(70, 192, 128, false, ElementType::bf16, Look::O);
}

TEST_CASE("the mask on fragments: O agrees with the definition, causal and with a last key tile cut short",
          "[ch06][graded06b]") {
  // Tails of the last key tile, both sides of the diagonal, rows that see no key (203 x 113, causal).
  const bool causal = GENERATE(false, true);
  check_against_definition(1, 257, 64, causal, ElementType::bf16, Look::O);
  check_against_definition(113, 203, 128, causal, ElementType::fp16, Look::O);
  check_against_definition(203, 113, 64, causal, ElementType::fp16, Look::O);
}

TEST_CASE("L agrees with the definition on every row, -inf on rows that see no key", "[ch06][graded06c]") {
  check_against_definition(130, 128, 64, false, ElementType::bf16, Look::L);
  check_against_definition(203, 113, 128, true, ElementType::fp16, Look::L);
}

#if !FA_TEST_ON_GPU
TEST_CASE("asking the tensor-core kernel for the GPU where there is none is a clear error", "[ch06]") {
  if (fa::gpu_available()) return;  // this machine has one: nothing to check here
  const auto in = fa_test::make_inputs(1, 1, 4, 4, 64, 0.1, fa_test::Scores::normal, 6500);
  CHECK_THROWS_AS(ch06::tensor_core_attention(in.Q, in.K, in.V, {}, fa::Device::gpu), std::runtime_error);
}
#endif
