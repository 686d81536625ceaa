// The chapter's kernels, compiled once per backend: ch04::cpu (common/simt, naive_attention_cpu.cpp)
// and ch04::gpu (nvcc, naive_attention_gpu.cu). Both are defined by the same source,
// naive_attention.cuh; this header declares what the rest of the program may call.
#pragma once

#include <span>
#include <vector>

namespace ch04 {

// One attention problem as the kernels see it: batch and heads folded into one index.
struct DeviceProblem {
  int batch_heads = 0;
  int seq_len_q = 0;
  int seq_len_k = 0;
  int head_dim = 0;
  float scale = 0.0f;
  bool causal = false;
};

// What one run brings back: O [batch_heads, seq_len_q, head_dim], S and P [batch_heads, seq_len_q,
// seq_len_k], and the time the three launches took, in milliseconds (wall clock, kernels
// synchronised; on the GPU this includes launch overhead: use the GPU check's benchmark for speed).
struct DeviceRun {
  std::vector<float> O;
  std::vector<float> S;
  std::vector<float> P;
  double elapsed_ms = 0.0;
};

// Both backends offer the same two functions (defined in naive_attention.cuh):
//   launch_naive_attention: the three launches on memory already on the device;
//   run_naive_attention:    host data in, host data out (copies, NaN-poisons the outputs, launches).
namespace cpu {  // always built
void launch_naive_attention(const float* Q, const float* K, const float* V, float* S, float* P,
                            float* O, const DeviceProblem& problem);
DeviceRun run_naive_attention(std::span<const float> Q, std::span<const float> K,
                              std::span<const float> V, const DeviceProblem& problem);
}  // namespace cpu

namespace gpu {  // built where nvcc was found (FA_HAVE_CUDA); device pointers for launch_*
void launch_naive_attention(const float* Q, const float* K, const float* V, float* S, float* P,
                            float* O, const DeviceProblem& problem);
DeviceRun run_naive_attention(std::span<const float> Q, std::span<const float> K,
                              std::span<const float> V, const DeviceProblem& problem);
}  // namespace gpu

// The profiled copy of the CPU kernels (cmake/SimtProfile.cmake; built where SIMT_PROFILED_KERNELS
// is 1): the same source, every memory access counted by simt's profile (common/simt/profile.h).
namespace cpu_profiled {
void launch_naive_attention(const float* Q, const float* K, const float* V, float* S, float* P,
                            float* O, const DeviceProblem& problem);
DeviceRun run_naive_attention(std::span<const float> Q, std::span<const float> K,
                              std::span<const float> V, const DeviceProblem& problem);
}  // namespace cpu_profiled

}  // namespace ch04
