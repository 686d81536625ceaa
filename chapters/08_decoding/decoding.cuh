// Chapter 08: split-KV decoding (Flash-Decoding) over a paged KV cache, with grouped-query heads.
//
// What changed since chapter 05: the recurrence is the same (m, l, acc, m_new, m_safe, rescale,
// the same order, the same zeros and -inf for a row that sees no key); the shape of the work is not.
//   - Few query rows, many keys. A decoding step has seq_len_q = 1 (or a few) new tokens per
//     sequence: chapter 05's grid, one block per Br query rows, would have batch x heads blocks,
//     often fewer than the GPU's SMs, each walking the whole cache alone. Here the keys of each
//     sequence are split into `splits` chunks, one block each (blockIdx.x), and each block writes a
//     normalised partial (O_i, L_i) of its chunk; combine_kernel merges them (lines 16-24 below).
//   - Grouped-query heads. The query heads h = g * group ... g * group + group - 1 all read K/V head
//     g. A block owns one K/V head g of one sequence b and packs the rows of its whole group into
//     its Br rows (row r = new token r % seq_len_q of head g * group + r / seq_len_q), so each K/V
//     tile is read from memory once and used by every row of the group in shared memory.
//   - A paged cache. Key j of sequence b lives on pool page block_table[b][j / page_size], row
//     j % page_size: each key row of a tile is found through the table (line 7), so a tile may
//     cross pages of any size.
//   - Each sequence has its own length (cache_seqlens[b]): a chunk past it is empty, a tile past it
//     is cut short, and the causal mask is measured from it.
//   - The cache may be float32, bf16 or fp16 (the Element template parameter); every sum is float32.
//
// The split kernel, for block (split s, sequence b, K/V head g, row block z); the line numbers of
// Dao 2023, FlashAttention-2, Algorithm 1 where a line is one of its lines:
//    4. load the block's Br packed query rows into shared memory (as float32)
//    5. per row: m = -inf, l = 0, acc = 0
//    6. for each key tile j of this split's chunk of the sequence (whole tiles of Bc keys; a chunk
//       is ceil(tiles / splits) tiles), up to the last key a row of the block sees:
//    7.   K_j, V_j arrive by cp.async through the block table (tile j+1 starts while j is used)
//    8.   S = Q K_j^T * scale; -inf past the sequence's length or where the causal mask hides the key
//    9.   m_new = max(m, rowmax(S)); P = exp(S - m_new); l = l * exp(m - m_new) + rowsum(P)
//   10.   acc = acc * exp(m - m_new) + P V_j; m = m_new
//   12. O_s = acc / l, the partial normalised (0 for a row that saw no key in the chunk)
//   13. L_s = m + log(l) (-inf for such a row)
//   14-15. write O_s and L_s to the partials (with one split, to O and L themselves: done)
// and the combine kernel, one warp per output row, the same recurrence with the partials as its
// "keys", L_s as their scores and O_s as their values:
//   16. m = -inf, l = 0, acc = 0 (or, folding into a running result: m = L, l = 1, acc = O)
//   17. for each partial s:
//   18.   m_new = max(m, L_s); m_safe = m_new, or 0 while it is -inf
//   19.   rescale = exp(m - m_safe)
//   20.   l = l * rescale + exp(L_s - m_safe)
//   21.   acc = acc * rescale + exp(L_s - m_safe) O_s
//   22.   m = m_new
//   23. O = acc / l (0 when l = 0)
//   24. L = m + log(l) (-inf when l = 0)
//
// Who does what in a block of kThreads (128) threads; each phase is one simple mapping, and the
// barriers between them hand S and P over in shared memory:
//   line 8 (S):      thread t owns key t % Bc of the tile and Br / 2 rows (t / Bc picks which
//                    half): it reads its key's row of K_j 16 bytes at a time and uses each value
//                    for all its rows (registers), the rows' Q values coming as broadcasts
//   line 9 (P, m, l): kThreads / Br threads per row, each Bc / (kThreads / Br) of its scores; the
//                    row's max and sum by xor-shuffles, as in chapter 05; these threads hold m and l
//   line 10 (acc):   thread t owns 4 output columns and Br / (kThreads / (head_dim / 4)) rows; it
//                    reads V_j's rows 4 columns at a time, P 4 keys at a time (broadcasts)
//
// Shared memory (dynamic): Q [Br][head_dim] float32; S and then P [Br][Bc + kThreads / Br] float32
// (the padding puts a warp's rows in different banks in line 9); K and V [2][Bc][head_dim + one
// 16-byte chunk] elements (two stages for the double buffer; the extra chunk makes a row's start
// move by an odd number of 16-byte bank groups, so line 8's 32 keys of a warp, read 16 bytes each,
// fall in different banks); per row its rescale and, at the end, its m and l.
//
// Decoding is memory-bound: the cache is read once (per row block; one for rows_per_kv_head <= Br)
// and everything else is small. The kernel keeps bytes in flight with a double buffer (as chapter
// 06), not with a second block per SM, because the split count aims at one wave of blocks.
//
// Built three times, as every chapter's kernels are (ch08::cpu, ch08::cpu_profiled, ch08::gpu:
// fa::Builds, common/kernel_problem.h). The rest of the program calls it through decoding.h.
//
// Source: Dao, Haziza, Massa and Sizov 2023, "Flash-Decoding for long-context inference" (split
// and reduce); Dao 2023, FlashAttention-2 (arXiv:2307.08691), Algorithm 1; Kwon et al. 2023,
// PagedAttention (the block table); Ainslie et al. 2023, GQA; the PTX ISA, "cp.async"; the CUDA C++
// Programming Guide, "Shared memory" (banks).
// Run the demo: build/default/bin/ch08_decoding
#pragma once

