// Chapter 10 in FP8: FlashAttention-3's forward with Q, K, V and P in e4m3 (FA3 section 3.3).
//
// Before the attention kernel, three small kernels prepare the inputs on the device (each written
// once, for the CPU through simt and for the GPU):
//   rotate_kernel     (--hadamard) each row of Q and of K times random signs D, then the fast
//                     Walsh-Hadamard transform H along head_dim, over sqrt(head_dim): x D H / sqrt(d).
//                     M = D H / sqrt(d) is orthogonal, so (Q M)(K M)^T = Q K^T, while an outlier
//                     of a row is spread over all of its d entries ("incoherent processing"). One
//                     thread a row, the lab's loops (lab/fp8_error.cpp, hadamard_rows), so the two
//                     agree bit for bit.
//   amax_kernel       the largest |x| of each tile of kQuantRows = 64 rows of one head (a block:
//                     the 64 rows of Q a consumer warpgroup owns, a K or V tile of Bc = 64 keys).
//   quantise_kernel   scale = amax / 448 (1 for a tile of zeros) of the tile, or of the head's whole
//                     matrix in tensor mode (every tile then holds it: the attention kernel has one
//                     code path); codes = e4m3(x / scale) by cvt.rn.satfinite, two at a time.
//
// The attention kernel is hopper.cuh's (read it first): the producer warpgroup, two consumer
// warpgroups in ping-pong, the 2-stage TMA ring, FA3 Algorithm 2's overlap (hopper_common.cuh). What
// changes:
//   - S = Q_i K_j^T by wgmma .m64nNk32.e4m3 from shared memory. A k32 step is 32 codes, 32 bytes of
//     a row: the byte step of bf16's k16. A row of Q or K is head_dim bytes, one TMA box [rows]
//     [head_dim] swizzled in spans of head_dim bytes (64B for head_dim 64, 128B for 128), so SBO =
//     8 rows of head_dim bytes.
//   - V transposed in shared memory. FP8 wgmma takes both operands K-major only (the PTX ISA has
//     no transpose for .e4m3: "the transpose operation is only supported for the .f16/.bf16
//     types"), and for O += P V the reduction runs over the keys: B must be V^T, each head_dim
//     column's Bc keys contiguous. V_j arrives by TMA as [Bc keys][head_dim] (as it lies in memory);
//     warps 1-3 of the producer warpgroup (thread 0 issues the TMA copies) write it into Vt
//     [head_dim][Bc] of the same stage with ordinary shared loads and stores, fence.proxy.async
//     (generic-proxy stores seen by wgmma, which reads through the async proxy), and arrive on the
//     stage's vt_full mbarrier, which the consumers wait for before P V_j. The stage's empty
//     barrier covers Vt too: the transposers wait for it, as the TMA does, before rewriting Vt.
//   - P from registers, with the keys relabelled. The accumulator gives thread (g, t) columns
//     8n + 2t, 8n + 2t + 1 of its rows g and g + 8; the k32 A fragment wants, in the same two rows,
//     bytes A[row][4t + b] and A[row][16 + 4t + b], b = 0..3 (PTX ISA, "Register Fragments",
//     .m64nNk32 A). No value has to leave its thread: since O += P V sums over the keys, any order
//     of the keys gives the same sum, as long as P's columns and V^T's columns follow the same
//     order. Each thread packs its own values as they are: within each 16 keys, A's column 4t + b
//     holds key
//       pi(4t + b) = 2t + (b % 2) + 8 (b / 2)      (keys 2t, 2t+1, 8+2t, 9+2t),
//     a permutation of 0..15 (the quad's four t take sixteen different keys), and the transpose
//     writes V_j's key pi(k') into Vt's column k'. The transpose happens anyway, so the relabelling
//     costs nothing. FA3 relabels the same way: its permute_regs_A_to_C reorders the codes inside
//     each thread after the cast (byte permutes, no shuffle); pack_P converts them in that order.
//   - The scales, each folded where it costs one multiply: S_true = S q_scale(i) k_scale(j), folded
//     into c = scale log2(e) q_scale k_scale(j) of each tile; P is quantised with the static scale
//     p_scale: P8 = e4m3(exp2(s - m_safe) p_scale) (P <= 1, so no amax is needed: FA3's
//     Max_offset 8, p_scale 256), l summed from the unrounded P; acc is kept in units of the current
//     tile's V scale: before tile j's P V, acc *= rescale v_scale(j-1) / v_scale(j) (folded into
//     the rescale's multiply); at the end O = acc v_scale(last) / (l p_scale).
//   - O leaves in bf16 through its own shared buffer (a consumer's 64 rows of Q_i hold half of
//     its bf16 O) by the bf16 kernel's epilogue; L in float32 as before.
//
// Shared memory (dynamic, 1024-byte aligned):
//   Q_i [Br][HEAD_DIM] codes                     8 or 16 KiB
//   per stage: K_j [Bc][HEAD_DIM], V_j [Bc][HEAD_DIM] (unswizzled), Vt [HEAD_DIM][Bc] (64B swizzle)
//   O_i [HEAD_DIM / 64][Br][64] bf16             16 or 32 KiB
// For HEAD_DIM = 128: 16 + 2 x 24 + 32 = 96 KiB, and 1 KiB more for the alignment (fp8_shared_bytes).
//
// Source: Shah et al. 2024, FlashAttention-3 (arXiv:2407.08608), section 3.3 (block quantisation,
// incoherent processing, the in-kernel transpose of V, the layout of P's registers); FA3's code,
// hopper/softmax.h (Max_offset) and hopper/utils.h (permute_regs_A_to_C: the same order of the keys, by
// byte permutes after the cast); the PTX ISA, "wgmma.mma_async" (FP8 types, K-major only),
// "Register Fragments" (.m64nNk32), "Shared Memory Matrix Layout", "cvt" (.satfinite),
// "membar/fence" (fence.proxy.async).
// Run it: build/default/bin/ch10_hopper_fp8 [--quant tensor|block] [--hadamard]
#pragma once

