// Chapter 06's verdict: the tensor-core kernel's O and L against chapter 05's float32 kernel on the
// same inputs, rounded to the element type, within the element type's error budget
// (error_budget.h). What the demo prints after its run, and the check it ends with.
//
//   O  relative L2 within ErrorBudget::bound: FlashAttention's rule, twice the error of a plain
//      evaluation in the element type (error_budget.h says why twice).
//   L  per row within L_bounds (error_budget.h): twice chapter 05's own bound on L, plus the
//      difference the two kernels' summation orders can make to each score.
// A NaN or an infinity in O that the inputs do not explain fails the check (fa::report_nonfinite).
#pragma once

#include <string>
#include <vector>

#include <fmt/format.h>

#include "chapters/05_flash_attention_2/flash_attention_2.h"
#include "chapters/05_flash_attention_2/lab/vs_chapter_04.h"
#include "chapters/06_tensor_cores/lab/error_budget.h"
#include "chapters/06_tensor_cores/tensor_cores.h"
#include "common/program.h"

namespace ch06 {

// Prints the budget and the agreement of O and L, and returns the demo's check, named `what`.
// tc and f32: the two kernels' results on Q, K, V ([batch, heads, seq_len, head_dim], float32
// holding `element` values), with `scale` and `causal` as both ran. Throws std::invalid_argument
// for shapes that do not fit together (error_budget, L_bounds).
inline fa::Check against_chapter_05(const std::string& what, const Result& tc, const ch05::Result& f32,
                                    const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K,
                                    const fa::Tensor4<float>& V, double scale, bool causal, ElementType element) {
  const std::string type(to_string(element));
  const ErrorBudget budget = error_budget(Q, K, V, scale, causal, element);
  fmt::print(
      "error budget of {} (unit roundoff {:.2g}): an evaluation in float64 with P and O rounded to {} is\n"
      "  {:.3g} from exact (rel L2); the bound is {} x that + {:.0e} = {:.3g}\n",
      type, unit_roundoff(element), type, budget.reference_rel_l2, kBudgetFactor, kFloat32Floor, budget.bound);
  const fa::ErrorStats err_O = fa::compare(tc.O.values, f32.O.values);
  fmt::print("agreement with chapter 05, O: {}\n  -> {}\n", fa::describe(err_O),
             fa::within(err_O, budget.bound) ? "within the budget" : "OUTSIDE the budget");
  fmt::print("L against chapter 05's L: {}\n", fa::describe(fa::compare(tc.L, f32.L)));
  const bool overflowed = fa::report_nonfinite("O", tc.O, Q, K, scale, {Q.values, K.values, V.values});

  const std::vector<double> L_05(f32.L.begin(), f32.L.end());
  const ch05::WorstL L_worst = ch05::worst_row(tc.L, L_05, L_bounds(Q, K, scale, f32.L));
  return fa::Check{
      "06", what, fmt::format("{}, L {:.2g}", fa::error_field("O", err_O), L_worst.error),
      fmt::format("{}, {}", fa::relative_bound_text(budget.bound, "{:.1e}"), fa::bound_text(L_worst.bound, "{:.1e}")),
      fa::within(err_O, budget.bound) && L_worst.pass && !overflowed};
}

}  // namespace ch06
