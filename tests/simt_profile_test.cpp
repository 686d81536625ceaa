// simt's memory profile: the counting rule on hand-worked patterns (common/simt/tools/detail/profile_counting.h),
// the profiled kernels of simt_profile_kernels.cuh against the same patterns counted by hand, and
// chapter 05's kernel against the bytes its traffic model says it moves.
//
// Every comparison is exact: the counts are integers, and each expected one is worked out in the
// comment beside it (docs/profiling.md draws the shared-memory ones).
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "catch.h"
#include "chapters/05_flash_attention_2/flash_attention_2.h"
#include "chapters/05_flash_attention_2/lab/traffic_model.h"
#include "common/random.h"
#include "common/simt/tools/detail/profile_counting.h"
#include "common/simt/tools/profile.h"
#if SIMT_PROFILED_KERNELS
#include "simt_profile_kernels.h"
#endif

namespace {

using simt::profile::KernelProfile;
using simt::profile::WarpAccess;

// A warp whose lane l names address base + l * stride_bytes, `bytes` bytes, for the lanes in mask.
WarpAccess strided(std::uint64_t stride_bytes, std::uint32_t bytes, std::uint32_t mask = 0xffffffffu,
                   std::uint64_t base = 0) {
  WarpAccess a;
  for (unsigned l = 0; l < 32; ++l) {
    if ((mask >> l) & 1u) a.set(l, base + l * stride_bytes, bytes);
  }
  return a;
}

}  // namespace

TEST_CASE("global sectors of hand-worked warp instructions", "[simt]") {
  // 32 floats side by side: 128 bytes, 4 sectors of 32.
  CHECK(simt::profile::global_sectors(strided(4, 4)) == 4);
  // Every other float: 256 bytes spanned, each sector still touched: 8.
  CHECK(simt::profile::global_sectors(strided(8, 4)) == 8);
  // One lane: one sector.
  CHECK(simt::profile::global_sectors(strided(4, 4, 1u)) == 1);
  // 8-byte and 16-byte elements side by side: 256 and 512 bytes, 8 and 16 sectors.
  CHECK(simt::profile::global_sectors(strided(8, 8)) == 8);
  CHECK(simt::profile::global_sectors(strided(16, 16)) == 16);
  // Shifted by 16 bytes, 128 contiguous bytes straddle 5 sectors.
  CHECK(simt::profile::global_sectors(strided(4, 4, 0xffffffffu, 16)) == 5);
  // Every lane on the same float: 1 sector; no lane active: 0.
  CHECK(simt::profile::global_sectors(strided(0, 4)) == 1);
  CHECK(simt::profile::global_sectors(WarpAccess{}) == 0);
}

TEST_CASE("shared wavefronts and bank conflicts of hand-worked warp instructions", "[simt]") {
  struct Case {
    std::uint64_t stride_words;
    std::uint32_t bytes;
    std::uint64_t wavefronts;
    std::uint64_t conflicts;
  };
  // 4 bytes: stride 1 -> 32 banks once; 2 -> lanes l, l+16 share a bank (2); 32 -> all in bank 0
  // (32); 33 -> bank l (1); 0 -> one word, broadcast (1).
  // 8 bytes, stride 2 words: each half-warp covers 32 words, one per bank: 2 (the minimum).
  // 8 bytes, stride 4 words: a half-warp spans 64 words, two per bank: 2 + 2 = 4, 2 conflicts.
  // 16 bytes, stride 4: each quarter-warp covers 32 words: 4 (the minimum).
  // 16 bytes, stride 8: a quarter-warp spans 64 words, 2 per bank: 8, 4 conflicts.
  // 16 bytes, stride 0: every phase reads the same four words: 1 each, 4 (the minimum).
  const std::vector<Case> cases = {{1, 4, 1, 0}, {2, 4, 2, 1}, {32, 4, 32, 31}, {33, 4, 1, 0}, {0, 4, 1, 0},
                                   {2, 8, 2, 0}, {4, 8, 4, 2}, {4, 16, 4, 0},   {8, 16, 8, 4}, {0, 16, 4, 0}};
  for (const Case& c : cases) {
    INFO("stride " << c.stride_words << " words, " << c.bytes << " bytes per lane");
    const simt::profile::SharedCost cost = simt::profile::shared_cost(strided(c.stride_words * 4, c.bytes));
    CHECK(cost.wavefronts == c.wavefronts);
    CHECK(cost.bank_conflicts == c.conflicts);
  }
  // Two lanes on one word (lanes 0 and 1 on word 0, lane l > 1 on word l): a broadcast, 1.
  WarpAccess two = strided(4, 4);
  two.set(1, 0, 4);
  CHECK(simt::profile::shared_cost(two).wavefronts == 1);
  // Only lanes 0 and 16 active at stride 2: both in bank 0, different words: 2 wavefronts.
  CHECK(simt::profile::shared_cost(strided(8, 4, 0x00010001u)).wavefronts == 2);
}

