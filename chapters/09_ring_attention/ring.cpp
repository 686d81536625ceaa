#include "chapters/09_ring_attention/ring.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "chapters/05_flash_attention_2/flash_attention_2.h"
#include "chapters/06_tensor_cores/tensor_cores.h"

namespace ch09 {

namespace {

ch06::ElementType element_of(ch08::CacheType t) {
  return t == ch08::CacheType::bf16 ? ch06::ElementType::bf16 : ch06::ElementType::fp16;
}

// The chunks of a shard in the shard's own rows: chunk n of `chunks` is rows offset .. offset +
// size of the shard tensor.
std::vector<Chunk> in_shard(const std::vector<Chunk>& chunks) {
  std::vector<Chunk> local;
  std::size_t offset = 0;
  for (const Chunk& c : chunks) {
    local.push_back({offset, offset + c.size()});
    offset += c.size();
  }
  return local;
}

}  // namespace

void check_problem(const fa::AttentionShape& shape, std::size_t ranks, const Options& options) {
  if (shape.seq_len_q != shape.seq_len_k) {
    throw std::invalid_argument(fmt::format(
        "ring attention here is self-attention: Q has {} rows and K, V have {}; give --seq-q equal to --seq-k "
        "(or --seq), or files whose seq_len agree",
        shape.seq_len_q, shape.seq_len_k));
  }
  if (std::ranges::find(kHeadDims, static_cast<int>(shape.head_dim)) == kHeadDims.end() || shape.head_dim > 128) {
    throw std::invalid_argument(
        fmt::format("ring attention: head_dim {} is not compiled; give 64 or 128 (the head "
                    "dims of chapter 06's kernel and chapter 08's combine)",
                    shape.head_dim));
  }
  if (ranks == 0) throw std::invalid_argument("ring attention: give at least one rank");
  if (options.element == ch08::CacheType::float32) {
    (void)ch05::check_problem(shape, {options.scale, options.causal});
  } else {
    (void)ch06::check_problem(shape, {options.scale, options.causal, {128, 64}, element_of(options.element)});
  }
}

KVShard kv_shard(const fa::Tensor4<float>& K, const fa::Tensor4<float>& V, std::size_t ranks, std::size_t rank,
                 Layout layout) {
  std::vector<Chunk> chunks = chunks_of_rank(K.shape.seq_len, ranks, rank, layout);
  fa::Tensor4<float> K_shard = take_rows(K, chunks), V_shard = take_rows(V, chunks);
  return {rank, std::move(chunks), std::move(K_shard), std::move(V_shard)};
}

fa::KernelRun partial_attention(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                                bool causal, const Options& options, fa::Device device) {
  if (options.element == ch08::CacheType::float32) {
    return ch05::flash_attention_2(Q, K, V, {options.scale, causal}, device);
  }
  return ch06::tensor_core_attention(Q, K, V, {options.scale, causal, {128, 64}, element_of(options.element)}, device);
}

RankState::RankState(fa::Tensor4<float> Q, std::vector<Chunk> chunks, Options options, fa::Device device)
    : chunks_(std::move(chunks)), shape_(Q.shape), options_(options), device_(device) {
  if (Q.shape.seq_len != shard_rows(chunks_)) {
    throw std::invalid_argument(
        fmt::format("RankState: Q {} does not hold the {} rows of its chunks", Q.shape.str(), shard_rows(chunks_)));
  }
  for (const Chunk& local : in_shard(chunks_)) Q_.push_back(take_rows(Q, {local}));
  running_.resize(chunks_.size());
}

int RankState::fold(const KVShard& kv) {
  if (kv.K.shape != kv.V.shape || kv.K.shape.seq_len != shard_rows(kv.chunks) ||
      kv.K.shape.head_dim != shape_.head_dim || kv.K.shape.batch != shape_.batch || kv.K.shape.heads != shape_.heads) {
    throw std::invalid_argument(fmt::format("RankState::fold: K {} and V {} of {} rows do not fit Q {}",
                                            kv.K.shape.str(), kv.V.shape.str(), shard_rows(kv.chunks), shape_.str()));
  }
  const std::vector<Chunk> kv_local = in_shard(kv.chunks);
  int partials = 0;
  for (std::size_t q = 0; q < chunks_.size(); ++q) {
    for (std::size_t k = 0; k < kv.chunks.size(); ++k) {
      const Visible seen = visible(chunks_[q], kv.chunks[k], options_.causal);
      if (seen == Visible::none) continue;
      // The partial (O_i, L_i) of this query chunk over this key chunk: chapter 05's (or 06's)
      // kernel, with the causal mask only on the diagonal, where the chunks are the same rows.
      const fa::KernelRun part =
          partial_attention(Q_[q], take_rows(kv.K, {kv_local[k]}), take_rows(kv.V, {kv_local[k]}),
                            seen == Visible::diagonal, options_, device_);
      // ... folded into the running (O, L) with chapter 08's combine, chapter 02's rule (m_new, m_safe,
      // rescale, l, acc).
      const ch08::Partials partial{1, static_cast<int>(part.L.size()), static_cast<int>(shape_.head_dim), part.O.values,
                                   part.L};
      running_[q] = ch08::combine_partials(partial, running_[q] ? &*running_[q] : nullptr, device_);
      ++partials;
    }
  }
  return partials;
}

fa::Tensor4<float> RankState::O() const {
  fa::Tensor4<float> O(shape_);  // zeros: a row that saw no key
  std::size_t offset = 0;
  for (std::size_t q = 0; q < chunks_.size(); ++q) {
    const std::size_t n = chunks_[q].size();
    if (running_[q]) {
      const fa::Tensor4<float> chunk(fa::Shape4{shape_.batch, shape_.heads, n, shape_.head_dim}, running_[q]->O);
      put_rows(O, chunk, {{offset, offset + n}});
    }
    offset += n;
  }
  return O;
}

std::vector<float> RankState::L() const {
  std::vector<float> L(shape_.batch * shape_.heads * shape_.seq_len, -std::numeric_limits<float>::infinity());
  std::size_t offset = 0;
  for (std::size_t q = 0; q < chunks_.size(); ++q) {
    const std::size_t n = chunks_[q].size();
    if (running_[q]) put_rows(L, shape_.seq_len, running_[q]->L, {{offset, offset + n}});
    offset += n;
  }
  return L;
}

RingRun ring_in_one_process(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                            std::size_t ranks, Layout layout, const Options& options, fa::Device device) {
  check_problem(fa::check_attention_shapes(Q.shape, K.shape, V.shape), ranks, options);
  const std::size_t seq_len = Q.shape.seq_len;
  std::vector<RankState> states;
  std::vector<KVShard> shards;
  for (std::size_t r = 0; r < ranks; ++r) {
    const std::vector<Chunk> chunks = chunks_of_rank(seq_len, ranks, r, layout);
    states.emplace_back(take_rows(Q, chunks), chunks, options, device);
    shards.push_back(kv_shard(K, V, ranks, r, layout));
  }
  for (std::size_t step = 0; step < ranks; ++step) {
    for (std::size_t r = 0; r < ranks; ++r) (void)states[r].fold(shards[owner_at_step(r, step, ranks)]);
  }
  RingRun run{fa::Tensor4<float>(Q.shape), std::vector<float>(Q.shape.batch * Q.shape.heads * seq_len)};
  for (std::size_t r = 0; r < ranks; ++r) {
    const std::vector<Chunk> chunks = chunks_of_rank(seq_len, ranks, r, layout);
    put_rows(run.O, states[r].O(), chunks);
    put_rows(run.L, seq_len, states[r].L(), chunks);
  }
  return run;
}

}  // namespace ch09
