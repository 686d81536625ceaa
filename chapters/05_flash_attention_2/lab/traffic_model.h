// Chapter 05, second idea: how many bytes one head's forward pass moves to and from HBM.
//
// What this adds to chapter 04: chapter 04 writes S and P to global memory (HBM) and reads them
// back; this header counts what that costs, and what the tiled kernel of this chapter moves
// instead, which never stores S or P. With N = seq_len, d = head_dim and e bytes per value:
//
//   standard attention (chapter 04)   e (2Nd + 4N^2 + 2Nd)   read Q, K; write, read S; write, read P;
//                                                            read V; write O
//   FlashAttention-2, no L2 reuse     e (2Nd + 2N^2 d / Br)  Q read and O written once; K and V read
//                                                            once per query block (N / Br of them)
//   the floor: every value once       4eNd                   every re-read of K, V an L2 hit
//
// Each is implemented twice: as the closed form above, and as a walk over the tiles in the
// kernel's order that adds up what each tile loads or stores, the way the kernel moves it. The
// walk counts two things at once: `moved` (no L2 reuse: every load goes to HBM) and `once` (every
// re-read is an L2 hit: a value costs HBM traffic only the first time).
//
// The walk in FlashAttention-2's order (Dao 2023, Algorithm 1, with its line numbers), Tr = ceil(N/Br),
// Tc = ceil(N/Bc):
//    3. for i = 0 .. Tr-1                          one query block of Br rows (a thread block)
//    4.   load Q_i                                 at j == 0 only: e * rows_i * d
//    6.   for j = 0 .. Tc-1                        key/value blocks of Bc rows stream past
//    7.     load K_j, V_j                          every tile: 2 e * cols_j * d ("once": i == 0 only)
//  8-10.    S_ij = Q_i K_j^T, fold into m, l, O_i  on chip: no HBM traffic
//   14.   write O_i                                after the last tile (j == Tc-1): e * rows_i * d
//
// The walk in FlashAttention's order (Dao et al. 2022, Algorithm 1, with its line numbers), for
// comparison:
//    5. for j = 0 .. Tc-1                          key/value blocks outside
//    6.   load K_j, V_j                            once per key block (at i == 0)
//    7.   for i = 0 .. Tr-1                        query blocks inside
//    8.     load Q_i; and, for j > 0, O_i, m_i, l_i    the partial results of the last key block
//  9-11.    S_ij = Q_i K_j^T, fold into m_i, l_i, O_i  on chip
// 12-13.    write O_i, m_i, l_i                    every tile ("once": only at j == Tc-1)
//   The paper's line 2 initialises O, l, m in HBM and line 8 reads them back even at j == 0; we
//   count a kernel that starts them on chip instead (zeros, zeros, -inf), so neither that write
//   nor that read appears.
//
// Sizes that are not multiples of the blocks: the last query block has N - (Tr-1) Br rows and
// the last key block N - (Tc-1) Bc rows, and the walk counts exactly the rows they hold. Every
// query block still streams all N rows of K and V, so for any N the walk gives
//   FA2 moved = e (2Nd + 2Nd ceil(N/Br))
// and the closed form, which writes ceil(N/Br) as N/Br, assumes Br divides N: with a
// short last block it undercounts by 2eNd (ceil(N/Br) - N/Br). fa2_bytes_closed_form() therefore
// refuses an N that Br does not divide; walk_fa2() is exact for every N.
//
// Not counted: the logsumexp L = m + log(l) that FA2 writes for the backward pass (4N bytes in
// fp32, under 0.1% of the FA2 column at the traffic table's sizes), as the traffic table leaves it
// out; FA1's m and l
// are counted, because its order has to send them through HBM between key blocks.
//
// Source: the traffic table (docs/05-flash-attention-2.md: one head, forward, BF16, blocks of 128);
// Dao 2023, FlashAttention-2, section 3.1 and Algorithm 1 (the loop order); Dao et al. 2022,
// FlashAttention, section 3.2 and Theorem 2 (IO complexity: Theta(N^2 d^2 / M) HBM accesses with
// on-chip memory M, here with Bc = Theta(M/d), against Theta(Nd + N^2) for standard attention).
// Run the demo: build/default/bin/ch05_flash_attention_2 --traffic
//               build/default/bin/ch05_flash_attention_2 --traffic --seq 1000 --head-dim 64 --br 64
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <tuple>

