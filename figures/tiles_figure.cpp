// figures/tiles_figure.cpp: figure 2, flash-attention-2-tiles.svg, the two loop orders tile by tile.
//
// Everything drawn comes from ch05::walk_fa2 and ch05::walk_fa1 (chapters/05_flash_attention_2/
// traffic_model.h) through their TileVisitor: each tile (i, j) with its rows and columns, in the
// order the walk visits it, and both byte counters after it. The two panels play side by side,
// one tile per beat (the parts are lettered: "line n" in chapter 05 means its walks' lines):
//   a. the tile being computed is dark; the tiles done are light, with their turn written in them
//   b. a caption says what the tile read and wrote (the counter fields that grew), and which of
//      those would cost no HBM traffic with perfect L2 reuse (`moved` grew, `once` did not)
//   c. two bars count the bytes so far: `moved` (no L2 reuse) and `once` (every value crosses
//      once), on one scale for both panels
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join

#include "chapters/05_flash_attention_2/lab/traffic_model.h"
#include "figures/figures.h"
#include "figures/svg.h"

namespace figures {
namespace {

using ch05::HbmBytes;
using ch05::TileStep;
using ch05::TrafficCase;

constexpr double width = 960, height = 720;
constexpr double panel_width = 480;
constexpr double beat = 0.6;        // seconds per tile
constexpr double first_beat = 1.0;  // the first tile lights up here
constexpr double pause = 4.0;       // seconds on the finished picture before the loop restarts

// The small problem the figure walks: N = 288 is not a multiple of 64, so the last block of each
// kind holds the 32 rows left, as the walks count them. BF16 values, fp32 m and l.
constexpr TrafficCase tiles_case{288, 64, 64, 64, 2, 4};

std::string kilobytes(std::uint64_t bytes) { return fmt::format("{:.1f} KB", static_cast<double>(bytes) / 1e3); }

// (b) What a tile read and wrote, from the growth of the counters, and what of it a cache
// would have served.
std::vector<std::string> tile_caption(const TileStep& s, const ch05::Traffic& before) {
  const std::string i = subscript(static_cast<std::size_t>(s.i));
  const std::string j = subscript(static_cast<std::size_t>(s.j));
  struct Field {
    std::uint64_t HbmBytes::*bytes;
    std::string name;
  };
  const std::vector<Field> reads{{&HbmBytes::q_read, "Q" + i},
                                 {&HbmBytes::k_read, "K" + j},
                                 {&HbmBytes::v_read, "V" + j},
                                 {&HbmBytes::o_read, "O" + i},
                                 {&HbmBytes::stats_read, "m" + i + ", l" + i}};
  const std::vector<Field> writes{{&HbmBytes::o_write, "O" + i}, {&HbmBytes::stats_write, "m" + i + ", l" + i}};
  std::vector<std::string> read, cached, written, absorbed;
  for (const Field& f : reads) {
    const bool moved = s.after.moved.*f.bytes > before.moved.*f.bytes;
    if (moved) read.push_back(f.name);
    if (moved && s.after.once.*f.bytes == before.once.*f.bytes) cached.push_back(f.name);
  }
  for (const Field& f : writes) {
    const bool moved = s.after.moved.*f.bytes > before.moved.*f.bytes;
    if (moved) written.push_back(f.name);
    if (moved && s.after.once.*f.bytes == before.once.*f.bytes) absorbed.push_back(f.name);
  }
  std::string first = fmt::format("tile {}: (i, j) = ({}, {}); reads {}", s.step + 1, s.i, s.j, fmt::join(read, ", "));
  if (!written.empty()) first += fmt::format("; writes {}", fmt::join(written, ", "));
  std::vector<std::string> free;
  if (!cached.empty()) free.push_back(fmt::format("reads {}", fmt::join(cached, ", ")));
  if (!absorbed.empty()) free.push_back(fmt::format("writes {}", fmt::join(absorbed, ", ")));
  const std::string second = free.empty() ? std::string("free with L2 reuse: nothing, all first touches")
                                          : fmt::format("free with L2 reuse: {}", fmt::join(free, "; "));
  return {first, second};
}

// Where the bytes of both counters went, by tensor and direction, as a small table (KB).
std::string breakdown_table(const ch05::Traffic& total, double x, double y, std::string_view animation) {
  struct Column {
    std::string_view name;
    std::uint64_t HbmBytes::*bytes;
  };
  const std::vector<Column> columns{{"Q in", &HbmBytes::q_read},        {"K in", &HbmBytes::k_read},
                                    {"V in", &HbmBytes::v_read},        {"O in", &HbmBytes::o_read},
                                    {"O out", &HbmBytes::o_write},      {"m,l in", &HbmBytes::stats_read},
                                    {"m,l out", &HbmBytes::stats_write}};
  std::string out;
  const double first = x + 44, step = 58;
  out += text(x, y, "KB", R"(class="small bold")", animation);
  for (std::size_t c = 0; c < columns.size(); ++c) {
    out += text(first + step * static_cast<double>(c) + step - 6, y, columns[c].name,
                R"(class="small bold" text-anchor="end")", animation);
  }
  const std::vector<std::pair<std::string_view, const HbmBytes*>> rows{{"moved", &total.moved}, {"once", &total.once}};
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const double ry = y + 20 * static_cast<double>(r + 1);
    out += text(x, ry, rows[r].first, R"(class="small")", animation);
    for (std::size_t c = 0; c < columns.size(); ++c) {
      const std::uint64_t bytes = rows[r].second->*columns[c].bytes;
      out += text(first + step * static_cast<double>(c) + step - 6, ry,
                  bytes == 0 ? std::string("\u2013") : fmt::format("{:.1f}", static_cast<double>(bytes) / 1e3),
                  R"(class="small" text-anchor="end")", animation);
    }
  }
  return out;
}

// One walk's panel. x: its left edge; scale_bytes: the bytes that fill a counter bar.
std::string panel(const std::vector<TileStep>& steps, double x, double duration, double scale_bytes,
                  const std::string& heading, const std::string& subheading) {
  const TrafficCase& c = tiles_case;
  std::string out;
  out += text(x + 24, 116, heading, R"(class="heading")");
  out += text(x + 24, 138, subheading, R"(class="small")");

  // The N x N score matrix as a grid of tiles, in proportion to the rows each holds.
  const double gx = x + 112, gy = 200, size = 240;
  const double unit = size / static_cast<double>(c.seq_len);
  auto tile_x = [&](std::int64_t j) { return gx + unit * static_cast<double>(j * c.Bc); };
  auto tile_y = [&](std::int64_t i) { return gy + unit * static_cast<double>(i * c.Br); };
  out += text(gx + size / 2, gy - 30, fmt::format("key/value block j ({} keys each)", c.Bc),
              R"(class="small" text-anchor="middle")");
  out +=
      vertical_text(gx - 44, gy + size / 2, fmt::format("query block i ({} queries each)", c.Br), R"(class="small")");
  for (const TileStep& s : steps) {
    if (s.i == 0) {
      out += text(tile_x(s.j) + unit * static_cast<double>(s.cols) / 2, gy - 8, std::to_string(s.j),
                  R"(class="small" text-anchor="middle")");
    }
    if (s.j == 0) {
      out += text(gx - 10, tile_y(s.i) + unit * static_cast<double>(s.rows) / 2 + 5, std::to_string(s.i),
                  R"(class="small" text-anchor="end")");
    }
  }
  for (const TileStep& s : steps) {
    const double tx = tile_x(s.j), ty = tile_y(s.i);
    const double tw = unit * static_cast<double>(s.cols), th = unit * static_cast<double>(s.rows);
    const double start = first_beat + beat * static_cast<double>(s.step);
    // (a) white before its turn, dark during it, light after
    out += rect(tx, ty, tw, th, fmt::format(R"(fill="#ffffff" stroke="{}" stroke-width="1")", hairline));
    Track done(0.0);
    done.jump(start + beat, 1.0);
    out += rect(tx, ty, tw, th, fmt::format(R"(fill="{}" stroke="{}" stroke-width="1")", light, ink),
                done.animate("opacity", duration));
    out += rect(tx, ty, tw, th, fmt::format(R"(fill="{}" stroke="{}" stroke-width="1" opacity="0")", dark, ink),
                shown_between(start, start + beat).animate("opacity", duration));
    const double cx = tx + tw / 2, cy = ty + th / 2 + 5;
    const std::string turn = std::to_string(s.step + 1);
    out += text(cx, cy, turn, R"(class="small white bold" text-anchor="middle" opacity="0")",
                shown_between(start, start + beat).animate("opacity", duration));
    out += text(cx, cy, turn, R"(class="small" text-anchor="middle")", done.animate("opacity", duration));
  }

  // (b) the captions, one pair per tile (the last one stays).
  const double caption_y = gy + size + 34;
  ch05::Traffic before;
  for (const TileStep& s : steps) {
    const double start = first_beat + beat * static_cast<double>(s.step);
    const bool last = s.step + 1 == static_cast<std::int64_t>(steps.size());
    const std::string shown = shown_between(start, last ? duration : start + beat).animate("opacity", duration);
    const std::vector<std::string> lines = tile_caption(s, before);
    const std::string attributes = fmt::format(R"(class="small" opacity="{}")", last ? 1 : 0);
    out += text(x + 24, caption_y, lines[0], attributes, shown);
    out += text(x + 24, caption_y + 20, lines[1], attributes, shown);
    before = s.after;
  }

  // (c) the counters.
  const double bar_max = 300;
  auto bar_width = [&](std::uint64_t bytes) { return bar_max * static_cast<double>(bytes) / scale_bytes; };
  struct Counter {
    std::string label;
    std::string_view fill;
    const HbmBytes ch05::Traffic::*field;
  };
  const std::vector<Counter> counters{{"bytes moved, no L2 reuse (every load from HBM)", mid, &ch05::Traffic::moved},
                                      {"every value once (each re-read an L2 hit)", dark, &ch05::Traffic::once}};
  double y = caption_y + 62;
  for (const Counter& k : counters) {
    out += text(x + 24, y, k.label, R"(class="small")");
    Track w(0.0);
    for (const TileStep& s : steps) {
      const double start = first_beat + beat * static_cast<double>(s.step);
      w.move(start, start + 0.2 * beat, bar_width((s.after.*k.field).total()));
    }
    out += rect(x + 24, y + 8, bar_max, 18, fmt::format(R"(fill="none" stroke="{}" stroke-width="0.8")", hairline));
    out += rect(x + 24, y + 8, w.value(), 18, fmt::format(R"(fill="{}")", k.fill), w.animate("width", duration));
    for (const TileStep& s : steps) {
      const double start = first_beat + beat * static_cast<double>(s.step);
      const bool last = s.step + 1 == static_cast<std::int64_t>(steps.size());
      out += text(x + 24 + bar_max + 8, y + 23, kilobytes((s.after.*k.field).total()),
                  fmt::format(R"(class="small bold" opacity="{}")", last ? 1 : 0),
                  shown_between(start, last ? duration : start + beat).animate("opacity", duration));
    }
    y += 50;
  }
  // After the last tile: where the bytes went.
  Track at_end(0.0);
  at_end.jump(first_beat + beat * static_cast<double>(steps.size()), 1.0);
  out += breakdown_table(steps.back().after, x + 24, y + 8, at_end.animate("opacity", duration));
  return out;
}

std::vector<TileStep> record(ch05::Traffic (*walk)(const TrafficCase&, const ch05::TileVisitor&)) {
  std::vector<TileStep> steps;
  walk(tiles_case, [&](const TileStep& s) { steps.push_back(s); });
  return steps;
}

}  // namespace

std::string tiles_figure() {
  const std::vector<TileStep> fa2 = record(&ch05::walk_fa2);
  const std::vector<TileStep> fa1 = record(&ch05::walk_fa1);
  const double duration = first_beat + beat * static_cast<double>(std::max(fa2.size(), fa1.size())) + pause;
  const double scale_bytes =
      static_cast<double>(std::max(fa2.back().after.moved.total(), fa1.back().after.moved.total()));
  const TrafficCase& c = tiles_case;
  const std::int64_t tail = c.seq_len - (c.seq_len - 1) / c.Br * c.Br;

  std::string body;
  body += text(24, 32, "The score matrix S tile by tile: FlashAttention-2's order against FlashAttention's",
               R"(class="title")");
  body += text(24, 56,
               fmt::format("N = {} queries and keys, head_dim d = {}, tiles of Br = {} query rows \u00d7 Bc = {} key "
                           "rows (the last block of each holds {})",
                           c.seq_len, c.head_dim, c.Br, c.Bc, tail),
               R"(class="small")");
  body += text(
      24, 76,
      fmt::format("{} bytes per value of Q, K, V, O; {} per value of m and l; KB = 1000 bytes", c.bytes, c.stat_bytes),
      R"(class="small")");
  body += panel(fa2, 0, duration, scale_bytes, "FlashAttention-2: query blocks outside",
                "a query block keeps Q, m, l, O on chip; the K, V blocks stream past");
  body += panel(fa1, panel_width, duration, scale_bytes, "FlashAttention: key/value blocks outside",
                "a K, V block stays on chip; Q and the partial O, m, l cross HBM");
  body += line(panel_width, 100, panel_width, height - 16, fmt::format(R"(stroke="{}" stroke-width="1")", hairline));

  const std::string description = fmt::format(
      "Animated ({:.1f} s loop, which opens on the finished picture). The {} x {} score matrix as {} tiles, lit in the "
      "order of chapter 05's tile "
      "walks: walk_fa2 (query blocks outside) on the left, walk_fa1 (key/value blocks outside) on the right, "
      "with the bytes each has moved so far without L2 reuse and with every value crossing once. At the "
      "end, FlashAttention-2 moved {} and FlashAttention {} (no L2 reuse); every value once: {} and {}.",
      loop_length(duration), c.seq_len, c.seq_len, fa2.size(), kilobytes(fa2.back().after.moved.total()),
      kilobytes(fa1.back().after.moved.total()), kilobytes(fa2.back().after.once.total()),
      kilobytes(fa1.back().after.once.total()));
  return document(width, height, "FlashAttention-2's tile order, and FlashAttention's", description, body);
}

}  // namespace figures