#include <array>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "chapters/10_hopper/hopper_common.cuh"
#include "chapters/10_hopper/hopper_fp8.h"
#include "chapters/10_hopper/lab/fp8_error.h"
#include "common/simt/instructions/fp8.h"
#include "common/simt/simt.h"

namespace ch10::SIMT_BACKEND {

inline constexpr int kPrepThreads = 128;              // a block of the preparing kernels
inline constexpr int kTransposers = kWarpgroup - 32;  // warps 1-3 of the producer warpgroup

// x [rows][d] float32 in place: x <- x D H / sqrt(d), D = diag(signs) (d values of +-1), H the
// Walsh-Hadamard matrix (d a power of two). One thread a row; grid: ceil(rows / kPrepThreads).
// The lab's hadamard_rows, loop for loop (lab/fp8_error.cpp).
__global__ void rotate_kernel(float* __restrict__ x, const float* __restrict__ signs, int rows, int d) {
  const int row = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (row >= rows) return;
  float* const r = x + static_cast<std::size_t>(row) * d;
  for (int c = 0; c < d; ++c) r[c] *= signs[c];
  for (int half = 1; half < d; half *= 2) {  // pass log2(half): butterflies (a + b, a - b), half apart
    for (int start = 0; start < d; start += 2 * half) {
      for (int i = start; i < start + half; ++i) {
        const float a = r[i], b = r[i + half];
        r[i] = a + b;
        r[i + half] = a - b;
      }
    }
  }
  const float norm = 1.0f / sqrtf(static_cast<float>(d));
  for (int c = 0; c < d; ++c) r[c] *= norm;
}

// The rows of tile `tile` of a head of seq_len rows: kQuantRows, fewer for the last.
__device__ __forceinline__ int tile_rows(int tile, int seq_len) {
  const int rest = seq_len - tile * kQuantRows;
  return rest < kQuantRows ? rest : kQuantRows;
}

// amax[bh][tile] = max |x| over the tile's rows of head bh; x [batch * heads][seq_len][d] float32.
// Grid: (tiles = ceil(seq_len / kQuantRows), batch * heads); block: kPrepThreads (a strided max,
// then the warp's xor-shuffles, then the block's four warps through shared memory).
__global__ void amax_kernel(const float* __restrict__ x, float* __restrict__ amax, int seq_len, int d) {
  const int tile = static_cast<int>(blockIdx.x), bh = static_cast<int>(blockIdx.y);
  const int tid = static_cast<int>(threadIdx.x);
  const float* const base =
      x + (static_cast<std::size_t>(bh) * seq_len + static_cast<std::size_t>(tile) * kQuantRows) * d;
  const int n = tile_rows(tile, seq_len) * d;
  float v = 0.0f;
  for (int e = tid; e < n; e += kPrepThreads) v = fmaxf(v, fabsf(base[e]));
  for (int lanes = 16; lanes > 0; lanes /= 2) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, lanes));
  __shared__ float warp_max[kPrepThreads / 32];
  if (tid % 32 == 0) warp_max[tid / 32] = v;
  __syncthreads();
  if (tid == 0) {
    for (int w = 1; w < kPrepThreads / 32; ++w) v = fmaxf(v, warp_max[w]);
    amax[static_cast<std::size_t>(bh) * gridDim.x + tile] = v;
  }
}