#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "chapters/08_decoding/decoding.h"
#include "common/simt/simt.h"

namespace ch08::SIMT_BACKEND {

inline constexpr int kThreads = kSplitThreads;              // threads of a split block, and of a combine block
inline constexpr int kCombineRowsPerBlock = kThreads / 32;  // one warp per output row
inline constexpr unsigned kFullMask = 0xffffffffu;

// The element type of a CacheType on this backend.
template <CacheType T>
using ElementOf =
    std::conditional_t<T == CacheType::float32, float, std::conditional_t<T == CacheType::bf16, simt::bf16, simt::f16>>;

// The blocks per SM that __launch_bounds__ promises nvcc for each tile, which caps the registers
// per thread at 65536 / (blocks x kThreads): one for Br = 8 (without a promise nvcc held the
// head_dim 128 instances of a 16-bit cache to 64 registers and spilled); none (0) for Br = 32, where
// nvcc's own choice, 116 to 166 registers, does not spill (given a cap, it unrolled up to it and
// spilled). Measured with nvcc 13.0, -Xptxas -v, sm_80: no instance spills.
template <int Br>
inline constexpr int kMinBlocksPerSm = Br <= 8 ? 1 : 0;

#if !defined(__CUDACC__)
// On the CPU, the 8 or 16 bytes of one vector access as one value: GCC's and Clang's vector types,
// which both compilers load and store whole. (A std::memcpy between the kernel's memory and a local
// array is one access for GCC, but Clang's optimiser (SROA) splits it into one load or store per
// element, and simt's profile would count those narrower accesses and the bank conflicts they make.)
typedef std::uint32_t Bytes16 __attribute__((vector_size(16)));
typedef std::uint32_t Bytes8 __attribute__((vector_size(8)));
#endif

// N consecutive elements at `src` read in one access of N * sizeof(Element) bytes (8 or 16; src
// aligned to it), as float32 (exact: every bf16 and fp16 value is a float). On the GPU one vector
// load; on the CPU one load of a vector type, which simt's profile counts as one access of that size.
template <int N, class Element>
__device__ __forceinline__ void load_as_float(float (&out)[N], const Element* src) {
  constexpr std::size_t kBytes = N * sizeof(Element);
  static_assert(kBytes == 8 || kBytes == 16, "one 8- or 16-byte access");
#if defined(__CUDACC__)
  // The 32-bit words of the access, each element taken out of its word's bits, so that nothing
  // goes through local memory: a float is its word; a bf16 is a float's upper 16 bits; an fp16
  // converts from its 16 bits (element e is in the lower half of word e / 2 when e is even).
  std::uint32_t words[kBytes / 4];
  if constexpr (kBytes == 16) {
    const uint4 w = *reinterpret_cast<const uint4*>(src);
    words[0] = w.x, words[1] = w.y, words[2] = w.z, words[3] = w.w;
  } else {
    const uint2 w = *reinterpret_cast<const uint2*>(src);
    words[0] = w.x, words[1] = w.y;
  }
  SIMT_UNROLL
  for (int e = 0; e < N; ++e) {
    if constexpr (std::is_same_v<Element, float>) {
      out[e] = __uint_as_float(words[e]);
    } else {
      const std::uint32_t bits = e % 2 == 0 ? words[e / 2] & 0xffffu : words[e / 2] >> 16;
      if constexpr (std::is_same_v<Element, simt::bf16>) {
        out[e] = __uint_as_float(bits << 16);
      } else {
        out[e] = __half2float(__ushort_as_half(static_cast<unsigned short>(bits)));
      }
    }
  }
#else
  std::conditional_t<kBytes == 16, Bytes16, Bytes8> bytes;
  std::memcpy(&bytes, src, kBytes);  // one load of kBytes
  Element raw[N];                    // (not a std::bit_cast to std::array: Clang then loads the 16 bytes in two halves)
  std::memcpy(static_cast<void*>(raw), &bytes, kBytes);
  for (int e = 0; e < N; ++e) out[e] = static_cast<float>(raw[e]);
#endif
}

// Four floats written to `dst` (16-byte aligned) in one 16-byte access, as load_as_float reads them.
__device__ __forceinline__ void store_4_floats(float* dst, const float (&v)[4]) {
#if defined(__CUDACC__)
  *reinterpret_cast<float4*>(dst) = make_float4(v[0], v[1], v[2], v[3]);
#else
  Bytes16 bytes;
  std::memcpy(&bytes, v, sizeof v);
  std::memcpy(dst, &bytes, sizeof bytes);  // one store of 16 bytes
#endif
}

// The shapes of one instance of the split kernel, and its shared memory, in one place.
template <class Element, int HEAD_DIM, int Br, int Bc>
struct SplitShape {
  static constexpr int kVec = 16 / static_cast<int>(sizeof(Element));  // elements per 16-byte chunk
  static constexpr int kChunksPerRow = HEAD_DIM / kVec;                // chunks per row of K or V
  static constexpr int kPitch = HEAD_DIM + kVec;                       // a K or V row in shared memory
  static constexpr int kThreadsPerRow = kThreads / Br;                 // line 9
  static constexpr int kPPitch = Bc + kThreadsPerRow;                  // a row of S and P
  static constexpr int kRowsS = Br / (kThreads / Bc);                  // line 8: rows per thread
  static constexpr int kColQuads = HEAD_DIM / 4;                       // line 10: 4 columns per thread
  static constexpr int kRowsO = Br / (kThreads / kColQuads);           // line 10: rows per thread
  static_assert(kThreads % Bc == 0 && Br % (kThreads / Bc) == 0, "line 8: whole keys and rows per thread");
  static_assert(kThreads % Br == 0 && Bc % (kThreads / Br) == 0, "line 9: whole threads and keys per row");
  static_assert((kThreadsPerRow & (kThreadsPerRow - 1)) == 0 && kThreadsPerRow <= 32, "line 9: a row in one warp");
  static_assert(kThreads % kColQuads == 0 && Br % (kThreads / kColQuads) == 0, "line 10: whole rows per thread");
  static_assert(32 % kChunksPerRow == 0, "line 7: a row's chunks are copied by lanes of one warp");
  static_assert(Bc % 4 == 0 && (Bc * kChunksPerRow) % kThreads == 0, "line 7: whole chunks per thread");

