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
#include "common/kernel_problem.h"
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

// ---------------------------------------------------------------------------------------------
// The backward pass on the ring. Training needs dQ, dK and dV of a loss whose gradient with respect
// to O is dO. Chapter 07 computes them for one (Q, K, V) from the forward's O and L: P = exp(S - L)
// recomputed tile by tile, D = rowsum(dO * O), and dV = P^T dO, dS = P * (dP - D), dQ = dS K * scale,
// dK = dS^T Q * scale. Each of these is a sum over pairs (query row, key row), and with the forward's
// L and O of the WHOLE row (what the forward ring leaves on each rank) chapter 07 run on one pair of
// chunks gives exactly that pair's terms. So the ring runs chapter 07's backward per pair of chunks,
// keeps the dQ terms (its own queries), and hands the dK, dV terms to the K/V shard they belong to:
// buffers that travel the ring with K and V and reach their owner after P steps.
//
// One rank, P steps (main.cpp moves the shards with MPI; ring_backward_in_one_process by hand):
//   1. state = RankBackward(my Q, O, L, dO shards)      dQ = 0
//   2. for step s = 0 .. P - 1:
//   3.   held = the K/V shard of rank (r - s) mod P       (step 0: my own)
//   4.   send held K, V to rank r + 1, receive the next from rank r - 1  (started before line 5)
//   5.   part = state.step(held)                          chapter 07 per pair of chunks: dQ kept here,
//                                                         the pair's dK, dV returned
//   6.   travelling = part (s = 0), or the dK, dV of held's shard received from rank r - 1 (sent
//        there at its step s - 1, line 7), plus part: accumulate(travelling, part)
//   7.   send travelling to rank r + 1 (at s = P - 1 that is held's owner: home), not waited for
//        here, so that it travels during the next step's line 5
//   8.   wait for line 4
//   9. receive my own dK, dV from rank r - 1 (sent at its line 7 of step P - 1); dQ = state.dQ()
// The same float additions in the same order on every run at a given P (chapter 07's deterministic
// dQ kernel, then this fixed order), so the result is the same bit for bit; a different P cuts the
// sums into other chunks, so it differs by float32 rounding only.
//
// Source: Liu, Zaharia and Abbeel 2023, Ring Attention, section 3 (the backward's blockwise form,
// dK and dV passed around the ring with K and V); Dao 2023, FlashAttention-2, Algorithm 2 (the
// backward pass per pair of blocks, from the saved logsumexp).
// Run the demo: mpirun --quiet -np 4 build/default/bin/ch09_ring_attention --backward --causal --layout zigzag

// The checks of the backward before any work: check_problem's (self-attention, head_dim 64 or 128,
// ranks >= 1), float32 only (chapter 07's kernels are float32), and chapter 07's own
// (ch07::check_problem: scale, grid, int indexing). Throws std::invalid_argument, one line saying
// what is accepted.
void check_backward_problem(const fa::AttentionShape& shape, std::size_t ranks, const Options& options);

// The dK and dV of one K/V shard's rows, summed over the ranks its shard has visited so far: what
// travels the ring with K and V, and comes home to `owner`.
struct KVGradients {
  std::size_t owner = 0;      // the rank whose K/V rows these are the gradients of
  fa::Tensor4<float> dK, dV;  // [batch, heads, shard rows, head_dim]
};

// travelling.dK += part.dK, travelling.dV += part.dV, element by element (line 6). Throws
// std::invalid_argument when the owners or the shapes differ.
void accumulate(KVGradients& travelling, const KVGradients& part);

// One rank's queries in the backward: its Q, O, L and dO, and its dQ so far.
class RankBackward {
 public:
  // Q, O, dO: the rank's shards [batch, heads, shard rows, head_dim] of `chunks`' rows; L [batch,
  // heads, shard rows], the forward's logsumexp of the whole row (RankState::L). Throws
  // std::invalid_argument when they do not fit.
  RankBackward(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& O, const std::vector<float>& L,
               const fa::Tensor4<float>& dO, std::vector<Chunk> chunks, Options options, fa::Device device);

  // Line 5: for every chunk of my queries and every chunk of `kv` it sees (visible(); the causal mask
  // on the diagonal pair only, where query and key rows are the same), chapter 07's backward
  // (deterministic dQ), its dQ added to mine and its dK, dV into the returned part, zeros where no
  // query of mine sees a key. Returns the part for kv's rows [batch, heads, kv rows, head_dim].
  // Throws std::invalid_argument for a shard that does not fit, and what ch07::flash_attention_2_backward
  // throws (std::runtime_error for the device).
  KVGradients step(const KVShard& kv);

  // Line 9: dQ [batch, heads, shard rows, head_dim]. Never throws (but for memory).
  fa::Tensor4<float> dQ() const;
  // The pairs of chunks run by chapter 07 so far. Never throws.
  int pairs() const { return pairs_; }

 private:
  std::vector<Chunk> chunks_;
  std::vector<fa::Tensor4<float>> Q_, O_, dO_, dQ_;  // per query chunk: [batch, heads, chunk rows, head_dim]
  std::vector<std::vector<float>> L_;                // per query chunk: [batch, heads, chunk rows]
  fa::Shape4 shape_;
  Options options_;
  fa::Device device_;
  int pairs_ = 0;
};

// The communication model of the backward: the bytes `rank` sends at each step (lines 4 and 7),
// float32 on the wire as the program sends them. At a step s < P - 1 the K/V shard it holds and that
// shard's dK, dV (4 x batch x heads x rows x head_dim x 4 B); at step P - 1 the dK, dV alone, home.
// One rank sends nothing. full: [batch, heads, seq_len, head_dim]. Returns [ranks steps]. Throws as
// chunks_of_rank.
std::vector<double> backward_sends(const fa::Shape4& full, std::size_t ranks, std::size_t rank, Layout layout);

// The whole backward ring in this process, shards passed by hand in the order of lines 4-9: what P
// processes compute, bit for bit. Q, K, V, O, dO: [batch, heads, seq_len, head_dim]; L [batch,
// heads, seq_len] (O and L: the forward's, chapter 05's or the ring's). Returns the gathered dQ, dK,
// dV (shaped as Q, K, V) and the bytes each rank handed on at each step (what the program sends).
// Throws as check_backward_problem and RankBackward.
struct RingBackwardRun {
  fa::Tensor4<float> dQ, dK, dV;
  std::vector<std::vector<double>> bytes_sent;  // [rank][step]
};
RingBackwardRun ring_backward_in_one_process(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K,
                                             const fa::Tensor4<float>& V, const fa::Tensor4<float>& O,
                                             const std::vector<float>& L, const fa::Tensor4<float>& dO,
                                             std::size_t ranks, Layout layout, const Options& options,
                                             fa::Device device = fa::Device::cpu);

}  // namespace ch09