// codes = e4m3(x / scale) with the tile's scale = amax / 448 (1 for a tile of zeros); per_tensor:
// the largest amax of the head's tiles. scales[bh][tile] = the scale. Grid and block as amax_kernel;
// each thread converts two values at a time (cvt.rn.satfinite.e4m3x2.f32; d is even).
__global__ void quantise_kernel(const float* __restrict__ x, const float* __restrict__ amax,
                                std::uint8_t* __restrict__ codes, float* __restrict__ scales, int seq_len, int d,
                                bool per_tensor) {
  const int tile = static_cast<int>(blockIdx.x), bh = static_cast<int>(blockIdx.y);
  const int tiles = static_cast<int>(gridDim.x);
  const float* const head_amax = amax + static_cast<std::size_t>(bh) * tiles;
  float a = head_amax[tile];
  if (per_tensor) {
    for (int k = 0; k < tiles; ++k) a = fmaxf(a, head_amax[k]);
  }
  const float scale = a > 0.0f ? a / kE4m3Max : 1.0f;
  if (threadIdx.x == 0) scales[static_cast<std::size_t>(bh) * tiles + tile] = scale;
  const std::size_t first = (static_cast<std::size_t>(bh) * seq_len + static_cast<std::size_t>(tile) * kQuantRows) * d;
  const int n = tile_rows(tile, seq_len) * d;
  for (int e = 2 * static_cast<int>(threadIdx.x); e < n; e += 2 * kPrepThreads) {
    const std::uint16_t pair = simt::cvt_rn_satfinite_e4m3x2_f32(x[first + e] / scale, x[first + e + 1] / scale);
#if defined(__CUDACC__)
    *reinterpret_cast<std::uint16_t*>(codes + first + e) = pair;
#else
    std::memcpy(codes + first + e, &pair, sizeof pair);
#endif
  }
}

// Bytes of dynamic shared memory the attention kernel asks for: Q_i, the ring (K, V, Vt), O_i in
// bf16, and 1024 for the alignment.
constexpr std::size_t fp8_shared_bytes(int head_dim, int Br, int Bc) {
  return static_cast<std::size_t>(head_dim) * (3u * Br + 3u * kStages * Bc) + kSwizzleRepeat;
}

// The swizzle of a row of `bytes` codes (64 or 128): its span is the row.
constexpr simt::Swizzle row_swizzle(int bytes) { return bytes == 64 ? simt::Swizzle::b64 : simt::Swizzle::b128; }

// The key that column k' of a k32 step's P (and of Vt) holds, within its 16: pi(4t + b) =
// 2t + b % 2 + 8 (b / 2), the columns that thread t of a quad has in its accumulator (the comment
// at the top).
__device__ __forceinline__ int key_of_column(int column) {
  const int t = (column % 16) / 4, b = column % 4;
  return 16 * (column / 16) + 2 * t + b % 2 + 8 * (b / 2);
}

// Four floats to four e4m3 codes in one register, the first in bits 0-7.
__device__ __forceinline__ std::uint32_t e4m3x4(float a, float b, float c, float d) {
  return static_cast<std::uint32_t>(simt::cvt_rn_satfinite_e4m3x2_f32(a, b)) |
         static_cast<std::uint32_t>(simt::cvt_rn_satfinite_e4m3x2_f32(c, d)) << 16;
}

