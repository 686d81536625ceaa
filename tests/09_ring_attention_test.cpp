// Chapter 09 tests: the pieces of ring attention that need no MPI process launch. The shards of
// both layouts cover the sequence once, with chunks that differ by at most one row; the causal
// mask's rule per pair of chunks agrees with the mask row by row; the cost model's imbalance is
// what its formula says; the ring, run in one process with the shards passed by hand
// (ring_in_one_process, the same RankState::fold that every rank of the MPI program runs), equals
// chapter 05 on the whole problem for every P, layout, mask and length, and its result does not
// depend on P beyond float32 rounding. The backward ring (ring_backward_in_one_process, the same
// RankBackward::step and accumulate as every rank of the program) agrees with chapter 07 within
// chapter 07's bound for every P, layout, mask and length, is chapter 07 itself for one rank, gives
// the same bits on every run, and hands on exactly the bytes of its model. The runs across processes
// (mpirun, P = 1 to 4) are CTest's ch09_* tests (tests/CMakeLists.txt).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "attention_inputs.h"
#include "catch.h"
#include "chapters/04_naive_attention/lab/vs_chapter_03.h"
#include "chapters/05_flash_attention_2/flash_attention_2.h"
#include "chapters/05_flash_attention_2/lab/vs_chapter_04.h"
#include "chapters/06_tensor_cores/lab/error_budget.h"
#include "chapters/06_tensor_cores/tensor_cores.h"
#include "chapters/07_backward/backward.h"
#include "chapters/07_backward/lab/gradient_check.h"
#include "chapters/07_backward/lab/reference.h"
#include "chapters/08_decoding/lab/vs_dense.h"
#include "chapters/09_ring_attention/lab/cluster_model.h"
#include "chapters/09_ring_attention/lab/vs_chapter_07.h"
#include "chapters/09_ring_attention/ring.h"
#include "chapters/09_ring_attention/shards.h"
#include "common/compare.h"
#include "common/random.h"
#include "definition.h"

namespace {

using ch09::Chunk;
using ch09::Layout;

constexpr Layout kLayouts[] = {Layout::contiguous, Layout::zigzag};

// The lengths the ring runs against chapter 05, the ranks up to which P goes in the test of its
// independence of P, that test's length, and the ranks and layout of the bf16 ring. Under a sanitizer
// (FA_SANITIZER_BUILD) fewer, and the sweeps run a covering subset rather than every combination
// (kEveryCombination): there every kernel launch costs about 0.1 s under ThreadSanitizer on a
// loaded 2-core machine (0.7 s for chapter 06's), and a ring launches two per pair of chunks that
// see each other (the kernel, then the merge), up to 64 pairs for P = 4 in the zigzag layout. The
// subset still runs every P with every layout and mask against chapter 05, every length with every
// head dim, one row, a length that leaves ranks with nothing and chunks of different sizes, and
// chapter 06's kernel in a ring of two ranks with and without the mask. The backward ring against
// chapter 07 likewise: its lengths, the ranks up to which P goes on the shorter ones and on the
// longest, and the subset it runs under a sanitizer (one case in kBackwardSubset), where each pair of
// chunks launches chapter 07's three kernels (D, dK and dV, the deterministic dQ); there it still
// runs P = 1 to 4, both layouts and both masks (not every combination), one row and a length that
// leaves a rank with nothing.
#if FA_SANITIZER_BUILD
constexpr std::size_t kRingLengths[] = {1, 7, 33};
constexpr std::size_t kMaxRanks = 3;
constexpr std::size_t kIndependenceLength = 64;
constexpr std::size_t kBf16Ranks[] = {2};
constexpr Layout kBf16Layout = Layout::contiguous;
constexpr bool kEveryCombination = false;
constexpr std::size_t kBackwardLengths[] = {1, 7, 33};
constexpr std::size_t kBackwardShortRanks = 3, kBackwardMaxRanks = 4;
constexpr std::size_t kBackwardSubset = 3;
#else
constexpr std::size_t kRingLengths[] = {1, 7, 33, 100};
constexpr std::size_t kMaxRanks = 8;
constexpr std::size_t kIndependenceLength = 256;
constexpr std::size_t kBf16Ranks[] = {1, 2, 3};
constexpr Layout kBf16Layout = Layout::zigzag;
constexpr bool kEveryCombination = true;
constexpr std::size_t kBackwardLengths[] = {1, 7, 33, 100};
constexpr std::size_t kBackwardShortRanks = 4, kBackwardMaxRanks = 8;
constexpr std::size_t kBackwardSubset = 2;
#endif

// Whether a sweep runs the case numbered `parts` (each part a small index: of a head dim, a mask, a
// layout, a P, a length) when it runs only a covering subset: the cases whose parts add up to a
// multiple of `of`. Holding all parts but one fixed, exactly one in every `of` consecutive values of
// the last one is run, so every value of every part is run with every value of each other part but
// that one.
bool runs(std::initializer_list<std::size_t> parts, std::size_t of) {
  if (kEveryCombination) return true;
  std::size_t sum = 0;
  for (const std::size_t part : parts) sum += part;
  return sum % of == 0;
}

fa_test::AttentionInputs inputs(std::size_t seq_len, std::size_t head_dim, std::uint64_t seed) {
  return fa_test::make_inputs(1, 2, seq_len, seq_len, head_dim, 1.0 / std::sqrt(static_cast<double>(head_dim)),
                              fa_test::Scores::normal, seed);
}

// The partials a row's result merges: one per key chunk of the layout.
int partials_of(Layout layout, std::size_t P) { return static_cast<int>(layout == Layout::zigzag ? 2 * P : P); }

// A ring's O and L against a reference on the same inputs (seq rows a head): O within O_bound in
// relative L2; every row of L within chapter 08's bound for a merge of `partials` partials of the
// same kernel (ch08::L_bound; no score term: chapter 05's scores do not depend on the tile a key
// falls in; |L| bounded from the inputs: ch05::L_magnitudes of Q and K at the default scale), plus
// that bound for the reference's own `reference_partials` when it is a merge too (0: chapter 05
// itself).
void check_against(const ch09::RingRun& ring, const fa_test::AttentionInputs& in, const fa::Tensor4<float>& O_ref,
                   const std::vector<float>& L_ref, double O_bound, std::size_t seq, bool causal, int partials,
                   int reference_partials = 0) {
  const std::vector<double> magnitudes = ch05::L_magnitudes(in.Q, in.K, fa::default_scale(in.Q.shape.head_dim));
  const fa::ErrorStats err = fa::compare(ring.O.values, O_ref.values);
  INFO(fa::describe(err) << ", bound " << O_bound);
  CHECK(fa::agrees(err, O_bound));
  for (std::size_t row = 0; row < ring.L.size(); ++row) {
    const std::size_t keys = causal ? row % seq + 1 : seq;
    const double bound =
        ch08::L_bound(L_ref[row], magnitudes[row], keys, partials, 0.0) +
        (reference_partials > 0 ? ch08::L_bound(L_ref[row], magnitudes[row], keys, reference_partials, 0.0) : 0.0);
    INFO("row " << row << ": L " << ring.L[row] << " against " << L_ref[row] << ", bound " << bound);
    REQUIRE(std::fabs(static_cast<double>(ring.L[row]) - L_ref[row]) <= bound);
  }
}

}  // namespace

