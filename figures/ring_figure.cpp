// figures/ring_figure.cpp: figure 11, ring-steps.svg (figures.h), animated: chapter 09's ring on 4
// ranks, which K/V shard each rank holds at each step, from the chapter's own functions:
// ch09::chunks_of_rank (the rows of each rank), ch09::owner_at_step (whose shard a rank holds at a
// step) and ch09::visible (the pairs its queries see in it). The animation plays the ring a step at a
// time (the lines of chapters/09_ring_attention/ring.h):
//   step 0      every rank holds its own K/V shard (line 3) and folds it in (line 5)
//   step s > 0  every shard moves on from rank r - 1 to rank r (line 4: rank P - 1's to rank 0,
//               closing the ring), and every rank folds the shard that arrived
// and at the end each rank's total of pairs: the zigzag balance.
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
  // When things happen: step s runs from start(s) for step_length seconds; its shards arrive over
  // the first travel seconds of it. The totals appear after the last step.
  constexpr double first = 1.0, step_length = 3.0, travel = 1.0, fade = 0.5;
  const auto start = [&](std::size_t s) { return first + step_length * static_cast<double>(s); };
  const double t_totals = start(P), duration = t_totals + 2.5;

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
  // A band marks the step that plays.
  const auto cell_x = [&](std::size_t s) { return left + label_w + static_cast<double>(s) * step_w; };
  const auto cell_y = [&](std::size_t r) { return table_y + static_cast<double>(r) * row_h; };
  for (std::size_t s = 0; s < P; ++s) {
    body += rect(cell_x(s) - 4, table_y - 28, step_w, static_cast<double>(P) * row_h + 30,
                 fmt::format(R"(fill="{}" opacity="0")", band),
                 shown_between(start(s), start(s) + step_length).animate("opacity", duration));
    body += text(cell_x(s) + (step_w - 8) / 2, table_y - 10, fmt::format("step {}", s),
                 R"(class="heading" text-anchor="middle")");
  }
  std::size_t total_pairs = 0;
  for (std::size_t r = 0; r < P; ++r) {
    const double y = cell_y(r);
    const std::vector<ch09::Chunk> mine = ch09::chunks_of_rank(seq, P, r, ch09::Layout::zigzag);
    std::string rows;
    for (const ch09::Chunk& c : mine) rows += fmt::format("{}{}\u2013{}", rows.empty() ? "" : ", ", c.begin, c.end - 1);
    body += rect(left, y + 8, 16, 32, fmt::format(R"(fill="{}")", kRankColours[r]));
    body += text(left + 24, y + 22, fmt::format("rank {}", r), R"(class="bold")");
    body += text(left + 24, y + 40, fmt::format("queries {}", rows), R"(class="small")");
    std::size_t rank_pairs = 0;
    for (std::size_t s = 0; s < P; ++s) {
      const std::size_t owner = ch09::owner_at_step(r, s, P);
      const std::size_t pairs = pairs_seen(mine, ch09::chunks_of_rank(seq, P, owner, ch09::Layout::zigzag));
      rank_pairs += pairs;
      // The shard fades in where it starts (step 0), or slides in from the cell of the rank that
      // held it at the step before, the rank before this one (line 4).
      const double x = cell_x(s);
      Track shown(0.0);
      if (s == 0) {
        shown.move(start(s), start(s) + fade, 1.0);
      } else {
        shown.jump(start(s), 1.0);
      }
      const double from_dx = s == 0 ? 0.0 : cell_x(s - 1) - x, from_dy = s == 0 ? 0.0 : cell_y((r + P - 1) % P) - y;
      // The animations of one element of the cell, drawn at (x0, y0): from (x0, y0) moved by (from_dx,
      // from_dy) to (x0, y0), shown from the step's start.
      const auto moving = [&](double x0, double y0) {
        Track ax(x0 + from_dx), ay(y0 + from_dy);
        ax.move(start(s), start(s) + travel, x0);
        ay.move(start(s), start(s) + travel, y0);
        return ax.animate("x", duration) + ay.animate("y", duration) + shown.animate("opacity", duration);
      };
      body += rect(x, y + 4, step_w - 8, row_h - 8, fmt::format(R"(fill="{}")", kRankColours[owner]), moving(x, y + 4));
      body += text(x + (step_w - 8) / 2, y + 24, fmt::format("K/V shard of rank {}", owner),
                   R"(class="small white" text-anchor="middle")", moving(x + (step_w - 8) / 2, y + 24));
      body += text(x + (step_w - 8) / 2, y + 42, fmt::format("{} pairs seen", pairs),
                   R"(class="small white" text-anchor="middle")", moving(x + (step_w - 8) / 2, y + 42));
    }
    total_pairs += rank_pairs;
    Track totals(0.0);
    totals.move(t_totals, t_totals + fade, 1.0);
    body += text(cell_x(P) + 4, y + 33, fmt::format("{} in all", rank_pairs), R"(class="small")",
                 totals.animate("opacity", duration));
  }
  // What each step does, in the lines of ring.h; the finished picture keeps the last.
  const double foot = table_y + static_cast<double>(P) * row_h + 24;
  const auto caption = [&](double from, double until, const std::string& words) {
    const bool to_the_end = until >= duration;
    body += text(left, foot, words, to_the_end ? R"(class="bold")" : R"(class="bold" opacity="0")",
                 shown_between(from, until).animate("opacity", duration));
  };
  caption(0, start(0), "Each rank holds its queries and its own K/V shard.");
  caption(start(0), start(1),
          "Step 0 (lines 3-5): every rank folds its own shard; meanwhile it sends it on to the next rank.");
  for (std::size_t s = 1; s + 1 < P; ++s) {
    caption(start(s), start(s + 1),
            fmt::format("Step {}: every shard arrives from the rank before (rank {}'s at rank 0: the ring closes), is "
                        "folded in, and moves on.",
                        s, P - 1));
  }
  caption(start(P - 1), t_totals,
          fmt::format("Step {}: the last shard arrives and is folded in; nothing travels after it.", P - 1));
  caption(t_totals, duration, "Every rank's queries have seen every key shard once: the ring is done.");
  body += text(left, foot + 22,
               fmt::format("Every rank sees {} of the {} (query, key) pairs of the mask, and at every step about half "
                           "of its {} pairs with the shard",
                           total_pairs / P, seq * (seq + 1) / 2, (seq / P) * (seq / P)),
               R"(class="small")");
  body += text(left, foot + 40, "(the diagonals add a few at step 0): the zigzag balance.", R"(class="small")");
  body += text(left, foot + 58,
               "At each step a rank folds its queries' partial (O\u1d62, L\u1d62) against the held shard into its "
               "running (O, L) with chapter 08's merge.",
               R"(class="small")");
  const std::string description = fmt::format(
      "Animated ({:.1f} s loop, which opens on the finished picture). Chapter 09's ring on {} ranks with {} rows in "
      "the "
      "zigzag layout, causal. A strip of the sequence's rows coloured by the rank that holds them, then a table with a "
      "row per rank and a column per step, filled a step at a time: at step s rank r holds the K/V shard of rank "
      "(r - s) mod {}, which slides in from rank r - 1's cell of the step before, and each cell gives the (query, key) "
      "pairs its queries see in that shard; every rank sees {} pairs in all.",
      loop_length(duration), P, seq, P, total_pairs / P);
  return document(cell_x(P) + 90, foot + 68, "Ring attention: the K/V shard each rank holds at each step", description,
                  body);
}

}  // namespace figures
