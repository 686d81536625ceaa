#include "common/kernel_problem.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace fa {

std::string tile_name(Tile tile) { return fmt::format("{}x{}", tile.Br, tile.Bc); }

std::string tile_list(std::span<const KernelShape> compiled, int head_dim) {
  std::vector<std::string> names;
  for (const KernelShape& k : compiled) {
    const std::string name = tile_name(k.tile);
    if ((head_dim == 0 || k.head_dim == head_dim) && std::find(names.begin(), names.end(), name) == names.end()) {
      names.push_back(name);
    }
  }
  return fmt::format("{}", fmt::join(names, ", "));
}

std::vector<Tile> tiles_of(std::span<const KernelShape> compiled, int head_dim) {
  std::vector<Tile> tiles;
  for (const KernelShape& k : compiled) {
    if (k.head_dim == head_dim) tiles.push_back(k.tile);
  }
  return tiles;
}

Tile parse_tile(std::string_view text, std::span<const KernelShape> compiled) {
  for (const KernelShape& k : compiled) {
    if (text == tile_name(k.tile)) return k.tile;
  }
  throw std::invalid_argument(
      fmt::format("--tile {}: accepted Br x Bc shapes are {}", text.empty() ? "''" : text, tile_list(compiled)));
}

TileChoice fit_tile(std::string_view who, Tile default_tile, int head_dim, std::span<const KernelShape> compiled,
                    const SharedBytes& bytes, std::size_t limit) {
  const std::size_t default_bytes = bytes(default_tile);
  if (default_bytes <= limit) return {default_tile, default_bytes, {}};
  std::optional<TileChoice> best;
  std::optional<TileChoice> smallest;  // for the refusal: the least any compiled tile needs
  for (const KernelShape& k : compiled) {
    if (k.head_dim != head_dim) continue;
    const TileChoice c{k.tile, bytes(k.tile), {}};
    if (!smallest || c.bytes < smallest->bytes) smallest = c;
    if (c.bytes > limit) continue;
    const auto work = [](Tile t) { return std::pair{std::int64_t{t.Br} * t.Bc, t.Br}; };
    if (!best || work(c.tile) > work(best->tile)) best = c;
  }
  if (!best) {
    const TileChoice least = smallest.value_or(TileChoice{default_tile, default_bytes, {}});
    throw std::invalid_argument(fmt::format(
        "{}: at head dim {} every compiled tile needs more shared memory per block than this GPU gives a block ({} "
        "bytes); the smallest, {}, needs {}: run it with --device cpu, or on a GPU that gives a block more",
        who, head_dim, limit, tile_name(least.tile), least.bytes));
  }
  best->why = fmt::format(
      "the default {} needs {} bytes of shared memory per block, more than the {} this GPU gives a block: {} ({} "
      "bytes), the compiled tile that fits with the most work per block",
      tile_name(default_tile), default_bytes, limit, tile_name(best->tile), best->bytes);
  return *best;
}

TileChoice tile_for_device(std::string_view who, Device device, std::optional<Tile> given, Tile default_tile,
                           int head_dim, std::span<const KernelShape> compiled, const SharedBytes& bytes) {
  if (given) return {*given, bytes(*given), {}};
  if (device == Device::cpu) return {default_tile, bytes(default_tile), {}};
  return fit_tile(who, default_tile, head_dim, compiled, bytes, gpu_shared_bytes_per_block());
}

std::string tile_note(std::string_view what, const TileChoice& choice) {
  return choice.why.empty() ? std::string() : fmt::format("; {} {}: {}", what, tile_name(choice.tile), choice.why);
}

DeviceProblem device_problem(std::string_view who, const AttentionShape& shape, std::optional<double> scale,
                             bool causal, Tile tile, std::span<const KernelShape> compiled) {
  if (!compiled.empty()) {
    std::vector<std::size_t> head_dims;
    for (const KernelShape& k : compiled) {
      const auto d = static_cast<std::size_t>(k.head_dim);
      if (std::find(head_dims.begin(), head_dims.end(), d) == head_dims.end()) head_dims.push_back(d);
    }
    if (std::find(head_dims.begin(), head_dims.end(), shape.head_dim) == head_dims.end()) {
      throw std::invalid_argument(
          fmt::format("{}: head_dim {} is not supported; the kernel is compiled for head_dim {}", who, shape.head_dim,
                      fmt::join(head_dims, ", ")));
    }
    const KernelShape wanted{static_cast<int>(shape.head_dim), tile};
    if (std::find(compiled.begin(), compiled.end(), wanted) == compiled.end()) {
      throw std::invalid_argument(fmt::format("{}: tile Br x Bc = {} is not compiled; choose one of {}", who,
                                              tile_name(tile), tile_list(compiled, wanted.head_dim)));
    }
  }
  const double s = scale.value_or(default_scale(shape.head_dim));
  if (!std::isfinite(static_cast<float>(s))) {
    throw std::invalid_argument(
        fmt::format("{}: scale {} is not accepted; give a number that float32 can hold (|scale| <= 3.4e38)", who, s));
  }
  const std::uint64_t batch_heads = std::uint64_t{shape.batch} * shape.heads;
  if (shape.batch > kMaxBatchHeads || batch_heads > kMaxBatchHeads) {
    throw std::invalid_argument(fmt::format("{}: batch * heads = {} x {} is more than the {} the kernels' grid allows",
                                            who, shape.batch, shape.heads, kMaxBatchHeads));
  }
  constexpr std::uint64_t int_max = std::numeric_limits<int>::max();
  const std::uint64_t longest = std::max(shape.seq_len_q, shape.seq_len_k);
  if (longest > int_max || shape.head_dim > int_max || longest * shape.head_dim > int_max) {
    throw std::invalid_argument(fmt::format(
        "{}: one head's Q, K or V holds {} x {} values, more than the 2^31 - 1 of the kernels' int indexing", who,
        longest, shape.head_dim));
  }
  return {static_cast<int>(batch_heads),
          static_cast<int>(shape.seq_len_q),
          static_cast<int>(shape.seq_len_k),
          static_cast<int>(shape.head_dim),
          static_cast<float>(s),
          causal,
          tile};
}

}  // namespace fa
