// Chapter 05 tests, the traffic model: the closed forms give the traffic table, the tile walks agree
// with them where the blocks divide N and with an independent row count where they do not, and
// the walks visit the tiles in their loop order with counters that only grow.
//
// Every comparison here is exact: byte counts are integers, so no tolerance is needed.
#include <cstdint>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "catch.h"
#include "chapters/05_flash_attention_2/lab/traffic_model.h"
#include "chapters/05_flash_attention_2/lab/traffic_table.h"

namespace {

using ch05::TrafficCase;

// An independent count, row by row, for any N: every row of Q is read once and every row of O
// written once; each query block (counted as the rows r with r % Br == 0) reads all N rows of K and
// of V. No tiles, no ceil: a different route to the same number.
std::uint64_t fa2_bytes_by_rows(const TrafficCase& c) {
  const std::uint64_t N = c.seq_len, d = c.head_dim, e = c.bytes;
  std::uint64_t query_blocks = 0;
  for (std::uint64_t r = 0; r < N; ++r) query_blocks += (r % c.Br == 0);
  return e * d * (N + N) + query_blocks * 2 * e * d * N;
}

// The same for FlashAttention's order: K and V read once; per key block every row of Q read and
// every row of O, m, l written, and for every key block after the first O, m, l read back.
std::uint64_t fa1_bytes_by_rows(const TrafficCase& c) {
  const std::uint64_t N = c.seq_len, d = c.head_dim, e = c.bytes, s = c.stat_bytes;
  std::uint64_t key_blocks = 0;
  for (std::uint64_t r = 0; r < N; ++r) key_blocks += (r % c.Bc == 0);
  const std::uint64_t per_block = e * d * N /*Q*/ + e * d * N /*O write*/ + 2 * s * N /*m, l write*/;
  const std::uint64_t read_back = e * d * N /*O*/ + 2 * s * N /*m, l*/;
  return 2 * e * d * N + key_blocks * per_block + (key_blocks - 1) * read_back;
}

}  // namespace

TEST_CASE("the closed forms and the walk give the traffic table exactly", "[ch05]") {
  struct Row {
    TrafficCase c;
    std::uint64_t standard, fa2, floor;
    const char *standard_mb, *fa2_mb, *floor_mb;
  };
  // BF16, blocks of 128. The byte counts are e (2Nd + 4N^2 + 2Nd), e (2Nd + 2N^2 d / 128) and 4eNd
  // worked out by hand; the MB strings are the traffic table as printed.
  const Row rows[] = {
      {{4096, 64, 128, 128, 2, 4}, 136'314'880, 34'603'008, 2'097'152, "136", "34.6", "2.1"},
      {{4096, 128, 128, 128, 2, 4}, 138'412'032, 69'206'016, 4'194'304, "138", "69.2", "4.19"},
      {{8192, 128, 128, 128, 2, 4}, 545'259'520, 272'629'760, 8'388'608, "545", "273", "8.39"},
  };
  for (const Row& r : rows) {
    INFO("seq_len " << r.c.seq_len << ", head_dim " << r.c.head_dim);
    CHECK(ch05::standard_attention_bytes(r.c) == r.standard);
    CHECK(ch05::fa2_bytes_closed_form(r.c) == r.fa2);
    CHECK(ch05::floor_bytes(r.c) == r.floor);
    const ch05::Traffic t = ch05::walk_fa2(r.c);
    CHECK(t.moved.total() == r.fa2);
    CHECK(t.once.total() == r.floor);
    CHECK(ch05::format_megabytes(r.standard) == r.standard_mb);
    CHECK(ch05::format_megabytes(r.fa2) == r.fa2_mb);
    CHECK(ch05::format_megabytes(r.floor) == r.floor_mb);
  }
}

