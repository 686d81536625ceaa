// Chapter 08's traffic model: the bytes a decoding step moves between DRAM and the chip.
//
// Decoding reads the KV cache once and does little else: its time on a GPU is at least
//   (bytes moved) / (DRAM bandwidth),
// 4.8 TB/s on an H200. The bytes, walked block by block as the kernels walk them:
//   split kernel, each block (split s, sequence b, K/V head g, row block z):
//     loads   its rows of Q (element bytes each), the sequence's length (4 bytes), and for every
//             key j of its chunk below the sequence's length (up to the last key a row of the block
//             sees, under the causal mask): that key's row of K and of V (head_dim elements each)
//             and its entry of the block table (4 bytes, once per key and block)
//     stores  its rows of the partial: O_s (head_dim float32) and L_s (float32)
//   combine kernel (when splits > 1), every output row:
//     loads   every split's O_s and L_s of the row; stores O and L
// With one row block (heads / kv_heads x seq_len_q <= Br) and without the causal mask's skipped
// tiles, the K and V bytes are exactly the cache: sum over sequences of length x kv_heads x 2 x
// head_dim x element bytes, each byte once; every other term is small beside it for long caches.
// simt's memory profile (--profile) counts the kernels' bytes on the CPU: they equal this walk
// (tests/CMakeLists.txt, ch08_profile_equals_traffic_model).
//
// Source: Dao et al. 2023, "Flash-Decoding for long-context inference" (decoding is bound by the
// cache's bytes); NVIDIA H200 datasheet (4.8 TB/s of HBM3e).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "chapters/08_decoding/decoding.h"

namespace ch08 {

inline constexpr double kH200DramBytesPerSecond = 4.8e12;

// Global-memory bytes of one kernel.
struct KernelBytes {
  std::uint64_t loads = 0;
  std::uint64_t stores = 0;
  std::uint64_t total() const { return loads + stores; }
};

struct DecodeTraffic {
  KernelBytes split;        // the split kernel, every block
  KernelBytes combine;      // the combine kernel (zero for one split)
  std::uint64_t cache = 0;  // the K and V rows of every sequence's keys, once: the floor's main term
  std::uint64_t table = 0;  // block-table entries read, in split.loads
  std::uint64_t total() const { return split.total() + combine.total(); }
  // The time it takes at `bytes_per_second`, in milliseconds: the floor of a decoding step.
  double floor_ms(double bytes_per_second = kH200DramBytesPerSecond) const {
    return static_cast<double>(total()) / bytes_per_second * 1e3;
  }
};

// The walk above for one problem and its sequences' lengths ([batch]). Never throws.
inline DecodeTraffic decode_traffic(const DecodeProblem& p, const std::vector<int>& lengths) {
  const std::uint64_t element = element_bytes(p.cache_type);
  const std::uint64_t d = static_cast<std::uint64_t>(p.head_dim);
  const int Br = p.tile.Br, Bc = p.tile.Bc;
  const int rows = p.rows_per_kv_head();
  DecodeTraffic t;
  for (int b = 0; b < p.batch; ++b) {
    const int len = lengths[static_cast<std::size_t>(b)];
    t.cache += static_cast<std::uint64_t>(len) * p.kv_heads * 2 * d * element;
    const int tiles = (len + Bc - 1) / Bc;
    const int per_split = (tiles + p.splits - 1) / p.splits;
    for (int z = 0; z < p.row_blocks(); ++z) {
      const int r0 = z * Br;
      const int block_rows = std::min(Br, rows - r0);
      const int r_last = r0 + block_rows - 1;
      // The largest new-token index among the block's rows (row r is token r % seq_len_q).
      const int i_max = r_last / p.seq_len_q > r0 / p.seq_len_q ? p.seq_len_q - 1 : r_last % p.seq_len_q;
      const int visible_max = fa::visible_keys(i_max, p.seq_len_q, len, p.causal);
      for (int s = 0; s < p.splits; ++s) {
        const int tile_begin = s * per_split;
        const int tile_end = std::min({(s + 1) * per_split, tiles, (visible_max + Bc - 1) / Bc});
        const int keys = tile_begin < tile_end ? std::min(tile_end * Bc, len) - tile_begin * Bc : 0;
        const std::uint64_t blocks_here = static_cast<std::uint64_t>(p.kv_heads);  // every K/V head alike
        t.split.loads += blocks_here * (static_cast<std::uint64_t>(block_rows) * d * element + 4 +
                                        static_cast<std::uint64_t>(keys) * (2 * d * element + 4));
        t.table += blocks_here * 4 * static_cast<std::uint64_t>(keys);
        t.split.stores += blocks_here * static_cast<std::uint64_t>(block_rows) * (d + 1) * 4;
      }
    }
  }
  if (p.splits > 1) {
    const std::uint64_t row_bytes = (d + 1) * 4;
    t.combine.loads = static_cast<std::uint64_t>(p.splits) * p.output_rows() * row_bytes;
    t.combine.stores = p.output_rows() * row_bytes;
  }
  return t;
}

}  // namespace ch08
