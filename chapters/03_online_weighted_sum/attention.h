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
//   4.     fold s and V[b, h, block, :] into (m, l, acc)          online_weighted_sum.h, lines 1-6
//   5.   O[b, h, i, :] = acc / l (line 7); L[b, h, i] = m + log(l)
// Masked keys are never visited, so a row that sees no key keeps l = 0: its output is zeros and
// its L is -inf (DESIGN.md). No row of S is ever stored whole: at most key_block scores at a time.
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
#include <optional>
#include <stdexcept>
#include <vector>

#include "chapters/03_online_weighted_sum/online_weighted_sum.h"
#include "common/attention_shapes.h"
#include "common/tensor.h"

namespace ch03 {

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
    throw std::invalid_argument(fmt::format(
        "attention: scale {} is not a finite number; give a finite scale, or none for 1/sqrt(head_dim)",
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

inline double dot(std::span<const double> a, std::span<const double> b) {
  double s = 0.0;
  for (std::size_t d = 0; d < a.size(); ++d) s += a[d] * b[d];
  return s;
}

// Step 1: how many keys query row i sees.
inline std::size_t visible_keys(const AttentionOptions& options, std::size_t i,
                                const fa::AttentionShape& shape) {
  return options.causal ? fa::causal_visible_keys(i, shape.seq_len_q, shape.seq_len_k) : shape.seq_len_k;
}

}  // namespace detail

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
  const fa::AttentionShape shape = fa::check_attention_shapes(Q.shape, K.shape, V.shape);
  detail::check_options(options);
  const double scale = detail::checked_scale(options, shape.head_dim);
  const fa::Tensor4<double> q = detail::to_double(Q);
  const fa::Tensor4<double> k = detail::to_double(K);
  const fa::Tensor4<double> v = detail::to_double(V);

  AttentionResult result{fa::Tensor4<double>(Q.shape),
                         std::vector<double>(shape.batch * shape.heads * shape.seq_len_q)};
  std::vector<double> s(std::min(options.key_block, shape.seq_len_k));  // one block of a row of S
  for (std::size_t b = 0; b < shape.batch; ++b) {
    for (std::size_t h = 0; h < shape.heads; ++h) {
      const fa::MatrixView<const double> Qh = q.view().head(b, h);
      const fa::MatrixView<const double> Kh = k.view().head(b, h);
      const fa::MatrixView<const double> Vh = v.view().head(b, h);
      const fa::MatrixView<double> Oh = result.O.view().head(b, h);
      for (std::size_t i = 0; i < shape.seq_len_q; ++i) {
        const std::size_t n_i = detail::visible_keys(options, i, shape);  // step 1
        RowState state(shape.head_dim);
        // step 2; the last block holds whatever is left (count < key_block).
        for (std::size_t first = 0, count = 0; first < n_i; first += count) {
          count = std::min(options.key_block, n_i - first);
          // step 3: one block of row i of S, never more.
          for (std::size_t j = 0; j < count; ++j) s[j] = scale * detail::dot(Qh.row(i), Kh.row(first + j));
          // step 4: lines 1-6 of online_weighted_sum.h.
          state.fold(std::span<const double>(s).first(count), detail::rows(Vh, first, count));
        }
        // step 5
        const std::vector<double> o = state.finish();
        std::copy(o.begin(), o.end(), Oh.row(i).begin());
        result.L[(b * shape.heads + h) * shape.seq_len_q + i] = state.logsumexp();
      }
    }
  }
  return result;
}

// The all-at-once evaluation, for comparison (the demo prints the difference): for each row the
// whole row of S (masked keys set to -inf), its softmax by chapter 02, then P V
// (weighted_sum_all_at_once), and L = max + log(sum exp(s - max)). Same arguments, results and
// errors as attention(); options.key_block is not used but must still be >= 1.
template <std::floating_point T>
AttentionResult attention_all_at_once(const fa::Tensor4<T>& Q, const fa::Tensor4<T>& K,
                                      const fa::Tensor4<T>& V, const AttentionOptions& options = {}) {
  const fa::AttentionShape shape = fa::check_attention_shapes(Q.shape, K.shape, V.shape);
  detail::check_options(options);
  const double scale = detail::checked_scale(options, shape.head_dim);
  const fa::Tensor4<double> q = detail::to_double(Q);
  const fa::Tensor4<double> k = detail::to_double(K);
  const fa::Tensor4<double> v = detail::to_double(V);

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
        const double m_ref = max == minus_infinity ? 0.0 : max;
        double sum = 0.0;
        for (double sj : s_row) sum += std::exp(sj - m_ref);
        result.L[(b * shape.heads + h) * shape.seq_len_q + i] =
            sum == 0.0 ? minus_infinity : m_ref + std::log(sum);
      }
    }
  }
  return result;
}

}  // namespace ch03
