// Chapter 03, second part: whole attention on the CPU, one query row at a time, by the online
// weighted sum of online_weighted_sum.h. This is the reference that chapter 04 is tested against.
//
// What it adds to the first part: the scores of a query row are no longer given; they are the dot
// products of the query with every key, times scale. Every row of every head of every batch entry
// runs the recurrence of online_weighted_sum.h on its own, with an optional causal mask.
//
// The algorithm, for Q, K, V of shape [batch, heads, seq_len, head_dim] (Q has seq_len_q rows per
// head, K and V seq_len_k):
//   for each batch entry b, head h, query row i:
//   1.   n_i = seq_len_k, or fa::causal_visible_keys(i, seq_len_q, seq_len_k) under the causal mask
//   2.   for each block of key_block consecutive keys among keys 0 .. n_i - 1:
//   3.     s_j = scale * dot(Q[b, h, i, :], K[b, h, j, :])            one block of row i of S
//   4.     fold s and V[b, h, block, :] into (m, l, acc)          online_weighted_sum.h, lines 2-6
//   5.   O[b, h, i, :] = acc / l (line 7); L[b, h, i] = m + log(l)
// Masked keys are never visited, so a row that sees no key keeps l = 0: its output is zeros and
// its L is -inf (docs/conventions.md). No row of S is ever stored whole: at most key_block scores at a
// time.
//
// Source: Vaswani et al. 2017, "Attention is all you need", section 3.2.1 (O = softmax(Q K^T *
// scale) V, scale = 1/sqrt(head_dim)); Dao 2023, "FlashAttention-2", section 3.1 (the per-row
// recurrence and L = m + log(l)); the causal alignment of FlashAttention 2.1+
// (common/attention_shapes.h). Run the demo: build/default/bin/ch03_online_weighted_sum --seq-q 8
// --seq-k 8 --causal
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <vector>

#include "chapters/01_safe_softmax/safe_softmax.h"
#include "chapters/03_online_weighted_sum/online_weighted_sum.h"
#include "common/attention_shapes.h"
#include "common/memory.h"
#include "common/tensor.h"

