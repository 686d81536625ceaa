// Chapter 07's reference: the gradient of attention, row by row on the CPU, from the softmax's
// Jacobian written out. What the kernels of backward.cuh are tested against.
//
// For one head, with s_ij = scale * q_i . k_j over the keys j that row i sees, and the forward's
// L_i = log sum_j exp(s_ij) (chapter 03 computes both):
//   1. P_ij  = exp(s_ij - L_i)                        softmax, recomputed from L
//   2. dV_j += P_ij dO_i                              O_i = sum_j P_ij v_j, so dO_i reaches v_j times P_ij
//   3. dP_ij = dO_i . v_j                             and reaches P_ij as dO_i . v_j
//   4. D_i   = sum_k P_ik dP_ik                       the softmax Jacobian, dP_ij/ds_ik = P_ij (delta_jk - P_ik),
//   5. dS_ij = P_ij (dP_ij - D_i)                     summed over j: dS_ik = P_ik dP_ik - P_ik sum_j P_ij dP_ij
//   6. dQ_i  = scale sum_j dS_ij k_j;  dK_j += scale dS_ij q_i      s_ij = scale * q_i . k_j
// A row that sees no key (L_i = -inf) has no P, so all its terms are zero.
//
// The same lines serve twice: in double as the reference (attention_backward_reference, from chapter
// 03's O and L), and in float as "a plain float32 evaluation of the same formulas" (attention_backward_
// float32, from the kernel's forward O and L, with D_i = dO_i . O_i as the kernel computes it). The
// second one's distance from the first is what rounding in float alone costs; gradient_check.h sets
// the kernels' bounds from it.
//
// Source: Dao et al. 2022, FlashAttention (arXiv:2205.14135), appendix B.2 (the softmax gradient and
// D = rowsum(dO * O)); Dao 2023, FlashAttention-2, Algorithm 2; chapter 03's attention
// (chapters/03_online_weighted_sum/attention.h) for O and L.
// Run the demo: build/default/bin/ch07_backward
#pragma once

#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "chapters/03_online_weighted_sum/attention.h"
#include "common/attention_shapes.h"
#include "common/tensor.h"

