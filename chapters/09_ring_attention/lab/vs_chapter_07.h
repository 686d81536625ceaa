// Chapter 09's backward against chapter 07 in one process: the check that the tests
// (tests/09_ring_attention_test.cpp) and the demo (main.cpp, --backward) both make.
//
// The ring's dQ, dK and dV are chapter 07's kernels run on pairs of chunks and summed in another
// order, so the book's bound for them is chapter 07's own (chapters/07_backward/lab/gradient_check.h):
// per gradient, twice the relative L2 error of a plain float32 evaluation against the float64
// gradient on the same inputs, plus u = 2^-24. Here that bound holds the ring against chapter 07's
// result on the whole problem (O and L the same forward's for both): two float32 evaluations of the
// same sums, each about the float32 evaluation's error from the exact gradient, in the same
// direction for the most part (the same O, L and D, the same rounded scores), so their distance
// stays under twice that. A lost pair of chunks, a dK that never came home or a shard's dK added to
// another's moves a gradient by 1e-2 to 1 in relative L2, far outside bounds of about 1e-6.
//
// Source: Dao 2023, FlashAttention-2, Algorithm 2; chapter 07's reference.h and gradient_check.h.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "chapters/07_backward/backward.h"
#include "chapters/07_backward/lab/gradient_check.h"
#include "chapters/07_backward/lab/reference.h"
#include "chapters/09_ring_attention/ring.h"
#include "common/compare.h"
#include "common/program.h"
#include "common/tolerance.h"

namespace ch09 {

// One gradient of the ring against chapter 07's.
struct GradientAgreement {
  fa::ErrorStats error;        // the ring's gradient against chapter 07's, on the whole problem
  double bound = 0;            // chapter 07's bound on these inputs: ch07::gradient_bound(float32 evaluation)
  std::size_t not_finite = 0;  // NaN or infinite values in the ring's gradient
  bool pass() const { return not_finite == 0 && fa::within_relative(error.rel_l2, bound); }
};

struct BackwardAgreement {
  GradientAgreement dQ, dK, dV;
  bool pass() const { return dQ.pass() && dK.pass() && dV.pass(); }
};

// Chapter 07's backward (deterministic dQ) on the whole problem in one process, and its bound per
// gradient on these inputs (ch07::gradient_bound of a plain float32 evaluation's relative L2 error
// against the float64 gradient). Q, K, V, O, dO: [batch, heads, seq_len, head_dim]; L [batch, heads,
// seq_len]: the forward's O and L, the ones the ring is given. Throws what
// ch07::flash_attention_2_backward and chapter 07's reference throw (std::invalid_argument for shapes
// that do not fit; std::runtime_error for the device).
struct Chapter07Gradients {
  ch07::Gradients gradients;
  double dQ_bound = 0, dK_bound = 0, dV_bound = 0;
};

inline Chapter07Gradients chapter_07_backward(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K,
                                              const fa::Tensor4<float>& V, const fa::Tensor4<float>& O,
                                              std::span<const float> L, const fa::Tensor4<float>& dO,
                                              const Options& options, fa::Device device) {
  Chapter07Gradients c{ch07::flash_attention_2_backward(
      Q, K, V, O, L, dO, {options.scale, options.causal, ch07::DqMethod::deterministic}, device)};
  const double scale = options.scale.value_or(fa::default_scale(Q.shape.head_dim));
  const ch07::GradientsOf<double> exact = ch07::attention_backward_reference(Q, K, V, dO, scale, options.causal);
  const ch07::GradientsOf<float> float32 = ch07::attention_backward_float32(Q, K, V, dO, O, L, scale, options.causal);
  c.dQ_bound = ch07::gradient_bound(fa::compare(float32.dQ.values, exact.dQ.values).rel_l2);
  c.dK_bound = ch07::gradient_bound(fa::compare(float32.dK.values, exact.dK.values).rel_l2);
  c.dV_bound = ch07::gradient_bound(fa::compare(float32.dV.values, exact.dV.values).rel_l2);
  return c;
}

// The ring's dQ, dK, dV (shaped as Q, K, V) against chapter 07's, each within its bound. Throws
// std::invalid_argument when sizes differ (fa::compare).
inline BackwardAgreement agreement(const fa::Tensor4<float>& dQ, const fa::Tensor4<float>& dK,
                                   const fa::Tensor4<float>& dV, const Chapter07Gradients& chapter_07) {
  const auto one = [](const fa::Tensor4<float>& ring, const fa::Tensor4<float>& reference, double bound) {
    return GradientAgreement{fa::compare(ring.values, reference.values), bound, ch07::count_not_finite(ring.values)};
  };
  return {one(dQ, chapter_07.gradients.dQ, chapter_07.dQ_bound), one(dK, chapter_07.gradients.dK, chapter_07.dK_bound),
          one(dV, chapter_07.gradients.dV, chapter_07.dV_bound)};
}

// Both: the check of the demo. Throws as chapter_07_backward.
inline BackwardAgreement vs_chapter_07(const fa::Tensor4<float>& dQ, const fa::Tensor4<float>& dK,
                                       const fa::Tensor4<float>& dV, const fa::Tensor4<float>& Q,
                                       const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                                       const fa::Tensor4<float>& O, std::span<const float> L,
                                       const fa::Tensor4<float>& dO, const Options& options, fa::Device device) {
  return agreement(dQ, dK, dV, chapter_07_backward(Q, K, V, O, L, dO, options, device));
}

}  // namespace ch09
