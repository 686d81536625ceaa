// Chapter 05's kernel under simt's race checker (common/simt/tools/racecheck.h): no race between threads,
// warps or blocks, and no read of memory that nothing wrote. Every tile of the head dim, on a single query against
// a ragged key tile, tails, and both sides of the causal diagonal with rows that see no key,
// causal or not, at head dim 64; the other head dims on one shape (the barriers and tiles do not
// depend on the head dim, the loops over it do). Built where the build has profiled copies
// (tests/CMakeLists.txt): not under the asan and tsan presets.
#include <cstdint>
#include <utility>

#include "attention_inputs.h"
#include "catch.h"
#include "chapters/05_flash_attention_2/flash_attention_2.h"
#include "common/attention_shapes.h"
#include "racecheck_support.h"

TEST_CASE("the kernel has no race and reads no unwritten memory (simt's race checker)", "[ch05][racecheck]") {
  fa_test::require_race_free([] {
    std::uint64_t launches = 0;
    const auto run = [&](std::size_t seq_len_q, std::size_t seq_len_k, std::size_t head_dim, bool causal) {
      const auto in = fa_test::make_inputs(1, 1, seq_len_q, seq_len_k, head_dim, fa::default_scale(head_dim),
                                           fa_test::Scores::normal, 5700 + seq_len_q + seq_len_k + head_dim);
      for (const fa::Tile& tile : fa::tiles_of(ch05::kCompiled, static_cast<int>(head_dim))) {
        (void)ch05::flash_attention_2(in.Q, in.K, in.V, {.causal = causal, .tile = tile}, fa::Device::cpu);
        ++launches;
      }
    };
    for (const auto& [seq_len_q, seq_len_k] : {std::pair{1, 257}, std::pair{33, 33}, std::pair{203, 113}}) {
      for (const bool causal : {false, true}) run(seq_len_q, seq_len_k, 64, causal);
    }
    for (const std::size_t head_dim : {32u, 128u}) run(33, 33, head_dim, true);
    return launches;
  });
}
