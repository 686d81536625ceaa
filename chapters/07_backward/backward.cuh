// Chapter 07: the FlashAttention-2 backward pass.
//
// What this chapter adds to chapter 05: the gradients dQ, dK, dV of a loss, given dO = dLoss/dO,
// without ever storing S or P. The forward pass saved one number per query row, its logsumexp
// L = m + log(l); with it the backward pass recomputes any tile of P exactly, P = exp(S - L), from
// Q and K alone. The loops run the other way round from the forward's: a thread block owns a block
// of Bc KEYS and keeps their dK_j, dV_j on chip, while the query blocks stream past; dQ_i, which
// every key block contributes to, is summed in global memory by atomicAdd, or (deterministic)
// computed by a second kernel that owns a block of query rows and streams the keys, as the forward
// does. docs/07-backward.md derives every line.
//
// The algorithm (Dao 2023, FlashAttention-2, Algorithm 2, backward pass; the paper leaves out the
// scale, written here: S = Q K^T * scale, and scale reappears in lines 15 and 16). Lines 1-2 split
// the tensors into blocks of Br query rows and Bc keys, Tr = ceil(seq_len_q / Br),
// Tc = ceil(seq_len_k / Bc); lines 17 and 19 end the loops; then:
//    3. dQ = 0 in global memory (atomic method only)                       preprocess_kernel
//    4. D = rowsum(dO * O), one number per query row, to global memory     preprocess_kernel
//    5. for each key block j (one thread block each, in parallel):         dk_dv_kernel
//    6.   load K_j, V_j (Bc x head_dim each) into shared memory
//    7.   dK_j = 0, dV_j = 0 (in registers)
//    8.   for each query block i (skipping those a causal mask hides from every key of the block):
//    9.     load Q_i, dO_i (Br x head_dim), L_i, D_i (Br) into shared memory
//   10.     S = Q_i K_j^T * scale; masked entries (key past seq_len_k, causal) drop out
//   11.     P = exp(S - L_i); 0 where masked, and 0 for a row that sees no key (L = -inf)
//   12.     dV_j += P^T dO_i
//   13.     dP = dO_i V_j^T
//   14.     dS = P * (dP - D_i)
//   15.     dQ_i += scale * dS K_j, added to global memory by atomicAdd (atomic method only)
//   16.     dK_j += dS^T Q_i                          (times scale once, at line 18)
//   18.   write dK_j * scale and dV_j to global memory
// and for the deterministic method, dQ from its own kernel: the same lines with the two loops
// exchanged (a thread block owns query block i and the key blocks stream past, as in the forward
// pass), so that line 15 adds to dQ_i on chip, in one fixed order:                dq_kernel
//    8.   for each query block i (one thread block each):
//    9.     load Q_i, dO_i, L_i, D_i into shared memory; dQ_i = 0 (in registers)
//    5.     for each key block j (skipping those the causal mask hides from every row of the block):
//    6.       load K_j, V_j into shared memory
//   10-14.    S, P, dP, dS as above (the same values, bit for bit)
//   15.       dQ_i += dS K_j, each element summed over j = 0, 1, ... in order
//   18.     write dQ_i * scale (line 15's scale, applied once)
// The paper's line 9 also loads O_i and dQ_i, and its line 15 reads, updates and writes dQ_i back:
// with D computed first, O is needed only in line 4, and atomicAdd does the read-add-write of line
// 15 as one indivisible step (blocks of different key blocks add to the same dQ_i at once).
//
// Work split. dk_dv_kernel: kThreadsPerRow (4) threads per key of the block, Bc * 4 threads. Thread
// `lane` of key c computes S, P, dP, dS for query rows lane, lane+4, ... of the tile (line 10-14),
// and owns the columns lane, lane+4, ... of dK_j and dV_j (lines 12, 16). Line 15 is shared out by
// element: thread t computes dQ_i[r][d] for the (r, d) = t, t + Bc*4, ... of the Br x head_dim tile.
// dq_kernel: 4 threads per query row, Br * 4 threads, as chapter 05's forward kernel: thread `lane`
// of row r computes keys lane, lane+4, ... of the tile, and owns dQ_i's columns lane, lane+4, ...
//
// Shared memory (dynamic, floats), rows padded by one as in chapter 05:
//   dk_dv_kernel: K_j, V_j [Bc][head_dim+1], Q_i, dO_i [Br][head_dim+1], dS, P [Br][Bc+1], L_i, D_i [Br]
//   dq_kernel:    the same without P (SharedTiles, below)
//
// Rows that see no key: the forward pass gives them L = -inf. exp(S - L) would be exp(+inf) there,
// and +inf * 0 later gives NaN; line 11 (in both kernels) gives such a row P = 0 without computing the exp, so
// its dS is 0 and it adds nothing to dK, dV, and its dQ is 0.
//
// Built three times, as every chapter's kernels are (ch07::cpu, ch07::cpu_profiled, ch07::gpu:
// fa::Builds, common/kernel_problem.h).
//
// Source: Dao 2023, FlashAttention-2 (arXiv:2307.08691), section 3.1.2 and Algorithm 2; Dao et al.
// 2022, FlashAttention (arXiv:2205.14135), appendix B.2 (the gradient of the softmax, D = rowsum(dO
// * O)); CUDA C++ Programming Guide, "Atomic Functions" (atomicAdd on float).
// Run the demo: build/default/bin/ch07_backward
#pragma once

