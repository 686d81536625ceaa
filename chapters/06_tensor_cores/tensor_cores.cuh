// Chapter 06: the FlashAttention-2 forward kernel on tensor cores.
//
// What changed since chapter 05: the algorithm is the same (the same m, l, acc, the same tiles, the
// same causal mask and the same zeros and -inf for a row that sees no key); the machinery is not.
//   - Q, K, V and O are 16-bit numbers (bf16 or fp16, one template parameter); S, m, l, acc and L
//     stay float32.
//   - The two matrix products run on tensor cores: mma.sync m16n8k16 (16 x 16 times 16 x 8, plus a
//     16 x 8 float32 accumulator, per warp). A warp, not a thread, owns 32 query rows (two tiles of
//     16), and every matrix lives in registers spread over the warp's 32 lanes in the PTX ISA's
//     fragment layouts. Each K or V fragment read from shared memory feeds two mma, one per tile.
//   - Q_i is read from shared memory into A fragments (ldmatrix): once, kept in registers, at
//     d = 64; again in every key tile at d = 128, where the registers are needed for acc.
//   - P never goes through shared memory: the lanes that hold S in the accumulator layout hold
//     exactly the elements that the A operand of P V needs (see "line 10" below).
//   - K_j and V_j arrive by cp.async, double-buffered: tile j+1 is in flight while tile j is used.
//   - Shared memory rows are XOR-swizzled so that cp.async and ldmatrix are free of bank conflicts.
//
// The algorithm, for the block that owns query rows i0 .. i0+Br-1 of head bh, with the line
// numbers of Algorithm 1 of Dao 2023, FlashAttention-2 (forward pass); lines 1-2 (the split into
// blocks) are the grid, lines 3 and 16 the loop over blocks that the grid runs in parallel:
//    4. load Q_i (Br x d) into shared memory (cp.async), then into A fragments (ldmatrix)
//    5. per row: m = -inf, l = 0, acc = 0 (32 rows x d per warp, as mma accumulator fragments)
//    6. for each key tile j (skipping the tiles a causal mask hides entirely):
//    7.   K_j, V_j (Bc x d) are in shared memory; the copy of tile j+1 starts now (cp.async)
//    8.   S = Q_i K_j^T by mma (K_j as B fragments, ldmatrix); -inf where masked
//    9.   m_new = max(m, rowmax(S)); P = exp(S - m_new); l = l exp(m - m_new) + rowsum(P)
//   10.   acc = acc exp(m - m_new) + P V_j by mma (P as A fragments, straight from S's registers,
//         rounded to the element type; V_j as B fragments, ldmatrix .trans); m = m_new
//   12. O_i = acc / l (0 for a row that saw no key)
//   13. L_i = m + log(l) (-inf for such a row)
//   14. write O_i (element type, through shared memory so that the stores are 16 bytes wide)
//   15. write L_i (float32)
//
// The exponentials are base 2, as in FlashAttention-2's code: with c = scale * log2(e), m the
// running max of the unscaled scores S, exp(S * scale - m * scale) = exp2(S c - m c): one FFMA and
// one ex2.approx.ftz per score (simt::ex2_approx_ftz, which drops weights below 2^-126); L = m c
// ln(2) + ln(l) turns it back to natural logarithms.
//
// Who holds what (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type"): lane
// `lane` of a warp has g = lane / 4 (its row group) and t = lane % 4 (its place in the quad).
//   A (16 x 16, element pairs in 4 registers): a0 = (row g, cols 2t, 2t+1), a1 = (row g+8, same
//     cols), a2 = (row g, cols 2t+8, 2t+9), a3 = (row g+8, cols 2t+8, 2t+9)
//   B (16 x 8, "col"): b0 = (rows 2t, 2t+1 of col g), b1 = (rows 2t+8, 2t+9 of col g)
//   C/D (16 x 8 float): c0, c1 = (row g, cols 2t, 2t+1), c2, c3 = (row g+8, cols 2t, 2t+1)
// So a lane holds parts of two rows, g and g+8, of each 16-row tile, and the four lanes of a quad
// (same g) hold whole rows: a row's max and sum combine with two xor-shuffles (lanes ^1, ^2), as
// in chapter 05.
//
// Shared memory (dynamic, elements): Q_i [Br][d], K [2][Bc][d], V [2][Bc][d], each row of d
// elements = d/8 chunks of 16 bytes, chunk c of row r stored at chunk position c ^ (r % 8)
// (swizzled(), below). ldmatrix reads, per 8 x 8 matrix, one 16-byte chunk from each of 8
// consecutive rows: without the swizzle those 8 chunks sit d*2 bytes apart, a multiple of 128, all
// in the same four banks (an 8-way conflict); with it they land in 8 different 16-byte bank groups.
// For d = 128, Br = 128, Bc = 64 that is 96 KiB: above the 48 KiB default, so the host side asks
// for it (cudaFuncSetAttribute).
//
// Built three times, as every chapter's kernels are (ch06::cpu, ch06::cpu_profiled, ch06::gpu:
// fa::Builds, common/kernel_problem.h); on the CPU simt emulates mma.sync, ldmatrix and cp.async
// lane by lane.
//
// Source: Dao 2023, FlashAttention-2 (arXiv:2307.08691), Algorithm 1 and sections 3.1-3.3; the
// PTX ISA, "Warp-level matrix instructions" (mma.m16n8k16 fragments, ldmatrix) and "cp.async";
// the CUDA C++ Programming Guide, "Shared memory" (banks) and "Asynchronous data copies".
// What the machine code of each step costs: scripts/sass_report.py (docs/06, "The last factor of two").
// Run the demo: build/default/bin/ch06_tensor_cores
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "chapters/06_tensor_cores/tensor_cores.h"
#include "common/simt/simt.h"