TEST_CASE("every row belongs to one rank, in chunks that differ by at most one row", "[ch09]") {
  for (const Layout layout : kLayouts) {
    for (std::size_t P = 1; P <= 5; ++P) {
      for (const std::size_t seq : {1u, 2u, 7u, 8u, 100u, 257u}) {
        INFO(ch09::to_string(layout) << ", P = " << P << ", seq " << seq);
        std::vector<int> owners(seq, 0);
        std::size_t smallest = seq, largest = 0;
        for (std::size_t r = 0; r < P; ++r) {
          const std::vector<Chunk> chunks = ch09::chunks_of_rank(seq, P, r, layout);
          REQUIRE(chunks.size() == (layout == Layout::zigzag ? 2u : 1u));
          for (const Chunk& c : chunks) {
            smallest = std::min(smallest, c.size());
            largest = std::max(largest, c.size());
            for (std::size_t i = c.begin; i < c.end; ++i) ++owners[i];
          }
        }
        CHECK(std::ranges::all_of(owners, [](int n) { return n == 1; }));
        CHECK(largest - smallest <= 1);
        if (layout == Layout::zigzag) {  // rank 0 holds the first and the last chunk
          CHECK(ch09::chunks_of_rank(seq, P, 0, layout).back().end == seq);
        }
      }
    }
  }
  CHECK(ch09::chunks_of_rank(7, 4, 3, Layout::contiguous) == std::vector<Chunk>{{6, 7}});
  CHECK(ch09::chunks_of_rank(7, 4, 3, Layout::zigzag) == std::vector<Chunk>{{3, 4}, {4, 5}});
  CHECK(ch09::shard_rows(ch09::chunks_of_rank(1, 4, 2, Layout::contiguous)) == 0);  // a rank with nothing
}

TEST_CASE("every K/V shard visits every rank once, moving one rank on at each step", "[ch09]") {
  for (std::size_t P = 1; P <= 6; ++P) {
    for (std::size_t r = 0; r < P; ++r) {
      INFO("P = " << P << ", rank " << r);
      std::vector<int> held(P, 0);
      for (std::size_t s = 0; s < P; ++s) {
        const std::size_t owner = ch09::owner_at_step(r, s, P);
        REQUIRE(owner < P);
        ++held[owner];
        // Line 4 of ring.h: what rank r holds at step s, rank r - 1 held at step s - 1 (rank P - 1
        // before rank 0: the ring closes).
        if (s > 0) CHECK(owner == ch09::owner_at_step((r + P - 1) % P, s - 1, P));
        CHECK(ch09::owner_at_step(r, s + P, P) == owner);
      }
      CHECK(ch09::owner_at_step(r, 0, P) == r);
      CHECK(std::ranges::all_of(held, [](int n) { return n == 1; }));
    }
  }
  fa_test::check_refused([] { (void)ch09::owner_at_step(3, 0, 3); }, {"rank 3 of 3"});
}

