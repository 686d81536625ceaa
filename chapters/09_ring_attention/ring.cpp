#include "chapters/09_ring_attention/ring.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "chapters/05_flash_attention_2/flash_attention_2.h"
#include "chapters/06_tensor_cores/tensor_cores.h"
#include "chapters/07_backward/backward.h"

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

// The values of one chunk of a shard's L [heads, shard rows] (heads: batch x heads), in the shard's
// own rows.
std::vector<float> L_rows(const std::vector<float>& L, std::size_t shard_rows, const Chunk& local) {
  std::vector<float> rows;
  for (std::size_t head = 0; shard_rows > 0 && head < L.size() / shard_rows; ++head) {
    rows.insert(rows.end(), L.begin() + static_cast<std::ptrdiff_t>(head * shard_rows + local.begin),
                L.begin() + static_cast<std::ptrdiff_t>(head * shard_rows + local.end));
  }
  return rows;
}

// x's rows `local` += part [batch, heads, local rows, head_dim], element by element.
void add_rows(fa::Tensor4<float>& x, const fa::Tensor4<float>& part, const Chunk& local) {
  const auto in = part.view();
  auto out = x.view();
  for (std::size_t b = 0; b < x.shape.batch; ++b) {
    for (std::size_t h = 0; h < x.shape.heads; ++h) {
      for (std::size_t i = 0; i < local.size(); ++i) {
        const auto from = in.head(b, h).row(i);
        auto to = out.head(b, h).row(local.begin + i);
        for (std::size_t d = 0; d < x.shape.head_dim; ++d) to[d] += from[d];
      }
    }
  }
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

void check_backward_problem(const fa::AttentionShape& shape, std::size_t ranks, const Options& options) {
  if (options.element != ch08::CacheType::float32) {
    throw std::invalid_argument(
        fmt::format("the ring's backward runs chapter 07's kernels, float32 only: give --dtype float32, not {}",
                    ch08::to_string(options.element)));
  }
  check_problem(shape, ranks, options);
  (void)ch07::check_problem(shape, {options.scale, options.causal, ch07::DqMethod::deterministic});
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

void accumulate(KVGradients& travelling, const KVGradients& part) {
  if (travelling.owner != part.owner || travelling.dK.shape != part.dK.shape || travelling.dV.shape != part.dV.shape ||
      part.dK.shape != part.dV.shape) {
    throw std::invalid_argument(
        fmt::format("accumulate: the dK, dV of rank {}'s shard ({}) cannot take a part of rank {}'s ({})",
                    travelling.owner, travelling.dK.shape.str(), part.owner, part.dK.shape.str()));
  }
  const Chunk all_rows{0, part.dK.shape.seq_len};
  add_rows(travelling.dK, part.dK, all_rows);
  add_rows(travelling.dV, part.dV, all_rows);
}

RankBackward::RankBackward(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& O, const std::vector<float>& L,
                           const fa::Tensor4<float>& dO, std::vector<Chunk> chunks, Options options, fa::Device device)
    : chunks_(std::move(chunks)), shape_(Q.shape), options_(options), device_(device) {
  const std::size_t rows = shard_rows(chunks_);
  if (Q.shape.seq_len != rows || O.shape != Q.shape || dO.shape != Q.shape ||
      L.size() != Q.shape.batch * Q.shape.heads * rows) {
    throw std::invalid_argument(
        fmt::format("RankBackward: Q {}, O {}, dO {} and L of {} values do not hold the {} rows of its chunks",
                    Q.shape.str(), O.shape.str(), dO.shape.str(), L.size(), rows));
  }
  for (const Chunk& local : in_shard(chunks_)) {
    Q_.push_back(take_rows(Q, {local}));
    O_.push_back(take_rows(O, {local}));
    dO_.push_back(take_rows(dO, {local}));
    L_.push_back(L_rows(L, rows, local));
    dQ_.emplace_back(fa::Shape4{shape_.batch, shape_.heads, local.size(), shape_.head_dim});  // zeros
  }
}

KVGradients RankBackward::step(const KVShard& kv) {
  if (kv.K.shape != kv.V.shape || kv.K.shape.seq_len != shard_rows(kv.chunks) ||
      kv.K.shape.head_dim != shape_.head_dim || kv.K.shape.batch != shape_.batch || kv.K.shape.heads != shape_.heads) {
    throw std::invalid_argument(fmt::format("RankBackward::step: K {} and V {} of {} rows do not fit Q {}",
                                            kv.K.shape.str(), kv.V.shape.str(), shard_rows(kv.chunks), shape_.str()));
  }
  KVGradients part{kv.owner, fa::Tensor4<float>(kv.K.shape), fa::Tensor4<float>(kv.K.shape)};  // zeros
  const std::vector<Chunk> kv_local = in_shard(kv.chunks);
  for (std::size_t q = 0; q < chunks_.size(); ++q) {
    for (std::size_t k = 0; k < kv.chunks.size(); ++k) {
      const Visible seen = visible(chunks_[q], kv.chunks[k], options_.causal);
      if (seen == Visible::none) continue;
      // Line 5: chapter 07's backward on this pair, from the whole row's O and L: exactly the pair's
      // terms of dQ, dK and dV. The mask on the diagonal only, where the chunks are the same rows
      // (equal lengths: the bottom-right rule is j <= i there).
      const ch07::Gradients g = ch07::flash_attention_2_backward(
          Q_[q], take_rows(kv.K, {kv_local[k]}), take_rows(kv.V, {kv_local[k]}), O_[q], L_[q], dO_[q],
          {options_.scale, seen == Visible::diagonal, ch07::DqMethod::deterministic}, device_);
      // graded 09a: line 5's data flow: the pair's dQ kept, its dK and dV into the part at the key chunk's rows
      add_rows(dQ_[q], g.dQ, {0, chunks_[q].size()});  // kept here, in this query chunk
      add_rows(part.dK, g.dK, kv_local[k]);            // for the shard's travelling dK, dV (line 6)
      add_rows(part.dV, g.dV, kv_local[k]);
      // end graded
      ++pairs_;
    }
  }
  return part;
}

fa::Tensor4<float> RankBackward::dQ() const {
  fa::Tensor4<float> dQ(shape_);
  const std::vector<Chunk> local = in_shard(chunks_);
  for (std::size_t q = 0; q < chunks_.size(); ++q) put_rows(dQ, dQ_[q], {local[q]});
  return dQ;
}

std::vector<double> backward_sends(const fa::Shape4& full, std::size_t ranks, std::size_t rank, Layout layout) {
  std::vector<double> bytes(ranks, 0.0);
  for (std::size_t step = 0; ranks > 1 && step < ranks; ++step) {
    const std::size_t rows = shard_rows(chunks_of_rank(full.seq_len, ranks, owner_at_step(rank, step, ranks), layout));
    const double tensor = static_cast<double>(full.batch * full.heads * rows * full.head_dim * sizeof(float));
    bytes[step] = (step + 1 < ranks ? 4.0 : 2.0) * tensor;  // K, V, dK, dV; at the last step dK, dV home
  }
  return bytes;
}

RingBackwardRun ring_backward_in_one_process(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K,
                                             const fa::Tensor4<float>& V, const fa::Tensor4<float>& O,
                                             const std::vector<float>& L, const fa::Tensor4<float>& dO,
                                             std::size_t ranks, Layout layout, const Options& options,
                                             fa::Device device) {
  check_backward_problem(fa::check_attention_shapes(Q.shape, K.shape, V.shape), ranks, options);
  const std::size_t seq_len = Q.shape.seq_len;
  if (O.shape != Q.shape || dO.shape != Q.shape || L.size() != Q.shape.batch * Q.shape.heads * seq_len) {
    throw std::invalid_argument(fmt::format("ring backward: O {}, dO {} and L of {} values do not fit Q {}",
                                            O.shape.str(), dO.shape.str(), L.size(), Q.shape.str()));
  }
  const fa::Tensor4<float> L_whole(fa::Shape4{Q.shape.batch, Q.shape.heads, seq_len, 1}, L);
  std::vector<RankBackward> states;
  std::vector<KVShard> shards;
  std::vector<std::optional<KVGradients>> travelling(ranks);  // [owner]
  for (std::size_t r = 0; r < ranks; ++r) {
    const std::vector<Chunk> chunks = chunks_of_rank(seq_len, ranks, r, layout);
    states.emplace_back(take_rows(Q, chunks), take_rows(O, chunks), take_rows(L_whole, chunks).values,
                        take_rows(dO, chunks), chunks, options, device);
    shards.push_back(kv_shard(K, V, ranks, r, layout));
  }
  RingBackwardRun run{fa::Tensor4<float>(Q.shape), fa::Tensor4<float>(K.shape), fa::Tensor4<float>(V.shape),
                      std::vector<std::vector<double>>(ranks, std::vector<double>(ranks, 0.0))};
  const auto bytes_of = [](const fa::Tensor4<float>& x) {
    return static_cast<double>(x.values.size() * sizeof(float));
  };
  for (std::size_t step = 0; step < ranks; ++step) {
    for (std::size_t r = 0; r < ranks; ++r) {
      const KVShard& held = shards[owner_at_step(r, step, ranks)];
      KVGradients part = states[r].step(held);  // line 5
      std::optional<KVGradients>& acc = travelling[held.owner];
      if (step == 0) {
        acc = std::move(part);  // line 6, step 0
      } else {
        accumulate(*acc, part);  // line 6: what came from rank r - 1, plus this rank's part
      }
      if (ranks > 1) {  // lines 4 and 7: what this rank hands to rank r + 1
        run.bytes_sent[r][step] = bytes_of(acc->dK) + bytes_of(acc->dV);
        if (step + 1 < ranks) run.bytes_sent[r][step] += bytes_of(held.K) + bytes_of(held.V);
      }
    }
  }
  for (std::size_t r = 0; r < ranks; ++r) {  // line 9: dK, dV home, dQ where it was
    const std::vector<Chunk> chunks = chunks_of_rank(seq_len, ranks, r, layout);
    put_rows(run.dQ, states[r].dQ(), chunks);
    put_rows(run.dK, travelling[r]->dK, chunks);
    put_rows(run.dV, travelling[r]->dV, chunks);
  }
  return run;
}

}  // namespace ch09
