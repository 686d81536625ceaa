// Chapter 06's host API: FlashAttention-2 on tensor cores (tensor_cores.cuh), bf16 or fp16 inputs,
// float32 accumulation, on the CPU through common/simt or on an NVIDIA GPU, chosen at run time.
//
// The road of one run: main.cpp calls tensor_core_attention() below, which checks the problem
// (check_problem) and that every input fits the element type (check_fits), then calls
// run_tensor_cores of the build that runs on the device (fa::build_for); that run, in
// tensor_cores.cuh, rounds Q, K, V to the element type on their way to the device, launches the
// compiled instance for the element type, head_dim and the tile, and brings O (widened to float32),
// L and the time back (fa::KernelRun).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "common/kernel_problem.h"
#include "common/simt/runtime/launch_mode.h"
#include "common/tensor.h"

namespace ch06 {

// The 16-bit element types of the kernel's inputs and output. Scores, the running max m, the sum l
// and the accumulator acc are float32 in both (mma.sync's .f32 accumulator).
//   bf16: 8 exponent bits (float32's range), 8 significant bits: unit roundoff 2^-8
//   fp16: 5 exponent bits (largest finite 65504), 11 significant bits: unit roundoff 2^-11
enum class ElementType { bf16, fp16 };

constexpr std::string_view to_string(ElementType e) { return e == ElementType::bf16 ? "bf16" : "fp16"; }

// What is compiled into the kernel (template parameters): each element type, every head dim in
// every tile; anything else is refused before a launch. Br != Bc: (128, 64) is the default (16 query
// rows per warp), (64, 64) the square one.
inline constexpr std::array<int, 2> kHeadDims{64, 128};
inline constexpr std::array<fa::Tile, 2> kTileShapes{{{128, 64}, {64, 64}}};
inline constexpr auto kCompiled = fa::every(kHeadDims, kTileShapes);
inline constexpr std::array<ElementType, 2> kElementTypes{ElementType::bf16, ElementType::fp16};

// "bf16" or "fp16" -> the element type. Throws std::invalid_argument naming the accepted names.
ElementType parse_element_type(std::string_view name);

// Throws std::invalid_argument, naming `name`, the index and the value, for a finite value of x that
// `element` cannot hold: one that rounds to infinity (|x| above 65504 for fp16; for bf16 above
// 3.39e38, the few float32 values closest to float32's own largest). Defined in tensor_cores.cpp.
void check_fits(const fa::Tensor4<float>& x, ElementType element, std::string_view name);

// x with every value rounded to the nearest `element` value, ties to even (the inputs the kernel
// actually sees), back in float32, which holds every bf16 and fp16 value exactly. NaN stays NaN.
// Throws as check_fits.
fa::Tensor4<float> round_to(const fa::Tensor4<float>& x, ElementType element, std::string_view name);
// The same rounding, as the elements' 16-bit patterns. Throws as check_fits.
std::vector<std::uint16_t> to_element_bits(const fa::Tensor4<float>& x, ElementType element, std::string_view name);

struct Options {
  std::optional<double> scale;              // softmax scale; 1/sqrt(head_dim) when not given
  bool causal = false;                      // bottom-right aligned causal mask (common/attention_shapes.h)
  fa::Tile tile{128, 64};                   // one of kTileShapes
  ElementType element = ElementType::bf16;  // the type of Q, K, V and O inside the kernel
};

// O [batch, heads, seq_len_q, head_dim]: the kernel's bf16/fp16 output, widened to float32
// (exactly); L [batch, heads, seq_len_q]: float32 logsumexp of each row of the scaled scores,
// m + log(l), -inf for a row that sees no key; and the wall time of the launch.
using Result = fa::KernelRun;

// One attention problem as the kernel sees it (common/kernel_problem.h), and the element type.
struct DeviceProblem : fa::DeviceProblem {
  ElementType element = ElementType::bf16;
};

// The kernel's two entry points, compiled into each build of tensor_cores.cuh (ch06::cpu, where
// simt runs mma.sync, ldmatrix and cp.async lane by lane; ch06::cpu_profiled; ch06::gpu: fa::Builds,
// common/kernel_problem.h). The element type, head_dim and the tile must be among the compiled ones
// (check_problem refuses anything else first).
//   Run:     host data in (float32 holding values of problem.element), host data out: the path of
//            tensor_core_attention().
//   Launch:  on memory already on the GPU, Q, K, V and O holding elements of problem.element (each
//            head's rows 16-byte aligned), waiting for the kernel or not as `mode` says
//            (common/simt/runtime/launch_mode.h): what the GPU benchmark times.
using Run = Result(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                   const DeviceProblem& problem);
using Launch = void(const void* Q, const void* K, const void* V, void* O, float* L, const DeviceProblem& problem,
                    simt::LaunchMode mode);
namespace cpu {
Run run_tensor_cores;
}  // namespace cpu
namespace cpu_profiled {
Run run_tensor_cores;
}  // namespace cpu_profiled
namespace gpu {
Run run_tensor_cores;
Launch launch_tensor_cores;
}  // namespace gpu

// Throws std::runtime_error, in one line, on Device::gpu when chapter 06 cannot run there: no GPU
// (fa::require_device), a GPU older than compute capability 8.0 (mma.sync m16n8k16 on bf16 and
// fp16, cp.async: sm_80; a T4 is 7.5), or a build whose GPU path does not hold this kernel (an
// architecture below sm_80 in CMAKE_CUDA_ARCHITECTURES: CH06_GPU is 0, cmake/Options.cmake). Nothing
// on the CPU. Defined in tensor_cores.cpp.
void check_device(fa::Device device);

// Where chapter 06's kernel runs as a reference beside another kernel that runs on `device`
// (chapter 08's check of its 16-bit decoding): `device`, or the CPU where check_device refuses the
// GPU (a T4). Never throws (a GPU that cannot be used counts as refused). Defined in tensor_cores.cpp.
fa::Device reference_device(fa::Device device) noexcept;

// The problem as the kernel will see it, after every check that tensor_core_attention makes
// before it touches the data (fa::device_problem: the head dim and the tile among kCompiled, the
// scale, the grid's limits and int indexing). Throws std::invalid_argument as tensor_core_attention
// does, except for the inputs' values (check_fits checks those).
inline DeviceProblem check_problem(const fa::AttentionShape& shape, const Options& options) {
  return {fa::device_problem("tensor_core_attention", shape, options.scale, options.causal, options.tile, kCompiled),
          options.element};
}

// O = softmax(Q K^T * scale) V and L by the FlashAttention-2 forward kernel on tensor cores.
// Q: [batch, heads, seq_len_q, head_dim]; K, V: [batch, heads, seq_len_k, head_dim]; float32,
// row-major, rounded to options.element (round to nearest even) on their way to the kernel; any
// seq_len >= 1; head_dim one of kHeadDims; options.tile one of kTileShapes.
// Throws std::invalid_argument (naming what is accepted) for another head_dim or tile shape,
// shapes that do not fit together, a scale that is not finite, an input the element type cannot
// hold, sizes past the kernel's int indexing, or batch * heads > 65535 (the grid's y limit);
// std::runtime_error when device == gpu and chapter 06 cannot run there (check_device), or for a
// CUDA error.
// Source: Dao 2023, FlashAttention-2, Algorithm 1 (forward pass) and section 3.3 (warps).
inline Result tensor_core_attention(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K,
                                    const fa::Tensor4<float>& V, const Options& options = {},
                                    fa::Device device = fa::Device::cpu) {
  const DeviceProblem problem = check_problem(fa::check_attention_shapes(Q.shape, K.shape, V.shape), options);
  check_fits(Q, options.element, "Q");
  check_fits(K, options.element, "K");
  check_fits(V, options.element, "V");
  check_device(device);
#if CH06_GPU
  return fa::build_for(device, FA_BUILDS(ch06, run_tensor_cores))(Q, K, V, problem);
#else
  // No ch06::gpu in this build (check_device refused Device::gpu above): the CPU's builds only.
  return fa::build_for(device, fa::Builds<Run>{&cpu::run_tensor_cores, FA_IF_PROFILED(cpu_profiled::run_tensor_cores)})(
      Q, K, V, problem);
#endif
}

}  // namespace ch06
