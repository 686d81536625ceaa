// Chapter 09's host API, part 2: ring attention's arithmetic, without the network. What chapter 08
// did inside one GPU (split the keys, compute a partial (O_i, L_i) per split, merge the partials)
// happens here across P processes: each rank holds a shard of the queries (shards.h) and, at each of
// P steps, the K/V shard of one rank; it computes its queries' partial against that shard with
// chapter 05's kernel (chapter 06's for bf16 and fp16), which returns O and L = m + log(l), and folds
// the partial into its running (O, L) with chapter 08's combine_partials: m_new, m_safe, rescale, l,
// acc, m = m_new, the lines of chapter 02, once more. Then it passes the K/V shard to the next rank.
//
// One rank, P steps (main.cpp moves the shards with MPI; ring_in_one_process below moves them by
// hand, for the tests):
//   1. state = RankState(my Q shard)                   nothing folded yet: O = 0, L = -inf
//   2. for step s = 0 .. P - 1:
//   3.   held = the K/V shard of rank (r - s) mod P    (step 0: my own)
//   4.   send held to rank r + 1, receive the next from rank r - 1   (started before line 5)
//   5.   state.fold(held)                              per pair of chunks: the kernel, then the merge
//   6.   wait for line 4
//   7. O, L = state.result()
// The order in which the shards arrive differs from rank to rank and with P; the merge is
// exact arithmetic's associative and commutative logsumexp, so O and L depend on P only through
// float32 rounding (tests/09_ring_attention_test.cpp measures how far).
//
// Source: Liu, Zaharia and Abbeel 2023, "Ring Attention with Blockwise Transformers for
// Near-Infinite Context", section 3 and Algorithm 1; the merge of partials: Milakov and Gimelshein
// 2018, section 3, and Flash-Decoding (Dao et al. 2023), as in chapter 08.
// Run the demo: mpirun --quiet -np 4 build/default/bin/ch09_ring_attention --causal --layout zigzag
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "chapters/08_decoding/decoding.h"
#include "chapters/09_ring_attention/shards.h"
#include "common/chapter.h"
#include "common/tensor.h"

namespace ch09 {

// The head dims every piece compiles: chapters 05 and 06's kernels and chapter 08's combine.
inline constexpr std::array<int, 2> kHeadDims{64, 128};

struct Options {
  std::optional<double> scale;                         // softmax scale; 1/sqrt(head_dim) when not given
  bool causal = false;                                 // query i sees keys j <= i
  ch08::CacheType element = ch08::CacheType::float32;  // float32: chapter 05's kernel; bf16, fp16: chapter 06's
};

// The checks before any work, from the shape alone: self-attention (seq_len_q == seq_len_k: the
// rows of Q, K and V are one sequence, sharded alike), head_dim among kHeadDims, ranks >= 1, and
// what the kernel of options.element refuses (scale, grid, int indexing; chapters 05 and 06).
// Throws std::invalid_argument saying what is accepted.
void check_problem(const fa::AttentionShape& shape, std::size_t ranks, const Options& options);

// The K and V rows of one rank's shard, as they travel around the ring.
struct KVShard {
  std::size_t owner = 0;      // the rank whose rows these are
  std::vector<Chunk> chunks;  // those rows in the sequence (shards.h)
  fa::Tensor4<float> K, V;    // [batch, heads, shard rows, head_dim]
};

// The K/V shard of `rank`, taken from the whole K and V [batch, heads, seq_len, head_dim]. Throws
// as chunks_of_rank.
KVShard kv_shard(const fa::Tensor4<float>& K, const fa::Tensor4<float>& V, std::size_t ranks, std::size_t rank,
                 Layout layout);

// One rank's queries and their running (O, L), one per query chunk.
class RankState {
 public:
  // Q: the rank's shard [batch, heads, shard rows, head_dim], holding `chunks`' rows. Throws
  // std::invalid_argument when they do not fit.
  RankState(fa::Tensor4<float> Q, std::vector<Chunk> chunks, Options options, fa::Device device);

  // Lines 5 of the ring: for every chunk of my queries and every chunk of `kv` it sees (visible()),
  // the kernel's partial (O_i, L_i), folded into that query chunk's running (O, L) with
  // ch08::combine_partials. Returns the partials computed. Throws what the kernels and the combine
  // throw (std::invalid_argument for shapes that do not fit; std::runtime_error for the device).
  int fold(const KVShard& kv);

  // Line 7: O [batch, heads, shard rows, head_dim] and L [batch, heads, shard rows]; a row that saw
  // no key (none does in self-attention) is zeros with L = -inf. Never throws (but for memory).
  fa::Tensor4<float> O() const;
  std::vector<float> L() const;

 private:
  std::vector<Chunk> chunks_;
  std::vector<fa::Tensor4<float>> Q_;                 // per query chunk: [batch, heads, chunk rows, head_dim]
  std::vector<std::optional<ch08::Merged>> running_;  // per query chunk: its (O, L) so far
  fa::Shape4 shape_;
  Options options_;
  fa::Device device_;
};

// The kernel's partial of Q against K and V (chapter 05 for float32, chapter 06 for 16-bit types):
// O [batch, heads, seq_len_q, head_dim] and L = m + log(l). Q: [batch, heads, seq_len_q, head_dim],
// K, V: [batch, heads, seq_len_k, head_dim]. Throws as ch05::flash_attention_2 and
// ch06::tensor_core_attention.
fa::KernelRun partial_attention(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                                bool causal, const Options& options, fa::Device device);

// The whole ring, every rank's steps run one after another in this process with the shards passed
// by hand: what P processes compute, without MPI (the tests, and the reader without mpirun).
// Q, K, V: [batch, heads, seq_len, head_dim]. Returns the gathered O [batch, heads, seq_len,
// head_dim] and L [batch, heads, seq_len]. Throws as check_problem and RankState.
struct RingRun {
  fa::Tensor4<float> O;
  std::vector<float> L;
};
RingRun ring_in_one_process(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                            std::size_t ranks, Layout layout, const Options& options,
                            fa::Device device = fa::Device::cpu);

}  // namespace ch09
