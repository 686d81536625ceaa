// Chapter 06's kernel under simt's race checker (common/simt/tools/racecheck.h): no race between threads,
// warps or blocks, and no read of memory that nothing wrote, on the short list of shapes (a single
// query, a ragged key tile, tails, both sides of the causal diagonal, rows that see no key), both
// head dims, both tiles, causal or not, bf16 and fp16 taking turns. This is where a missing
// end-of-tile barrier shows: the cp.async of tile j+2 into the buffer that another warp's ldmatrix
// may still be reading for tile j. Built where the build has profiled copies
// (tests/CMakeLists.txt): not under the asan and tsan presets.
#include <cstdint>

#include "attention_inputs.h"
#include "catch.h"
#include "chapters/06_tensor_cores/tensor_cores.h"
#include "common/attention_shapes.h"
#include "racecheck_support.h"

TEST_CASE("the kernel has no race and reads no unwritten memory (simt's race checker)", "[ch06][racecheck]") {
  fa_test::require_race_free([] {
    std::uint64_t launches = 0;
    int turn = 0;
    for (const auto& [seq_len_q, seq_len_k] : fa_test::short_sequence_lengths()) {
      for (const int head_dim : ch06::kHeadDims) {
        const auto d = static_cast<std::size_t>(head_dim);
        for (const bool causal : {false, true}) {
          const ch06::ElementType element = turn++ % 2 == 0 ? ch06::ElementType::bf16 : ch06::ElementType::fp16;
          const auto raw = fa_test::make_inputs(1, 1, seq_len_q, seq_len_k, d, fa::default_scale(d),
                                                fa_test::Scores::normal, 6700 + seq_len_q + seq_len_k + d);
          const auto Q = ch06::round_to(raw.Q, element, "Q");
          const auto K = ch06::round_to(raw.K, element, "K");
          const auto V = ch06::round_to(raw.V, element, "V");
          for (const fa::Tile& tile : ch06::kTileShapes) {
            (void)ch06::tensor_core_attention(Q, K, V, {.causal = causal, .tile = tile, .element = element},
                                              fa::Device::cpu);
            ++launches;
          }
        }
      }
    }
    return launches;
  });
}
