// Chapter 10's traffic through TMA and wgmma, walked from the kernel's own loop bounds
// (hopper.cuh), beside what simt's memory profile counts (common/simt/tools/profile.h, --profile).
//
// A TMA copy moves a whole box: the tensor maps' boxes are 64 columns (one 128-byte swizzled row)
// by Br rows for Q_i, Bc rows for K_j and V_j, and Br / 2 rows (a consumer warpgroup's share) for
// O_i, and a box that reaches past seq_len is still counted whole by the mbarrier's expect_tx (its
// rows past the end arrive as zeros, read from nowhere). So the bytes a block loads are
//   Q_i's boxes once + for each key tile j it visits, K_j's and V_j's boxes,
// with the tiles it visits those of the kernel's loop: ceil(visible(last row) / Bc), the causal
// mask's skipped tiles left out. Each consumer warpgroup stores its rows of O_i as HEAD_DIM / 64
// boxes, and the store writes only the rows inside the tensor.
// wgmma reads its operands from shared memory: per key tile, each consumer warpgroup issues
// HEAD_DIM / 16 wgmma for S = Q_i K_j^T (A: 64 x 16 of Q_i, B: Bc x 16 of K_j) and Bc / 16 for
// O += P V_j (A = P in registers, B: HEAD_DIM x 16 of V_j); elements are 2 bytes (bf16, fp16).
// Source: hopper.cuh (the producer's loop, issue_scores, issue_pv, line 14); PTX ISA,
// "cp.async.bulk.tensor" (bytes counted per box) and "wgmma.mma_async" (the operands' shapes).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "common/kernel_problem.h"
#include "common/simt/tools/profile.h"

namespace ch10 {

// One run's traffic, in bytes (and copies, instructions), summed over every block and head.
struct TmaTraffic {
  std::uint64_t load_copies = 0;         // TMA copies into shared memory: Q_i's boxes, K_j's, V_j's
  std::uint64_t load_box_bytes = 0;      // their whole boxes (what the mbarriers expect)
  std::uint64_t load_tensor_bytes = 0;   // of those, inside Q, K and V (read from global memory)
  std::uint64_t store_copies = 0;        // TMA stores of O_i's boxes
  std::uint64_t store_box_bytes = 0;     // their whole boxes (read from shared memory)
  std::uint64_t store_tensor_bytes = 0;  // of those, inside O (written to global memory)
  std::uint64_t wgmma = 0;               // wgmma instructions, one per warpgroup
  std::uint64_t wgmma_bytes = 0;         // their operands read from shared memory
};

// The walk, block by block, for the problem as the kernel sees it (check_problem): its tile (Br
// query rows, Bc keys), head_dim a multiple of 64, the causal mask. Copies, instructions and bytes,
// as TmaTraffic says; the loops are hopper.cuh's (the source above). Never throws.
inline TmaTraffic tma_traffic(const fa::DeviceProblem& p) {
  constexpr std::uint64_t kElement = 2, kBoxColumns = 64, kConsumerRows = 64;
  const int Br = p.tile.Br, Bc = p.tile.Bc;
  const std::uint64_t halves = static_cast<std::uint64_t>(p.head_dim) / kBoxColumns;
  const std::uint64_t row_bytes = kBoxColumns * kElement;  // one row of one box
  const auto rows_inside = [](int first, int rows, int seq_len) {
    return static_cast<std::uint64_t>(std::clamp(seq_len - first, 0, rows));
  };
  TmaTraffic t;
  for (int i0 = 0; i0 < p.seq_len_q; i0 += Br) {
    // The kernel's own bounds (hopper.cuh): the block's last real row sees the most keys.
    const int last_row = std::min(i0 + Br, p.seq_len_q) - 1;
    const int tiles = (fa::visible_keys(last_row, p.seq_len_q, p.seq_len_k, p.causal) + Bc - 1) / Bc;
    t.load_copies += halves;  // line 4: Q_i
    t.load_box_bytes += halves * static_cast<std::uint64_t>(Br) * row_bytes;
    t.load_tensor_bytes += halves * rows_inside(i0, Br, p.seq_len_q) * row_bytes;
    for (int j = 0; j < tiles; ++j) {  // line 7: K_j and V_j
      t.load_copies += 2 * halves;
      t.load_box_bytes += 2 * halves * static_cast<std::uint64_t>(Bc) * row_bytes;
      t.load_tensor_bytes += 2 * halves * rows_inside(j * Bc, Bc, p.seq_len_k) * row_bytes;
    }
    for (int wg = 0; wg < Br / static_cast<int>(kConsumerRows); ++wg) {  // line 14: O_i, per consumer
      const int first = i0 + wg * static_cast<int>(kConsumerRows);
      t.store_copies += halves;
      t.store_box_bytes += halves * kConsumerRows * row_bytes;
      t.store_tensor_bytes += halves * rows_inside(first, kConsumerRows, p.seq_len_q) * row_bytes;
      // Lines 8 and 10, per tile: S = Q K^T (A and B in shared memory), then P V (B alone).
      const auto d = static_cast<std::uint64_t>(p.head_dim), bc = static_cast<std::uint64_t>(Bc);
      t.wgmma += static_cast<std::uint64_t>(tiles) * (d / 16 + bc / 16);
      t.wgmma_bytes +=
          static_cast<std::uint64_t>(tiles) * 16 * kElement * ((d / 16) * (kConsumerRows + bc) + (bc / 16) * d);
    }
  }
  const auto heads = static_cast<std::uint64_t>(p.batch_heads);
  for (std::uint64_t* x : {&t.load_copies, &t.load_box_bytes, &t.load_tensor_bytes, &t.store_copies, &t.store_box_bytes,
                           &t.store_tensor_bytes, &t.wgmma, &t.wgmma_bytes}) {
    *x *= heads;
  }
  return t;
}

// The profile's counts of the Hopper kernel among `kernels` beside the model's, as the demo prints
// them, ending with "-> the kernel moves exactly the bytes the model counts" where every figure
// agrees; an empty string where the kernel is not among them (no profile was recorded).
std::string format_tma_beside_model(const std::vector<simt::profile::KernelProfile>& kernels, const TmaTraffic& model);

}  // namespace ch10
