// Chapter 04: how close the kernels must come to chapter 03, the one bound that the demo, the
// tests and the tour all use (and the chapters after this one, for their own float32 kernels).
//
// The kernels are float32; chapter 03 is float64. The bound follows the input (common/tolerance.h):
// twice the relative L2 error that a plain float32 evaluation of the same formula makes against a
// plain float64 evaluation of it, plus float32's unit roundoff. Both are chapter 03's
// plain_attention_rows (the textbook formula on chapter 01's safe softmax), in float and in double,
// on up to kPlainRows rows spread over the whole problem (a sample: the error is a statistic of the
// rounding, and a few hundred rows measure it well). Neither is chapter 03's online recurrence, the
// stage the kernels are checked against: a broken chapter 03 must make the check fail, not widen
// its own bound.
#pragma once

#include <cstddef>
#include <vector>

#include "chapters/03_online_weighted_sum/attention.h"
#include "common/attention_shapes.h"
#include "common/compare.h"
#include "common/tensor.h"
#include "common/tolerance.h"

namespace ch04 {

inline constexpr std::size_t kPlainRows = 512;

struct Agreement {
  double plain_error = 0.0;  // relative L2 error of the plain evaluation, float32 vs float64
  double bound = 0.0;        // fa::bound_from_plain(plain_error)
};

// The bound for O (relative L2 against chapter 03, or between two float32 kernels) on this input. Q: [batch, heads,
// seq_len_q, head_dim]; K, V: [batch, heads, seq_len_k, head_dim], float32; options as chapter 03's (scale, causal).
// Throws as ch03::attention.
inline Agreement agreement_bound(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                                 const ch03::AttentionOptions& options) {
  const fa::AttentionShape shape = fa::check_attention_shapes(Q.shape, K.shape, V.shape);
  const std::vector<std::size_t> rows = fa::sample_rows(fa::attention_rows(shape), kPlainRows);
  const std::vector<double> reference = ch03::plain_attention_rows<double>(Q, K, V, options, rows).O;
  const std::vector<float> plain = ch03::plain_attention_rows<float>(Q, K, V, options, rows).O;
  const double plain_error = fa::compare(plain, reference).rel_l2;
  return {plain_error, fa::bound_from_plain(plain_error)};
}

}  // namespace ch04
