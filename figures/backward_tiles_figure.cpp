// figures/backward_tiles_figure.cpp: figure 8, backward-tiles.svg, which tiles of S one thread block
// of each backward kernel touches, under a causal mask.
//
// Everything drawn comes from ch07::walk_backward (chapters/07_backward/lab/traffic_model.h) through its
// visitor: the tiles each kernel visits, in its order, with the wholly masked ones skipped as the
// kernels skip them. Two panels, the same score matrix:
//   a. dK, dV kernel (lines 5-18): one block owns key block j and walks down its column of tiles,
//      query block by query block; the tiles above the diagonal are hidden from all its keys and
//      skipped. Each visited tile sends dS K_j to dQ_i by atomicAdd.
//   b. dq kernel (lines D1-D6, deterministic dQ): one block owns query block i and walks along its
//      row, key block by key block, up to the diagonal.
// In both, the chosen block's tiles are dark and numbered in the order it visits them; the tiles
// other blocks visit are light; the skipped ones are left white.
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "chapters/07_backward/lab/traffic_model.h"
#include "figures/figures.h"
#include "figures/svg.h"

namespace figures {
namespace {

constexpr double width = 960, height = 520;

// The problem the figure walks: N = 256 queries and keys, chapter 07's tile for head_dim 64
// (Br = 32 query rows, Bc = 64 keys), causal. Float32 values and statistics.
constexpr ch07::TrafficCase backward_case{256, 64, 32, 64, 4, 4};
constexpr std::int64_t chosen_key_block = 1;    // panel a
constexpr std::int64_t chosen_query_block = 5;  // panel b

using Tile = std::pair<std::int64_t, std::int64_t>;  // (i, j)

struct Walked {
  std::set<Tile> dk_dv, dq;       // every visited tile, per kernel
  std::vector<Tile> column, row;  // the chosen blocks' tiles, in visiting order
};

Walked walk() {
  Walked w;
  ch07::walk_backward(backward_case, true, true, [&](const ch07::BackwardTile& t) {
    const Tile tile{t.i, t.j};
    if (t.kernel == ch07::Kernel::dk_dv) {
      w.dk_dv.insert(tile);
      if (t.j == chosen_key_block) w.column.push_back(tile);
    } else {
      w.dq.insert(tile);
      if (t.i == chosen_query_block) w.row.push_back(tile);
    }
  });
  return w;
}

// One panel: the grid of tiles, the chosen block's tiles dark and numbered, the other visited ones
// light, and the causal diagonal.
std::string panel(double x, const std::set<Tile>& visited, const std::vector<Tile>& chosen, const std::string& heading,
                  const std::vector<std::string>& notes) {
  const ch07::TrafficCase& c = backward_case;
  const std::int64_t Tr = (c.seq_len + c.Br - 1) / c.Br, Tc = (c.seq_len + c.Bc - 1) / c.Bc;
  std::string out;
  out += text(x + 24, 110, heading, R"(class="heading")");
  const double gx = x + 120, gy = 170, size = 256;
  const double unit = size / static_cast<double>(c.seq_len);
  out += text(gx + size / 2, gy - 26, fmt::format("key block j ({} keys each)", c.Bc),
              R"(class="small" text-anchor="middle")");
  out += vertical_text(gx - 40, gy + size / 2, fmt::format("query block i ({} rows each)", c.Br), R"(class="small")");
  for (std::int64_t j = 0; j < Tc; ++j) {
    out += text(gx + unit * (static_cast<double>(j * c.Bc) + c.Bc / 2.0), gy - 8, std::to_string(j),
                R"(class="small" text-anchor="middle")");
  }
  for (std::int64_t i = 0; i < Tr; ++i) {
    out += text(gx - 10, gy + unit * (static_cast<double>(i * c.Br) + c.Br / 2.0) + 5, std::to_string(i),
                R"(class="small" text-anchor="end")");
  }
  for (std::int64_t i = 0; i < Tr; ++i) {
    for (std::int64_t j = 0; j < Tc; ++j) {
      const bool is_visited = visited.count({i, j}) > 0;
      out += rect(gx + unit * static_cast<double>(j * c.Bc), gy + unit * static_cast<double>(i * c.Br),
                  unit * static_cast<double>(c.Bc), unit * static_cast<double>(c.Br),
                  fmt::format(R"(fill="{}" stroke="{}" stroke-width="1")", is_visited ? light : "#ffffff", hairline));
    }
  }
  for (std::size_t n = 0; n < chosen.size(); ++n) {
    const auto [i, j] = chosen[n];
    const double tx = gx + unit * static_cast<double>(j * c.Bc), ty = gy + unit * static_cast<double>(i * c.Br);
    out += rect(tx, ty, unit * static_cast<double>(c.Bc), unit * static_cast<double>(c.Br),
                fmt::format(R"(fill="{}" stroke="{}" stroke-width="1")", dark, ink));
    out += text(tx + unit * c.Bc / 2.0, ty + unit * c.Br / 2.0 + 5, std::to_string(n + 1),
                R"(class="small white bold" text-anchor="middle")");
  }
  // The causal diagonal: query i sees key j <= i (seq_len_q = seq_len_k).
  out +=
      line(gx, gy, gx + size, gy + size, fmt::format(R"(stroke="{}" stroke-width="1.5" stroke-dasharray="5 4")", mid));
  double y = gy + size + 36;
  for (const std::string& note : notes) {
    out += text(x + 24, y, note, R"(class="small")");
    y += 20;
  }
  return out;
}

}  // namespace

std::string backward_tiles_figure() {
  const Walked w = walk();
  const ch07::TrafficCase& c = backward_case;
  std::string body;
  body += text(24, 32, "The backward pass, causal: which tiles of S one thread block touches", R"(class="title")");
  body +=
      text(24, 56,
           fmt::format("N = {} queries and keys; tiles of Br = {} query rows \u00d7 Bc = {} keys (chapter 07's tile "
                       "for head_dim {}); dashed: the causal diagonal",
                       c.seq_len, c.Br, c.Bc, c.head_dim),
           R"(class="small")");
  body += text(24, 76,
               "dark: the chosen block's tiles, numbered in its order; light: tiles other blocks visit; white: "
               "hidden from every row and key of the tile, skipped",
               R"(class="small")");
  body += panel(0, w.dk_dv, w.column, fmt::format("dK, dV kernel: block j = {} walks down", chosen_key_block),
                {fmt::format("keeps dK{0}, dV{0} on chip; Q\u1d62, dO\u1d62, L\u1d62, D\u1d62 stream past",
                             subscript(static_cast<std::size_t>(chosen_key_block))),
                 fmt::format("each of its {} tiles adds dS K{} to dQ\u1d62 by atomicAdd", w.column.size(),
                             subscript(static_cast<std::size_t>(chosen_key_block))),
                 fmt::format("{} tiles visited by all {} blocks", w.dk_dv.size(), (c.seq_len + c.Bc - 1) / c.Bc)});
  body += panel(480, w.dq, w.row, fmt::format("dq kernel: block i = {} walks across", chosen_query_block),
                {fmt::format("keeps dQ{} on chip; K\u2c7c, V\u2c7c stream past (deterministic dQ)",
                             subscript(static_cast<std::size_t>(chosen_query_block))),
                 fmt::format("sums its {} tiles in order j = 0, 1, ...: the same bits every run", w.row.size()),
                 fmt::format("{} tiles visited by all {} blocks", w.dq.size(), (c.seq_len + c.Br - 1) / c.Br)});
  body += line(480, 92, 480, height - 16, fmt::format(R"(stroke="{}" stroke-width="1")", hairline));
  const std::string description = fmt::format(
      "Two views of the {} x {} score matrix in tiles of {} query rows by {} keys, causal. Left: the dK, dV kernel's "
      "block for key block {} visits the {} tiles of its column from the diagonal down. Right: the dq kernel's block "
      "for query block {} visits the {} tiles of its row up to the diagonal. Tiles above the diagonal are skipped.",
      c.seq_len, c.seq_len, c.Br, c.Bc, chosen_key_block, w.column.size(), chosen_query_block, w.row.size());
  return document(width, height, "Which tiles a block of each backward kernel touches", description, body);
}

}  // namespace figures