TEST_CASE("take_rows and put_rows move a shard's rows out and back", "[ch09]") {
  const fa_test::AttentionInputs in = inputs(11, 64, 5);
  fa::Tensor4<float> back(in.Q.shape, -1.0f);
  std::vector<float> L(2 * 11, -1.0f), L_want(2 * 11);
  for (std::size_t n = 0; n < L_want.size(); ++n) L_want[n] = static_cast<float>(n);
  for (std::size_t r = 0; r < 3; ++r) {
    const std::vector<Chunk> chunks = ch09::chunks_of_rank(11, 3, r, Layout::zigzag);
    const fa::Tensor4<float> shard = ch09::take_rows(in.Q, chunks);
    CHECK(shard.shape.seq_len == ch09::shard_rows(chunks));
    ch09::put_rows(back, shard, chunks);
    std::vector<float> L_shard;
    for (std::size_t h = 0; h < 2; ++h) {
      for (const Chunk& c : chunks) {
        for (std::size_t i = c.begin; i < c.end; ++i) L_shard.push_back(L_want[h * 11 + i]);
      }
    }
    ch09::put_rows(L, 11, L_shard, chunks);
  }
  CHECK(back.values == in.Q.values);
  CHECK(L == L_want);
  CHECK_THROWS_AS(ch09::take_rows(in.Q, {{5, 12}}), std::invalid_argument);
}

TEST_CASE("the causal rule per pair of chunks agrees with the mask row by row", "[ch09]") {
  for (const Layout layout : kLayouts) {
    for (std::size_t P = 1; P <= 4; ++P) {
      for (const std::size_t seq : {1u, 7u, 16u, 23u}) {
        std::vector<Chunk> all;
        for (std::size_t r = 0; r < P; ++r) {
          for (const Chunk& c : ch09::chunks_of_rank(seq, P, r, layout)) all.push_back(c);
        }
        for (const Chunk& q : all) {
          for (const Chunk& k : all) {
            INFO(ch09::to_string(layout) << ", P = " << P << ", seq " << seq << ", queries " << q.begin << ".." << q.end
                                         << ", keys " << k.begin << ".." << k.end);
            std::size_t seen = 0;
            for (std::size_t i = q.begin; i < q.end; ++i) {
              for (std::size_t j = k.begin; j < k.end; ++j) seen += j <= i ? 1 : 0;
            }
            const ch09::Visible v = ch09::visible(q, k, true);
            if (seen == 0) {
              CHECK(v == ch09::Visible::none);
            } else if (seen == q.size() * k.size()) {
              CHECK(v == (q == k ? ch09::Visible::diagonal : ch09::Visible::all));  // (a chunk of one row)
            } else {
              CHECK(v == ch09::Visible::diagonal);  // the mask's own rule on the chunk: chapter 05's causal
              CHECK(q == k);
            }
            CHECK(ch09::visible(q, k, false) == (q.size() * k.size() == 0 ? ch09::Visible::none : ch09::Visible::all));
          }
        }
      }
    }
  }
}

TEST_CASE("the zigzag layout balances the causal work; the contiguous one gives the last rank 2 - 1/P of the mean",
          "[ch09]") {
  // The pair counts are integers, exact in double; the ratios agree to a few units in the last place.
  const auto near = [](double a, double b) { return std::fabs(a - b) <= 1e-12 * std::fabs(b); };
  for (std::size_t P = 1; P <= 8; ++P) {
    const std::size_t n = 12;  // rows per chunk of the contiguous layout, so the sequence is n P rows
    const std::size_t seq = n * P;
    INFO("P = " << P);
    // Rank r's queries nr .. n(r + 1) - 1 see i + 1 keys each: n^2 r + n(n + 1)/2, largest for r = P - 1;
    // the mean is seq (seq + 1) / (2P).
    const double last = static_cast<double>(n * n * (P - 1) + n * (n + 1) / 2);
    const double mean = static_cast<double>(seq * (seq + 1)) / (2.0 * static_cast<double>(P));
    CHECK(near(ch09::imbalance(ch09::pairs_per_rank(seq, P, Layout::contiguous, true)), last / mean));
    // Zigzag, seq a multiple of 2P (chunks of m = n / 2 rows): m^2 (2P - 1) + m (m + 1) on every rank.
    CHECK(near(ch09::imbalance(ch09::pairs_per_rank(seq, P, Layout::zigzag, true)), 1.0));
    CHECK(near(ch09::imbalance(ch09::pairs_per_rank(seq, P, Layout::contiguous, false)), 1.0));
  }
}

