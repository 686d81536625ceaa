// Chapter 10 tests: FlashAttention-3's forward design on Hopper's instructions agrees with chapter
// 06's mma.sync kernel, run on the same inputs rounded to the element type, within O's rounding
// (chapter 06's error budget, chapters/06_tensor_cores/lab/error_budget.h), and with chapter 05's
// float32 kernel within one budget, as chapter 06 itself must.
//
// On the CPU, common/simt carries out wgmma (with its matrix descriptors and the 128-byte swizzle),
// TMA through 3D tensor maps, the mbarriers' phases and transaction counts, lane by lane, under the
// schedule the environment picks (SIMT_SCHEDULE). Every run starts from outputs filled with NaN
// (hopper.cuh's run_typed), so an element the kernel forgets to write cannot pass.
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "attention_inputs.h"
#include "catch.h"
#include "chapters/05_flash_attention_2/flash_attention_2.h"
#include "chapters/06_tensor_cores/lab/error_budget.h"
#include "chapters/06_tensor_cores/tensor_cores.h"
#include "chapters/10_hopper/hopper.h"
#include "chapters/10_hopper/lab/tma_traffic.h"
#include "common/attention_shapes.h"
#include "common/compare.h"
#include "common/simt/runtime/schedule.h"
#include "common/simt/tools/profile.h"

namespace {

using ch10::ElementType;
using fa_test::kDevice;

struct Case {
  std::size_t seq_len_q, seq_len_k, head_dim;
  bool causal;
  double scale;
  ElementType element;
};

std::string describe(const Case& c, std::uint64_t seed) {
  return "seq_len_q " + std::to_string(c.seq_len_q) + ", seq_len_k " + std::to_string(c.seq_len_k) + ", head_dim " +
         std::to_string(c.head_dim) + (c.causal ? ", causal" : "") + ", scale " + std::to_string(c.scale) + ", " +
         std::string(ch06::to_string(c.element)) + ", seed " + std::to_string(seed);
}

// Runs chapters 10, 06 and 05 on the same rounded inputs, two heads (a wrong head offset in a
// tensor map shows), and checks:
//   O against chapter 06's O within 2 x chapter 06's budget: each kernel is within one budget of
//     chapter 05's float32 O, so the two are within two of each other (the triangle inequality);
//   O against chapter 05's O within one budget: the criterion chapter 06 meets (FlashAttention's rule);
//   L against chapter 06's L within 2 x L_bounds, for the same reason as O; and exactly -inf where
//     chapter 06's is (a row that sees no key).
void check_case(const Case& c) {
  const std::uint64_t seed = 10000 + 131 * c.seq_len_q + 17 * c.seq_len_k + c.head_dim + (c.causal ? 3 : 0) +
                             (c.element == ElementType::fp16 ? 11 : 0);
  const auto raw =
      fa_test::make_inputs(1, 2, c.seq_len_q, c.seq_len_k, c.head_dim, c.scale, fa_test::Scores::normal, seed);
  const auto Q = ch06::round_to(raw.Q, c.element, "Q");
  const auto K = ch06::round_to(raw.K, c.element, "K");
  const auto V = ch06::round_to(raw.V, c.element, "V");
  INFO(describe(c, seed));
  const auto h = ch10::hopper_attention(Q, K, V, {.scale = c.scale, .causal = c.causal, .element = c.element}, kDevice);
  const auto tc =
      ch06::tensor_core_attention(Q, K, V, {.scale = c.scale, .causal = c.causal, .element = c.element}, kDevice);
  const auto f32 =
      ch05::flash_attention_2(Q, K, V, {.scale = c.scale, .causal = c.causal, .tile = fa::Tile{64, 64}}, kDevice);
  const ch06::ErrorBudget budget = ch06::error_budget(Q, K, V, c.scale, c.causal, c.element);

  const auto err_06 = fa::compare(h.O.values, tc.O.values);
  const auto err_05 = fa::compare(h.O.values, f32.O.values);
  INFO("O against chapter 06: " << fa::describe(err_06) << "; against chapter 05: " << fa::describe(err_05)
                                << "; budget " << budget.bound << " (reference error " << budget.reference_rel_l2
                                << ")");
  CHECK(err_06.out_nan == 0);
  CHECK(err_06.rel_l2 <= 2 * budget.bound);
  CHECK(err_05.rel_l2 <= budget.bound);

  const std::vector<double> L_bound = ch06::L_bounds(Q, K, c.scale, tc.L);
  for (std::size_t r = 0; r < tc.L.size(); ++r) {
    INFO("L of row " << r << ": " << h.L[r] << ", chapter 06: " << tc.L[r] << ", bound 2 x " << L_bound[r]);
    if (std::isinf(tc.L[r])) {
      REQUIRE(h.L[r] == tc.L[r]);  // a row that sees no key: -inf in both
    } else {
      REQUIRE(std::fabs(h.L[r] - tc.L[r]) <= 2 * L_bound[r]);
    }
  }
}

// The element type alternates with the shape, the head dim and the causal setting (a Latin square,
// as in chapter 06's tests): every shape, head dim and causal setting meets both types, at half the
// CPU time. Only the wgmma and the packing of P differ between the types.
ElementType alternating(std::size_t shape_index, std::size_t head_dim, bool causal) {
  return (shape_index + (head_dim == 128 ? 1 : 0) + (causal ? 1 : 0)) % 2 == 0 ? ElementType::bf16 : ElementType::fp16;
}

}  // namespace