  // Byte offsets of the parts of dynamic shared memory, each 16-byte aligned.
  static constexpr std::size_t kQBytes = sizeof(float) * Br * HEAD_DIM;
  static constexpr std::size_t kPBytes = sizeof(float) * Br * kPPitch;
  static constexpr std::size_t kRowBytes = sizeof(float) * 4 * Br;  // rescale, m, l (and a spare)
  static constexpr std::size_t kStageBytes = sizeof(Element) * Bc * kPitch;
  static constexpr std::size_t kQ = 0, kP = kQ + kQBytes, kRow = kP + kPBytes, kK = kRow + kRowBytes,
                               kV = kK + 2 * kStageBytes, kTotal = kV + 2 * kStageBytes;
};

// Line 7: copies keys j0 .. j0+Bc-1 of K/V head g of one sequence into a K and a V stage by
// cp.async, 16 bytes per copy, through the sequence's row of the block table. Keys at or past
// seq_len are zero-filled (a V row that is never written must not be NaN: P is 0 there, and
// 0 * NaN is NaN). The first lane of a key row's chunks reads its table entry and hands it to the
// others by a shuffle, so each entry is read once per tile.
template <class Element, int HEAD_DIM, int Br, int Bc>
__device__ __forceinline__ void copy_kv_tile_async(Element* Ks, Element* Vs, const Element* K, const Element* V,
                                                   const int* table_row, int j0, int seq_len, int g,
                                                   const DecodeProblem& p, int tid) {
  using Shape = SplitShape<Element, HEAD_DIM, Br, Bc>;
  const int lane = tid % 32;
  SIMT_UNROLL
  for (int c = tid; c < Bc * Shape::kChunksPerRow; c += kThreads) {
    const int r = c / Shape::kChunksPerRow;      // the tile's key row
    const int chunk = c % Shape::kChunksPerRow;  // the 16-byte chunk of it
    const int j = j0 + r;
    const bool inside = j < seq_len;
    int page = 0;
    if (chunk == 0 && inside) page = table_row[j / p.page_size];
    page = __shfl_sync(kFullMask, page, lane - chunk);  // from the lane that copies chunk 0 of row r
    // Row j % page_size of head g of the pool page: [pages, kv_heads, page_size, HEAD_DIM].
    const std::size_t row = (static_cast<std::size_t>(page) * p.kv_heads + g) * p.page_size + j % p.page_size;
    const std::size_t at = row * HEAD_DIM + static_cast<std::size_t>(chunk) * Shape::kVec;
    // A zero-filling copy reads nothing; it is given the pool's first address, a valid one.
    simt::cp_async_16(Ks + r * Shape::kPitch + chunk * Shape::kVec, inside ? K + at : K, inside);
    simt::cp_async_16(Vs + r * Shape::kPitch + chunk * Shape::kVec, inside ? V + at : V, inside);
  }
}

// Grid: (splits, batch * kv_heads, row_blocks); block: kThreads; dynamic shared memory:
// SplitShape::kTotal bytes.
// Q: [batch, heads, seq_len_q, HEAD_DIM]; K, V: [pages, kv_heads, page_size, HEAD_DIM] (Element,
// row-major); block_table [batch, pages_per_seq], cache_seqlens [batch] (int32); O_parts
// [splits, batch * heads * seq_len_q, HEAD_DIM], L_parts [splits, batch * heads * seq_len_q] (float32).
template <class Element, int HEAD_DIM, int Br, int Bc>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm<Br>)
    split_kv_kernel(const Element* __restrict__ Q, const Element* __restrict__ K, const Element* __restrict__ V,
                    const int* __restrict__ block_table, const int* __restrict__ cache_seqlens,
                    float* __restrict__ O_parts, float* __restrict__ L_parts, DecodeProblem p) {
  using Shape = SplitShape<Element, HEAD_DIM, Br, Bc>;
  constexpr int kVec = Shape::kVec, kPitch = Shape::kPitch, kPPitch = Shape::kPPitch;

  SIMT_DYNAMIC_SHARED(unsigned char, shared);
  float* Qs = reinterpret_cast<float*>(shared + Shape::kQ);             // [Br][HEAD_DIM]
  float* Ps = reinterpret_cast<float*>(shared + Shape::kP);             // [Br][kPPitch]: S, then P
  float* row_rescale = reinterpret_cast<float*>(shared + Shape::kRow);  // [Br]
  float* row_m = row_rescale + Br;                                      // [Br]
  float* row_l = row_m + Br;                                            // [Br]
  Element* Ks = reinterpret_cast<Element*>(shared + Shape::kK);         // [2][Bc][kPitch]
  Element* Vs = reinterpret_cast<Element*>(shared + Shape::kV);         // [2][Bc][kPitch]
  __shared__ int seq_len_shared;

  const int tid = static_cast<int>(threadIdx.x);
  const int split = static_cast<int>(blockIdx.x);
  const int b = static_cast<int>(blockIdx.y) / p.kv_heads;
  const int g = static_cast<int>(blockIdx.y) % p.kv_heads;
  const int r0 = static_cast<int>(blockIdx.z) * Br;  // the block's first packed row
  const int rows = p.rows_per_kv_head();             // packed rows of K/V head g: group heads x seq_len_q
  const int group = p.group();

  // Packed row r -> its row of Q, O and L ([batch, heads, seq_len_q] flattened): head g * group +
  // r / seq_len_q, new token r % seq_len_q.
  auto output_row = [&](int r) {
    const int h = g * group + r / p.seq_len_q;
    return (static_cast<std::size_t>(b) * p.heads + h) * p.seq_len_q + r % p.seq_len_q;
  };

  // Line 4: the block's rows of Q, as float32; rows past the group's are zeros (they see no key and
  // are never written). One element per thread and step, so that the stores are conflict-free.
  if (tid == 0) seq_len_shared = cache_seqlens[b];
  for (int idx = tid; idx < Br * HEAD_DIM; idx += kThreads) {
    const int r = r0 + idx / HEAD_DIM;
    Qs[idx] = r < rows ? static_cast<float>(Q[output_row(r) * HEAD_DIM + idx % HEAD_DIM]) : 0.0f;
  }
  __syncthreads();  // Q and the sequence's length are in shared memory
  const int seq_len = seq_len_shared;

  // This split's chunk of the sequence, in whole tiles: [tile_begin, tile_end). Causal: no row of
  // the block sees past key visible_max - 1, the last row's (the largest new-token index in it).
  const int tiles = (seq_len + Bc - 1) / Bc;
  const int per_split = (tiles + p.splits - 1) / p.splits;
  const int r_last = (r0 + Br < rows ? r0 + Br : rows) - 1;
  const int i_max = r_last / p.seq_len_q > r0 / p.seq_len_q ? p.seq_len_q - 1 : r_last % p.seq_len_q;
  const int visible_max = fa::visible_keys(i_max, p.seq_len_q, seq_len, p.causal);
  const int tile_begin = split * per_split;
  int tile_end = (split + 1) * per_split < tiles ? (split + 1) * per_split : tiles;
  if (tile_end > (visible_max + Bc - 1) / Bc) tile_end = (visible_max + Bc - 1) / Bc;
  const int* table_row = block_table + static_cast<std::size_t>(b) * p.pages_per_seq;

  // Line 8's thread: one key of the tile, kRowsS rows; the keys each of those rows sees.
  const int key = tid % Bc;
  const int s_row0 = (tid / Bc) * Shape::kRowsS;
  int visible[Shape::kRowsS];
  SIMT_UNROLL
  for (int n = 0; n < Shape::kRowsS; ++n) {
    const int r = r0 + s_row0 + n;
    visible[n] = r < rows ? fa::visible_keys(r % p.seq_len_q, p.seq_len_q, seq_len, p.causal) : 0;
  }
  // Line 9's thread: kThreadsPerRow threads per row; they hold the row's m and l (line 5).
  const int p_row = tid / Shape::kThreadsPerRow;
  const int p_lane = tid % Shape::kThreadsPerRow;
  float m = -INFINITY;
  float l = 0.0f;
  // Line 10's thread: columns col0 .. col0+3 of rows o_row0 .. o_row0+kRowsO-1 (line 5).
  const int col0 = (tid % Shape::kColQuads) * 4;
  const int o_row0 = (tid / Shape::kColQuads) * Shape::kRowsO;
  float acc[Shape::kRowsO][4];
  SIMT_UNROLL
  for (int n = 0; n < Shape::kRowsO; ++n) {
    SIMT_UNROLL
    for (int e = 0; e < 4; ++e) acc[n][e] = 0.0f;
  }

  if (tile_begin < tile_end) {
    copy_kv_tile_async<Element, HEAD_DIM, Br, Bc>(Ks, Vs, K, V, table_row, tile_begin * Bc, seq_len, g, p, tid);
  }
  simt::cp_async_commit_group();
  for (int tile = tile_begin; tile < tile_end; ++tile) {  // line 6
    const int j0 = tile * Bc;
    const int stage = (tile - tile_begin) % 2;
    const Element* Kj = Ks + stage * Bc * kPitch;
    const Element* Vj = Vs + stage * Bc * kPitch;

    // Line 7: wait for this tile; then start the next one into the other stage, which every thread
    // finished reading before the barrier.
    simt::cp_async_wait_group<0>();
    __syncthreads();  // K_j, V_j complete; the previous tile's stage, S and P free
    if (tile + 1 < tile_end) {
      copy_kv_tile_async<Element, HEAD_DIM, Br, Bc>(Ks + (1 - stage) * Bc * kPitch, Vs + (1 - stage) * Bc * kPitch, K,
                                                    V, table_row, j0 + Bc, seq_len, g, p, tid);
    }
    simt::cp_async_commit_group();

    // Line 8: this thread's key against its rows, d = 0, 1, ... in order (as chapter 05), then
    // scaled; -inf past the sequence's length or hidden by the mask (visible <= seq_len).
    float s[Shape::kRowsS];
    SIMT_UNROLL
    for (int n = 0; n < Shape::kRowsS; ++n) s[n] = 0.0f;
    SIMT_UNROLL
    for (int d0 = 0; d0 < HEAD_DIM; d0 += kVec) {
      float k[kVec];
      load_as_float(k, Kj + key * kPitch + d0);
      SIMT_UNROLL
      for (int n = 0; n < Shape::kRowsS; ++n) {
        SIMT_UNROLL
        for (int e0 = 0; e0 < kVec; e0 += 4) {
          float q[4];
          load_as_float(q, Qs + (s_row0 + n) * HEAD_DIM + d0 + e0);  // the same address in every lane
          SIMT_UNROLL
          for (int e = 0; e < 4; ++e) s[n] += q[e] * k[e0 + e];
        }
      }
    }
    SIMT_UNROLL
    for (int n = 0; n < Shape::kRowsS; ++n) {
      Ps[(s_row0 + n) * kPPitch + key] = j0 + key < visible[n] ? s[n] * p.scale : -INFINITY;
    }
    __syncthreads();  // S complete

    // Line 9: the row's max over its kThreadsPerRow threads, m_new, and P = exp(S - m_new).
    float* P_row = Ps + p_row * kPPitch;
    float tile_max = -INFINITY;
    for (int c = p_lane; c < Bc; c += Shape::kThreadsPerRow) tile_max = fmaxf(tile_max, P_row[c]);
    for (int offset = 1; offset < Shape::kThreadsPerRow; offset *= 2) {
      tile_max = fmaxf(tile_max, __shfl_xor_sync(kFullMask, tile_max, offset));
    }
    const float m_new = fmaxf(m, tile_max);
    // While the row has seen only masked keys, m_new is -inf and exp(-inf - (-inf)) would be NaN.
    // Subtracting 0 instead makes every term exp(-inf) = 0, so l and acc stay 0.
    const float m_safe = m_new == -INFINITY ? 0.0f : m_new;  // chapter 02's safe_max, written out
    const float rescale = expf(m - m_safe);                  // exp(m_old - m_new); 0 on the row's first real tile
    float tile_sum = 0.0f;
    for (int c = p_lane; c < Bc; c += Shape::kThreadsPerRow) {
      const float p_c = expf(P_row[c] - m_safe);
      P_row[c] = p_c;
      tile_sum += p_c;
    }
    for (int offset = 1; offset < Shape::kThreadsPerRow; offset *= 2) {
      tile_sum += __shfl_xor_sync(kFullMask, tile_sum, offset);
    }
    l = l * rescale + tile_sum;
    if (p_lane == 0) row_rescale[p_row] = rescale;
    m = m_new;        // line 10 (the row's threads of line 9 keep m and l)
    __syncthreads();  // P and each row's rescale complete

    // Line 10: acc = acc * exp(m - m_new) + P V_j, for this thread's rows and 4 columns.
    SIMT_UNROLL
    for (int n = 0; n < Shape::kRowsO; ++n) {
      const float row_factor = row_rescale[o_row0 + n];
      SIMT_UNROLL
      for (int e = 0; e < 4; ++e) acc[n][e] *= row_factor;
    }
    for (int c0 = 0; c0 < Bc; c0 += 4) {
      float p4[Shape::kRowsO][4];
      SIMT_UNROLL
      for (int n = 0; n < Shape::kRowsO; ++n) load_as_float(p4[n], Ps + (o_row0 + n) * kPPitch + c0);
      SIMT_UNROLL
      for (int u = 0; u < 4; ++u) {
        float v[4];
        load_as_float(v, Vj + (c0 + u) * kPitch + col0);
        SIMT_UNROLL
        for (int n = 0; n < Shape::kRowsO; ++n) {
          SIMT_UNROLL
          for (int e = 0; e < 4; ++e) acc[n][e] += p4[n][u] * v[e];
        }
      }
    }
  }
  simt::cp_async_wait_group<0>();  // (an empty group when the chunk had no tile)

  // Lines 12-15: the partial of this chunk, normalised. A row that saw no key of the chunk has
  // l = 0: O_s = 0, L_s = -inf, so that it adds nothing in the merge. (A NaN score makes l NaN,
  // and the NaN goes on into O_s and L_s.)
  if (p_lane == 0) {
    row_m[p_row] = m;
    row_l[p_row] = l;
  }
  __syncthreads();  // every row's m and l
  const std::size_t output_rows = p.output_rows();
  float* O_split = O_parts + static_cast<std::size_t>(split) * output_rows * HEAD_DIM;
  SIMT_UNROLL
  for (int n = 0; n < Shape::kRowsO; ++n) {
    const int r = r0 + o_row0 + n;
    if (r >= rows) continue;
    const float row_sum = row_l[o_row0 + n];
    float O_s[4];
    SIMT_UNROLL
    for (int e = 0; e < 4; ++e) O_s[e] = row_sum == 0.0f ? 0.0f : acc[n][e] / row_sum;
    store_4_floats(O_split + output_row(r) * HEAD_DIM + col0, O_s);
  }
  if (tid < Br && r0 + tid < rows) {
    const float row_sum = row_l[tid];
    L_parts[static_cast<std::size_t>(split) * output_rows + output_row(r0 + tid)] =
        row_sum == 0.0f ? -INFINITY : row_m[tid] + logf(row_sum);
  }
}

