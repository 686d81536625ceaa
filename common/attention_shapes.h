// The shapes and conventions that every attention chapter (03 and later) shares.
//
//   Q: [batch, heads, seq_len_q, head_dim]     O: [batch, heads, seq_len_q, head_dim]
//   K: [batch, heads, seq_len_k, head_dim]     L: [batch, heads, seq_len_q]  (row logsumexp)
//   V: [batch, heads, seq_len_k, head_dim]
//   O = softmax(Q K^T * scale) V, scale = 1/sqrt(head_dim) unless given.
//
// Causal mask, aligned to the bottom right as FlashAttention 2.1+ does: query i sees the keys
// j <= i + seq_len_k - seq_len_q. With equal lengths that is j <= i; with seq_len_q > seq_len_k the
// first seq_len_q - seq_len_k rows see no key at all, and by the book's convention their output is
// zeros and their L is -inf. (A decoding step, one query against all earlier keys, is seq_len_q = 1: the
// query sees every key.)
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "common/tensor.h"

namespace fa {

struct AttentionShape {
  std::size_t batch = 0;
  std::size_t heads = 0;
  std::size_t seq_len_q = 0;
  std::size_t seq_len_k = 0;
  std::size_t head_dim = 0;
};

// Checks that Q, K and V fit together and are not empty, and returns the problem's sizes.
// Throws std::invalid_argument saying which tensor is wrong and what was expected
// (attention_shapes.cpp).
AttentionShape check_attention_shapes(const Shape4& q, const Shape4& k, const Shape4& v);

// How many values each kind of tensor of the problem holds, in double (for memory plans,
// common/memory.h: bytes_of). Never throws.
struct AttentionCounts {
  double q = 0;       // Q, O, dO, dQ: batch * heads * seq_len_q * head_dim
  double k = 0;       // K, V, dK, dV: batch * heads * seq_len_k * head_dim
  double rows = 0;    // L, D: batch * heads * seq_len_q
  double scores = 0;  // S, P: batch * heads * seq_len_q * seq_len_k
};
inline AttentionCounts attention_counts(const AttentionShape& s) {
  const double heads = static_cast<double>(s.batch) * static_cast<double>(s.heads);
  const double rows = heads * static_cast<double>(s.seq_len_q);
  return {rows * static_cast<double>(s.head_dim),
          heads * static_cast<double>(s.seq_len_k) * static_cast<double>(s.head_dim), rows,
          rows * static_cast<double>(s.seq_len_k)};
}

// The number of query rows of the problem, batch * heads * seq_len_q: the rows of O and of L.
inline std::size_t attention_rows(const AttentionShape& s) { return s.batch * s.heads * s.seq_len_q; }

// The floating-point operations of a forward pass without a mask: the two matrix products S = Q K^T
// and O = P V, 2 seq_len_q seq_len_k head_dim each per head (FlashAttention-2's count, section 4.1).
// For the estimate of a run's time (fa::announce_long_run). Never throws.
inline double forward_flops(const AttentionShape& s) {
  return 4.0 * static_cast<double>(s.batch * s.heads) * static_cast<double>(s.seq_len_q) *
         static_cast<double>(s.seq_len_k) * static_cast<double>(s.head_dim);
}

// At most `most` flat row indices spread evenly over [0, rows), first and last included; all of
// them when rows <= most. Used where a check evaluates a reference on some rows only. Never throws.
inline std::vector<std::size_t> sample_rows(std::size_t rows, std::size_t most) {
  std::vector<std::size_t> picked;
  if (rows == 0 || most == 0) return picked;
  if (rows <= most || most == 1) {
    for (std::size_t r = 0; r < std::min(rows, most); ++r) picked.push_back(r);
    return picked;
  }
  for (std::size_t n = 0; n < most; ++n) {
    picked.push_back(static_cast<std::size_t>(static_cast<long double>(n) * (rows - 1) / (most - 1)));
  }
  return picked;
}

// The default softmax scale, 1/sqrt(head_dim) (Vaswani et al. 2017, section 3.2.1).
inline double default_scale(std::size_t head_dim) { return 1.0 / std::sqrt(static_cast<double>(head_dim)); }

// How many keys query row i may see under the causal mask above: min(i + seq_len_k - seq_len_q + 1,
// seq_len_k), or 0 when that is negative. Keys 0 .. visible-1 are seen; the rest are masked.
inline std::size_t causal_visible_keys(std::size_t i, std::size_t seq_len_q, std::size_t seq_len_k) {
  if (i + seq_len_k + 1 <= seq_len_q) return 0;
  const std::size_t visible = i + seq_len_k + 1 - seq_len_q;
  return visible < seq_len_k ? visible : seq_len_k;
}

}  // namespace fa