#include <fmt/format.h>

namespace ch05 {

// One head's forward pass: the problem size, the tile sizes and the bytes per value.
struct TrafficCase {
  std::int64_t seq_len = 4096;  // N, query rows and key rows (self-attention: the same)
  std::int64_t head_dim = 64;   // d
  std::int64_t Br = 128;        // query rows per tile
  std::int64_t Bc = 128;        // key/value rows per tile
  std::int64_t bytes = 2;       // e: bytes per value of Q, K, V, S, P, O (2 for BF16 and FP16)
  std::int64_t stat_bytes = 4;  // bytes per value of m and l (fp32 in both papers' kernels)
};

// The accepted ranges. They keep every count below 2^57 bytes, so no uint64 sum overflows.
inline constexpr std::int64_t kMaxSeqLen = std::int64_t{1} << 20;
inline constexpr std::int64_t kMaxHeadDim = 4096;
inline constexpr std::int64_t kMaxBlock = std::int64_t{1} << 16;
inline constexpr std::int64_t kMaxBytesPerValue = 8;
// The walks visit every tile; this bounds their time (about 0.1 s at 2^26 tiles).
inline constexpr std::int64_t kMaxTiles = std::int64_t{1} << 26;

// Throws std::invalid_argument naming the first field out of range and the accepted range.
inline void check_traffic_case(const TrafficCase& c) {
  auto check = [](const char* name, std::int64_t value, std::int64_t max) {
    if (value < 1 || value > max) {
      throw std::invalid_argument(
          fmt::format("traffic model: {} = {} is out of range: accepted 1 .. {}", name, value, max));
    }
  };
  check("seq_len", c.seq_len, kMaxSeqLen);
  check("head_dim", c.head_dim, kMaxHeadDim);
  check("Br", c.Br, kMaxBlock);
  check("Bc", c.Bc, kMaxBlock);
  check("bytes per value", c.bytes, kMaxBytesPerValue);
  check("bytes per statistic", c.stat_bytes, kMaxBytesPerValue);
}

inline std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }

// Bytes moved between HBM and the chip, by tensor and direction.
struct HbmBytes {
  std::uint64_t q_read = 0;
  std::uint64_t k_read = 0;
  std::uint64_t v_read = 0;
  std::uint64_t o_read = 0;  // FA1 order only: the partial O_i, read back for the next key block
  std::uint64_t o_write = 0;
  std::uint64_t stats_read = 0;   // FA1 order only: m_i and l_i, read back
  std::uint64_t stats_write = 0;  // FA1 order only: m_i and l_i, written after each tile

  std::uint64_t total() const { return q_read + k_read + v_read + o_read + o_write + stats_read + stats_write; }
  bool operator==(const HbmBytes&) const = default;
};

// What a walk returns: its two counters over the whole pass.
struct Traffic {
  HbmBytes moved;  // no L2 reuse: every load and store reaches HBM
  HbmBytes once;   // every re-read an L2 hit: each value crosses once
};

// One tile of a walk, as the walk reaches it, with the counters after the tile (cumulative).
struct TileStep {
  std::int64_t step = 0;  // 0, 1, 2, ... in the order the walk visits the tiles
  std::int64_t i = 0;     // query block: query rows i*Br .. i*Br + rows - 1
  std::int64_t j = 0;     // key block: key rows j*Bc .. j*Bc + cols - 1
  std::int64_t rows = 0;  // Br, or fewer in the last query block
  std::int64_t cols = 0;  // Bc, or fewer in the last key block
  Traffic after;          // both counters, this tile included
};

// Called once per tile, in the walk's order (for a trace, a figure or an animation).
using TileVisitor = std::function<void(const TileStep&)>;

// ---- Closed forms ----------------------------------------------------------------------------

