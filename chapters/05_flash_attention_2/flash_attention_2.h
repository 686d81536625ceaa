// Chapter 05's host API: the FlashAttention-2 forward kernel (flash_attention_2.cuh), on the CPU
// through common/simt or on an NVIDIA GPU, chosen at run time.
//
// The road of one run: main.cpp calls flash_attention_2() below, which checks the problem
// (check_problem) and calls run_flash_attention_2 of the build that runs on the device
// (fa::build_for); that run, in flash_attention_2.cuh, puts Q, K and V on the device, launches the
// compiled instance for head_dim and the tile, and brings O, L and the time back (fa::KernelRun).
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include "common/chapter.h"
#include "common/memory.h"
#include "common/simt/launch_mode.h"
#include "common/tensor.h"

namespace ch05 {

// The head dims and tile shapes compiled into the kernel (template parameters): every head dim in
// every tile. Anything else is refused before a launch. Br != Bc is allowed: (32, 64) and (64, 32)
// are there to prove it.
inline constexpr std::array<int, 3> kHeadDims{32, 64, 128};
inline constexpr std::array<fa::Tile, 3> kTileShapes{{{64, 64}, {32, 64}, {64, 32}}};
inline constexpr auto kCompiled = fa::every(kHeadDims, kTileShapes);

struct Options {
  std::optional<double> scale;  // softmax scale; 1/sqrt(head_dim) when not given
  bool causal = false;          // bottom-right aligned causal mask (common/attention_shapes.h)
  fa::Tile tile{64, 64};        // one of kTileShapes
};

// O [batch, heads, seq_len_q, head_dim], L [batch, heads, seq_len_q] (m + log(l); -inf for a row
// that sees no key) and the wall time of the launch.
using Result = fa::KernelRun;

// The kernel's two entry points, compiled into each build of flash_attention_2.cuh (ch05::cpu,
// ch05::cpu_profiled, ch05::gpu: fa::Builds, common/chapter.h). head_dim and the tile must be among
// kCompiled (check_problem refuses anything else first).
//   Run:     host data in, host data out: the path of flash_attention_2().
//   Launch:  on memory already on the GPU, waiting for the kernel or not as `mode` says
//            (common/simt/launch_mode.h): what the GPU benchmarks time.
using Run = Result(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                   const fa::DeviceProblem& problem);
using Launch = void(const float* Q, const float* K, const float* V, float* O, float* L,
                    const fa::DeviceProblem& problem, simt::LaunchMode mode);
namespace cpu {
Run run_flash_attention_2;
}  // namespace cpu
namespace cpu_profiled {
Run run_flash_attention_2;
}  // namespace cpu_profiled
namespace gpu {
Run run_flash_attention_2;
Launch launch_flash_attention_2;
}  // namespace gpu

// The problem as the kernel sees it, after every check flash_attention_2 makes before any work:
// head_dim and options.tile among kCompiled, and fa::device_problem's (scale finite in float32,
// batch * heads <= 65535, int indexing of one head's Q, K, V). Throws std::invalid_argument naming
// what is accepted.
inline fa::DeviceProblem check_problem(const fa::AttentionShape& shape, const Options& options) {
  return fa::device_problem("flash_attention_2", shape, options.scale, options.causal, options.tile, kCompiled);
}

// The bytes flash_attention_2 allocates: Q, K, V, O and L on the device and O, L copied back (on
// the CPU path the "device" is host memory too). Never throws (saturates at 2^64 - 1).
inline std::uint64_t memory_needed(const fa::AttentionShape& s) {
  const fa::AttentionCounts n = fa::attention_counts(s);
  return fa::bytes_of(sizeof(float) * (3 * n.q + 2 * n.k + 2 * n.rows));  // Q, K, V, O, L; O, L back
}

// O = softmax(Q K^T * scale) V and L by the FlashAttention-2 forward kernel, which never writes
// S or P to global memory.
// Q: [batch, heads, seq_len_q, head_dim]; K, V: [batch, heads, seq_len_k, head_dim]; float32,
// row-major; any seq_len >= 1; head_dim one of kHeadDims; options.tile one of kTileShapes.
// Throws std::invalid_argument for shapes that do not fit together (fa::check_attention_shapes)
// and as check_problem; std::runtime_error when device == gpu and no GPU can be used, or for a
// CUDA error.
// Source: Dao 2023, FlashAttention-2, Algorithm 1 (forward pass).
inline Result flash_attention_2(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                                const Options& options = {}, fa::Device device = fa::Device::cpu) {
  const fa::DeviceProblem problem = check_problem(fa::check_attention_shapes(Q.shape, K.shape, V.shape), options);
  return fa::build_for(device, FA_BUILDS(ch05, run_flash_attention_2))(Q, K, V, problem);
}

}  // namespace ch05
