// Chapter 08's host API: attention at inference time. A few new query tokens per sequence attend
// to a KV cache that is already there: split-KV decoding (Flash-Decoding), grouped-query heads, a
// paged cache found through a block table, and sequences of different lengths, on the CPU through
// common/simt or on an NVIDIA GPU.
//
// The road of one run: main.cpp calls decode_attention() (declared below, defined in decoding.cpp),
// which checks the problem (check_problem, which also picks the tile and the number of splits) and
// calls run_decoding of the build that runs on the device (fa::build_for); that run, in
// decoding.cuh, puts Q and the cache on the device, and there the split kernel writes one
// normalised partial (O_i, L_i) per chunk of the cache and the combine kernel merges them into O and
// L with chapter 02's rule.
//
//   Q      [batch, heads, seq_len_q, head_dim]         the new tokens' queries
//   cache  K, V pools [pages, kv_heads, page_size, head_dim], a block table [batch, pages_per_seq]
//          and one length per sequence (KVCache below; a dense cache is one page per sequence)
//   O      [batch, heads, seq_len_q, head_dim], float32; L [batch, heads, seq_len_q]
// Query head h reads K/V head h / (heads / kv_heads). Sequence b attends to its first
// cache_seqlens[b] keys; under the causal mask (bottom right, common/attention_shapes.h) new token i
// of it sees keys j <= i + cache_seqlens[b] - seq_len_q, the new tokens' own keys being the last
// seq_len_q of those.
//
// The combine is public (combine_partials, launch_combine): chapter 09's ring folds each new
// partial into its running (O, L) with it.
//
// Source: Dao, Haziza, Massa and Sizov 2023, "Flash-Decoding for long-context inference" (the split
// of the keys and the merge of the partials); Dao 2023, FlashAttention-2 (the split count's rule,
// num_splits_heuristic of its code); Ainslie et al. 2023, GQA (grouped K/V heads); Shazeer 2019,
// "Fast Transformer Decoding" (one K/V head: MQA); Kwon et al. 2023, PagedAttention (the block
// table).
// Run the demo: build/default/bin/ch08_decoding
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/kernel_problem.h"
#include "common/simt/runtime/launch_mode.h"
#include "common/simt/tools/profile.h"
#include "common/tensor.h"