TEST_CASE("the Hopper kernel agrees with chapter 06 within O's rounding, every odd shape, head dim, causal",
          "[ch10][graded10a]") {
  if (const std::string why = fa_test::device_refusal(ch10::check_device); !why.empty()) FA_SKIP(why);
    // The decode shape (one query), a single key, a tile and a bit (65: the second key tile holds one
    // key, the second consumer warpgroup one query row; 129: the second block one row), seq_len_q != seq_len_k both
    // ways (causal: the first 90 rows of 203 x 113 see no key), and three key tiles (the ring wraps: stage 0 is
    // refilled).
#if FA_SANITIZER_BUILD
  // Under a sanitizer (10 to 50 times slower): the decode shape, a tail in both, and causal with
  // rows that see no key.
  const std::vector<std::pair<std::size_t, std::size_t>> shapes{{1, 257}, {65, 65}, {203, 113}};
#else
  const std::vector<std::pair<std::size_t, std::size_t>> shapes{{1, 1},     {1, 257},   {65, 65}, {129, 129},
                                                                {113, 203}, {203, 113}, {64, 192}};
#endif
  const std::size_t k = GENERATE_COPY(range(std::size_t{0}, shapes.size()));
  const std::size_t head_dim = GENERATE(64u, 128u);
  const bool causal = GENERATE(false, true);
  const auto [seq_len_q, seq_len_k] = shapes[k];
  check_case({seq_len_q, seq_len_k, head_dim, causal, fa::default_scale(head_dim), alternating(k, head_dim, causal)});
}

#if !FA_TEST_ON_GPU
TEST_CASE("the Hopper kernel agrees with chapter 06 under every schedule of simt's threads", "[ch10][graded10a]") {
  if (const std::string why = fa_test::device_refusal(ch10::check_device); !why.empty()) FA_SKIP(why);
  // The producer runs ahead of the consumer, or behind it, as the schedule has it (in order,
  // reversed, seeded random): the full and empty mbarriers alone must keep the ring right. 300 x
  // 700 causal is 11 key tiles for the last block, so each stage is refilled five times.
  const std::size_t head_dim = GENERATE(64u, 128u);
  const auto [schedule, seed] =
      GENERATE(std::pair{simt::Schedule::in_order, 0u}, std::pair{simt::Schedule::reverse, 0u},
               std::pair{simt::Schedule::random, 1u}, std::pair{simt::Schedule::random, 2u});
  INFO("schedule " << static_cast<int>(schedule) << ", seed " << seed);
  simt::set_schedule(schedule, seed);
  struct Reset {  // SIMT_SCHEDULE (or in order) again after this case, even when a REQUIRE fails
    ~Reset() { simt::reset_schedule(); }
  } reset;
#if FA_SANITIZER_BUILD
  const std::size_t seq_len_k = 200;  // 4 key tiles: each stage refilled once
#else
  const std::size_t seq_len_k = 700;
#endif
  check_case({300, seq_len_k, head_dim, true, fa::default_scale(head_dim),
              head_dim == 64 ? ElementType::bf16 : ElementType::fp16});
}
#endif

