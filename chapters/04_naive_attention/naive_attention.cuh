// Chapter 04: attention on the GPU, the naive way: three kernels, S and P in global memory.
//
// What this chapter adds to chapter 03: the same O = softmax(Q K^T * scale) V, now as CUDA
// kernels, in float32, one thread per output number. Nothing is clever yet: each step writes its
// whole result to global memory (HBM on a GPU) and the next step reads it back. That is the
// "standard attention" whose memory traffic chapter 05 removes.
//
// The algorithm, for every (batch, head) pair at once:
//   1. S[i][j] = scale * sum_d Q[i][d] * K[j][d]           scores_kernel: one thread per S[i][j]
//      S[i][j] = -inf where the causal mask hides key j       (S written to global memory)
//   2. m_i = max_j S[i][j]                                    softmax_kernel: one block per row i
//   3. l_i = sum_j exp(S[i][j] - m_i)                           (the chapter 01 safe softmax,
//   4. P[i][j] = exp(S[i][j] - m_i) / l_i                        reductions across the block)
//                                                             (P written to global memory)
//   5. O[i][d] = sum_j P[i][j] * V[j][d]                      pv_kernel: one thread per O[i][d]
//
// Layout: Q, O [batch, heads, seq_len_q, head_dim]; K, V [batch, heads, seq_len_k, head_dim];
// S, P [batch, heads, seq_len_q, seq_len_k]; all row-major float32 (common/attention_shapes.h).
// Causal mask: query i sees keys j <= i + seq_len_k - seq_len_q (bottom-right aligned, as in
// FlashAttention 2.1+); a row that sees no key gets P = 0 and O = 0.
//
// Built three times, as every chapter's kernels are (ch04::cpu, ch04::cpu_profiled, ch04::gpu:
// fa::Builds, common/kernel_problem.h). naive_attention.h declares its two entry points
// (run_naive_attention, launch_naive_attention, at the end of this file) and picks the build that runs.
//
// Source: Dao et al. 2022, FlashAttention, section 2.2 (standard attention: S and P written to and read
// back from HBM, four passes over N^2 numbers) and
// FlashAttention, Algorithm 0 (standard attention implementation).
// Run the demo: build/default/bin/ch04_naive_attention
#pragma once

#include <chrono>
#include <cstddef>
#include <limits>
#include <span>

#include "chapters/04_naive_attention/naive_attention.h"
#include "common/simt/simt.h"

