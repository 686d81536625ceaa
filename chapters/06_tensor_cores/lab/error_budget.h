// How close a bf16 or fp16 attention can be expected to come to float32: the error budget that
// chapter 06's tests and its demo both use.
//
// FlashAttention's own rule (the tests of Dao et al.'s implementation): a low-precision kernel is
// correct when its distance from a high-precision reference is at most a small multiple of the
// distance that a plain evaluation in the same low precision has from that reference. Here:
//   reference error  the relative L2 distance between two evaluations of attention in float64 on
//                    the same (already rounded) inputs: one exact, one with P rounded to the
//                    element type before P V and O rounded to it at the end, the two roundings
//                    the kernel makes (S, m, l and acc stay float32 there, and float32's errors are
//                    ~2^-24, far below the element type's 2^-8 or 2^-11)
//   bound            kBudgetFactor * reference error + kFloat32Floor
// and the kernel's O, compared with chapter 05's float32 kernel on the same rounded inputs, must
// stay within the bound. A faithful bf16 pipeline measures a reference error of about 2e-3
// (normal inputs, seq_len 256), fp16 about 2.5e-4; a wrong fragment, a lost rescale or a wrong mask
// gives errors of 1e-2 to 1.
//
// Source: the rule of the test suite of FlashAttention's implementation (the flash-attn package of
// Dao 2023, FlashAttention-2, arXiv:2307.08691), which allows a kernel twice the error of a plain
// evaluation in the input's precision against a float32 reference; Higham, Accuracy and Stability
// of Numerical Algorithms, 2nd ed., ch. 2 (unit roundoff: 2^-8 for bf16's 8 significant bits,
// 2^-11 for fp16's 11).
#pragma once

#include <span>
#include <vector>

#include "chapters/06_tensor_cores/tensor_cores.h"
#include "common/tensor.h"

namespace ch06 {

// How many times the reference error the kernel may be off. Over the whole test list, kernel
// error / reference error measured 0.88 to 1.03 (both make the same two roundings; the kernel
// rounds P relative to a running rather than the final max, and its O differs from chapter 05's by
// float32 noise); 2 leaves room for that spread and for a GPU's own summation order, and is
// FlashAttention's own factor.
inline constexpr double kBudgetFactor = 2.0;
// Chapter 05 (the reference the kernel is compared with) is itself ~1e-7 from exact arithmetic
// (its own bound, chapters/04_naive_attention/lab/vs_chapter_03.h, is about 1e-6 for scores of order 1);
// added so that a case whose low-precision reference is exact (a single key: O = V) is not asked
// to beat float32.
inline constexpr double kFloat32Floor = 1e-6;

// 2^-8 for bf16, 2^-11 for fp16: half the distance between 1 and the next element value.
double unit_roundoff(ElementType element);

struct ErrorBudget {
  double reference_rel_l2 = 0.0;  // the reference error above
  double bound = 0.0;             // kBudgetFactor * reference_rel_l2 + kFloat32Floor
};

// The budget for one problem. Q: [batch, heads, seq_len_q, head_dim]; K, V: [batch, heads,
// seq_len_k, head_dim], float32 holding values of `element` (round_to); scale and causal as the
// kernel's. Rows that see no key are zeros in both evaluations. Throws std::invalid_argument for
// shapes that do not fit together.
ErrorBudget error_budget(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                         double scale, bool causal, ElementType element);

// The bound on |L - L_05| for each row of L (L_05: chapter 05's L on the same inputs), in the order
// of L, [batch, heads, seq_len_q]. Both are float32, L = m + log(l). Chapter 05's tests bound its
// own error by u (|L| + seq_len_k + 1), u = 2^-24 rounded up to 1.2e-7, with |L| bounded from the
// inputs by M_i + ln(seq_len_k), M_i = |scale| |q_i| max_j |k_j| (ch05::L_magnitudes: every score
// lies within M_i of 0); this kernel makes the same kind of error (l summed in float, m' ln 2
// rounded), hence twice that. On top, the two kernels sum each score's d products in different
// orders (both exact products: 16-bit inputs), each within d u scale sum_c |q_c k_c| of the exact
// score, and log-sum-exp moves by no more than its largest input does; sum_c |q_c k_c| <= |q_i|
// max_j |k_j| (Cauchy-Schwarz). So the bound is
//   2.4e-7 (M_i + ln(seq_len_k) + seq_len_k + 1) + 2.4e-7 d M_i,
// and 0 where L_05 is infinite (a row that sees no key: both must be -inf). L_05 decides only that:
// the bound never grows with chapter 05's output.
std::vector<double> L_bounds(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, double scale,
                             std::span<const float> L_05);

// The largest scores for which the budget can hold: |S * scale| <= 2^15 for bf16, 2^12 for fp16.
// The kernel's exponent is one FFMA, exp2(S c - m c) (tensor_cores.cuh, line 9), whose product
// m c is rounded to float32 first: off by up to |m c| 2^-24, a shift that differs from tile to tile
// (and in each rescale), so the weights of different tiles are off from each other by a factor up
// to 2^(2 |m c| 2^-24), a relative error of about 2 |S * scale| 2^-24. Past the limit that is more
// than the element type's own rounding u, of which the budget is made: from scores near 1e6 the
// budget fails, and near 1e10 (a shift of 2^10 and more) every weight is 0 or inf, so L is -inf
// and O NaN. The scores are bounded from the inputs as L_bounds does, |S * scale| <= |scale| |q_i|
// max_j |k_j| (Cauchy-Schwarz), which may exceed the largest score actually met.
double score_limit(ElementType element);

// Throws std::invalid_argument, one line naming the bound on the scores, the limit and why, when
// the scores of Q and K (already rounded to the element type) may pass score_limit(element): such
// a run is refused before it starts rather than measured against a budget that cannot hold.
void check_score_range(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, double scale, ElementType element);

// Q, K and V rounded in place to `element`, as the kernel will read them (round_to), and then their
// scores checked (check_score_range): what a demo does with its inputs before the banner. Throws
// std::invalid_argument, one line, as round_to and check_score_range do.
void round_inputs(fa::Tensor4<float>& Q, fa::Tensor4<float>& K, fa::Tensor4<float>& V, double scale,
                  ElementType element);

// Bytes the error budget's two float64 evaluations of O take (reference_error), for a demo's Plan.
std::uint64_t budget_memory(const fa::AttentionShape& shape);

}  // namespace ch06
