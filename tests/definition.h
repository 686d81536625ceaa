// The definition of attention as a yardstick for the test cases that grade the course's exercises
// (tagged [exNN.k]; docs/course.md): chapter 03's plain evaluation, ch03::plain_attention_rows
// (chapter 01's softmax of each whole row of S, then P V; no blocks, no online rescaling), in double
// for the reference and in float for the bounds. It runs none of the lines that the course leaves
// to the student in chapters 02 to 08, so a chapter's grading tests fail for that chapter's own
// lines only, whatever the student's other exercises hold. (The chapters' other tests check each
// chapter against the one before it.)
#pragma once

#include <cstddef>
#include <numeric>
#include <vector>

#include "chapters/03_online_weighted_sum/attention.h"
#include "common/attention_shapes.h"
#include "common/compare.h"
#include "common/tensor.h"
#include "common/tolerance.h"

namespace fa_test {

struct Definition {
  ch03::PlainRows<double> exact;  // O [rows, head_dim] and L [rows] of every query row, in double
  ch03::PlainRows<float> plain;   // the same formula evaluated in float32
  std::size_t seq_len_k = 0;

  // The bound on a float32 kernel's O, relative L2 against `exact`: twice the plain float32
  // evaluation's distance plus float32's unit roundoff (common/tolerance.h gives the reason).
  double O_bound() const { return fa::bound_from_plain(fa::compare(plain.O, exact.O).rel_l2); }

  // What each row's bound on L gains against `exact` (chapter 05's rule against chapter 03,
  // chapters/05_flash_attention_2/lab/vs_chapter_04.h): twice the plain float32 evaluation's error on that
  // row, which carries the float rounding of the scores themselves. 0 where both are -inf.
  std::vector<double> L_allowance() const {
    std::vector<double> allowance(exact.L.size());
    for (std::size_t r = 0; r < allowance.size(); ++r) {
      allowance[r] = 2.0 * fa::abs_difference(static_cast<double>(plain.L[r]), exact.L[r]);
    }
    return allowance;
  }
};

// The definition on every query row of the problem. Shapes and options as ch03::attention (Q:
// [batch, heads, seq_len_q, head_dim]; K, V: [batch, heads, seq_len_k, head_dim]). Throws as
// ch03::plain_attention_rows.
inline Definition definition(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                             const ch03::AttentionOptions& options) {
  const fa::AttentionShape shape = fa::check_attention_shapes(Q.shape, K.shape, V.shape);
  std::vector<std::size_t> rows(fa::attention_rows(shape));
  std::iota(rows.begin(), rows.end(), std::size_t{0});
  return {ch03::plain_attention_rows<double>(Q, K, V, options, rows),
          ch03::plain_attention_rows<float>(Q, K, V, options, rows), shape.seq_len_k};
}

}  // namespace fa_test