#if SIMT_PROFILED_KERNELS

namespace {

// Records `run` alone and returns the profile of its one kernel.
template <class F>
KernelProfile profile_of(F&& run) {
  simt::profile::start();
  run();
  simt::profile::stop();
  const std::vector<KernelProfile> kernels = simt::profile::results();
  REQUIRE(kernels.size() == 1);
  return kernels[0];
}

namespace k = simt_profile_test::cpu_profiled;

}  // namespace

TEST_CASE("profiled float loads: coalesced, strided, one lane", "[simt]") {
  // 2 warps, each one load instruction and one store instruction of 32 floats.
  const KernelProfile coalesced = profile_of([] { k::load_floats(1, 32, 2); });
  CHECK(coalesced.launches == 1);
  CHECK(coalesced.global_load == simt::profile::GlobalCounts{2, 2 * 128, 2 * 4});
  CHECK(coalesced.global_store == simt::profile::GlobalCounts{2, 2 * 128, 2 * 4});
  CHECK(coalesced.shared_load.instructions == 0);
  CHECK(coalesced.shared_store.instructions == 0);
  const KernelProfile stride2 = profile_of([] { k::load_floats(2, 32, 1); });
  CHECK(stride2.global_load == simt::profile::GlobalCounts{1, 128, 8});
  const KernelProfile one_lane = profile_of([] { k::load_floats(1, 1, 1); });
  CHECK(one_lane.global_load == simt::profile::GlobalCounts{1, 4, 1});
}

TEST_CASE("profiled 8- and 16-byte loads", "[simt]") {
  CHECK(profile_of([] { k::load_wide(8); }).global_load == simt::profile::GlobalCounts{1, 256, 8});
  CHECK(profile_of([] { k::load_wide(16); }).global_load == simt::profile::GlobalCounts{1, 512, 16});
}

TEST_CASE("profiled shared loads at strides 1, 2, 32, 33, 0, static and dynamic", "[simt]") {
  struct Case {
    unsigned stride, bytes;
    std::uint64_t wavefronts, conflicts;
  };
  const std::vector<Case> cases = {{1, 4, 1, 0}, {2, 4, 2, 1}, {32, 4, 32, 31}, {33, 4, 1, 0}, {0, 4, 1, 0},
                                   {2, 8, 2, 0}, {4, 8, 4, 2}, {4, 16, 4, 0},   {8, 16, 8, 4}};
  for (const bool dynamic : {false, true}) {
    for (const Case& c : cases) {
      INFO((dynamic ? "dynamic" : "static") << " shared, stride " << c.stride << ", " << c.bytes << " bytes");
      const KernelProfile p = profile_of([&] { k::shared_strided(c.stride, c.bytes, dynamic); });
      CHECK(p.shared_load == simt::profile::SharedCounts{1, 32u * c.bytes, c.wavefronts, c.conflicts});
      // The fill: lane l stores words l, l + 32, ... of 32 * 33 + 4 words: 33 full instructions
      // and one of 4 lanes, each one wavefront.
      CHECK(p.shared_store == simt::profile::SharedCounts{34, (32 * 33 + 4) * 4, 34, 0});
    }
  }
}

