#include "chapters/06_tensor_cores/lab/error_budget.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "common/attention_shapes.h"
#include "common/compare.h"
#include "common/memory.h"
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

double score_limit(ElementType element) {
  // 2 |S| 2^-24 <= u: |S| <= u 2^23.
  return unit_roundoff(element) * 0x1p23;
}

void check_score_range(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, double scale, ElementType element) {
  const fa::Shape4 qs = Q.shape, ks = K.shape;
  auto norm = [](const float* x, std::size_t n) {
    double sum = 0.0;
    for (std::size_t c = 0; c < n; ++c) sum += static_cast<double>(x[c]) * x[c];
    return std::sqrt(sum);
  };
  if (qs.batch != ks.batch || qs.head_dim != ks.head_dim || ks.heads == 0 || qs.heads % ks.heads != 0) {
    throw std::invalid_argument("check_score_range: Q " + qs.str() + " and K " + ks.str() +
                                ": batch and head_dim must be equal, and Q's heads a multiple of K's");
  }
  // |scale| |q_i| max_j |k_j|, over every row of every head (query head h reads K head h / group,
  // as chapter 08's grouped heads do; group 1 elsewhere).
  const std::size_t group = qs.heads / ks.heads;
  double largest = 0.0;
  for (std::size_t b = 0; b < qs.batch; ++b) {
    for (std::size_t h = 0; h < qs.heads; ++h) {
      const std::size_t q_head = b * qs.heads + h, k_head = b * ks.heads + h / group;
      double k_max = 0.0, q_max = 0.0;
      for (std::size_t j = 0; j < ks.seq_len; ++j) {
        k_max = std::max(k_max, norm(&K.values[(k_head * ks.seq_len + j) * ks.head_dim], ks.head_dim));
      }
      for (std::size_t i = 0; i < qs.seq_len; ++i) {
        q_max = std::max(q_max, norm(&Q.values[(q_head * qs.seq_len + i) * qs.head_dim], qs.head_dim));
      }
      largest = std::max(largest, std::fabs(scale) * q_max * k_max);
    }
  }
  const double limit = score_limit(element);
  if (!(largest > limit)) return;
  throw std::invalid_argument(fmt::format(
      "Q, K: the scores may reach |S * scale| = {:.2g} (|scale| |q_i| max_j |k_j|), past the {:.2g} up to which {} "
      "can be checked: the kernel's exponent exp2(S c - m c) is one FFMA with m c rounded to float32, which moves the "
      "weights by up to {:.2g} there, more than {}'s own rounding ({:.2g}) that the error budget allows for (near 1e10 "
      "every weight would be 0 or inf); scale Q or K down",
      largest, limit, to_string(element), 2.0 * largest * 0x1p-24, to_string(element), unit_roundoff(element)));
}

void round_inputs(fa::Tensor4<float>& Q, fa::Tensor4<float>& K, fa::Tensor4<float>& V, double scale,
                  ElementType element) {
  Q = round_to(Q, element, "Q");
  K = round_to(K, element, "K");
  V = round_to(V, element, "V");
  check_score_range(Q, K, scale, element);
}

std::uint64_t budget_memory(const fa::AttentionShape& shape) {
  return fa::saturating_mul(2 * sizeof(double), fa::saturating_mul(fa::attention_rows(shape), shape.head_dim));
}

}  // namespace ch06
