// Chapter 07 tests of the backward pass's traffic model (chapters/07_backward/lab/traffic_model.h): the
// tile walks against the closed forms, the causal skip against a count by hand, and the two dQ
// methods against each other. Every comparison is exact (integers).
#include <cstdint>
#include <set>
#include <utility>

#include "catch.h"
#include "chapters/07_backward/lab/traffic_model.h"

namespace {

using ch07::TrafficCase;

std::uint64_t walk_total(const TrafficCase& c, bool deterministic) {
  return ch07::walk_backward(c, false, deterministic).moved.total();
}

}  // namespace

TEST_CASE("the backward walks add up to the closed forms where the blocks divide seq_len", "[ch07]") {
  const std::int64_t N = GENERATE(64, 256, 1024);
  const std::int64_t d = GENERATE(32, 128);
  const auto [Br, Bc] = GENERATE(table<std::int64_t, std::int64_t>({{32, 64}, {64, 64}, {64, 32}}));
  const bool deterministic = GENERATE(false, true);
  const TrafficCase c{N, d, Br, Bc, 4, 4};
  INFO("N " << N << ", d " << d << ", Br " << Br << ", Bc " << Bc << (deterministic ? ", deterministic" : ", atomic"));
  CHECK(walk_total(c, deterministic) == ch07::backward_bytes_closed_form(c, deterministic));
}

TEST_CASE("with Br = Bc both dQ methods move the same bytes but for 2eNd + 2sN", "[ch07]") {
  // atomic: e (7Nd + 4N^2 d / B) + s (N + 2N^2 / B); deterministic: e (9Nd + 4N^2 d / B) + s (3N + 2N^2 / B).
  const TrafficCase c{4096, 64, 128, 128, 2, 4};
  const std::uint64_t atomic = walk_total(c, false), deterministic = walk_total(c, true);
  CHECK(deterministic - atomic == 2u * 2 * 4096 * 64 + 2u * 4 * 4096);
}

TEST_CASE("the closed form refuses a seq_len the blocks do not divide; the walk counts it", "[ch07]") {
  const TrafficCase c{1000, 64, 64, 64, 4, 4};
  CHECK_THROWS_AS(ch07::backward_bytes_closed_form(c, false), std::invalid_argument);
  // The walk counts the short last block's 1000 - 15 * 64 = 40 rows: K, V read once each, whatever the blocks.
  CHECK(ch07::walk_backward(c, false, false).moved.k_read == 4u * 1000 * 64);
}

TEST_CASE("with every re-read an L2 hit, each tensor crosses once, for both methods", "[ch07]") {
  const TrafficCase c{300, 64, 32, 64, 4, 4};  // neither block divides 300
  const std::uint64_t Nd = 300 * 64 * 4, N = 300 * 4;
  for (bool deterministic : {false, true}) {
    const ch07::BackwardBytes once = ch07::walk_backward(c, false, deterministic).once;
    INFO((deterministic ? "deterministic" : "atomic"));
    CHECK(once.q_read == Nd);
    CHECK(once.k_read == Nd);
    CHECK(once.v_read == Nd);
    CHECK(once.o_read == Nd);
    CHECK(once.do_read == Nd);
    CHECK(once.stats_read == N);  // L; D is read back from L2 after its one write
    CHECK(once.dq_read == 0);
    CHECK(once.dq_write == Nd);
    CHECK(once.dk_dv_write == 2 * Nd);
    CHECK(once.d_write == N);
  }
}

TEST_CASE("the causal walks visit exactly the tiles where some query sees some key", "[ch07]") {
  const auto [N, Br, Bc] = GENERATE(
      table<std::int64_t, std::int64_t, std::int64_t>({{256, 64, 64}, {300, 32, 64}, {300, 64, 32}, {33, 32, 32}}));
  const TrafficCase c{N, 32, Br, Bc, 4, 4};
  std::set<std::pair<std::int64_t, std::int64_t>> by_hand;  // (i, j) with an entry (row, key), key <= row
  for (std::int64_t row = 0; row < N; ++row) {
    for (std::int64_t key = 0; key <= row; ++key) by_hand.insert({row / Br, key / Bc});
  }
  std::set<std::pair<std::int64_t, std::int64_t>> dk_dv, dq;
  ch07::walk_backward(c, true, true, [&](const ch07::BackwardTile& t) {
    (t.kernel == ch07::Kernel::dk_dv ? dk_dv : dq).insert({t.i, t.j});
  });
  INFO("N " << N << ", Br " << Br << ", Bc " << Bc);
  CHECK(dk_dv == by_hand);
  CHECK(dq == by_hand);
}

TEST_CASE("the deterministic method does 7/5 of the atomic one's work, and causal about half", "[ch07]") {
  const TrafficCase c{1024, 64, 64, 64, 4, 4};
  const double atomic = ch07::backward_flops(c, false, false);
  CHECK(atomic == 5.0 * 2 * 1024.0 * 1024 * 64);  // 2.5 times the forward's 4 N^2 d
  CHECK(ch07::backward_flops(c, false, true) / atomic == 7.0 / 5.0);
  // Causal, 16 x 16 tiles: the 136 on or below the diagonal are visited, 136/256 of the work.
  CHECK(ch07::backward_flops(c, true, false) / atomic == 136.0 / 256.0);
}