namespace ch04::SIMT_BACKEND {

// Step 1. Grid: (ceil(seq_len_k / 16), ceil(seq_len_q / 16), batch * heads); block: (16, 16).
// Thread (x, y) of block (bx, by, bh) computes S[bh][i = by*16 + y][j = bx*16 + x].
__global__ void scores_kernel(const float* __restrict__ Q, const float* __restrict__ K, float* __restrict__ S,
                              int seq_len_q, int seq_len_k, int head_dim, float scale, bool causal) {
  // graded 04a: step 1, which S[bh][i][j] this thread computes, its dot product, scale and causal mask
  const int j = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  const int i = static_cast<int>(blockIdx.y * blockDim.y + threadIdx.y);
  const std::size_t bh = blockIdx.z;
  if (i >= seq_len_q || j >= seq_len_k) return;  // the tail of the last blocks: nothing to do

  const float* q = Q + (bh * seq_len_q + i) * head_dim;
  const float* k = K + (bh * seq_len_k + j) * head_dim;
  float dot = 0.0f;
  for (int d = 0; d < head_dim; ++d) dot += q[d] * k[d];  // line 1: summed in order d = 0, 1, ...

  const bool masked = causal && j > i + seq_len_k - seq_len_q;
  S[(bh * seq_len_q + i) * seq_len_k + j] = masked ? -INFINITY : dot * scale;
  // end graded
}

// The largest of a and b, where a NaN wins (fmaxf would drop it). A NaN score reaches P through
// l in any case; keeping it in m too means a row of only NaN and -inf gives NaN, not the zeros of a
// fully masked row.
__device__ __forceinline__ float max_keep_nan(float a, float b) { return (a > b || a != a) ? a : b; }

// Steps 2-4. Grid: (seq_len_q, batch * heads); block: kSoftmaxThreads threads, all of them working
// on row i = blockIdx.x of head blockIdx.y. Each thread walks the row with stride blockDim.x; the
// block then combines the threads' partial max (and later sum) in shared memory.
inline constexpr int kSoftmaxThreads = 256;

__global__ void softmax_kernel(const float* __restrict__ S, float* __restrict__ P, int seq_len_k) {
  __shared__ float partial[kSoftmaxThreads];
  const std::size_t row = static_cast<std::size_t>(blockIdx.y) * gridDim.x + blockIdx.x;
  const float* s = S + row * seq_len_k;
  float* p = P + row * seq_len_k;
  const int t = static_cast<int>(threadIdx.x);

  // graded 04b: lines 2-3, the row's max and sum, each by a tree over `partial`, with the barriers it needs
  // Line 2: m = max_j S[i][j]. Each thread's share of the row, then a tree over the block.
  float m = -INFINITY;
  for (int j = t; j < seq_len_k; j += kSoftmaxThreads) m = max_keep_nan(m, s[j]);
  partial[t] = m;
  __syncthreads();
  for (int half = kSoftmaxThreads / 2; half > 0; half /= 2) {
    if (t < half) partial[t] = max_keep_nan(partial[t], partial[t + half]);
    __syncthreads();
  }
  m = partial[0];
  __syncthreads();  // everyone has read partial[0] before it is reused for the sum

  // A fully masked row has m = -inf, and exp(-inf - (-inf)) would be NaN: subtract 0 instead, so
  // every term is exp(-inf) = 0, l = 0, and the row's P is 0 (the book's convention: masked rows give
  // zeros, docs/conventions.md).
  const float m_safe = m == -INFINITY ? 0.0f : m;  // chapter 02's safe_max, written out

  // Line 3: l = sum_j exp(S[i][j] - m), the same tree.
  float l = 0.0f;
  for (int j = t; j < seq_len_k; j += kSoftmaxThreads) l += expf(s[j] - m_safe);
  partial[t] = l;
  __syncthreads();
  for (int half = kSoftmaxThreads / 2; half > 0; half /= 2) {
    if (t < half) partial[t] += partial[t + half];
    __syncthreads();
  }
  l = partial[0];
  // end graded

  // Line 4: P[i][j] = exp(S[i][j] - m) / l, and 0 for a row that sees no key.
  for (int j = t; j < seq_len_k; j += kSoftmaxThreads) {
    p[j] = (l == 0.0f) ? 0.0f : expf(s[j] - m_safe) / l;
  }
}

// Step 5. Grid: (ceil(head_dim / 16), ceil(seq_len_q / 16), batch * heads); block: (16, 16).
// Thread (x, y) computes O[bh][i = by*16 + y][d = bx*16 + x] = sum_j P[i][j] * V[j][d].
__global__ void pv_kernel(const float* __restrict__ P, const float* __restrict__ V, float* __restrict__ O,
                          int seq_len_q, int seq_len_k, int head_dim) {
  // graded 04c: step 5, which O[bh][i][d] this thread computes: the row of P and the column of V it reads
  const int d = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  const int i = static_cast<int>(blockIdx.y * blockDim.y + threadIdx.y);
  const std::size_t bh = blockIdx.z;
  if (i >= seq_len_q || d >= head_dim) return;

  const float* p = P + (bh * seq_len_q + i) * seq_len_k;
  const float* v = V + bh * seq_len_k * head_dim + d;
  float o = 0.0f;
  for (int j = 0; j < seq_len_k; ++j) o += p[j] * v[static_cast<std::size_t>(j) * head_dim];  // line 5
  O[(bh * seq_len_q + i) * head_dim + d] = o;
  // end graded
}

// The three launches on memory that already lives on this backend's device (device pointers
// under nvcc, host pointers on the CPU). Shapes as above; S and P hold
// batch_heads * seq_len_q * seq_len_k floats. Throws what simt::launch throws (a CUDA error on the
// GPU; std::invalid_argument for an impossible launch, std::runtime_error for a broken barrier on
// the CPU). Grid limits: batch_heads <= 65535 (gridDim.y and .z). With LaunchMode::asynchronous
// the GPU returns once the three kernels are queued (common/simt/runtime/launch_mode.h).
void launch_naive_attention(const float* Q, const float* K, const float* V, float* S, float* P, float* O,
                            const fa::DeviceProblem& problem, simt::LaunchMode mode) {
  const dim3 tile(16, 16);
  const auto blocks = [](int n) { return static_cast<unsigned>((n + 15) / 16); };
  const auto bh = static_cast<unsigned>(problem.batch_heads);
  const int n_q = problem.seq_len_q;
  const int n_k = problem.seq_len_k;
  const int d = problem.head_dim;

  simt::launch<scores_kernel>(mode, dim3(blocks(n_k), blocks(n_q), bh), tile, 0, Q, K, S, n_q, n_k, d, problem.scale,
                              problem.causal);
  simt::launch<softmax_kernel>(mode, dim3(static_cast<unsigned>(n_q), bh), dim3(kSoftmaxThreads), 0,
                               static_cast<const float*>(S), P, n_k);
  simt::launch<pv_kernel>(mode, dim3(blocks(d), blocks(n_q), bh), tile, 0, static_cast<const float*>(P), V, O, n_q, n_k,
                          d);
}

// Host data in, host data out: copies Q, K, V to the device, fills S, P and O with NaN (so a value
// a kernel forgot to write cannot pass for a result), runs the three kernels, copies S, P and O
// back. Sizes as launch_naive_attention; elapsed_ms covers the three launches only.
Result run_naive_attention(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                           const fa::DeviceProblem& problem) {
  const std::size_t scores = static_cast<std::size_t>(problem.batch_heads) * problem.seq_len_q * problem.seq_len_k;
  const auto dQ = simt::to_device<float>(Q.values), dK = simt::to_device<float>(K.values),
             dV = simt::to_device<float>(V.values);
  simt::DeviceBuffer<float> dS(scores), dP(scores), dO(Q.values.size());
  // NaN, and unwritten for simt's race checker, which reports a kernel's read of it (racecheck.h).
  dS.poison();
  dP.poison();
  dO.poison();

  const auto start = std::chrono::steady_clock::now();
  launch_naive_attention(dQ.data(), dK.data(), dV.data(), dS.data(), dP.data(), dO.data(), problem,
                         simt::LaunchMode::synchronous);
  const double elapsed_ms = fa::milliseconds_since(start);
  return {fa::Tensor4<float>(Q.shape, dO.to_host()), dS.to_host(), dP.to_host(), elapsed_ms};
}

}  // namespace ch04::SIMT_BACKEND