namespace ch08 {

// The type the cache (and Q) is stored in. Scores, m, l, acc, the partials and O are float32 in
// every case.
enum class CacheType { float32, bf16, fp16 };

constexpr std::string_view to_string(CacheType t) {
  return t == CacheType::float32 ? "float32" : (t == CacheType::bf16 ? "bf16" : "fp16");
}
constexpr std::size_t element_bytes(CacheType t) { return t == CacheType::float32 ? 4 : 2; }

// "float32", "bf16" or "fp16" -> the type. Throws std::invalid_argument naming the accepted names.
CacheType parse_cache_type(std::string_view name);

// What is compiled into the split kernel (template parameters): for each cache type every head dim
// in every tile (kCompiled), and for a float32 cache the tiles of kSmallGpuShapes too
// (kCompiledFloat32). Br is the number of packed query rows of a block (the rows of one K/V head:
// its group's heads times seq_len_q), Bc the keys per tile. Anything else is refused before a
// launch. kSmallGpuShapes are the tiles of a float32 cache that a GPU with 64 KiB of shared memory
// per block (a T4) holds (shared_bytes: 38532 bytes for 8x32 at head dim 64, 39044 for 8x16 at 128;
// the smallest of kTileShapes needs 74372 and 141956).
inline constexpr std::array<int, 2> kHeadDims{64, 128};
inline constexpr std::array<fa::Tile, 2> kTileShapes{{{8, 64}, {32, 64}}};
inline constexpr auto kCompiled = fa::every(kHeadDims, kTileShapes);
inline constexpr std::array<fa::KernelShape, 2> kSmallGpuShapes{{{64, {8, 32}}, {128, {8, 16}}}};
inline constexpr auto kCompiledFloat32 = fa::join(kCompiled, kSmallGpuShapes);
inline constexpr int kSplitThreads = 128;  // threads of a split block (decoding.cuh's kThreads)

// The split kernel's instances for a cache type. Never throws.
constexpr std::span<const fa::KernelShape> compiled(CacheType t) {
  return t == CacheType::float32 ? std::span<const fa::KernelShape>(kCompiledFloat32)
                                 : std::span<const fa::KernelShape>(kCompiled);
}

// Bytes of shared memory one block of the split kernel needs (decoding.cuh, SplitShape, and the
// static int of the sequence's length): Q [Br][head_dim] and S/P [Br][Bc + 128 / Br] as float32,
// 4 floats per row (rescale, m, l, a spare), and two stages of K and of V [Bc][head_dim + 16 /
// element bytes] as elements. E.g. 74372 for 8x64 at head dim 64 with a float32 cache, 38532 for
// 8x32 (split_shared_bytes: the same for an element of `element` bytes). Never throws.
constexpr std::size_t split_shared_bytes(std::size_t element, int head_dim, fa::Tile tile) {
  const auto d = static_cast<std::size_t>(head_dim);
  const auto Br = static_cast<std::size_t>(tile.Br), Bc = static_cast<std::size_t>(tile.Bc);
  const std::size_t pitch = d + 16 / element, p_pitch = Bc + kSplitThreads / Br;
  return sizeof(float) * (Br * d + Br * p_pitch + 4 * Br) + 4 * element * Bc * pitch + sizeof(int);
}
constexpr std::size_t shared_bytes(CacheType t, int head_dim, fa::Tile tile) {
  return split_shared_bytes(element_bytes(t), head_dim, tile);
}
inline constexpr int kMaxSplits = 128;   // FlashAttention-2's own limit
inline constexpr int kDefaultSms = 132;  // an H200 (and an H100 SXM)

// The shape of a KV cache, known before its pool is filled: what the checks before any work need.
struct CacheLayout {
  fa::Shape4 pool;                 // [pages, kv_heads, page_size, head_dim]
  std::size_t pages_per_seq = 0;   // columns of the block table
  std::vector<int> cache_seqlens;  // [batch]: keys of each sequence, 0 .. pages_per_seq * page_size
};

// The layout of the cache that dense_cache (page_size 0) or paged_cache (page_size >= 1, with
// `spare_pages` unused pages) makes for a dense K/V of shape [batch, kv_heads, seq_len_k, head_dim].
// Never throws (a bad length is check_problem's to refuse).
CacheLayout cache_layout(const fa::Shape4& kv, std::size_t page_size, std::vector<int> cache_seqlens,
                         std::size_t spare_pages = 1);

// The KV cache of a batch of sequences, as the kernel reads it. The pool holds `pages` pages of
// page_size rows of every K/V head; page n of sequence b (its keys n * page_size ...
// (n + 1) * page_size - 1) is pool page block_table[b * pages_per_seq + n]. Sequence b holds its
// first cache_seqlens[b] keys; the table entries of pages past those are not read.
struct KVCache {
  fa::Tensor4<float> K, V;         // the pools, [pages, kv_heads, page_size, head_dim], row-major
  std::vector<int> block_table;    // [batch, pages_per_seq]
  std::size_t pages_per_seq = 0;   // columns of the block table
  std::vector<int> cache_seqlens;  // [batch]: keys of each sequence, 0 .. pages_per_seq * page_size

