// Chapter 03: the online weighted sum, the output of one attention query in one pass over its keys.
//
// What this chapter adds to chapter 02: attention does not want the softmax weights themselves but
// the weighted sum of the value rows, o = sum_j softmax(s)_j v_j. Chapter 02 carried two numbers
// across blocks of scores (the running max m and the running sum l). Here a third travels with
// them: acc, the weighted sum of the value rows so far, a vector of head_dim numbers, kept
// UN-scaled (not divided by l). When the max rises, l and acc are both too large by the same
// factor and are both multiplied by rescale = exp(m_old - m_new). acc is divided by l once, at the
// end. The code shows it: RowState is chapter 02's OnlineState (m and l, updated by chapter 02's
// own code) with acc added.
//
// The algorithm, for scores s_0 .. s_{n-1} and value rows v_0 .. v_{n-1} (each of head_dim):
//   1. m = -inf, l = 0, acc = [0] * head_dim
//      for each block B of consecutive keys (the last block may be shorter):
//   2.   m_new   = max(m, max_{j in B} s_j)
//   3.   rescale = exp(m - m_new)                    rescales what is already there
//   4.   p_j     = exp(s_j - m_new), j in B          the block's weights, against the new max
//        l       = rescale * l   + sum_{j in B} p_j
//   5.   acc     = rescale * acc + sum_{j in B} p_j v_j   un-scaled: not divided by l
//   6.   m       = m_new
//   7. o = acc / l                                   once, after the last block
// The numbers are chapter 02's, for the same steps: lines 2, 3, 4 and 6 are its OnlineState::update
// (line 4's weights p_j are the terms it adds to l), and line 5, acc, is new. Lines 2-6 are the
// three lines of arithmetic (m, l, acc) that the chapter 05 kernel runs per query row, with the
// same names. In FlashAttention-2's Algorithm 1 (Dao 2023), which chapters 05 and 06 quote with the
// paper's numbers, line 1 is its line 5, the loop over blocks its line 6, lines 2-4 its line 9,
// line 5 its line 10, line 6 the step from one tile to the next, and line 7 its line 12 (with
// L = m + log(l), attention.h, its line 13).
//
// Why it is exact: after any number of blocks, l = sum_j exp(s_j - m) and
// acc = sum_j exp(s_j - m) v_j over the keys seen so far, with m their max. Line 2's factor turns
// every exp(s_j - m_old) into exp(s_j - m_new) at once; docs/03-online-weighted-sum.md has the
// induction.
//
// Conventions (docs/conventions.md, "Numbers"):
//   - a score of -inf gets weight 0; a row whose scores are all -inf gives an output of zeros;
//   - a NaN score makes the whole output NaN (through l); a NaN in value row j, column d makes
//     output column d NaN;
//   - a score of +inf gives NaN, as in chapters 01 and 02 (exp(inf - inf)).
//
// Source: the worked example (scores 1, 3, 5, 2 with values 10, 20, 30, 40 in blocks of two, output
// 28.9847; docs/03-online-weighted-sum.md walks through it); Milakov and Gimelshein 2018, "Online normalizer
// calculation for softmax", section 3; Dao 2023, "FlashAttention-2", section 3.1 (the un-scaled output, divided once at
// the end). Run the demo: build/default/bin/ch03_online_weighted_sum
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <stdexcept>
#include <vector>

#include "chapters/02_online_softmax/online_softmax.h"
#include "common/tensor.h"

