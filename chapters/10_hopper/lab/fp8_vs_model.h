// Chapter 10's FP8 verdict: the FP8 kernel's O and L against the lab's model of the same recipe
// (fp8_error.h, model_of_kernel), and the RMSE of O against float64 beside the model's and chapter
// 06's bf16 kernel's. What the FP8 demo prints after its run, and the check it ends with.
//
//   O  relative L2 within kFp8ModelBound (hopper_fp8.h says why: O's rounding to bf16)
//   L  max |difference| within kFp8ModelLBound (float32 noise on both sides)
// A NaN or an infinity in O that the inputs do not explain fails the check (fa::report_nonfinite).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "chapters/06_tensor_cores/tensor_cores.h"
#include "chapters/10_hopper/hopper_fp8.h"
#include "chapters/10_hopper/lab/fp8_error.h"
#include "common/program.h"

namespace ch10 {

// Prints the agreement with the model and the three RMSEs, and returns the demo's check, named
// `what`. r: the FP8 kernel's result on Q, K, V ([batch, heads, seq_len, head_dim], float32, the
// unquantised inputs), with `options` and `problem` as it ran; bf16: chapter 06's result on the
// same inputs rounded to bf16. Throws std::invalid_argument for shapes that do not fit together.
inline fa::Check against_fp8_model(const std::string& what, const Fp8Result& r, const ch06::Result& bf16,
                                   const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K,
                                   const fa::Tensor4<float>& V, const Fp8Options& options, const Fp8Problem& problem) {
  const DeviceProblem& p = problem.problem;
  const fp8::Problem head{static_cast<std::size_t>(p.seq_len_q),
                          static_cast<std::size_t>(p.seq_len_k),
                          Q.shape.head_dim,
                          p.causal,
                          p.scale,
                          options.p_scale};
  const auto bh = static_cast<std::size_t>(p.batch_heads);
  const fp8::Quant quant = options.quant == Quant::block ? fp8::Quant::block : fp8::Quant::tensor;
  const fp8::KernelModel model =
      fp8::model_of_kernel(Q.values, K.values, V.values, bh, head, quant, options.hadamard, options.seed);
  const std::vector<double> reference = fp8::reference_of_heads(Q.values, K.values, V.values, bh, head);

  const fa::ErrorStats err_O = fa::compare(r.run.O.values, model.O);
  double L_error = 0.0;  // a row that sees no key is -inf in both; a NaN difference stays NaN
  for (std::size_t i = 0; i < model.L.size(); ++i) {
    const double e = std::isinf(model.L[i]) && r.run.L[i] == model.L[i] ? 0.0 : std::fabs(r.run.L[i] - model.L[i]);
    L_error = std::isnan(e) ? e : std::max(L_error, e);
  }
  fmt::print("agreement with the lab's model of the recipe, O: {}\n  -> {}\n", fa::describe(err_O),
             fa::within(err_O, kFp8ModelBound) ? "within the bound" : "OUTSIDE the bound");
  fmt::print("L against the model's L: max |difference| {:.2g}\n", L_error);
  const auto rmse = [&](std::span<const float> O) { return fp8::compare_outputs(O, reference).rmse; };
  fmt::print("RMSE of O against float64: FP8 kernel {:.3e}, the model {:.3e}, chapter 06's bf16 kernel {:.3e}\n",
             rmse(r.run.O.values), rmse(model.O), rmse(bf16.O.values));
  const bool overflowed = fa::report_nonfinite("O", r.run.O, Q, K, p.scale, {Q.values, K.values, V.values});
  return fa::Check{"10", what, fmt::format("{}, L {:.2g}", fa::error_field("O", err_O), L_error),
                   fmt::format("{}, {:.0e}", fa::relative_bound_text(kFp8ModelBound, "{:.1e}"), kFp8ModelLBound),
                   fa::within(err_O, kFp8ModelBound) && fa::within(L_error, kFp8ModelLBound) && !overflowed};
}

}  // namespace ch10
