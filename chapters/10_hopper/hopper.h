// Chapter 10's host API: FlashAttention-3's forward design on Hopper's instructions (hopper.cuh):
// wgmma from shared memory, TMA into a ring of stages with full and empty mbarriers, a producer
// warpgroup and two consumer warpgroups in ping-pong; bf16 or fp16 inputs (e4m3: hopper_fp8.h),
// float32 accumulation; on the CPU through common/simt or on an H100/H200 (sm_90a), chosen at run
// time.
//
// The road of one run: main.cpp calls hopper_attention() below, which checks the problem
// (check_problem) and that every input fits the element type (chapter 06's check_fits), then calls
// run_hopper of the build that runs on the device (fa::build_for); that run, in hopper.cuh, puts
// Q, K, V on the device rounded to the element type, makes their tensor maps, launches the
// compiled instance for the element type and head_dim, and brings O (widened to float32), L and
// the time back (fa::KernelRun). The FP8 run takes the same road from its own host header,
// hopper_fp8.h.
//
// Source: Shah et al. 2024, FlashAttention-3 (arXiv:2407.08608), Algorithm 1 and section 3.1.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chapters/06_tensor_cores/tensor_cores.h"
#include "common/kernel_problem.h"
#include "common/memory.h"
#include "common/tensor.h"

namespace ch10 {

// The element types are chapter 06's (bf16, fp16), with its rounding and its range check.
using ElementType = ch06::ElementType;

// What is compiled into the kernel (template parameters): each element type, head dims 64 and 128,
// one tile: Br = 128 query rows (two consumer warpgroups of 64: wgmma's M) by Bc = 64 keys (one TMA
// box of K_j and of V_j per 64 columns of the head dim). Anything else is refused before a launch.
inline constexpr std::array<int, 2> kHeadDims{64, 128};
inline constexpr std::array<fa::Tile, 1> kTileShapes{{{128, 64}}};
inline constexpr auto kCompiled = fa::every(kHeadDims, kTileShapes);

struct Options {
  std::optional<double> scale;              // softmax scale; 1/sqrt(head_dim) when not given
  bool causal = false;                      // bottom-right aligned causal mask (common/attention_shapes.h)
  ElementType element = ElementType::bf16;  // the type of Q, K, V and O inside the kernel
};

// O (widened to float32), L (-inf for a row that sees no key) and the time of the launch, as
// chapter 06 returns them; and the problem as the kernel sees it, with its element type.
using Result = fa::KernelRun;
using DeviceProblem = ch06::DeviceProblem;

// The kernel's entry point, compiled into each build of hopper.cuh (ch10::cpu, where simt runs
// wgmma, TMA and the mbarriers lane by lane; ch10::cpu_profiled; ch10::gpu, for sm_90a only):
// host data in (float32 holding values of problem.element), host data out.
using Run = Result(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                   const DeviceProblem& problem);
// One problem's launch, prepared: the instance for its element type and head_dim chosen, its
// shared-memory allowance asked for and its four tensor maps encoded (host calls, once); calling it
// launches the kernel on Q, K, V, O (problem.element, [batch * heads][seq_len][head_dim] row-major)
// and L ([batch * heads][seq_len_q] float32) already on this backend's device, waiting for it or
// only putting it on the stream as the mode says (common/simt/runtime/launch_mode.h). What the GPU
// benchmark times (lab/gpu_bench.cpp), without the maps' encoding. Prepare throws what
// simt::make_tensor_map throws (std::invalid_argument for a map outside the tensor-map rules,
// std::runtime_error where the driver refuses one); the launch throws what simt::launch throws.
using Prepared = std::function<void(simt::LaunchMode mode)>;
using Prepare = Prepared(const void* Q, const void* K, const void* V, void* O, float* L, const DeviceProblem& problem);
namespace cpu {
Run run_hopper;
}  // namespace cpu
namespace cpu_profiled {
Run run_hopper;
}  // namespace cpu_profiled
namespace gpu {
Run run_hopper;
Prepare prepare_hopper;
// Throws std::runtime_error, in one line, unless the current GPU is a Hopper (compute capability
// 9.0) and this build holds the kernel for sm_90a (wgmma and setmaxnreg exist there only).
void require_hopper();
}  // namespace gpu

// The element type named by --dtype: chapter 06's (bf16, fp16). Throws std::invalid_argument, one
// line: for e4m3, saying that the FP8 kernel is its own program (main_fp8.cpp, hopper_fp8.h); for
// any other name, as chapter 06's parse_element_type.
inline ElementType parse_element_type(std::string_view name) {
  if (name == "e4m3") {
    throw std::invalid_argument(
        "--dtype e4m3: the FP8 kernel is its own program, ch10_hopper_fp8 (the same flags, and --quant, --hadamard, "
        "--p-scale)");
  }
  return ch06::parse_element_type(name);
}

// On Device::gpu, what require_hopper checks; nothing on the CPU (fa::require_device first: a
// build without a GPU path, or no GPU, says so).
inline void check_device(fa::Device device) {
  fa::require_device(device);
#if FA_HAVE_CUDA
  if (device == fa::Device::gpu) gpu::require_hopper();
#endif
}

// The problem as the kernel will see it, after every check hopper_attention makes before it
// touches the data (fa::device_problem: the head dim among kCompiled, the scale, the grid's limits
// and int indexing). Throws std::invalid_argument as hopper_attention does, except for the inputs'
// values (ch06::check_fits checks those).
inline DeviceProblem check_problem(const fa::AttentionShape& shape, const Options& options) {
  return {fa::device_problem("hopper_attention", shape, options.scale, options.causal, kTileShapes[0], kCompiled),
          options.element};
}

// The memory one run holds on the host: Q, K, V and O in float32 in, O and L back, and the 16-bit
// copies on the device (simt's device is the host's memory).
inline std::uint64_t memory_needed(const fa::AttentionShape& s) {
  const fa::AttentionCounts n = fa::attention_counts(s);
  return fa::bytes_of(static_cast<double>(sizeof(float) * (3 * n.q + 2 * n.k + 2 * n.rows) + 2 * (2 * n.q + 2 * n.k)));
}

// O = softmax(Q K^T * scale) V and L by FlashAttention-3's forward design.
// Q: [batch, heads, seq_len_q, head_dim]; K, V: [batch, heads, seq_len_k, head_dim]; float32,
// row-major, rounded to options.element (round to nearest even) on their way to the kernel; any
// seq_len >= 1; head_dim one of kHeadDims.
// Throws std::invalid_argument (naming what is accepted) for another head_dim, shapes that do not
// fit together, a scale that is not finite, an input the element type cannot hold, sizes past the
// kernel's int indexing, or batch * heads > 65535 (the grid's y limit); std::runtime_error when
// device == gpu and no Hopper GPU can be used, or for a CUDA error.
inline Result hopper_attention(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                               const Options& options = {}, fa::Device device = fa::Device::cpu) {
  const DeviceProblem problem = check_problem(fa::check_attention_shapes(Q.shape, K.shape, V.shape), options);
  ch06::check_fits(Q, options.element, "Q");
  ch06::check_fits(K, options.element, "K");
  ch06::check_fits(V, options.element, "V");
  check_device(device);
  return fa::build_for(device, FA_BUILDS(ch10, run_hopper))(Q, K, V, problem);
}

}  // namespace ch10
