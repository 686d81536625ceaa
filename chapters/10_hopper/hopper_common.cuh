// Chapter 10: what the bf16/fp16 kernel (hopper.cuh) and the FP8 kernel (hopper_fp8.cuh) share:
// the block's shape and barriers, the aligned shared memory, the online softmax of one tile in
// wgmma's accumulator layout, FA3 Algorithm 2's schedule of a consumer's tiles, the epilogue
// (O_i by TMA through shared memory, L_i), and the tensor maps. Read hopper.cuh first: its
// comment walks through the algorithm and the fragments that these pieces take apart.
//
// Source: Shah et al. 2024, FlashAttention-3 (arXiv:2407.08608), Algorithms 1 and 2, section 3.1;
// the PTX ISA sections named at each piece.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "chapters/10_hopper/hopper.h"
#include "common/simt/simt.h"

namespace ch10::SIMT_BACKEND {

inline constexpr int kStages = 2;       // the ring of K_j, V_j: tile j+1 lands while tile j is used
inline constexpr int kWarpgroup = 128;  // threads
inline constexpr int kConsumers = 2;    // consumer warpgroups, 64 query rows each
inline constexpr int kThreads = (1 + kConsumers) * kWarpgroup;  // the producer warpgroup, then the consumers
inline constexpr int kBoxColumns = 64;                          // elements of one 128-byte swizzled row
inline constexpr unsigned kSwizzleBytes = 128;                  // the row of a box, and the swizzle's span
inline constexpr unsigned kSwizzleRepeat = 1024;                // 8 rows of 128 bytes: the pattern's repeat
inline constexpr unsigned kFullMask = 0xffffffffu;
// setmaxnreg's budgets (FA3 section 3.1: 24 for the producer, 240 for two consumers): 24 x 128 +
// 240 x 256 = 64512 registers, within the SM's 64 Ki.
inline constexpr int kProducerRegisters = 24;
inline constexpr int kConsumerRegisters = 240;
// The named barriers of the ping-pong (0 is __syncthreads()'s): consumer warpgroup w waits on
// kTurn + w before its S = Q K^T, and hands the turn to the other one after issuing it.
inline constexpr int kTurn = 1;
// Consumer warpgroup w's 128 threads meet at kOReady + w (3 or 4) once their O_i is in shared
// memory, before one of them stores it by TMA.
inline constexpr int kOReady = kTurn + kConsumers;

// The dynamic shared memory moved on to the next 1024-byte boundary of the shared address space
// (a 128B-swizzled TMA box and its wgmma descriptor start at the pattern's repeat: PTX ISA, "Matrix
// Descriptor Format", base offset 0). On the CPU the base is one already; on a GPU the launch asks
// for 1024 bytes more.
__device__ __forceinline__ std::uint8_t* aligned_shared(std::uint8_t* base) {
  const std::uint32_t address = simt::shared_address(base);
  return base + (kSwizzleRepeat - address % kSwizzleRepeat) % kSwizzleRepeat;
}

// The block's place and walk (grid: (ceil(seq_len_q / Br), batch * heads)): its first query row i0
// and its head bh; and the causal mask's effect on the walk: row i sees keys j < visible(i)
// (fa::visible_keys, common/kernel_problem.h). The block's last real row sees the most keys: tiles from
// ceil(visible(last) / Bc) on are neither loaded nor computed (num_tiles). Tiles wholly below the
// block's first row's diagonal, and not past seq_len_k, need no mask (keys below unmasked_keys).
struct BlockWalk {
  int i0, bh, num_tiles, unmasked_keys;
};
template <int Br, int Bc>
__device__ __forceinline__ BlockWalk block_walk(int seq_len_q, int seq_len_k, bool causal) {
  const int i0 = static_cast<int>(blockIdx.x) * Br;
  const int last_row = (i0 + Br < seq_len_q ? i0 + Br : seq_len_q) - 1;
  return {i0, static_cast<int>(blockIdx.y), (fa::visible_keys(last_row, seq_len_q, seq_len_k, causal) + Bc - 1) / Bc,
          fa::visible_keys(i0, seq_len_q, seq_len_k, causal)};
}

// The block's mbarriers, initialised by thread 0 and made visible to the async proxy (TMA's
// complete_tx) and to the other threads (PTX ISA, "mbarrier.init", fence.mbarrier_init), then
// __syncthreads(). q_full and each stage's full: one arrival (the producer's arrive_expect_tx; TMA
// completes the bytes); empty: every consumer thread, done with the stage; more[s] (the FP8
// kernel's vt_full), when given: more_count arrivals.
__device__ __forceinline__ void init_barriers(int tid, std::uint64_t& q_full, std::uint64_t (&full)[kStages],
                                              std::uint64_t (&empty)[kStages], std::uint64_t* more = nullptr,
                                              unsigned more_count = 0) {
  if (tid == 0) {
    simt::mbarrier_init(&q_full, 1);
    for (int s = 0; s < kStages; ++s) {
      simt::mbarrier_init(&full[s], 1);
      simt::mbarrier_init(&empty[s], kConsumers * kWarpgroup);
      if (more != nullptr) simt::mbarrier_init(&more[s], more_count);
    }
    simt::fence_mbarrier_init();
  }
  __syncthreads();
}

// Two floats to one 32-bit register of two 16-bit elements (bf16 or fp16), the lower element in
// bits 0-15, rounded to nearest even.
template <class Element>
__device__ __forceinline__ std::uint32_t pack_pair(float lo, float hi) {
  if constexpr (std::is_same_v<Element, simt::bf16>) return simt::pack_bf16x2(lo, hi);
  return simt::pack_f16x2(lo, hi);
}

// Line 9 (FA2 Algorithm 1, chapter 06) on one tile, in place: S holds this thread's Bc / 2 scores
// of the tile, waited for, in wgmma's accumulator layout (hopper.cuh, "Who holds what"): element i
// is row h = (i / 2) % 2 of the thread's two, key key0 + 8 (i / 4) + 2t + i % 2. c turns a score
// into log2 units (scale log2(e); the FP8 kernel folds its dequantisation scales in). mask: some
// key of the tile is hidden from some row (a tail tile, or one on the diagonal); visible[h] is the
// number of keys row h sees (fa::visible_keys; keys past seq_len_k are TMA's zeros, which the mask
// hides too). m: the running max (log2 units); l: this thread's part of each row's sum.
// Out: m_new = max(m, rowmax(s)), m_safe (0 while a row has seen only masked keys),
// rescale = exp2(m - m_safe), S replaced by P = exp2(s - m_safe) (float32, unrounded), and
// l = l rescale + rowsum(P). The quad's four parts of the max combine by two xor-shuffles.
template <int Bc>
__device__ __forceinline__ void online_softmax(float (&S)[Bc / 2], float c, bool mask, int key0,
                                               const int (&visible)[2], int t, const float (&m)[2], float (&l)[2],
                                               float (&m_new)[2], float (&m_safe)[2], float (&rescale)[2]) {
  SIMT_UNROLL
  for (int i = 0; i < Bc / 2; ++i) S[i] *= c;
  if (mask) {
    SIMT_UNROLL
    for (int i = 0; i < Bc / 2; ++i) {
      if (key0 + 8 * (i / 4) + 2 * t + i % 2 >= visible[(i / 2) % 2]) S[i] = -INFINITY;
    }
  }
  // The new max of each row: this thread's columns, then its quad (lanes ^1, ^2).
  SIMT_UNROLL
  for (int h = 0; h < 2; ++h) {
    float tile_max = -INFINITY;
    SIMT_UNROLL
    for (int i = 0; i < Bc / 2; ++i) {
      if ((i / 2) % 2 == h) tile_max = fmaxf(tile_max, S[i]);
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(kFullMask, tile_max, 1));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(kFullMask, tile_max, 2));
    m_new[h] = fmaxf(m[h], tile_max);
    // While a row has seen only masked keys m_new is -inf, and -inf - (-inf) would be NaN;
    // subtracting 0 instead makes every term exp2(-inf) = 0, so l and acc stay 0 (chapter 05).
    m_safe[h] = (m_new[h] == -INFINITY) ? 0.0f : m_new[h];
    rescale[h] = simt::ex2_approx_ftz(m[h] - m_safe[h]);  // exp(m_old - m_new); 0 on the first seen tile
  }
  // P = exp(S - m_new) in place of S, and this thread's part of each row's sum.
  float tile_sum[2] = {0.0f, 0.0f};
  SIMT_UNROLL
  for (int i = 0; i < Bc / 2; ++i) {
    S[i] = simt::ex2_approx_ftz(S[i] - m_safe[(i / 2) % 2]);
    tile_sum[(i / 2) % 2] += S[i];
  }
  l[0] = l[0] * rescale[0] + tile_sum[0];
  l[1] = l[1] * rescale[1] + tile_sum[1];
}