// Standard attention (chapter 04's three kernels): e (2Nd + 4N^2 + 2Nd) bytes, for any N.
// Throws std::invalid_argument as check_traffic_case. Source: Dao et al. 2022, FlashAttention,
// section 2.2 (standard attention) and Theorem 2 (its Theta(Nd + N^2) HBM accesses).
inline std::uint64_t standard_attention_bytes(const TrafficCase& c) {
  check_traffic_case(c);
  const std::uint64_t N = c.seq_len, d = c.head_dim, e = c.bytes;
  return e * (2 * N * d + 4 * N * N + 2 * N * d);
}

// A closed form below assumes that its block (Br or Bc) divides seq_len: throws
// std::invalid_argument naming `who` and the walk that counts every seq_len when it does not, and
// as check_traffic_case.
inline void check_closed_form(const char* who, const TrafficCase& c, const char* block_name, std::int64_t block,
                              const char* walk) {
  check_traffic_case(c);
  if (c.seq_len % block != 0) {
    throw std::invalid_argument(fmt::format(
        "{}: seq_len {} is not a multiple of {} {}; the closed form assumes it is: {} counts every seq_len exactly",
        who, c.seq_len, block_name, block, walk));
  }
}

// FlashAttention-2 without L2 reuse: e (2Nd + 2N^2 d / Br) bytes. Assumes Br divides N (see the
// header comment for a short last block); throws std::invalid_argument when it does not, or as
// check_traffic_case. Source: Dao 2023, section 3.1 and Algorithm 1.
inline std::uint64_t fa2_bytes_closed_form(const TrafficCase& c) {
  check_closed_form("fa2_bytes_closed_form", c, "Br", c.Br, "walk_fa2");
  const std::uint64_t N = c.seq_len, d = c.head_dim, e = c.bytes, Br = c.Br;
  return e * (2 * N * d + 2 * N * N * d / Br);
}

// The floor: Q, K, V read once and O written once, 4eNd bytes, for any N. Throws
// std::invalid_argument as check_traffic_case. Source: Dao et al. 2022, section 3.2.
inline std::uint64_t floor_bytes(const TrafficCase& c) {
  check_traffic_case(c);
  const std::uint64_t N = c.seq_len, d = c.head_dim, e = c.bytes;
  return 4 * e * N * d;
}

// FlashAttention's order without L2 reuse, Tc = N / Bc key blocks (s = stat_bytes):
//   e (2Nd + Tc Nd + (Tc - 1) Nd + Tc Nd) + s (2N (Tc - 1) + 2N Tc)
//   K, V once; Q read Tc times; O read back Tc-1 times and written Tc times; m, l likewise.
// With Bc = Theta(M/d) the Q and O terms are Theta(N^2 d^2 / M): Dao et al. 2022, Theorem 2.
// Assumes Bc divides N; throws std::invalid_argument when it does not, or as check_traffic_case.
inline std::uint64_t fa1_bytes_closed_form(const TrafficCase& c) {
  check_closed_form("fa1_bytes_closed_form", c, "Bc", c.Bc, "walk_fa1");
  const std::uint64_t N = c.seq_len, d = c.head_dim, e = c.bytes, s = c.stat_bytes;
  const std::uint64_t Tc = N / c.Bc;
  return e * (2 * N * d + Tc * N * d + (Tc - 1) * N * d + Tc * N * d) + s * (2 * N * (Tc - 1) + 2 * N * Tc);
}

// ---- Tile walks ------------------------------------------------------------------------------

// Throws std::invalid_argument as check_traffic_case, or when the walk would visit more than
// kMaxTiles tiles (it would take too long).
inline void check_walk(const TrafficCase& c, const char* who) {
  check_traffic_case(c);
  const std::uint64_t N = c.seq_len;
  const std::uint64_t Tr = ceil_div(N, c.Br), Tc = ceil_div(N, c.Bc);
  if (Tr * Tc > static_cast<std::uint64_t>(kMaxTiles)) {
    throw std::invalid_argument(
        fmt::format("{}: seq_len {} in tiles of Br {} x Bc {} is {} x {} = {} tiles; the walk visits at most {}: "
                    "use larger blocks or a shorter sequence",
                    who, N, c.Br, c.Bc, Tr, Tc, Tr * Tc, kMaxTiles));
  }
}

