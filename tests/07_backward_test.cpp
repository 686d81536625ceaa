// Chapter 07 tests: the backward kernels agree with a float64 gradient built on chapter 03, and that
// gradient agrees with central finite differences of chapter 03's forward pass.
//
// Compiled twice: 07_backward_test runs the kernels on the CPU through common/simt;
// 07_backward_gpu_test (FA_TEST_ON_GPU) runs them on a GPU, and is SKIPPED where there is none.
// Every run starts from gradients filled with NaN (backward.cuh, run_backward), so an element a
// kernel forgets to write cannot pass. The bounds are gradient_check.h's, the ones the demo uses.
// The test cases tagged [sanitizer] are a small complete subset for compute-sanitizer on a GPU.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "attention_inputs.h"
#include "catch.h"
#include "chapters/03_online_weighted_sum/attention.h"
#include "chapters/05_flash_attention_2/flash_attention_2.h"
#include "chapters/07_backward/backward.h"
#include "chapters/07_backward/lab/gradient_check.h"
#include "chapters/07_backward/lab/reference.h"
#include "common/attention_shapes.h"
#include "common/compare.h"
#include "common/random.h"
#include "definition.h"
#include "doc_table.h"
#if !FA_TEST_ON_GPU
#include "common/simt/runtime/schedule.h"
#endif

namespace {

using fa_test::kDevice;
using fa_test::Scores;

struct Case {
  std::size_t seq_len_q, seq_len_k, head_dim;
  bool causal;
  double scale;
  Scores scores;  // normal, or large ("peaked": a few keys take nearly all the weight)
};

std::string describe(const Case& c, std::uint64_t seed) {
  return "seq_len_q " + std::to_string(c.seq_len_q) + ", seq_len_k " + std::to_string(c.seq_len_k) + ", head_dim " +
         std::to_string(c.head_dim) + (c.causal ? ", causal" : "") + ", scale " + std::to_string(c.scale) +
         ", scores " + fa_test::to_string(c.scores) + ", seed " + std::to_string(seed);
}

// One problem: inputs, dO, chapter 05's forward on the device under test, and the two evaluations
// that set the bounds (the float64 reference and the plain float32 one). With Forward::definition,
// the forward's O and L come from the definition instead (tests/definition.h: its float32
// evaluation for the kernels, its float64 one for the reference): the course's grading tests run
// nothing of chapters 03 and 05 that a student writes.
struct Problem {
  fa_test::AttentionInputs in;
  fa::Tensor4<float> dO;
  ch05::Result forward;
  ch07::GradientsOf<double> reference;
  ch07::GradientsOf<float> float32;
  std::uint64_t seed = 0;
};

enum class Forward { chapter05, definition };

Problem make_problem(const Case& c, std::size_t batch = 2, std::size_t heads = 3,
                     Forward forward = Forward::chapter05) {
  Problem p;
  p.seed = 7000 + 131 * c.seq_len_q + 17 * c.seq_len_k + c.head_dim + static_cast<std::uint64_t>(c.scores) * 7 +
           (c.causal ? 3 : 0) + (c.scale == 0.3 ? 11 : 0);
  p.in = fa_test::make_inputs(batch, heads, c.seq_len_q, c.seq_len_k, c.head_dim, c.scale, c.scores, p.seed);
  p.dO = fa::Tensor4<float>(p.in.Q.shape, fa::normal<float>(p.in.Q.shape.size(), p.seed + 3));
  if (forward == Forward::definition) {
    const fa_test::Definition d = fa_test::definition(p.in.Q, p.in.K, p.in.V, {.scale = c.scale, .causal = c.causal});
    p.forward = {fa::Tensor4<float>(p.in.Q.shape, d.plain.O), d.plain.L};
    p.reference =
        ch07::backward_by_rows<double>(p.in.Q, p.in.K, p.in.V, p.dO, fa::Tensor4<double>(p.in.Q.shape, d.exact.O),
                                       std::span<const double>(d.exact.L), c.scale, c.causal, ch07::DFrom::jacobian);
  } else {
    p.forward = ch05::flash_attention_2(p.in.Q, p.in.K, p.in.V, {.scale = c.scale, .causal = c.causal}, kDevice);
    p.reference = ch07::attention_backward_reference(p.in.Q, p.in.K, p.in.V, p.dO, c.scale, c.causal);
  }
  p.float32 =
      ch07::attention_backward_float32(p.in.Q, p.in.K, p.in.V, p.dO, p.forward.O, p.forward.L, c.scale, c.causal);
  return p;
}

// The backward pass of the case, in `tile` (when not given: ch07::choose_tile's, which on a GPU is
// one that its shared memory per block holds).
ch07::Gradients run(const Problem& p, const Case& c, ch07::DqMethod dq, std::optional<fa::Tile> tile = std::nullopt) {
  return ch07::flash_attention_2_backward(p.in.Q, p.in.K, p.in.V, p.forward.O, p.forward.L, p.dO,
                                          {.scale = c.scale, .causal = c.causal, .dq = dq, .tile = tile}, kDevice);
}

// The kernel's dQ, dK, dV and D against the reference, each within gradient_check.h's bound.
void check_against_reference(const Problem& p, const ch07::Gradients& g) {
  const ch07::GradientChecks checks = ch07::check_gradients(g, p.reference, p.float32);
  INFO("dQ: " << ch07::describe(checks.dQ) << "; " << fa::describe(checks.dQ.error));
  INFO("dK: " << ch07::describe(checks.dK) << "; " << fa::describe(checks.dK.error));
  INFO("dV: " << ch07::describe(checks.dV) << "; " << fa::describe(checks.dV.error));
  CHECK(checks.dQ.pass());
  CHECK(checks.dK.pass());
  CHECK(checks.dV.pass());
  // D = rowsum(dO * O) (line 4) against the reference's sum over the Jacobian, rowsum(P * dP).
  const ch07::GradientCheck D = ch07::check_gradient(g.D, p.reference.D, p.float32.D);
  INFO("D: " << ch07::describe(D));
  CHECK(D.pass());
}

void check_case(const Case& c, ch07::DqMethod dq) {
  const Problem p = make_problem(c);
  INFO(describe(c, p.seed) << (dq == ch07::DqMethod::atomic ? ", atomic dQ" : ", deterministic dQ"));
  check_against_reference(p, run(p, c, dq));
}

}  // namespace

