// The chapter's kernels, compiled once per backend: ch04::cpu (common/simt, naive_attention_cpu.cpp)
// and ch04::gpu (nvcc, naive_attention_gpu.cu). Both are defined by the same source,
// naive_attention.cuh; this header declares what the rest of the program may call.
#pragma once

#include <span>

#include "common/device_problem.h"

namespace ch04 {

using fa::DeviceProblem;
using fa::DeviceRun;

// Both backends offer the same two functions (defined in naive_attention.cuh):
//   launch_naive_attention: the three launches on memory already on the device;
//   run_naive_attention:    host data in, host data out (copies, NaN-poisons the outputs,
//                           launches); fills O, S and P of the DeviceRun.
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

}  // namespace ch04
