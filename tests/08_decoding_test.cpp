// Chapter 08 tests: split-KV decoding over a paged cache agrees with chapter 05 (float32 cache) and
// chapter 06 (bf16, fp16) on the dense problem each sequence is equivalent to; the combine alone
// agrees with a float64 merge; the decode loop agrees with chapter 05's causal forward; the split
// count follows FlashAttention-2's rule; and the kernels move exactly the bytes the traffic model
// counts.
//
// Compiled twice: 08_decoding_test runs every kernel on the CPU through common/simt;
// 08_decoding_gpu_test (FA_TEST_ON_GPU) runs them on a GPU, and is SKIPPED where there is none.
// Every run starts from outputs and partials filled with NaN (decoding.cuh's run_decoding), the
// rows of a paged pool past each sequence's length and its spare page are NaN too (paged_cache),
// and the pages are shuffled in the pool: a partial that is never written, a key read past a
// sequence's length, or a page found without the block table cannot pass. The bounds are those of
// chapters/08_decoding/lab/vs_dense.h (the demo uses the same), where each one's reason is given.
// The test cases tagged [sanitizer] are a small set that still reaches every path of the kernels:
// the GPU check runs them under compute-sanitizer, and the asan and tsan presets run the whole file
// with smaller lists.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "attention_inputs.h"
#include "catch.h"
#include "chapters/08_decoding/decoding.h"
#include "chapters/08_decoding/lab/traffic_model.h"
#include "chapters/08_decoding/lab/vs_dense.h"
#include "common/random.h"
#include "common/simt/simt.h"
#include "common/simt/tools/profile.h"
#include "doc_table.h"

namespace {

using ch08::CacheType;
using fa_test::kDevice;

struct Case {
  std::size_t heads, kv_heads, seq_len_q, head_dim;
  bool causal;
  std::vector<int> lengths;   // one per sequence; the cache holds max(lengths) rows
  std::size_t page_size;      // 0: the dense cache
  std::optional<int> splits;  // automatic when not given
  CacheType type;
  std::optional<fa::Tile> tile = std::nullopt;  // check_problem's when not given
};

std::string describe(const Case& c, std::uint64_t seed) {
  std::string lengths;
  for (int len : c.lengths) lengths += (lengths.empty() ? "" : ",") + std::to_string(len);
  return "heads " + std::to_string(c.heads) + ", kv_heads " + std::to_string(c.kv_heads) + ", seq_len_q " +
         std::to_string(c.seq_len_q) + ", head_dim " + std::to_string(c.head_dim) + (c.causal ? ", causal" : "") +
         ", lengths " + lengths + ", page_size " + std::to_string(c.page_size) + ", splits " +
         (c.splits ? std::to_string(*c.splits) : std::string("auto")) + ", " + std::string(ch08::to_string(c.type)) +
         (c.tile ? ", tile " + fa::tile_name(*c.tile) : std::string()) + ", seed " + std::to_string(seed);
}

// Draws the case's inputs, decodes them and checks every sequence against its dense equivalent.
// Returns the plan the decoding ran with; nothing, after a warning, where the GPU of the GPU build
// holds no compiled tile of the case's cache type and head dim (a 16-bit cache at head dim 128 on a
// T4, with 64 KiB per block: decode_attention refuses it in one line, which the warning shows).
std::optional<ch08::Plan> check_case(const Case& c) {
  const std::size_t batch = c.lengths.size();
  const std::size_t seq_len_k =
      static_cast<std::size_t>(std::max(1, *std::max_element(c.lengths.begin(), c.lengths.end())));
  const std::uint64_t seed = 8000 + 131 * c.heads + 17 * c.kv_heads + 7 * c.seq_len_q + c.head_dim + 3 * c.page_size +
                             (c.splits ? static_cast<std::uint64_t>(*c.splits) * 5 : 1) +
                             static_cast<std::uint64_t>(c.type);
  INFO(describe(c, seed));
  const fa::Shape4 q{batch, c.heads, c.seq_len_q, c.head_dim}, kv{batch, c.kv_heads, seq_len_k, c.head_dim};
  const fa::Tensor4<float> Q(q, fa::normal<float>(q.size(), seed)), K(kv, fa::normal<float>(kv.size(), seed + 1)),
      V(kv, fa::normal<float>(kv.size(), seed + 2));
  const ch08::KVCache cache =
      c.page_size == 0 ? ch08::dense_cache(K, V, c.lengths) : ch08::paged_cache(K, V, c.lengths, c.page_size, seed + 3);
  const ch08::Options options{.causal = c.causal, .cache_type = c.type, .splits = c.splits, .tile = c.tile};
  if (kDevice == fa::Device::gpu) {
    try {
      (void)ch08::check_problem(Q.shape, cache.layout(), options, kDevice);
    } catch (const std::invalid_argument& e) {
      if (std::string(e.what()).find("every compiled tile needs more shared memory") == std::string::npos) throw;
      WARN("left out: " << e.what());
      return std::nullopt;
    }
  }
  const ch08::Result decoded = ch08::decode_attention(Q, cache, options, kDevice);
  const ch08::Agreement agreement =
      ch08::check_against_dense(Q, K, V, c.lengths, options, decoded.plan.problem.splits, decoded, kDevice);
  for (const ch08::SequenceCheck& s : agreement.sequences) {
    INFO("sequence " << s.sequence << " (" << s.length << " keys), splits " << decoded.plan.problem.splits << ": O "
                     << fa::describe(s.O) << ", bound " << s.O_bound << "; L off by " << s.L_error << ", bound "
                     << s.L_bound << " (against " << agreement.against << ")");
    CHECK(s.pass);
  }
  return decoded.plan;
}

// The bytes of shared memory per block of the split kernel for a cache type and head dim, by tile.
fa::SharedBytes bytes_of(CacheType type, int head_dim) {
  return [type, head_dim](fa::Tile tile) { return ch08::shared_bytes(type, head_dim, tile); };
}

// The tile decode_attention runs where the rows' rule gives `by_rows` and the user names none: that
// one on the CPU; on a GPU the one it holds (fa::fit_tile with its shared memory per block).
fa::Tile tile_here(CacheType type, int head_dim, fa::Tile by_rows) {
  if (kDevice == fa::Device::cpu) return by_rows;
  return fa::fit_tile("decode_attention", by_rows, head_dim, ch08::compiled(type), bytes_of(type, head_dim),
                      fa::gpu_shared_bytes_per_block())
      .tile;
}

// Lengths 0, 1, 17 and one longer than two tiles of 64, in one batch: an empty sequence, a single
// key, a ragged first tile, and chunks that end in the middle of pages and tiles.
const std::vector<int> kLengths{0, 1, 17, 150};

}  // namespace

