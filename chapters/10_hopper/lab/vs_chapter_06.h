// Chapter 10's verdict: the Hopper kernel's O and L against chapter 06's mma.sync kernel on the
// same rounded inputs. What the demo prints after its run, and the check it ends with.
//
//   O  relative L2 within twice chapter 06's error budget (chapters/06_tensor_cores/lab/
//      error_budget.h): each of the two kernels is within one budget of chapter 05's float32 O, so
//      they are within two budgets of each other (the triangle inequality).
//   L  per row within twice chapter 06's bound on L (L_bounds), for the same reason.
// A NaN or an infinity in O that the inputs do not explain fails the check (fa::report_nonfinite).
#pragma once

#include <string>
#include <vector>

#include <fmt/format.h>

#include "chapters/05_flash_attention_2/lab/vs_chapter_04.h"
#include "chapters/06_tensor_cores/lab/error_budget.h"
#include "chapters/06_tensor_cores/tensor_cores.h"
#include "chapters/10_hopper/hopper.h"
#include "common/program.h"

namespace ch10 {

// Prints the budget and the agreement of O and L, and returns the demo's check, named `what`.
// h and tc: this chapter's and chapter 06's results on Q, K, V ([batch, heads, seq_len, head_dim],
// float32 holding `element` values), with `scale` and `causal` as both ran. Throws
// std::invalid_argument for shapes that do not fit together (error_budget, L_bounds).
inline fa::Check against_chapter_06(const std::string& what, const Result& h, const ch06::Result& tc,
                                    const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K,
                                    const fa::Tensor4<float>& V, double scale, bool causal, ElementType element) {
  const ch06::ErrorBudget budget = ch06::error_budget(Q, K, V, scale, causal, element);
  const double bound = 2 * budget.bound;
  fmt::print(
      "error budget of {}: chapter 06's bound {:.3g} (rel L2 against float32); twice that between the\n"
      "  two kernels: {:.3g}\n",
      ch06::to_string(element), budget.bound, bound);
  const fa::ErrorStats err_O = fa::compare(h.O.values, tc.O.values);
  fmt::print("agreement with chapter 06, O: {}\n  -> {}\n", fa::describe(err_O),
             fa::within(err_O, bound) ? "within the budget" : "OUTSIDE the budget");
  const bool overflowed = fa::report_nonfinite("O", h.O, Q, K, scale, {Q.values, K.values, V.values});

  std::vector<double> L_bounds = ch06::L_bounds(Q, K, scale, tc.L);
  for (double& b : L_bounds) b *= 2;
  const std::vector<double> L_06(tc.L.begin(), tc.L.end());
  const ch05::WorstL L_worst = ch05::worst_row(h.L, L_06, L_bounds);
  fmt::print("L against chapter 06's L: {}\n", fa::describe(fa::compare(h.L, tc.L)));
  return fa::Check{
      "10", what, fmt::format("{}, L {:.2g}", fa::error_field("O", err_O), L_worst.error),
      fmt::format("{}, {}", fa::relative_bound_text(bound, "{:.1e}"), fa::bound_text(L_worst.bound, "{:.1e}")),
      fa::within(err_O, bound) && L_worst.pass && !overflowed};
}

}  // namespace ch10