namespace ch03 {

inline constexpr double minus_infinity = -std::numeric_limits<double>::infinity();

// The worked example: scores 1, 3, 5, 2 and values 10, 20, 30, 40 in blocks of two give
// 28.98474626 (to eight places). The bound on a computed output: the exact output is within 0.5e-8
// of the eight-place figure, and 1e-8 leaves room for the computation's own rounding (~1e-14).
inline constexpr double kWorkedExampleOutput = 28.98474626;
inline constexpr double kWorkedExampleBound = 1e-8;

// How far the blocked recurrence may be from the all-at-once evaluation (weighted_sum_all_at_once)
// of one query, relative to max(1, max |v|): the two add the same weighted values in different
// orders with differently rounded weights; outputs are weighted means of the values, so they agree
// to a few hundred eps of the largest |v| at worst (1.3e-15 measured on 1000 keys). A missing
// rescale is off by O(1). The demo and the tests both use it.
inline constexpr double kSameSumBound = 1e-14;

// What one block did to the running state: every figure of lines 2-7, kept for the demo's trace
// (and for docs/figures/worked-example.svg, drawn from it). Vectors have head_dim entries unless noted.
struct BlockStep {
  std::size_t first = 0;              // index of the block's first key (set by the caller of fold)
  std::size_t count = 0;              // keys in the block (the last block may be shorter)
  double block_max = minus_infinity;  // line 2: max of the block's own scores
  double m_old = minus_infinity;      // the running max before the block
  double m_new = minus_infinity;      // line 2: the running max after it
  double rescale = 0.0;               // line 3: exp(m_old - m_new); 0 for the first block
  std::vector<double> p;              // line 4: the block's weights (count entries)
  double l_carried = 0.0;             // line 4, first term: rescale * l
  std::vector<double> acc_carried;    // line 5, first term: rescale * acc
  double l_block = 0.0;               // line 4, second term: the block's own sum of weights
  std::vector<double> acc_block;      // line 5, second term: the block's own weighted sum
  double l = 0.0;                     // line 4: the total
  std::vector<double> acc;            // line 5: the total
  std::vector<double> output;         // line 7 if the keys ended here: acc / l
};

// The state of one query row between blocks: chapter 02's m and l, and acc. The same three names
// as the chapter 05 kernel.
struct RowState : ch02::OnlineState<double> {
  // m: the largest score seen so far; l: sum of exp(s_j - m) over the keys seen so far (both from
  // ch02::OnlineState); acc: sum of exp(s_j - m) v_j over the keys seen so far (head_dim values).
  std::vector<double> acc;

  // Line 1: nothing seen yet.
  explicit RowState(std::size_t head_dim) : acc(head_dim, 0.0) {}

  // Lines 2-6: folds in one block of keys. s: the block's scores (count of them); v: its value
  // rows, [count, head_dim] row-major. When `record` is given, every figure is also written there.
  // Throws std::invalid_argument if v does not have s.size() rows of head_dim values.
  void fold(std::span<const double> s, fa::MatrixView<const double> v, BlockStep* record = nullptr) {
    if (v.rows() != s.size() || v.cols() != acc.size()) {
      throw std::invalid_argument(
          fmt::format("RowState::fold: a block of {} scores needs a [{}, {}] block of value rows, got [{}, {}]",
                      s.size(), s.size(), acc.size(), v.rows(), v.cols()));
    }
    const double m_old = m, l_old = l;
    // Lines 2, 3, 4 and 6: chapter 02's update of m and l, unchanged. (A NaN score never becomes m;
    // it reaches l, and the output, through its weight.)
    const double rescale = update(s);
    // While every score so far is -inf, m is -inf: the weights are measured against 0 instead
    // (ch02::safe_max), so they are 0, l stays 0 and line 7 gives zeros (the kernels do the same).
    const double m_safe = ch02::safe_max(m);

    // graded 03a: lines 4 and 5: the block's weights p, its own weighted sum, acc rescaled and grown
    // Line 4, the block's weights (the very terms update() added to l), and line 5's own part.
    std::vector<double> p(s.size());
    std::vector<double> acc_block(acc.size(), 0.0);
    for (std::size_t j = 0; j < s.size(); ++j) {
      p[j] = ch02::term(s[j], m_safe);
      for (std::size_t d = 0; d < acc.size(); ++d) acc_block[d] += p[j] * v(j, d);
    }
    // Line 5: rescale the carried acc, then add the block's own.
    std::vector<double> acc_carried(acc.size());
    for (std::size_t d = 0; d < acc.size(); ++d) acc_carried[d] = rescale * acc[d];
    for (std::size_t d = 0; d < acc.size(); ++d) acc[d] = acc_carried[d] + acc_block[d];
    // end graded

    if (record != nullptr) {
      record->count = s.size();
      record->block_max = ch02::block_max(s);
      record->m_old = m_old;
      record->m_new = m;
      record->rescale = rescale;
      record->l_carried = l_old * rescale;  // line 4's two terms, as update() added them
      record->l_block = ch02::block_sum(s, m_safe);
      record->l = l;
      record->acc = acc;
      record->output = finish();
      record->p = std::move(p);
      record->acc_carried = std::move(acc_carried);
      record->acc_block = std::move(acc_block);
    }
  }

