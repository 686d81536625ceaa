// Chapter 05: the FlashAttention-2 forward kernel.
//
// What this chapter adds to chapter 04: the same O = softmax(Q K^T * scale) V, but S and P never
// touch global memory. A thread block owns Br query rows; it streams K and V through shared memory
// in tiles of Bc keys and folds each tile into a running output with chapter 03's recurrence (the
// same three names: m, l, acc). Global memory sees Q and O once, K and V once per query block.
//
// The algorithm: Dao 2023, FlashAttention-2, Algorithm 1 (forward pass), with the paper's line
// numbers. A thread block runs lines 4-15 for one query block i (the grid is line 3's loop over i),
// the rows i0 .. i0+Br-1 of head bh:
//    4. load Q_i (Br x head_dim) into shared memory
//    5. per row: m = -inf, l = 0, acc = 0 (head_dim numbers, in registers)
//    6. for each key tile j = 0, 1, ... (skipping the tiles a causal mask hides entirely):
//    7.   load K_j and V_j (Bc x head_dim each) into shared memory
//    8.   S = Q_i K_j^T * scale; -inf where the key is past seq_len_k or masked
//    9.   m_new = max(m, rowmax(S)); P = exp(S - m_new); l = l * exp(m - m_new) + rowsum(P)
//   10.   acc = acc * exp(m - m_new) + P V_j              (un-scaled: no division yet); m = m_new
//   12. O_i = acc / l (0 for a row that saw no key)
//   13. L_i = m + log(l) (-inf for such a row)
//   14-15. write O_i and L_i to global memory
// (Lines 1-2 of the paper divide Q, K, V, O and L into blocks: the grid and the tile loop here.)
//
// Work split inside a block: kThreadsPerRow (4) threads share each query row, so a block has
// Br * 4 threads. Thread `lane` of a row computes the scores of keys lane, lane+4, lane+8, ... of
// the tile, and owns the output columns lane, lane+4, lane+8, ... of acc. The row's max and sum
// are combined across its 4 threads with two warp shuffles each.
//
// Shared memory (dynamic, floats): Q_i [Br][head_dim+1], K_j [Bc][head_dim+1],
// V_j [Bc][head_dim+1], P [Br][Bc+1]. The +1 pads each row so that threads reading the same column
// of different rows hit different banks. For head_dim 128, Br = Bc = 64 that is 113 KiB: more than
// the 48 KiB a launch may use by default, so the host side asks for it (cudaFuncSetAttribute).
//
// Agreement with chapter 04: line 8 sums q[d] * k[d] in the same order (d = 0, 1, ...) and scales
// afterwards, exactly as ch04's scores_kernel does, so both kernels see the same S bit for bit.
//
// Built three times, as every chapter's kernels are (ch05::cpu, ch05::cpu_profiled, ch05::gpu:
// fa::Builds, common/kernel_problem.h). flash_attention_2.h declares its two entry points
// (run_flash_attention_2, launch_flash_attention_2, at the end of this file) and picks the build that runs.
//
// Source: Dao 2023, FlashAttention-2 (arXiv:2307.08691), sections 3.1 and 3.2 and Algorithm 1;
// Milakov and Gimelshein 2018 for the online softmax.
// Run the demo: build/default/bin/ch05_flash_attention_2
#pragma once

#include <cstddef>

#include "chapters/05_flash_attention_2/flash_attention_2.h"
#include "common/simt/simt.h"