TEST_CASE("the cluster model's shortest hiding length is where a step's compute equals its transfer", "[ch09]") {
  for (const bool backward : {false, true}) {  // the forward's step, and the backward's
    for (const ch09::Link& link : {ch09::kNvlink, ch09::kAcrossNodes}) {
      for (const bool causal : {false, true}) {
        const double n = backward ? ch09::shortest_backward_hiding_rows(2, 400e12, causal, link)
                                  : ch09::shortest_hiding_rows(2, 400e12, causal, link);
        const auto step = [&](double rows) {
          return backward ? ch09::backward_step_model(rows, 32, 128, 2, 400e12, causal, link)
                          : ch09::step_model(rows, 32, 128, 2, 400e12, causal, link);
        };
        INFO((backward ? "backward, " : "") << link.name << (causal ? ", causal" : "") << ": n = " << n);
        const ch09::StepModel at = step(n), shorter = step(n / 2);
        CHECK(std::fabs(at.compute_s - at.transfer_s) <= 1e-12 * at.transfer_s);  // (double rounding only)
        CHECK(shorter.compute_s < shorter.transfer_s);
        // The backward: 6/5 of the forward's length, twice the compute against three times the bytes
        // (bf16 K, V and float32 dK, dV against bf16 K, V).
        if (backward) CHECK(std::fabs(n - 1.2 * ch09::shortest_hiding_rows(2, 400e12, causal, link)) <= 1e-12 * n);
      }
    }
  }
  // 8 H200 on NVLink at 400 TFLOP/s: 2 x 400e12 / (2 x 450e9) = 889 rows per GPU without the mask.
  CHECK(std::ceil(ch09::shortest_hiding_rows(2, 400e12, false, ch09::kNvlink)) == 889);
  // The backward, as docs/09-ring-attention.md quotes it (and the demo's --cluster prints it):
  // 6 x 400e12 / (5 x 450e9) = 1066.7 rows per GPU on NVLink, 9,600 across nodes; twice that causal.
  CHECK(std::ceil(ch09::shortest_backward_hiding_rows(2, 400e12, false, ch09::kNvlink)) == 1067);
  CHECK(std::ceil(ch09::shortest_backward_hiding_rows(2, 400e12, true, ch09::kNvlink)) == 2134);
  CHECK(std::ceil(ch09::shortest_backward_hiding_rows(2, 400e12, false, ch09::kAcrossNodes)) == 9600);
  CHECK(std::ceil(ch09::shortest_backward_hiding_rows(2, 400e12, true, ch09::kAcrossNodes)) == 19200);
}

TEST_CASE("ring attention in one process equals chapter 05 for every P, layout, mask and length", "[ch09]") {
  const std::size_t head_dim = GENERATE(64u, 128u);
  for (const bool causal : {false, true}) {
    for (std::size_t length = 0; length < std::size(kRingLengths); ++length) {
      const std::size_t seq = kRingLengths[length];
      const fa_test::AttentionInputs in = inputs(seq, head_dim, 11 + seq);
      const ch05::Result reference = ch05::flash_attention_2(in.Q, in.K, in.V, {.causal = causal}, fa_test::kDevice);
      // O: chapter 05's own bound against chapter 04 (both float32 evaluations, each within about
      // that of the exact result; chapters/04_naive_attention/lab/vs_chapter_03.h).
      const double O_bound = ch04::agreement_bound(in.Q, in.K, in.V, {.causal = causal}).bound;
      for (const Layout layout : kLayouts) {
        for (std::size_t P = 1; P <= 4; ++P) {
          // (Under a sanitizer, one length of the three for each head dim, mask, layout and P.)
          if (!runs({head_dim / 64, causal, static_cast<std::size_t>(layout), P, length}, 3)) continue;
          INFO("head_dim " << head_dim << (causal ? ", causal" : "") << ", seq " << seq << ", "
                           << ch09::to_string(layout) << ", P = " << P);
          const ch09::RingRun ring =
              ch09::ring_in_one_process(in.Q, in.K, in.V, P, layout, {.causal = causal}, fa_test::kDevice);
          check_against(ring, in, reference.O, reference.L, O_bound, seq, causal, partials_of(layout, P));
        }
      }
    }
  }
}

TEST_CASE("one rank is chapter 05 itself: the merge of one partial changes nothing", "[ch09]") {
  const fa_test::AttentionInputs in = inputs(50, 64, 3);
  const ch05::Result reference = ch05::flash_attention_2(in.Q, in.K, in.V, {.causal = true}, fa_test::kDevice);
  const ch09::RingRun ring =
      ch09::ring_in_one_process(in.Q, in.K, in.V, 1, Layout::contiguous, {.causal = true}, fa_test::kDevice);
  // The merge of a single partial: m = L_0, l = exp(0) = 1, acc = O_0, so O = O_0 and L = L_0 + log(1),
  // exactly.
  CHECK(ring.O.values == reference.O.values);
  CHECK(ring.L == reference.L);
}

