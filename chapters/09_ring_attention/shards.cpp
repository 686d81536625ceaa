#include "chapters/09_ring_attention/shards.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include <fmt/format.h>

namespace ch09 {

namespace {

// Chunk c of `chunks` equal-as-can-be chunks of seq_len rows: the first seq_len % chunks are one
// row longer.
Chunk chunk(std::size_t seq_len, std::size_t chunks, std::size_t c) {
  const std::size_t base = seq_len / chunks, longer = seq_len % chunks;
  const std::size_t begin = c * base + std::min(c, longer);
  return {begin, begin + base + (c < longer ? 1 : 0)};
}

void check_chunks(const char* who, const std::vector<Chunk>& chunks, std::size_t seq_len) {
  for (const Chunk& c : chunks) {
    if (c.begin > c.end || c.end > seq_len) {
      throw std::invalid_argument(
          fmt::format("{}: chunk {}..{} is not within the {} rows", who, c.begin, c.end, seq_len));
    }
  }
}

// Calls f(b, h, i, row) for every row i of `chunks` in every head of a [batch, heads, ...] tensor,
// `row` being its place in the shard (the chunks' rows, in order, concatenated).
template <class F>
void for_each_shard_row(std::size_t batch, std::size_t heads, const std::vector<Chunk>& chunks, F&& f) {
  for (std::size_t b = 0; b < batch; ++b) {
    for (std::size_t h = 0; h < heads; ++h) {
      std::size_t row = 0;
      for (const Chunk& c : chunks) {
        for (std::size_t i = c.begin; i < c.end; ++i, ++row) f(b, h, i, row);
      }
    }
  }
}

}  // namespace

Layout parse_layout(std::string_view name) {
  if (name == "contiguous") return Layout::contiguous;
  if (name == "zigzag") return Layout::zigzag;
  throw std::invalid_argument(fmt::format("--layout {}: give contiguous or zigzag", name));
}

std::vector<Chunk> chunks_of_rank(std::size_t seq_len, std::size_t ranks, std::size_t rank, Layout layout) {
  if (ranks == 0 || rank >= ranks) {
    throw std::invalid_argument(fmt::format("chunks_of_rank: rank {} of {}: give 0 <= rank < ranks", rank, ranks));
  }
  if (layout == Layout::contiguous) return {chunk(seq_len, ranks, rank)};
  return {chunk(seq_len, 2 * ranks, rank), chunk(seq_len, 2 * ranks, 2 * ranks - 1 - rank)};
}

std::size_t owner_at_step(std::size_t rank, std::size_t step, std::size_t ranks) {
  if (ranks == 0 || rank >= ranks) {
    throw std::invalid_argument(fmt::format("owner_at_step: rank {} of {}: give 0 <= rank < ranks", rank, ranks));
  }
  return (rank + ranks - step % ranks) % ranks;
}

std::size_t shard_rows(const std::vector<Chunk>& chunks) {
  std::size_t rows = 0;
  for (const Chunk& c : chunks) rows += c.size();
  return rows;
}

fa::Tensor4<float> take_rows(const fa::Tensor4<float>& x, const std::vector<Chunk>& chunks) {
  const fa::Shape4& s = x.shape;
  check_chunks("take_rows", chunks, s.seq_len);
  fa::Tensor4<float> shard(fa::Shape4{s.batch, s.heads, shard_rows(chunks), s.head_dim});
  const auto in = x.view();
  auto out = shard.view();
  for_each_shard_row(s.batch, s.heads, chunks, [&](std::size_t b, std::size_t h, std::size_t i, std::size_t row) {
    std::ranges::copy(in.head(b, h).row(i), out.head(b, h).row(row).begin());
  });
  return shard;
}

void put_rows(fa::Tensor4<float>& x, const fa::Tensor4<float>& shard, const std::vector<Chunk>& chunks) {
  const fa::Shape4& s = x.shape;
  check_chunks("put_rows", chunks, s.seq_len);
  if (shard.shape != fa::Shape4{s.batch, s.heads, shard_rows(chunks), s.head_dim}) {
    throw std::invalid_argument(fmt::format("put_rows: a shard {} does not hold the {} rows of its chunks of {}",
                                            shard.shape.str(), shard_rows(chunks), s.str()));
  }
  const auto in = shard.view();
  auto out = x.view();
  for_each_shard_row(s.batch, s.heads, chunks, [&](std::size_t b, std::size_t h, std::size_t i, std::size_t row) {
    std::ranges::copy(in.head(b, h).row(row), out.head(b, h).row(i).begin());
  });
}

void put_rows(std::vector<float>& L, std::size_t rows_per_head, const std::vector<float>& shard,
              const std::vector<Chunk>& chunks) {
  check_chunks("put_rows", chunks, rows_per_head);
  const std::size_t n = shard_rows(chunks);
  if (rows_per_head == 0 || L.size() % rows_per_head != 0 || shard.size() != L.size() / rows_per_head * n) {
    throw std::invalid_argument(
        fmt::format("put_rows: {} values of L do not fit {} rows per head, or the shard's {} "
                    "do not fit its {} rows",
                    L.size(), rows_per_head, shard.size(), n));
  }
  for_each_shard_row(1, L.size() / rows_per_head, chunks,
                     [&](std::size_t, std::size_t head, std::size_t i, std::size_t row) {
                       L[head * rows_per_head + i] = shard[head * n + row];
                     });
}

Visible visible(const Chunk& q, const Chunk& k, bool causal) {
  if (q.size() == 0 || k.size() == 0) return Visible::none;
  if (!causal) return Visible::all;
  if (q == k) return Visible::diagonal;
  if (k.end <= q.begin) return Visible::all;   // every key before the first query
  if (k.begin >= q.end) return Visible::none;  // every key after the last query
  throw std::logic_error("visible: chunks that overlap without being equal");
}

std::vector<double> pairs_per_rank(std::size_t seq_len, std::size_t ranks, Layout layout, bool causal) {
  std::vector<double> work(ranks, 0.0);
  for (std::size_t r = 0; r < ranks; ++r) {
    for (const Chunk& q : chunks_of_rank(seq_len, ranks, r, layout)) {
      // Query i sees i + 1 keys under the mask, seq_len without it.
      for (std::size_t i = q.begin; i < q.end; ++i) work[r] += static_cast<double>(causal ? i + 1 : seq_len);
    }
  }
  return work;
}

double imbalance(const std::vector<double>& work) {
  const double total = std::accumulate(work.begin(), work.end(), 0.0);
  if (work.empty() || total <= 0.0) return 0.0;
  return *std::ranges::max_element(work) / (total / static_cast<double>(work.size()));
}

}  // namespace ch09
