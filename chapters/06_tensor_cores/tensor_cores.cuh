// Chapter 06: the FlashAttention-2 forward kernel on tensor cores.
//
// What changed since chapter 05: the algorithm is the same (the same m, l, acc, the same tiles, the
// same causal mask and the same zeros and -inf for a row that sees no key); the machinery is not.
//   - Q, K, V and O are 16-bit numbers (bf16 or fp16, one template parameter); S, m, l, acc and L
//     stay float32.
//   - The two matrix products run on tensor cores: mma.sync m16n8k16 (16 x 16 times 16 x 8, plus a
//     16 x 8 float32 accumulator, per warp). A warp, not a thread, owns 16 query rows, and every
//     matrix lives in registers spread over the warp's 32 lanes in the PTX ISA's fragment layouts.
//   - Q_i is read from shared memory once, into A fragments (ldmatrix), and stays in registers.
//   - P never goes through shared memory: the lanes that hold S in the accumulator layout hold
//     exactly the elements that the A operand of P V needs (see "line 10" below).
//   - K_j and V_j arrive by cp.async, double-buffered: tile j+1 is in flight while tile j is used.
//   - Shared memory rows are XOR-swizzled so that cp.async and ldmatrix are free of bank conflicts.
//
// The algorithm, for the block that owns query rows i0 .. i0+Br-1 of head bh, with the line
// numbers of Algorithm 1 of Dao 2023, FlashAttention-2 (forward pass); lines 1-2 (the split into
// blocks) are the grid, lines 3 and 16 the loop over blocks that the grid runs in parallel:
//    4. load Q_i (Br x d) into shared memory (cp.async), then into A fragments (ldmatrix)
//    5. per row: m = -inf, l = 0, acc = 0 (16 rows x d per warp, as mma accumulator fragments)
//    6. for each key tile j (skipping the tiles a causal mask hides entirely):
//    7.   K_j, V_j (Bc x d) are in shared memory; the copy of tile j+1 starts now (cp.async)
//    8.   S = Q_i K_j^T by mma (K_j as B fragments, ldmatrix), scaled; -inf where masked
//    9.   m_new = max(m, rowmax(S)); P = exp(S - m_new); l = l exp(m - m_new) + rowsum(P)
//   10.   acc = acc exp(m - m_new) + P V_j by mma (P as A fragments, straight from S's registers,
//         rounded to the element type; V_j as B fragments, ldmatrix .trans); m = m_new
//   12. O_i = acc / l (0 for a row that saw no key)
//   13. L_i = m + log(l) (-inf for such a row)
//   14. write O_i (element type, through shared memory so that the stores are 16 bytes wide)
//   15. write L_i (float32)
//
// The exponentials are base 2, as in FlashAttention-2's code: S is multiplied by
// scale * log2(e), so that exp(S * scale - m) is exp2(S' - m') with S' = S * scale * log2(e), one
// multiply and one ex2 per score; L = m' ln(2) + ln(l) turns it back to natural logarithms.
//
// Who holds what (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type"): lane
// `lane` of a warp has g = lane / 4 (its row group) and t = lane % 4 (its place in the quad).
//   A (16 x 16, element pairs in 4 registers): a0 = (row g, cols 2t, 2t+1), a1 = (row g+8, same
//     cols), a2 = (row g, cols 2t+8, 2t+9), a3 = (row g+8, cols 2t+8, 2t+9)
//   B (16 x 8, "col"): b0 = (rows 2t, 2t+1 of col g), b1 = (rows 2t+8, 2t+9 of col g)
//   C/D (16 x 8 float): c0, c1 = (row g, cols 2t, 2t+1), c2, c3 = (row g+8, cols 2t, 2t+1)
// So a lane holds parts of two rows, g and g+8, and the four lanes of a quad (same g) hold whole
// rows: a row's max and sum combine with two xor-shuffles (lanes ^1, ^2), as in chapter 05.
//
// Shared memory (dynamic, elements): Q_i [Br][d], K [2][Bc][d], V [2][Bc][d], each row of d
// elements = d/8 chunks of 16 bytes, chunk c of row r stored at chunk position c ^ (r % 8)
// (swizzled(), below). ldmatrix reads, per 8 x 8 matrix, one 16-byte chunk from each of 8
// consecutive rows: without the swizzle those 8 chunks sit d*2 bytes apart, a multiple of 128, all
// in the same four banks (an 8-way conflict); with it they land in 8 different 16-byte bank groups.
// For d = 128, Br = 128, Bc = 64 that is 96 KiB: above the 48 KiB default, so the host side asks
// for it (cudaFuncSetAttribute).
//
// This file is compiled twice (add_kernels, cmake/Chapters.cmake): by the host compiler through
// common/simt (namespace ch06::cpu), where simt emulates mma.sync, ldmatrix and cp.async lane by
// lane, and by nvcc (namespace ch06::gpu), where they are the PTX instructions.
//
// Source: Dao 2023, FlashAttention-2 (arXiv:2307.08691), Algorithm 1 and sections 3.1-3.3; the
// PTX ISA, "Warp-level matrix instructions" (mma.m16n8k16 fragments, ldmatrix) and "cp.async";
// the CUDA C++ Programming Guide, "Shared memory" (banks) and "Asynchronous data copies".
// Run the demo: build/default/bin/ch06_tensor_cores
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "chapters/06_tensor_cores/tensor_cores.h"
#include "common/simt/simt.h"