// How far apart two rings with different P are: each is float32 arithmetic over the same scores,
// summed in another order (the keys cut into other chunks) and merged from another number of
// partials. Measured over the cases below (seq 256, P = 2 to 8 against P = 1, both layouts, with and
// without the mask): O rel L2 up to 4.2e-7 (about 7 u, u = 2^-24 = 6e-8; the most without the mask
// and with the most partials) and |L_P - L_1| up to 9.5e-7 (two units in the last place of L = 6).
// The test holds O to chapter 05's own bound against chapter 04, the bound for any two float32
// evaluations of this attention (ch04::agreement_bound, 1.0e-6 here), and L to the sum of the two
// rings' chapter 08 bounds; a ring that lost or doubled one key's weight moves O by about 1/256 in
// its rows and fails both.
TEST_CASE("the ring's result does not depend on P beyond float32 rounding", "[ch09]") {
  const std::size_t seq = kIndependenceLength;
  const fa_test::AttentionInputs in = inputs(seq, 64, 17);
  for (const bool causal : {false, true}) {
    const double O_bound = ch04::agreement_bound(in.Q, in.K, in.V, {.causal = causal}).bound;
    const ch09::RingRun one =
        ch09::ring_in_one_process(in.Q, in.K, in.V, 1, Layout::contiguous, {.causal = causal}, fa_test::kDevice);
    for (const Layout layout : kLayouts) {
      for (std::size_t P = 2; P <= kMaxRanks; ++P) {
        if (!runs({causal, static_cast<std::size_t>(layout), P}, 2)) continue;  // (a sanitizer: one layout per P)
        INFO((causal ? "causal, " : "") << ch09::to_string(layout) << ", P = " << P);
        const ch09::RingRun ring =
            ch09::ring_in_one_process(in.Q, in.K, in.V, P, layout, {.causal = causal}, fa_test::kDevice);
        check_against(ring, in, one.O, one.L, O_bound, seq, causal, partials_of(layout, P), 1);
      }
    }
  }
}

TEST_CASE("a bf16 ring agrees with chapter 05 within chapter 06's error budget", "[ch09]") {
  if (fa_test::kDevice == fa::Device::gpu && ch06::reference_device(fa_test::kDevice) != fa::Device::gpu) {
    FA_SKIP("chapter 06's kernel, which a bf16 ring runs, cannot run on this GPU or build (ch06::check_device)");
  }
  const fa_test::AttentionInputs raw = inputs(45, 64, 29);
  const fa::Tensor4<float> Q = ch06::round_to(raw.Q, ch06::ElementType::bf16, "Q");
  const fa::Tensor4<float> K = ch06::round_to(raw.K, ch06::ElementType::bf16, "K");
  const fa::Tensor4<float> V = ch06::round_to(raw.V, ch06::ElementType::bf16, "V");
  const double scale = 1.0 / 8.0;
  for (const bool causal : {false, true}) {
    const ch05::Result reference = ch05::flash_attention_2(Q, K, V, {.causal = causal}, fa_test::kDevice);
    // Chapter 06's budget: twice the error of an evaluation that rounds P and O to bf16 (its
    // reason in chapters/06_tensor_cores/lab/error_budget.h); each partial here is chapter 06's O.
    const double bound = ch06::error_budget(Q, K, V, scale, causal, ch06::ElementType::bf16).bound;
    for (const std::size_t P : kBf16Ranks) {
      INFO((causal ? "causal, " : "") << "P = " << P);
      const ch09::RingRun ring = ch09::ring_in_one_process(
          raw.Q, raw.K, raw.V, P, kBf16Layout, {.causal = causal, .element = ch08::CacheType::bf16}, fa_test::kDevice);
      const fa::ErrorStats err = fa::compare(ring.O.values, reference.O.values);
      INFO(fa::describe(err) << ", bound " << bound);
      CHECK(fa::agrees(err, bound));
    }
  }
}

TEST_CASE("ring attention refuses what it cannot run, saying what it accepts", "[ch09]") {
  fa_test::check_refused([] { ch09::check_problem({1, 2, 10, 12, 64}, 2, {}); }, {"self-attention", "--seq-q"});
  fa_test::check_refused([] { ch09::check_problem({1, 2, 10, 10, 32}, 2, {}); }, {"head_dim 32", "64 or 128"});
  fa_test::check_refused([] { ch09::check_problem({1, 2, 10, 10, 64}, 0, {}); }, {"at least one rank"});
  fa_test::check_refused([] { (void)ch09::chunks_of_rank(10, 2, 2, Layout::zigzag); }, {"rank 2 of 2"});
  fa_test::check_refused([] { (void)ch09::parse_layout("diagonal"); }, {"diagonal", "contiguous or zigzag"});
  const fa_test::AttentionInputs in = inputs(10, 64, 1);
  ch09::RankState state(in.Q, ch09::chunks_of_rank(10, 1, 0, Layout::contiguous), {}, fa::Device::cpu);
  ch09::KVShard wrong = ch09::kv_shard(in.K, in.V, 2, 0, Layout::contiguous);
  wrong.chunks = ch09::chunks_of_rank(10, 1, 0, Layout::contiguous);  // 10 rows named, 5 held
  fa_test::check_refused([&] { (void)state.fold(wrong); }, {"do not fit"});
}

