// Chapter 10 in FP8, its host API (the kernel: hopper_fp8.cuh). The lesson of FA3's section 3.3 on
// the bf16 kernel of hopper.h: the same walk, barriers and tensor maps, with e4m3 operands.
//
// The road of one run: main_fp8.cpp calls fp8_attention() below, which checks the problem
// (check_fp8_problem) and that every input is finite, then calls run_hopper_fp8 of the build that
// runs on the device (fa::build_for); that run, in hopper_fp8.cuh, quantises Q, K, V on the device,
// launches the attention kernel and brings O (bf16, widened to float32), L and the time back.
//
// Source: Shah et al. 2024, FlashAttention-3 (arXiv:2407.08608), section 3.3.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "chapters/10_hopper/hopper.h"
#include "common/kernel_problem.h"
#include "common/tensor.h"

namespace ch10 {

// Chapter 10 in FP8 (FA3 section 3.3): Q, K, V quantised to e4m3 on the device by small kernels
// before the attention kernel (optionally rotated first by a random-sign Walsh-Hadamard transform
// along head_dim), each tile of rows with its own scale or one scale for each head's tensor; S = Q
// K^T and O += P V by FP8 wgmma (.m64nNk32.e4m3), P quantised with a static scale; O in bf16, L in
// float32. The numerics are those of the lab's model (lab/fp8_error.h, model_of_kernel), which the
// demo and the tests compare the kernel with.

// The scales of the quantisation: one per tile of kQuantRows rows (block), or one per head's
// [seq_len][head_dim] matrix (tensor: FA3's descale factors are per batch and head too).
enum class Quant { tensor, block };
inline constexpr int kQuantRows = 64;            // rows under one block scale: a consumer's Q rows, a K or V tile
inline constexpr float kE4m3Max = 448.0f;        // e4m3's largest finite value: a scale maps amax there
inline constexpr float kDefaultPScale = 256.0f;  // P = exp(s - m) 2^8 before its cast (FA3's Max_offset 8)

// The FP8 kernel against the lab's model of the same recipe, relative L2 of O: the two quantise
// the same way (the tests check the codes bit for bit) and round P the same way; the kernel then
// rounds O to bf16, which keeps 8 significant bits: each value moves by at most 2^-8 of itself, so
// the relative L2 of that rounding is below 2^-8 (about 2^-8 / sqrt(6) ~ 1.6e-3 on average, which
// is what the demo prints). The rest is float32 noise (the order of the sums, ex2.approx against
// exp, the scales folded into one factor: ~1e-6 relative), which flips a P code only where p *
// p_scale lies that close to a rounding tie (a few in 10^5 weights) and adds far less than the
// rounding's room left above 1.6e-3. A wrong key order or a lost scale costs 0.1 to 1.
inline constexpr double kFp8ModelBound = 1.0 / 256;
// L: both sum l from the same unrounded P in float32 and take m + ln(l); they differ by that noise,
// ~1e-6 of |S|, far below this.
inline constexpr double kFp8ModelLBound = 1e-4;

struct Fp8Options {
  std::optional<double> scale;  // softmax scale; 1/sqrt(head_dim) when not given
  bool causal = false;          // bottom-right aligned causal mask
  Quant quant = Quant::block;
  bool hadamard = false;           // Q and K rotated by D H / sqrt(head_dim) before the quantisation
  std::uint64_t seed = 1;          // of the random signs D (the lab's random_signs(head_dim, seed))
  float p_scale = kDefaultPScale;  // a power of two, at most kE4m3Max (P <= 1)
};

// The problem as the FP8 kernel sees it: the shapes, scale and mask checked as for bf16 (O is bf16).
struct Fp8Problem {
  DeviceProblem problem;
  Quant quant = Quant::block;
  bool hadamard = false;
  std::uint64_t seed = 1;
  float p_scale = kDefaultPScale;
};

// What the kernel multiplied: the e4m3 codes of Q, K, V ([batch * heads][seq_len][head_dim], Q and K
// after the rotation when there is one) and their scales ([batch * heads][ceil(seq_len / 64)]; in
// tensor mode every tile of a head holds the head's scale). Value = scale of its tile * code.
struct Fp8Inputs {
  std::vector<std::uint8_t> Q, K, V;
  std::vector<float> q_scales, k_scales, v_scales;
};
struct Fp8Result {
  Result run;  // O (bf16, widened to float32), L, and the time of the quantisation and the kernel
  Fp8Inputs inputs;
};

// The FP8 entry point of each build of hopper_fp8.cuh, and the rotation alone (the Hadamard
// kernel on [rows][head_dim] float32 values, for the tests).
using RunFp8 = Fp8Result(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                         const Fp8Problem& problem);
using Rotate = std::vector<float>(const std::vector<float>& x, int head_dim, std::uint64_t seed);
// The FP8 launch, prepared as Prepared above: Q, K, V (float32 on this backend's device,
// [batch * heads][seq_len][head_dim] row-major; Q and K rotated in place when problem.hadamard)
// quantised on the device once, when prepared, into codes and scales the returned launch keeps;
// calling it launches the attention kernel alone on them, writing O (bf16, [batch * heads]
// [seq_len_q][head_dim]) and L ([batch * heads][seq_len_q] float32). What the GPU benchmark times
// (lab/gpu_bench.cpp, --dtype e4m3); the tests check it against run_hopper_fp8 on the CPU. For a
// problem that check_fp8_problem accepted; throws std::invalid_argument for a head_dim that is
// not compiled, and what simt::launch and simt::make_tensor_map throw. Source: Shah et al. 2024,
// FlashAttention-3, section 3.3.
using PrepareFp8 = Prepared(float* Q, float* K, float* V, void* O, float* L, const Fp8Problem& problem);
namespace cpu {
RunFp8 run_hopper_fp8;
Rotate rotate_rows;
PrepareFp8 prepare_hopper_fp8;
}  // namespace cpu
namespace cpu_profiled {
RunFp8 run_hopper_fp8;
Rotate rotate_rows;
}  // namespace cpu_profiled
namespace gpu {
RunFp8 run_hopper_fp8;
Rotate rotate_rows;
PrepareFp8 prepare_hopper_fp8;
}  // namespace gpu

// The FP8 problem after every check fp8_attention makes before it touches the data: check_problem's
// (the shapes, head_dim 64 or 128, the scale), and p_scale a power of two no larger than 448.
// Throws std::invalid_argument, one line.
inline Fp8Problem check_fp8_problem(const fa::AttentionShape& shape, const Fp8Options& options) {
  const float p = options.p_scale;
  if (!(p > 0.0f && p <= kE4m3Max) || std::exp2(std::round(std::log2(p))) != p) {
    std::ostringstream text;
    text << "--p-scale " << p
         << ": give a power of two no larger than 256 (P <= 1 is scaled by it into e4m3, whose largest value is 448)";
    throw std::invalid_argument(text.str());
  }
  return {check_problem(shape, {options.scale, options.causal, ElementType::bf16}), options.quant, options.hadamard,
          options.seed, p};
}

// O = softmax(Q K^T * scale) V and L by the FP8 kernel (hopper_fp8.cuh). Q: [batch, heads,
// seq_len_q, head_dim]; K, V: [batch, heads, seq_len_k, head_dim]; float32, row-major, any finite
// values (quantised on the device); head_dim 64 or 128. Throws std::invalid_argument (one line)
// for what check_fp8_problem refuses or an input that is not finite; std::runtime_error when
// device == gpu and no Hopper GPU can be used, or for a CUDA error.
inline Fp8Result fp8_attention(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                               const Fp8Options& options = {}, fa::Device device = fa::Device::cpu) {
  const Fp8Problem problem = check_fp8_problem(fa::check_attention_shapes(Q.shape, K.shape, V.shape), options);
  for (const auto& [x, name] : {std::pair{&Q, "Q"}, std::pair{&K, "K"}, std::pair{&V, "V"}}) {
    for (std::size_t k = 0; k < x->values.size(); ++k) {
      if (!std::isfinite(x->values[k])) {
        throw std::invalid_argument(std::string(name) + "[" + std::to_string(k) +
                                    "] is not finite: an FP8 scale maps a tile's largest |value| to 448");
      }
    }
  }
  check_device(device);
  return fa::build_for(device, FA_BUILDS(ch10, run_hopper_fp8))(Q, K, V, problem);
}

// x ([rows][head_dim] float32) rotated on the device as fp8_attention rotates Q and K: each row
// times the signs random_signs(head_dim, seed), then H / sqrt(head_dim). Throws
// std::invalid_argument unless head_dim is 64 or 128 and divides x's size.
inline std::vector<float> rotate_rows(const std::vector<float>& x, int head_dim, std::uint64_t seed,
                                      fa::Device device = fa::Device::cpu) {
  if ((head_dim != 64 && head_dim != 128) || x.size() % static_cast<std::size_t>(head_dim) != 0) {
    throw std::invalid_argument("rotate_rows: head_dim " + std::to_string(head_dim) +
                                " is not 64 or 128, or does not divide the size");
  }
  check_device(device);
  return fa::build_for(device, FA_BUILDS(ch10, rotate_rows))(x, head_dim, seed);
}

}  // namespace ch10
