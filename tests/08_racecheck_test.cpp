// Chapter 08's kernels under simt's race checker (common/simt/tools/racecheck.h): no race between threads,
// warps or blocks, and no read of memory that nothing wrote, in the split kernel and in the combine.
// Sequences of lengths 0, 1, 17 and 150 in one batch (an empty sequence, a single key, a ragged
// tile, chunks that end inside pages and tiles), a paged cache whose pages divide the tile (16) and
// one whose pages do not (48), and the dense cache; one split (the split kernel writes O itself)
// and several (partials, then the combine); one new token and four causal ones, so that both tiles
// run (8 and 32 packed rows); both head dims and the three cache types taking turns; the float32
// tiles of a T4 (kSmallGpuShapes) on one paged case. And the
// combine alone: writing over its first partial, and folding a partial into a running result
// (chapter 09's use). Built where the build has profiled copies (tests/CMakeLists.txt): not under
// the asan and tsan presets.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <tuple>
#include <vector>

#include "attention_inputs.h"
#include "catch.h"
#include "chapters/08_decoding/decoding.h"
#include "common/random.h"
#include "common/simt/simt.h"
#include "racecheck_support.h"

TEST_CASE("the split kernel and the combine have no race and read no unwritten memory (simt's race checker)",
          "[ch08][racecheck]") {
  fa_test::require_race_free([] {
    std::uint64_t launches = 0;
    const std::vector<int> lengths{0, 1, 17, 150};
    const ch08::CacheType types[] = {ch08::CacheType::float32, ch08::CacheType::bf16, ch08::CacheType::fp16};
    int turn = 0;
    for (const std::size_t page_size : {0u, 16u, 48u}) {
      for (const std::optional<int> splits : {std::optional<int>(1), std::optional<int>(3)}) {
        // (heads, kv_heads, seq_len_q): 2 x 1 packed rows in a tile of 8; 8 x 4 in a tile of 32.
        for (const auto& [heads, kv_heads, seq_len_q] : {std::tuple{4u, 2u, 1u}, std::tuple{16u, 2u, 4u}}) {
          const std::size_t head_dim = turn % 2 == 0 ? 64 : 128;
          const ch08::CacheType type = types[turn % 3];
          const auto seed = static_cast<std::uint64_t>(8800 + turn++);
          const fa::Shape4 q{lengths.size(), heads, seq_len_q, head_dim}, kv{lengths.size(), kv_heads, 150, head_dim};
          const fa::Tensor4<float> Q(q, fa::normal<float>(q.size(), seed)),
              K(kv, fa::normal<float>(kv.size(), seed + 1)), V(kv, fa::normal<float>(kv.size(), seed + 2));
          const ch08::KVCache cache =
              page_size == 0 ? ch08::dense_cache(K, V, lengths) : ch08::paged_cache(K, V, lengths, page_size, seed + 3);
          const ch08::Result out = ch08::decode_attention(
              Q, cache, {.causal = seq_len_q > 1, .cache_type = type, .splits = splits}, fa::Device::cpu);
          launches += out.plan.problem.splits == 1 ? 1 : 2;  // the split kernel (and the combine)
        }
      }
    }
    // The tiles of a float32 cache on a GPU with 64 KiB per block (kSmallGpuShapes): 4 causal new
    // tokens of a group of 2 (one block of 8 rows) over a paged cache, three splits.
    for (const fa::KernelShape& k : ch08::kSmallGpuShapes) {
      const auto d = static_cast<std::size_t>(k.head_dim);
      const fa::Shape4 q{lengths.size(), 4, 4, d}, kv{lengths.size(), 2, 150, d};
      const fa::Tensor4<float> Q(q, fa::normal<float>(q.size(), 8850)), K(kv, fa::normal<float>(kv.size(), 8851)),
          V(kv, fa::normal<float>(kv.size(), 8852));
      const ch08::Result out = ch08::decode_attention(Q, ch08::paged_cache(K, V, lengths, 16, 8853),
                                                      {.causal = true, .splits = 3, .tile = k.tile}, fa::Device::cpu);
      launches += out.plan.problem.splits == 1 ? 1 : 2;
    }
    // The combine alone: writing over its first partial (O and L the first partial's own memory, as
    // a caller that keeps its running result as partial 0 does), with a row whose partials all saw
    // no key; and folding one partial into a running result.
    const int rows = 9, head_dim = 64, splits = 3;
    const std::vector<float> O_host = fa::normal<float>(static_cast<std::size_t>(splits) * rows * head_dim, 8901);
    std::vector<float> L_host = fa::normal<float>(static_cast<std::size_t>(splits) * rows, 8902);
    for (int s = 0; s < splits; ++s) L_host[static_cast<std::size_t>(s) * rows + 2] = -INFINITY;
    simt::DeviceBuffer<float> O_parts{std::span<const float>(O_host)}, L_parts{std::span<const float>(L_host)};
    ch08::cpu_profiled::launch_combine(O_parts.data(), L_parts.data(), splits, rows, head_dim, O_parts.data(),
                                       L_parts.data(), false, simt::LaunchMode::synchronous);
    ++launches;
    const ch08::Partials partial{1, rows, head_dim, fa::normal<float>(static_cast<std::size_t>(rows) * head_dim, 8903),
                                 fa::normal<float>(rows, 8904)};
    const std::vector<float> merged_O = O_parts.to_host(), merged_L = L_parts.to_host();  // partial 0: the merge
    const ch08::Merged running{{merged_O.begin(), merged_O.begin() + rows * head_dim},
                               {merged_L.begin(), merged_L.begin() + rows}};
    (void)ch08::combine_partials(partial, &running, fa::Device::cpu);
    ++launches;
    return launches;
  });
}

