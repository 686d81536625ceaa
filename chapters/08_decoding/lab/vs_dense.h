// Chapter 08 checked against the chapters before it, on the dense problem that a decoding step is
// equivalent to: the bounds and the comparisons that the demo, the tests and the tour all use.
//
// The dense equivalent of sequence b: its queries Q_b [1, heads, seq_len_q, head_dim], and its
// first cache_seqlens[b] keys and values, with K/V head h / group repeated for each query head h
// ([1, heads, len_b, head_dim]), taken from the dense K and V before they were paged (so that a
// mistake in the pages, the table or the kernel's use of them cannot hide in the reference). Each
// sequence is run alone: chapter 05 for a float32 cache, chapter 06 for bf16 and fp16 (on the
// inputs rounded to the element type, as the decoding kernel sees them). A sequence of length 0 has
// no dense problem: its rows must be exactly zeros with L = -inf.
//
//   O  relative L2 per sequence, within the bound of the reference chapter's own tests:
//      float32: ch04::agreement_bound (twice a plain float32 evaluation's error + u): both kernels
//               are float32 and each is within about that of the exact result;
//      bf16, fp16: ch06::error_budget: chapter 06 rounds P and O to the element type, this kernel
//               keeps them float32, so the distance between them is chapter 06's own error, which
//               its budget bounds.
//   L  per row, |L - L_ref| <= u (3 (|L|max + n + 1) + splits) + 2 u d |scale| |q| max_j |k_j|
//      with n the keys the row sees, u = 1.2e-7 (float32's unit roundoff, rounded up) and |L|max
//      = |scale| |q| max_j |k_j| + ln(keys) the bound on |L| from the inputs alone
//      (ch05::L_magnitudes), never from the reference's output. Both are
//      float32 m + log(l): chapter 05's L is within u (|L| + n + 1) of the exact value (its own
//      bound); each partial of this kernel is within that of its chunk's, the merge moves L by no
//      more than its partials' largest error and adds its own rounding of m + log(l), l <= splits;
//      and the two kernels may round each score differently (another order of summation over d on
//      a GPU), by at most d u |scale| sum_c |q_c k_c| <= d u |scale| |q| |k| (Cauchy-Schwarz), which
//      log-sum-exp passes on unchanged at most. Against chapter 06 the bound also holds chapter 06's
//      own distance from chapter 05 (ch06::L_bounds). A row that sees no key must be -inf in both.
//
// A bound that is not finite (an input or a scale so large that the plain float32 evaluation it
// comes from overflows) checks nothing: the comparison fails.
//
// The decode loop (--steps T) is checked against chapter 05's causal forward over the whole
// sequences, on its last T rows, with the same O rule (the plain evaluation made on those rows) and
// the same L rule.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "chapters/08_decoding/decoding.h"
#include "common/compare.h"
#include "common/device.h"
#include "common/tensor.h"

namespace ch08 {

inline constexpr double kLUnitRoundoff = 1.2e-7;

// The dense problem of one sequence (see above). Q: [batch, heads, seq_len_q, head_dim]; K, V: the
// dense cache [batch, kv_heads, seq_len_k, head_dim]; 1 <= len <= seq_len_k. Throws
// std::invalid_argument for shapes that do not fit or a length out of range.
struct DenseSequence {
  fa::Tensor4<float> Q, K, V;
};
DenseSequence dense_sequence(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                             std::size_t b, std::size_t len);

// The L bound of one row (see above): L_ref the reference's L of the row (it decides only whether
// the row must match exactly), L_magnitude the row's bound on |L| from ch05::L_magnitudes, `keys`
// the keys it sees, `splits` the partials merged, `score_term` = d |scale| |q| max_j |k_j| for the
// row. 0 when L_ref is not finite (both must then be equal); infinite (a failed row) when
// L_magnitude is. Never throws.
double L_bound(double L_ref, double L_magnitude, std::size_t keys, int splits, double score_term);

// One sequence's comparison.
struct SequenceCheck {
  std::size_t sequence = 0;  // b
  std::size_t length = 0;    // its cache length
  fa::ErrorStats O;          // this chapter's O against the reference's, relative L2
  double O_bound = 0.0;
  double L_error = 0.0;  // |L - L_ref| of the row of the sequence closest to (or furthest past) its bound
  double L_bound = 0.0;  // that row's bound
  bool pass = false;
};

struct Agreement {
  std::string against;  // "ch05" or "ch06"
  std::vector<SequenceCheck> sequences;
  bool pass() const;
  // The sequence whose O or L is closest to (or furthest past) its bound. Throws std::logic_error
  // when there is none.
  const SequenceCheck& worst() const;
};

// Runs the reference chapter on each sequence's dense equivalent (on `device`; chapter 06, the
// reference of a 16-bit cache, on the CPU where that GPU cannot run it: ch06::reference_device)
// and compares the decoded O and L with it. Q: [batch, heads, seq_len_q, head_dim]; K, V: the dense cache
// [batch, kv_heads, seq_len_k, head_dim] as given to dense_cache or paged_cache; lengths: the
// sequences' cache lengths; options: as given to decode_attention; `splits`: the count it used;
// decoded: its result. Throws std::invalid_argument for shapes that do not fit, and what the
// reference chapters throw.
Agreement check_against_dense(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                              const std::vector<int>& lengths, const Options& options, int splits,
                              const fa::KernelRun& decoded, fa::Device device);

// The decode loop's check: decoded holds O [batch, heads, steps, head_dim] and L of the last `steps`
// tokens of each sequence, decoded one at a time; Q: [batch, heads, seq_len, head_dim] (a query per
// token); K, V: [batch, kv_heads, seq_len, head_dim]; compared with the last `steps` rows of
// chapter 05's causal forward over the whole sequences (K, V repeated per group, rounded to the
// cache type when it is 16-bit). `splits`: the largest count a step used. Throws as
// check_against_dense.
Agreement check_decode_loop(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                            std::size_t steps, const Options& options, int splits, const fa::KernelRun& decoded,
                            fa::Device device);

}  // namespace ch08