// FlashAttention-2's order (the first walk at the top): query blocks outside, key blocks inside.
// Returns both counters; calls visit (when given) after each tile. Exact for every seq_len.
// Throws std::invalid_argument as check_walk. Source: Dao 2023, Algorithm 1: what each tile loads,
// plus the write of O_i, which the closed form counts.
inline Traffic walk_fa2(const TrafficCase& c, const TileVisitor& visit = {}) {
  check_walk(c, "walk_fa2");
  const std::uint64_t N = c.seq_len, d = c.head_dim, e = c.bytes, Br = c.Br, Bc = c.Bc;
  const std::uint64_t Tr = ceil_div(N, Br), Tc = ceil_div(N, Bc);
  Traffic t;
  std::int64_t step = 0;
  for (std::uint64_t i = 0; i < Tr; ++i) {                  // line 3
    const std::uint64_t rows = std::min(Br, N - i * Br);    // the last query block may be short
    for (std::uint64_t j = 0; j < Tc; ++j) {                // line 6
      const std::uint64_t cols = std::min(Bc, N - j * Bc);  // the last key block may be short
      if (j == 0) {                                         // line 4: Q_i, once per query block
        t.moved.q_read += e * rows * d;
        t.once.q_read += e * rows * d;
      }
      t.moved.k_read += e * cols * d;  // line 7: K_j, V_j, every tile
      t.moved.v_read += e * cols * d;
      if (i == 0) {  // later query blocks find them in L2
        t.once.k_read += e * cols * d;
        t.once.v_read += e * cols * d;
      }
      if (j == Tc - 1) {  // line 14: O_i, after its last tile
        t.moved.o_write += e * rows * d;
        t.once.o_write += e * rows * d;
      }
      if (visit) {
        visit(TileStep{step, static_cast<std::int64_t>(i), static_cast<std::int64_t>(j),
                       static_cast<std::int64_t>(rows), static_cast<std::int64_t>(cols), t});
      }
      ++step;
    }
  }
  return t;
}

// FlashAttention's order (the second walk at the top): key blocks outside, query blocks
// inside, the partial O_i, m_i, l_i sent through HBM between key blocks. Returns both counters;
// calls visit (when given) after each tile. Exact for every seq_len. Throws std::invalid_argument
// as check_walk. Source: Dao et al. 2022, Algorithm 1 and section 3.2.
inline Traffic walk_fa1(const TrafficCase& c, const TileVisitor& visit = {}) {
  check_walk(c, "walk_fa1");
  const std::uint64_t N = c.seq_len, d = c.head_dim, e = c.bytes, s = c.stat_bytes;
  const std::uint64_t Br = c.Br, Bc = c.Bc;
  const std::uint64_t Tr = ceil_div(N, Br), Tc = ceil_div(N, Bc);
  Traffic t;
  std::int64_t step = 0;
  for (std::uint64_t j = 0; j < Tc; ++j) {  // line 5
    const std::uint64_t cols = std::min(Bc, N - j * Bc);
    for (std::uint64_t i = 0; i < Tr; ++i) {  // line 7
      const std::uint64_t rows = std::min(Br, N - i * Br);
      if (i == 0) {  // line 6: K_j, V_j, once per key block
        t.moved.k_read += e * cols * d;
        t.moved.v_read += e * cols * d;
        t.once.k_read += e * cols * d;
        t.once.v_read += e * cols * d;
      }
      t.moved.q_read += e * rows * d;             // line 8: Q_i, every tile
      if (j == 0) t.once.q_read += e * rows * d;  // later key blocks find it in L2
      if (j > 0) {                                // line 8: last key block's partials
        t.moved.o_read += e * rows * d;
        t.moved.stats_read += 2 * s * rows;
      }
      t.moved.o_write += e * rows * d;  // lines 12-13: every tile
      t.moved.stats_write += 2 * s * rows;
      if (j == Tc - 1) {  // only the final values stay in HBM
        t.once.o_write += e * rows * d;
        t.once.stats_write += 2 * s * rows;
      }
      if (visit) {
        visit(TileStep{step, static_cast<std::int64_t>(i), static_cast<std::int64_t>(j),
                       static_cast<std::int64_t>(rows), static_cast<std::int64_t>(cols), t});
      }
      ++step;
    }
  }
  return t;
}

