// Chapter 07's kernels under simt's race checker (common/simt/tools/racecheck.h), both dQ methods: no
// race between threads, warps or blocks, and no read of memory that nothing wrote, on the short
// list of shapes (a single query, a ragged key tile, tails, both sides of the causal diagonal, rows
// that see no key), causal or not, at head dim 32; and the tiles of a T4 at head dims 64 and 128 on
// one shape. This is where a dQ added with += instead of atomicAdd shows:
// blocks of different key blocks write the same element. Built where the build has profiled copies
// (tests/CMakeLists.txt): not under the asan and tsan presets.
#include <cstdint>

#include "attention_inputs.h"
#include "catch.h"
#include "chapters/05_flash_attention_2/flash_attention_2.h"
#include "chapters/07_backward/backward.h"
#include "common/random.h"
#include "racecheck_support.h"

TEST_CASE("the backward kernels have no race and read no unwritten memory (simt's race checker)", "[ch07][racecheck]") {
  fa_test::require_race_free([] {
    std::uint64_t launches = 0;
    const double scale = 0.25;
    for (const auto& [seq_len_q, seq_len_k] : fa_test::short_sequence_lengths()) {
      for (const bool causal : {false, true}) {
        const auto in = fa_test::make_inputs(1, 1, seq_len_q, seq_len_k, 32, scale, fa_test::Scores::normal,
                                             7700 + seq_len_q + seq_len_k);
        const fa::Tensor4<float> dO(in.Q.shape, fa::normal<float>(in.Q.shape.size(), 7799));
        const auto forward =
            ch05::flash_attention_2(in.Q, in.K, in.V, {.scale = scale, .causal = causal}, fa::Device::cpu);
        ++launches;
        for (const auto dq : {ch07::DqMethod::atomic, ch07::DqMethod::deterministic}) {
          (void)ch07::flash_attention_2_backward(in.Q, in.K, in.V, forward.O, forward.L, dO,
                                                 {.scale = scale, .causal = causal, .dq = dq}, fa::Device::cpu);
          launches += dq == ch07::DqMethod::atomic ? 2 : 3;  // preprocess, dK dV (and dQ)
        }
      }
    }
    // The tiles of a GPU with 64 KiB per block (kSmallGpuShapes), on one shape with partial tiles of
    // both kinds and rows that see no key.
    for (const fa::KernelShape& k : ch07::kSmallGpuShapes) {
      const auto d = static_cast<std::size_t>(k.head_dim);
      const auto in = fa_test::make_inputs(1, 1, 40, 23, d, scale, fa_test::Scores::normal, 7750 + d);
      const fa::Tensor4<float> dO(in.Q.shape, fa::normal<float>(in.Q.shape.size(), 7798));
      const auto forward = ch05::flash_attention_2(in.Q, in.K, in.V, {.scale = scale, .causal = true}, fa::Device::cpu);
      ++launches;
      for (const auto dq : {ch07::DqMethod::atomic, ch07::DqMethod::deterministic}) {
        (void)ch07::flash_attention_2_backward(in.Q, in.K, in.V, forward.O, forward.L, dO,
                                               {.scale = scale, .causal = true, .dq = dq, .tile = k.tile},
                                               fa::Device::cpu);
        launches += dq == ch07::DqMethod::atomic ? 2 : 3;
      }
    }
    return launches;
  });
}
