#include "chapters/10_hopper/lab/fp8_error.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "common/random.h"
#include "common/simt/instructions/fp8.h"
#include "common/simt/instructions/half_precision.h"

namespace ch10::fp8 {

std::vector<float> draw_inputs(std::size_t n, std::uint64_t seed, Inputs inputs) {
  const std::vector<double> base = fa::normal(n, seed);
  std::vector<float> out(base.begin(), base.end());
  if (inputs == Inputs::normal) return out;
  const std::vector<double> coin = fa::uniform(n, seed ^ 0x5bd1e995ULL);
  const std::vector<double> outlier = fa::normal(n, seed ^ 0x9e3779b97f4a7c15ULL, 0.0, 10.0);
  for (std::size_t i = 0; i < n; ++i) {
    if (coin[i] < 1e-3) out[i] = static_cast<float>(base[i] + outlier[i]);
  }
  return out;
}

Head draw_head(std::size_t seq, std::size_t head_dim, std::uint64_t seed, Inputs inputs) {
  const std::size_t n = seq * head_dim;
  return {seq, head_dim, draw_inputs(n, 4 * seed + 1, inputs), draw_inputs(n, 4 * seed + 2, inputs),
          draw_inputs(n, 4 * seed + 3, inputs)};
}

std::vector<float> random_signs(std::size_t d, std::uint64_t seed) {
  std::vector<float> signs = fa::uniform<float>(d, seed);
  for (float& s : signs) s = s < 0.5f ? -1.0f : 1.0f;
  return signs;
}

void walsh_hadamard_rows(std::span<float> x, std::size_t d) {
  if (d == 0 || !std::has_single_bit(d) || x.size() % d != 0) {
    throw std::invalid_argument("walsh_hadamard_rows: head_dim must be a power of two dividing the size");
  }
  for (std::size_t row = 0; row < x.size(); row += d) {
    float* r = &x[row];
    for (std::size_t half = 1; half < d; half *= 2) {  // pass log2(half): pairs half apart
      for (std::size_t start = 0; start < d; start += 2 * half) {
        for (std::size_t i = start; i < start + half; ++i) {
          const float a = r[i], b = r[i + half];
          r[i] = a + b;
          r[i + half] = a - b;
        }
      }
    }
  }
}

namespace {

void multiply_columns(std::span<float> x, std::span<const float> by) {
  for (std::size_t i = 0; i < x.size(); ++i) x[i] *= by[i % by.size()];
}

void scale_all(std::span<float> x, float by) {
  for (float& v : x) v *= by;
}

}  // namespace

void hadamard_rows(std::span<float> x, std::size_t d, std::span<const float> signs) {
  multiply_columns(x, signs);  // x D
  walsh_hadamard_rows(x, d);   // (x D) H
  scale_all(x, 1.0f / std::sqrt(static_cast<float>(d)));
}

void inverse_hadamard_rows(std::span<float> x, std::size_t d, std::span<const float> signs) {
  walsh_hadamard_rows(x, d);  // x H (H is symmetric, and H H = d I)
  scale_all(x, 1.0f / std::sqrt(static_cast<float>(d)));
  multiply_columns(x, signs);  // (x H / sqrt(d)) D, and D D = I
}

void subtract_token_mean(std::span<float> K, std::size_t d) {
  const std::size_t seq = K.size() / d;
  for (std::size_t c = 0; c < d; ++c) {
    double sum = 0.0;
    for (std::size_t j = 0; j < seq; ++j) sum += K[j * d + c];
    const auto mean = static_cast<float>(sum / static_cast<double>(seq));
    for (std::size_t j = 0; j < seq; ++j) K[j * d + c] -= mean;
  }
}

float e4m3_scale(std::span<const float> x) {
  float amax = 0.0f;
  for (float v : x) amax = std::max(amax, std::fabs(v));
  return amax > 0.0f ? amax / kE4m3Max : 1.0f;
}

float through_e4m3(float x, float scale) {
  return scale * simt::e4m3_bits_to_float(simt::float_to_e4m3_bits(x / scale));
}

void quantise_e4m3(std::span<float> x, std::size_t d, std::size_t rows_per_block) {
  const std::size_t block = rows_per_block * d;
  for (std::size_t start = 0; start < x.size(); start += block) {
    const std::span<float> b = x.subspan(start, std::min(block, x.size() - start));  // the tail: fewer rows
    const float scale = e4m3_scale(b);
    for (float& v : b) v = through_e4m3(v, scale);
  }
}

namespace {

// x to bf16 or f16 and back (float32 for anything else).
float rounded_16(float x, Element element) {
  if (element == Element::bf16) return static_cast<float>(simt::bf16(x));
  return element == Element::f16 ? static_cast<float>(simt::f16(x)) : x;
}

}  // namespace

void round_to(std::span<float> x, Element element) {
  for (float& v : x) v = rounded_16(v, element);
}

float truncate_fraction(float x, int bits) {
  const std::uint32_t drop = (std::uint32_t{1} << (23 - bits)) - 1;  // float has 23 fraction bits
  return std::bit_cast<float>(std::bit_cast<std::uint32_t>(x) & ~drop);
}

namespace {

// One weight of P as the second matmul takes it.
float rounded_weight(float p, Element element, float p_scale) {
  if (element == Element::e4m3) return through_e4m3(p, 1.0f / p_scale);  // e4m3(p * p_scale) / p_scale
  return rounded_16(p, element);
}

// What the accumulator keeps after one k32 step adds its partial sum.
float accumulated(float acc, float partial, Accumulate accumulate) {
  const float sum = acc + partial;
  return accumulate == Accumulate::trunc14 ? truncate_fraction(sum, kTruncatedBits) : sum;
}

// q . k in float32, kMmaK terms at a time into the accumulator.
float dot(const float* q, const float* k, std::size_t d, Accumulate accumulate) {
  float acc = 0.0f;
  for (std::size_t c0 = 0; c0 < d; c0 += kMmaK) {
    float partial = 0.0f;
    for (std::size_t c = c0; c < std::min(d, c0 + kMmaK); ++c) partial += q[c] * k[c];
    acc = accumulated(acc, partial, accumulate);
  }
  return acc;
}

// The keys row i sees: fa::visible_keys's rule (common/kernel_problem.h).
std::size_t visible(const Problem& p, std::size_t i) {
  if (!p.causal) return p.seq_k;
  const auto v = static_cast<long long>(i) - static_cast<long long>(p.seq_q) + 1 + static_cast<long long>(p.seq_k);
  return static_cast<std::size_t>(std::clamp(v, 0LL, static_cast<long long>(p.seq_k)));
}

}  // namespace

Attention attention_lowp(std::span<const float> Q, std::span<const float> K, std::span<const float> V, const Problem& p,
                         Element p_element, Accumulate accumulate) {
  const std::size_t d = p.head_dim;
  const float scale = p.scale;
  Attention out{std::vector<float>(p.seq_q * d), std::vector<float>(p.seq_q)};
  std::vector<float> acc(d), partial(d), s(kKeyTile);
  for (std::size_t i = 0; i < p.seq_q; ++i) {
    const float* q = &Q[i * d];
    const std::size_t seen = visible(p, i);
    float m = -std::numeric_limits<float>::infinity(), l = 0.0f;
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (std::size_t j0 = 0; j0 < seen; j0 += kKeyTile) {  // the last tile may be shorter
      const std::size_t keys = std::min(kKeyTile, seen - j0);
      float m_new = m;
      for (std::size_t j = 0; j < keys; ++j) {
        s[j] = dot(q, &K[(j0 + j) * d], d, accumulate) * scale;
        m_new = std::max(m_new, s[j]);
      }
      const float rescale = std::exp(m - m_new);  // exp(-inf) = 0 on the first tile
      l *= rescale;
      for (float& a : acc) a *= rescale;
      for (std::size_t k0 = 0; k0 < keys; k0 += kMmaK) {  // P V, one k32 step at a time
        std::fill(partial.begin(), partial.end(), 0.0f);
        for (std::size_t j = k0; j < std::min(keys, k0 + kMmaK); ++j) {
          const float w = std::exp(s[j] - m_new);
          l += w;  // FA3 sums P in float32 before the cast
          const float w_low = rounded_weight(w, p_element, p.p_scale);
          const float* v = &V[(j0 + j) * d];
          for (std::size_t c = 0; c < d; ++c) partial[c] += w_low * v[c];
        }
        for (std::size_t c = 0; c < d; ++c) acc[c] = accumulated(acc[c], partial[c], accumulate);
      }
      m = m_new;
    }
    for (std::size_t c = 0; c < d; ++c) out.O[i * d + c] = seen == 0 ? 0.0f : acc[c] / l;
    out.L[i] = seen == 0 ? -std::numeric_limits<float>::infinity() : m + std::log(l);
  }
  return out;
}

std::vector<float> attention_lowp(const Head& h, Element p_element, Accumulate accumulate) {
  const Problem p{h.seq, h.seq, h.head_dim, false, 1.0f / std::sqrt(static_cast<float>(h.head_dim)), kPScale};
  return attention_lowp(h.Q, h.K, h.V, p, p_element, accumulate).O;
}

std::vector<double> attention_reference(std::span<const float> Q, std::span<const float> K, std::span<const float> V,
                                        const Problem& p) {
  const std::size_t d = p.head_dim;
  const double scale = p.scale;
  std::vector<double> O(p.seq_q * d), s(p.seq_k);
  for (std::size_t i = 0; i < p.seq_q; ++i) {
    const std::size_t seen = visible(p, i);
    double m = -std::numeric_limits<double>::infinity();
    for (std::size_t j = 0; j < seen; ++j) {
      double dot = 0.0;
      for (std::size_t c = 0; c < d; ++c) dot += static_cast<double>(Q[i * d + c]) * K[j * d + c];
      s[j] = dot * scale;
      m = std::max(m, s[j]);
    }
    double l = 0.0;
    double* o = &O[i * d];
    for (std::size_t j = 0; j < seen; ++j) {
      const double w = std::exp(s[j] - m);
      l += w;
      for (std::size_t c = 0; c < d; ++c) o[c] += w * V[j * d + c];
    }
    for (std::size_t c = 0; c < d && seen > 0; ++c) o[c] /= l;
  }
  return O;
}

std::vector<double> attention_reference(const Head& h) {
  const Problem p{h.seq, h.seq, h.head_dim, false,
                  static_cast<float>(1.0 / std::sqrt(static_cast<double>(h.head_dim)))};
  return attention_reference(h.Q, h.K, h.V, p);
}

KernelModel model_of_kernel(std::span<const float> Q, std::span<const float> K, std::span<const float> V,
                            std::size_t batch_heads, const Problem& head, Quant quant, bool hadamard,
                            std::uint64_t seed) {
  const std::size_t d = head.head_dim;
  KernelModel model{{Q.begin(), Q.end()}, {K.begin(), K.end()}, {V.begin(), V.end()}, {}, {}};
  if (hadamard) {
    const std::vector<float> signs = random_signs(d, seed);
    hadamard_rows(model.Q, d, signs);
    hadamard_rows(model.K, d, signs);
  }
  const std::size_t nq = head.seq_q * d, nk = head.seq_k * d;
  for (std::size_t bh = 0; bh < batch_heads; ++bh) {
    const std::span<float> q(&model.Q[bh * nq], nq), k(&model.K[bh * nk], nk), v(&model.V[bh * nk], nk);
    quantise_e4m3(q, d, quant == Quant::block ? kBlockRows : head.seq_q);
    quantise_e4m3(k, d, quant == Quant::block ? kBlockRows : head.seq_k);
    quantise_e4m3(v, d, quant == Quant::block ? kBlockRows : head.seq_k);
    const Attention a = attention_lowp(q, k, v, head, Element::e4m3, Accumulate::f32);
    model.O.insert(model.O.end(), a.O.begin(), a.O.end());
    model.L.insert(model.L.end(), a.L.begin(), a.L.end());
  }
  return model;
}

std::vector<double> reference_of_heads(std::span<const float> Q, std::span<const float> K, std::span<const float> V,
                                       std::size_t batch_heads, const Problem& head) {
  const std::size_t nq = head.seq_q * head.head_dim, nk = head.seq_k * head.head_dim;
  std::vector<double> O;
  O.reserve(batch_heads * nq);
  for (std::size_t bh = 0; bh < batch_heads; ++bh) {
    const std::vector<double> o =
        attention_reference(Q.subspan(bh * nq, nq), K.subspan(bh * nk, nk), V.subspan(bh * nk, nk), head);
    O.insert(O.end(), o.begin(), o.end());
  }
  return O;
}

Error compare_outputs(std::span<const float> O, std::span<const double> reference) {
  Error e;
  double sum = 0.0;
  for (std::size_t i = 0; i < O.size(); ++i) {
    const double diff = std::fabs(O[i] - reference[i]);
    sum += diff * diff;
    e.max_abs = std::max(e.max_abs, diff);
  }
  e.rmse = O.empty() ? 0.0 : std::sqrt(sum / static_cast<double>(O.size()));
  return e;
}

Error error_of(const Head& head, std::span<const double> reference, const Recipe& recipe, std::uint64_t seed,
               Accumulate accumulate) {
  Head h = head;
  const std::size_t d = h.head_dim;
  if (recipe.element != Element::e4m3) {
    round_to(h.Q, recipe.element);
    round_to(h.K, recipe.element);
    round_to(h.V, recipe.element);
    return compare_outputs(attention_lowp(h, recipe.element, Accumulate::f32), reference);
  }
  if (recipe.hadamard) {
    const std::vector<float> signs = random_signs(d, seed);  // one D for Q and for K
    hadamard_rows(h.Q, d, signs);
    hadamard_rows(h.K, d, signs);
  }
  if (recipe.smooth_k) subtract_token_mean(h.K, d);
  const std::size_t rows = recipe.quant == Quant::block ? kBlockRows : h.seq;
  if (recipe.round_qk) {
    quantise_e4m3(h.Q, d, rows);
    quantise_e4m3(h.K, d, rows);
  }
  if (recipe.round_v) quantise_e4m3(h.V, d, rows);
  const Element p_element = recipe.round_p ? Element::e4m3 : Element::f32;
  return compare_outputs(attention_lowp(h, p_element, accumulate), reference);
}

std::vector<Recipe> recipes() {
  return {{"fp16", Element::f16},
          {"bf16", Element::bf16},
          {"e4m3 per tensor", Element::e4m3, Quant::tensor},
          {"e4m3 per block", Element::e4m3, Quant::block},
          {"e4m3 per tensor + Hadamard", Element::e4m3, Quant::tensor, true},
          {"e4m3 per block + Hadamard", Element::e4m3, Quant::block, true},
          {"e4m3 per block + smooth K", Element::e4m3, Quant::block, false, true},
          {"e4m3 per block + smooth K + Hadamard", Element::e4m3, Quant::block, true, true}};
}

std::vector<Recipe> parts_of(const Recipe& recipe) {
  Recipe qk = recipe, v = recipe, p = recipe;
  qk.name += ": Q, K only";
  qk.round_v = qk.round_p = false;
  v.name += ": V only";
  v.round_qk = v.round_p = false;
  p.name += ": P only";
  p.round_qk = p.round_v = false;
  return {qk, v, p};
}

}  // namespace ch10::fp8