// Grid: ceil(rows / kCombineRowsPerBlock); block: kThreads, one warp per output row; lane owns the
// columns lane, lane + 32, ... of it. O_parts [splits, rows, HEAD_DIM], L_parts [splits, rows];
// O [rows, HEAD_DIM], L [rows], all float32. With fold_into_output, O and L hold a merged result
// on entry, which the partials are folded into (line 16). O and L may be the first partial's memory:
// each lane reads every value it writes itself, before it writes it (lane 0 alone reads and writes
// L[row]), so no lane can overwrite what another has yet to read.
template <int HEAD_DIM>
__global__ void __launch_bounds__(kThreads) combine_kernel(const float* O_parts, const float* L_parts, int splits,
                                                           int rows, float* O, float* L, bool fold_into_output) {
  static_assert(HEAD_DIM % 32 == 0, "whole columns per lane");
  constexpr int kCols = HEAD_DIM / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int row = static_cast<int>(blockIdx.x) * kCombineRowsPerBlock + static_cast<int>(threadIdx.x) / 32;
  if (row >= rows) return;  // a whole warp: no barrier below, only the warp's own shuffles
  float* O_row = O + static_cast<std::size_t>(row) * HEAD_DIM;

  // Line 16: the empty state; or a merged result, which is a state of the recurrence: m = L, l = 1,
  // acc = O (L = -inf with O = 0 is the empty state again: its l is multiplied by rescale = 0).
  float m = -INFINITY;
  float l = 0.0f;
  float acc[kCols];
  SIMT_UNROLL
  for (int c = 0; c < kCols; ++c) acc[c] = 0.0f;
  if (fold_into_output) {
    m = __shfl_sync(kFullMask, lane == 0 ? L[row] : 0.0f, 0);  // lane 0 alone reads L[row] (and writes it)
    l = 1.0f;
    SIMT_UNROLL
    for (int c = 0; c < kCols; ++c) acc[c] = O_row[lane + 32 * c];
  }

  // Lines 17-22: the partials in order; lane k holds L of partial first + k, handed to every lane by
  // a shuffle, 32 partials at a time.
  for (int first = 0; first < splits; first += 32) {
    const int count = splits - first < 32 ? splits - first : 32;
    const float L_lane = lane < count ? L_parts[static_cast<std::size_t>(first + lane) * rows + row] : -INFINITY;
    for (int k = 0; k < count; ++k) {
      const float L_s = __shfl_sync(kFullMask, L_lane, k);
      const float* O_s = O_parts + (static_cast<std::size_t>(first + k) * rows + row) * HEAD_DIM;
      // graded 08a: lines 18-22, partial s folded into m, l and this lane's columns of acc
      const float m_new = fmaxf(m, L_s);                       // line 18
      const float m_safe = m_new == -INFINITY ? 0.0f : m_new;  // chapter 02's safe_max
      const float rescale = expf(m - m_safe);                  // line 19
      const float weight = expf(L_s - m_safe);                 // the partial's l (1) measured against m_new
      l = l * rescale + weight;                                // line 20
      SIMT_UNROLL
      for (int c = 0; c < kCols; ++c) acc[c] = acc[c] * rescale + weight * O_s[lane + 32 * c];  // line 21
      m = m_new;                                                                                // line 22
      // end graded
    }
  }

  // Lines 23-24. Each lane writes only what it alone read: its columns of O, and (lane 0) L[row].
  // graded 08a: lines 23-24, the merged O and L; zeros and -inf for a row that no partial saw
  SIMT_UNROLL
  for (int c = 0; c < kCols; ++c) O_row[lane + 32 * c] = l == 0.0f ? 0.0f : acc[c] / l;
  if (lane == 0) L[row] = l == 0.0f ? -INFINITY : m + logf(l);
  // end graded
}

