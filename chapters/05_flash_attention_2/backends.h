// The chapter's kernel, compiled once per backend (add_kernels, cmake/Chapters.cmake): ch05::cpu
// (the host compiler, through common/simt) and ch05::gpu (nvcc). Both are defined by the same
// source, flash_attention_2.cuh; this header declares what the rest of the program may call.
#pragma once

#include <span>

#include "common/device_problem.h"
#include "common/simt/launch_mode.h"

namespace ch05 {

// A tile shape: Br query rows per thread block, Bc keys per K/V tile.
struct TileShape {
  int Br = 64;
  int Bc = 64;
  bool operator==(const TileShape&) const = default;
};

// One attention problem as the kernel sees it (common/device_problem.h), and the tile to run it in.
struct DeviceProblem : fa::DeviceProblem {
  TileShape tile{};
};

using fa::DeviceRun;  // fills O [batch_heads, seq_len_q, head_dim] and L [batch_heads, seq_len_q]

// Both backends offer the same functions (defined in flash_attention_2.cuh):
//   launch_flash_attention_2: the launch on memory already on the device (head_dim and tile must be
//                             among the compiled ones: the host API checks; with a LaunchMode:
//                             asynchronous on the GPU if asked, common/simt/launch_mode.h);
//   run_flash_attention_2:    host data in, host data out (copies, NaN-poisons O and L, launches).
namespace cpu {  // always built
void launch_flash_attention_2(const float* Q, const float* K, const float* V, float* O, float* L,
                              const DeviceProblem& problem);
void launch_flash_attention_2(const float* Q, const float* K, const float* V, float* O, float* L,
                              const DeviceProblem& problem, simt::LaunchMode mode);
DeviceRun run_flash_attention_2(std::span<const float> Q, std::span<const float> K, std::span<const float> V,
                                const DeviceProblem& problem);
}  // namespace cpu

namespace gpu {  // built where nvcc was found (FA_HAVE_CUDA); device pointers for launch_*
void launch_flash_attention_2(const float* Q, const float* K, const float* V, float* O, float* L,
                              const DeviceProblem& problem);
void launch_flash_attention_2(const float* Q, const float* K, const float* V, float* O, float* L,
                              const DeviceProblem& problem, simt::LaunchMode mode);
DeviceRun run_flash_attention_2(std::span<const float> Q, std::span<const float> K, std::span<const float> V,
                                const DeviceProblem& problem);
}  // namespace gpu

// The profiled copy of the CPU kernels (cmake/SimtProfile.cmake; built where SIMT_PROFILED_KERNELS
// is 1): the same source, every memory access seen by simt's profile and race checker
// (common/simt/profile.h, racecheck.h).
namespace cpu_profiled {
void launch_flash_attention_2(const float* Q, const float* K, const float* V, float* O, float* L,
                              const DeviceProblem& problem);
DeviceRun run_flash_attention_2(std::span<const float> Q, std::span<const float> K, std::span<const float> V,
                                const DeviceProblem& problem);
}  // namespace cpu_profiled

}  // namespace ch05