// ---- The backward ----

namespace {

// dO for the backward tests: normal(0, 1), as chapter 07's demo draws it, from its own seed.
fa::Tensor4<float> draw_dO(const fa::Shape4& shape, std::uint64_t seed) {
  return fa::Tensor4<float>(shape, fa::normal<float>(shape.size(), seed));
}

// The ring's gradients against chapter 07 on the whole problem, each within chapter 07's bound on
// these inputs (chapters/09_ring_attention/lab/vs_chapter_07.h: twice a plain float32 evaluation's
// relative L2 error against the float64 gradient, plus u; about 1e-6 here). The ring sums the same
// terms as chapter 07 cut into pairs of chunks, so the two differ by float32 rounding; a lost pair,
// a dK that did not come home or a part added to another shard's dK is 1e-2 to 1 away.
void check_backward(const ch09::RingBackwardRun& ring, const ch09::Chapter07Gradients& chapter_07) {
  const ch09::BackwardAgreement a = ch09::agreement(ring.dQ, ring.dK, ring.dV, chapter_07);
  INFO("dQ " << fa::describe(a.dQ.error) << ", bound " << a.dQ.bound);
  INFO("dK " << fa::describe(a.dK.error) << ", bound " << a.dK.bound);
  INFO("dV " << fa::describe(a.dV.error) << ", bound " << a.dV.bound);
  CHECK(a.dQ.pass());
  CHECK(a.dK.pass());
  CHECK(a.dV.pass());
}

}  // namespace

TEST_CASE("the backward ring agrees with chapter 07 for every P, layout, mask and length", "[ch09]") {
  const std::size_t head_dim = GENERATE(64u, 128u);
  for (const bool causal : {false, true}) {
    for (std::size_t length = 0; length < std::size(kBackwardLengths); ++length) {
      const std::size_t seq = kBackwardLengths[length];
      // head_dim 128 on the two shortest lengths only: the sweep over P is the same there.
      if (head_dim == 128 && length > 1) continue;
      const fa_test::AttentionInputs in = inputs(seq, head_dim, 41 + seq);
      const fa::Tensor4<float> dO = draw_dO(in.Q.shape, 43 + seq);
      const ch05::Result forward = ch05::flash_attention_2(in.Q, in.K, in.V, {.causal = causal}, fa_test::kDevice);
      const ch09::Chapter07Gradients chapter_07 =
          ch09::chapter_07_backward(in.Q, in.K, in.V, forward.O, forward.L, dO, {.causal = causal}, fa_test::kDevice);
      // P up to 8 on the longest length (100 rows: 3, 6, 7 and 8 ranks, and 16 zigzag chunks, do not
      // divide it), up to 4 on the others (7 rows: an empty chunk on 4 ranks; 1 row: three ranks
      // with nothing, whose dQ is empty and whose parts of every dK, dV are zeros).
      const std::size_t max_ranks = length + 1 == std::size(kBackwardLengths) ? kBackwardMaxRanks : kBackwardShortRanks;
      for (const Layout layout : kLayouts) {
        for (std::size_t P = 1; P <= max_ranks; ++P) {
          if (!runs({causal, static_cast<std::size_t>(layout), P, length}, kBackwardSubset)) continue;  // (a sanitizer)
          INFO("head_dim " << head_dim << (causal ? ", causal" : "") << ", seq " << seq << ", "
                           << ch09::to_string(layout) << ", P = " << P);
          const ch09::RingBackwardRun ring = ch09::ring_backward_in_one_process(
              in.Q, in.K, in.V, forward.O, forward.L, dO, P, layout, {.causal = causal}, fa_test::kDevice);
          check_backward(ring, chapter_07);
        }
      }
    }
  }
}