TEST_CASE("decoding agrees with chapter 05 for every page size and split count", "[ch08]") {
#if FA_SANITIZER_BUILD
  const std::size_t page_size = GENERATE(0u, 48u);
  const std::optional<int> splits = GENERATE(std::optional<int>(3), std::optional<int>());
#else
  // 16 divides the tile of 64 keys, 48 does not (tiles cross pages), 64 is the tile, 1 is a page per
  // key, 0 the dense cache.
  const std::size_t page_size = GENERATE(0u, 1u, 16u, 48u, 64u);
  const std::optional<int> splits = GENERATE(std::optional<int>(1), std::optional<int>(2), std::optional<int>(3),
                                             std::optional<int>(7), std::optional<int>(64), std::optional<int>());
#endif
  check_case({4, 2, 1, 64, false, kLengths, page_size, splits, CacheType::float32});
}

TEST_CASE("decoding agrees with chapter 05 for grouped, multi-query and plain heads, one or four new tokens",
          "[ch08]") {
  // (heads, kv_heads): groups of 1 (every head its own K/V), 2, 8, and multi-query (one K/V head).
  const auto [heads, kv_heads] = GENERATE(table<std::size_t, std::size_t>({{2, 2}, {4, 2}, {16, 2}, {8, 1}}));
#if FA_SANITIZER_BUILD
  const std::size_t seq_len_q = 4;
  const std::size_t head_dim = 64;
#else
  const std::size_t seq_len_q = GENERATE(1u, 4u);
  const std::size_t head_dim = GENERATE(64u, 128u);
#endif
  const bool causal = seq_len_q > 1;  // the new tokens among themselves: bottom-right causal
  check_case({heads, kv_heads, seq_len_q, head_dim, causal, kLengths, 48, std::nullopt, CacheType::float32});
}

TEST_CASE("a bf16 or fp16 cache agrees with chapter 06 within its budget", "[ch08]") {
  const CacheType type = GENERATE(CacheType::bf16, CacheType::fp16);
#if FA_SANITIZER_BUILD
  const std::size_t head_dim = 64;
#else
  const std::size_t head_dim = GENERATE(64u, 128u);
#endif
  check_case({8, 2, 1, head_dim, false, kLengths, 16, 3, type});
  check_case({8, 2, 4, head_dim, true, {0, 5, 150}, 48, std::nullopt, type});
}

TEST_CASE("a small complete set: every cache type, both tiles, pages, splits, the causal diagonal",
          "[ch08][sanitizer]") {
  // Br 8 (8 heads on 1 K/V head, one new token) and Br 32 (4 new tokens of a group of 8, causal).
  // (On a GPU the tile it holds: with 64 KiB per block, 8x32 for the first, none for the second.)
  const std::optional<ch08::Plan> small = check_case({8, 1, 1, 64, false, {3, 130}, 48, 3, CacheType::float32});
  if (small) CHECK(small->problem.tile == tile_here(CacheType::float32, 64, {8, 64}));
  const std::optional<ch08::Plan> large = check_case({16, 2, 4, 128, true, {2, 70}, 16, std::nullopt, CacheType::bf16});
  if (large) CHECK(large->problem.tile == tile_here(CacheType::bf16, 128, {32, 64}));
  check_case({4, 4, 2, 64, true, {1, 65}, 0, 2, CacheType::fp16});
}