namespace ch05::SIMT_BACKEND {

inline constexpr int kThreadsPerRow = 4;

// Dynamic shared memory of one block: shared_floats(HEAD_DIM, Br, Bc) floats (flash_attention_2.h,
// where the host reads it too, to pick a tile the GPU can hold before any launch): Q_i, K_j, V_j
// and P as carved at the top of the kernel below, each row padded by one. A change to that carving
// changes shared_floats with it (else the kernel writes past its shared memory, or a GPU that could
// hold the tile is told it cannot).

// Grid: (ceil(seq_len_q / Br), batch * heads); block: Br * kThreadsPerRow threads;
// dynamic shared memory: shared_floats(HEAD_DIM, Br, Bc) * 4 bytes.
// Q, O: [batch*heads, seq_len_q, HEAD_DIM]; K, V: [batch*heads, seq_len_k, HEAD_DIM];
// L: [batch*heads, seq_len_q]; all row-major float32 in global memory.
template <int HEAD_DIM, int Br, int Bc>
__global__ void flash_attention_2_kernel(const float* __restrict__ Q, const float* __restrict__ K,
                                         const float* __restrict__ V, float* __restrict__ O, float* __restrict__ L,
                                         int seq_len_q, int seq_len_k, float scale, bool causal) {
  static_assert(HEAD_DIM % kThreadsPerRow == 0 && Bc % kThreadsPerRow == 0);
  constexpr int kThreads = Br * kThreadsPerRow;
  constexpr int kStride = HEAD_DIM + 1;  // padded row of Q_i, K_j, V_j in shared memory
  constexpr int kPStride = Bc + 1;       // padded row of P

  SIMT_DYNAMIC_SHARED(float, shared);
  float* Qi = shared;             // [Br][kStride]
  float* Kj = Qi + Br * kStride;  // [Bc][kStride]
  float* Vj = Kj + Bc * kStride;  // [Bc][kStride]
  float* Ps = Vj + Bc * kStride;  // [Br][kPStride]

  const int tid = static_cast<int>(threadIdx.x);
  const int row = tid / kThreadsPerRow;   // this thread's query row within the block
  const int lane = tid % kThreadsPerRow;  // which of the row's threads this is
  const int i0 = static_cast<int>(blockIdx.x) * Br;
  const int i = i0 + row;  // this thread's query row in the sequence
  const std::size_t bh = blockIdx.y;
  const float* Q_head = Q + bh * seq_len_q * HEAD_DIM;
  const float* K_head = K + bh * seq_len_k * HEAD_DIM;
  const float* V_head = V + bh * seq_len_k * HEAD_DIM;

  // Line 4: load Q_i. Rows past seq_len_q (the tail of the last query block) are loaded as zeros;
  // their threads still take part in every load and barrier below, and only skip the final write.
  // graded 05a: line 4, Q_i into shared memory, every thread a share; rows past seq_len_q as zeros
  for (int idx = tid; idx < Br * HEAD_DIM; idx += kThreads) {
    const int r = idx / HEAD_DIM;
    const int d = idx % HEAD_DIM;
    Qi[r * kStride + d] = (i0 + r < seq_len_q) ? Q_head[static_cast<std::size_t>(i0 + r) * HEAD_DIM + d] : 0.0f;
  }
  // end graded

  // Line 5: the running state of this thread's row. acc holds columns lane, lane+4, ...
  float m = -INFINITY;
  float l = 0.0f;
  constexpr int kAccCols = HEAD_DIM / kThreadsPerRow;
  float acc[kAccCols];
  for (float& a : acc) a = 0.0f;

  // The causal mask: row i sees keys j < visible (fa::visible_keys, common/kernel_problem.h). The block's
  // last real row sees the most keys, so key tiles from ceil(visible_last / Bc) on are skipped whole.
  // graded 05b: the keys row i sees: j < visible
  const int visible = fa::visible_keys(i, seq_len_q, seq_len_k, causal);
  // end graded
  const int last_row = (i0 + Br < seq_len_q ? i0 + Br : seq_len_q) - 1;
  const int num_tiles = (fa::visible_keys(last_row, seq_len_q, seq_len_k, causal) + Bc - 1) / Bc;

  for (int tile = 0; tile < num_tiles; ++tile) {  // line 6
    const int j0 = tile * Bc;

    // Line 7: load K_j and V_j; keys past seq_len_k (the last tile's tail) become zeros.
    // graded 05a: line 7, K_j and V_j of this tile into shared memory (zeros past seq_len_k), between two barriers
    __syncthreads();  // every thread is done with the previous tile's K_j, V_j and P
    for (int idx = tid; idx < Bc * HEAD_DIM; idx += kThreads) {
      const int r = idx / HEAD_DIM;
      const int d = idx % HEAD_DIM;
      const bool inside = j0 + r < seq_len_k;
      const std::size_t at = static_cast<std::size_t>(j0 + r) * HEAD_DIM + d;
      Kj[r * kStride + d] = inside ? K_head[at] : 0.0f;
      Vj[r * kStride + d] = inside ? V_head[at] : 0.0f;
    }
    __syncthreads();  // K_j, V_j (and, the first time, Q_i) are complete
    // end graded

    // Line 8: this thread's scores, for keys c = lane + 4 * n of the tile.
    constexpr int kCols = Bc / kThreadsPerRow;
    float s[kCols];
    for (int n = 0; n < kCols; ++n) s[n] = 0.0f;
    for (int d = 0; d < HEAD_DIM; ++d) {
      const float q = Qi[row * kStride + d];
      for (int n = 0; n < kCols; ++n) s[n] += q * Kj[(lane + kThreadsPerRow * n) * kStride + d];
    }
    float tile_max = -INFINITY;
    for (int n = 0; n < kCols; ++n) {
      // graded 05b: line 8's mask: key j's score scaled, or -inf past seq_len_k or hidden by the causal mask
      const int j = j0 + lane + kThreadsPerRow * n;
      s[n] = (j < visible) ? s[n] * scale : -INFINITY;  // past seq_len_k, or hidden by the mask
      // end graded
      tile_max = fmaxf(tile_max, s[n]);
    }

    // Line 9: m_new, the row's max over its 4 threads (lanes differing in bit 0, then bit 1).
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
    const float m_new = fmaxf(m, tile_max);
    // While the row has seen only masked keys, m_new is -inf and exp(-inf - (-inf)) would be NaN.
    // Subtracting 0 instead makes every term exp(-inf) = 0, so l and acc stay 0.
    const float m_safe = m_new == -INFINITY ? 0.0f : m_new;  // chapter 02's safe_max, written out
    const float rescale = expf(m - m_safe);                  // exp(m_old - m_new); 0 on the row's first real tile

    // Line 9: P = exp(S - m_new) and its row sum over the 4 threads; l rescaled and grown. Then this
    // thread's share of P into shared memory, after the shuffles: line 10 reads the whole row, so
    // only a barrier between the write and the read makes the other 3 threads' shares visible.
    float tile_sum = 0.0f;
    for (int n = 0; n < kCols; ++n) {
      s[n] = expf(s[n] - m_safe);  // s[n] now holds p
      tile_sum += s[n];
    }
    tile_sum += __shfl_xor_sync(0xffffffffu, tile_sum, 1);
    tile_sum += __shfl_xor_sync(0xffffffffu, tile_sum, 2);
    l = l * rescale + tile_sum;
    for (int n = 0; n < kCols; ++n) Ps[row * kPStride + lane + kThreadsPerRow * n] = s[n];
    // graded 05a: the barrier line 10 needs before it reads the row's P
    __syncthreads();  // the row's P is complete (written by its 4 threads)
    // end graded

    // Line 10: acc = acc * exp(m - m_new) + P V_j, for this thread's columns d = lane + 4 * c.
    for (float& a : acc) a *= rescale;
    for (int jj = 0; jj < Bc; ++jj) {
      const float p = Ps[row * kPStride + jj];
      for (int c = 0; c < kAccCols; ++c) acc[c] += p * Vj[jj * kStride + lane + kThreadsPerRow * c];
    }
    m = m_new;  // line 10
  }

  // Lines 12-15: divide once, write O and L. A row that saw no key has l = 0: O = 0, L = -inf.
  // (A NaN score makes l NaN, and the NaN goes on into O and L.)
  if (i < seq_len_q) {
    float* O_row = O + (bh * seq_len_q + i) * HEAD_DIM;
    for (int c = 0; c < kAccCols; ++c) O_row[lane + kThreadsPerRow * c] = (l == 0.0f) ? 0.0f : acc[c] / l;
    if (lane == 0) L[bh * seq_len_q + i] = (l == 0.0f) ? -INFINITY : m + logf(l);
  }
}

// One compiled instance, launched on memory already on this backend's device, waiting for it or not
// as `mode` says (common/simt/runtime/launch_mode.h). Grid: (ceil(seq_len_q / Br), batch * heads); block:
// Br * 4 threads. Above 48 KiB of shared memory a GPU needs the kernel's opt-in first (a runtime call
// the first time only). Throws what simt::launch throws.
template <fa::KernelShape k>
void launch_instance(const float* Q, const float* K, const float* V, float* O, float* L,
                     const fa::DeviceProblem& problem, simt::LaunchMode mode) {
  constexpr int Br = k.tile.Br, Bc = k.tile.Bc;
  constexpr auto kernel = flash_attention_2_kernel<k.head_dim, Br, Bc>;
  const std::size_t bytes = shared_floats(k.head_dim, Br, Bc) * sizeof(float);
  simt::set_max_dynamic_shared_bytes<kernel>(bytes);
  const dim3 grid(static_cast<unsigned>((problem.seq_len_q + Br - 1) / Br), static_cast<unsigned>(problem.batch_heads));
  simt::launch<kernel>(mode, grid, dim3(Br * kThreadsPerRow), bytes, Q, K, V, O, L, problem.seq_len_q,
                       problem.seq_len_k, problem.scale, problem.causal);
}

// Every compiled instance's launch, in kCompiled's order.
template <std::size_t... n>
constexpr auto instances(std::index_sequence<n...>) {
  return std::array{&launch_instance<kCompiled[n]>...};
}
inline constexpr auto kInstances = instances(std::make_index_sequence<kCompiled.size()>{});

// The launch of the instance compiled for the problem's head_dim and tile (fa::compiled_index).
void launch_flash_attention_2(const float* Q, const float* K, const float* V, float* O, float* L,
                              const fa::DeviceProblem& problem, simt::LaunchMode mode) {
  kInstances[fa::compiled_index(problem, kCompiled)](Q, K, V, O, L, problem, mode);
}

// Host data in, host data out: Q, K, V to the device, O and L filled with NaN (simt::poisoned:
// an element the kernel does not write cannot pass for a result, and simt's race checker reports a
// read of one), the launch, O and L back.
Result run_flash_attention_2(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                             const fa::DeviceProblem& problem) {
  const auto q = simt::to_device<float>(Q.values), k = simt::to_device<float>(K.values),
             v = simt::to_device<float>(V.values);
  auto o = simt::poisoned<float>(Q.values.size());
  auto l = simt::poisoned<float>(Q.shape.batch * Q.shape.heads * Q.shape.seq_len);

  const auto start = std::chrono::steady_clock::now();
  launch_flash_attention_2(q.data(), k.data(), v.data(), o.data(), l.data(), problem, simt::LaunchMode::synchronous);
  const double elapsed_ms = fa::milliseconds_since(start);
  return {fa::Tensor4<float>(Q.shape, o.to_host()), l.to_host(), elapsed_ms};
}

}  // namespace ch05::SIMT_BACKEND