namespace ch06::SIMT_BACKEND {

// A warp owns kRowsPerWarp query rows: two row tiles of 16 (the M of mma.m16n8k16), so that every K
// or V fragment that ldmatrix brings from shared memory feeds two mma instead of one.
inline constexpr int kMmaRows = 16;
inline constexpr int kRowTiles = 2;
inline constexpr int kRowsPerWarp = kRowTiles * kMmaRows;
// The warps per SM the register budget keeps room for (__launch_bounds__): with 8 warps, a thread
// may use up to 65536 / (8 * 32) = 256 registers, all that one thread can have (255).
inline constexpr int kMinWarpsPerSM = 8;
inline constexpr unsigned kFullMask = 0xffffffffu;

// Element offset of (row, col) in a [rows][HEAD_DIM] shared-memory tile: 16-byte chunk col / 8 of
// the row is stored at chunk position (col / 8) ^ (row % 8). Rows stay where they are; only the
// chunks inside a row are permuted, and only their low 3 bits, so a row of 8 or 16 chunks maps
// onto itself.
template <int HEAD_DIM>
__host__ __device__ __forceinline__ int swizzled(int row, int col) {
  return row * HEAD_DIM + ((((col >> 3) ^ (row & 7))) << 3) + (col & 7);
}

// The XOR of the swizzle touches only the low 3 bits of a chunk index, so moving 16 columns (two
// chunks) to the right in the same row flips bit 4 of the offset and above, and nothing else:
// swizzled(row, col + 16 k) = swizzled(row, col) ^ (16 k) for col < 16 (and col + 16 k < HEAD_DIM).
// The ldmatrix addresses below are computed once per lane for the first 16 columns, then moved
// this way: one XOR instead of the whole swizzle.
__host__ __device__ __forceinline__ int columns_right(int offset, int k) { return offset ^ (16 * k); }

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

// The two B fragments of one ldmatrix .x4 (registers 0-1: b0, b1 of the first 8 columns of B;
// registers 2-3: of the next 8), multiplied into both row tiles of the warp: for each tile rt,
// c[rt][n] += a[rt] B(first 8 columns) and c[rt][n + 1] += a[rt] B(next 8). Four mma, one fragment.
template <class Ops, int BLOCKS>
__device__ __forceinline__ void mma_row_tiles(float (&c)[kRowTiles][BLOCKS][4], int n,
                                              const std::uint32_t (&a)[kRowTiles][4], const std::uint32_t (&b)[4]) {
  const std::uint32_t b_lo[2] = {b[0], b[1]};
  const std::uint32_t b_hi[2] = {b[2], b[3]};
  SIMT_UNROLL
  for (int rt = 0; rt < kRowTiles; ++rt) {
    Ops::mma(c[rt][n], a[rt], b_lo);
    Ops::mma(c[rt][n + 1], a[rt], b_hi);
  }
}

// One thread's share of copying a [ROWS][HEAD_DIM] tile into swizzled shared memory by cp.async,
// 16 bytes (8 elements: a chunk) per copy, planned once: the addresses do not change from tile to
// tile, only the tile's first row does. The THREADS threads of a block copy the tile's chunks in
// order, thread tid the chunks tid, tid + THREADS, ...; THREADS being a multiple of the chunks of a
// row, all of a thread's chunks are in the same column, kRowStep rows apart. Its shared-memory
// offsets then differ by constants, except for the swizzle (row % 8): when kRowStep is not a
// multiple of 8, it repeats every kPeriod copies, and the thread keeps kPeriod offsets.
template <int HEAD_DIM, int ROWS, int THREADS>
struct TileCopy {
  static constexpr int kChunksPerRow = HEAD_DIM / 8;
  static_assert(THREADS % kChunksPerRow == 0 && (ROWS * kChunksPerRow) % THREADS == 0,
                "every thread copies whole chunks of one column");
  static constexpr int kCopies = ROWS * kChunksPerRow / THREADS;
  static constexpr int kRowStep = THREADS / kChunksPerRow;
  static constexpr int kPeriod = kRowStep % 8 == 0 ? 1 : kRowStep % 4 == 0 ? 2 : kRowStep % 2 == 0 ? 4 : 8;