TEST_CASE("under the mask, a rank whose queries see none of a shard's keys adds nothing to its dK, dV", "[ch09]") {
  // Contiguous, causal, 4 ranks of 10 rows: rank 0's queries see only its own keys, so rank 0's
  // dK, dV come home holding rank 0's part alone, and the last rank's shard's dK, dV hold its own
  // queries' only: a part added in the wrong place shows in either.
  const fa_test::AttentionInputs in = inputs(40, 64, 47);
  const fa::Tensor4<float> dO = draw_dO(in.Q.shape, 48);
  const ch05::Result forward = ch05::flash_attention_2(in.Q, in.K, in.V, {.causal = true}, fa_test::kDevice);
  const ch09::RingBackwardRun ring = ch09::ring_backward_in_one_process(
      in.Q, in.K, in.V, forward.O, forward.L, dO, 4, Layout::contiguous, {.causal = true}, fa_test::kDevice);
  check_backward(
      ring, ch09::chapter_07_backward(in.Q, in.K, in.V, forward.O, forward.L, dO, {.causal = true}, fa_test::kDevice));
  // The last shard's keys (30..39) are seen by the queries 30..39 alone: chapter 07 on that block,
  // with the whole rows' O and L, gives its dK, dV, and the ring's must be those bits (one part,
  // added to zeros: x + 0 = x exactly).
  const std::vector<Chunk> last = {{30, 40}};
  const ch07::Gradients alone = ch07::flash_attention_2_backward(
      ch09::take_rows(in.Q, last), ch09::take_rows(in.K, last), ch09::take_rows(in.V, last),
      ch09::take_rows(forward.O, last),
      ch09::take_rows(fa::Tensor4<float>(fa::Shape4{1, 2, 40, 1}, forward.L), last).values, ch09::take_rows(dO, last),
      {.causal = true, .dq = ch07::DqMethod::deterministic}, fa_test::kDevice);
  CHECK(ch09::take_rows(ring.dK, last).values == alone.dK.values);
  CHECK(ch09::take_rows(ring.dV, last).values == alone.dV.values);
}

TEST_CASE("one rank's backward ring is chapter 07 itself, bit for bit", "[ch09]") {
  const fa_test::AttentionInputs in = inputs(50, 64, 53);
  const fa::Tensor4<float> dO = draw_dO(in.Q.shape, 54);
  const ch05::Result forward = ch05::flash_attention_2(in.Q, in.K, in.V, {.causal = true}, fa_test::kDevice);
  const ch07::Gradients chapter_07 =
      ch07::flash_attention_2_backward(in.Q, in.K, in.V, forward.O, forward.L, dO,
                                       {.causal = true, .dq = ch07::DqMethod::deterministic}, fa_test::kDevice);
  const ch09::RingBackwardRun ring = ch09::ring_backward_in_one_process(
      in.Q, in.K, in.V, forward.O, forward.L, dO, 1, Layout::contiguous, {.causal = true}, fa_test::kDevice);
  // One pair of chunks, the whole problem: chapter 07's one call, each gradient added to zeros.
  CHECK(ring.dQ.values == chapter_07.dQ.values);
  CHECK(ring.dK.values == chapter_07.dK.values);
  CHECK(ring.dV.values == chapter_07.dV.values);
}

TEST_CASE("the backward ring gives the same bits on every run at a given P", "[ch09]") {
  const fa_test::AttentionInputs in = inputs(33, 64, 59);
  const fa::Tensor4<float> dO = draw_dO(in.Q.shape, 60);
  const ch05::Result forward = ch05::flash_attention_2(in.Q, in.K, in.V, {.causal = true}, fa_test::kDevice);
  const auto run = [&] {
    return ch09::ring_backward_in_one_process(in.Q, in.K, in.V, forward.O, forward.L, dO, 3, Layout::zigzag,
                                              {.causal = true}, fa_test::kDevice);
  };
  const ch09::RingBackwardRun first = run();
  const ch09::RingBackwardRun again = run();
  CHECK(again.dQ.values == first.dQ.values);  // chapter 07's deterministic dQ, then a fixed order of additions
  CHECK(again.dK.values == first.dK.values);
  CHECK(again.dV.values == first.dV.values);
}

TEST_CASE("the backward ring hands on exactly the bytes of its model", "[ch09]") {
  for (const Layout layout : kLayouts) {
    for (std::size_t P = 1; P <= 4; ++P) {
      for (const std::size_t seq : {1u, 7u, 10u}) {
        if (!runs({static_cast<std::size_t>(layout), P, seq}, 2)) continue;  // (a sanitizer)
        const fa_test::AttentionInputs in = inputs(seq, 64, 61);
        const fa::Tensor4<float> dO = draw_dO(in.Q.shape, 62);
        const ch05::Result forward = ch05::flash_attention_2(in.Q, in.K, in.V, {}, fa_test::kDevice);
        const ch09::RingBackwardRun ring = ch09::ring_backward_in_one_process(in.Q, in.K, in.V, forward.O, forward.L,
                                                                              dO, P, layout, {}, fa_test::kDevice);
        for (std::size_t r = 0; r < P; ++r) {
          INFO(ch09::to_string(layout) << ", P = " << P << ", seq " << seq << ", rank " << r);
          CHECK(ring.bytes_sent[r] == ch09::backward_sends(in.Q.shape, P, r, layout));  // integers, exact in double
        }
      }
    }
  }
  // docs/09-ring-attention.md's run, [1, 2, 512, 64] on 4 ranks: a K/V shard is 2 x 2 x 128 x 64 x 4
  // = 131,072 bytes; the backward sends twice that at each of 3 steps and the dK, dV home at the
  // last: 917,504 bytes, 7/3 of the forward's 3 K/V shards (393,216). (2P - 1) / (P - 1) in general.
  for (const Layout layout : kLayouts) {
    const std::vector<double> sends = ch09::backward_sends({1, 2, 512, 64}, 4, 3, layout);
    CHECK(sends == std::vector<double>{262144, 262144, 262144, 131072});
    double total = 0;
    for (const double b : sends) total += b;
    CHECK(total == 917504);
    CHECK(total * 3 == 7 * 393216.0);
  }
  CHECK(ch09::backward_sends({1, 2, 256, 64}, 1, 0, Layout::zigzag) == std::vector<double>{0});
}