TEST_CASE("profiled shared load with two lanes on one word is one wavefront", "[simt]") {
  const KernelProfile p = profile_of([] { k::shared_two_lanes_one_word(); });
  CHECK(p.shared_load == simt::profile::SharedCounts{1, 128, 1, 0});
}

TEST_CASE("profiled divergent code: each branch is an instruction of the lanes that take it", "[simt]") {
  // Two loads of 16 lanes each, 4-byte floats every 8 bytes: 128 bytes spanned, 4 sectors each.
  const KernelProfile p = profile_of([] { k::divergent(); });
  CHECK(p.global_load == simt::profile::GlobalCounts{2, 2 * 64, 2 * 4});
  CHECK(p.global_store == simt::profile::GlobalCounts{1, 128, 4});
}

TEST_CASE("profiled loop with uneven trip counts: the k-th execution of each lane is one instruction", "[simt]") {
  // k = 0: 32 lanes (4 sectors); k = 1: the 24 lanes with l % 4 >= 1, spread over in[32 .. 63]
  // (4 sectors); k = 2: 16 lanes (4 sectors); k = 3: 8 lanes, in[99], in[103], ... (4 sectors).
  const KernelProfile p = profile_of([] { k::uneven_loop(); });
  CHECK(p.global_load == simt::profile::GlobalCounts{4, 4 * (32 + 24 + 16 + 8), 16});
}

TEST_CASE("profiled kernels: stack accesses are dropped, shuffles end an instruction", "[simt]") {
  // Two loads of 32 floats (the shuffle between them splits the loop's executions) and one store;
  // the local array and the shuffle's own copies live on the CUDA thread's stack: not counted.
  const KernelProfile p = profile_of([] { k::stack_and_shuffle(); });
  CHECK(p.global_load == simt::profile::GlobalCounts{2, 256, 8});
  CHECK(p.global_store == simt::profile::GlobalCounts{1, 128, 4});
  CHECK(p.shared_load.instructions == 0);
  CHECK(p.shared_store.instructions == 0);
}

TEST_CASE("profiled ldmatrix and cp.async count the accesses the hardware makes", "[simt]") {
  // cp.async: 32 lanes x 16 bytes from global (512 bytes, 16 sectors) into shared rows; ldmatrix_x4:
  // 32 rows of 16 bytes, served a matrix (8 rows, a quarter-warp's worth) at a time. Rows 4 words
  // apart: each matrix covers all 32 banks once, 4 wavefronts in all. Rows 32 words apart: the 8
  // rows of a matrix fall on the same 4 banks, 8 wavefronts per matrix, 32 in all, 28 conflicts.
  for (const unsigned row_words : {4u, 32u}) {
    INFO("rows " << row_words << " words apart");
    const KernelProfile p = profile_of([&] { k::ldmatrix_cp_async(row_words); });
    const std::uint64_t wavefronts = row_words == 4 ? 4 : 32;
    CHECK(p.global_load == simt::profile::GlobalCounts{1, 512, 16});
    CHECK(p.shared_store == simt::profile::SharedCounts{1, 512, wavefronts, wavefronts - 4});
    CHECK(p.shared_load == simt::profile::SharedCounts{1, 512, wavefronts, wavefronts - 4});
  }
}

TEST_CASE("profiled counts are summed over launches", "[simt]") {
  const KernelProfile p = profile_of([] {
    for (int i = 0; i < 3; ++i) k::load_floats(1, 32, 2);
  });
  CHECK(p.launches == 3);
  CHECK(p.global_load == simt::profile::GlobalCounts{6, 6 * 128, 6 * 4});
}