  int global_offset;           // its first element in the source: row * HEAD_DIM + column
  int shared_offset[kPeriod];  // its first kPeriod chunks in the swizzled tile

  __device__ explicit TileCopy(int tid) : global_offset((tid / kChunksPerRow) * HEAD_DIM + (tid % kChunksPerRow) * 8) {
    SIMT_UNROLL
    for (int p = 0; p < kPeriod; ++p) {
      shared_offset[p] = swizzled<HEAD_DIM>(tid / kChunksPerRow + p * kRowStep, (tid % kChunksPerRow) * 8);
    }
  }
  // Offset of copy i in the tile: a constant away from one of the first kPeriod.
  __device__ int tile_offset(int i) const {
    return shared_offset[i % kPeriod] + (i / kPeriod) * kPeriod * kRowStep * HEAD_DIM;
  }

  // Starts the copy of rows row0 .. row0+ROWS-1 of `head` ([seq_len][HEAD_DIM], row-major) into
  // `tile`. A whole tile (every tile but the last) takes one instruction per copy: its addresses
  // are a register plus a constant. In the last, rows at or past seq_len are zero-filled (src-size
  // 0), and the mask then hides them; a zero-filling copy reads nothing and is given `any`, some
  // valid address (the tensor's first element).
  template <class Element>
  __device__ void start(Element* tile, const Element* head, int row0, int seq_len, const Element* any) const {
    const Element* source = head + row0 * HEAD_DIM + global_offset;
    if (row0 + ROWS <= seq_len) {
      SIMT_UNROLL
      for (int i = 0; i < kCopies; ++i) simt::cp_async_16(tile + tile_offset(i), source + i * kRowStep * HEAD_DIM);
    } else {
      // Copy i is inside when i * kRowStep < rows_left (this thread's first row is global_offset / HEAD_DIM).
      const int rows_left = seq_len - row0 - global_offset / HEAD_DIM;
      SIMT_UNROLL
      for (int i = 0; i < kCopies; ++i) {
        const bool inside = i * kRowStep < rows_left;
        simt::cp_async_16(tile + tile_offset(i), inside ? source + i * kRowStep * HEAD_DIM : any, inside);
      }
    }
  }

