// The chapter's kernels, compiled once per backend (add_kernels, cmake/Chapters.cmake): ch04::cpu
// (the host compiler, through common/simt) and ch04::gpu (nvcc). Both are defined by the same
// source, naive_attention.cuh; this header declares what the rest of the program may call.
#pragma once

#include <span>

#include "common/device_problem.h"
#include "common/simt/launch_mode.h"

namespace ch04 {

using fa::DeviceProblem;
using fa::DeviceRun;

// Both backends offer the same functions (defined in naive_attention.cuh):
//   launch_naive_attention: the three launches on memory already on the device (with a
//                           LaunchMode: asynchronous on the GPU if asked, common/simt/launch_mode.h);
//   run_naive_attention:    host data in, host data out (copies, NaN-poisons the outputs,
//                           launches); fills O, S and P of the DeviceRun.
namespace cpu {  // always built
void launch_naive_attention(const float* Q, const float* K, const float* V, float* S, float* P, float* O,
                            const DeviceProblem& problem);
void launch_naive_attention(const float* Q, const float* K, const float* V, float* S, float* P, float* O,
                            const DeviceProblem& problem, simt::LaunchMode mode);
DeviceRun run_naive_attention(std::span<const float> Q, std::span<const float> K, std::span<const float> V,
                              const DeviceProblem& problem);
}  // namespace cpu

namespace gpu {  // built where nvcc was found (FA_HAVE_CUDA); device pointers for launch_*
void launch_naive_attention(const float* Q, const float* K, const float* V, float* S, float* P, float* O,
                            const DeviceProblem& problem);
void launch_naive_attention(const float* Q, const float* K, const float* V, float* S, float* P, float* O,
                            const DeviceProblem& problem, simt::LaunchMode mode);
DeviceRun run_naive_attention(std::span<const float> Q, std::span<const float> K, std::span<const float> V,
                              const DeviceProblem& problem);
}  // namespace gpu

// The profiled copy of the CPU kernels (cmake/SimtProfile.cmake; built where SIMT_PROFILED_KERNELS
// is 1): the same source, every memory access seen by simt's profile and race checker
// (common/simt/profile.h, racecheck.h).
namespace cpu_profiled {
void launch_naive_attention(const float* Q, const float* K, const float* V, float* S, float* P, float* O,
                            const DeviceProblem& problem);
DeviceRun run_naive_attention(std::span<const float> Q, std::span<const float> K, std::span<const float> V,
                              const DeviceProblem& problem);
}  // namespace cpu_profiled

}  // namespace ch04