// Line 8 of tile jj with the ping-pong around it (FA3 section 3.1): wait until stage jj % kStages
// is full (K_jj, V_jj have landed) and for this warpgroup's turn (named barrier kTurn + wg, both
// warpgroups' 256 threads: PTX ISA, "bar, barrier"); wgmma_fence; the wgmmas of issue(stage); one
// commit group, not waited for; then hand the turn to the other warpgroup. Warpgroup 1 hands back
// one turn fewer than it is given (none after its last tile), so that every use of each barrier is
// complete when the block ends (warpgroup 1 gives warpgroup 0 its first turn before its tiles).
template <class Issue>
__device__ __forceinline__ void scores_in_turn(int jj, int num_tiles, int wg, std::uint64_t (&full)[kStages],
                                               Issue issue) {
  const int stage = jj % kStages;
  simt::mbarrier_wait_parity(&full[stage], (jj / kStages) & 1);
  simt::named_barrier_sync(kTurn + wg, kConsumers * kWarpgroup);
  simt::wgmma_fence();
  issue(stage);
  simt::wgmma_commit_group();
  if (wg == 0 || jj + 1 < num_tiles) simt::named_barrier_arrive(kTurn + 1 - wg, kConsumers * kWarpgroup);
}

// Intra-warpgroup overlap (FA3 Algorithm 2), the schedule of one consumer warpgroup over its
// num_tiles key tiles: tile 0's S and softmax first; then in each step the next tile's S = Q K^T is
// issued before this tile's P V_j, the step waits for the S alone (wgmma_wait_group<1>) and runs
// the next tile's softmax while P V_j is still in flight. At the top of step j: P of tile j is
// packed, acc is scaled to m, and no wgmma is in flight. The kernel gives the steps:
//   issue_scores(jj)  S = Q_i K_jj^T into S, one commit group (line 8)
//   softmax(jj)       line 9 on S (online_softmax)
//   pack_P()          P from S into the A fragments of the next P V
//   issue_pv(jj)      acc += P V_jj, one commit group (line 10)
//   advance(jj)       after tile jj's softmax: acc rescaled for it (jj > 0), m = m_new
// and every thread arrives on empty[stage] once tile j's P V has landed (the stage is free).
// The last tile's step is written out after the loop (it has no next S), so that every step of
// the loop issues and waits for the same groups: with an `if` around the next tile's wgmma and
// softmax, ptxas (CUDA 13.0) can no longer tell which registers each wait covers and serialises
// every wgmma of the kernel (C7515, "non wgmma instructions defining accumulator registers of a
// wgmma between start and end of the pipeline stage"); docs/10, "The overlap and ptxas".
template <int NS, int NACC, class IssueScores, class Softmax, class PackP, class IssuePV, class Advance>
__device__ __forceinline__ void overlapped_tiles(int num_tiles, float (&S)[NS], float (&acc)[NACC],
                                                 std::uint64_t (&empty)[kStages], IssueScores issue_scores,
                                                 Softmax softmax, PackP pack_P, IssuePV issue_pv, Advance advance) {
  if (num_tiles > 0) {
    issue_scores(0);
    simt::wgmma_wait_group<0>();
    simt::wgmma_fence_operand(S);
    softmax(0);
    pack_P();
    advance(0);
  }
  int j = 0;
  for (; j + 1 < num_tiles; ++j) {  // line 6, every tile but the last
    issue_scores(j + 1);            // group 1: S of tile j+1 (P of tile j is packed already)
    issue_pv(j);                    // group 2: line 10, acc += P V_j
    simt::wgmma_wait_group<1>();    // S of tile j+1 has landed; P V_j may still run
    simt::wgmma_fence_operand(S);
    softmax(j + 1);               // line 9 of tile j+1, under P V_j
    simt::wgmma_wait_group<0>();  // P V_j has landed: acc and P's registers are free again
    simt::wgmma_fence_operand(acc);
    simt::mbarrier_arrive(&empty[j % kStages]);  // done with the stage: the producer may refill it
    pack_P();
    advance(j + 1);
  }
  if (num_tiles > 0) {  // line 6, the last tile: its P V alone
    issue_pv(j);
    simt::wgmma_wait_group<0>();
    simt::wgmma_fence_operand(acc);
    simt::mbarrier_arrive(&empty[j % kStages]);
  }
}