#if !FA_TEST_ON_GPU  // (the finite differences run on the CPU build only: they test the reference)
namespace {

// The loss whose gradient the reference computes: sum over every element of O * dO, O by chapter 03
// in double.
double loss(const fa::Tensor4<double>& Q, const fa::Tensor4<double>& K, const fa::Tensor4<double>& V,
            const fa::Tensor4<double>& dO, double scale, bool causal) {
  const auto O = ch03::attention(Q, K, V, {.scale = scale, .causal = causal}).O;
  double sum = 0.0;
  for (std::size_t n = 0; n < O.values.size(); ++n) sum += O.values[n] * dO.values[n];
  return sum;
}

fa::Tensor4<double> normal_tensor(fa::Shape4 shape, std::uint64_t seed) {
  return fa::Tensor4<double>(shape, fa::normal<double>(shape.size(), seed));
}

}  // namespace

// Central differences in double: (loss(x + h) - loss(x - h)) / 2h differs from the derivative by
// h^2 |loss'''| / 6 (~1e-11 for h = 1e-5 and inputs of order 1) plus the rounding of the two losses
// over 2h (~1e-16 / 1e-5 = 1e-11). 1e-8 absolute leaves a margin of 1000 and still fails at once for
// a wrong sign, a missing term or a wrong mask, whose errors are of order 0.01 to 1.
TEST_CASE("the float64 gradient equals central finite differences of chapter 03's forward pass", "[ch07]") {
  struct Small {
    std::size_t seq_len_q, seq_len_k;
    bool causal;
    double scale;
  };
  const Small s = GENERATE(Small{1, 1, false, 0.5}, Small{4, 6, false, 0.5}, Small{6, 4, true, 0.3},
                           Small{5, 5, true, 0.5}, Small{3, 7, true, 0.3});
  const fa::Shape4 q_shape{1, 2, s.seq_len_q, 4}, k_shape{1, 2, s.seq_len_k, 4};
  const std::uint64_t seed = 7100 + 10 * s.seq_len_q + s.seq_len_k;
  fa::Tensor4<double> Q = normal_tensor(q_shape, seed), K = normal_tensor(k_shape, seed + 1),
                      V = normal_tensor(k_shape, seed + 2), dO = normal_tensor(q_shape, seed + 3);
  INFO("seq_len_q " << s.seq_len_q << ", seq_len_k " << s.seq_len_k << (s.causal ? ", causal" : "") << ", scale "
                    << s.scale << ", seed " << seed);
  const auto g = ch07::attention_backward_reference(Q, K, V, dO, s.scale, s.causal);

  const double h = 1e-5;
  struct Input {
    const char* name;
    fa::Tensor4<double>* x;
    const fa::Tensor4<double>* grad;
  };
  for (const Input& input : {Input{"dQ", &Q, &g.dQ}, Input{"dK", &K, &g.dK}, Input{"dV", &V, &g.dV}}) {
    for (std::size_t n = 0; n < input.x->values.size(); ++n) {
      const double x = input.x->values[n];
      input.x->values[n] = x + h;
      const double up = loss(Q, K, V, dO, s.scale, s.causal);
      input.x->values[n] = x - h;
      const double down = loss(Q, K, V, dO, s.scale, s.causal);
      input.x->values[n] = x;
      const double numeric = (up - down) / (2 * h);
      INFO(input.name << "[" << n << "]: reference " << input.grad->values[n] << ", finite difference " << numeric);
      REQUIRE(std::fabs(input.grad->values[n] - numeric) <= 1e-8);
    }
  }
}