// ---- The loads and stores of this chapter's kernel -------------------------------------------

// One launch of flash_attention_2.cuh's kernel, as the kernel sees it: any seq_len_q and
// seq_len_k, the causal mask, batch and heads folded into batch_heads; float32 (4 bytes).
struct KernelCase {
  std::int64_t batch_heads = 1, seq_len_q = 256, seq_len_k = 256, head_dim = 64;
  std::int64_t Br = 64, Bc = 64;  // the tile
  bool causal = false;
};

// The global-memory bytes the kernel itself loads and stores, walked in its own order: per query
// block, Q_i (its real rows only: tail rows are zeros made on chip), then the key tiles it visits
// (all ceil(seq_len_k / Bc) of them, or with the causal mask only those its last real row can see)
// with their real rows of K and V (a short last tile's missing rows are zeros, not loads), then
// O_i and L_i (stats_write: 4 bytes per row). For seq_len_q == seq_len_k and no mask this is
// walk_fa2's `moved` counter times batch_heads, plus L, which the model leaves out; the
// memory profile of the kernel (common/simt/tools/profile.h) measures exactly these bytes.
// Throws std::invalid_argument for a size below 1 or past the traffic model's ranges.
// Source: flash_attention_2.cuh, lines 1, 3, 4 and 10 of its algorithm.
inline HbmBytes fa2_kernel_bytes(const KernelCase& c) {
  for (const auto& [name, value, max] :
       {std::tuple{"batch_heads", c.batch_heads, std::int64_t{65535}}, std::tuple{"seq_len_q", c.seq_len_q, kMaxSeqLen},
        std::tuple{"seq_len_k", c.seq_len_k, kMaxSeqLen}, std::tuple{"head_dim", c.head_dim, kMaxHeadDim},
        std::tuple{"Br", c.Br, kMaxBlock}, std::tuple{"Bc", c.Bc, kMaxBlock}}) {
    if (value < 1 || value > max) {
      throw std::invalid_argument(
          fmt::format("fa2_kernel_bytes: {} = {} is out of range: accepted 1 .. {}", name, value, max));
    }
  }
  const std::uint64_t Nq = c.seq_len_q, Nk = c.seq_len_k, d = c.head_dim, e = 4;
  const std::uint64_t Br = c.Br, Bc = c.Bc;
  HbmBytes b;
  for (std::uint64_t i0 = 0; i0 < Nq; i0 += Br) {
    const std::uint64_t rows = std::min(Br, Nq - i0);
    b.q_read += e * rows * d;
    // The causal mask (common/attention_shapes.h): the block's last row sees keys j < visible.
    const std::int64_t last_row = static_cast<std::int64_t>(i0 + rows) - 1;
    const std::int64_t shift = static_cast<std::int64_t>(Nk) - static_cast<std::int64_t>(Nq);
    const std::uint64_t visible =
        c.causal ? static_cast<std::uint64_t>(std::clamp<std::int64_t>(last_row + shift + 1, 0, c.seq_len_k)) : Nk;
    for (std::uint64_t j0 = 0; j0 < visible; j0 += Bc) {
      const std::uint64_t cols = std::min(Bc, Nk - j0);
      b.k_read += e * cols * d;
      b.v_read += e * cols * d;
    }
    b.o_write += e * rows * d;
    b.stats_write += 4 * rows;  // L_i
  }
  const std::uint64_t heads = c.batch_heads;
  for (std::uint64_t* field : {&b.q_read, &b.k_read, &b.v_read, &b.o_write, &b.stats_write}) *field *= heads;
  return b;
}

}  // namespace ch05