namespace ch03 {

// How far attention() may be from attention_all_at_once() (max abs, O and L alike) for inputs of
// order 1 (normal(0, 1) Q, K, V, seq_len up to a few hundred). Scores are dot products of head_dim
// terms rounded in double: each is off by at most about head_dim * eps * scale * sum_d |q_d k_d|
// (~4e-14 for head_dim 64), which moves an output by at most twice that times max |v| (< 6), and the
// sums of up to 257 terms add ~257 eps max |v|: ~5e-13 together. A wrong index, a lost block or a
// missing rescale is off by O(0.1). The demo and the tests both use it.
inline constexpr double kAttentionBound = 1e-12;

struct AttentionOptions {
  std::optional<double> scale;  // multiplies Q K^T; 1/sqrt(head_dim) when not given
  bool causal = false;          // bottom-right aligned causal mask (common/attention_shapes.h)
  std::size_t key_block = 64;   // keys per block in step 2; any size >= 1
};

struct AttentionResult {
  fa::Tensor4<double> O;  // [batch, heads, seq_len_q, head_dim]
  std::vector<double> L;  // [batch, heads, seq_len_q], row logsumexp m + log(l) of the SCALED
                          // scores; -inf for a row that sees no key
};

namespace detail {

// The scale to use: options.scale, or 1/sqrt(head_dim). Any finite scale is accepted (0 gives
// every visible key the same weight; a negative one favours the least similar keys). Throws
// std::invalid_argument for a NaN or infinite scale.
inline double checked_scale(const AttentionOptions& options, std::size_t head_dim) {
  if (!options.scale) return fa::default_scale(head_dim);
  if (!std::isfinite(*options.scale)) {
    throw std::invalid_argument(
        fmt::format("attention: scale {} is not a finite number; give a finite scale, or none for 1/sqrt(head_dim)",
                    *options.scale));
  }
  return *options.scale;
}

inline void check_options(const AttentionOptions& options) {
  if (options.key_block == 0) {
    throw std::invalid_argument("attention: key_block 0; give a block of at least 1 key");
  }
}

// A copy of t in double (all arithmetic of this chapter is in double). Throws
// std::invalid_argument if t's values do not fill its shape.
template <std::floating_point T>
fa::Tensor4<double> to_double(const fa::Tensor4<T>& t) {
  const auto values = t.view().flat();  // view() checks that the values fill the shape
  return fa::Tensor4<double>(t.shape, std::vector<double>(values.begin(), values.end()));
}

// What attention(), attention_rows() and attention_all_at_once() start from: the shapes and the
// options checked, the scale chosen, and Q, K, V converted to double. Throws as attention().
struct Inputs {
  fa::AttentionShape shape;
  double scale = 0.0;
  fa::Tensor4<double> q, k, v;
};

template <std::floating_point T>
Inputs checked_inputs(const fa::Tensor4<T>& Q, const fa::Tensor4<T>& K, const fa::Tensor4<T>& V,
                      const AttentionOptions& options) {
  const fa::AttentionShape shape = fa::check_attention_shapes(Q.shape, K.shape, V.shape);
  check_options(options);
  return {shape, checked_scale(options, shape.head_dim), to_double(Q), to_double(K), to_double(V)};
}

inline double dot(std::span<const double> a, std::span<const double> b) {
  double s = 0.0;
  for (std::size_t d = 0; d < a.size(); ++d) s += a[d] * b[d];
  return s;
}

// Step 1: how many keys query row i sees.
inline std::size_t visible_keys(const AttentionOptions& options, std::size_t i, const fa::AttentionShape& shape) {
  return options.causal ? fa::causal_visible_keys(i, shape.seq_len_q, shape.seq_len_k) : shape.seq_len_k;
}

// Throws std::invalid_argument unless every flat row index is < batch * heads * seq_len_q.
inline void check_rows(std::span<const std::size_t> rows, const fa::AttentionShape& shape) {
  for (std::size_t r : rows) {
    if (r >= fa::attention_rows(shape)) {
      throw std::invalid_argument(
          fmt::format("attention rows: row {} is past the {} rows of the problem", r, fa::attention_rows(shape)));
    }
  }
}

// One query row of attention (steps 1-5 above), for flat row r = (b * heads + h) * seq_len_q + i of
// the converted inputs q, k, v: writes head_dim values into o and returns the row's L. `s` is
// scratch space for one block of scores (at least min(key_block, seq_len_k) entries).
inline double attention_row(const fa::Tensor4<double>& q, const fa::Tensor4<double>& k, const fa::Tensor4<double>& v,
                            const AttentionOptions& options, double scale, const fa::AttentionShape& shape,
                            std::size_t r, std::span<double> o, std::vector<double>& s) {
  const std::size_t b = r / (shape.heads * shape.seq_len_q);
  const std::size_t h = r / shape.seq_len_q % shape.heads;
  const std::size_t i = r % shape.seq_len_q;
  const fa::MatrixView<const double> Qh = q.view().head(b, h);
  const fa::MatrixView<const double> Kh = k.view().head(b, h);
  const fa::MatrixView<const double> Vh = v.view().head(b, h);
  // graded 03c: step 1, how many keys query row i sees (the causal rule: detail::visible_keys)
  const std::size_t n_i = detail::visible_keys(options, i, shape);  // step 1
  // end graded
  RowState state(shape.head_dim);
  // step 2; the last block holds whatever is left (count < key_block).
  for (std::size_t first = 0, count = 0; first < n_i; first += count) {
    count = std::min(options.key_block, n_i - first);
    // graded 03c: step 3, the scores of keys first .. first + count - 1 of row i, scaled
    // step 3: one block of row i of S, never more.
    for (std::size_t j = 0; j < count; ++j) s[j] = scale * detail::dot(Qh.row(i), Kh.row(first + j));
    // end graded
    // step 4: lines 1-6 of online_weighted_sum.h.
    state.fold(std::span<const double>(s).first(count), detail::rows(Vh, first, count));
  }
  // step 5
  const std::vector<double> out = state.finish();
  std::copy(out.begin(), out.end(), o.begin());
  return state.logsumexp();
}

}  // namespace detail

// The bytes attention() allocates: double copies of Q, K, V, and O and L in double. Never throws
// (saturates at 2^64 - 1).
inline std::uint64_t memory_needed(const fa::AttentionShape& s) {
  const fa::AttentionCounts n = fa::attention_counts(s);
  return fa::bytes_of(sizeof(double) * (2 * n.q + 2 * n.k + n.rows));
}

// O = softmax(Q K^T * scale) V, row by row with the online weighted sum (steps 1-5 above).
// Q: [batch, heads, seq_len_q, head_dim]; K, V: [batch, heads, seq_len_k, head_dim]; row-major,
// float or double (converted to double; all arithmetic in double). seq_len_q and seq_len_k may
// differ (one decoding query against 257 keys is seq_len_q = 1, seq_len_k = 257).
// Returns O [batch, heads, seq_len_q, head_dim] and L [batch, heads, seq_len_q] (see AttentionResult).
// Throws std::invalid_argument (through fa::check_attention_shapes) when the shapes do not fit
// together or a dimension is 0, and for key_block == 0 or a NaN or infinite scale.
template <std::floating_point T>
AttentionResult attention(const fa::Tensor4<T>& Q, const fa::Tensor4<T>& K, const fa::Tensor4<T>& V,
                          const AttentionOptions& options = {}) {
  const auto& [shape, scale, q, k, v] = detail::checked_inputs(Q, K, V, options);

  AttentionResult result{fa::Tensor4<double>(Q.shape), std::vector<double>(fa::attention_rows(shape))};
  std::vector<double> s(std::min(options.key_block, shape.seq_len_k));  // one block of a row of S
  for (std::size_t r = 0; r < result.L.size(); ++r) {
    const std::span<double> o(result.O.values.data() + r * shape.head_dim, shape.head_dim);
    result.L[r] = detail::attention_row(q, k, v, options, scale, shape, r, o, s);
  }
  return result;
}

// O and L of some rows only, in double.
struct AttentionRows {
  std::vector<double> O;  // [rows, head_dim], row-major
  std::vector<double> L;  // [rows]
};

// The same for some rows only: O and L of the flat rows r = (b * heads + h) * seq_len_q + i listed
// in `rows` (each < batch * heads * seq_len_q), in that order. What a check uses where the whole
// problem would take too long (fa::sample_rows picks the rows). Throws as attention(), and
// std::invalid_argument for a row past the end.
template <std::floating_point T>
AttentionRows attention_rows(const fa::Tensor4<T>& Q, const fa::Tensor4<T>& K, const fa::Tensor4<T>& V,
                             const AttentionOptions& options, std::span<const std::size_t> rows) {
  const auto& [shape, scale, q, k, v] = detail::checked_inputs(Q, K, V, options);
  detail::check_rows(rows, shape);
  AttentionRows out{std::vector<double>(rows.size() * shape.head_dim), std::vector<double>(rows.size())};
  std::vector<double> s(std::min(options.key_block, shape.seq_len_k));
  for (std::size_t n = 0; n < rows.size(); ++n) {
    out.L[n] = detail::attention_row(q, k, v, options, scale, shape, rows[n],
                                     std::span<double>(out.O.data() + n * shape.head_dim, shape.head_dim), s);
  }
  return out;
}

// O and L of some rows, as a plain evaluation in arithmetic Acc computes them.
template <std::floating_point Acc>
struct PlainRows {
  std::vector<Acc> O;  // [rows, head_dim], row-major
  std::vector<Acc> L;  // [rows]: max + log(sum exp(s - max)) in Acc; -inf for a row that sees no key
};

// The plain evaluation of the same rows in arithmetic Acc (float for a float32 kernel): every score
// s_j = scale * dot(q_i, k_j) summed in Acc in the order d = 0, 1, ..., the row's safe softmax
// (chapter 01) in Acc, then sum_j p_j v_j in Acc, and L from the same scores in Acc. No blocks and no
// online rescaling: the textbook formula, rounded as a straightforward Acc program rounds it. Its
// distance from attention_rows (float64) is the yardstick of the float32 kernels' bounds
// (common/tolerance.h). Same arguments, row order and errors as attention_rows.
template <std::floating_point Acc, std::floating_point T>
PlainRows<Acc> plain_attention_rows(const fa::Tensor4<T>& Q, const fa::Tensor4<T>& K, const fa::Tensor4<T>& V,
                                    const AttentionOptions& options, std::span<const std::size_t> rows) {
  const fa::AttentionShape shape = fa::check_attention_shapes(Q.shape, K.shape, V.shape);
  detail::check_options(options);
  detail::check_rows(rows, shape);
  const Acc scale = static_cast<Acc>(detail::checked_scale(options, shape.head_dim));
  PlainRows<Acc> out{std::vector<Acc>(rows.size() * shape.head_dim, Acc(0)), std::vector<Acc>(rows.size())};
  std::vector<Acc> s_row(shape.seq_len_k);
  for (std::size_t n = 0; n < rows.size(); ++n) {
    const std::size_t r = rows[n];
    const std::size_t b = r / (shape.heads * shape.seq_len_q), h = r / shape.seq_len_q % shape.heads;
    const std::size_t i = r % shape.seq_len_q;
    const auto Qh = Q.view().head(b, h);
    const auto Kh = K.view().head(b, h);
    const auto Vh = V.view().head(b, h);
    const std::size_t n_i = detail::visible_keys(options, i, shape);
    for (std::size_t j = 0; j < shape.seq_len_k; ++j) {
      Acc dot = 0;
      for (std::size_t d = 0; d < shape.head_dim; ++d) dot += static_cast<Acc>(Qh(i, d)) * static_cast<Acc>(Kh(j, d));
      s_row[j] = j < n_i ? dot * scale : -std::numeric_limits<Acc>::infinity();
    }
    const std::vector<Acc> p = ch01::safe_softmax(std::span<const Acc>(s_row));
    for (std::size_t j = 0; j < shape.seq_len_k; ++j) {
      for (std::size_t d = 0; d < shape.head_dim; ++d) {
        out.O[n * shape.head_dim + d] += p[j] * static_cast<Acc>(Vh(j, d));
      }
    }
    Acc max = -std::numeric_limits<Acc>::infinity();
    for (Acc s_j : s_row) max = s_j > max || s_j != s_j ? s_j : max;  // NaN wins: L is NaN then
    Acc sum = 0;
    if (max != -std::numeric_limits<Acc>::infinity()) {
      for (Acc s_j : s_row) sum += std::exp(s_j - max);
    }
    out.L[n] = sum == Acc(0) ? -std::numeric_limits<Acc>::infinity() : max + std::log(sum);
  }
  return out;
}

// The all-at-once evaluation, for comparison (the demo prints the difference): for each row the
// whole row of S (masked keys set to -inf), its softmax by chapter 02, then P V
// (weighted_sum_all_at_once), and L = max + log(sum exp(s - max)). Same arguments, results and
// errors as attention(); options.key_block is not used but must still be >= 1.
template <std::floating_point T>
AttentionResult attention_all_at_once(const fa::Tensor4<T>& Q, const fa::Tensor4<T>& K, const fa::Tensor4<T>& V,
                                      const AttentionOptions& options = {}) {
  const auto& [shape, scale, q, k, v] = detail::checked_inputs(Q, K, V, options);

  AttentionResult result{fa::Tensor4<double>(Q.shape),
                         std::vector<double>(shape.batch * shape.heads * shape.seq_len_q)};
  std::vector<double> s_row(shape.seq_len_k);
  for (std::size_t b = 0; b < shape.batch; ++b) {
    for (std::size_t h = 0; h < shape.heads; ++h) {
      const fa::MatrixView<const double> Qh = q.view().head(b, h);
      const fa::MatrixView<const double> Kh = k.view().head(b, h);
      const fa::MatrixView<const double> Vh = v.view().head(b, h);
      const fa::MatrixView<double> Oh = result.O.view().head(b, h);
      for (std::size_t i = 0; i < shape.seq_len_q; ++i) {
        const std::size_t n_i = detail::visible_keys(options, i, shape);
        double max = minus_infinity;
        for (std::size_t j = 0; j < shape.seq_len_k; ++j) {
          s_row[j] = j < n_i ? scale * detail::dot(Qh.row(i), Kh.row(j)) : minus_infinity;
          max = s_row[j] > max ? s_row[j] : max;
        }
        const std::vector<double> o = weighted_sum_all_at_once(s_row, Vh);
        std::copy(o.begin(), o.end(), Oh.row(i).begin());
        // L: measured against 0 when every score is -inf, as RowState::fold does (sum 0, L -inf).
        const double m_safe = ch02::safe_max(max);
        double sum = 0.0;
        for (double sj : s_row) sum += std::exp(sj - m_safe);
        result.L[(b * shape.heads + h) * shape.seq_len_q + i] = sum == 0.0 ? minus_infinity : m_safe + std::log(sum);
      }
    }
  }
  return result;
}

}  // namespace ch03