// Full unrolling of the loops over fragments: without it nvcc keeps the fragment arrays in local
// memory instead of registers. (The host compiler needs no hint.)
#if defined(__CUDACC__)
#define CH06_UNROLL _Pragma("unroll")
#else
#define CH06_UNROLL
#endif

namespace ch06::SIMT_BACKEND {

inline constexpr int kRowsPerWarp = 16;  // the M of mma.m16n8k16
inline constexpr unsigned kFullMask = 0xffffffffu;

// x limited to [lo, hi].
__host__ __device__ __forceinline__ int clamp_int(int x, int lo, int hi) { return x < lo ? lo : (x > hi ? hi : x); }

// Element offset of (row, col) in a [rows][HEAD_DIM] shared-memory tile: 16-byte chunk col / 8 of
// the row is stored at chunk position (col / 8) ^ (row % 8). Rows stay where they are; only the
// chunks inside a row are permuted, and only their low 3 bits, so a row of 8 or 16 chunks maps
// onto itself.
template <int HEAD_DIM>
__device__ __forceinline__ int swizzled(int row, int col) {
  return row * HEAD_DIM + ((((col >> 3) ^ (row & 7))) << 3) + (col & 7);
}

// Elements of dynamic shared memory the kernel needs for one block.
constexpr std::size_t shared_elements(int head_dim, int Br, int Bc) {
  return static_cast<std::size_t>(Br) * head_dim + 4u * static_cast<std::size_t>(Bc) * head_dim;
}

// The mma and the float pair -> element pair packing of one element type.
template <class Element>
struct ElementOps;
template <>
struct ElementOps<simt::bf16> {
  __device__ static __forceinline__ std::uint32_t pack(float lo, float hi) { return simt::pack_bf16x2(lo, hi); }
  __device__ static __forceinline__ void mma(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2]) {
    simt::mma_m16n8k16_bf16(d, a, b, d);
  }
};
template <>
struct ElementOps<simt::f16> {
  __device__ static __forceinline__ std::uint32_t pack(float lo, float hi) { return simt::pack_f16x2(lo, hi); }
  __device__ static __forceinline__ void mma(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2]) {
    simt::mma_m16n8k16_f16(d, a, b, d);
  }
};

// One 32-bit store (a pair of elements) and one 16-byte copy, both to or from aligned addresses:
// plain word-sized accesses on the GPU (uint4: one 128-bit load and store), memcpy on the CPU.
__device__ __forceinline__ void store_pair(void* dst, std::uint32_t pair) {
#if defined(__CUDACC__)
  *static_cast<std::uint32_t*>(dst) = pair;
#else
  std::memcpy(dst, &pair, sizeof pair);
#endif
}
__device__ __forceinline__ void copy_16_bytes(void* dst, const void* src) {
#if defined(__CUDACC__)
  *static_cast<uint4*>(dst) = *static_cast<const uint4*>(src);
#else
  std::memcpy(dst, src, 16);
#endif
}

