// Chapter 07's second idea: what the backward pass moves between HBM and the chip, and how much
// work it does, for each of the two ways to produce dQ. Built on chapter 05's model
// (chapters/05_flash_attention_2/lab/traffic_model.h: TrafficCase, check_walk, ceil_div), with the same
// two counters: `moved` (no L2 reuse: every load and store reaches HBM) and `once` (every re-read an
// L2 hit: each value crosses once).
//
// With N = seq_len (queries and keys), d = head_dim, e bytes per value, s bytes per statistic (L, D),
// Tr = N / Br query blocks and Tc = N / Bc key blocks (blocks that divide N):
//
//   atomic dQ          preprocess  read O, dO; write D; write dQ = 0      e 3Nd + s N
//                      dK, dV      read K, V once; per tile Q_i, dO_i,    e (4Nd + 2Nd Tc) + s 2N Tc
//                                  L_i, D_i; write dK, dV once
//                      line 15     read and write dQ_i per tile (the      e 2Nd Tc
//                                  atomics' read-add-write)
//                      in all      e (7Nd + 4 N^2 d / Bc) + s (N + 2 N^2 / Bc)
//   deterministic dQ   preprocess  read O, dO; write D                    e 2Nd + s N
//                      dK, dV      as above, without line 15              e (4Nd + 2Nd Tc) + s 2N Tc
//                      dq kernel   read Q, dO, L, D once; per tile K_j,   e (3Nd + 2Nd Tr) + s 2N
//                                  V_j; write dQ once
//                      in all      e (9Nd + 2 N^2 d (1/Bc + 1/Br)) + s (3N + 2 N^2 / Bc)
//   the floor (`once`) read Q, K, V, O, dO, L once; write D, dQ, dK, dV once (D's reads, and
//                      dO's second one, are L2 hits), for both methods
//
// With Br = Bc the two quadratic terms are equal: the atomic method reads and writes dQ once per key
// block, the deterministic one reads K and V once per query block instead. Where they differ is the
// work (backward_flops): the dq kernel computes S and dP a second time.
//
// The walks, in the kernels' order (backward.cuh), skip the tiles a causal mask hides entirely, as
// the kernels do, and call a visitor for each tile they visit: the figure of docs/07-backward.md
// (figures/backward_tiles_figure.cpp) draws which tiles one thread block touches from it.
//   walk_dk_dv (lines 5-18):  for j = 0 .. Tc-1 { load K_j, V_j; for visible i { load Q_i, dO_i,
//                             L_i, D_i; [atomic: read + write dQ_i] }; write dK_j, dV_j }
//   walk_dq (lines D1-D6):    for i = 0 .. Tr-1 { load Q_i, dO_i, L_i, D_i; for visible j { load K_j,
//                             V_j }; write dQ_i }
// Causal here means seq_len_q = seq_len_k = N (the model is for self-attention): tile (i, j) is
// visited when its last query row sees its first key, (i + 1) Br - 1 >= j Bc.
//
// Source: Dao 2023, FlashAttention-2, Algorithm 2 and section 3.1.2; Dao et al. 2022, FlashAttention,
// Theorem 5 (the backward pass's IO complexity, Theta(N^2 d^2 / M), as the forward's).
// Run the demo: build/default/bin/ch07_backward (it prints the model for a self-attention shape)
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>

#include "chapters/05_flash_attention_2/lab/traffic_model.h"

namespace ch07 {

using ch05::TrafficCase;

// Bytes moved between HBM and the chip by the backward pass, by tensor and direction.
struct BackwardBytes {
  std::uint64_t q_read = 0, k_read = 0, v_read = 0, o_read = 0, do_read = 0;
  std::uint64_t stats_read = 0;  // L and D
  std::uint64_t d_write = 0;     // D, by the preprocessing
  std::uint64_t dq_read = 0;     // the atomics' reads of dQ (atomic method)
  std::uint64_t dq_write = 0;    // dQ = 0, the atomics' writes, or the dq kernel's one write
  std::uint64_t dk_dv_write = 0;