// The identity of docs/07-backward.md: rowsum(dO * O) = rowsum(P * dP), in double to 1e-12 relative
// (two sums of at most seq_len_k products of order 1, each rounded ~1e-16 relative).
TEST_CASE("D from the output, rowsum(dO * O), equals D from the Jacobian, rowsum(P * dP)", "[ch07]") {
  const auto in = fa_test::make_inputs(2, 3, 65, 97, 32, 0.3, Scores::normal, 7200);
  const fa::Tensor4<float> dO(in.Q.shape, fa::normal<float>(in.Q.shape.size(), 7201));
  const bool causal = GENERATE(false, true);
  const auto jacobian = ch07::attention_backward_reference(in.Q, in.K, in.V, dO, 0.3, causal, ch07::DFrom::jacobian);
  const auto output = ch07::attention_backward_reference(in.Q, in.K, in.V, dO, 0.3, causal, ch07::DFrom::output);
  const auto err = fa::compare(output.D, jacobian.D);
  INFO(fa::describe(err));
  CHECK(err.rel_l2 <= 1e-12);
  CHECK(fa::compare(output.dQ.values, jacobian.dQ.values).rel_l2 <= 1e-12);
}
#endif

TEST_CASE("the backward pass agrees with the float64 gradient for every shape of the list", "[ch07]") {
#if FA_SANITIZER_BUILD
  // Under the sanitizers (30-50x slower): a single query, a decoding query against a ragged key
  // tile, partial tiles of both kinds, and causal rows that see no key; the smallest and largest
  // head dim (each compiles its own kernels and tile).
  const auto [seq_len_q, seq_len_k] = GENERATE(table<std::size_t, std::size_t>({{1, 1}, {1, 257}, {33, 33}, {65, 40}}));
  const std::size_t head_dim = GENERATE(32u, 128u);
#else
  const auto [seq_len_q, seq_len_k] = GENERATE(from_range(fa_test::sequence_lengths()));
  const std::size_t head_dim = GENERATE(32u, 64u, 128u);
#endif
  const bool causal = GENERATE(false, true);
  check_case({seq_len_q, seq_len_k, head_dim, causal, fa::default_scale(head_dim), Scores::normal},
             ch07::DqMethod::atomic);
}

