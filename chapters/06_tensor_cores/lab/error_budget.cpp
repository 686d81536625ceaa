#include "chapters/06_tensor_cores/lab/error_budget.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/attention_shapes.h"
#include "common/compare.h"
#include "common/simt/simt.h"

namespace ch06 {

namespace {

// x rounded to the element type (through float: the double rounding this adds is below 2^-24
// relative, invisible next to the element's 2^-8 or 2^-11).
double rounded(double x, ElementType element) {
  const auto f = static_cast<float>(x);
  return element == ElementType::bf16 ? static_cast<float>(simt::bf16(f)) : static_cast<float>(simt::f16(f));
}

}  // namespace

double unit_roundoff(ElementType element) { return element == ElementType::bf16 ? 0x1p-8 : 0x1p-11; }

ErrorBudget error_budget(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                         double scale, bool causal, ElementType element) {
  const fa::AttentionShape shape = fa::check_attention_shapes(Q.shape, K.shape, V.shape);
  const std::size_t d = shape.head_dim;
  std::vector<double> exact(Q.values.size()), low(Q.values.size());
  std::vector<double> s(shape.seq_len_k), o_exact(d), o_low(d);
  for (std::size_t bh = 0; bh < shape.batch * shape.heads; ++bh) {
    const float* K_head = &K.values[bh * shape.seq_len_k * d];
    const float* V_head = &V.values[bh * shape.seq_len_k * d];
    for (std::size_t i = 0; i < shape.seq_len_q; ++i) {
      const float* q = &Q.values[(bh * shape.seq_len_q + i) * d];
      const std::size_t seen = causal ? fa::causal_visible_keys(i, shape.seq_len_q, shape.seq_len_k) : shape.seq_len_k;
      double m = -INFINITY;
      for (std::size_t j = 0; j < seen; ++j) {
        const float* k = K_head + j * d;
        double dot = 0.0;
        for (std::size_t c = 0; c < d; ++c) dot += static_cast<double>(q[c]) * k[c];
        s[j] = dot * scale;
        m = std::max(m, s[j]);
      }
      double l = 0.0;
      std::fill(o_exact.begin(), o_exact.end(), 0.0);
      std::fill(o_low.begin(), o_low.end(), 0.0);
      for (std::size_t j = 0; j < seen; ++j) {
        const double p = std::exp(s[j] - m);
        const double p_low = rounded(p, element);  // P as the kernel feeds it to the second mma
        l += p;
        const float* v = V_head + j * d;
        for (std::size_t c = 0; c < d; ++c) {
          o_exact[c] += p * v[c];
          o_low[c] += p_low * v[c];
        }
      }
      double* out_exact = &exact[(bh * shape.seq_len_q + i) * d];
      double* out_low = &low[(bh * shape.seq_len_q + i) * d];
      for (std::size_t c = 0; c < d; ++c) {  // a row that sees no key: zeros in both
        out_exact[c] = seen == 0 ? 0.0 : o_exact[c] / l;
        out_low[c] = seen == 0 ? 0.0 : rounded(o_low[c] / l, element);
      }
    }
  }
  const double reference = fa::compare(low, exact).rel_l2;
  return {reference, kBudgetFactor * reference + kFloat32Floor};
}

std::vector<double> L_bounds(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, double scale,
                             std::span<const float> L_05) {
  const fa::Shape4 qs = Q.shape, ks = K.shape;
  std::vector<double> bounds;
  bounds.reserve(L_05.size());
  auto norm = [](const float* x, std::size_t n) {
    double sum = 0.0;
    for (std::size_t c = 0; c < n; ++c) sum += static_cast<double>(x[c]) * x[c];
    return std::sqrt(sum);
  };
  const double log_keys = ks.seq_len > 0 ? std::log(static_cast<double>(ks.seq_len)) : 0.0;
  for (std::size_t bh = 0; bh < qs.batch * qs.heads; ++bh) {
    double k_max = 0.0;
    for (std::size_t j = 0; j < ks.seq_len; ++j) {
      k_max = std::max(k_max, norm(&K.values[(bh * ks.seq_len + j) * ks.head_dim], ks.head_dim));
    }
    for (std::size_t i = 0; i < qs.seq_len; ++i) {
      const double L = L_05[bounds.size()];
      const double magnitude =
          std::fabs(scale) * norm(&Q.values[(bh * qs.seq_len + i) * qs.head_dim], qs.head_dim) * k_max;
      const double L_magnitude = magnitude + log_keys;  // |L| <= M + ln(seq_len_k), from the inputs
      bounds.push_back(std::isinf(L) ? 0.0
                                     : 2.4e-7 * (L_magnitude + static_cast<double>(ks.seq_len) + 1.0) +
                                           2.4e-7 * static_cast<double>(qs.head_dim) * magnitude);
    }
  }
  return bounds;
}

}  // namespace ch06