// Grid: (ceil(seq_len_q / Br), batch * heads); block: kThreads; dynamic shared memory:
// fp8_shared_bytes(HEAD_DIM, Br, Bc).
// map_q, map_k: 3D tensor maps of [batch * heads][seq_len][HEAD_DIM] e4m3 codes, boxes [Br or Bc]
// [HEAD_DIM], swizzled in spans of HEAD_DIM bytes; map_v: the same for V, unswizzled; map_o: O in
// bf16, boxes [64][64], 128-byte swizzle. q_scales [batch * heads][ceil(seq_len_q / 64)], k_scales
// and v_scales [batch * heads][ceil(seq_len_k / 64)]: each tile's scale (value = scale code).
// L: [batch * heads, seq_len_q], float32. scale_log2 = scale log2(e); p_scale: P's static scale.
template <int HEAD_DIM, int Br, int Bc>
__global__ void __launch_bounds__(kThreads, 1)
    hopper_fp8_kernel(const __grid_constant__ simt::TensorMap map_q, const __grid_constant__ simt::TensorMap map_k,
                      const __grid_constant__ simt::TensorMap map_v, const __grid_constant__ simt::TensorMap map_o,
                      const float* __restrict__ q_scales, const float* __restrict__ k_scales,
                      const float* __restrict__ v_scales, float* __restrict__ L, int seq_len_q, int seq_len_k,
                      float scale_log2, float p_scale, bool causal) {
  static_assert(Br == 64 * kConsumers && Bc == kQuantRows, "a consumer's 64 rows and a key tile: one scale each");
  static_assert(HEAD_DIM == 64 || HEAD_DIM == 128, "a row of codes is one swizzled box: 64 or 128 bytes");
  constexpr unsigned kRow = HEAD_DIM;  // bytes of a row of Q, K or V
  constexpr simt::Swizzle kSwizzle = row_swizzle(HEAD_DIM);
  constexpr unsigned kQBytes = Br * kRow;
  constexpr unsigned kKVBytes = Bc * kRow;        // K_j (V_j and Vt the same)
  constexpr unsigned kOBox = Br * kSwizzleBytes;  // one box of O_i in bf16: [Br][64]

  SIMT_DYNAMIC_SHARED(std::uint8_t, raw);
  __shared__ __align__(8) std::uint64_t full[kStages];
  __shared__ __align__(8) std::uint64_t empty[kStages];
  __shared__ __align__(8) std::uint64_t vt_full[kStages];
  __shared__ __align__(8) std::uint64_t q_full;
  std::uint8_t* const Qs = aligned_shared(raw);
  const auto Ks = [&](int stage) { return Qs + kQBytes + 3u * kKVBytes * static_cast<unsigned>(stage); };
  const auto Vs = [&](int stage) { return Ks(stage) + kKVBytes; };
  const auto Vts = [&](int stage) { return Ks(stage) + 2u * kKVBytes; };
  std::uint8_t* const Os = Qs + kQBytes + 3u * kKVBytes * kStages;

  const int tid = static_cast<int>(threadIdx.x);
  const BlockWalk walk = block_walk<Br, Bc>(seq_len_q, seq_len_k, causal);
  const int i0 = walk.i0, bh = walk.bh, num_tiles = walk.num_tiles, unmasked_keys = walk.unmasked_keys;
  auto visible = [&](int i) { return fa::visible_keys(i, seq_len_q, seq_len_k, causal); };

  init_barriers(tid, q_full, full, empty, vt_full, kTransposers);  // vt_full: Vt written by warps 1-3

  if (tid < kWarpgroup) {
    // ---- The producer warpgroup: thread 0 copies, warps 1-3 transpose V_j ----
    simt::setmaxnreg_dec<kProducerRegisters>();
    if (tid == 0) {
      simt::mbarrier_arrive_expect_tx(&q_full, kQBytes);  // Q_i: one box of HEAD_DIM-byte rows
      simt::cp_async_bulk_tensor_3d_global_to_shared(Qs, &map_q, 0, i0, bh, &q_full);
      for (int j = 0; j < num_tiles; ++j) {
        const int s = j % kStages;
        simt::mbarrier_wait_parity(&empty[s], ((j / kStages) & 1) ^ 1);  // K, V and Vt of stage s are free
        simt::mbarrier_arrive_expect_tx(&full[s], 2 * kKVBytes);
        simt::cp_async_bulk_tensor_3d_global_to_shared(Ks(s), &map_k, 0, j * Bc, bh, &full[s]);
        simt::cp_async_bulk_tensor_3d_global_to_shared(Vs(s), &map_v, 0, j * Bc, bh, &full[s]);
      }
    } else if (tid >= 32) {
      // Vt[n][k'] = V_j[key pi(k')][n]: four columns k' = 4q .. 4q + 3 (one 32-bit store) a step,
      // at their place in Vt's rows of Bc bytes under the 64-byte swizzle.
      for (int j = 0; j < num_tiles; ++j) {
        const int s = j % kStages;
        simt::mbarrier_wait_parity(&empty[s], ((j / kStages) & 1) ^ 1);  // the consumers are done with Vt
        simt::mbarrier_wait_parity(&full[s], (j / kStages) & 1);         // V_j has landed
        const std::uint8_t* const V = Vs(s);
        for (int w = tid - 32; w < HEAD_DIM * Bc / 4; w += kTransposers) {
          const int n = w / (Bc / 4), k4 = 4 * (w % (Bc / 4));
          std::uint32_t word = 0;
          for (int b = 0; b < 4; ++b) {
            word |= static_cast<std::uint32_t>(V[key_of_column(k4 + b) * kRow + n]) << (8 * b);
          }
          const unsigned at = simt::swizzled_address(static_cast<unsigned>(n * Bc + k4), simt::Swizzle::b64);
#if defined(__CUDACC__)
          *reinterpret_cast<std::uint32_t*>(Vts(s) + at) = word;
#else
          std::memcpy(Vts(s) + at, &word, sizeof word);
#endif
        }
        simt::fence_proxy_async_shared_cta();  // the stores above, seen by wgmma (the async proxy)
        simt::mbarrier_arrive(&vt_full[s]);
      }
    }
    return;
  }

  // ---- The consumer warpgroups ----
  simt::setmaxnreg_inc<kConsumerRegisters>();
  const int wg = tid / kWarpgroup - 1;
  const int ct = tid % kWarpgroup;
  const int g = (ct % 32) / 4;
  const int t = ct % 4;
  const int row0 = 64 * wg + 16 * (ct / 32) + g;  // this thread's rows: row0, row0 + 8 of the block
  std::uint8_t* const Qw = Qs + 64u * kRow * static_cast<unsigned>(wg);
  const int q_tiles = (seq_len_q + kQuantRows - 1) / kQuantRows;
  const int k_tiles = (seq_len_k + Bc - 1) / Bc;
  const int q_tile = (i0 + 64 * wg) / kQuantRows;  // past the last tile: rows that are never written
  const float q_scale = q_tile < q_tiles ? q_scales[static_cast<std::size_t>(bh) * q_tiles + q_tile] : 1.0f;
  const float* const k_scale = k_scales + static_cast<std::size_t>(bh) * k_tiles;
  const float* const v_scale = v_scales + static_cast<std::size_t>(bh) * k_tiles;

  float m[2] = {-INFINITY, -INFINITY};
  float l[2] = {0.0f, 0.0f};
  float acc[HEAD_DIM / 2];
  SIMT_UNROLL
  for (int i = 0; i < HEAD_DIM / 2; ++i) acc[i] = 0.0f;
  if (wg == 1 && num_tiles > 0) simt::named_barrier_arrive(kTurn + 0, kConsumers * kWarpgroup);

  // Line 8: S = Q_i K_jj^T (codes), HEAD_DIM / 32 wgmma k32 steps of 32 bytes along the rows, both
  // K-major with the row's swizzle: SBO = 8 rows; LBO unused.
  float S[Bc / 2];
  auto issue_scores = [&](int jj) {
    scores_in_turn(jj, num_tiles, wg, full, [&](int ss) {
      SIMT_UNROLL
      for (int kd = 0; kd < HEAD_DIM / 32; ++kd) {
        const std::uint64_t a = simt::make_wgmma_descriptor(Qw + 32u * kd, kSwizzle, 16, 8 * kRow);
        const std::uint64_t b = simt::make_wgmma_descriptor(Ks(ss) + 32u * kd, kSwizzle, 16, 8 * kRow);
        simt::wgmma_m64nNk32_e4m3<Bc>(S, a, b, kd > 0);
      }
    });
  };

  // Line 9, with the tile's dequantisation folded into c: S_true = S q_scale k_scale(jj).
  float m_new[2], m_safe[2], rescale[2];
  const int visible_rows[2] = {visible(i0 + row0), visible(i0 + row0 + 8)};
  auto softmax = [&](int jj) {
    online_softmax<Bc>(S, scale_log2 * q_scale * k_scale[jj], jj * Bc + Bc > unmasked_keys, jj * Bc, visible_rows, t, m,
                       l, m_new, m_safe, rescale);
  };

  // P8 = e4m3(P p_scale), packed as it lies (the keys relabelled, the comment at the top): in
  // k32 step ks, register r of the A fragment (row g for r even, g + 8 odd; keys 0-15 of the step
  // for r < 2, 16-31 above) holds accumulator elements 16 ks + 8 (r / 2) + 2 (r % 2) + {0, 1, 4, 5}.
  std::uint32_t p[Bc / 32][4];
  auto pack_P = [&] {
    SIMT_UNROLL
    for (int ks = 0; ks < Bc / 32; ++ks) {
      SIMT_UNROLL
      for (int r = 0; r < 4; ++r) {
        const int e = 16 * ks + 8 * (r / 2) + 2 * (r % 2);
        p[ks][r] = e4m3x4(S[e] * p_scale, S[e + 1] * p_scale, S[e + 4] * p_scale, S[e + 5] * p_scale);
      }
    }
  };

  // Line 10: acc += P8 V_j^T's codes, once warps 1-3 have written Vt: B (32 keys x HEAD_DIM) is
  // K-major, rows of Bc bytes with the 64-byte swizzle: SBO = 8 rows = 512 bytes; a k32 step 32
  // bytes further along the row.
  auto issue_pv = [&](int jj) {
    const int s = jj % kStages;
    simt::mbarrier_wait_parity(&vt_full[s], (jj / kStages) & 1);
    simt::wgmma_fence_operand(acc);
    simt::wgmma_fence();
    SIMT_UNROLL
    for (int ks = 0; ks < Bc / 32; ++ks) {
      const std::uint64_t b = simt::make_wgmma_descriptor(Vts(s) + 32u * ks, simt::Swizzle::b64, 16, 8 * Bc);
      simt::wgmma_m64nNk32_e4m3<HEAD_DIM>(acc, p[ks], b, true);
    }
    simt::wgmma_commit_group();
  };
  // Before tile jj's P V: acc exp(m - m_new), and into tile jj's units of V: v_scale(jj-1) / v_scale(jj).
  auto advance = [&](int jj) {
    if (jj > 0) {
      const float units = v_scale[jj - 1] / v_scale[jj];
      const float factor[2] = {rescale[0] * units, rescale[1] * units};
      SIMT_UNROLL
      for (int i = 0; i < HEAD_DIM / 2; ++i) acc[i] *= factor[(i / 2) % 2];
    }
    m[0] = m_new[0];
    m[1] = m_new[1];
  };
  simt::mbarrier_wait_parity(&q_full, 0);
  overlapped_tiles(num_tiles, S, acc, empty, issue_scores, softmax, pack_P, issue_pv, advance);

  // Lines 12-15: O = acc v_scale(last) / (l p_scale), in bf16 through O_i's buffer; L.
  const float o_scale = num_tiles > 0 ? v_scale[num_tiles - 1] / p_scale : 1.0f;
  write_O_and_L<simt::bf16, HEAD_DIM>(acc, l, m, o_scale, Os + 64u * kSwizzleBytes * static_cast<unsigned>(wg), kOBox,
                                      row0 - 64 * wg, t, ct, wg, &map_o, i0 + 64 * wg, bh, L, i0 + row0, seq_len_q);
}