  std::size_t batch() const { return cache_seqlens.size(); }
  std::size_t kv_heads() const { return K.shape.heads; }
  std::size_t page_size() const { return K.shape.seq_len; }
  std::size_t capacity() const { return pages_per_seq * page_size(); }  // keys one sequence can hold
  CacheLayout layout() const { return {K.shape, pages_per_seq, cache_seqlens}; }
};

// The dense cache as a KVCache: K, V [batch, kv_heads, seq_len_k, head_dim] become a pool of
// `batch` pages of seq_len_k rows, sequence b on page b. cache_seqlens empty: every sequence holds
// seq_len_k keys. Throws std::invalid_argument when K and V differ in shape or a length is not in
// 0 .. seq_len_k (kv_cache.cpp).
KVCache dense_cache(const fa::Tensor4<float>& K, const fa::Tensor4<float>& V, std::vector<int> cache_seqlens = {});

// The same keys in pages of page_size rows, the pages of all sequences shuffled in the pool (seeded)
// so that a kernel that ignores the block table reads the wrong keys. pages_per_seq =
// ceil(seq_len_k / page_size); the pool has batch * pages_per_seq pages plus `spare_pages` more that
// no sequence uses. Rows past a sequence's length, and the spare pages, are NaN: a kernel that reads
// them shows it. Throws as dense_cache, and std::invalid_argument for page_size 0.
KVCache paged_cache(const fa::Tensor4<float>& K, const fa::Tensor4<float>& V, std::vector<int> cache_seqlens,
                    std::size_t page_size, std::uint64_t shuffle_seed, std::size_t spare_pages = 1);

// Appends one token to sequence b: its K and V rows, [kv_heads, head_dim] each, written at row
// cache_seqlens[b] of its page, and the length grows by one (what a decoding step does before it
// attends). Throws std::invalid_argument when b is not a sequence, the rows have the wrong size or
// the sequence is full.
void append_token(KVCache& cache, std::size_t b, const std::vector<float>& k_row, const std::vector<float>& v_row);

// The number of splits of each sequence's keys, and why.
struct SplitChoice {
  int splits = 1;
  bool automatic = true;    // chosen by choose_splits (else given)
  std::int64_t blocks = 0;  // thread blocks without splitting: batch x kv_heads x row blocks
  int sms = kDefaultSms;    // the GPU's SMs: one wave is one block per SM
  int key_tiles = 0;        // tiles of Bc keys in the longest sequence

  double waves() const { return static_cast<double>(blocks) * splits / sms; }
  // waves / ceil(waves): the share of the last wave's SMs that have work; 1 for whole waves.
  double efficiency() const;
};

// FlashAttention-2's rule (num_splits_heuristic in its code): one split when `blocks` already fill
// at least 80% of a wave on `sms` SMs; otherwise, among 1 .. min(max_splits, sms, key_tiles) splits,
// the smallest count whose wave efficiency is within 85% of the best one's. A count that gives
// every split as many tiles as one split fewer does is skipped (it is that count again with an
// empty split). blocks, sms >= 1; key_tiles >= 0 (0: one split). Never throws.
SplitChoice choose_splits(std::int64_t blocks, int sms, int key_tiles, int max_splits = kMaxSplits);

// "8 blocks (batch 1 x 2 K/V heads x 1 row block ...) on 132 SMs: 6% of one wave -> 16 splits: 128 blocks,
// 0.97 waves, 97% efficiency" (decoding.cpp). Never throws (but for memory).
std::string explain(const SplitChoice& choice);

struct Options {
  std::optional<double> scale;                // softmax scale; 1/sqrt(head_dim) when not given
  bool causal = false;                        // bottom-right causal mask among the new tokens
  CacheType cache_type = CacheType::float32;  // the type of Q, K and V inside the kernels
  std::optional<int> splits;                  // 1 .. kMaxSplits; automatic when not given
  int sms = kDefaultSms;                      // the SMs the automatic split count fills
  std::optional<fa::Tile> tile;               // one of compiled(cache_type); automatic when not given
};

// One decoding problem as the kernels see it. The fa::DeviceProblem part: batch_heads = batch *
// heads, seq_len_q (new tokens per sequence), seq_len_k (a sequence's capacity, pages_per_seq *
// page_size), head_dim, scale, causal, tile.
struct DecodeProblem : fa::DeviceProblem {
  int batch = 0;
  int heads = 0;
  int kv_heads = 0;
  int pages = 0;          // pages in the pool
  int page_size = 0;      // rows of one K/V head per page
  int pages_per_seq = 0;  // columns of the block table
  int splits = 1;         // chunks of each sequence's keys, one thread block each
  CacheType cache_type = CacheType::float32;