TEST_CASE("a partial row that the split kernel did not write is caught: the combine reads unwritten memory",
          "[ch08][racecheck]") {
  // The run poisons the partials, O and L before the split kernel (DeviceBuffer::poison: NaN, and
  // unwritten for the race checker), so a split kernel that skips a row of its partial O leaves the
  // row unwritten, and the combine's read of it is an uninitialised read. Here the partials come from
  // the host, and row 5 of partial 1 is left as such a kernel would leave it: poisoned, as poison()
  // does to a whole buffer (observer::host_wrote with written = false). A fill with NaN instead
  // would count as written, and nothing would be reported: the blind spot poison() closes.
  simt::racecheck::start();  // before the buffers: it follows what the host writes into them
  const int rows = 8, head_dim = 64, splits = 2;
  const std::vector<float> O_host = fa::normal<float>(static_cast<std::size_t>(splits) * rows * head_dim, 8905);
  const std::vector<float> L_host = fa::normal<float>(static_cast<std::size_t>(splits) * rows, 8906);
  simt::DeviceBuffer<float> O_parts{std::span<const float>(O_host)}, L_parts{std::span<const float>(L_host)};
  simt::DeviceBuffer<float> O(static_cast<std::size_t>(rows) * head_dim), L(rows);
  O.poison();
  L.poison();
  float* skipped = O_parts.data() + static_cast<std::size_t>(rows + 5) * head_dim;
  std::fill(skipped, skipped + head_dim, std::numeric_limits<float>::quiet_NaN());
  simt::observer::host_wrote(skipped, head_dim * sizeof(float), false);

  ch08::cpu_profiled::launch_combine(O_parts.data(), L_parts.data(), splits, rows, head_dim, O.data(), L.data(), false,
                                     simt::LaunchMode::synchronous);
  simt::racecheck::stop();
  const simt::racecheck::Findings f = simt::racecheck::findings();
  INFO(simt::racecheck::format_report(f));
  const simt::racecheck::Hazard* h = simt::racecheck::find(f, "uninitialised global read", "combine_kernel");
  REQUIRE(h != nullptr);
  // The row's head_dim words, each read once: in one report per reading instruction (one with GCC's
  // loop; two with Clang, which unrolls the two columns per lane into two loads).
  std::uint64_t reads = 0;
  for (const simt::racecheck::Hazard& each : f.hazards) {
    if (each.kind == h->kind && each.kernel == h->kernel) reads += each.count;
  }
  CHECK(reads == static_cast<std::uint64_t>(head_dim));
  CHECK(f.errors() + f.warnings() == 0);  // and nothing else
}