TEST_CASE("more rows per K/V head than a block holds: several row blocks, each reads the cache", "[ch08]") {
  // 8 heads on 1 K/V head x 5 new tokens = 40 rows: two blocks of 32.
  const std::optional<ch08::Plan> plan = check_case({8, 1, 5, 64, true, {3, 100}, 16, 2, CacheType::float32});
  REQUIRE(plan);
  CHECK(plan->problem.row_blocks() == (plan->problem.tile.Br == 32 ? 2 : 5));
}

TEST_CASE("the tiles of a float32 cache on a GPU with 64 KiB per block agree with chapter 05", "[ch08][sanitizer]") {
  // kSmallGpuShapes (8x32 at head dim 64, 8x16 at 128): one new token of a group of 8 over a paged
  // cache whose pages cross the tiles, several splits; and 4 causal new tokens of a group of 4 (two
  // row blocks of 8), every length kind of kLengths, automatic splits.
  for (const fa::KernelShape& k : ch08::kSmallGpuShapes) {
    const auto d = static_cast<std::size_t>(k.head_dim);
    for (const fa::Tile& tile : fa_test::tiles_that_fit({k.tile}, bytes_of(CacheType::float32, k.head_dim))) {
      const std::optional<ch08::Plan> one = check_case({8, 1, 1, d, false, {3, 130}, 48, 3, CacheType::float32, tile});
      const std::optional<ch08::Plan> four =
          check_case({8, 2, 4, d, true, kLengths, 16, std::nullopt, CacheType::float32, tile});
      REQUIRE(one);
      REQUIRE(four);
      CHECK(one->problem.tile == tile);
      CHECK(four->problem.row_blocks() == 2);
    }
  }
}

#if !FA_TEST_ON_GPU
TEST_CASE("on a GPU the split kernel runs the rows' tile where it fits, else the fitting tile with the most work",
          "[ch08]") {
  const auto gpu_choice = [](CacheType type, int head_dim, fa::Tile by_rows, std::size_t limit) {
    return fa::fit_tile("decode_attention", by_rows, head_dim, ch08::compiled(type), bytes_of(type, head_dim), limit);
  };
  using fa_test::kT4SharedBytes;
  // A T4 (64 KiB per block), a float32 cache: neither tile of kTileShapes fits (8x64 needs 74372
  // bytes at head dim 64); 8x32 runs at 64, 8x16 at 128, whatever the rows.
  for (const fa::Tile by_rows : ch08::kTileShapes) {
    CHECK(gpu_choice(CacheType::float32, 64, by_rows, kT4SharedBytes).tile == fa::Tile{8, 32});
    CHECK(gpu_choice(CacheType::float32, 128, by_rows, kT4SharedBytes).tile == fa::Tile{8, 16});
  }
  const fa::TileChoice f64 = gpu_choice(CacheType::float32, 64, {8, 64}, kT4SharedBytes);
  CHECK(f64.bytes == 38532);
  INFO(f64.why);
  CHECK(f64.why.find("8x64 needs 74372 bytes") != std::string::npos);
  // A bf16 cache: both tiles fit at head dim 64; at 128 none does (8x64 needs 76420 bytes).
  for (const fa::Tile by_rows : ch08::kTileShapes) {
    CHECK(gpu_choice(CacheType::bf16, 64, by_rows, kT4SharedBytes).tile == by_rows);
  }
  fa_test::check_refused(
      [&] {
        (void)gpu_choice(CacheType::fp16, 128, {8, 64}, kT4SharedBytes);
      },
      {"decode_attention", "76420", "65536", "--device cpu"});
  // An A100 and an H100 hold every tile of kTileShapes, for every cache type.
  for (std::size_t limit : {fa_test::kA100SharedBytes, fa_test::kH100SharedBytes}) {
    for (CacheType type : {CacheType::float32, CacheType::bf16, CacheType::fp16}) {
      for (int head_dim : ch08::kHeadDims) {
        for (const fa::Tile by_rows : ch08::kTileShapes) {
          const fa::TileChoice c = gpu_choice(type, head_dim, by_rows, limit);
          CHECK(c.tile == by_rows);
          CHECK(c.why.empty());
        }
      }
    }
  }
  // The small tiles are compiled for a float32 cache only.
  const fa::Shape4 q{1, 8, 1, 64}, kv{1, 1, 40, 64};
  const ch08::KVCache cache = ch08::dense_cache(fa::Tensor4<float>(kv, 0.5f), fa::Tensor4<float>(kv, 0.5f));
  fa_test::check_refused(
      [&] {
        (void)ch08::check_problem(q, cache.layout(), {.cache_type = CacheType::bf16, .tile = fa::Tile{8, 32}});
      },
      {"8x32", "8x64, 32x64"});
  CHECK(ch08::check_problem(q, cache.layout(), {.tile = fa::Tile{8, 32}}).problem.tile == fa::Tile{8, 32});
}