// rotate_kernel on the rows of x (float32 [rows][d] on the device, in place), one thread a row.
inline void rotate(float* x, const float* signs, int rows, int d) {
  simt::launch<rotate_kernel>(simt::LaunchMode::synchronous,
                              dim3(static_cast<unsigned>((rows + kPrepThreads - 1) / kPrepThreads)), dim3(kPrepThreads),
                              0, x, signs, rows, d);
}

// The prepared inputs' preparation on the device: x (float32, [batch * heads][seq_len][d]) rotated
// in place when `signs` is given, then its tiles' amax, scales and codes.
struct Quantised {
  simt::DeviceBuffer<std::uint8_t> codes;
  simt::DeviceBuffer<float> scales;
};
inline Quantised quantise(float* x, int batch_heads, int seq_len, int d, Quant quant, const float* signs) {
  const int rows = batch_heads * seq_len;
  if (signs != nullptr) rotate(x, signs, rows, d);
  const int tiles = (seq_len + kQuantRows - 1) / kQuantRows;
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(batch_heads));
  simt::DeviceBuffer<float> amax(static_cast<std::size_t>(tiles) * batch_heads);
  Quantised q{simt::DeviceBuffer<std::uint8_t>(static_cast<std::size_t>(rows) * d),
              simt::DeviceBuffer<float>(static_cast<std::size_t>(tiles) * batch_heads)};
  simt::launch<amax_kernel>(simt::LaunchMode::synchronous, grid, dim3(kPrepThreads), 0, x, amax.data(), seq_len, d);
  simt::launch<quantise_kernel>(simt::LaunchMode::synchronous, grid, dim3(kPrepThreads), 0, x, amax.data(),
                                q.codes.data(), q.scales.data(), seq_len, d, quant == Quant::tensor);
  return q;
}

