// The chapter's kernel, compiled once per backend (add_kernels, cmake/Chapters.cmake): ch06::cpu
// (common/simt) and ch06::gpu (nvcc). Both are defined by the same source, tensor_cores.cuh;
// this header declares what the rest of the program may call.
//
// Elements of Q, K, V and O cross this interface as their bit patterns (std::uint16_t: the 16 bits
// of a bf16 or an fp16 value), because the two backends spell the element types differently
// (simt's CPU types, CUDA's __nv_bfloat16 and __half) and a header seen by both must not name them.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "chapters/05_flash_attention_2/backends.h"
#include "common/device_problem.h"

namespace ch06 {

// The 16-bit element types of the kernel's inputs and output. Scores, the running max m, the sum l
// and the accumulator acc are float32 in both (mma.sync's .f32 accumulator).
//   bf16: 8 exponent bits (float32's range), 8 significant bits: unit roundoff 2^-8
//   f16:  5 exponent bits (largest finite 65504), 11 significant bits: unit roundoff 2^-11
enum class ElementType { bf16, f16 };

constexpr std::string_view to_string(ElementType e) { return e == ElementType::bf16 ? "bf16" : "fp16"; }

// Br query rows per thread block (16 per warp), Bc keys per K/V tile: chapter 05's shape type.
using ch05::TileShape;

// One attention problem as the kernel sees it (common/device_problem.h), the tile to run it in,
// and the element type.
struct DeviceProblem : fa::DeviceProblem {
  TileShape tile{};
  ElementType element = ElementType::bf16;
};

// What one run brings back (fa::DeviceRun's O is float32; here it is the elements' bits): O
// [batch_heads, seq_len_q, head_dim] as element bits, L
// [batch_heads, seq_len_q] in float32, and the wall time of the launch in milliseconds
// (synchronised; on the GPU it includes launch overhead: ch06_gpu_bench measures speed).
struct DeviceRun {
  std::vector<std::uint16_t> O;
  std::vector<float> L;
  double elapsed_ms = 0.0;
};

// Both backends offer (defined in tensor_cores.cuh):
//   launch_tensor_cores: the launch on memory already on the device, Q, K, V, O holding elements
//                        of problem.element (head_dim and tile must be among the compiled ones:
//                        the host API checks); returns when the kernel is done;
//   run_tensor_cores:    host data in, host data out (copies, NaN-poisons O and L, launches).
namespace cpu {  // always built
void launch_tensor_cores(const void* Q, const void* K, const void* V, void* O, float* L, const DeviceProblem& problem);
DeviceRun run_tensor_cores(std::span<const std::uint16_t> Q, std::span<const std::uint16_t> K,
                           std::span<const std::uint16_t> V, const DeviceProblem& problem);
}  // namespace cpu

namespace gpu {  // built where nvcc was found (FA_HAVE_CUDA); device pointers for launch_* and enqueue_*
void launch_tensor_cores(const void* Q, const void* K, const void* V, void* O, float* L, const DeviceProblem& problem);
DeviceRun run_tensor_cores(std::span<const std::uint16_t> Q, std::span<const std::uint16_t> K,
                           std::span<const std::uint16_t> V, const DeviceProblem& problem);
// For the benchmark (gpu_bench.cpp): prepare_tensor_cores sets the kernel's shared-memory
// allowance (cudaFuncSetAttribute) once, outside the timed region; enqueue_tensor_cores then only
// puts the kernel on the default stream (no cudaDeviceSynchronize) and checks the launch.
void prepare_tensor_cores(const DeviceProblem& problem);
void enqueue_tensor_cores(const void* Q, const void* K, const void* V, void* O, float* L, const DeviceProblem& problem);
}  // namespace gpu

// The profiled copy of the CPU kernel (cmake/SimtProfile.cmake; built where SIMT_PROFILED_KERNELS is
// 1): the same source, every memory access seen by simt's profile and race checker
// (common/simt/profile.h, racecheck.h).
namespace cpu_profiled {
void launch_tensor_cores(const void* Q, const void* K, const void* V, void* O, float* L, const DeviceProblem& problem);
DeviceRun run_tensor_cores(std::span<const std::uint16_t> Q, std::span<const std::uint16_t> K,
                           std::span<const std::uint16_t> V, const DeviceProblem& problem);
}  // namespace cpu_profiled

}  // namespace ch06