// Copies rows row0 .. row0+ROWS-1 of a [seq_len][HEAD_DIM] matrix into a swizzled [ROWS][HEAD_DIM]
// shared tile by cp.async, 16 bytes per copy, spread over the block's THREADS threads. Rows at or
// past seq_len are zero-filled (src-size 0): the tail of the last tile, which the mask then hides.
template <int HEAD_DIM, int ROWS, int THREADS, class Element>
__device__ __forceinline__ void copy_tile_async(Element* tile, const Element* head, int row0, int seq_len, int tid) {
  constexpr int kChunksPerRow = HEAD_DIM / 8;
  CH06_UNROLL
  for (int c = tid; c < ROWS * kChunksPerRow; c += THREADS) {
    const int r = c / kChunksPerRow;
    const int col = (c % kChunksPerRow) * 8;
    const bool inside = row0 + r < seq_len;
    // A zero-filling copy reads nothing; it is given the head's first row, a valid address.
    const Element* src = inside ? head + static_cast<std::size_t>(row0 + r) * HEAD_DIM + col : head;
    simt::cp_async_16(tile + swizzled<HEAD_DIM>(r, col), src, inside);
  }
}

// Grid: (ceil(seq_len_q / Br), batch * heads); block: (Br / 16) warps; dynamic shared memory:
// shared_elements(HEAD_DIM, Br, Bc) * 2 bytes.
// Q, O: [batch*heads, seq_len_q, HEAD_DIM]; K, V: [batch*heads, seq_len_k, HEAD_DIM], row-major,
// Element (bf16 or fp16), each head's rows 16-byte aligned; L: [batch*heads, seq_len_q], float32.
// scale_log2 = scale * log2(e).
template <class Element, int HEAD_DIM, int Br, int Bc>
__global__ void __launch_bounds__(Br / kRowsPerWarp * 32)
    tensor_cores_kernel(const Element* __restrict__ Q, const Element* __restrict__ K, const Element* __restrict__ V,
                        Element* __restrict__ O, float* __restrict__ L, int seq_len_q, int seq_len_k, float scale_log2,
                        bool causal) {
  static_assert(HEAD_DIM % 64 == 0, "a row must hold at least 8 chunks of 16 bytes for the swizzle");
  static_assert(Br % kRowsPerWarp == 0 && Bc % 16 == 0, "Br: 16 rows per warp; Bc: k-steps of 16 keys");
  constexpr int kWarps = Br / kRowsPerWarp;
  constexpr int kThreads = kWarps * 32;
  constexpr int kDSteps = HEAD_DIM / 16;  // k-steps of S = Q K^T (over d)
  constexpr int kDBlocks = HEAD_DIM / 8;  // n-blocks of O = P V (over d)
  constexpr int kKeyBlocks = Bc / 8;      // n-blocks of S (over keys)
  constexpr int kKeySteps = Bc / 16;      // k-steps of P V (over keys)
  using Ops = ElementOps<Element>;

  SIMT_DYNAMIC_SHARED(Element, shared);
  Element* Qs = shared;                  // [Br][HEAD_DIM], later this block's O_i
  Element* Ks = Qs + Br * HEAD_DIM;      // [2][Bc][HEAD_DIM]
  Element* Vs = Ks + 2 * Bc * HEAD_DIM;  // [2][Bc][HEAD_DIM]

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int g = lane / 4;  // row group: this lane holds rows g and g+8 of its warp's 16
  const int t = lane % 4;  // place in the quad: columns 2t, 2t+1 of each 8-wide block
  const int i0 = static_cast<int>(blockIdx.x) * Br;
  const int warp_row0 = warp * kRowsPerWarp;  // the warp's first row within the block
  const std::size_t bh = blockIdx.y;
  const Element* Q_head = Q + bh * seq_len_q * HEAD_DIM;
  const Element* K_head = K + bh * seq_len_k * HEAD_DIM;
  const Element* V_head = V + bh * seq_len_k * HEAD_DIM;

  // The causal mask: row i sees keys j < visible(i) (common/attention_shapes.h). The block's last
  // real row sees the most keys: tiles from ceil(visible(last) / Bc) on are skipped whole. Tiles
  // wholly below the block's first row's diagonal, and not past seq_len_k, need no mask at all.
  const int shift = seq_len_k - seq_len_q;
  auto visible = [&](int i) { return causal ? clamp_int(i + shift + 1, 0, seq_len_k) : seq_len_k; };
  const int last_row = (i0 + Br < seq_len_q ? i0 + Br : seq_len_q) - 1;
  const int num_tiles = (visible(last_row) + Bc - 1) / Bc;
  const int unmasked_keys = visible(i0);                   // every row of the block sees keys 0 .. unmasked_keys-1
  const int visible_lo = visible(i0 + warp_row0 + g);      // this lane's row g
  const int visible_hi = visible(i0 + warp_row0 + g + 8);  // and row g+8

  // Line 4: Q_i by cp.async (rows past seq_len_q are zeros), then K_0, V_0, each its own group.
  copy_tile_async<HEAD_DIM, Br, kThreads>(Qs, Q_head, i0, seq_len_q, tid);
  simt::cp_async_commit_group();
  if (num_tiles > 0) {
    copy_tile_async<HEAD_DIM, Bc, kThreads>(Ks, K_head, 0, seq_len_k, tid);
    copy_tile_async<HEAD_DIM, Bc, kThreads>(Vs, V_head, 0, seq_len_k, tid);
  }
  simt::cp_async_commit_group();   // (an empty group when there is no tile: the waits stay uniform)
  simt::cp_async_wait_group<1>();  // this thread's part of Q_i has landed
  __syncthreads();                 // ... and every other thread's

  // Q_i into A fragments: for k-step kd (columns 16 kd .. 16 kd + 15 of the warp's 16 rows), one
  // ldmatrix .x4 whose four 8 x 8 matrices are (rows 0-7, cols 0-7), (rows 8-15, cols 0-7),
  // (rows 0-7, cols 8-15), (rows 8-15, cols 8-15): lanes 8m .. 8m+7 give the row addresses of
  // matrix m, so lane `lane` points at row lane % 16, column 8 (lane / 16). Matrix m lands in
  // register m, which is exactly a0 .. a3 of the A layout above.
  std::uint32_t q_frag[kDSteps][4];
  CH06_UNROLL
  for (int kd = 0; kd < kDSteps; ++kd) {
    simt::ldmatrix_x4(q_frag[kd], Qs + swizzled<HEAD_DIM>(warp_row0 + lane % 16, kd * 16 + (lane / 16) * 8));
  }

  // Line 5: the running state of this lane's two rows (index h: 0 for row g, 1 for row g+8), in
  // log2 units (m' = m log2(e)). l is this lane's part of the row sum (its own columns); the
  // quad's four parts are added once, at the end. acc: the accumulator fragments of O_i.
  float m[2] = {-INFINITY, -INFINITY};
  float l[2] = {0.0f, 0.0f};
  float acc[kDBlocks][4];
  CH06_UNROLL
  for (int nd = 0; nd < kDBlocks; ++nd) acc[nd][0] = acc[nd][1] = acc[nd][2] = acc[nd][3] = 0.0f;

  for (int tile = 0; tile < num_tiles; ++tile) {  // line 6
    const int j0 = tile * Bc;
    const int buffer = tile & 1;
    const Element* Kj = Ks + buffer * Bc * HEAD_DIM;
    const Element* Vj = Vs + buffer * Bc * HEAD_DIM;

    // Line 7: start tile+1 into the other buffer (last read in the previous iteration, which every
    // thread has left: the barrier at the loop's end), then wait for tile `tile` only.
    if (tile + 1 < num_tiles) {
      const int next = (tile + 1) & 1;
      copy_tile_async<HEAD_DIM, Bc, kThreads>(Ks + next * Bc * HEAD_DIM, K_head, j0 + Bc, seq_len_k, tid);
      copy_tile_async<HEAD_DIM, Bc, kThreads>(Vs + next * Bc * HEAD_DIM, V_head, j0 + Bc, seq_len_k, tid);
      simt::cp_async_commit_group();
      simt::cp_async_wait_group<1>();  // all but the newest group: tile `tile` has landed
    } else {
      simt::cp_async_wait_group<0>();  // the last tile: nothing else in flight
    }
    __syncthreads();  // every thread's part of K_j and V_j has landed

    // Line 8: S = Q_i K_j^T. B = K_j^T, so B's column n is key n: B fragments come from K_j's rows
    // without a transpose. One ldmatrix .x4 covers 16 keys x 16 dims: matrices (keys 0-7, d 0-7),
    // (keys 0-7, d 8-15), (keys 8-15, d 0-7), (keys 8-15, d 8-15); registers 0-1 are b0, b1 of the
    // first 8 keys, registers 2-3 of the next 8.
    float s[kKeyBlocks][4];
    CH06_UNROLL
    for (int nb = 0; nb < kKeyBlocks; ++nb) s[nb][0] = s[nb][1] = s[nb][2] = s[nb][3] = 0.0f;
    CH06_UNROLL
    for (int kd = 0; kd < kDSteps; ++kd) {
      CH06_UNROLL
      for (int nk = 0; nk < kKeySteps; ++nk) {
        std::uint32_t k_frag[4];
        simt::ldmatrix_x4(
            k_frag, Kj + swizzled<HEAD_DIM>(nk * 16 + lane % 8 + (lane / 16) * 8, kd * 16 + ((lane / 8) % 2) * 8));
        const std::uint32_t b_lo[2] = {k_frag[0], k_frag[1]};
        const std::uint32_t b_hi[2] = {k_frag[2], k_frag[3]};
        Ops::mma(s[2 * nk], q_frag[kd], b_lo);
        Ops::mma(s[2 * nk + 1], q_frag[kd], b_hi);
      }
    }

    // Scale (into log2 units), and mask where the tile needs it: element e of key block nb is
    // row g + 8 (e / 2), key j0 + 8 nb + 2t + e % 2.
    const bool needs_mask = j0 + Bc > unmasked_keys;  // a tail tile or a tile on the diagonal
    CH06_UNROLL
    for (int nb = 0; nb < kKeyBlocks; ++nb) {
      CH06_UNROLL
      for (int e = 0; e < 4; ++e) {
        const int j = j0 + nb * 8 + 2 * t + (e & 1);
        const bool hidden = needs_mask && j >= (e < 2 ? visible_lo : visible_hi);
        s[nb][e] = hidden ? -INFINITY : s[nb][e] * scale_log2;
      }
    }

    // Line 9: the new max of each row: this lane's columns, then its quad (lanes ^1, ^2).
    float factor[2], m_use[2];
    CH06_UNROLL
    for (int h = 0; h < 2; ++h) {
      float tile_max = -INFINITY;
      CH06_UNROLL
      for (int nb = 0; nb < kKeyBlocks; ++nb) tile_max = fmaxf(tile_max, fmaxf(s[nb][2 * h], s[nb][2 * h + 1]));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(kFullMask, tile_max, 1));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(kFullMask, tile_max, 2));
      const float m_new = fmaxf(m[h], tile_max);
      // While a row has seen only masked keys m_new is -inf, and -inf - (-inf) would be NaN;
      // subtracting 0 instead makes every term exp2(-inf) = 0, so l and acc stay 0 (chapter 05).
      m_use[h] = (m_new == -INFINITY) ? 0.0f : m_new;
      factor[h] = exp2f(m[h] - m_use[h]);  // exp(m_old - m_new); 0 on the row's first seen tile
      m[h] = m_new;                        // (line 10's "m = m_new", done early: m is not read again)
    }
    // P = exp2(S' - m') in place of S, and this lane's part of each row's sum.
    CH06_UNROLL
    for (int nb = 0; nb < kKeyBlocks; ++nb) {
      CH06_UNROLL
      for (int e = 0; e < 4; ++e) s[nb][e] = exp2f(s[nb][e] - m_use[e / 2]);
    }
    CH06_UNROLL
    for (int h = 0; h < 2; ++h) {
      float tile_sum = 0.0f;
      CH06_UNROLL
      for (int nb = 0; nb < kKeyBlocks; ++nb) tile_sum += s[nb][2 * h] + s[nb][2 * h + 1];
      l[h] = l[h] * factor[h] + tile_sum;
    }

    // Line 10: acc = acc exp(m - m_new) + P V_j. First the rescale of what is already there.
    CH06_UNROLL
    for (int nd = 0; nd < kDBlocks; ++nd) {
      acc[nd][0] *= factor[0];
      acc[nd][1] *= factor[0];
      acc[nd][2] *= factor[1];
      acc[nd][3] *= factor[1];
    }
    // P as A fragments, with no trip through shared memory. For keys 16 ks .. 16 ks + 15 the A
    // fragment needs (row g, keys 2t, 2t+1), (row g+8, keys 2t, 2t+1), (row g, keys 2t+8, 2t+9),
    // (row g+8, keys 2t+8, 2t+9): the C/D layout gave this same lane exactly those elements, as
    // c0 c1 and c2 c3 of key blocks 2 ks and 2 ks + 1. Each pair is rounded to the element type.
    CH06_UNROLL
    for (int ks = 0; ks < kKeySteps; ++ks) {
      const std::uint32_t p_frag[4] = {Ops::pack(s[2 * ks][0], s[2 * ks][1]), Ops::pack(s[2 * ks][2], s[2 * ks][3]),
                                       Ops::pack(s[2 * ks + 1][0], s[2 * ks + 1][1]),
                                       Ops::pack(s[2 * ks + 1][2], s[2 * ks + 1][3])};
      // V_j as B fragments: B = V_j (keys x d), and B's layout wants two consecutive keys of one
      // column in a register, while V_j's rows in shared memory hold consecutive columns of one
      // key: ldmatrix .trans transposes each 8 x 8 matrix on the way. Matrices (keys 0-7, d 0-7),
      // (keys 8-15, d 0-7), (keys 0-7, d 8-15), (keys 8-15, d 8-15): registers 0-1 are b0, b1 of
      // the first 8 columns of d, registers 2-3 of the next 8.
      CH06_UNROLL
      for (int nd2 = 0; nd2 < kDBlocks / 2; ++nd2) {
        std::uint32_t v_frag[4];
        simt::ldmatrix_x4_trans(
            v_frag, Vj + swizzled<HEAD_DIM>(ks * 16 + lane % 8 + ((lane / 8) % 2) * 8, nd2 * 16 + (lane / 16) * 8));
        const std::uint32_t b_lo[2] = {v_frag[0], v_frag[1]};
        const std::uint32_t b_hi[2] = {v_frag[2], v_frag[3]};
        Ops::mma(acc[2 * nd2], p_frag, b_lo);
        Ops::mma(acc[2 * nd2 + 1], p_frag, b_hi);
      }
    }
    __syncthreads();  // every warp is done with K_j and V_j before tile+2 is copied over them
  }

  // Lines 12-13: the quad's parts of l added up; divide once. A row that saw no key has l = 0:
  // O = 0, L = -inf. (A NaN score makes l NaN, and the NaN goes on into O and L.)
  float inv_l[2];
  float L_row[2];
  CH06_UNROLL
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(kFullMask, l[h], 1);
    l[h] += __shfl_xor_sync(kFullMask, l[h], 2);
    inv_l[h] = (l[h] == 0.0f) ? 0.0f : 1.0f / l[h];
    L_row[h] = (l[h] == 0.0f) ? -INFINITY : m[h] * 0.693147180559945309f + logf(l[h]);  // ln 2
  }

  // Line 14: O_i rounded to the element type, written into this warp's own 16 rows of Q_i's
  // shared memory (no other warp reads them, and this warp's ldmatrix of Q_i is long done), then
  // copied out 16 bytes at a time. Pair (c0, c1) of d block nd is row g, columns 8 nd + 2t, +1.
  CH06_UNROLL
  for (int nd = 0; nd < kDBlocks; ++nd) {
    const std::uint32_t lo = Ops::pack(acc[nd][0] * inv_l[0], acc[nd][1] * inv_l[0]);
    const std::uint32_t hi = Ops::pack(acc[nd][2] * inv_l[1], acc[nd][3] * inv_l[1]);
    store_pair(Qs + swizzled<HEAD_DIM>(warp_row0 + g, nd * 8 + 2 * t), lo);
    store_pair(Qs + swizzled<HEAD_DIM>(warp_row0 + g + 8, nd * 8 + 2 * t), hi);
  }
  __syncwarp();  // the warp's rows of O_i are complete in shared memory
  constexpr int kChunksPerRow = HEAD_DIM / 8;
  CH06_UNROLL
  for (int c = lane; c < kRowsPerWarp * kChunksPerRow; c += 32) {
    const int r = warp_row0 + c / kChunksPerRow;
    const int col = (c % kChunksPerRow) * 8;
    if (i0 + r < seq_len_q) {
      copy_16_bytes(O + (bh * seq_len_q + i0 + r) * HEAD_DIM + col, Qs + swizzled<HEAD_DIM>(r, col));
    }
  }
  // Line 15: L_i, by the first lane of each quad.
  if (t == 0) {
    const int i_lo = i0 + warp_row0 + g;
    if (i_lo < seq_len_q) L[bh * seq_len_q + i_lo] = L_row[0];
    if (i_lo + 8 < seq_len_q) L[bh * seq_len_q + i_lo + 8] = L_row[1];
  }
}