TEST_CASE("the backward ring refuses what it cannot run, saying what it accepts", "[ch09]") {
  fa_test::check_refused(
      [] {
        ch09::check_backward_problem({1, 2, 10, 10, 64}, 2, {.element = ch08::CacheType::bf16});
      },
      {"float32 only", "--dtype float32"});
  fa_test::check_refused([] { ch09::check_backward_problem({1, 2, 10, 12, 64}, 2, {}); }, {"self-attention"});
  fa_test::check_refused([] { ch09::check_backward_problem({1, 2, 10, 10, 32}, 2, {}); }, {"head_dim 32"});
  const fa_test::AttentionInputs in = inputs(10, 64, 1);
  const std::vector<float> L(2 * 10, 0.0f);
  ch09::RankBackward state(in.Q, in.Q, L, in.Q, ch09::chunks_of_rank(10, 1, 0, Layout::contiguous), {},
                           fa::Device::cpu);
  ch09::KVShard wrong = ch09::kv_shard(in.K, in.V, 2, 0, Layout::contiguous);
  wrong.chunks = ch09::chunks_of_rank(10, 1, 0, Layout::contiguous);  // 10 rows named, 5 held
  fa_test::check_refused([&] { (void)state.step(wrong); }, {"do not fit"});
  ch09::KVGradients mine{0, fa::Tensor4<float>(fa::Shape4{1, 2, 5, 64}), fa::Tensor4<float>(fa::Shape4{1, 2, 5, 64})};
  const ch09::KVGradients theirs{1, mine.dK, mine.dV};
  fa_test::check_refused([&] { ch09::accumulate(mine, theirs); }, {"rank 0", "rank 1"});
  fa_test::check_refused(
      [&] {
        (void)ch09::RankBackward(in.Q, in.Q, std::vector<float>(3), in.Q, {{0, 10}}, {}, fa::Device::cpu);
      },
      {"do not hold"});
}

// [graded09a]: the grading test of the course's graded exercise 09a (docs/course.md), the data flow of line 5
// in RankBackward::step. The forward's O and L from the definition (tests/definition.h) and each
// gradient against the float64 gradient within chapter 07's own bound (gradient_check.h: twice a
// plain float32 evaluation's error, plus u), so that only chapter 07's kernels (exercises 07.1 and
// 07.2) and the student's lines run: a dQ not kept, or a dK, dV added at the query chunk's rows or
// to no shard, is 1e-2 to 1 away.
TEST_CASE("the backward ring's dQ, dK, dV agree with the float64 gradient, the forward from the definition",
          "[ch09][graded09a]") {
  for (const bool causal : {false, true}) {
    for (const Layout layout : kLayouts) {
      const std::size_t seq = 29, P = causal ? 3 : 2;
      const fa_test::AttentionInputs in = inputs(seq, 64, 67 + seq);
      const fa::Tensor4<float> dO = draw_dO(in.Q.shape, 68);
      const fa_test::Definition d = fa_test::definition(in.Q, in.K, in.V, {.causal = causal});
      const fa::Tensor4<float> O(in.Q.shape, d.plain.O);
      const double scale = fa::default_scale(64);
      const ch07::GradientsOf<double> exact =
          ch07::backward_by_rows<double>(in.Q, in.K, in.V, dO, fa::Tensor4<double>(in.Q.shape, d.exact.O),
                                         std::span<const double>(d.exact.L), scale, causal, ch07::DFrom::jacobian);
      const ch07::GradientsOf<float> float32 =
          ch07::attention_backward_float32(in.Q, in.K, in.V, dO, O, d.plain.L, scale, causal);
      const ch09::RingBackwardRun ring = ch09::ring_backward_in_one_process(
          in.Q, in.K, in.V, O, d.plain.L, dO, P, layout, {.causal = causal}, fa_test::kDevice);
      INFO((causal ? "causal, " : "") << ch09::to_string(layout) << ", P = " << P);
      for (const auto& [name, got, want, plain] :
           {std::tuple{"dQ", &ring.dQ, &exact.dQ, &float32.dQ}, std::tuple{"dK", &ring.dK, &exact.dK, &float32.dK},
            std::tuple{"dV", &ring.dV, &exact.dV, &float32.dV}}) {
        const ch07::GradientCheck check = ch07::check_gradient(got->values, want->values, plain->values);
        INFO(name << ": " << ch07::describe(check));
        CHECK(check.pass());
      }
    }
  }
}