#if !FA_SANITIZER_BUILD
// Left out under the sanitizers, where it would take minutes.
TEST_CASE("the Hopper kernel agrees with chapter 06 at seq_len 1000", "[ch10]") {
  if (const std::string why = fa_test::device_refusal(ch10::check_device); !why.empty()) FA_SKIP(why);
  // 16 key tiles through the two-stage ring, 16 query blocks; one case per element type.
  const auto element = GENERATE(ElementType::bf16, ElementType::fp16);
  check_case({1000, 1000, 64, element == ElementType::fp16, fa::default_scale(64), element});
}
#endif

TEST_CASE("the Hopper kernel agrees with chapter 06 for a negative scale and for scale 0", "[ch10]") {
  if (const std::string why = fa_test::device_refusal(ch10::check_device); !why.empty()) FA_SKIP(why);
  // The scale is applied to S before the max (hopper.cuh, line 8): the max of the scaled scores is
  // their max whatever the scale's sign; scale 0 makes every weight 1 (O = the mean of V's rows).
  const double scale = GENERATE(-0.125, 0.0);
  const auto element = GENERATE(ElementType::bf16, ElementType::fp16);
  check_case({70, 90, 64, true, scale, element});
}

TEST_CASE("rows that see no key give zeros in O and -inf in L, never NaN", "[ch10]") {
  if (const std::string why = fa_test::device_refusal(ch10::check_device); !why.empty()) FA_SKIP(why);
  // Causal with seq_len_q = 300 > seq_len_k = 30: rows 0 .. 269 see no key (j <= i - 270). The
  // first two blocks (rows 0-127, 128-255) see none at all: they load no key tile, and their
  // consumers must still write their rows; in the third, the first consumer's rows (256-319) are
  // cut at seq_len_q and the ring serves both consumers.
  const auto element = GENERATE(ElementType::bf16, ElementType::fp16);
  const std::size_t head_dim = GENERATE(64u, 128u);
  const std::size_t n = 300, blind = 270;
  const auto in = fa_test::make_inputs(1, 2, n, 30, head_dim, 0.1, fa_test::Scores::normal, 10500);
  const auto out =
      ch10::hopper_attention(in.Q, in.K, in.V, {.scale = 0.1, .causal = true, .element = element}, kDevice);
  for (std::size_t head = 0; head < 2; ++head) {
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t row = head * n + i;
      INFO("head " << head << ", row " << i);
      if (i < blind) {
        CHECK(std::isinf(out.L[row]));
        CHECK(out.L[row] < 0);
        for (std::size_t c = 0; c < head_dim; ++c) REQUIRE(out.O.values[row * head_dim + c] == 0.0f);
      } else {
        CHECK(std::isfinite(out.L[row]));
        for (std::size_t c = 0; c < head_dim; ++c) REQUIRE(std::isfinite(out.O.values[row * head_dim + c]));
      }
    }
  }
}