  // Multiplies every element this thread copied by `factor` (in float, rounded back), once its
  // copies have landed (cp_async_wait_group): before the barrier that shows them to other threads.
  template <class Element>
  __device__ void scale(Element* tile, float factor) const {
    SIMT_UNROLL
    for (int i = 0; i < kCopies; ++i) {
      Element* chunk = tile + tile_offset(i);
      SIMT_UNROLL
      for (int e = 0; e < 8; ++e) chunk[e] = Element(static_cast<float>(chunk[e]) * factor);
    }
  }
};

// Grid: (ceil(seq_len_q / Br), batch * heads); block: Br / kRowsPerWarp warps; dynamic shared
// memory: shared_elements(HEAD_DIM, Br, Bc) * 2 bytes.
// Q, O: [batch*heads, seq_len_q, HEAD_DIM]; K, V: [batch*heads, seq_len_k, HEAD_DIM], row-major,
// Element (bf16 or fp16), each head's rows 16-byte aligned; L: [batch*heads, seq_len_q], float32.
// scale_log2 = scale * log2(e), any finite value.
// __launch_bounds__: Br threads, and at least kMinWarpsPerSM warps per SM, so ptxas keeps the
// registers within 255 per thread (it spills rather than exceed them: scripts/sass_report.py says
// how much; docs/06, "The last factor of two").
template <class Element, int HEAD_DIM, int Br, int Bc>
__global__ void __launch_bounds__(Br / kRowsPerWarp * 32, kMinWarpsPerSM / (Br / kRowsPerWarp))
    tensor_cores_kernel(const Element* __restrict__ Q, const Element* __restrict__ K, const Element* __restrict__ V,
                        Element* __restrict__ O, float* __restrict__ L, int seq_len_q, int seq_len_k, float scale_log2,
                        bool causal) {
  static_assert(HEAD_DIM % 64 == 0, "a row must hold at least 8 chunks of 16 bytes for the swizzle");
  static_assert(Br % kRowsPerWarp == 0 && Bc % 16 == 0, "Br: 32 rows per warp; Bc: k-steps of 16 keys");
  constexpr int kWarps = Br / kRowsPerWarp;
  constexpr int kThreads = kWarps * 32;
  constexpr int kDSteps = HEAD_DIM / 16;  // k-steps of S = Q K^T (over d)
  constexpr int kDBlocks = HEAD_DIM / 8;  // n-blocks of O = P V (over d)
  constexpr int kKeyBlocks = Bc / 8;      // n-blocks of S (over keys)
  constexpr int kKeySteps = Bc / 16;      // k-steps of P V (over keys)
  // Q_i's A fragments stay in registers all loop long where they fit (d = 64: 32 registers). At
  // d = 128 they would need 64 on top of acc's 128 and s's 64: they are read from shared memory
  // again in every tile, one k-step at a time, as FlashAttention-2's own kernel does.
  constexpr bool kQInRegisters = HEAD_DIM <= 64;
  using Ops = ElementOps<Element>;

  SIMT_DYNAMIC_SHARED(Element, shared);
  Element* Qs = shared;                  // [Br][HEAD_DIM], later this block's O_i
  Element* Ks = Qs + Br * HEAD_DIM;      // [2][Bc][HEAD_DIM]
  Element* Vs = Ks + 2 * Bc * HEAD_DIM;  // [2][Bc][HEAD_DIM]

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int g = lane / 4;  // row group: this lane holds rows g and g+8 of each of its warp's row tiles
  const int t = lane % 4;  // place in the quad: columns 2t, 2t+1 of each 8-wide block
  const int i0 = static_cast<int>(blockIdx.x) * Br;
  const int warp_row0 = warp * kRowsPerWarp;  // the warp's first row within the block
  const std::size_t bh = blockIdx.y;
  const Element* Q_head = Q + bh * seq_len_q * HEAD_DIM;
  const Element* K_head = K + bh * seq_len_k * HEAD_DIM;
  const Element* V_head = V + bh * seq_len_k * HEAD_DIM;
  const TileCopy<HEAD_DIM, Br, kThreads> q_copy(tid);
  const TileCopy<HEAD_DIM, Bc, kThreads> kv_copy(tid);  // K and V tiles have the same shape

  // The causal mask: row i sees keys j < visible(i) (fa::visible_keys, common/kernel_problem.h). The
  // block's last real row sees the most keys: tiles from ceil(visible(last) / Bc) on are skipped
  // whole. Tiles wholly below the block's first row's diagonal, and not past seq_len_k, need no mask.
  auto visible = [&](int i) { return fa::visible_keys(i, seq_len_q, seq_len_k, causal); };
  const int last_row = (i0 + Br < seq_len_q ? i0 + Br : seq_len_q) - 1;
  const int num_tiles = (visible(last_row) + Bc - 1) / Bc;
  const int unmasked_keys = visible(i0);  // every row of the block sees keys 0 .. unmasked_keys-1

  // The exponent of line 9 is one FFMA, exp2(S c - m c) with c = scale log2(e), S the scores as
  // the mma gives them and m their row max: that max is the max of the scaled scores only when
  // c > 0. A scale <= 0 is moved into Q_i instead, once (S = (scale Q_i) K_j^T: Q_i times -1, or
  // times 0, exactly), and c is then |scale| log2(e), or 1.
  const float c = scale_log2 > 0.0f ? scale_log2 : (scale_log2 < 0.0f ? -scale_log2 : 1.0f);

  // Line 4: Q_i by cp.async (rows past seq_len_q are zeros), then K_0, V_0, each its own group.
  q_copy.start(Qs, Q_head, i0, seq_len_q, Q);
  simt::cp_async_commit_group();
  if (num_tiles > 0) {
    kv_copy.start(Ks, K_head, 0, seq_len_k, K);
    kv_copy.start(Vs, V_head, 0, seq_len_k, V);
  }
  simt::cp_async_commit_group();   // (an empty group when there is no tile: the waits stay uniform)
  simt::cp_async_wait_group<1>();  // this thread's part of Q_i has landed
  if (scale_log2 <= 0.0f) q_copy.scale(Qs, scale_log2 < 0.0f ? -1.0f : 0.0f);
  __syncthreads();  // ... and every other thread's

  // Q_i as A fragments: for k-step kd (columns 16 kd .. 16 kd + 15) of row tile rt, one ldmatrix
  // .x4 whose four 8 x 8 matrices are (rows 0-7, cols 0-7), (rows 8-15, cols 0-7), (rows 0-7,
  // cols 8-15), (rows 8-15, cols 8-15) of the tile: lanes 8m .. 8m+7 give the row addresses of
  // matrix m, so lane `lane` points at row lane % 16, column 8 (lane / 16). Matrix m lands in
  // register m, which is exactly a0 .. a3 of the A layout above.
  std::uint32_t q_frag[kDSteps][kRowTiles][4];  // all of them where kQInRegisters, else one k-step at a time
  const int q_lane = swizzled<HEAD_DIM>(warp_row0 + lane % 16, (lane / 16) * 8);
  auto load_q_fragments = [&](int kd) {
    SIMT_UNROLL
    for (int rt = 0; rt < kRowTiles; ++rt) {
      simt::ldmatrix_x4(q_frag[kd][rt], Qs + columns_right(q_lane, kd) + rt * kMmaRows * HEAD_DIM);
    }
  };
  if constexpr (kQInRegisters) {
    SIMT_UNROLL
    for (int kd = 0; kd < kDSteps; ++kd) load_q_fragments(kd);
  }

  // Line 5: the running state of this lane's four rows, [rt][h]. m is the running max of the
  // scores S as the mma gives them (not yet scaled); l is this lane's part of the row sum (its own
  // columns), the quad's four parts added once, at the end. acc: the accumulator fragments of O_i.
  float m[kRowTiles][2], l[kRowTiles][2];
  float acc[kRowTiles][kDBlocks][4];
  SIMT_UNROLL
  for (int rt = 0; rt < kRowTiles; ++rt) {
    m[rt][0] = m[rt][1] = -INFINITY;
    l[rt][0] = l[rt][1] = 0.0f;
    SIMT_UNROLL
    for (int nd = 0; nd < kDBlocks; ++nd) acc[rt][nd][0] = acc[rt][nd][1] = acc[rt][nd][2] = acc[rt][nd][3] = 0.0f;
  }

  // The lane's ldmatrix rows in K_j and V_j (see line 8 and line 10), for the first 16 columns.
  const int k_lane = swizzled<HEAD_DIM>(lane % 8 + (lane / 16) * 8, ((lane / 8) % 2) * 8);
  const int v_lane = swizzled<HEAD_DIM>(lane % 8 + ((lane / 8) % 2) * 8, (lane / 16) * 8);

  for (int tile = 0; tile < num_tiles; ++tile) {  // line 6
    const int j0 = tile * Bc;
    const int buffer = tile & 1;
    // This lane's ldmatrix offsets in this tile's buffer of K and V (its first 16 columns).
    const int k_at = buffer * Bc * HEAD_DIM + k_lane;
    const int v_at = buffer * Bc * HEAD_DIM + v_lane;

    // Line 7: start tile+1 into the other buffer (last read in the previous iteration, which every
    // thread has left: the barrier at the loop's end), then wait for tile `tile` only.
    if (tile + 1 < num_tiles) {
      const int next = (tile + 1) & 1;
      kv_copy.start(Ks + next * Bc * HEAD_DIM, K_head, j0 + Bc, seq_len_k, K);
      kv_copy.start(Vs + next * Bc * HEAD_DIM, V_head, j0 + Bc, seq_len_k, V);
      simt::cp_async_commit_group();
      simt::cp_async_wait_group<1>();  // all but the newest group: tile `tile` has landed
    } else {
      simt::cp_async_wait_group<0>();  // the last tile: nothing else in flight
    }
    __syncthreads();  // every thread's part of K_j and V_j has landed

    // Line 8: S = Q_i K_j^T. B = K_j^T, so B's column n is key n: B fragments come from K_j's rows
    // without a transpose. One ldmatrix .x4 covers 16 keys x 16 dims: matrices (keys 0-7, d 0-7),
    // (keys 0-7, d 8-15), (keys 8-15, d 0-7), (keys 8-15, d 8-15); registers 0-1 are b0, b1 of the
    // first 8 keys, registers 2-3 of the next 8. Each fragment serves both row tiles.
    float s[kRowTiles][kKeyBlocks][4];
    SIMT_UNROLL
    for (int rt = 0; rt < kRowTiles; ++rt) {
      SIMT_UNROLL
      for (int nb = 0; nb < kKeyBlocks; ++nb) s[rt][nb][0] = s[rt][nb][1] = s[rt][nb][2] = s[rt][nb][3] = 0.0f;
    }
    SIMT_UNROLL
    for (int kd = 0; kd < kDSteps; ++kd) {
      if constexpr (!kQInRegisters) load_q_fragments(kd);
      SIMT_UNROLL
      for (int nk = 0; nk < kKeySteps; ++nk) {
        std::uint32_t k_frag[4];
        simt::ldmatrix_x4(k_frag, Ks + columns_right(k_at, kd) + nk * 16 * HEAD_DIM);
        mma_row_tiles<Ops>(s, 2 * nk, q_frag[kd], k_frag);
      }
    }

    // Every score this lane holds: element e of key block nb of row tile rt is row g + 8 (e / 2)
    // of the tile, key j0 + 8 nb + 2t + e % 2.
    auto each_score = [&](auto&& f) {
      SIMT_UNROLL
      for (int rt = 0; rt < kRowTiles; ++rt) {
        SIMT_UNROLL
        for (int nb = 0; nb < kKeyBlocks; ++nb) {
          SIMT_UNROLL
          for (int e = 0; e < 4; ++e) f(rt, nb, e);
        }
      }
    };
    // The mask, where the tile needs it.
    if (j0 + Bc > unmasked_keys) {  // a tail tile or a tile on the diagonal
      // graded 06b: the mask: the row i and the key of each score this lane holds, -inf where i does not see it
      each_score([&](int rt, int nb, int e) {
        const int i = i0 + warp_row0 + rt * kMmaRows + g + 8 * (e / 2);
        if (j0 + nb * 8 + 2 * t + (e & 1) >= visible(i)) s[rt][nb][e] = -INFINITY;
      });
      // end graded
    }

    // Line 9: the new max of each row: this lane's columns, then its quad (lanes ^1, ^2).
    float m_new[kRowTiles][2], m_safe[kRowTiles][2], rescale[kRowTiles][2];
    SIMT_UNROLL
    for (int rt = 0; rt < kRowTiles; ++rt) {
      SIMT_UNROLL
      for (int h = 0; h < 2; ++h) {
        float tile_max = -INFINITY;
        SIMT_UNROLL
        for (int nb = 0; nb < kKeyBlocks; ++nb) {
          tile_max = fmaxf(tile_max, fmaxf(s[rt][nb][2 * h], s[rt][nb][2 * h + 1]));
        }
        tile_max = fmaxf(tile_max, __shfl_xor_sync(kFullMask, tile_max, 1));
        tile_max = fmaxf(tile_max, __shfl_xor_sync(kFullMask, tile_max, 2));
        m_new[rt][h] = fmaxf(m[rt][h], tile_max);
        // While a row has seen only masked keys m_new is -inf, and -inf - (-inf) would be NaN;
        // subtracting 0 instead makes every term exp2(-inf) = 0, so l and acc stay 0 (chapter 05).
        m_safe[rt][h] = (m_new[rt][h] == -INFINITY) ? 0.0f : m_new[rt][h];
        // exp(m_old - m_new), scaled; 0 on the row's first seen tile (m = -inf)
        rescale[rt][h] = simt::ex2_approx_ftz(fmaf(m[rt][h], c, -m_safe[rt][h] * c));
      }
    }
    // Line 9: P = exp(S - m_new) in place of S, each one FFMA and one ex2 (in log2 units: exp(x)
    // is exp2(x log2(e))), and this lane's part of each row's sum; l rescaled.
    each_score([&](int rt, int nb, int e) {
      s[rt][nb][e] = simt::ex2_approx_ftz(fmaf(s[rt][nb][e], c, -m_safe[rt][e / 2] * c));
    });
    SIMT_UNROLL
    for (int rt = 0; rt < kRowTiles; ++rt) {
      SIMT_UNROLL
      for (int h = 0; h < 2; ++h) {
        float tile_sum = 0.0f;
        SIMT_UNROLL
        for (int nb = 0; nb < kKeyBlocks; ++nb) tile_sum += s[rt][nb][2 * h] + s[rt][nb][2 * h + 1];
        l[rt][h] = l[rt][h] * rescale[rt][h] + tile_sum;
      }
    }

    // Line 10: acc = acc exp(m - m_new) + P V_j. First the rescale of what is already there.
    SIMT_UNROLL
    for (int rt = 0; rt < kRowTiles; ++rt) {
      SIMT_UNROLL
      for (int nd = 0; nd < kDBlocks; ++nd) {
        acc[rt][nd][0] *= rescale[rt][0];
        acc[rt][nd][1] *= rescale[rt][0];
        acc[rt][nd][2] *= rescale[rt][1];
        acc[rt][nd][3] *= rescale[rt][1];
      }
    }
    // graded 06a: line 10's product P V_j: P as A fragments from S's registers, V_j as B fragments
    // P as A fragments, with no trip through shared memory. For keys 16 ks .. 16 ks + 15 the A
    // fragment needs (row g, keys 2t, 2t+1), (row g+8, keys 2t, 2t+1), (row g, keys 2t+8, 2t+9),
    // (row g+8, keys 2t+8, 2t+9): the C/D layout gave this same lane exactly those elements, as
    // c0 c1 and c2 c3 of key blocks 2 ks and 2 ks + 1. Each pair is rounded to the element type
    // (all of them now: half the registers of the floats).
    std::uint32_t p_frag[kKeySteps][kRowTiles][4];
    SIMT_UNROLL
    for (int ks = 0; ks < kKeySteps; ++ks) {
      SIMT_UNROLL
      for (int rt = 0; rt < kRowTiles; ++rt) {
        const float(&lo)[4] = s[rt][2 * ks];
        const float(&hi)[4] = s[rt][2 * ks + 1];
        p_frag[ks][rt][0] = Ops::pack(lo[0], lo[1]);
        p_frag[ks][rt][1] = Ops::pack(lo[2], lo[3]);
        p_frag[ks][rt][2] = Ops::pack(hi[0], hi[1]);
        p_frag[ks][rt][3] = Ops::pack(hi[2], hi[3]);
      }
    }
    // V_j as B fragments: B = V_j (keys x d), and B's layout wants two consecutive keys of one
    // column in a register, while V_j's rows in shared memory hold consecutive columns of one key:
    // ldmatrix .trans transposes each 8 x 8 matrix on the way. Matrices (keys 0-7, d 0-7), (keys
    // 8-15, d 0-7), (keys 0-7, d 8-15), (keys 8-15, d 8-15): registers 0-1 are b0, b1 of the first 8
    // columns of d, registers 2-3 of the next 8. Each fragment serves both row tiles. The columns
    // of d go outside and the keys inside: one address (an XOR) per 16 columns, from which the key
    // steps are constants, and one pair of acc fragments per row tile at a time.
    SIMT_UNROLL
    for (int nd2 = 0; nd2 < kDBlocks / 2; ++nd2) {
      SIMT_UNROLL
      for (int ks = 0; ks < kKeySteps; ++ks) {
        std::uint32_t v_frag[4];
        simt::ldmatrix_x4_trans(v_frag, Vs + columns_right(v_at, nd2) + ks * 16 * HEAD_DIM);
        mma_row_tiles<Ops>(acc, 2 * nd2, p_frag[ks], v_frag);
      }
    }
    // end graded
    SIMT_UNROLL
    for (int rt = 0; rt < kRowTiles; ++rt) {
      m[rt][0] = m_new[rt][0];  // line 10: m = m_new
      m[rt][1] = m_new[rt][1];
    }
    __syncthreads();  // every warp is done with K_j and V_j before tile+2 is copied over them
  }

  // Lines 12-13: the quad's parts of l added up; divide once; L in natural logarithms,
  // m c ln(2) + ln(l). A row that saw no key has l = 0: O = 0, L = -inf. (A NaN score makes l
  // NaN, and the NaN goes on into O and L.)
  float inv_l[kRowTiles][2];
  float L_row[kRowTiles][2];
  SIMT_UNROLL
  for (int rt = 0; rt < kRowTiles; ++rt) {
    SIMT_UNROLL
    for (int h = 0; h < 2; ++h) {
      l[rt][h] += __shfl_xor_sync(kFullMask, l[rt][h], 1);
      l[rt][h] += __shfl_xor_sync(kFullMask, l[rt][h], 2);
      inv_l[rt][h] = (l[rt][h] == 0.0f) ? 0.0f : 1.0f / l[rt][h];
      L_row[rt][h] = (l[rt][h] == 0.0f) ? -INFINITY : m[rt][h] * c * 0.693147180559945309f + logf(l[rt][h]);  // ln 2
    }
  }

  // Line 14: O_i rounded to the element type, written into this warp's own rows of Q_i's shared
  // memory (no other warp reads them, and this warp's last ldmatrix of Q_i is done), then copied
  // out 16 bytes at a time. Pair (c0, c1) of d block nd is row g, columns 8 nd + 2t, +1.
  SIMT_UNROLL
  for (int rt = 0; rt < kRowTiles; ++rt) {
    const int row = warp_row0 + rt * kMmaRows + g;
    SIMT_UNROLL
    for (int nd = 0; nd < kDBlocks; ++nd) {
      const std::uint32_t lo = Ops::pack(acc[rt][nd][0] * inv_l[rt][0], acc[rt][nd][1] * inv_l[rt][0]);
      const std::uint32_t hi = Ops::pack(acc[rt][nd][2] * inv_l[rt][1], acc[rt][nd][3] * inv_l[rt][1]);
      simt::store_word(Qs + swizzled<HEAD_DIM>(row, nd * 8 + 2 * t), lo);
      simt::store_word(Qs + swizzled<HEAD_DIM>(row + 8, nd * 8 + 2 * t), hi);
    }
  }
  __syncwarp();  // the warp's rows of O_i are complete in shared memory
  constexpr int kChunksPerRow = HEAD_DIM / 8;
  SIMT_UNROLL
  for (int chunk = lane; chunk < kRowsPerWarp * kChunksPerRow; chunk += 32) {
    const int r = warp_row0 + chunk / kChunksPerRow;
    const int col = (chunk % kChunksPerRow) * 8;
    if (i0 + r < seq_len_q) {
      simt::copy_16_bytes(O + (bh * seq_len_q + i0 + r) * HEAD_DIM + col, Qs + swizzled<HEAD_DIM>(r, col));
    }
  }
  // graded 06c: line 15, L_i: which lane writes the L of which rows
  // Line 15: L_i, by the first lane of each quad.
  if (t == 0) {
    SIMT_UNROLL
    for (int rt = 0; rt < kRowTiles; ++rt) {
      const int i = i0 + warp_row0 + rt * kMmaRows + g;
      if (i < seq_len_q) L[bh * seq_len_q + i] = L_row[rt][0];
      if (i + 8 < seq_len_q) L[bh * seq_len_q + i + 8] = L_row[rt][1];
    }
  }
  // end graded
}

// One compiled instance (Element: the type of Q, K, V and O), launched on memory already on this
// backend's device, waiting for it or not as `mode` says (common/simt/runtime/launch_mode.h). Grid:
// (ceil(seq_len_q / Br), batch * heads); block: Br / 32 warps. Above 48 KiB of shared memory a GPU
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

// Every compiled instance's launch for one element type, in kCompiled's order.
template <class Element, std::size_t... n>
constexpr auto instances(std::index_sequence<n...>) {
  return std::array{&launch_instance<Element, kCompiled[n]>...};
}
template <class Element>
inline constexpr auto kInstances = instances<Element>(std::make_index_sequence<kCompiled.size()>{});

// The launch of the instance compiled for the problem's element type, head_dim and tile
// (fa::compiled_index). Throws what simt::launch throws.
void launch_tensor_cores(const void* Q, const void* K, const void* V, void* O, float* L, const DeviceProblem& problem,
                         simt::LaunchMode mode) {
  const std::size_t n = fa::compiled_index(problem, kCompiled);
  if (problem.element == ElementType::bf16) return kInstances<simt::bf16>[n](Q, K, V, O, L, problem, mode);
  kInstances<simt::f16>[n](Q, K, V, O, L, problem, mode);
}

// Host data in, host data out, for one element type: Q, K, V rounded to it on their way to the
// device, O and L filled with NaN (simt::poisoned: an element the kernel does not write cannot
// pass for a result, and simt's race checker reports a read of one), the launch, O (widened to
// float32, exactly) and L back.
template <class Element>
Result run_typed(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                 const DeviceProblem& problem) {
  const auto q = simt::to_device<Element>(Q.values), k = simt::to_device<Element>(K.values),
             v = simt::to_device<Element>(V.values);
  auto o = simt::poisoned<Element>(Q.values.size());
  auto l = simt::poisoned<float>(Q.shape.batch * Q.shape.heads * Q.shape.seq_len);

  const auto start = std::chrono::steady_clock::now();
  kInstances<Element>[fa::compiled_index(problem, kCompiled)](q.data(), k.data(), v.data(), o.data(), l.data(), problem,
                                                              simt::LaunchMode::synchronous);
  const double elapsed_ms = fa::milliseconds_since(start);
  return {fa::Tensor4<float>(Q.shape, simt::to_host_float(o)), l.to_host(), elapsed_ms};
}

// Host data in, host data out: the run for the problem's element type.
Result run_tensor_cores(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                        const DeviceProblem& problem) {
  if (problem.element == ElementType::bf16) return run_typed<simt::bf16>(Q, K, V, problem);
  return run_typed<simt::f16>(Q, K, V, problem);
}

}  // namespace ch06::SIMT_BACKEND