  std::uint64_t total() const {
    return q_read + k_read + v_read + o_read + do_read + stats_read + d_write + dq_read + dq_write + dk_dv_write;
  }
  bool operator==(const BackwardBytes&) const = default;
};

struct BackwardTraffic {
  BackwardBytes moved;  // no L2 reuse
  BackwardBytes once;   // every value crosses once
};

enum class Kernel { dk_dv, dq };

// One tile as a walk visits it.
struct BackwardTile {
  Kernel kernel = Kernel::dk_dv;
  std::int64_t step = 0;  // 0, 1, ... in the walk's order
  std::int64_t i = 0;     // query block
  std::int64_t j = 0;     // key block
};
using BackwardTileVisitor = std::function<void(const BackwardTile&)>;

// True when the causal mask leaves some entry of tile (i, j) visible (self-attention, N = N).
inline bool tile_visible(const TrafficCase& c, std::uint64_t i, std::uint64_t j, bool causal) {
  const std::uint64_t N = c.seq_len, Br = c.Br, Bc = c.Bc;
  const std::uint64_t last_row = std::min((i + 1) * Br, N) - 1;
  return !causal || last_row >= j * Bc;
}

// Lines 3-4: read O and dO, write D (and dQ = 0 for the atomic method).
inline void add_preprocess(BackwardTraffic& t, const TrafficCase& c, bool atomic) {
  const std::uint64_t N = c.seq_len, d = c.head_dim, e = c.bytes, s = c.stat_bytes;
  for (BackwardBytes* b : {&t.moved, &t.once}) {
    b->o_read += e * N * d;
    b->do_read += e * N * d;
    b->d_write += s * N;
  }
  if (atomic) t.moved.dq_write += e * N * d;  // with L2 reuse the zeros never reach HBM
}

// Lines 5-18 in the kernel's order; with atomic, line 15's read and write of dQ_i per tile.
// Throws std::invalid_argument as ch05::check_walk.
inline void walk_dk_dv(BackwardTraffic& t, const TrafficCase& c, bool causal, bool atomic,
                       const BackwardTileVisitor& visit = {}) {
  ch05::check_walk(c, "walk_dk_dv");
  const std::uint64_t N = c.seq_len, d = c.head_dim, e = c.bytes, s = c.stat_bytes;
  const std::uint64_t Tr = ch05::ceil_div(N, c.Br), Tc = ch05::ceil_div(N, c.Bc);
  std::int64_t step = 0;
  for (std::uint64_t j = 0; j < Tc; ++j) {  // line 5
    const std::uint64_t cols = std::min<std::uint64_t>(c.Bc, N - j * c.Bc);
    t.moved.k_read += e * cols * d;  // line 6
    t.moved.v_read += e * cols * d;
    t.once.k_read += e * cols * d;
    t.once.v_read += e * cols * d;
    for (std::uint64_t i = 0; i < Tr; ++i) {  // line 8
      if (!tile_visible(c, i, j, causal)) continue;
      const std::uint64_t rows = std::min<std::uint64_t>(c.Br, N - i * c.Br);
      t.moved.q_read += e * rows * d;  // line 9
      t.moved.do_read += e * rows * d;
      t.moved.stats_read += 2 * s * rows;
      if (atomic) {  // line 15
        t.moved.dq_read += e * rows * d;
        t.moved.dq_write += e * rows * d;
      }
      if (visit) visit(BackwardTile{Kernel::dk_dv, step, static_cast<std::int64_t>(i), static_cast<std::int64_t>(j)});
      ++step;
    }
    t.moved.dk_dv_write += 2 * e * cols * d;  // line 18
    t.once.dk_dv_write += 2 * e * cols * d;
  }
  // With L2 reuse: Q and L cross once; dO (read by the preprocessing) and D (just written by it)
  // are L2 hits; dQ is written once (its atomics meet in L2).
  t.once.q_read += e * N * d;
  t.once.stats_read += s * N;
  if (atomic) t.once.dq_write += e * N * d;
}

// Lines D1-D6 in the kernel's order. Throws std::invalid_argument as ch05::check_walk.
inline void walk_dq(BackwardTraffic& t, const TrafficCase& c, bool causal, const BackwardTileVisitor& visit = {}) {
  ch05::check_walk(c, "walk_dq");
  const std::uint64_t N = c.seq_len, d = c.head_dim, e = c.bytes, s = c.stat_bytes;
  const std::uint64_t Tr = ch05::ceil_div(N, c.Br), Tc = ch05::ceil_div(N, c.Bc);
  std::int64_t step = 0;
  for (std::uint64_t i = 0; i < Tr; ++i) {  // line D1
    const std::uint64_t rows = std::min<std::uint64_t>(c.Br, N - i * c.Br);
    t.moved.q_read += e * rows * d;   // line D2 (with L2 reuse: hits,
    t.moved.do_read += e * rows * d;  // walk_dk_dv read them first)
    t.moved.stats_read += 2 * s * rows;
    for (std::uint64_t j = 0; j < Tc; ++j) {  // line D3
      if (!tile_visible(c, i, j, causal)) continue;
      const std::uint64_t cols = std::min<std::uint64_t>(c.Bc, N - j * c.Bc);
      t.moved.k_read += e * cols * d;  // line D4
      t.moved.v_read += e * cols * d;
      if (visit) visit(BackwardTile{Kernel::dq, step, static_cast<std::int64_t>(i), static_cast<std::int64_t>(j)});
      ++step;
    }
    t.moved.dq_write += e * rows * d;  // line D6
    t.once.dq_write += e * rows * d;
  }
  // With L2 reuse, only dQ's one write reaches HBM: everything read here was read by walk_dk_dv.
}

// The whole backward pass for one head: preprocessing, the dK, dV kernel and, for the deterministic
// method, the dq kernel. Throws std::invalid_argument as ch05::check_walk.
inline BackwardTraffic walk_backward(const TrafficCase& c, bool causal, bool deterministic,
                                     const BackwardTileVisitor& visit = {}) {
  BackwardTraffic t;
  add_preprocess(t, c, !deterministic);
  walk_dk_dv(t, c, causal, !deterministic, visit);
  if (deterministic) walk_dq(t, c, causal, visit);
  return t;
}

// The closed forms of the header comment (moved, no L2 reuse, non-causal). Throws
// std::invalid_argument when Br or Bc does not divide seq_len (walk_backward counts every seq_len
// exactly), or as ch05::check_traffic_case.
inline std::uint64_t backward_bytes_closed_form(const TrafficCase& c, bool deterministic) {
  ch05::check_traffic_case(c);
  if (c.seq_len % c.Br != 0 || c.seq_len % c.Bc != 0) {
    throw std::invalid_argument(
        fmt::format("backward_bytes_closed_form: seq_len {} is not a multiple of Br {} and Bc {}; the closed form "
                    "assumes it is: walk_backward counts every seq_len exactly",
                    c.seq_len, c.Br, c.Bc));
  }
  const std::uint64_t N = c.seq_len, d = c.head_dim, e = c.bytes, s = c.stat_bytes;
  const std::uint64_t Tr = N / c.Br, Tc = N / c.Bc;
  if (!deterministic) return e * (7 * N * d + 4 * N * d * Tc) + s * (N + 2 * N * Tc);
  return e * (9 * N * d + 2 * N * d * (Tc + Tr)) + s * (3 * N + 2 * N * Tc);
}

// Floating-point operations of the backward pass for one head, counting a multiply-add as 2 and
// only the matrix products (Br x Bc x d each): S, dP, dV, dK and dQ, 5 products of 2 N^2 d, for the
// atomic method; the deterministic one computes S and dP again in the dq kernel, 7 products. Causal:
// the visited tiles only (walk order). Throws std::invalid_argument as ch05::check_walk.
inline double backward_flops(const TrafficCase& c, bool causal, bool deterministic) {
  std::uint64_t entries = 0;  // visited tile entries (rows x cols) of one kernel's walk
  BackwardTraffic unused;
  const std::uint64_t N = c.seq_len;
  walk_dk_dv(unused, c, causal, false, [&](const BackwardTile& t) {
    const std::uint64_t rows = std::min<std::uint64_t>(c.Br, N - t.i * c.Br);
    const std::uint64_t cols = std::min<std::uint64_t>(c.Bc, N - t.j * c.Bc);
    entries += rows * cols;
  });
  const double per_product = 2.0 * static_cast<double>(entries) * static_cast<double>(c.head_dim);
  return per_product * (deterministic ? 7.0 : 5.0);
}

}  // namespace ch07