// Lines 12-15 for this thread's two rows (row, row + 8 of the head; row_in_box, row_in_box + 8 of
// its warpgroup's 64), once acc (wgmma's accumulator layout, HEAD_DIM / 2 floats) holds the sum
// of P V and m, l (this thread's part) the row state:
//   12. l summed over the quad; O = acc o_scale / l (0 for a row that saw no key: l = 0); o_scale
//       is 1 for the bf16/fp16 kernel (the FP8 kernel's undoes its scales of V and P)
//   13. L = m ln(2) + ln(l) (m in log2 units), -inf for such a row
//   14. O through shared memory: each pair (columns 8 (i / 4) + 2t, +1, rounded to Element) goes
//       to its row and column of a box [64][64] at Ow (box h at Ow + h box_bytes, rows of 128
//       bytes), swizzled as a 128B-swizzled TMA box: the 8 rows g of a warp's store fall in 8
//       different 16-byte chunks (chunk XOR row % 8), so a warp's 32 stores hit 32 banks;
//       unswizzled, rows 128 bytes apart would share 4 banks, 8 stores to a bank. Rows past
//       seq_len_q are written here too: the TMA store drops them. Then each thread's
//       fence.proxy.async (its stores seen by the async proxy: PTX ISA, "Proxies"), the
//       warpgroup's named barrier kOReady + wg (all 128 have stored and fenced), and thread
//       ct = 0 stores each box by TMA at (h 64, row0_of_warpgroup, bh) of map_o (3D: a box stops
//       at head bh's last row) and waits for its reads before the block's shared memory goes.
//   15. L (float32, plain stores) by the first thread of each quad, rows below seq_len_q.
template <class Element, int HEAD_DIM>
__device__ __forceinline__ void write_O_and_L(const float (&acc)[HEAD_DIM / 2], float (&l)[2], const float (&m)[2],
                                              float o_scale, std::uint8_t* Ow, unsigned box_bytes, int row_in_box,
                                              int t, int ct, int wg, const simt::TensorMap* map_o, int warpgroup_row0,
                                              int bh, float* L, int row, int seq_len_q) {
  float inv_l[2], L_row[2];
  SIMT_UNROLL
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(kFullMask, l[h], 1);
    l[h] += __shfl_xor_sync(kFullMask, l[h], 2);
    inv_l[h] = (l[h] == 0.0f) ? 0.0f : o_scale / l[h];
    L_row[h] = (l[h] == 0.0f) ? -INFINITY : m[h] * 0.693147180559945309f + logf(l[h]);  // ln 2
  }
  SIMT_UNROLL
  for (int i = 0; i < HEAD_DIM / 2; i += 2) {
    const int h = (i / 2) % 2;
    const int column = 8 * (i / 4) + 2 * t;
    const unsigned in_box = (row_in_box + 8 * h) * kSwizzleBytes + (column % kBoxColumns) * 2u;
    std::uint8_t* const at =
        Ow + (column / kBoxColumns) * box_bytes + simt::swizzled_address(in_box, simt::Swizzle::b128);
    simt::store_word(at, pack_pair<Element>(acc[i] * inv_l[h], acc[i + 1] * inv_l[h]));
  }
  simt::fence_proxy_async_shared_cta();
  simt::named_barrier_sync(kOReady + wg, kWarpgroup);
  if (ct == 0) {
    SIMT_UNROLL
    for (int h = 0; h < HEAD_DIM / kBoxColumns; ++h) {
      simt::cp_async_bulk_tensor_3d_shared_to_global(map_o, h * kBoxColumns, warpgroup_row0, bh, Ow + h * box_bytes);
    }
    simt::cp_async_bulk_commit_group();
    simt::cp_async_bulk_wait_group_read<0>();
  }
  if (t == 0) {
    SIMT_UNROLL
    for (int h = 0; h < 2; ++h) {
      if (row + 8 * h < seq_len_q) L[static_cast<std::size_t>(bh) * seq_len_q + row + 8 * h] = L_row[h];
    }
  }
}

// The 3D tensor map of one of Q, K, V, O on the device: [batch * heads][seq_len][head_dim] of
// Element, boxes of [rows][box_columns]; by default 64 columns with the 128-byte swizzle (a bf16
// or fp16 row of 128 bytes: the layout the wgmma descriptors read, and the consumers write O_i in).
// Throws what simt::make_tensor_map throws.
template <class Element>
simt::TensorMap tensor_map(const Element* x, int batch_heads, int seq_len, int head_dim, int rows,
                           int box_columns = kBoxColumns, simt::Swizzle swizzle = simt::Swizzle::b128) {
  const auto d = static_cast<std::uint64_t>(head_dim), n = static_cast<std::uint64_t>(seq_len);
  return simt::make_tensor_map(
      x, {d, n, static_cast<std::uint64_t>(batch_heads)}, {d * sizeof(Element), n * d * sizeof(Element)},
      {static_cast<std::uint32_t>(box_columns), static_cast<std::uint32_t>(rows), 1u}, swizzle);
}

}  // namespace ch10::SIMT_BACKEND