// The combine's instance for one head dim, on memory already on this backend's device. Grid: one
// block per kCombineRowsPerBlock rows. Throws what simt::launch throws.
template <int HEAD_DIM>
void launch_combine_instance(const float* O_parts, const float* L_parts, int splits, int rows, float* O, float* L,
                             bool fold_into_output, simt::LaunchMode mode) {
  const dim3 grid(static_cast<unsigned>((rows + kCombineRowsPerBlock - 1) / kCombineRowsPerBlock));
  simt::launch<combine_kernel<HEAD_DIM>>(mode, grid, dim3(kThreads), 0, O_parts, L_parts, splits, rows, O, L,
                                         fold_into_output);
}

// The combine's launch: the instance for head_dim (one per head dim, whatever the split kernel's
// tile). Throws std::invalid_argument for a head_dim that is not compiled, and what simt::launch
// throws.
void launch_combine(const float* O_parts, const float* L_parts, int splits, int rows, int head_dim, float* O, float* L,
                    bool fold_into_output, simt::LaunchMode mode) {
  static_assert(kHeadDims.size() == 2, "one instance of the combine per head dim");
  if (head_dim == kHeadDims[0]) {
    return launch_combine_instance<kHeadDims[0]>(O_parts, L_parts, splits, rows, O, L, fold_into_output, mode);
  }
  if (head_dim == kHeadDims[1]) {
    return launch_combine_instance<kHeadDims[1]>(O_parts, L_parts, splits, rows, O, L, fold_into_output, mode);
  }
  throw std::invalid_argument("launch_combine: head_dim " + std::to_string(head_dim) + " is not compiled");
}