// Q, K and V quantised (Q and K rotated first, in place, when the problem asks for the Hadamard):
// the attention kernel's operands, kept together for as long as a launch may read them.
struct Fp8Operands {
  Quantised q, k, v;
};
inline Fp8Operands quantise_all(float* Q, float* K, float* V, int head_dim, const Fp8Problem& f) {
  const DeviceProblem& p = f.problem;
  const simt::DeviceBuffer<float> signs =
      simt::to_device<float>(fp8::random_signs(static_cast<std::size_t>(head_dim), f.seed));
  const float* rotation = f.hadamard ? signs.data() : nullptr;
  return {quantise(Q, p.batch_heads, p.seq_len_q, head_dim, f.quant, rotation),
          quantise(K, p.batch_heads, p.seq_len_k, head_dim, f.quant, rotation),
          quantise(V, p.batch_heads, p.seq_len_k, head_dim, f.quant, nullptr)};
}

// The attention kernel's launch for one compiled instance, prepared as hopper.cuh's Launch is: the
// shared-memory allowance asked for and the four tensor maps (Q, K, V codes; O bf16) encoded once;
// `launch` launches it on them with these arguments, as its mode says. Grid: (ceil(seq_len_q /
// Br), batch * heads); block: kThreads.
struct Fp8Launch {
  void (*launch)(const Fp8Launch& arguments, simt::LaunchMode mode);
  std::array<simt::TensorMap, 4> maps;  // Q, K, V, O
  dim3 grid;
  std::size_t shared_bytes;
  const float *q_scales, *k_scales, *v_scales;
  float* L;
  int seq_len_q, seq_len_k;
  float scale_log2, p_scale;
  bool causal;
};