TEST_CASE("the backward pass agrees with the float64 gradient for scale 0.3 and peaked scores", "[ch07]") {
#if FA_SANITIZER_BUILD
  const auto [seq_len_q, seq_len_k] = GENERATE(table<std::size_t, std::size_t>({{40, 65}}));
  const std::size_t head_dim = 64;
#else
  const auto [seq_len_q, seq_len_k] = GENERATE(table<std::size_t, std::size_t>({{1, 257}, {113, 203}, {203, 113}}));
  const std::size_t head_dim = GENERATE(32u, 64u, 128u);
#endif
  const bool causal = GENERATE(false, true);
  const double scale = GENERATE(0.0, 0.3);  // 0.0 stands for 1/sqrt(head_dim)
  const Scores scores = GENERATE(Scores::normal, Scores::large);
  check_case({seq_len_q, seq_len_k, head_dim, causal, scale == 0.0 ? fa::default_scale(head_dim) : scale, scores},
             ch07::DqMethod::atomic);
}

TEST_CASE("the tiles of a GPU with 64 KiB per block agree with the float64 gradient on odd shapes",
          "[ch07][sanitizer]") {
  // kSmallGpuShapes (32x32 at head dim 64, 16x32 at 128): a single query against a ragged key tile,
  // partial tiles of both kinds, causal rows that see no key (65 x 40: rows 0 to 24), both dQ methods.
  const ch07::DqMethod dq = GENERATE(ch07::DqMethod::atomic, ch07::DqMethod::deterministic);
  for (const fa::KernelShape& k : ch07::kSmallGpuShapes) {
    const auto d = static_cast<std::size_t>(k.head_dim);
    const std::vector<fa::Tile> tiles =
        fa_test::tiles_that_fit({k.tile}, [&k](fa::Tile tile) { return ch07::shared_bytes(k.head_dim, tile); });
    for (const fa::Tile& tile : tiles) {
      for (const Case& c : {Case{1, 257, d, false, fa::default_scale(d), Scores::normal},
                            Case{33, 70, d, true, fa::default_scale(d), Scores::normal},
                            Case{65, 40, d, true, 0.125, Scores::normal}}) {
        const Problem p = make_problem(c);
        INFO(describe(c, p.seed) << ", tile " << fa::tile_name(tile)
                                 << (dq == ch07::DqMethod::atomic ? ", atomic dQ" : ", deterministic dQ"));
        check_against_reference(p, run(p, c, dq, tile));
      }
    }
  }
}

TEST_CASE("the deterministic dQ agrees with the float64 gradient and with the atomic dQ", "[ch07][sanitizer]") {
#if FA_SANITIZER_BUILD
  const auto [seq_len_q, seq_len_k] = GENERATE(table<std::size_t, std::size_t>({{1, 1}, {65, 40}}));
  const std::size_t head_dim = 32;
#else
  const auto [seq_len_q, seq_len_k] = GENERATE(table<std::size_t, std::size_t>({{1, 1}, {33, 33}, {203, 113}}));
  const std::size_t head_dim = GENERATE(32u, 128u);
#endif
  const bool causal = GENERATE(false, true);
  const Case c{seq_len_q, seq_len_k, head_dim, causal, fa::default_scale(head_dim), Scores::normal};
  const Problem p = make_problem(c);
  INFO(describe(c, p.seed));
  const ch07::Gradients deterministic = run(p, c, ch07::DqMethod::deterministic);
  check_against_reference(p, deterministic);
  const ch07::Gradients atomic = run(p, c, ch07::DqMethod::atomic);
  // The two dQ take the same products and sum them in another order: tile partial sums added by
  // atomics against one running sum per element. Both stay within float32 rounding of each other:
  // their distance is at most the sum of their distances from the reference, which gradient_bound
  // limits. dK and dV come from the same code in both runs: on the CPU (no fused multiply-add
  // contraction in this build) the same bits; nvcc compiles the two instances of the kernel on its
  // own, so on a GPU each is held to the reference instead.
  const auto dq = fa::compare(deterministic.dQ.values, atomic.dQ.values);
  INFO("deterministic against atomic dQ: " << fa::describe(dq));
  const double f32 = fa::compare(p.float32.dQ.values, p.reference.dQ.values).rel_l2;
  CHECK(dq.rel_l2 <= 2 * ch07::gradient_bound(f32));
  check_against_reference(p, atomic);
#if !FA_TEST_ON_GPU
  CHECK(deterministic.dK.values == atomic.dK.values);
  CHECK(deterministic.dV.values == atomic.dV.values);
#endif
}