// The split kernel's instance for one cache type, head_dim and tile, on memory already on this
// backend's device; with one split it writes O and L directly (its only partial is the result),
// else the partials, and waits only when it is the last launch. Above 48 KiB of shared memory a GPU
// needs the kernel's opt-in first. Throws what simt::launch throws.
template <class Element, fa::KernelShape k>
void launch_split(const void* Q, const void* K, const void* V, const int* block_table, const int* cache_seqlens,
                  float* O_parts, float* L_parts, float* O, float* L, const DecodeProblem& problem,
                  simt::LaunchMode mode) {
  const bool one_split = problem.splits == 1;
  constexpr auto kernel = split_kv_kernel<Element, k.head_dim, k.tile.Br, k.tile.Bc>;
  constexpr std::size_t bytes = SplitShape<Element, k.head_dim, k.tile.Br, k.tile.Bc>::kTotal;
  static_assert(bytes + sizeof(int) == split_shared_bytes(sizeof(Element), k.head_dim, k.tile), "decoding.h's count");
  simt::set_max_dynamic_shared_bytes<kernel>(bytes);
  const dim3 grid(static_cast<unsigned>(problem.splits), static_cast<unsigned>(problem.batch * problem.kv_heads),
                  static_cast<unsigned>(problem.row_blocks()));
  simt::launch<kernel>(one_split ? mode : simt::LaunchMode::asynchronous, grid, dim3(kThreads), bytes,
                       static_cast<const Element*>(Q), static_cast<const Element*>(K), static_cast<const Element*>(V),
                       block_table, cache_seqlens, one_split ? O : O_parts, one_split ? L : L_parts, problem);
}