template <fa::KernelShape k>
void launch_fp8_instance(const Fp8Launch& a, simt::LaunchMode mode) {
  constexpr auto kernel = hopper_fp8_kernel<k.head_dim, k.tile.Br, k.tile.Bc>;
  simt::launch<kernel>(mode, a.grid, dim3(kThreads), a.shared_bytes, a.maps[0], a.maps[1], a.maps[2], a.maps[3],
                       a.q_scales, a.k_scales, a.v_scales, a.L, a.seq_len_q, a.seq_len_k, a.scale_log2, a.p_scale,
                       a.causal);
}

template <fa::KernelShape k>
Fp8Launch prepare_fp8_instance(const Fp8Operands& x, void* O, float* L, const Fp8Problem& f) {
  constexpr int Br = k.tile.Br, Bc = k.tile.Bc, d = k.head_dim;
  constexpr std::size_t bytes = fp8_shared_bytes(d, Br, Bc);
  const DeviceProblem& p = f.problem;
  simt::set_max_dynamic_shared_bytes<hopper_fp8_kernel<d, Br, Bc>>(bytes);
  return {&launch_fp8_instance<k>,
          {tensor_map(x.q.codes.data(), p.batch_heads, p.seq_len_q, d, Br, d, row_swizzle(d)),
           tensor_map(x.k.codes.data(), p.batch_heads, p.seq_len_k, d, Bc, d, row_swizzle(d)),
           tensor_map(x.v.codes.data(), p.batch_heads, p.seq_len_k, d, Bc, d, simt::Swizzle::none),
           tensor_map(static_cast<const simt::bf16*>(O), p.batch_heads, p.seq_len_q, d, Br / kConsumers)},
          dim3(static_cast<unsigned>((p.seq_len_q + Br - 1) / Br), static_cast<unsigned>(p.batch_heads)),
          bytes,
          x.q.scales.data(),
          x.k.scales.data(),
          x.v.scales.data(),
          L,
          p.seq_len_q,
          p.seq_len_k,
          static_cast<float>(static_cast<double>(p.scale) * 1.4426950408889634),  // scale * log2(e)
          f.p_scale,
          p.causal};
}