TEST_CASE("docs/workshop.md's T4 row of chapter 08 quotes the bytes the split kernel asks for", "[ch08]") {
  fa_test::check_t4_row("08", {{{8, 64}, ch08::shared_bytes(CacheType::float32, 64, {8, 64})},
                               {{8, 32}, ch08::shared_bytes(CacheType::float32, 64, {8, 32})},
                               {{8, 16}, ch08::shared_bytes(CacheType::float32, 128, {8, 16})},
                               {{8, 64}, ch08::shared_bytes(CacheType::bf16, 128, {8, 64})}});
}
#endif

TEST_CASE("rows that see no key give zeros in O and -inf in L, never NaN", "[ch08][sanitizer]") {
  // Sequence 0 is empty; sequence 1 holds 2 keys for 4 causal new tokens, so its tokens 0 and 1 see
  // no key (token i sees keys j <= i + 2 - 4).
  const fa::Shape4 q{2, 4, 4, 64}, kv{2, 2, 2, 64};
  const fa::Tensor4<float> Q(q, fa::normal<float>(q.size(), 8100)), K(kv, fa::normal<float>(kv.size(), 8101)),
      V(kv, fa::normal<float>(kv.size(), 8102));
  const int splits = GENERATE(1, 3);
  const ch08::Result out =
      ch08::decode_attention(Q, ch08::paged_cache(K, V, {0, 2}, 16, 8103), {.causal = true, .splits = splits}, kDevice);
  for (std::size_t b = 0; b < 2; ++b) {
    for (std::size_t h = 0; h < 4; ++h) {
      for (std::size_t i = 0; i < 4; ++i) {
        const float L = out.L[(b * 4 + h) * 4 + i];
        const bool sees_none = b == 0 || i < 2;
        INFO("sequence " << b << " head " << h << " token " << i << ": L = " << L << ", splits " << splits);
        if (sees_none) {
          CHECK(L == -std::numeric_limits<float>::infinity());
        } else {
          CHECK(std::isfinite(L));
        }
        for (std::size_t d = 0; d < 64; ++d) {
          const float o = out.O.view()(b, h, i, d);
          CHECK(!std::isnan(o));
          if (sees_none) CHECK(o == 0.0f);
        }
      }
    }
  }
}

TEST_CASE("NaN in a key reaches exactly the rows that see it", "[ch08]") {
  const fa::Shape4 q{2, 4, 1, 64}, kv{2, 2, 100, 64};
  const fa::Tensor4<float> Q(q, fa::normal<float>(q.size(), 8200)), V(kv, fa::normal<float>(kv.size(), 8202));
  fa::Tensor4<float> K(kv, fa::normal<float>(kv.size(), 8201));
  K.view()(1, 0, 70, 3) = std::numeric_limits<float>::quiet_NaN();  // sequence 1, K/V head 0 (query heads 0, 1)
  const ch08::Result out =
      ch08::decode_attention(Q, ch08::paged_cache(K, V, {100, 100}, 48, 8203), {.splits = 4}, kDevice);
  for (std::size_t b = 0; b < 2; ++b) {
    for (std::size_t h = 0; h < 4; ++h) {
      INFO("sequence " << b << " head " << h);
      const bool sees_nan = b == 1 && h < 2;
      CHECK(std::isnan(out.L[b * 4 + h]) == sees_nan);
      CHECK(std::isnan(out.O.view()(b, h, 0, 10)) == sees_nan);
    }
  }
}