TEST_CASE("the TMA copies and wgmma move exactly the bytes the kernel's walk counts", "[ch10]") {
  if (const std::string why = fa_test::device_refusal(ch10::check_device); !why.empty()) FA_SKIP(why);
#if !SIMT_PROFILED_KERNELS || FA_TEST_ON_GPU
  FA_SKIP("this build has no profiled copy of the kernel (a sanitizer preset, a compiler other than GCC, or the GPU)");
#else
  // seq_len_q < seq_len_k, with and without the mask (one block: Q_i's box holds 28 rows of zeros,
  // the last key tile 44 of 64 keys); self-attention, causal, at head dim 128 (two boxes a row; the
  // first blocks skip the tiles above the diagonal); seq_len_q > seq_len_k, causal (the first two
  // blocks load no key tile, and the third block's first consumer stores rows 256-299 of a box).
  struct Shape {
    std::size_t seq_len_q, seq_len_k, head_dim;
    bool causal;
  };
  const Shape s = GENERATE(Shape{100, 300, 64, true}, Shape{100, 300, 64, false}, Shape{300, 300, 128, true},
                           Shape{300, 30, 64, true});
  const std::size_t heads = 2;
  INFO("seq_len_q " << s.seq_len_q << ", seq_len_k " << s.seq_len_k << ", head_dim " << s.head_dim
                    << (s.causal ? ", causal" : "") << ", 2 heads");
  const auto in = fa_test::make_inputs(1, heads, s.seq_len_q, s.seq_len_k, s.head_dim, 0.1, fa_test::Scores::normal,
                                       10700 + s.seq_len_q + s.head_dim);
  const ch10::Options options{.scale = 0.1, .causal = s.causal};
  simt::profile::start();
  struct Stop {  // the profile ends with this case, even when the run throws
    ~Stop() { simt::profile::stop(); }
  } stop;
  (void)ch10::hopper_attention(in.Q, in.K, in.V, options, fa::Device::cpu);
  simt::profile::stop();
  const auto kernels = simt::profile::results();
  const simt::profile::KernelProfile* k = simt::profile::find_kernel(kernels, "hopper_kernel");
  REQUIRE(k != nullptr);
  const ch10::TmaTraffic model =
      ch10::tma_traffic(ch10::check_problem(fa::check_attention_shapes(in.Q.shape, in.K.shape, in.V.shape), options));
  // Loads: whole boxes, as the mbarriers count them; stores: O's bytes once (2 bytes an element).
  CHECK(k->tma_load.copies == model.load_copies);
  CHECK(k->tma_load.box_bytes == model.load_box_bytes);
  CHECK(k->tma_load.tensor_bytes == model.load_tensor_bytes);
  CHECK(k->tma_store.copies == model.store_copies);
  CHECK(k->tma_store.box_bytes == model.store_box_bytes);
  CHECK(k->tma_store.tensor_bytes == heads * s.seq_len_q * s.head_dim * 2);
  CHECK(k->wgmma_read.instructions == model.wgmma);
  CHECK(k->wgmma_read.bytes == model.wgmma_bytes);
  // Without the mask the walk is a closed form: Q once, and all of K and V per block of 128 rows.
  if (!s.causal) {
    const std::size_t blocks = (s.seq_len_q + 127) / 128;
    CHECK(k->tma_load.tensor_bytes == heads * s.head_dim * 2 * (s.seq_len_q + 2 * blocks * s.seq_len_k));
  }
  // The kernel's own loads and stores of global memory: L alone (4 bytes a row), no O.
  CHECK(k->global_load.bytes == 0);
  CHECK(k->global_store.bytes == heads * s.seq_len_q * 4);
  // The table has the rows, and the JSON the keys (docs/profiling.md).
  const std::string table = simt::profile::format_table(kernels);
  const std::string json = simt::profile::to_json(kernels);
  for (const char* row : {"  TMA load ", "  TMA store ", "  wgmma read "}) CHECK(table.find(row) != std::string::npos);
  for (const char* key : {"\"tma_load\"", "\"tma_store\"", "\"wgmma_read\"", "\"box_bytes\"", "\"tensor_bytes\""}) {
    CHECK(json.find(key) != std::string::npos);
  }
#endif
}

TEST_CASE("the Hopper kernel refuses a head_dim it was not compiled for, bad shapes, scales and inputs", "[ch10]") {
  if (const std::string why = fa_test::device_refusal(ch10::check_device); !why.empty()) FA_SKIP(why);
  const auto in32 = fa_test::make_inputs(1, 1, 8, 8, 32, 0.1, fa_test::Scores::normal, 10600);
  fa_test::check_refused([&] { (void)ch10::hopper_attention(in32.Q, in32.K, in32.V, {}, kDevice); }, {"32", "64, 128"});
  const auto in = fa_test::make_inputs(1, 2, 8, 8, 64, 0.1, fa_test::Scores::normal, 10601);
  const fa::Tensor4<float> other_heads(fa::Shape4{1, 3, 8, 64});
  CHECK_THROWS_AS(ch10::hopper_attention(in.Q, other_heads, other_heads, {}, kDevice), std::invalid_argument);
  CHECK_THROWS_AS(ch10::hopper_attention(in.Q, in.K, in.V, {.scale = INFINITY}, kDevice), std::invalid_argument);
  fa::Tensor4<float> huge = in.K;
  huge.values[5] = 1e6f;  // past fp16's 65504
  CHECK_THROWS_AS(ch10::hopper_attention(in.Q, huge, in.V, {.element = ElementType::fp16}, kDevice),
                  std::invalid_argument);
  // The GPU where there is none (or, in a GPU build, where it is not a Hopper): std::runtime_error.
  if (!fa::gpu_available()) {
    CHECK_THROWS_AS(ch10::hopper_attention(in.Q, in.K, in.V, {}, fa::Device::gpu), std::runtime_error);
  }
}