#if !FA_TEST_ON_GPU
// The tile a GPU that gives a block `limit` bytes of shared memory runs at head_dim (what
// ch07::choose_tile gives on a GPU), computed here without one.
static fa::TileChoice gpu_choice(int head_dim, std::size_t limit) {
  return fa::fit_tile(
      "attention backward", ch07::tile_for_head_dim(head_dim), head_dim, ch07::kCompiled,
      [head_dim](fa::Tile tile) { return ch07::shared_bytes(head_dim, tile); }, limit);
}

TEST_CASE("on a GPU the backward pass runs the default tile where it fits, else the fitting tile with the most work",
          "[ch07]") {
  // A T4 (64 KiB per block): the default 32x64 fits at head dim 32 only (42240 bytes); at 64 the
  // default needs 66816 bytes and 32x32 runs; at 128 it needs 74752 and 16x32 runs.
  CHECK(gpu_choice(32, fa_test::kT4SharedBytes).tile == fa::Tile{32, 64});
  const fa::TileChoice d64 = gpu_choice(64, fa_test::kT4SharedBytes), d128 = gpu_choice(128, fa_test::kT4SharedBytes);
  CHECK(d64.tile == fa::Tile{32, 32});
  CHECK(d64.bytes == 41984);
  CHECK(d128.tile == fa::Tile{16, 32});
  CHECK(d128.bytes == 53888);
  INFO(d128.why);
  CHECK(d128.why.find("32x32 needs 74752 bytes") != std::string::npos);
  // An A100 and an H100 hold every default.
  for (std::size_t limit : {fa_test::kA100SharedBytes, fa_test::kH100SharedBytes}) {
    for (int head_dim : ch07::kHeadDims) {
      CHECK(gpu_choice(head_dim, limit).tile == ch07::tile_for_head_dim(head_dim));
      CHECK(gpu_choice(head_dim, limit).why.empty());
    }
  }
  // No tile of head dim 128 within 48 KiB: one line with the smallest tile's bytes and the limit.
  fa_test::check_refused([] { (void)gpu_choice(128, 49152); },
                         {"attention backward", "53888", "49152", "--device cpu"});
  // A tile that is not compiled for the head dim is refused, naming those that are.
  const auto in = fa_test::make_inputs(1, 1, 8, 8, 64, 0.1, Scores::normal, 7300);
  fa_test::check_refused(
      [&] {
        (void)ch07::flash_attention_2_backward(in.Q, in.K, in.V, in.Q, std::vector<float>(8), in.Q,
                                               {.tile = fa::Tile{16, 32}}, kDevice);
      },
      {"16x32", "32x64, 32x32"});
}

TEST_CASE("docs/workshop.md's T4 row of chapter 07 quotes the bytes the kernels ask for", "[ch07]") {
  // Every compiled tile: the defaults and the tiles of a T4.
  for (const fa::KernelShape& k : ch07::kCompiled) {
    fa_test::check_t4_row("07", {{k.tile, ch07::shared_bytes(k.head_dim, k.tile)}});
  }
}
#endif