// [graded08a]: the grading test of the course's exercise 08a (docs/course.md), the combine against the
// float64 merge alone, so that it fails for the combine's own lines only.
TEST_CASE("the combine alone equals a float64 merge, empty partials included", "[ch08][sanitizer][graded08a]") {
  const int splits = GENERATE(1, 2, 3, 33, 128);
  const int head_dim = GENERATE(64, 128);
  const int rows = 6;
  ch08::Partials parts{splits, rows, head_dim,
                       fa::normal<float>(static_cast<std::size_t>(splits) * rows * head_dim, 8300),
                       fa::normal<float>(static_cast<std::size_t>(splits) * rows, 8301, 0.0, 4.0)};
  // Row 0: every partial empty (L = -inf, O = 0). Row 1: every other partial empty. Row 2: one
  // partial far above the rest (the others' weights underflow). Row 3: L of order 100.
  for (int s = 0; s < splits; ++s) {
    for (int r : {0, 1}) {
      if (r == 0 || s % 2 == 1) {
        parts.L[static_cast<std::size_t>(s) * rows + r] = -INFINITY;
        std::fill_n(parts.O.begin() + (static_cast<std::ptrdiff_t>(s) * rows + r) * head_dim, head_dim, 0.0f);
      }
    }
    parts.L[static_cast<std::size_t>(s) * rows + 3] += 100.0f;
  }
  parts.L[2] = 200.0f;
  const ch08::Merged merged = ch08::combine_partials(parts, nullptr, kDevice);

  // The merge in float64, as its two-pass formula: L = max + log sum exp(L_i - max), O = sum
  // exp(L_i - L) O_i. Bounds, for float32 with u = 2^-24: the merge is a convex combination of the
  // O_i with weights w_i = exp(L_i - L) made from `splits` rounded exponentials and sums, each
  // weight within about (splits + 4) u of its value, so each output element is within
  // 4 (splits + 4) u sum_i w_i |O_i| of the exact one (4: expf's own error, up to 2 ulp on a GPU,
  // and the division); L = m + log(l) is within u |L| + 4 (splits + 4) u. A lost rescale or a
  // wrong weight is off by 1e-2 or more.
  const double u = 0x1p-24;
  for (int r = 0; r < rows; ++r) {
    double max_L = -INFINITY;
    for (int s = 0; s < splits; ++s)
      max_L = std::max(max_L, static_cast<double>(parts.L[static_cast<std::size_t>(s) * rows + r]));
    double sum = 0.0;
    for (int s = 0; s < splits; ++s) {
      sum += max_L == -INFINITY ? 0.0 : std::exp(parts.L[static_cast<std::size_t>(s) * rows + r] - max_L);
    }
    const double L_ref = sum == 0.0 ? -INFINITY : max_L + std::log(sum);
    INFO("splits " << splits << ", head_dim " << head_dim << ", row " << r << ": L " << merged.L[r] << ", expected "
                   << L_ref);
    if (std::isinf(L_ref)) {
      CHECK(merged.L[r] == L_ref);
    } else {
      CHECK(std::fabs(merged.L[r] - L_ref) <= u * std::fabs(L_ref) + 4.0 * (splits + 4) * u);
    }
    for (int d = 0; d < head_dim; ++d) {
      double O_ref = 0.0, magnitude = 0.0;
      for (int s = 0; s < splits; ++s) {
        const std::size_t at = static_cast<std::size_t>(s) * rows + r;
        const double w = std::isinf(L_ref) ? 0.0 : std::exp(parts.L[at] - L_ref);
        O_ref += w * parts.O[at * head_dim + d];
        magnitude += w * std::fabs(parts.O[at * head_dim + d]);
      }
      const float O = merged.O[static_cast<std::size_t>(r) * head_dim + d];
      INFO("column " << d << ": O " << O << ", expected " << O_ref);
      REQUIRE(std::fabs(O - O_ref) <= 4.0 * (splits + 4) * u * magnitude);
    }
  }
}

TEST_CASE("folding partials into a running result one at a time equals merging them all at once", "[ch08]") {
  // What chapter 09's ring does: a running (O, L), and at every step one new partial folded in.
  const int head_dim = 64, rows = 5, splits = 7;
  const ch08::Partials all{splits, rows, head_dim,
                           fa::normal<float>(static_cast<std::size_t>(splits) * rows * head_dim, 8400),
                           fa::normal<float>(static_cast<std::size_t>(splits) * rows, 8401, 0.0, 3.0)};
  const ch08::Merged at_once = ch08::combine_partials(all, nullptr, kDevice);
  ch08::Merged running{std::vector<float>(static_cast<std::size_t>(rows) * head_dim, 0.0f),
                       std::vector<float>(rows, -INFINITY)};  // the empty result: O = 0, L = -inf
  for (int s = 0; s < splits; ++s) {
    const auto first = static_cast<std::ptrdiff_t>(s) * rows;
    const ch08::Partials one{
        1, rows, head_dim,
        std::vector<float>(all.O.begin() + first * head_dim, all.O.begin() + (first + rows) * head_dim),
        std::vector<float>(all.L.begin() + first, all.L.begin() + first + rows)};
    running = ch08::combine_partials(one, &running, kDevice);
  }
  // The same terms in the same order, but the running result is normalised (acc / l) after every
  // step and starts again from l = 1: a few roundings per step, about splits * 4 u in all relative to
  // the values (|O| ~ 1 here); a wrong fold (a missing rescale, l not 1) is off by 1e-1 or more.
  const double tolerance = 4.0 * splits * 4.0 * 0x1p-24;
  for (std::size_t k = 0; k < at_once.O.size(); ++k) {
    INFO("element " << k << ": folded " << running.O[k] << ", at once " << at_once.O[k]);
    REQUIRE(std::fabs(running.O[k] - at_once.O[k]) <= tolerance * (1.0 + std::fabs(at_once.O[k])));
  }
  for (int r = 0; r < rows; ++r)
    CHECK(std::fabs(running.L[r] - at_once.L[r]) <= tolerance * (1.0 + std::fabs(at_once.L[r])));
}