// The compiled shapes of one cache type (compiled(), decoding.h), as an array.
template <CacheType T>
constexpr const auto& shapes_of() {
  if constexpr (T == CacheType::float32) {
    return kCompiledFloat32;
  } else {
    return kCompiled;
  }
}

// Every compiled instance of the split kernel for one cache type, in shapes_of<T>()'s order.
template <CacheType T, std::size_t... n>
constexpr auto split_instances(std::index_sequence<n...>) {
  return std::array{&launch_split<ElementOf<T>, shapes_of<T>()[n]>...};
}
template <CacheType T>
inline constexpr auto kSplitInstances = split_instances<T>(std::make_index_sequence<shapes_of<T>().size()>{});

// The instance of cache type T for the problem's head_dim and tile (fa::compiled_index).
template <CacheType T>
auto split_instance(const DecodeProblem& problem) {
  return kSplitInstances<T>[fa::compiled_index(problem, shapes_of<T>())];
}

// The split kernel's launch for the problem's cache type, head_dim and tile (fa::compiled_index),
// then the combine's when there is more than one split. Throws what simt::launch throws.
void launch_decoding(const void* Q, const void* K, const void* V, const int* block_table, const int* cache_seqlens,
                     float* O_parts, float* L_parts, float* O, float* L, const DecodeProblem& problem,
                     simt::LaunchMode mode) {
  const auto launch_split_kv = problem.cache_type == CacheType::bf16   ? split_instance<CacheType::bf16>(problem)
                               : problem.cache_type == CacheType::fp16 ? split_instance<CacheType::fp16>(problem)
                                                                       : split_instance<CacheType::float32>(problem);
  launch_split_kv(Q, K, V, block_table, cache_seqlens, O_parts, L_parts, O, L, problem, mode);
  if (problem.splits > 1) {
    launch_combine(O_parts, L_parts, problem.splits, static_cast<int>(problem.output_rows()), problem.head_dim, O, L,
                   false, mode);
  }
}