TEST_CASE("rows that see no key give zero gradients, never NaN", "[ch07][sanitizer]") {
  // Causal with seq_len_q > seq_len_k: query i sees keys j <= i - 90, so rows 0..89 see none (L = -inf);
  // the query block of rows 64..95 holds rows of both kinds.
  const Case c{130, 40, 64, true, 0.125, Scores::normal};
  const Problem p = make_problem(c);
  const auto dq = GENERATE(ch07::DqMethod::atomic, ch07::DqMethod::deterministic);
  const ch07::Gradients g = run(p, c, dq);
  for (const float* values : {g.dQ.values.data(), g.dK.values.data(), g.dV.values.data()}) {
    const std::size_t n = values == g.dQ.values.data() ? g.dQ.values.size() : g.dK.values.size();
    REQUIRE(ch07::count_not_finite(std::span<const float>(values, n)) == 0);
  }
  const auto dQ = g.dQ.view();
  for (std::size_t b = 0; b < 2; ++b) {
    for (std::size_t h = 0; h < 3; ++h) {
      for (std::size_t i = 0; i < 90; ++i) {
        INFO("batch " << b << " head " << h << " row " << i);
        for (std::size_t d = 0; d < 64; ++d) REQUIRE(dQ(b, h, i, d) == 0.0f);
      }
    }
  }
  check_against_reference(p, g);
}

TEST_CASE("a single query and a single key give finite gradients, dQ = dK = 0", "[ch07][sanitizer]") {
  // With one key, P = 1 whatever the score: O = V, and the loss does not depend on Q or K.
  const Case c{1, 1, 32, GENERATE(false, true), 0.3, Scores::normal};
  const Problem p = make_problem(c);
  const auto dq = GENERATE(ch07::DqMethod::atomic, ch07::DqMethod::deterministic);
  const ch07::Gradients g = run(p, c, dq);
  for (float x : g.dQ.values) REQUIRE(x == 0.0f);
  for (float x : g.dK.values) REQUIRE(x == 0.0f);
  for (std::size_t n = 0; n < g.dV.values.size(); ++n) REQUIRE(g.dV.values[n] == p.dO.values[n]);  // P = 1
}

#if !FA_TEST_ON_GPU
TEST_CASE("the deterministic dQ is the same bits under every schedule and number of host threads", "[ch07]") {
#if FA_SANITIZER_BUILD
  const Case c{40, 70, 32, GENERATE(false, true), 0.125, Scores::normal};
#else
  const Case c{113, 203, 64, GENERATE(false, true), 0.125, Scores::normal};
#endif
  const Problem p = make_problem(c);
  INFO(describe(c, p.seed));
  simt::set_schedule(simt::Schedule::in_order);
  simt::set_host_threads(1);
  const std::vector<float> first = run(p, c, ch07::DqMethod::deterministic).dQ.values;
  struct Run {
    simt::Schedule schedule;
    std::uint64_t seed;
    unsigned threads;
  };
  for (const Run& r :
       {Run{simt::Schedule::reverse, 0, 2}, Run{simt::Schedule::random, 7, 3}, Run{simt::Schedule::in_order, 0, 4}}) {
    INFO("schedule " << simt::to_string(r.schedule) << ", " << r.threads << " host threads");
    simt::set_schedule(r.schedule, r.seed);
    simt::set_host_threads(r.threads);
    const std::vector<float> again = run(p, c, ch07::DqMethod::deterministic).dQ.values;
    CHECK(std::memcmp(again.data(), first.data(), first.size() * sizeof(float)) == 0);
  }
  simt::reset_schedule();
  simt::reset_host_threads();
}
#endif

// ---- The grading tests of the course's exercises 07a, 07b and 07c (docs/course.md): the forward
// from the definition (make_problem's Forward::definition), each test looking only at what its
// exercise makes, so that it fails for that exercise's lines only.

namespace {

// A single query, tails of both kinds, both sides of the causal diagonal, rows that see no key
// (70 x 40, causal: rows 0 to 29), and every head dim (each compiles its own kernels and tile).
const std::vector<Case> kGradedCases{{1, 257, 64, true, 0.125, Scores::normal},
                                     {33, 65, 32, false, fa::default_scale(32), Scores::normal},
                                     {70, 40, 64, true, 0.125, Scores::normal},
                                     {50, 50, 128, true, fa::default_scale(128), Scores::normal}};

// One gradient (or D) of the kernel against the reference, within gradient_check.h's bound.
void check_one(const char* name, std::span<const float> kernel, std::span<const double> reference,
               std::span<const float> float32) {
  const ch07::GradientCheck check = ch07::check_gradient(kernel, reference, float32);
  INFO(name << ": " << ch07::describe(check) << "; " << fa::describe(check.error));
  CHECK(check.pass());
}

}  // namespace

