// figures/ring_figure.cpp: figure 11, ring-steps.svg (figures.h): chapter 09's ring on 4 ranks,
// which K/V shard each rank holds at each step, from ch09::chunks_of_rank and ch09::visible.
#include <cstddef>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "chapters/09_ring_attention/shards.h"
#include "figures/figures.h"
#include "figures/svg.h"

namespace figures {

namespace {

// One colour per rank: the rows it owns, and its K/V shard wherever that travels (every cell also
// names the rank: hue alone tells nothing apart).
constexpr std::string_view kRankColours[] = {dark, mid, "#1b9e77", "#7570b3"};

// The (query, key) pairs of `queries` that see `keys` under the causal mask, counted with the rule
// the ring uses per pair of chunks (ch09::visible), each chunk pair's rows in full.
std::size_t pairs_seen(const std::vector<ch09::Chunk>& queries, const std::vector<ch09::Chunk>& keys) {
  std::size_t pairs = 0;
  for (const ch09::Chunk& q : queries) {
    for (const ch09::Chunk& k : keys) {
      const ch09::Visible v = ch09::visible(q, k, true);
      if (v == ch09::Visible::all) pairs += q.size() * k.size();
      if (v == ch09::Visible::diagonal) pairs += q.size() * (q.size() + 1) / 2;
    }
  }
  return pairs;
}

}  // namespace

std::string ring_steps_figure() {
  const std::size_t P = ring_ranks, seq = ring_rows;
  const double left = 30, row_h = 58, strip_y = 96, cell = 40, table_y = 190, label_w = 230, step_w = 150;
  std::string body = text(left, 30, "Ring attention: the K/V shard each rank holds at each step", R"(class="title")");
  body += text(left, 52,
               fmt::format("{} ranks, {} rows in the zigzag layout (rank r holds chunks r and {} \u2212 r of {}), "
                           "causal; every step, each shard moves to the next rank",
                           P, seq, 2 * P - 1, 2 * P),
               R"(class="small")");
  // The sequence's rows, coloured by the rank that holds them.
  body += text(left, strip_y - 10, "the sequence's rows", R"(class="heading")");
  for (std::size_t r = 0; r < P; ++r) {
    for (const ch09::Chunk& c : ch09::chunks_of_rank(seq, P, r, ch09::Layout::zigzag)) {
      for (std::size_t i = c.begin; i < c.end; ++i) {
        const double x = left + static_cast<double>(i) * cell;
        body += rect(x, strip_y, cell - 2, 30, fmt::format(R"(fill="{}")", kRankColours[r]));
        body +=
            text(x + (cell - 2) / 2, strip_y + 20, fmt::format("{}", i), R"(class="small white" text-anchor="middle")");
      }
    }
  }
  // The table: a rank per row, a step per column; each cell the shard held and the pairs it gives.
  for (std::size_t s = 0; s < P; ++s) {
    body += text(left + label_w + static_cast<double>(s) * step_w + (step_w - 8) / 2, table_y - 10,
                 fmt::format("step {}", s), R"(class="heading" text-anchor="middle")");
  }
  std::size_t total_pairs = 0;
  for (std::size_t r = 0; r < P; ++r) {
    const double y = table_y + static_cast<double>(r) * row_h;
    const std::vector<ch09::Chunk> mine = ch09::chunks_of_rank(seq, P, r, ch09::Layout::zigzag);
    std::string rows;
    for (const ch09::Chunk& c : mine) rows += fmt::format("{}{}\u2013{}", rows.empty() ? "" : ", ", c.begin, c.end - 1);
    body += rect(left, y + 8, 16, 32, fmt::format(R"(fill="{}")", kRankColours[r]));
    body += text(left + 24, y + 22, fmt::format("rank {}", r), R"(class="bold")");
    body += text(left + 24, y + 40, fmt::format("queries {}", rows), R"(class="small")");
    std::size_t rank_pairs = 0;
    for (std::size_t s = 0; s < P; ++s) {
      const std::size_t owner = (r + P - s) % P;
      const std::size_t pairs = pairs_seen(mine, ch09::chunks_of_rank(seq, P, owner, ch09::Layout::zigzag));
      rank_pairs += pairs;
      const double x = left + label_w + static_cast<double>(s) * step_w;
      body += rect(x, y + 4, step_w - 8, row_h - 8, fmt::format(R"(fill="{}")", kRankColours[owner]));
      body += text(x + (step_w - 8) / 2, y + 24, fmt::format("K/V shard of rank {}", owner),
                   R"(class="small white" text-anchor="middle")");
      body += text(x + (step_w - 8) / 2, y + 42, fmt::format("{} pairs seen", pairs),
                   R"(class="small white" text-anchor="middle")");
    }
    total_pairs += rank_pairs;
    body += text(left + label_w + static_cast<double>(P) * step_w + 4, y + 33, fmt::format("{} in all", rank_pairs),
                 R"(class="small")");
  }
  const double foot = table_y + static_cast<double>(P) * row_h + 24;
  body += text(left, foot,
               fmt::format("Every rank sees {} of the {} (query, key) pairs of the mask, and at every step about half "
                           "of its {} pairs with the shard (the diagonals add a few at step 0): the zigzag balance.",
                           total_pairs / P, seq * (seq + 1) / 2, (seq / P) * (seq / P)),
               R"(class="small")");
  body += text(left, foot + 18,
               "At each step a rank folds its queries' partial (O\u1d62, L\u1d62) against the held shard into its "
               "running (O, L) with chapter 08's merge.",
               R"(class="small")");
  const std::string description = fmt::format(
      "Static. Chapter 09's ring on {} ranks with {} rows in the zigzag layout, causal. A strip of the sequence's rows "
      "coloured by the rank that holds them, then a table with a row per rank and a column per step: at step s rank r "
      "holds the K/V shard of rank (r - s) mod {}, and each cell gives the (query, key) pairs its queries see in that "
      "shard; every rank sees {} pairs in all.",
      P, seq, P, total_pairs / P);
  return document(left + label_w + static_cast<double>(P) * step_w + 90, foot + 34,
                  "Ring attention: the K/V shard each rank holds at each step", description, body);
}

}  // namespace figures