// Host data in, host data out, for one cache type: Q and the pools to the device as its elements, the
// table and the lengths as int32, the outputs and partials filled with NaN (DeviceBuffer::poison: an
// element no kernel writes cannot pass for a result, and simt's race checker reports a read of one),
// the launches, O and L back.
template <CacheType T>
fa::KernelRun run_typed(const fa::Tensor4<float>& Q, const KVCache& cache, const DecodeProblem& problem) {
  using Element = ElementOf<T>;
  const auto q = simt::to_device<Element>(Q.values), k = simt::to_device<Element>(cache.K.values),
             v = simt::to_device<Element>(cache.V.values);
  const simt::DeviceBuffer<int> table{std::span<const int>(cache.block_table)};
  const simt::DeviceBuffer<int> seqlens{std::span<const int>(cache.cache_seqlens)};
  const std::size_t rows = problem.output_rows();
  const std::size_t parts = problem.splits == 1 ? 0 : static_cast<std::size_t>(problem.splits) * rows;
  simt::DeviceBuffer<float> O_parts(parts * problem.head_dim), L_parts(parts), O(rows * problem.head_dim), L(rows);
  for (simt::DeviceBuffer<float>* out : {&O_parts, &L_parts, &O, &L}) out->poison();

  const auto start = std::chrono::steady_clock::now();
  launch_decoding(q.data(), k.data(), v.data(), table.data(), seqlens.data(), O_parts.data(), L_parts.data(), O.data(),
                  L.data(), problem, simt::LaunchMode::synchronous);
  const double elapsed_ms = fa::milliseconds_since(start);
  return {fa::Tensor4<float>(Q.shape, O.to_host()), L.to_host(), elapsed_ms};
}

// Host data in, host data out: the run for the problem's cache type.
fa::KernelRun run_decoding(const fa::Tensor4<float>& Q, const KVCache& cache, const DecodeProblem& problem) {
  if (problem.cache_type == CacheType::bf16) return run_typed<CacheType::bf16>(Q, cache, problem);
  if (problem.cache_type == CacheType::fp16) return run_typed<CacheType::fp16>(Q, cache, problem);
  return run_typed<CacheType::float32>(Q, cache, problem);
}

// The merge alone on host data: the partials to the device, O and L as `running` or poisoned (NaN,
// and unwritten for the race checker), the combine, O and L back.
Merged run_combine(const Partials& partials, const Merged* running) {
  const auto O_parts = simt::to_device<float>(partials.O), L_parts = simt::to_device<float>(partials.L);
  const std::size_t rows = static_cast<std::size_t>(partials.rows);
  simt::DeviceBuffer<float> O(rows * partials.head_dim), L(rows);
  if (running != nullptr) {
    O.copy_from_host(running->O);
    L.copy_from_host(running->L);
  } else {
    O.poison();
    L.poison();
  }
  launch_combine(O_parts.data(), L_parts.data(), partials.splits, partials.rows, partials.head_dim, O.data(), L.data(),
                 running != nullptr, simt::LaunchMode::synchronous);
  return {O.to_host(), L.to_host()};
}

}  // namespace ch08::SIMT_BACKEND