#if !FA_TEST_ON_GPU
TEST_CASE("the combine may write its result over its first partial", "[ch08]") {
  // launch_combine on simt's device memory (the CPU's), with O and L the first partial's own memory:
  // what a caller that keeps its running result as partial 0 does (each lane reads every value it
  // writes before it writes it).
  const int head_dim = 64, rows = 9, splits = 3;
  const std::vector<float> O_host = fa::normal<float>(static_cast<std::size_t>(splits) * rows * head_dim, 8450);
  const std::vector<float> L_host = fa::normal<float>(static_cast<std::size_t>(splits) * rows, 8451, 0.0, 3.0);
  const ch08::Merged apart = ch08::combine_partials({splits, rows, head_dim, O_host, L_host}, nullptr, fa::Device::cpu);
  simt::DeviceBuffer<float> O_parts{std::span<const float>(O_host)}, L_parts{std::span<const float>(L_host)};
  ch08::cpu::launch_combine(O_parts.data(), L_parts.data(), splits, rows, head_dim, O_parts.data(), L_parts.data(),
                            false, simt::LaunchMode::synchronous);
  const std::vector<float> O = O_parts.to_host(), L = L_parts.to_host();
  // The same arithmetic in the same order: the same bits.
  CHECK(std::equal(apart.O.begin(), apart.O.end(), O.begin()));
  CHECK(std::equal(apart.L.begin(), apart.L.end(), L.begin()));
}
#endif

TEST_CASE("the decode loop equals the last rows of chapter 05's causal forward", "[ch08][sanitizer]") {
  const std::size_t page_size = GENERATE(0u, 16u);
  const CacheType type = GENERATE(CacheType::float32, CacheType::bf16);
#if FA_SANITIZER_BUILD
  const std::size_t n = 40, steps = 3;
#else
  const std::size_t n = 100, steps = 6;
#endif
  const fa::Shape4 q{2, 4, n, 64}, kv{2, 2, n, 64};
  const std::uint64_t seed = 8500 + page_size + static_cast<std::uint64_t>(type);
  const fa::Tensor4<float> Q(q, fa::normal<float>(q.size(), seed)), K(kv, fa::normal<float>(kv.size(), seed + 1)),
      V(kv, fa::normal<float>(kv.size(), seed + 2));
  const ch08::Options options{.cache_type = type};
  const ch08::LoopResult loop = ch08::decode_loop(Q, K, V, steps, page_size, seed + 3, options, kDevice);
  REQUIRE(loop.plans.size() == steps);
  int most = 1;
  for (const ch08::Plan& p : loop.plans) most = std::max(most, p.split.splits);
  const ch08::Agreement agreement = ch08::check_decode_loop(Q, K, V, steps, options, most, loop, kDevice);
  for (const ch08::SequenceCheck& s : agreement.sequences) {
    INFO("page_size " << page_size << ", " << ch08::to_string(type) << ", sequence " << s.sequence << ": O "
                      << fa::describe(s.O) << ", bound " << s.O_bound << "; L off by " << s.L_error << ", bound "
                      << s.L_bound);
    CHECK(s.pass);
  }
}

TEST_CASE("the paged cache puts key j of sequence b on page block_table[b][j / page_size], the pages shuffled",
          "[ch08]") {
  const fa::Shape4 kv{3, 2, 50, 4};
  const fa::Tensor4<float> K(kv, fa::normal<float>(kv.size(), 8600)), V(kv, fa::normal<float>(kv.size(), 8601));
  const std::vector<int> lengths{50, 0, 33};
  const ch08::KVCache cache = ch08::paged_cache(K, V, lengths, 16, 8602);
  REQUIRE(cache.pages_per_seq == 4);
  REQUIRE(cache.K.shape == fa::Shape4{3 * 4 + 1, 2, 16, 4});
  std::vector<int> pages = cache.block_table;
  std::sort(pages.begin(), pages.end());
  CHECK(std::adjacent_find(pages.begin(), pages.end()) == pages.end());  // no page twice
  std::vector<int> identity(cache.block_table.size());
  std::iota(identity.begin(), identity.end(), 0);
  CHECK(cache.block_table != identity);  // shuffled: reading page b * pages_per_seq + n is wrong
  for (std::size_t b = 0; b < 3; ++b) {
    for (std::size_t j = 0; j < 50; ++j) {
      const auto page = static_cast<std::size_t>(cache.block_table[b * 4 + j / 16]);
      for (std::size_t g = 0; g < 2; ++g) {
        const float k = cache.K.view()(page, g, j % 16, 1), v = cache.V.view()(page, g, j % 16, 2);
        INFO("sequence " << b << " key " << j << " head " << g);
        if (j < static_cast<std::size_t>(lengths[b])) {
          CHECK(k == K.view()(b, g, j, 1));
          CHECK(v == V.view()(b, g, j, 2));
        } else {
          CHECK(std::isnan(k));  // past the sequence's length: NaN, so that reading it shows
        }
      }
    }
  }
  // append_token writes the next row of the sequence's page and grows its length.
  ch08::KVCache grown = cache;
  ch08::append_token(grown, 2, std::vector<float>(8, 1.5f), std::vector<float>(8, -2.5f));
  CHECK(grown.cache_seqlens[2] == 34);
  CHECK(grown.K.view()(static_cast<std::size_t>(grown.block_table[2 * 4 + 2]), 1, 1, 3) ==
        1.5f);  // key 33: page 2, row 1
}

