#include "chapters/08_decoding/lab/vs_dense.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <stdexcept>

#include <fmt/format.h>

#include "chapters/03_online_weighted_sum/attention.h"
#include "chapters/04_naive_attention/lab/vs_chapter_03.h"
#include "chapters/05_flash_attention_2/flash_attention_2.h"
#include "chapters/05_flash_attention_2/lab/vs_chapter_04.h"
#include "chapters/06_tensor_cores/lab/error_budget.h"
#include "chapters/06_tensor_cores/tensor_cores.h"
#include "common/program.h"
#include "common/tolerance.h"

namespace ch08 {

namespace {

bool is_16_bit(CacheType t) { return t != CacheType::float32; }

ch06::ElementType element_of(CacheType t) {
  return t == CacheType::bf16 ? ch06::ElementType::bf16 : ch06::ElementType::fp16;
}

// x as the kernel sees it: rounded to a 16-bit cache type, unchanged for float32.
fa::Tensor4<float> as_cache_type(const fa::Tensor4<float>& x, CacheType t, std::string_view name) {
  return is_16_bit(t) ? ch06::round_to(x, element_of(t), name) : x;
}

// K [batch, kv_heads, seq, d] with K/V head g repeated for query heads g * group ... g * group +
// group - 1, its first `len` rows of batch entry `b` only: [1, heads, len, d].
fa::Tensor4<float> repeat_heads(const fa::Tensor4<float>& K, std::size_t b, std::size_t heads, std::size_t len) {
  const fa::Shape4& s = K.shape;
  fa::Tensor4<float> out(fa::Shape4{1, heads, len, s.head_dim});
  const auto in = K.view();
  auto o = out.view();
  for (std::size_t h = 0; h < heads; ++h) {
    for (std::size_t j = 0; j < len; ++j) {
      for (std::size_t d = 0; d < s.head_dim; ++d) o(0, h, j, d) = in(b, h / (heads / s.heads), j, d);
    }
  }
  return out;
}

// d |scale| |q_i| max_j |k_j| for every row of Q [1, heads, seq_q, d] against K [1, heads, n, d].
std::vector<double> score_terms(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, double scale) {
  const fa::Shape4& qs = Q.shape;
  std::vector<double> terms;
  for (std::size_t h = 0; h < qs.heads; ++h) {
    double k_max = 0.0;
    for (std::size_t j = 0; j < K.shape.seq_len; ++j) {
      double k2 = 0.0;
      for (float x : K.view().head(0, h).row(j)) k2 += static_cast<double>(x) * x;
      k_max = std::max(k_max, std::sqrt(k2));
    }
    for (std::size_t i = 0; i < qs.seq_len; ++i) {
      double q2 = 0.0;
      for (float x : Q.view().head(0, h).row(i)) q2 += static_cast<double>(x) * x;
      terms.push_back(static_cast<double>(qs.head_dim) * std::fabs(scale) * std::sqrt(q2) * k_max);
    }
  }
  return terms;
}

// The row of L closest to its bound: fills check.L_error and check.L_bound; false when a row is past
// its bound.
bool check_L(std::span<const float> L, std::span<const float> L_ref, std::span<const double> bounds,
             SequenceCheck& check) {
  double worst_ratio = -1.0;
  bool pass = true;
  for (std::size_t r = 0; r < L.size(); ++r) {
    const double error = fa::abs_difference(L[r], L_ref[r]);
    const bool row_pass = fa::within(error, bounds[r]);  // (a bound that is not finite bounds nothing)
    // A row that fails comes first, whatever its ratio (error / inf is 0): the figures printed for
    // an OUTSIDE sequence are then those of a row that failed.
    const double ratio = !row_pass ? INFINITY : error == 0.0 ? 0.0 : bounds[r] > 0.0 ? error / bounds[r] : INFINITY;
    pass = pass && row_pass;
    if (ratio > worst_ratio) {
      worst_ratio = ratio;
      check.L_error = error;
      check.L_bound = bounds[r];
    }
  }
  return pass;
}

double ratio(double error, double bound) { return error == 0.0 ? 0.0 : bound > 0.0 ? error / bound : INFINITY; }

}  // namespace

DenseSequence dense_sequence(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                             std::size_t b, std::size_t len) {
  const fa::Shape4& q = Q.shape;
  if (K.shape != V.shape || K.shape.batch != q.batch || K.shape.head_dim != q.head_dim || K.shape.heads == 0 ||
      q.heads % K.shape.heads != 0 || b >= q.batch || len == 0 || len > K.shape.seq_len) {
    throw std::invalid_argument(fmt::format(
        "dense_sequence: Q {}, K {}, V {}, sequence {} of length {}: K and V must be one shape [batch, kv_heads, "
        "seq_len_k, head_dim] with Q's batch and head_dim and kv_heads dividing heads, 1 <= length <= seq_len_k",
        q.str(), K.shape.str(), V.shape.str(), b, len));
  }
  fa::Tensor4<float> Q_b(fa::Shape4{1, q.heads, q.seq_len, q.head_dim});
  const std::size_t per_b = q.heads * q.seq_len * q.head_dim;
  std::copy_n(Q.values.begin() + static_cast<std::ptrdiff_t>(b * per_b), per_b, Q_b.values.begin());
  return {std::move(Q_b), repeat_heads(K, b, q.heads, len), repeat_heads(V, b, q.heads, len)};
}

double L_bound(double L_ref, double L_magnitude, std::size_t keys, int splits, double score_term) {
  if (!std::isfinite(L_ref)) return 0.0;
  if (!std::isfinite(L_magnitude)) return INFINITY;  // checks nothing: check_L fails the row
  return kLUnitRoundoff * (3.0 * (L_magnitude + static_cast<double>(keys) + 1.0) + splits) +
         2.0 * kLUnitRoundoff * score_term;
}

bool Agreement::pass() const {
  return std::all_of(sequences.begin(), sequences.end(), [](const SequenceCheck& s) { return s.pass; });
}

const SequenceCheck& Agreement::worst() const {
  if (sequences.empty()) throw std::logic_error("Agreement::worst: no sequence was checked");
  const auto key = [](const SequenceCheck& s) -> double {  // (the first sequence that fails, where one does)
    if (!s.pass) return INFINITY;
    return std::max(ratio(s.O.nonfinite_mismatch ? INFINITY : s.O.rel_l2, s.O_bound), ratio(s.L_error, s.L_bound));
  };
  return *std::max_element(sequences.begin(), sequences.end(),
                           [&](const SequenceCheck& a, const SequenceCheck& b) { return key(a) < key(b); });
}

Agreement check_against_dense(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                              const std::vector<int>& lengths, const Options& options, int splits,
                              const fa::KernelRun& decoded, fa::Device device) {
  const fa::Shape4& q = Q.shape;
  if (lengths.size() != q.batch || decoded.O.shape != q || decoded.L.size() != q.batch * q.heads * q.seq_len) {
    throw std::invalid_argument(
        fmt::format("check_against_dense: {} lengths, decoded O {} and {} values of L for Q {}; they must match",
                    lengths.size(), decoded.O.shape.str(), decoded.L.size(), q.str()));
  }
  const double scale = options.scale.value_or(fa::default_scale(q.head_dim));
  Agreement agreement{is_16_bit(options.cache_type) ? "ch06" : "ch05", {}};
  const std::size_t O_per_b = q.heads * q.seq_len * q.head_dim, L_per_b = q.heads * q.seq_len;
  for (std::size_t b = 0; b < q.batch; ++b) {
    const auto len = static_cast<std::size_t>(lengths[b]);
    const std::span<const float> O(decoded.O.values.data() + b * O_per_b, O_per_b);
    const std::span<const float> L(decoded.L.data() + b * L_per_b, L_per_b);
    SequenceCheck check{b, len};
    if (len == 0) {  // no key at all: zeros and -inf, exactly
      check.O = fa::compare(O, std::vector<float>(O_per_b, 0.0f));
      check.O_bound = 0.0;
      const bool L_pass = check_L(L, std::vector<float>(L_per_b, -INFINITY), std::vector<double>(L_per_b, 0.0), check);
      check.pass = fa::agrees(check.O, 0.0) && L_pass;
      agreement.sequences.push_back(check);
      continue;
    }
    DenseSequence dense = dense_sequence(Q, K, V, b, len);
    dense.Q = as_cache_type(dense.Q, options.cache_type, "Q");
    dense.K = as_cache_type(dense.K, options.cache_type, "K");
    dense.V = as_cache_type(dense.V, options.cache_type, "V");
    fa::KernelRun ref;
    std::vector<double> extra_L(L_per_b, 0.0);
    if (is_16_bit(options.cache_type)) {
      const ch06::ElementType element = element_of(options.cache_type);
      // On a GPU older than sm_80 (a T4) chapter 06 runs on the CPU: the same reference, slower.
      ref = ch06::tensor_core_attention(dense.Q, dense.K, dense.V,
                                        {.scale = options.scale, .causal = options.causal, .element = element},
                                        ch06::reference_device(device));
      check.O_bound = ch06::error_budget(dense.Q, dense.K, dense.V, scale, options.causal, element).bound;
      extra_L = ch06::L_bounds(dense.Q, dense.K, scale, ref.L);  // chapter 06's own distance from chapter 05
    } else {
      ref = ch05::flash_attention_2(dense.Q, dense.K, dense.V, {.scale = options.scale, .causal = options.causal},
                                    device);
      check.O_bound =
          ch04::agreement_bound(dense.Q, dense.K, dense.V, {.scale = options.scale, .causal = options.causal}).bound;
    }
    check.O = fa::compare(O, ref.O.values);
    const std::vector<double> terms = score_terms(dense.Q, dense.K, scale);
    const std::vector<double> magnitudes = ch05::L_magnitudes(dense.Q, dense.K, scale);
    std::vector<double> bounds(L_per_b);
    for (std::size_t r = 0; r < L_per_b; ++r) {
      const std::size_t keys = fa::causal_visible_keys(r % q.seq_len, q.seq_len, len);
      bounds[r] = L_bound(ref.L[r], magnitudes[r], options.causal ? keys : len, splits, terms[r]) + extra_L[r];
    }
    const bool L_pass = check_L(L, ref.L, bounds, check);
    check.pass = fa::within(check.O, check.O_bound) && L_pass;
    agreement.sequences.push_back(check);
  }
  return agreement;
}

Agreement check_decode_loop(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                            std::size_t steps, const Options& options, int splits, const fa::KernelRun& decoded,
                            fa::Device device) {
  const fa::Shape4& q = Q.shape;
  const std::size_t n = q.seq_len;
  if (K.shape != V.shape || K.shape.seq_len != n || K.shape.batch != q.batch || steps == 0 || steps > n ||
      decoded.O.shape != fa::Shape4{q.batch, q.heads, steps, q.head_dim} ||
      decoded.L.size() != q.batch * q.heads * steps) {
    throw std::invalid_argument(fmt::format(
        "check_decode_loop: Q {}, K {}, V {}, {} steps, decoded O {}: Q needs a query per token of K and V, and O "
        "[batch, heads, steps, head_dim]",
        q.str(), K.shape.str(), V.shape.str(), steps, decoded.O.shape.str()));
  }
  const double scale = options.scale.value_or(fa::default_scale(q.head_dim));
  // The whole sequences, dense: K and V repeated per group, all as the cache type rounds them.
  const fa::Tensor4<float> Q_all = as_cache_type(Q, options.cache_type, "Q");
  fa::Tensor4<float> K_all(fa::Shape4{q.batch, q.heads, n, q.head_dim}), V_all(K_all.shape);
  for (std::size_t b = 0; b < q.batch; ++b) {
    const DenseSequence dense = dense_sequence(Q, K, V, b, n);
    std::copy(dense.K.values.begin(), dense.K.values.end(), K_all.values.begin() + b * dense.K.values.size());
    std::copy(dense.V.values.begin(), dense.V.values.end(), V_all.values.begin() + b * dense.V.values.size());
  }
  K_all = as_cache_type(K_all, options.cache_type, "K");
  V_all = as_cache_type(V_all, options.cache_type, "V");
  const ch05::Result ref =
      ch05::flash_attention_2(Q_all, K_all, V_all, {.scale = options.scale, .causal = true}, device);

  // The compared rows: the last `steps` of every (sequence, head).
  std::vector<std::size_t> rows;
  for (std::size_t bh = 0; bh < q.batch * q.heads; ++bh) {
    for (std::size_t i = n - steps; i < n; ++i) rows.push_back(bh * n + i);
  }
  // O's bound: the plain float32 evaluation's error against the plain float64 one on (a sample of)
  // those rows, as chapter 04's agreement_bound (neither is a stage under test).
  const std::vector<std::size_t> sample = [&] {
    std::vector<std::size_t> picked;
    for (std::size_t k : fa::sample_rows(rows.size(), ch04::kPlainRows)) picked.push_back(rows[k]);
    return picked;
  }();
  const ch03::AttentionOptions reference_options{.scale = options.scale, .causal = true};
  const double plain_error =
      fa::compare(ch03::plain_attention_rows<float>(Q_all, K_all, V_all, reference_options, sample).O,
                  ch03::plain_attention_rows<double>(Q_all, K_all, V_all, reference_options, sample).O)
          .rel_l2;
  std::vector<double> terms, magnitudes;
  for (std::size_t b = 0; b < q.batch; ++b) {
    const DenseSequence one{dense_sequence(Q_all, K_all, V_all, b, n)};
    const std::vector<double> t = score_terms(one.Q, one.K, scale);
    const std::vector<double> m = ch05::L_magnitudes(one.Q, one.K, scale);
    terms.insert(terms.end(), t.begin(), t.end());
    magnitudes.insert(magnitudes.end(), m.begin(), m.end());
  }

  Agreement agreement{"ch05 causal", {}};
  const std::size_t d = q.head_dim;
  for (std::size_t b = 0; b < q.batch; ++b) {
    std::vector<float> O, O_ref, L, L_ref;
    std::vector<double> bounds;
    for (std::size_t h = 0; h < q.heads; ++h) {
      for (std::size_t t = 0; t < steps; ++t) {
        const std::size_t row = (b * q.heads + h) * n + n - steps + t, out = (b * q.heads + h) * steps + t;
        O.insert(O.end(), decoded.O.values.begin() + out * d, decoded.O.values.begin() + (out + 1) * d);
        O_ref.insert(O_ref.end(), ref.O.values.begin() + row * d, ref.O.values.begin() + (row + 1) * d);
        L.push_back(decoded.L[out]);
        L_ref.push_back(ref.L[row]);
        bounds.push_back(L_bound(ref.L[row], magnitudes[row], n - steps + t + 1, splits, terms[row]));
      }
    }
    SequenceCheck check{b, n};
    check.O = fa::compare(O, O_ref);
    check.O_bound = fa::bound_from_plain(plain_error);
    const bool L_pass = check_L(L, L_ref, bounds, check);
    check.pass = fa::within(check.O, check.O_bound) && L_pass;
    agreement.sequences.push_back(check);
  }
  return agreement;
}

}  // namespace ch08
