// The chapter's kernels, compiled once per backend (add_kernels, cmake/Chapters.cmake): ch07::cpu
// (the host compiler, through common/simt) and ch07::gpu (nvcc). Both are defined by the same
// source, backward.cuh; this header declares what the rest of the program may call.
#pragma once

#include <span>
#include <vector>

#include "common/device_problem.h"

namespace ch07 {

// A tile shape: Br query rows and Bc keys per tile. Both kernels of the backward pass use the same
// one; tile_for_head_dim() picks it.
struct TileShape {
  int Br = 32;
  int Bc = 64;
  bool operator==(const TileShape&) const = default;
};

// The tile each compiled head dim runs with. Br != Bc on purpose, so that a kernel that mixes up
// query rows and keys cannot pass. head_dim 128 takes 32 x 32 so that the dK, dV kernel's shared
// memory (K_j, V_j, Q_i, dO_i, P, dS) stays under 99 KiB, what a block of most GPUs may have.
constexpr TileShape tile_for_head_dim(int head_dim) { return head_dim == 128 ? TileShape{32, 32} : TileShape{32, 64}; }

// One backward problem as the kernels see it (common/device_problem.h), and how dQ is made.
struct DeviceProblem : fa::DeviceProblem {
  bool deterministic = false;  // dQ from its own kernel (query blocks outside) instead of atomics
};

// What one run brings back: dQ [batch_heads, seq_len_q, head_dim], dK and dV
// [batch_heads, seq_len_k, head_dim], D [batch_heads, seq_len_q], and the wall time of the launches
// in milliseconds (synchronised; on the GPU this includes launch overhead: ch07_gpu_bench measures
// speed with CUDA events).
struct BackwardRun {
  std::vector<float> dQ, dK, dV, D;
  double elapsed_ms = 0.0;
};

// Both backends offer the same two functions (defined in backward.cuh):
//   launch_backward: the launches on memory already on the device: the preprocessing kernel (D,
//                    and dQ = 0 for the atomic method), the dK, dV kernel, and with
//                    problem.deterministic the dQ kernel. head_dim must be a compiled one (the host
//                    API checks). Q, O, dO, dQ: [batch_heads, seq_len_q, head_dim]; K, V, dK, dV:
//                    [batch_heads, seq_len_k, head_dim]; L, D: [batch_heads, seq_len_q].
//   run_backward:    host data in, host data out (copies, NaN-poisons dQ, dK, dV and D, launches).
namespace cpu {  // always built
void launch_backward(const float* Q, const float* K, const float* V, const float* O, const float* L, const float* dO,
                     float* D, float* dQ, float* dK, float* dV, const DeviceProblem& problem);
BackwardRun run_backward(std::span<const float> Q, std::span<const float> K, std::span<const float> V,
                         std::span<const float> O, std::span<const float> L, std::span<const float> dO,
                         const DeviceProblem& problem);
}  // namespace cpu

namespace gpu {  // built where nvcc was found (FA_HAVE_CUDA); device pointers for launch_backward
void launch_backward(const float* Q, const float* K, const float* V, const float* O, const float* L, const float* dO,
                     float* D, float* dQ, float* dK, float* dV, const DeviceProblem& problem);
BackwardRun run_backward(std::span<const float> Q, std::span<const float> K, std::span<const float> V,
                         std::span<const float> O, std::span<const float> L, std::span<const float> dO,
                         const DeviceProblem& problem);
}  // namespace gpu

// The profiled copy of the CPU kernels (cmake/SimtProfile.cmake; built where SIMT_PROFILED_KERNELS
// is 1): the same source, every memory access seen by simt's profile and race checker
// (common/simt/profile.h, racecheck.h).
namespace cpu_profiled {
void launch_backward(const float* Q, const float* K, const float* V, const float* O, const float* L, const float* dO,
                     float* D, float* dQ, float* dK, float* dV, const DeviceProblem& problem);
BackwardRun run_backward(std::span<const float> Q, std::span<const float> K, std::span<const float> V,
                         std::span<const float> O, std::span<const float> L, std::span<const float> dO,
                         const DeviceProblem& problem);
}  // namespace cpu_profiled

}  // namespace ch07