  // (constexpr: the kernels call them too; nvcc's --expt-relaxed-constexpr, common/simt/CMakeLists.txt)
  constexpr int group() const { return heads / kv_heads; }                // query heads per K/V head
  constexpr int rows_per_kv_head() const { return group() * seq_len_q; }  // a K/V head's packed rows
  constexpr int row_blocks() const { return (rows_per_kv_head() + tile.Br - 1) / tile.Br; }
  constexpr std::size_t output_rows() const { return static_cast<std::size_t>(batch) * heads * seq_len_q; }
};

// The problem and its split count after every check decode_attention makes before it touches the
// data, from the shapes alone. Q: [batch, heads, seq_len_q, head_dim]; the cache as CacheLayout
// says. Checks: Q and the pool not empty, head_dim equal in both; heads a multiple of kv_heads; one
// length per sequence, each 0 .. capacity; splits 1 .. kMaxSplits, sms >= 1; the tile and head_dim
// among compiled(cache_type); fa::device_problem's limits (scale, grid, int indexing). The tile,
// when not given, is by default the smaller one when it holds every row of a K/V head (Br 8), else
// Br 32; on a GPU that default where its shared memory per block holds it, else the tile of the
// head dim that fits with the most work per block (fa::tile_for_device, shared_bytes: with a
// float32 cache on a T4, 8x32 at head dim 64 and 8x16 at 128).
// Throws std::invalid_argument saying what is wrong and what is accepted (decoding.cpp), and as
// fa::tile_for_device (std::invalid_argument: no tile fits; std::runtime_error: no GPU).
struct Plan {
  DecodeProblem problem;
  SplitChoice split;
  fa::TileChoice tile;  // the tile and why, when it is not the default
};
Plan check_problem(const fa::Shape4& q, const CacheLayout& cache, const Options& options,
                   fa::Device device = fa::Device::cpu);

// The checks of the cache's contents that check_problem cannot make from shapes: the K and V
// pools of one shape, the block table [batch, pages_per_seq] and its entries for the pages in use
// 0 .. pages - 1. Throws std::invalid_argument naming the entry (decoding.cpp).
void check_cache(const KVCache& cache);

// The bytes decode_attention allocates on the device (the CPU path: host memory too) and for the
// copies back. Never throws (saturates at 2^64 - 1).
std::uint64_t memory_needed(const DecodeProblem& problem);

// O, L and the time of the launches (fa::KernelRun), with the plan they ran.
struct Result : fa::KernelRun {
  Plan plan;
};

// ---------------------------------------------------------------------------------------------
// The merge of partials: chapter 02's rule on normalised partials. A partial over a chunk of keys
// is O_i = acc_i / l_i and L_i = m_i + log(l_i): the state (m, l, acc) of chapter 03's recurrence
// with m = L_i, l = 1 and acc = O_i, since sum over the chunk of exp(s - L_i) is 1. Folding the
// partials in one at a time with the recurrence's lines (m_new, m_safe, rescale, l, acc, m = m_new)
// gives
//   L = max_i L_i + log sum_i exp(L_i - max_i L_i),   O = sum_i exp(L_i - L) O_i.
// A partial that saw no key has L_i = -inf and O_i = 0, and adds nothing; when every partial is
// such, O = 0 and L = -inf.

// `splits` partials of `rows` rows: O [splits, rows, head_dim] and L [splits, rows], float32.
struct Partials {
  int splits = 0, rows = 0, head_dim = 0;
  std::vector<float> O, L;
};
// The merged rows: O [rows, head_dim] and L [rows], float32.
struct Merged {
  std::vector<float> O, L;
};

// The merge of `partials`, or, with `running` (the O and L of earlier partials, merged), the
// partials folded into it: what chapter 09 does at every step of its ring with one new partial.
// head_dim one of kHeadDims (the combine kernel's lanes hold head_dim / 32 columns each); splits
// 1 .. kMaxSplits; rows >= 1. Throws std::invalid_argument for sizes that do not fit together or
// are not accepted; std::runtime_error as decode_attention for the device.
// Source: Flash-Decoding's reduction step (Dao et al. 2023); Milakov and Gimelshein 2018, section 3.
Merged combine_partials(const Partials& partials, const Merged* running = nullptr, fa::Device device = fa::Device::cpu);

// ---------------------------------------------------------------------------------------------
// The kernels' entry points, compiled into each build of decoding.cuh (ch08::cpu,
// ch08::cpu_profiled, ch08::gpu: fa::Builds, common/kernel_problem.h).
//   Run:      host data in, host data out: the path of decode_attention(). Rounds Q and the pools
//             to problem.cache_type on their way to the device.
//   Launch:   on memory already on the device: Q, K and V hold elements of problem.cache_type;
//             block_table and cache_seqlens int32; O_parts [splits, output rows, head_dim] and
//             L_parts [splits, output rows] float32 scratch (unused, may be null, for one split);
//             O, L the outputs. Waits for the kernels or not as `mode` says
//             (common/simt/runtime/launch_mode.h): what the GPU benchmark times.
//   Combine:  the merge alone (combine_partials, above) on device memory.
using Run = fa::KernelRun(const fa::Tensor4<float>& Q, const KVCache& cache, const DecodeProblem& problem);
using Launch = void(const void* Q, const void* K, const void* V, const int* block_table, const int* cache_seqlens,
                    float* O_parts, float* L_parts, float* O, float* L, const DecodeProblem& problem,
                    simt::LaunchMode mode);
using Combine = void(const float* O_parts, const float* L_parts, int splits, int rows, int head_dim, float* O, float* L,
                     bool fold_into_output, simt::LaunchMode mode);
using RunCombine = Merged(const Partials& partials, const Merged* running);
namespace cpu {
Run run_decoding;
Launch launch_decoding;
Combine launch_combine;
RunCombine run_combine;
}  // namespace cpu
namespace cpu_profiled {
Run run_decoding;
Combine launch_combine;
RunCombine run_combine;
}  // namespace cpu_profiled
namespace gpu {
Run run_decoding;
Launch launch_decoding;
Combine launch_combine;
RunCombine run_combine;
}  // namespace gpu

// O = softmax(Q K^T * scale) V and L over each sequence's cached keys, by split-KV decoding.
// Q: [batch, heads, seq_len_q, head_dim], float32 values (rounded to options.cache_type, as the
// cache is, on their way to the kernel); head_dim one of kHeadDims. Returns O [batch, heads,
// seq_len_q, head_dim] (float32) and L [batch, heads, seq_len_q]; a row that sees no key (a
// sequence of length 0, or a new token the causal mask leaves nothing) gives zeros and L = -inf.
// Throws std::invalid_argument as check_problem, and for a value fp16 cannot hold (above 65504);
// std::runtime_error when device == gpu and no GPU can be used, or for a CUDA error.
// Source: Flash-Decoding (Dao et al. 2023); FlashAttention-2, Algorithm 1, per chunk of keys.
Result decode_attention(const fa::Tensor4<float>& Q, const KVCache& cache, const Options& options = {},
                        fa::Device device = fa::Device::cpu);

// The decode loop: `steps` tokens appended to the cache one at a time, each step attending with the
// new token's query to the cache as it then is, as a server generates text. Q: [batch, heads, n,
// head_dim], a query per token; K, V: [batch, kv_heads, n, head_dim]. The cache starts with the
// first n - steps tokens of every sequence (paged_cache with page_size and shuffle_seed, or
// dense_cache for page_size 0, the rows still to come NaN there too); step t appends token
// n - steps + t of every sequence (append_token) and runs decode_attention on its query
// (seq_len_q = 1). Returns O [batch, heads, steps, head_dim] and L [batch, heads, steps], the
// launches' time summed, and every step's plan. (The cache goes to the device whole at every step,
// which a demo can afford; a server keeps it there and writes only the new rows.)
// Throws std::invalid_argument when the shapes do not fit or steps is not 1 .. n, and as
// decode_attention.
struct LoopResult : fa::KernelRun {
  std::vector<Plan> plans;
};
LoopResult decode_loop(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                       std::size_t steps, std::size_t page_size, std::uint64_t shuffle_seed, const Options& options,
                       fa::Device device = fa::Device::cpu);

}  // namespace ch08