// One compiled instance (Element: the type of Q, K, V and O), launched on memory already on this
// backend's device, waiting for it or not as `mode` says (common/simt/launch_mode.h). Grid:
// (ceil(seq_len_q / Br), batch * heads); block: Br / 16 warps. Above 48 KiB of shared memory a GPU
// needs the kernel's opt-in first (a runtime call the first time only).
template <class Element, fa::KernelShape k>
void launch_instance(const void* Q, const void* K, const void* V, void* O, float* L, const DeviceProblem& p,
                     simt::LaunchMode mode) {
  constexpr int Br = k.tile.Br, Bc = k.tile.Bc;
  constexpr auto kernel = tensor_cores_kernel<Element, k.head_dim, Br, Bc>;
  constexpr std::size_t bytes = shared_elements(k.head_dim, Br, Bc) * sizeof(Element);
  simt::set_max_dynamic_shared_bytes<kernel>(bytes);
  const dim3 grid(static_cast<unsigned>((p.seq_len_q + Br - 1) / Br), static_cast<unsigned>(p.batch_heads));
  const auto scale_log2 = static_cast<float>(static_cast<double>(p.scale) * 1.4426950408889634);  // log2(e)
  simt::launch<kernel>(mode, grid, dim3(Br / kRowsPerWarp * 32), bytes, static_cast<const Element*>(Q),
                       static_cast<const Element*>(K), static_cast<const Element*>(V), static_cast<Element*>(O), L,
                       p.seq_len_q, p.seq_len_k, scale_log2, p.causal);
}