#include <chrono>
#include <cstddef>
#include <limits>
#include <span>

#include "chapters/07_backward/backward.h"
#include "common/simt/simt.h"

namespace ch07::SIMT_BACKEND {

inline constexpr int kThreadsPerRow = 4;
inline constexpr int kPreprocessThreads = 128;  // query rows per block of preprocess_kernel

// A block's dynamic shared memory (floats), carved in this order, rows padded by one as in chapter 05:
// K_j, V_j [Bc][HEAD_DIM+1], Q_i, dO_i [Br][HEAD_DIM+1], dS [Br][Bc+1], P [Br][Bc+1] (the dK, dV
// kernel only: WITH_P), L_i, D_i [Br].
template <int HEAD_DIM, int Br, int Bc, bool WITH_P>
struct SharedTiles {
  static constexpr int kStride = HEAD_DIM + 1;  // a padded row of K_j, V_j, Q_i, dO_i
  static constexpr int kPStride = Bc + 1;       // a padded row of P and dS
  static constexpr std::size_t floats() {
    return shared_floats(HEAD_DIM, {Br, Bc}, WITH_P);  // (backward.h: the host reads it too)
  }
  float *Kj, *Vj, *Qi, *dOi, *dSs, *Ps, *Li, *Di;
  __device__ explicit SharedTiles(float* shared)
      : Kj(shared),
        Vj(Kj + Bc * kStride),
        Qi(Vj + Bc * kStride),
        dOi(Qi + Br * kStride),
        dSs(dOi + Br * kStride),
        Ps(dSs + Br * kPStride),
        Li(Ps + (WITH_P ? Br * kPStride : 0)),
        Di(Li + Br) {}
};

// Lines 3-4. Grid: (ceil(seq_len_q / kPreprocessThreads), batch * heads); block: kPreprocessThreads.
// One thread per query row: D[row] = sum_d dO[row][d] * O[row][d] (d = 0, 1, ... in order), and
// with zero_dQ, dQ[row][:] = 0 for the atomic adds of line 15.
template <int HEAD_DIM>
__global__ void preprocess_kernel(const float* __restrict__ O, const float* __restrict__ dO, float* __restrict__ D,
                                  float* __restrict__ dQ, int seq_len_q, bool zero_dQ) {
  const int i = static_cast<int>(blockIdx.x) * kPreprocessThreads + static_cast<int>(threadIdx.x);
  if (i >= seq_len_q) return;
  const std::size_t row = static_cast<std::size_t>(blockIdx.y) * seq_len_q + i;
  // graded 07a: line 4, D = rowsum(dO * O) for this thread's row, summed over d = 0, 1, ... in order
  float sum = 0.0f;
  for (int d = 0; d < HEAD_DIM; ++d) sum += dO[row * HEAD_DIM + d] * O[row * HEAD_DIM + d];
  D[row] = sum;  // line 4
  // end graded
  if (zero_dQ) {
    for (int d = 0; d < HEAD_DIM; ++d) dQ[row * HEAD_DIM + d] = 0.0f;  // line 3
  }
}

// Loads rows first .. first+count-1 of a [seq_len, HEAD_DIM] head into a [count][HEAD_DIM+1] tile
// of shared memory; rows past seq_len become zeros. Every thread of the block takes part.
template <int HEAD_DIM>
__device__ __forceinline__ void load_rows(float* tile, const float* head, int first, int count, int seq_len, int tid,
                                          int threads) {
  for (int idx = tid; idx < count * HEAD_DIM; idx += threads) {
    const int r = idx / HEAD_DIM;
    const int d = idx % HEAD_DIM;
    tile[r * (HEAD_DIM + 1) + d] =
        (first + r < seq_len) ? head[static_cast<std::size_t>(first + r) * HEAD_DIM + d] : 0.0f;
  }
}

// One entry (r, c) of a tile's P and dS (lines 10-14).
struct PdS {
  float P;
  float dS;
};

// Lines 10, 11, 13, 14 for one entry (r, c) of the tile: P = exp(Q_i[r] . K_j[c] * scale - L[r])
// and dS = P (dP - D) with dP = dO_i[r] . V_j[c], both dot products summed over d = 0, 1, ... in
// order (the same in both kernels, so they see the same dS bit for bit). `seen`: the key exists
// and the mask lets row r see it.
template <int HEAD_DIM>
__device__ __forceinline__ PdS tile_dS(const float* q, const float* k, const float* dO_row, const float* v, float L,
                                       float D, float scale, bool seen) {
  // graded 07b: lines 10-14 for one entry: S, P recomputed from L (0 where unseen), dP, dS = P (dP - D)
  float s = 0.0f;
  float dp = 0.0f;
  for (int d = 0; d < HEAD_DIM; ++d) {
    s += q[d] * k[d];        // line 10
    dp += dO_row[d] * v[d];  // line 13
  }
  // Line 11. A row that sees no key has L = -inf: exp(s - L) would be +inf, so P is set to 0.
  const float p = (seen && L != -INFINITY) ? expf(s * scale - L) : 0.0f;
  return {p, p * (dp - D)};  // line 14
  // end graded
}

// Lines 5-18 (line 15 only with ATOMIC_DQ). Grid: (ceil(seq_len_k / Bc), batch * heads); block:
// Bc * kThreadsPerRow threads; dynamic shared memory SharedTiles<HEAD_DIM, Br, Bc, true>::floats() * 4
// bytes.
// Q, dO, dQ: [batch*heads, seq_len_q, HEAD_DIM]; K, V, dK, dV: [batch*heads, seq_len_k, HEAD_DIM];
// L, D: [batch*heads, seq_len_q]; row-major float32 in global memory. dQ must hold zeros (line 3).
template <int HEAD_DIM, int Br, int Bc, bool ATOMIC_DQ>
__global__ void dk_dv_kernel(const float* __restrict__ Q, const float* __restrict__ K, const float* __restrict__ V,
                             const float* __restrict__ L, const float* __restrict__ dO, const float* __restrict__ D,
                             float* __restrict__ dQ, float* __restrict__ dK, float* __restrict__ dV, int seq_len_q,
                             int seq_len_k, float scale, bool causal) {
  static_assert(HEAD_DIM % kThreadsPerRow == 0 && Br % kThreadsPerRow == 0);
  using Tiles = SharedTiles<HEAD_DIM, Br, Bc, true>;
  constexpr int kThreads = Bc * kThreadsPerRow;
  constexpr int kStride = Tiles::kStride, kPStride = Tiles::kPStride;
  constexpr int kRowsPerThread = Br / kThreadsPerRow;
  constexpr int kCols = HEAD_DIM / kThreadsPerRow;

  SIMT_DYNAMIC_SHARED(float, shared);
  const auto [Kj, Vj, Qi, dOi, dSs, Ps, Li, Di] = Tiles(shared);

  const int tid = static_cast<int>(threadIdx.x);
  const int c = tid / kThreadsPerRow;     // this thread's key within the block
  const int lane = tid % kThreadsPerRow;  // which of the key's threads this is
  const int j0 = static_cast<int>(blockIdx.x) * Bc;
  const int j = j0 + c;  // this thread's key in the sequence
  const std::size_t bh = blockIdx.y;
  const float* Q_head = Q + bh * seq_len_q * HEAD_DIM;
  const float* dO_head = dO + bh * seq_len_q * HEAD_DIM;
  float* dQ_head = dQ + bh * seq_len_q * HEAD_DIM;

  // Line 6: K_j, V_j; keys past seq_len_k (the last block's tail) become zeros.
  load_rows<HEAD_DIM>(Kj, K + bh * seq_len_k * HEAD_DIM, j0, Bc, seq_len_k, tid, kThreads);
  load_rows<HEAD_DIM>(Vj, V + bh * seq_len_k * HEAD_DIM, j0, Bc, seq_len_k, tid, kThreads);

  // Line 7: this thread's columns lane, lane+4, ... of dK_j and dV_j.
  float dk[kCols], dv[kCols];
  for (int n = 0; n < kCols; ++n) dk[n] = dv[n] = 0.0f;

  // Line 8, the causal skip: the block's first key j0 is seen from row first_row on (the mask's rule,
  // fa::first_query_seeing), so query blocks that end before that row are hidden from every key.
  const int shift = seq_len_k - seq_len_q;
  const int first_row = fa::first_query_seeing(j0, seq_len_q, seq_len_k, causal);
  const int num_blocks = (seq_len_q + Br - 1) / Br;
  for (int block = first_row / Br; block < num_blocks; ++block) {
    const int i0 = block * Br;

    // Line 9: Q_i, dO_i, L_i, D_i. Rows past seq_len_q get zeros and L = -inf: they add nothing.
    __syncthreads();  // every thread is done with the previous tile's Q_i, dO_i, P and dS
    load_rows<HEAD_DIM>(Qi, Q_head, i0, Br, seq_len_q, tid, kThreads);
    load_rows<HEAD_DIM>(dOi, dO_head, i0, Br, seq_len_q, tid, kThreads);
    for (int r = tid; r < Br; r += kThreads) {
      const bool inside = i0 + r < seq_len_q;
      Li[r] = inside ? L[bh * seq_len_q + i0 + r] : -INFINITY;
      Di[r] = inside ? D[bh * seq_len_q + i0 + r] : 0.0f;
    }
    __syncthreads();  // Q_i, dO_i, L_i, D_i (and, the first time, K_j, V_j) are complete

    // Lines 10, 11, 13, 14: this thread's entries (r, c) of P and dS, r = lane + 4 n.
    for (int n = 0; n < kRowsPerThread; ++n) {
      const int r = lane + kThreadsPerRow * n;
      const bool seen = j < seq_len_k && (!causal || j <= i0 + r + shift);
      const PdS e = tile_dS<HEAD_DIM>(&Qi[r * kStride], &Kj[c * kStride], &dOi[r * kStride], &Vj[c * kStride], Li[r],
                                      Di[r], scale, seen);
      Ps[r * kPStride + c] = e.P;
      dSs[r * kPStride + c] = e.dS;
    }
    __syncthreads();  // the tile's P and dS are complete

    // Line 12: dV_j += P^T dO_i; line 16: dK_j += dS^T Q_i; this thread's key c, its columns.
    for (int r = 0; r < Br; ++r) {
      const float p = Ps[r * kPStride + c];
      const float ds = dSs[r * kPStride + c];
      for (int n = 0; n < kCols; ++n) {
        const int d = lane + kThreadsPerRow * n;
        dv[n] += p * dOi[r * kStride + d];
        dk[n] += ds * Qi[r * kStride + d];
      }
    }

    // Line 15: dQ_i += scale * dS K_j. Other blocks (other key blocks of this head) add to the same
    // dQ_i at the same time, so the read-add-write must be one atomic step.
    if constexpr (ATOMIC_DQ) {
      // graded 07c: line 15, dQ_i += scale * dS K_j, each element added to global memory in one indivisible step
      for (int idx = tid; idx < Br * HEAD_DIM; idx += kThreads) {
        const int r = idx / HEAD_DIM;
        const int d = idx % HEAD_DIM;
        if (i0 + r >= seq_len_q) continue;
        float sum = 0.0f;
        for (int cc = 0; cc < Bc; ++cc) sum += dSs[r * kPStride + cc] * Kj[cc * kStride + d];
        atomicAdd(&dQ_head[static_cast<std::size_t>(i0 + r) * HEAD_DIM + d], scale * sum);
      }
      // end graded
    }
  }

  // Line 18: dK_j (times the scale left out of line 16) and dV_j, for keys that exist.
  if (j < seq_len_k) {
    const std::size_t at = (bh * seq_len_k + j) * HEAD_DIM;
    for (int n = 0; n < kCols; ++n) {
      dK[at + lane + kThreadsPerRow * n] = scale * dk[n];
      dV[at + lane + kThreadsPerRow * n] = dv[n];
    }
  }
}

// dQ with the query blocks outside (lines 8, 9, 5, 6, 10-15, 18 in that order: the header), each
// element summed over the key blocks in order j = 0, 1, ..., so the same bits come out whatever
// order the blocks and threads run in. Grid:
// (ceil(seq_len_q / Br), batch * heads); block: Br * kThreadsPerRow threads; dynamic shared memory
// SharedTiles<HEAD_DIM, Br, Bc, false>::floats() * 4 bytes. Shapes as dk_dv_kernel.
template <int HEAD_DIM, int Br, int Bc>
__global__ void dq_kernel(const float* __restrict__ Q, const float* __restrict__ K, const float* __restrict__ V,
                          const float* __restrict__ L, const float* __restrict__ dO, const float* __restrict__ D,
                          float* __restrict__ dQ, int seq_len_q, int seq_len_k, float scale, bool causal) {
  static_assert(HEAD_DIM % kThreadsPerRow == 0 && Bc % kThreadsPerRow == 0);
  using Tiles = SharedTiles<HEAD_DIM, Br, Bc, false>;
  constexpr int kThreads = Br * kThreadsPerRow;
  constexpr int kKeysPerThread = Bc / kThreadsPerRow;
  constexpr int kCols = HEAD_DIM / kThreadsPerRow;

  SIMT_DYNAMIC_SHARED(float, shared);
  const auto [Kj, Vj, Qi, dOi, dSs, Ps, Li, Di] = Tiles(shared);  // (no P here: Ps is L_i)

  const int tid = static_cast<int>(threadIdx.x);
  const int r = tid / kThreadsPerRow;  // this thread's query row within the block
  const int lane = tid % kThreadsPerRow;
  const int i0 = static_cast<int>(blockIdx.x) * Br;
  const int i = i0 + r;
  const std::size_t bh = blockIdx.y;
  const float* K_head = K + bh * seq_len_k * HEAD_DIM;
  const float* V_head = V + bh * seq_len_k * HEAD_DIM;

  // Line 9: Q_i, dO_i, L_i, D_i; dQ_i = 0.
  load_rows<HEAD_DIM>(Qi, Q + bh * seq_len_q * HEAD_DIM, i0, Br, seq_len_q, tid, kThreads);
  load_rows<HEAD_DIM>(dOi, dO + bh * seq_len_q * HEAD_DIM, i0, Br, seq_len_q, tid, kThreads);
  for (int rr = tid; rr < Br; rr += kThreads) {
    const bool inside = i0 + rr < seq_len_q;
    Li[rr] = inside ? L[bh * seq_len_q + i0 + rr] : -INFINITY;
    Di[rr] = inside ? D[bh * seq_len_q + i0 + rr] : 0.0f;
  }
  float dq[kCols];
  for (float& x : dq) x = 0.0f;

  // Line 5, the causal skip as in chapter 05: the block's last real row sees the most keys.
  const int last_row = (i0 + Br < seq_len_q ? i0 + Br : seq_len_q) - 1;
  const int num_blocks = (fa::visible_keys(last_row, seq_len_q, seq_len_k, causal) + Bc - 1) / Bc;
  const int visible = fa::visible_keys(i, seq_len_q, seq_len_k, causal);  // this thread's row sees keys < visible
  for (int block = 0; block < num_blocks; ++block) {
    const int j0 = block * Bc;
    // Line 6: K_j, V_j; then lines 10-14 for this thread's entries (r, c) of dS, c = lane + 4 n.
    __syncthreads();  // every thread is done with the previous tile's K_j, V_j and dS
    load_rows<HEAD_DIM>(Kj, K_head, j0, Bc, seq_len_k, tid, kThreads);
    load_rows<HEAD_DIM>(Vj, V_head, j0, Bc, seq_len_k, tid, kThreads);
    __syncthreads();  // K_j, V_j (and, the first time, Q_i, dO_i, L_i, D_i) are complete
    for (int n = 0; n < kKeysPerThread; ++n) {
      const int c = lane + kThreadsPerRow * n;
      const int j = j0 + c;
      dSs[r * Tiles::kPStride + c] =
          tile_dS<HEAD_DIM>(&Qi[r * Tiles::kStride], &Kj[c * Tiles::kStride], &dOi[r * Tiles::kStride],
                            &Vj[c * Tiles::kStride], Li[r], Di[r], scale, j < visible)
              .dS;
    }
    __syncthreads();  // the row's dS is complete (written by its 4 threads)
    // Line 15: dQ_i += dS K_j for this thread's columns, keys in order cc = 0, 1, ...
    for (int cc = 0; cc < Bc; ++cc) {
      const float ds = dSs[r * Tiles::kPStride + cc];
      for (int n = 0; n < kCols; ++n) dq[n] += ds * Kj[cc * Tiles::kStride + lane + kThreadsPerRow * n];
    }
  }

  // Line 18, for dQ_i (a row that sees no key ran no tile, or only tiles where its P is 0: dQ = 0).
  if (i < seq_len_q) {
    float* dQ_row = dQ + (bh * seq_len_q + i) * HEAD_DIM;
    for (int n = 0; n < kCols; ++n) dQ_row[lane + kThreadsPerRow * n] = scale * dq[n];
  }
}

// The launches of one compiled instance (head_dim and its tile) on memory already on this backend's
// device, waiting for them or not as `mode` says (common/simt/runtime/launch_mode.h): lines 3-4
// (preprocess_kernel), lines 5-18 (dk_dv_kernel, with line 15 by atomics unless deterministic), and
// for the deterministic method dq_kernel. Above 48 KiB of shared memory a GPU needs each kernel's
// opt-in first (a runtime call the first time only). Throws what simt::launch throws.
template <fa::KernelShape k>
void launch_instance(const float* Q, const float* K, const float* V, const float* O, const float* L, const float* dO,
                     float* D, float* dQ, float* dK, float* dV, const DeviceProblem& p, simt::LaunchMode mode) {
  constexpr int Br = k.tile.Br, Bc = k.tile.Bc;
  const auto heads = static_cast<unsigned>(p.batch_heads);
  const auto blocks = [](int n, int per_block) { return static_cast<unsigned>((n + per_block - 1) / per_block); };
  simt::launch<preprocess_kernel<k.head_dim>>(mode, dim3(blocks(p.seq_len_q, kPreprocessThreads), heads),
                                              dim3(kPreprocessThreads), 0, O, dO, D, dQ, p.seq_len_q, !p.deterministic);

  // dK and dV, with dQ by atomics (ATOMIC_DQ) or without (the dq_kernel below writes it).
  constexpr auto dk_dv_atomic = dk_dv_kernel<k.head_dim, Br, Bc, true>;
  constexpr auto dk_dv_plain = dk_dv_kernel<k.head_dim, Br, Bc, false>;
  const std::size_t dk_dv_bytes = SharedTiles<k.head_dim, Br, Bc, true>::floats() * sizeof(float);
  simt::set_max_dynamic_shared_bytes<dk_dv_atomic>(dk_dv_bytes);
  simt::set_max_dynamic_shared_bytes<dk_dv_plain>(dk_dv_bytes);
  const dim3 dk_dv_grid(blocks(p.seq_len_k, Bc), heads), dk_dv_block(Bc * kThreadsPerRow);
  if (!p.deterministic) {
    simt::launch<dk_dv_atomic>(mode, dk_dv_grid, dk_dv_block, dk_dv_bytes, Q, K, V, L, dO, static_cast<const float*>(D),
                               dQ, dK, dV, p.seq_len_q, p.seq_len_k, p.scale, p.causal);
    return;
  }
  simt::launch<dk_dv_plain>(mode, dk_dv_grid, dk_dv_block, dk_dv_bytes, Q, K, V, L, dO, static_cast<const float*>(D),
                            dQ, dK, dV, p.seq_len_q, p.seq_len_k, p.scale, p.causal);

  constexpr auto dq = dq_kernel<k.head_dim, Br, Bc>;
  const std::size_t bytes = SharedTiles<k.head_dim, Br, Bc, false>::floats() * sizeof(float);
  simt::set_max_dynamic_shared_bytes<dq>(bytes);
  simt::launch<dq>(mode, dim3(blocks(p.seq_len_q, Br), heads), dim3(Br * kThreadsPerRow), bytes, Q, K, V, L, dO,
                   static_cast<const float*>(D), dQ, p.seq_len_q, p.seq_len_k, p.scale, p.causal);
}

// Every compiled instance's launches, in kCompiled's order.
template <std::size_t... n>
constexpr auto instances(std::index_sequence<n...>) {
  return std::array{&launch_instance<kCompiled[n]>...};
}
inline constexpr auto kInstances = instances(std::make_index_sequence<kCompiled.size()>{});

// The launches of the instance compiled for the problem's head_dim and its tile (fa::compiled_index).
void launch_backward(const float* Q, const float* K, const float* V, const float* O, const float* L, const float* dO,
                     float* D, float* dQ, float* dK, float* dV, const DeviceProblem& p, simt::LaunchMode mode) {
  kInstances[fa::compiled_index(p, kCompiled)](Q, K, V, O, L, dO, D, dQ, dK, dV, p, mode);
}

// Host data in, host data out: copies the inputs to the device, fills dQ, dK, dV and D with NaN (an
// unwritten output cannot pass for a result; and for the atomic method, a dQ that line 3 forgot to
// zero stays NaN), launches, copies the outputs back. elapsed_ms covers the launches only.
Gradients run_backward(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                       const fa::Tensor4<float>& O, std::span<const float> L, const fa::Tensor4<float>& dO,
                       const DeviceProblem& problem) {
  const auto q = simt::to_device<float>(Q.values), k = simt::to_device<float>(K.values),
             v = simt::to_device<float>(V.values), o = simt::to_device<float>(O.values), l = simt::to_device<float>(L),
             d_o = simt::to_device<float>(dO.values);
  simt::DeviceBuffer<float> dq(Q.values.size()), dk(K.values.size()), dv(V.values.size()), d(L.size());
  for (simt::DeviceBuffer<float>* out : {&dq, &dk, &dv, &d}) out->poison();  // (and unwritten: racecheck.h)

  const auto start = std::chrono::steady_clock::now();
  launch_backward(q.data(), k.data(), v.data(), o.data(), l.data(), d_o.data(), d.data(), dq.data(), dk.data(),
                  dv.data(), problem, simt::LaunchMode::synchronous);
  const double elapsed_ms = fa::milliseconds_since(start);
  return {fa::Tensor4<float>(Q.shape, dq.to_host()), fa::Tensor4<float>(K.shape, dk.to_host()),
          fa::Tensor4<float>(V.shape, dv.to_host()), d.to_host(), elapsed_ms};
}

}  // namespace ch07::SIMT_BACKEND
