// What the host side of every CUDA chapter does the same way before and after its kernels: one
// attention problem as the kernels see it (DeviceProblem), its checks against the kernels' int
// indexing and the grid's limits, what a run brings back (DeviceRun), and the choice between the
// CPU build of the kernels (chNN::cpu, through common/simt) and the GPU build (chNN::gpu, nvcc).
#pragma once

// (This header is included by kernel sources that nvcc compiles: it holds no fmt and no
// definitions that nvcc would have to compile; device_problem.cpp has them.)
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "common/device.h"

namespace fa {

struct AttentionShape;  // common/attention_shapes.h

// One attention problem as a kernel sees it: batch and heads folded into one index (the tensors
// are [batch * heads, seq_len, head_dim], row-major), sizes as int, the scale as float32.
struct DeviceProblem {
  int batch_heads = 0;
  int seq_len_q = 0;
  int seq_len_k = 0;
  int head_dim = 0;
  float scale = 0.0f;
  bool causal = false;
};

// The most batch * heads a chapter's grid allows: gridDim.y and gridDim.z are at most 65535 (CUDA
// C++ Programming Guide, "Compute Capabilities", technical specifications).
inline constexpr std::uint64_t kMaxBatchHeads = 65535;

// The problem, checked: scale (1/sqrt(head_dim) when not given) must be finite in float32, batch *
// heads at most kMaxBatchHeads, and one head's Q, K or V (seq_len * head_dim values) within the
// kernels' int indexing (2^31 - 1). Throws std::invalid_argument starting with `who` and saying
// what is accepted. Source: the kernels' index arithmetic (chapters/0N_*/*.cuh).
DeviceProblem device_problem(std::string_view who, const AttentionShape& shape, std::optional<double> scale,
                             bool causal);

// What one run of a chapter's kernels brings back, each [batch * heads, ...] row-major float32;
// a chapter fills what its kernels write and leaves the rest empty.
//   O  [.., seq_len_q, head_dim]        every chapter
//   L  [.., seq_len_q]                  the row logsumexp (chapters 05 and later)
//   S, P  [.., seq_len_q, seq_len_k]    the scores and weights (chapter 04 only)
// elapsed_ms: the wall time of the launches (kernels synchronised; on the GPU this includes
// launch overhead: scripts/gpu_check.sh measures speed with CUDA events).
struct DeviceRun {
  std::vector<float> O, L, S, P;
  double elapsed_ms = 0.0;
};

// Runs `cpu()` (the kernels of chNN::cpu) or, on Device::gpu, `gpu()` (chNN::gpu). In a build
// without the GPU path the gpu function is never called (nor linked), and Device::gpu throws
// std::runtime_error saying why (require_device). Returns what the function returns.
template <class Cpu, class Gpu>
auto run_on(Device device, Cpu&& cpu, [[maybe_unused]] Gpu&& gpu) {
  require_device(device);
#if FA_HAVE_CUDA
  if (device == Device::gpu) return gpu();
#endif
  return cpu();
}

}  // namespace fa