// The launch: the compiled instance for the problem's head_dim and tile (fa::dispatch) and its
// element type. Throws what simt::launch throws.
void launch_tensor_cores(const void* Q, const void* K, const void* V, void* O, float* L, const DeviceProblem& problem,
                         simt::LaunchMode mode) {
  fa::dispatch<kCompiled>(problem, [&]<fa::KernelShape k>() {
    if (problem.element == ElementType::bf16) return launch_instance<simt::bf16, k>(Q, K, V, O, L, problem, mode);
    launch_instance<simt::f16, k>(Q, K, V, O, L, problem, mode);
  });
}

// Host data in, host data out: Q, K, V rounded to the element type on their way to the device, O and
// L filled with NaN, the launch, O (widened to float32) and L back.
Result run_tensor_cores(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                        const DeviceProblem& problem) {
  const auto run = [&]<class Element>() {
    return fa::run_forward<Element, simt::DeviceBuffer>(
        Q, K, V, [&](const Element* q, const Element* k, const Element* v, Element* o, float* l) {
          launch_tensor_cores(q, k, v, o, l, problem, simt::LaunchMode::synchronous);
        });
  };
  if (problem.element == ElementType::bf16) return run.template operator()<simt::bf16>();
  return run.template operator()<simt::f16>();
}

}  // namespace ch06::SIMT_BACKEND