TEST_CASE("D = rowsum(dO * O) agrees with D from the Jacobian, the forward from the definition", "[ch07][graded07a]") {
  for (const Case& c : kGradedCases) {
    const Problem p = make_problem(c, 2, 3, Forward::definition);
    INFO(describe(c, p.seed));
    check_one("D", run(p, c, ch07::DqMethod::atomic).D, p.reference.D, p.float32.D);
  }
}

TEST_CASE("dK, dV and the deterministic dQ agree with the float64 gradient, the forward from the definition",
          "[ch07][graded07b]") {
  for (const Case& c : kGradedCases) {
    const Problem p = make_problem(c, 2, 3, Forward::definition);
    INFO(describe(c, p.seed));
    const ch07::Gradients atomic = run(p, c, ch07::DqMethod::atomic);
    check_one("dK", atomic.dK.values, p.reference.dK.values, p.float32.dK.values);
    check_one("dV", atomic.dV.values, p.reference.dV.values, p.float32.dV.values);
    const ch07::Gradients deterministic = run(p, c, ch07::DqMethod::deterministic);
    check_one("dQ (deterministic)", deterministic.dQ.values, p.reference.dQ.values, p.float32.dQ.values);
  }
}

TEST_CASE("the atomic dQ agrees with the float64 gradient, the forward from the definition", "[ch07][graded07c]") {
  for (const Case& c : kGradedCases) {
    const Problem p = make_problem(c, 2, 3, Forward::definition);
    INFO(describe(c, p.seed));
    check_one("dQ (atomic)", run(p, c, ch07::DqMethod::atomic).dQ.values, p.reference.dQ.values, p.float32.dQ.values);
  }
}

TEST_CASE("the backward pass refuses a head_dim it was not compiled for, naming the ones it was", "[ch07][sanitizer]") {
  const auto in = fa_test::make_inputs(1, 1, 8, 8, 48, 0.1, Scores::normal, 7300);
  const std::vector<float> L(8, 0.0f);
  fa_test::check_refused([&] { (void)ch07::flash_attention_2_backward(in.Q, in.K, in.V, in.Q, L, in.Q, {}, kDevice); },
                         {"48", "32, 64, 128"});
}

TEST_CASE("the backward pass refuses O, dO or L that do not fit Q, and a scale that is not finite",
          "[ch07][sanitizer]") {
  const auto in = fa_test::make_inputs(1, 2, 8, 8, 32, 0.1, Scores::normal, 7400);
  const std::vector<float> L(16, 0.0f), short_L(15, 0.0f);
  const fa::Tensor4<float> other(fa::Shape4{1, 2, 9, 32});
  using ch07::flash_attention_2_backward;
  CHECK_THROWS_AS(flash_attention_2_backward(in.Q, in.K, in.V, other, L, in.Q, {}, kDevice), std::invalid_argument);
  CHECK_THROWS_AS(flash_attention_2_backward(in.Q, in.K, in.V, in.Q, L, other, {}, kDevice), std::invalid_argument);
  CHECK_THROWS_AS(flash_attention_2_backward(in.Q, in.K, in.V, in.Q, short_L, in.Q, {}, kDevice),
                  std::invalid_argument);
  CHECK_THROWS_AS(flash_attention_2_backward(in.Q, in.K, in.V, in.Q, L, in.Q, {.scale = NAN}, kDevice),
                  std::invalid_argument);
}

#if !FA_TEST_ON_GPU
TEST_CASE("asking the backward pass for the GPU where there is none is a clear error", "[ch07]") {
  if (fa::gpu_available()) return;  // this machine has one: nothing to check here
  const auto in = fa_test::make_inputs(1, 1, 4, 4, 32, 0.1, Scores::normal, 7500);
  const std::vector<float> L(4, 0.0f);
  CHECK_THROWS_AS(ch07::flash_attention_2_backward(in.Q, in.K, in.V, in.Q, L, in.Q, {}, fa::Device::gpu),
                  std::runtime_error);
}
#endif