  // Line 7: the output acc / l (head_dim values). If no key had any weight (no keys yet, or every
  // score -inf) l is 0 and the output is zeros, the book's convention for a masked row.
  std::vector<double> finish() const {
    std::vector<double> o(acc.size(), 0.0);
    // graded 03b: line 7, the output acc / l, divided once; zeros where no key had any weight (l = 0)
    if (l == 0.0) return o;
    for (std::size_t d = 0; d < acc.size(); ++d) o[d] = acc[d] / l;
    // end graded
    return o;
  }

  // The row's logsumexp, log(sum_j exp(s_j)) = m + log(l): what FlashAttention-2 keeps as L for
  // the backward pass. -inf when no key had any weight.
  double logsumexp() const { return l == 0.0 ? minus_infinity : m + std::log(l); }
};

namespace detail {

// Throws std::invalid_argument unless there is at least one score, one value row per score, and
// at least one column. `who` names the function in the message.
inline void check_scores_and_values(const char* who, std::span<const double> scores,
                                    fa::MatrixView<const double> values) {
  if (scores.empty()) {
    throw std::invalid_argument(fmt::format("{}: no scores; give at least one key", who));
  }
  if (values.rows() != scores.size()) {
    throw std::invalid_argument(fmt::format("{}: {} scores need {} value rows (one per key), got {}", who,
                                            scores.size(), scores.size(), values.rows()));
  }
  if (values.cols() == 0) {
    throw std::invalid_argument(fmt::format("{}: value rows must have at least one entry (head_dim >= 1)", who));
  }
}

inline void check_block(const char* who, std::size_t block) {
  if (block == 0) {
    throw std::invalid_argument(fmt::format("{}: block size 0; give a block of at least 1 key", who));
  }
}

// Rows first .. first+count-1 of a row-major matrix, as a matrix of their own.
inline fa::MatrixView<const double> rows(fa::MatrixView<const double> m, std::size_t first, std::size_t count) {
  return {m.data() + first * m.cols(), count, m.cols()};
}

}  // namespace detail

// Lines 1-7: one query's attention output sum_j softmax(s)_j v_j, keys taken `block` at a time.
// scores: n >= 1 scores (already scaled); values: [n, head_dim] row-major, head_dim >= 1;
// block >= 1 (any size: the last block holds what is left, and block > n is one block).
// Returns head_dim values. Throws std::invalid_argument for empty scores, block == 0, or values
// that do not have one row per score.
inline std::vector<double> online_weighted_sum(std::span<const double> scores, fa::MatrixView<const double> values,
                                               std::size_t block) {
  detail::check_scores_and_values("online_weighted_sum", scores, values);
  detail::check_block("online_weighted_sum", block);
  RowState state(values.cols());
  for (std::size_t first = 0, count = 0; first < scores.size(); first += count) {
    count = std::min(block, scores.size() - first);  // the tail block is shorter
    state.fold(scores.subspan(first, count), detail::rows(values, first, count));
  }
  return state.finish();
}

// The same computation, returning what every block did (one BlockStep per block, in order) so
// that it can be printed or drawn. The last step's output is online_weighted_sum's result, bit for
// bit (the same code runs). Same arguments and errors as online_weighted_sum.
inline std::vector<BlockStep> trace_online_weighted_sum(std::span<const double> scores,
                                                        fa::MatrixView<const double> values, std::size_t block) {
  detail::check_scores_and_values("trace_online_weighted_sum", scores, values);
  detail::check_block("trace_online_weighted_sum", block);
  RowState state(values.cols());
  std::vector<BlockStep> steps;
  for (std::size_t first = 0, count = 0; first < scores.size(); first += count) {
    count = std::min(block, scores.size() - first);
    BlockStep& step = steps.emplace_back();
    step.first = first;
    state.fold(scores.subspan(first, count), detail::rows(values, first, count), &step);
  }
  return steps;
}

// The all-at-once form, the chapter's reference: the softmax of the whole row first (chapter 02's
// online_softmax), then sum_j p_j v_j. Same shapes, conventions and errors as online_weighted_sum
// (there is no block). Source: the definition, softmax first and the weighted sum after.
inline std::vector<double> weighted_sum_all_at_once(std::span<const double> scores,
                                                    fa::MatrixView<const double> values) {
  detail::check_scores_and_values("weighted_sum_all_at_once", scores, values);
  const std::vector<double> p = ch02::online_softmax(scores);
  std::vector<double> o(values.cols(), 0.0);
  for (std::size_t j = 0; j < scores.size(); ++j) {
    for (std::size_t d = 0; d < o.size(); ++d) o[d] += p[j] * values(j, d);
  }
  return o;
}

}  // namespace ch03