// Every compiled instance's preparation, in kCompiled's order.
template <std::size_t... n>
constexpr auto fp8_instances(std::index_sequence<n...>) {
  return std::array{&prepare_fp8_instance<kCompiled[n]>...};
}
inline constexpr auto kFp8Instances = fp8_instances(std::make_index_sequence<kCompiled.size()>{});

// Q, K, V (float32 on this backend's device, [batch * heads][seq_len][head_dim]; Q and K rotated in
// place when problem.hadamard) quantised by the preparing kernels, once, here; then the instance
// for the head dim prepared on the codes, which the returned launch keeps. As hopper.h's Prepared:
// what the GPU benchmark times is the attention kernel alone. Throws what simt::launch and
// simt::make_tensor_map throw.
Prepared prepare_hopper_fp8(float* Q, float* K, float* V, void* O, float* L, const Fp8Problem& problem) {
  const std::size_t n = fa::compiled_index(problem.problem, kCompiled);
  const auto operands = std::make_shared<const Fp8Operands>(quantise_all(Q, K, V, kCompiled[n].head_dim, problem));
  const Fp8Launch a = kFp8Instances[n](*operands, O, L, problem);
  return [a, operands](simt::LaunchMode mode) { a.launch(a, mode); };
}

// Host data in, host data out: Q, K, V (float32) to the device; the rotation of Q and K (when
// asked for) and the quantisation of all three there; the attention kernel for the head dim; O
// (bf16, widened), L, the time of all of it, and the codes and scales back.
Fp8Result run_hopper_fp8(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                         const Fp8Problem& f) {
  const DeviceProblem& p = f.problem;
  auto q = simt::to_device<float>(Q.values), k = simt::to_device<float>(K.values), v = simt::to_device<float>(V.values);
  auto o = simt::poisoned<simt::bf16>(Q.values.size());
  auto l = simt::poisoned<float>(static_cast<std::size_t>(p.batch_heads) * p.seq_len_q);

  const auto start = std::chrono::steady_clock::now();
  const std::size_t n = fa::compiled_index(p, kCompiled);
  const Fp8Operands x = quantise_all(q.data(), k.data(), v.data(), kCompiled[n].head_dim, f);
  const Fp8Launch launch = kFp8Instances[n](x, o.data(), l.data(), f);
  launch.launch(launch, simt::LaunchMode::synchronous);
  const double elapsed_ms = fa::milliseconds_since(start);
  return {{fa::Tensor4<float>(Q.shape, simt::to_host_float(o)), l.to_host(), elapsed_ms},
          {x.q.codes.to_host(), x.k.codes.to_host(), x.v.codes.to_host(), x.q.scales.to_host(), x.k.scales.to_host(),
           x.v.scales.to_host()}};
}

// x rotated by rotate_kernel on this backend's device.
std::vector<float> rotate_rows(const std::vector<float>& x, int head_dim, std::uint64_t seed) {
  auto device_x = simt::to_device<float>(x);
  const auto signs = simt::to_device<float>(fp8::random_signs(static_cast<std::size_t>(head_dim), seed));
  rotate(device_x.data(), signs.data(), static_cast<int>(x.size() / static_cast<std::size_t>(head_dim)), head_dim);
  return device_x.to_host();
}

}  // namespace ch10::SIMT_BACKEND