TEST_CASE("the split count follows FlashAttention-2's rule", "[ch08]") {
  // The worked case: 32 blocks on 132 SMs fill 24% of a wave; 2, 3 and 4 splits give 0.48, 0.73
  // and 0.97 of one (128 blocks). No count can beat an efficiency of 1, and 0.85 x 1 > 0.73, so 4
  // is the smallest count within 85% of the best: 4.
  CHECK(ch08::choose_splits(32, 132, 512).splits == 4);
  // Enough blocks already (at least 80% of a wave): one split.
  CHECK(ch08::choose_splits(106, 132, 512).splits == 1);
  CHECK(ch08::choose_splits(105, 132, 512).splits > 1);
  // Nothing to split: no key, or one tile of keys.
  CHECK(ch08::choose_splits(1, 132, 0).splits == 1);
  CHECK(ch08::choose_splits(1, 132, 1).splits == 1);
  // The rule itself, checked by brute force over many cases: the chosen count is eligible (it gives
  // its splits fewer tiles than one split fewer would), within 85% of the best efficiency, and no
  // smaller eligible count is; and it never exceeds 128, the SMs or the tiles.
  const auto tiles_per = [](int tiles, int s) { return (tiles + s - 1) / s; };
  for (int blocks : {1, 2, 3, 5, 8, 13, 32, 64, 100}) {
    for (int sms : {8, 108, 132}) {
      for (int tiles : {2, 3, 7, 16, 100, 2048}) {
        const ch08::SplitChoice c = ch08::choose_splits(blocks, sms, tiles);
        INFO("blocks " << blocks << ", sms " << sms << ", tiles " << tiles << ": " << c.splits << " splits");
        if (blocks >= 0.8 * sms) {
          CHECK(c.splits == 1);
          continue;
        }
        const int most = std::min({128, sms, tiles});
        const auto eligible = [&](int s) { return s == 1 || tiles_per(tiles, s) != tiles_per(tiles, s - 1); };
        const auto efficiency = [&](int s) {
          const double waves = static_cast<double>(blocks) * s / sms;
          return waves / std::ceil(waves);
        };
        double best = 0.0;
        for (int s = 1; s <= most; ++s) best = eligible(s) ? std::max(best, efficiency(s)) : best;
        CHECK(c.splits <= most);
        CHECK(eligible(c.splits));
        CHECK(efficiency(c.splits) >= 0.85 * best);
        for (int s = 1; s < c.splits; ++s) CHECK(!(eligible(s) && efficiency(s) >= 0.85 * best));
      }
    }
  }
  CHECK(ch08::explain(ch08::choose_splits(32, 132, 512)) ==
        "32 blocks on 132 SMs: 24% of one wave -> 4 splits: 128 blocks, 0.97 waves, 97% efficiency");
}

TEST_CASE("the kernels move exactly the bytes the traffic model counts", "[ch08]") {
#if !SIMT_PROFILED_KERNELS || FA_TEST_ON_GPU
  FA_SKIP("this build has no profiled copy of the kernels (a sanitizer preset, a compiler other than GCC, or the GPU)");
#else
  // One split (the kernel writes O and L), several (the combine reads the partials back), a paged
  // cache whose tiles cross pages, the causal mask's skipped tiles, two row blocks, bf16.
  const Case c = GENERATE(Case{4, 2, 1, 64, false, {0, 1, 17, 150}, 48, 1, CacheType::float32},
                          Case{4, 2, 1, 64, false, {0, 1, 17, 150}, 48, 3, CacheType::float32},
                          Case{8, 1, 5, 64, true, {3, 100}, 16, 2, CacheType::bf16},
                          Case{8, 2, 1, 128, false, {200}, 0, std::nullopt, CacheType::fp16});
  const std::size_t seq_len_k = static_cast<std::size_t>(*std::max_element(c.lengths.begin(), c.lengths.end()));
  const fa::Shape4 q{c.lengths.size(), c.heads, c.seq_len_q, c.head_dim},
      kv{c.lengths.size(), c.kv_heads, seq_len_k, c.head_dim};
  const fa::Tensor4<float> Q(q, fa::normal<float>(q.size(), 8700)), K(kv, fa::normal<float>(kv.size(), 8701)),
      V(kv, fa::normal<float>(kv.size(), 8702));
  const ch08::KVCache cache =
      c.page_size == 0 ? ch08::dense_cache(K, V, c.lengths) : ch08::paged_cache(K, V, c.lengths, c.page_size, 8703);
  simt::profile::start();
  const ch08::Result out =
      ch08::decode_attention(Q, cache, {.causal = c.causal, .cache_type = c.type, .splits = c.splits});
  simt::profile::stop();
  const auto kernels = simt::profile::results();
  const ch08::DecodeTraffic model = ch08::decode_traffic(out.plan.problem, c.lengths);
  const simt::profile::KernelProfile* split = simt::profile::find_kernel(kernels, "split_kv_kernel");
  REQUIRE(split != nullptr);
  INFO(describe(c, 8700));
  CHECK(split->global_load.bytes == model.split.loads);
  CHECK(split->global_store.bytes == model.split.stores);
  const simt::profile::KernelProfile* combine = simt::profile::find_kernel(kernels, "combine_kernel");
  CHECK((combine == nullptr) == (out.plan.problem.splits == 1));
  if (combine != nullptr) {
    CHECK(combine->global_load.bytes == model.combine.loads);
    CHECK(combine->global_store.bytes == model.combine.stores);
  }
  // With one row block and no mask the cache's bytes are read once: K and V of every key, no more.
  if (!c.causal && out.plan.problem.row_blocks() == 1) {
    CHECK(model.split.loads == model.cache + model.table +
                                   4 * out.plan.problem.batch * out.plan.problem.kv_heads * out.plan.problem.splits +
                                   out.plan.problem.splits * q.size() * ch08::element_bytes(c.type));
  }
  // The shared memory of the split kernel is free of bank conflicts.
  CHECK(split->shared_load.bank_conflicts == 0);
  CHECK(split->shared_store.bank_conflicts == 0);
#endif
}