TEST_CASE("the profile's JSON has every key of every kernel", "[simt]") {
  simt::profile::start();
  k::divergent();
  simt::profile::stop();
  const std::string json = simt::profile::to_json(simt::profile::results());
  for (const char* key : {"\"kernels\"", "\"kernel\"", "\"launches\": 1", "\"global_load\"", "\"global_store\"",
                          "\"shared_load\"", "\"shared_store\"", "\"instructions\": 2", "\"bytes\": 128",
                          "\"sectors\": 8", "\"wavefronts\"", "\"bank_conflicts\"", "\"worst_sites\""}) {
    INFO(json);
    CHECK(json.find(key) != std::string::npos);
  }
  // A site's file where simt reads source lines (libdw); without them (macOS, the clang preset) a
  // site has no file, and the JSON says so with an empty one.
  CHECK(json.find(SIMT_SOURCE_LINES ? "simt_profile_kernels.cuh" : "\"file\": \"\"") != std::string::npos);
  // Hopper's keys only for a kernel that issued a TMA copy or a wgmma (tests/10_hopper_test.cpp).
  CHECK(json.find("tma_load") == std::string::npos);
  CHECK(simt::profile::format_table(simt::profile::results()).find("TMA") == std::string::npos);
}

TEST_CASE("chapter 05's measured global bytes equal the bytes its traffic model says the kernel moves", "[simt]") {
  struct Case {
    int batch_heads, seq_len_q, seq_len_k, head_dim;
    fa::Tile tile;
    bool causal;
  };
  // Self-attention shapes divisible by the tiles and not; unequal lengths; the causal mask.
  const std::vector<Case> cases = {{2, 256, 256, 64, {64, 64}, false}, {1, 100, 100, 32, {64, 32}, false},
                                   {2, 77, 77, 64, {32, 64}, false},   {1, 70, 130, 32, {64, 64}, false},
                                   {1, 130, 70, 32, {32, 64}, true},   {3, 96, 96, 32, {64, 32}, true}};
  std::uint64_t random_seed = 11;
  for (const Case& c : cases) {
    INFO("batch_heads " << c.batch_heads << ", seq_len_q " << c.seq_len_q << ", seq_len_k " << c.seq_len_k
                        << ", head_dim " << c.head_dim << ", tile " << c.tile.Br << "x" << c.tile.Bc
                        << (c.causal ? ", causal" : ""));
    const fa::Shape4 q_shape{1, static_cast<std::size_t>(c.batch_heads), static_cast<std::size_t>(c.seq_len_q),
                             static_cast<std::size_t>(c.head_dim)};
    const fa::Shape4 k_shape{1, static_cast<std::size_t>(c.batch_heads), static_cast<std::size_t>(c.seq_len_k),
                             static_cast<std::size_t>(c.head_dim)};
    const fa::Tensor4<float> Q(q_shape, fa::normal<float>(q_shape.size(), random_seed++));
    const fa::Tensor4<float> K(k_shape, fa::normal<float>(k_shape.size(), random_seed++));
    const fa::Tensor4<float> V(k_shape, fa::normal<float>(k_shape.size(), random_seed++));
    simt::profile::start();
    ch05::flash_attention_2(Q, K, V, {std::nullopt, c.causal, c.tile}, fa::Device::cpu);
    simt::profile::stop();
    const std::vector<KernelProfile> kernels = simt::profile::results();
    REQUIRE(kernels.size() == 1);
    const ch05::HbmBytes model =
        ch05::fa2_kernel_bytes({c.batch_heads, c.seq_len_q, c.seq_len_k, c.head_dim, c.tile.Br, c.tile.Bc, c.causal});
    CHECK(kernels[0].global_load.bytes == model.q_read + model.k_read + model.v_read);
    CHECK(kernels[0].global_store.bytes == model.o_write + model.stats_write);
    if (c.seq_len_q == c.seq_len_k && !c.causal) {
      // And the "no L2 reuse" walk of the model, per head, times the heads (L aside).
      const ch05::Traffic walk = ch05::walk_fa2({c.seq_len_q, c.head_dim, c.tile.Br, c.tile.Bc, 4, 4});
      CHECK(kernels[0].global_load.bytes ==
            c.batch_heads * (walk.moved.q_read + walk.moved.k_read + walk.moved.v_read));
      CHECK(kernels[0].global_store.bytes - model.stats_write == c.batch_heads * walk.moved.o_write);
    }
  }
}

#else

TEST_CASE("where the profile is not built, starting it says why", "[simt]") {
  CHECK_FALSE(simt::profile::available());
  CHECK_THROWS_AS(simt::profile::start(), std::logic_error);
  CHECK_FALSE(simt::profile::unavailable_reason().empty());
}

#endif