TEST_CASE("the printed table shows the traffic table's numbers on its rows", "[ch05]") {
  const std::vector<TrafficCase> cases = ch05::traffic_table_cases();
  const std::string table = ch05::format_traffic_table(cases);
  INFO(table);
  const std::vector<std::pair<std::string, std::vector<std::string>>> expected = {
      {"4096 x 64 ", {" 136 MB", " 34.6 MB", " 2.1 MB"}},
      {"4096 x 128 ", {" 138 MB", " 69.2 MB", " 4.19 MB"}},
      {"8192 x 128 ", {" 545 MB", " 273 MB", " 8.39 MB"}},
  };
  for (const auto& [size, numbers] : expected) {
    const std::size_t begin = table.find(size);
    REQUIRE(begin != std::string::npos);
    const std::string line = table.substr(begin, table.find('\n', begin) - begin);
    // The three numbers, in the order of the columns.
    std::size_t at = 0;
    for (const std::string& number : numbers) {
      at = line.find(number, at);
      CHECK(at != std::string::npos);
    }
  }
}

TEST_CASE("MB are printed to 3 significant figures without trailing zeros", "[ch05]") {
  CHECK(ch05::format_megabytes(0) == "0");
  CHECK(ch05::format_megabytes(1) == "0.000001");
  CHECK(ch05::format_megabytes(51'200) == "0.0512");
  CHECK(ch05::format_megabytes(999'600) == "1");  // 0.9996 rounds up to 1.00
  CHECK(ch05::format_megabytes(1'234'567) == "1.23");
  CHECK(ch05::format_megabytes(99'960'000) == "100");      // 99.96 rounds up to 100
  CHECK(ch05::format_megabytes(2'164'260'864) == "2160");  // 4 digits: the 4th is rounded away
  CHECK(ch05::format_megabytes(12'345'678'901) == "12300");
}

TEST_CASE("the FA2 walk agrees with the closed form whenever Br divides seq_len", "[ch05]") {
  for (std::int64_t N : {128, 256, 1024, 4096}) {
    for (std::int64_t Br : {16, 32, 64, 128}) {
      for (std::int64_t Bc : {16, 64, 128}) {
        for (std::int64_t d : {32, 64, 128}) {
          for (std::int64_t e : {1, 2, 4}) {
            const TrafficCase c{N, d, Br, Bc, e, 4};
            INFO("N " << N << ", d " << d << ", Br " << Br << ", Bc " << Bc << ", e " << e);
            const ch05::Traffic t = ch05::walk_fa2(c);
            REQUIRE(t.moved.total() == ch05::fa2_bytes_closed_form(c));
            REQUIRE(t.once.total() == ch05::floor_bytes(c));
            // Nothing of FA1's order appears in FA2's.
            REQUIRE(t.moved.o_read + t.moved.stats_read + t.moved.stats_write == 0);
          }
        }
      }
    }
  }
}

TEST_CASE("the walks count a short last block exactly, for any seq_len", "[ch05]") {
  for (std::int64_t N : {1, 2, 3, 100, 127, 129, 1000, 4097}) {
    for (std::int64_t Br : {1, 7, 64, 128, 200}) {
      for (std::int64_t Bc : {1, 5, 64, 128}) {
        if ((N / Br + 1) * (N / Bc + 1) > 300'000) continue;  // keep the test fast
        const TrafficCase c{N, 48, Br, Bc, 2, 4};
        INFO("N " << N << ", Br " << Br << ", Bc " << Bc);
        const ch05::Traffic fa2 = ch05::walk_fa2(c);
        REQUIRE(fa2.moved.total() == fa2_bytes_by_rows(c));
        REQUIRE(fa2.once.total() == ch05::floor_bytes(c));  // 4eNd holds for every N
        const ch05::Traffic fa1 = ch05::walk_fa1(c);
        REQUIRE(fa1.moved.total() == fa1_bytes_by_rows(c));
        REQUIRE(fa1.once.total() == ch05::floor_bytes(c) + 2 * 4 * static_cast<std::uint64_t>(N));
      }
    }
  }
  // Where Br does not divide N the closed form does not apply, and says so.
  const std::string message = fa_test::message_of<std::invalid_argument>([] {
    ch05::fa2_bytes_closed_form(TrafficCase{1000, 64, 128, 128, 2, 4});
  });
  CHECK(message.find("not a multiple of Br") != std::string::npos);
}

TEST_CASE("the FA1 walk agrees with its closed form and moves more than FA2", "[ch05]") {
  for (std::int64_t N : {128, 512, 2048}) {
    for (std::int64_t B : {16, 64, 128}) {
      for (std::int64_t d : {64, 128}) {
        const TrafficCase c{N, d, B, B, 2, 4};
        INFO("N " << N << ", Br = Bc = " << B << ", d " << d);
        const ch05::Traffic fa1 = ch05::walk_fa1(c);
        REQUIRE(fa1.moved.total() == ch05::fa1_bytes_closed_form(c));
        // With the same blocks FA1's order re-reads O and m, l, which FA2 keeps on chip:
        // it moves e N d (T - 1) + 2 s N (2T - 1) bytes more, T = N / B, which is never zero.
        const std::uint64_t T = N / B;
        const std::uint64_t extra = 2 * N * d * (T - 1) + 2 * 4 * N * (2 * T - 1);
        REQUIRE(fa1.moved.total() == ch05::walk_fa2(c).moved.total() + extra);
      }
    }
  }
}

TEST_CASE("the FA2 walk visits each tile once, query blocks outside, and its counters only grow", "[ch05]") {
  const TrafficCase c{300, 16, 64, 48, 2, 4};  // 5 x 7 tiles, the last row and column short
  std::vector<ch05::TileStep> steps;
  const ch05::Traffic total = ch05::walk_fa2(c, [&](const ch05::TileStep& s) { steps.push_back(s); });
  REQUIRE(steps.size() == 5 * 7);
  std::set<std::pair<std::int64_t, std::int64_t>> seen;
  std::uint64_t previous_moved = 0, previous_once = 0;
  for (std::size_t k = 0; k < steps.size(); ++k) {
    const ch05::TileStep& s = steps[k];
    INFO("step " << k << ": tile (" << s.i << ", " << s.j << ")");
    CHECK(s.step == static_cast<std::int64_t>(k));
    CHECK(s.i == static_cast<std::int64_t>(k / 7));  // FA2: i outside, j inside
    CHECK(s.j == static_cast<std::int64_t>(k % 7));
    CHECK(s.rows == (s.i == 4 ? 300 - 4 * 64 : 64));
    CHECK(s.cols == (s.j == 6 ? 300 - 6 * 48 : 48));
    CHECK(seen.insert({s.i, s.j}).second);
    CHECK(s.after.moved.total() > previous_moved);  // every tile loads K_j and V_j
    CHECK(s.after.once.total() >= previous_once);
    CHECK(s.after.once.total() <= s.after.moved.total());
    previous_moved = s.after.moved.total();
    previous_once = s.after.once.total();
  }
  CHECK(steps.back().after.moved == total.moved);
  CHECK(steps.back().after.once == total.once);
  // Once the first row of tiles is done, K and V have all crossed once, so "once" stops growing
  // except for Q_i at the start and O_i at the end of each later row.
  const ch05::TileStep& middle = steps[7 + 3];  // i = 1, j = 3
  CHECK(middle.after.once.k_read == 2 * 300 * 16);
  CHECK(middle.after.once == steps[7 + 1].after.once);
}

TEST_CASE("each FA2 tile moves what Algorithm 1 loads, plus O_i after the last tile", "[ch05]") {
  // The rule, tile by tile: Q_i when j == 0, K_j and V_j every tile ("once": when i == 0).
  const TrafficCase c{512, 64, 128, 64, 2, 4};
  const std::uint64_t e = 2, d = 64, Br = 128, Bc = 64, Tc = 8;
  std::uint64_t moved = 0, once = 0, o_written = 0;
  bool all_agree = true;
  ch05::walk_fa2(c, [&](const ch05::TileStep& s) {
    if (s.j == 0) {
      moved += e * Br * d;
      once += e * Br * d;
    }
    moved += 2 * e * Bc * d;
    if (s.i == 0) once += 2 * e * Bc * d;
    if (static_cast<std::uint64_t>(s.j) == Tc - 1) o_written += e * Br * d;
    all_agree = all_agree && s.after.moved.total() == moved + o_written && s.after.once.total() == once + o_written;
  });
  CHECK(all_agree);
  CHECK(o_written == e * 512 * d);
}

TEST_CASE("the FA1 walk visits key blocks outside and sends O, m, l through HBM between them", "[ch05]") {
  const TrafficCase c{256, 32, 64, 128, 2, 4};  // Tr = 4 query blocks, Tc = 2 key blocks
  std::vector<ch05::TileStep> steps;
  ch05::walk_fa1(c, [&](const ch05::TileStep& s) { steps.push_back(s); });
  REQUIRE(steps.size() == 8);
  for (std::size_t k = 0; k < steps.size(); ++k) {
    CHECK(steps[k].j == static_cast<std::int64_t>(k / 4));  // FA1: j outside, i inside
    CHECK(steps[k].i == static_cast<std::int64_t>(k % 4));
  }
  // During the first key block nothing is read back; in the second, each query block reads back
  // its O_i (64 rows x 32 x 2 bytes) and m_i, l_i (2 x 64 x 4 bytes).
  CHECK(steps[3].after.moved.o_read == 0);
  CHECK(steps[4].after.moved.o_read == 64 * 32 * 2);
  CHECK(steps[7].after.moved.stats_read == 4 * 2 * 64 * 4);
  CHECK(steps[7].after.moved.o_write == 2 * 256 * 32 * 2);  // O written once per key block
  CHECK(steps[7].after.once.o_write == 256 * 32 * 2);       // of which only the last stays
}

TEST_CASE("bad sizes are refused with the field and the accepted range", "[ch05]") {
  const TrafficCase good{};
  const std::vector<std::pair<TrafficCase, std::string>> bad = {
      {{0, 64, 128, 128, 2, 4}, "seq_len = 0"},
      {{-5, 64, 128, 128, 2, 4}, "seq_len = -5"},
      {{(1 << 20) + 1, 64, 128, 128, 2, 4}, "seq_len = 1048577"},
      {{4096, 0, 128, 128, 2, 4}, "head_dim = 0"},
      {{4096, 64, 0, 128, 2, 4}, "Br = 0"},
      {{4096, 64, 128, -1, 2, 4}, "Bc = -1"},
      {{4096, 64, 128, 128, 0, 4}, "bytes per value = 0"},
      {{4096, 64, 128, 128, 2, 9}, "bytes per statistic = 9"},
  };
  for (const auto& [c, field] : bad) {
    INFO(field);
    for (const std::string& message :
         {fa_test::message_of<std::invalid_argument>([&] { ch05::standard_attention_bytes(c); }),
          fa_test::message_of<std::invalid_argument>([&] { ch05::floor_bytes(c); }),
          fa_test::message_of<std::invalid_argument>([&] { ch05::walk_fa2(c); }),
          fa_test::message_of<std::invalid_argument>([&] { ch05::walk_fa1(c); }),
          fa_test::message_of<std::invalid_argument>([&] {
            ch05::format_traffic_table(std::vector<TrafficCase>{good, c});
          })}) {
      CHECK(message.find(field) != std::string::npos);
      CHECK(message.find("accepted 1 ..") != std::string::npos);
    }
  }
  // A walk of more than kMaxTiles tiles is refused before it starts, rather than running for minutes.
  const std::string message = fa_test::message_of<std::invalid_argument>([] {
    ch05::walk_fa2(TrafficCase{1 << 20, 64, 16, 16, 2, 4});
  });
  CHECK(message.find("65536 x 65536") != std::string::npos);
}