namespace ch07 {

// Gradients in T: dQ shaped as Q, dK and dV as K, and D [batch, heads, seq_len_q].
template <std::floating_point T>
struct GradientsOf {
  fa::Tensor4<T> dQ, dK, dV;
  std::vector<T> D;
};

// Where line 4's D comes from: the Jacobian's sum (the reference), or rowsum(dO * O) (the kernel's).
enum class DFrom { jacobian, output };

// Lines 1-6 above, in T, for every head and row. Q, K, V, dO, O: as in backward.h; L: one value per
// query row; O is read only for DFrom::output. Throws std::invalid_argument when the shapes do not
// fit together (the message says which).
template <std::floating_point T, std::floating_point In, std::floating_point Saved>
GradientsOf<T> backward_by_rows(const fa::Tensor4<In>& Q, const fa::Tensor4<In>& K, const fa::Tensor4<In>& V,
                                const fa::Tensor4<In>& dO, const fa::Tensor4<Saved>& O, std::span<const Saved> L,
                                double scale, bool causal, DFrom d_from) {
  const fa::AttentionShape shape = fa::check_attention_shapes(Q.shape, K.shape, V.shape);
  if (dO.shape != Q.shape || O.shape != Q.shape || L.size() != shape.batch * shape.heads * shape.seq_len_q) {
    throw std::invalid_argument(fmt::format(
        "attention backward reference: dO {} and O {} must have Q's shape {}, and L one value per query row "
        "({} values, not {})",
        dO.shape.str(), O.shape.str(), Q.shape.str(), shape.batch * shape.heads * shape.seq_len_q, L.size()));
  }
  const std::size_t n_q = shape.seq_len_q, n_k = shape.seq_len_k, dim = shape.head_dim;
  GradientsOf<T> g{fa::Tensor4<T>(Q.shape), fa::Tensor4<T>(K.shape), fa::Tensor4<T>(V.shape),
                   std::vector<T>(L.size(), T(0))};
  const T s_scale = static_cast<T>(scale);
  std::vector<T> P(n_k), dP(n_k);
  for (std::size_t b = 0; b < shape.batch; ++b) {
    for (std::size_t h = 0; h < shape.heads; ++h) {
      const auto q = Q.view().head(b, h), k = K.view().head(b, h), v = V.view().head(b, h);
      const auto d_o = dO.view().head(b, h);
      const auto o = O.view().head(b, h);
      const auto dq = g.dQ.view().head(b, h), dk = g.dK.view().head(b, h), dv = g.dV.view().head(b, h);
      for (std::size_t i = 0; i < n_q; ++i) {
        const std::size_t row = (b * shape.heads + h) * n_q + i;
        const std::size_t n_i = causal ? fa::causal_visible_keys(i, n_q, n_k) : n_k;
        const T L_i = static_cast<T>(L[row]);
        if (n_i == 0 || L_i == -INFINITY) continue;  // a row that sees no key: every term is zero
        T D_i = 0;
        for (std::size_t j = 0; j < n_i; ++j) {
          T s = 0, dp = 0;
          for (std::size_t d = 0; d < dim; ++d) {
            s += static_cast<T>(q(i, d)) * static_cast<T>(k(j, d));
            dp += static_cast<T>(d_o(i, d)) * static_cast<T>(v(j, d));  // line 3
          }
          P[j] = std::exp(s * s_scale - L_i);  // line 1
          dP[j] = dp;
          if (d_from == DFrom::jacobian) D_i += P[j] * dp;  // line 4
        }
        if (d_from == DFrom::output) {
          for (std::size_t d = 0; d < dim; ++d) D_i += static_cast<T>(d_o(i, d)) * static_cast<T>(o(i, d));
        }
        g.D[row] = D_i;
        for (std::size_t j = 0; j < n_i; ++j) {
          const T dS = P[j] * (dP[j] - D_i);  // line 5
          for (std::size_t d = 0; d < dim; ++d) {
            dv(j, d) += P[j] * static_cast<T>(d_o(i, d));        // line 2
            dq(i, d) += s_scale * dS * static_cast<T>(k(j, d));  // line 6
            dk(j, d) += s_scale * dS * static_cast<T>(q(i, d));
          }
        }
      }
    }
  }
  return g;
}

// The reference: the gradient in double, from chapter 03's O and L (in double). Q, K, V, dO as in
// backward.h (float or double). scale: 1/sqrt(head_dim) when not given. Throws std::invalid_argument
// as ch03::attention and backward_by_rows.
template <std::floating_point In>
GradientsOf<double> attention_backward_reference(const fa::Tensor4<In>& Q, const fa::Tensor4<In>& K,
                                                 const fa::Tensor4<In>& V, const fa::Tensor4<In>& dO,
                                                 std::optional<double> scale, bool causal,
                                                 DFrom d_from = DFrom::jacobian) {
  const ch03::AttentionResult forward = ch03::attention(Q, K, V, {.scale = scale, .causal = causal});
  const double s = scale.value_or(fa::default_scale(Q.shape.head_dim));
  return backward_by_rows<double>(Q, K, V, dO, forward.O, std::span<const double>(forward.L), s, causal, d_from);
}

// The bytes attention_backward_reference and attention_backward_float32 allocate together: chapter
// 03's forward in double, the gradients and D in double and in float. Never throws (saturates).
inline std::uint64_t reference_memory(const fa::AttentionShape& s) {
  const fa::AttentionCounts n = fa::attention_counts(s);
  return fa::saturating_add(ch03::memory_needed(s), fa::bytes_of((8 + 4) * (n.q + 2 * n.k + n.rows)));
}

// A plain float32 evaluation of the kernel's formulas (D = rowsum(dO * O)), from the kernel's forward
// O and L: what rounding in float alone costs, with no tiling, no atomics. Throws as backward_by_rows.
inline GradientsOf<float> attention_backward_float32(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K,
                                                     const fa::Tensor4<float>& V, const fa::Tensor4<float>& dO,
                                                     const fa::Tensor4<float>& O, std::span<const float> L,
                                                     double scale, bool causal) {
  return backward_by_rows<float>(Q, K, V, dO, O, L, scale, causal, DFrom::output);
}

}  // namespace ch07
