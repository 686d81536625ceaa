// Chapter 04's three kernels under simt's race checker (common/simt/tools/racecheck.h): no race between
// threads, warps or blocks, and no read of memory that nothing wrote, on the short list of shapes
// (a single query, a ragged key tile, tails, both sides of the causal diagonal, rows that see no
// key), causal or not. Built where the build has profiled copies (tests/CMakeLists.txt): not under
// the asan and tsan presets.
#include <cstdint>

#include "attention_inputs.h"
#include "catch.h"
#include "chapters/04_naive_attention/naive_attention.h"
#include "common/attention_shapes.h"
#include "racecheck_support.h"

TEST_CASE("the three kernels have no race and read no unwritten memory (simt's race checker)", "[ch04][racecheck]") {
  fa_test::require_race_free([] {
    std::uint64_t launches = 0;
    for (const auto& [seq_len_q, seq_len_k] : fa_test::short_sequence_lengths()) {
      for (const bool causal : {false, true}) {
        const auto in = fa_test::make_inputs(1, 2, seq_len_q, seq_len_k, 16, fa::default_scale(16),
                                             fa_test::Scores::normal, 4700 + seq_len_q + seq_len_k);
        (void)ch04::naive_attention(in.Q, in.K, in.V, {.causal = causal}, fa::Device::cpu);
        launches += 3;  // scores, softmax, P V
      }
    }
    return launches;
  });
}
