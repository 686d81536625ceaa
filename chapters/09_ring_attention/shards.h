// Chapter 09, part 1: which rows of the sequence each of P ranks holds, and which of its queries see
// which keys under the causal mask. No MPI here: the ring (ring.h) and its tests use it alike.
//
// The sequence of seq_len rows is cut into chunks whose lengths differ by at most one (the first
// seq_len % chunks are one row longer); a chunk may be empty when seq_len < chunks. Rank r holds the
// same rows of Q, K and V:
//   contiguous  P chunks; rank r holds chunk r.
//   zigzag      2P chunks; rank r holds chunks r and 2P - 1 - r (one from each end), so that under
//               the causal mask every rank's queries see about as many keys: a plain split gives
//               rank 0 one chunk of keys to see and rank P - 1 all of them.
// A rank's shard is its chunks' rows, in order, concatenated: [batch, heads, shard rows, head_dim].
//
// Source: Liu, Zaharia and Abbeel 2023, "Ring Attention with Blockwise Transformers for
// Near-Infinite Context", section 3 (the blocks of the sequence, one per host); Brandon et al. 2023,
// "Striped Attention: Faster Ring Attention for Causal Transformers", section 3 (the imbalance of
// the causal mask over contiguous blocks, balanced there by striping rows; the zigzag order gives
// each rank two chunks instead, so that each rank's rows stay contiguous runs the kernel can tile).
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "common/tensor.h"

namespace ch09 {

enum class Layout { contiguous, zigzag };

constexpr std::string_view to_string(Layout l) { return l == Layout::contiguous ? "contiguous" : "zigzag"; }

// "contiguous" or "zigzag". Throws std::invalid_argument naming the accepted names.
Layout parse_layout(std::string_view name);

// Rows begin .. end - 1 of the sequence: one chunk.
struct Chunk {
  std::size_t begin = 0, end = 0;
  std::size_t size() const { return end - begin; }
  bool operator==(const Chunk&) const = default;
};

// The chunks of `rank` (0 .. ranks - 1), in the order its shard holds them: one for contiguous,
// two for zigzag (chunk r, then chunk 2P - 1 - r). ranks >= 1. Throws std::invalid_argument for a
// rank out of range or ranks 0.
std::vector<Chunk> chunks_of_rank(std::size_t seq_len, std::size_t ranks, std::size_t rank, Layout layout);

// The rank whose K/V shard `rank` holds at `step` of the ring (ring.h, line 3): (rank - step) mod
// ranks, its own at step 0; each step every shard moves one rank on, from rank r to rank r + 1.
// step may be any number >= 0 (step ranks is step 0 again). Throws std::invalid_argument for a rank
// out of range or ranks 0.
std::size_t owner_at_step(std::size_t rank, std::size_t step, std::size_t ranks);

// The rows of a shard: the sum of its chunks' sizes. Never throws.
std::size_t shard_rows(const std::vector<Chunk>& chunks);

// The rows of `x` [batch, heads, seq_len, head_dim] in `chunks`, concatenated: [batch, heads, shard
// rows, head_dim]. Throws std::invalid_argument for a chunk past seq_len.
fa::Tensor4<float> take_rows(const fa::Tensor4<float>& x, const std::vector<Chunk>& chunks);

// The inverse: writes `shard` [batch, heads, shard rows, head_dim] into the rows of `x` that
// `chunks` name. Throws std::invalid_argument when the shapes do not fit.
void put_rows(fa::Tensor4<float>& x, const fa::Tensor4<float>& shard, const std::vector<Chunk>& chunks);
// The same for a tensor of one value per row, L [batch, heads, seq_len] (rows_per_head = seq_len).
void put_rows(std::vector<float>& L, std::size_t rows_per_head, const std::vector<float>& shard,
              const std::vector<Chunk>& chunks);

// What the queries of chunk q see of the keys of chunk k under the causal mask (self-attention:
// query i sees keys j <= i):
//   none      every key comes after every query (or a chunk is empty): nothing to compute
//   all       every key comes before or at every query: attention without the mask
//   diagonal  the same rows: the causal mask of chapter 05 on the chunk alone
// Without the mask every non-empty pair is `all`. Throws std::logic_error for chunks that overlap
// without being equal (no layout here makes them).
enum class Visible { none, all, diagonal };
Visible visible(const Chunk& q, const Chunk& k, bool causal);

// The work of each rank's queries over the whole ring, in (query, key) pairs each sees: the cost
// model of the layout's balance. Returns [ranks]. Throws as chunks_of_rank.
std::vector<double> pairs_per_rank(std::size_t seq_len, std::size_t ranks, Layout layout, bool causal);

// max / mean of `work` (1: perfect balance; 0 when there is none). Never throws.
double imbalance(const std::vector<double>& work);

}  // namespace ch09
