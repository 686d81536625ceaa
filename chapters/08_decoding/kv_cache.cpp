// Chapter 08's KV caches on the host: the dense cache as one page per sequence, the paged cache with
// its pages shuffled in the pool, and one token appended (decoding.h).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "chapters/08_decoding/decoding.h"

namespace ch08 {

namespace {

// Checks K and V of a dense cache and the lengths (empty: every sequence full); returns the lengths.
std::vector<int> checked_lengths(const char* who, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                                 std::vector<int> lengths) {
  if (K.shape != V.shape || K.shape.size() == 0) {
    throw std::invalid_argument(
        fmt::format("{}: K {} and V {} must have one shape, [batch, kv_heads, seq_len_k, head_dim], none of it 0", who,
                    K.shape.str(), V.shape.str()));
  }
  if (K.shape.seq_len > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    throw std::invalid_argument(
        fmt::format("{}: seq_len_k {} is more than the int32 lengths can say", who, K.shape.seq_len));
  }
  if (lengths.empty()) lengths.assign(K.shape.batch, static_cast<int>(K.shape.seq_len));
  if (lengths.size() != K.shape.batch) {
    throw std::invalid_argument(fmt::format("{}: {} cache lengths for a batch of {}; give one per sequence", who,
                                            lengths.size(), K.shape.batch));
  }
  for (std::size_t b = 0; b < lengths.size(); ++b) {
    if (lengths[b] < 0 || static_cast<std::size_t>(lengths[b]) > K.shape.seq_len) {
      throw std::invalid_argument(fmt::format("{}: the length of sequence {} is {}; give 0 .. seq_len_k = {}", who, b,
                                              lengths[b], K.shape.seq_len));
    }
  }
  return lengths;
}

// 0 .. n-1 in an order drawn from seed: Fisher and Yates's shuffle on std::mt19937_64, whose numbers
// the standard fixes (unlike its distributions'), so every standard library draws the same order.
std::vector<int> shuffled(std::size_t n, std::uint64_t seed) {
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 engine(seed);
  for (std::size_t i = n; i > 1; --i) std::swap(order[i - 1], order[engine() % i]);
  return order;
}

}  // namespace

KVCache dense_cache(const fa::Tensor4<float>& K, const fa::Tensor4<float>& V, std::vector<int> cache_seqlens) {
  std::vector<int> lengths = checked_lengths("dense_cache", K, V, std::move(cache_seqlens));
  std::vector<int> table(K.shape.batch);
  std::iota(table.begin(), table.end(), 0);  // sequence b is page b: [batch, kv_heads, seq_len_k, head_dim] as it is
  return {K, V, std::move(table), 1, std::move(lengths)};
}

KVCache paged_cache(const fa::Tensor4<float>& K, const fa::Tensor4<float>& V, std::vector<int> cache_seqlens,
                    std::size_t page_size, std::uint64_t shuffle_seed, std::size_t spare_pages) {
  std::vector<int> lengths = checked_lengths("paged_cache", K, V, std::move(cache_seqlens));
  if (page_size == 0 || page_size > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    throw std::invalid_argument(fmt::format("paged_cache: page_size {} is not accepted; give 1 .. {}", page_size,
                                            std::numeric_limits<int>::max()));
  }
  const fa::Shape4& s = K.shape;
  const std::size_t pages_per_seq = (s.seq_len + page_size - 1) / page_size;
  const std::size_t pages = s.batch * pages_per_seq + spare_pages;
  if (pages > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    throw std::invalid_argument(
        fmt::format("paged_cache: {} pages are more than the int32 block table can name", pages));
  }
  const std::vector<int> order = shuffled(pages, shuffle_seed);
  std::vector<int> table(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(s.batch * pages_per_seq));

  const fa::Shape4 pool_shape{pages, s.heads, page_size, s.head_dim};
  const float nan = std::numeric_limits<float>::quiet_NaN();
  KVCache cache{fa::Tensor4<float>(pool_shape, nan), fa::Tensor4<float>(pool_shape, nan), std::move(table),
                pages_per_seq, std::move(lengths)};
  const auto K_in = K.view(), V_in = V.view();
  auto K_pool = cache.K.view(), V_pool = cache.V.view();
  for (std::size_t b = 0; b < s.batch; ++b) {
    for (std::size_t j = 0; j < static_cast<std::size_t>(cache.cache_seqlens[b]); ++j) {
      const auto page = static_cast<std::size_t>(cache.block_table[b * pages_per_seq + j / page_size]);
      for (std::size_t g = 0; g < s.heads; ++g) {
        for (std::size_t d = 0; d < s.head_dim; ++d) {
          K_pool(page, g, j % page_size, d) = K_in(b, g, j, d);
          V_pool(page, g, j % page_size, d) = V_in(b, g, j, d);
        }
      }
    }
  }
  return cache;
}

void append_token(KVCache& cache, std::size_t b, const std::vector<float>& k_row, const std::vector<float>& v_row) {
  const fa::Shape4& s = cache.K.shape;
  if (b >= cache.batch()) {
    throw std::invalid_argument(fmt::format("append_token: sequence {} of a batch of {}", b, cache.batch()));
  }
  if (k_row.size() != s.heads * s.head_dim || v_row.size() != k_row.size()) {
    throw std::invalid_argument(
        fmt::format("append_token: rows of {} and {} values; give kv_heads x head_dim = {} each", k_row.size(),
                    v_row.size(), s.heads * s.head_dim));
  }
  const auto j = static_cast<std::size_t>(cache.cache_seqlens[b]);
  if (j >= cache.capacity()) {
    throw std::invalid_argument(
        fmt::format("append_token: sequence {} is full ({} keys, the capacity of its pages)", b, cache.capacity()));
  }
  const int page_entry = cache.block_table[b * cache.pages_per_seq + j / s.seq_len];
  if (page_entry < 0 || static_cast<std::size_t>(page_entry) >= s.batch) {
    throw std::invalid_argument(
        fmt::format("append_token: block_table[{}][{}] = {} is not a page of the pool (0 .. {})", b, j / s.seq_len,
                    page_entry, s.batch - 1));
  }
  const auto page = static_cast<std::size_t>(page_entry);
  auto K_pool = cache.K.view(), V_pool = cache.V.view();
  for (std::size_t g = 0; g < s.heads; ++g) {
    for (std::size_t d = 0; d < s.head_dim; ++d) {
      K_pool(page, g, j % s.seq_len, d) = k_row[g * s.head_dim + d];
      V_pool(page, g, j % s.seq_len, d) = v_row[g * s.head_dim + d];
    }
  }
  ++cache.cache_seqlens[b];
}

LoopResult decode_loop(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                       std::size_t steps, std::size_t page_size, std::uint64_t shuffle_seed, const Options& options,
                       fa::Device device) {
  const fa::Shape4& q = Q.shape;
  const std::size_t n = K.shape.seq_len;
  if (K.shape != V.shape || q.batch != K.shape.batch || q.seq_len != n || q.head_dim != K.shape.head_dim ||
      steps == 0 || steps > n) {
    throw std::invalid_argument(
        fmt::format("decode_loop: Q {}, K {}, V {} and {} steps: Q needs a query for each of the n tokens of K and V "
                    "([batch, kv_heads, n, head_dim], one shape), and 1 <= steps <= n",
                    q.str(), K.shape.str(), V.shape.str(), steps));
  }
  const std::size_t prompt = n - steps;
  const std::vector<int> lengths(q.batch, static_cast<int>(prompt));
  KVCache cache;
  if (page_size == 0) {
    fa::Tensor4<float> K_prompt = K, V_prompt = V;  // the tokens still to come are NaN until appended
    auto k = K_prompt.view(), v = V_prompt.view();
    for (std::size_t b = 0; b < q.batch; ++b) {
      for (std::size_t g = 0; g < K.shape.heads; ++g) {
        for (std::size_t j = prompt; j < n; ++j) {
          for (std::size_t d = 0; d < q.head_dim; ++d) k(b, g, j, d) = v(b, g, j, d) = std::nanf("");
        }
      }
    }
    cache = dense_cache(K_prompt, V_prompt, lengths);
  } else {
    cache = paged_cache(K, V, lengths, page_size, shuffle_seed);
  }

  LoopResult out;
  out.O = fa::Tensor4<float>(fa::Shape4{q.batch, q.heads, steps, q.head_dim});
  out.L.assign(q.batch * q.heads * steps, 0.0f);
  const auto K_in = K.view(), V_in = V.view(), Q_in = Q.view();
  auto O = out.O.view();
  for (std::size_t t = 0; t < steps; ++t) {
    const std::size_t token = prompt + t;
    fa::Tensor4<float> Q_t(fa::Shape4{q.batch, q.heads, 1, q.head_dim});
    for (std::size_t b = 0; b < q.batch; ++b) {
      std::vector<float> k_row, v_row;
      for (std::size_t g = 0; g < K.shape.heads; ++g) {
        for (std::size_t d = 0; d < q.head_dim; ++d) {
          k_row.push_back(K_in(b, g, token, d));
          v_row.push_back(V_in(b, g, token, d));
        }
      }
      append_token(cache, b, k_row, v_row);
      for (std::size_t h = 0; h < q.heads; ++h) {
        for (std::size_t d = 0; d < q.head_dim; ++d) Q_t.view()(b, h, 0, d) = Q_in(b, h, token, d);
      }
    }
    const Result step = decode_attention(Q_t, cache, options, device);
    for (std::size_t bh = 0; bh < q.batch * q.heads; ++bh) {
      for (std::size_t d = 0; d < q.head_dim; ++d)
        O(bh / q.heads, bh % q.heads, t, d) = step.O.values[bh * q.head_dim + d];
      out.L[bh * steps + t] = step.L[bh];
    }
    out.elapsed_ms += step.elapsed_ms;
    out.plans.push_back(step.plan);
  }
  return out;
}

}  // namespace ch08