TEST_CASE("decoding refuses what it cannot run, naming what is accepted", "[ch08]") {
  const fa::Shape4 q{2, 6, 1, 64}, kv{2, 4, 10, 64};
  const fa::Tensor4<float> Q(q, 0.5f), K(kv, 0.5f), V(kv, 0.5f);
  const auto refused = [&](const fa::Tensor4<float>& query, const ch08::KVCache& cache, const ch08::Options& options,
                           std::initializer_list<std::string_view> parts) {
    fa_test::check_refused([&] { (void)ch08::decode_attention(query, cache, options, kDevice); }, parts);
  };
  // 6 heads on 4 K/V heads.
  refused(Q, ch08::dense_cache(K, V), {}, {"heads 6 is not a multiple of kv_heads 4"});
  const fa::Tensor4<float> Q4(fa::Shape4{2, 4, 1, 64}, 0.5f);
  ch08::KVCache cache = ch08::paged_cache(K, V, {10, 3}, 4, 1);
  // A length above the sequence's pages.
  ch08::KVCache too_long = cache;
  too_long.cache_seqlens[1] = 13;
  refused(Q4, too_long, {}, {"cache_seqlens[1] = 13 is not accepted; give 0 .. 12"});
  // A block table entry that is not a page of the pool.
  ch08::KVCache bad_table = cache;
  bad_table.block_table[1] = 99;
  refused(Q4, bad_table, {}, {"block_table[0][1] = 99"});
  // Splits out of range; a head dim and a tile that are not compiled.
  refused(Q4, cache, {.splits = 0}, {"splits 0", "give 1 .. 128"});
  refused(Q4, cache, {.splits = 129}, {"splits 129", "give 1 .. 128"});
  const fa::Tensor4<float> K32(fa::Shape4{2, 4, 10, 32}, 0.5f);
  refused(fa::Tensor4<float>(fa::Shape4{2, 4, 1, 32}, 0.5f), ch08::dense_cache(K32, K32), {},
          {"head_dim 32 is not supported; the kernel is compiled for head_dim 64, 128"});
  refused(Q4, cache, {.tile = fa::Tile{64, 64}}, {"64x64", "8x64, 32x64"});
  // A value fp16 cannot hold.
  fa::Tensor4<float> big = Q4;
  big.values[3] = 1e5f;
  refused(big, cache, {.cache_type = CacheType::fp16}, {"does not fit in fp16"});
  // The combine: sizes that do not fit.
  const ch08::Partials wrong{2, 3, 64, std::vector<float>(10), std::vector<float>(6)};
  fa_test::check_refused([&] { (void)ch08::combine_partials(wrong, nullptr, kDevice); }, {"must hold 384 and 6"});
  CHECK_THROWS_AS(ch08::paged_cache(K, V, {}, 0, 1), std::invalid_argument);
}

#if !FA_TEST_ON_GPU
TEST_CASE("asking for the GPU where there is none is a clear error", "[ch08]") {
  if (fa::gpu_available()) FA_SKIP("this machine has a GPU: the error cannot be shown here");
  const fa::Shape4 q{1, 2, 1, 64}, kv{1, 2, 4, 64};
  const fa::Tensor4<float> Q(q, 0.5f), K(kv, 0.5f);
  CHECK_THROWS_AS(ch08::decode_attention(Q, ch08::dense_cache(K, K), {}, fa::Device::gpu), std::runtime_error);
}
#endif
