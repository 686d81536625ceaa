// figures/: the figures of docs/, drawn from the chapters' own functions.
//
// What this adds to the chapters: nothing they compute, only pictures of it. Every number in a
// figure comes from a chapter's function (the chapter 02 trace, the chapter 03 recurrence, the
// chapter 05 tile walks and traffic model) or, for figure 3's measured bars and figure 5, from
// docs/benchmarks.md and docs/benchmarks-cpu.md, so a figure cannot disagree with the code: tests/figures_test.cpp
// regenerates them and fails when they differ from the committed files.
//
// The figures, one function each (each returns the whole SVG file as a string):
//   1. online-softmax.svg             online_softmax_figure(): animated; ch02::online_softmax_trace
//                                     of the worked example (1, 3, 5, 2 in blocks of 2), then of a
//                                     seeded random row
//   2. flash-attention-2-tiles.svg    tiles_figure(): animated; ch05::walk_fa2 beside ch05::walk_fa1,
//                                     tile by tile, with both byte counters
//   3. hbm-traffic.svg                traffic_figure(): static; the traffic table's three sizes by
//                                     ch05::traffic_row, on a log scale, and measured DRAM bytes
//                                     when docs/benchmarks.md has them
//   4. worked-example.svg             worked_example_figure(): static;
//                                     ch03::trace_online_weighted_sum of the worked example
//   5. softmax-bench.svg              softmax_bench_figure(): static; chapter 02's benchmark,
//                                     safe / online time per row size, from docs/benchmarks-cpu.md
//   6. mma-fragments.svg              mma_fragments_figure(): static; the A, B and C/D fragments of
//                                     mma.m16n8k16 and ldmatrix .x4's row addresses, read off
//                                     common/simt's CPU emulation (mma_fragment_map)
//   7. bank-conflicts.svg             bank_conflicts_figure(): static; the 32 banks of shared memory
//                                     for one warp at strides 1, 2, 33, 32 and 0, counted by
//                                     simt::profile::shared_cost (common/simt/tools/detail/profile_counting.h)
//   8. backward-tiles.svg             backward_tiles_figure(): static; ch07::walk_backward, causal:
//                                     the tiles one block of each backward kernel touches
//   9. decoding-merge.svg             decoding_merge_figure(): animated; chapter 08's split kernel and
//                                     combine on one query row: three chunks' partials, then their merge
//  10. decoding-waves.svg             decoding_waves_figure(): static; the blocks of a decoding step on
//                                     132 SMs, without splits and with ch08::choose_splits' count
//  11. ring-steps.svg                 ring_steps_figure(): animated; chapter 09's ring on 4 ranks,
//                                     zigzag, causal, a step at a time: the K/V shard each rank holds
//                                     (sliding in from the rank before) and the pairs it sees
//                                     (ch09::chunks_of_rank, ch09::owner_at_step, ch09::visible)
//  12. hopper-descriptor.svg          hopper_descriptor_figure(): static; the wgmma descriptor of K_j
//                                     that chapter 10's kernel gave simt (hopper_trace), its fields
//                                     found and read by simt::wgmma_descriptor and
//                                     simt::decode_wgmma_descriptor, and where the 128-byte swizzle
//                                     (simt::swizzled_address) puts each 16-byte chunk of K_j's rows
//  13. hopper-pipeline.svg            hopper_pipeline_figure(): animated; chapter 10's producer, its
//                                     mbarriers and its two consumer warpgroups, event by event in the
//                                     order simt ran them (hopper_trace)
//  14. write_figures() writes all thirteen into a folder.
//
// Source: the book's own figures, computed by its code: the worked example (chapter 03) and the
// traffic table (chapter 05's --traffic: one head, forward pass, BF16, blocks of 128).
// Run it: cmake --build build/default --target figures   (rewrites docs/figures/*.svg)
//         or build/default/bin/make_figures <folder> [--benchmarks docs/benchmarks.md]
//                                              [--cpu-benchmarks docs/benchmarks-cpu.md]
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "figures/measured_traffic.h"
#include "figures/softmax_bench_data.h"

namespace figures {

// The worked example: four keys, scores 1, 3, 5, 2 and values 10, 20, 30, 40, in blocks of two.
inline const std::vector<double> worked_scores{1.0, 3.0, 5.0, 2.0};
inline const std::vector<double> worked_values{10.0, 20.0, 30.0, 40.0};
inline constexpr std::size_t worked_block = 2;

// Figure 1's second row: random_row_length scores drawn by fa::normal(n, random_row_seed, 0,
// random_row_stddev), in blocks of random_row_block. The seed was picked so that the max rises
// more than once; std::normal_distribution differs between standard libraries, so another one
// draws another row (figures_test says so when that is why figure 1 differs).
inline constexpr std::size_t random_row_length = 32;
inline constexpr std::size_t random_row_block = 4;
inline constexpr std::uint64_t random_row_seed = 39;
inline constexpr double random_row_stddev = 1.5;
std::vector<double> random_row();

// Figure 1 (online-softmax.svg). The figure functions throw nothing for their built-in
// inputs (std::logic_error from svg.h would mean a mistake in the figure's own code).
std::string online_softmax_figure();

// Figure 2 (flash-attention-2-tiles.svg).
std::string tiles_figure();

// Figure 3 (hbm-traffic.svg). measured: the table read from docs/benchmarks.md, or nullopt where
// there is none (the figure then says so).
std::string traffic_figure(const std::optional<MeasuredTraffic>& measured);

// Figure 4 (worked-example.svg).
std::string worked_example_figure();

// Figure 5 (softmax-bench.svg). measured: the table read from docs/benchmarks-cpu.md, or nullopt
// where there is none (the figure then says how to make it).
std::string softmax_bench_figure(const std::optional<SoftmaxBench>& measured);

// Which lane holds each element of the mma.m16n8k16 fragments, and as which element of the PTX
// ISA's figures (a0..a7, b0..b3, c0..c3; element e sits in register e / 2, bits 0-15 for even e).
// A[row][col] (16x16), B[k][n] (16x8), C[row][col] (16x8, also D's layout).
struct MmaFragmentMap {
  struct Holder {
    unsigned lane, element;
  };
  std::array<std::array<Holder, 16>, 16> A;
  std::array<std::array<Holder, 8>, 16> B;
  std::array<std::array<Holder, 8>, 16> C;
};

// Runs one warp of common/simt's emulation (ldmatrix, then mma) and reads the map off its
// registers (figures/mma_fragments_figure.cpp). Throws what simt::launch throws (never, for this
// fixed kernel, unless the emulation is broken).
MmaFragmentMap mma_fragment_map();

// Figure 6 (mma-fragments.svg).
std::string mma_fragments_figure();

// Figure 7 (bank-conflicts.svg).
std::string bank_conflicts_figure();

// Figure 8 (backward-tiles.svg).
std::string backward_tiles_figure();

// Figure 9 (decoding-merge.svg): one query row of merge_keys keys (head_dim 64, Q and K drawn by
// fa::normal from merge_seed, ten keys made like the query), softmax scale merge_scale, three
// splits. Figure 10 (decoding-waves.svg): a cache of waves_context keys.
inline constexpr std::size_t merge_keys = 160;
inline constexpr std::uint64_t merge_seed = 8;
inline constexpr double merge_scale = 0.25;
inline constexpr std::size_t waves_context = 32768;
std::string decoding_merge_figure();
std::string decoding_waves_figure();

// Figure 11 (ring-steps.svg): ring_ranks ranks, ring_rows rows.
inline constexpr std::size_t ring_ranks = 4;
inline constexpr std::size_t ring_rows = 16;
std::string ring_steps_figure();

// Figures 12 and 13: one block of chapter 10's kernel (ch10::hopper_attention on the CPU, bf16,
// head dim hopper_head_dim, hopper_rows_q queries, hopper_rows_k keys: hopper_rows_k / Bc key tiles
// through the ring of stages, each stage filled three times), run under simt's trace listener
// (common/simt/tools/detail/observer.h, TraceScope: the schedule in_order, one host thread), and what it did,
// in the order simt ran it. The inputs' values change nothing in the trace; they are all 1.
inline constexpr std::size_t hopper_rows_q = 128;
inline constexpr std::size_t hopper_rows_k = 384;
inline constexpr std::size_t hopper_head_dim = 64;

// The lanes of figure 13: the producer's thread, the mbarriers' phases, each consumer warpgroup's
// first thread (its 128 threads do the same).
enum class HopperLane { producer, barriers, consumer0, consumer1 };
enum class HopperWhat {
  tma_q,        // producer: TMA of Q_i issued (on q_full)
  wait_empty,   // producer: its wait on empty[s] has returned
  tma_kv,       // producer: expect_tx on full[s], then the TMA of K_j and V_j into stage s issued
  q_full_done,  // barriers: q_full's phase completed (Q_i has landed)
  full_done,    // barriers: full[s]'s phase completed (K_j, V_j have landed)
  empty_done,   // barriers: empty[s]'s phase completed (all 256 consumer threads arrived)
  wait_q,       // consumer: its wait on q_full has returned
  wait_full,    // consumer: its wait on full[s] has returned
  scores,       // consumer: the wgmma of S = Q_i K_j^T (one per 16 columns of the head dim)
  softmax,      // consumer: the wgmma_wait_group that hands it S has returned; the softmax follows
  pv,           // consumer: the wgmma of O += P V_j (one per 16 keys)
  release,      // consumer: its arrival on empty[s]
};
struct HopperEvent {
  HopperLane lane;
  HopperWhat what;
  int tile = -1;   // j, where the event is about a key tile
  int stage = -1;  // s, the stage of the ring that tile j went through
  int count = 1;   // the instructions it stands for (TMA boxes, wgmma)
};
struct HopperTrace {
  std::vector<HopperEvent> events;  // in the order simt ran them: event k at step k
  int stages = 0;                   // the ring's stages that the producer loaded into
  int tiles = 0;
  unsigned producer_thread = 0;                // the thread that issued the copies
  std::array<unsigned, 2> consumer_threads{};  // the first thread of each consumer warpgroup
  // The B descriptors of the wgmma of S = Q_i K_j^T for tile descriptor_tile (stage
  // descriptor_stage) by consumer 0, one per 16 columns of the head dim, as the kernel passed them.
  int descriptor_tile = 1;
  int descriptor_stage = -1;
  std::vector<std::uint64_t> k_descriptors;
};
// Throws std::runtime_error where the trace does not read as chapter 10's pipeline (a changed
// kernel), and what ch10::hopper_attention throws.
HopperTrace hopper_trace();
std::string hopper_descriptor_figure();
std::string hopper_pipeline_figure();

// One figure file: its name in docs/figures/ and its content.
struct Figure {
  std::string name;
  std::string svg;
};

// All thirteen figures. benchmarks, cpu_benchmarks: the paths of docs/benchmarks.md and
// docs/benchmarks-cpu.md; a missing file means no measurements. Throws std::invalid_argument when
// a file holds a measured table that cannot be read (the reader's message), std::runtime_error
// when a file exists but cannot be read.
std::vector<Figure> make_figures(const std::filesystem::path& benchmarks, const std::filesystem::path& cpu_benchmarks);

// Writes make_figures(benchmarks, cpu_benchmarks) into folder (created if missing), one file
// each. Throws as make_figures, and std::runtime_error naming the file when one cannot be written.
void write_figures(const std::filesystem::path& folder, const std::filesystem::path& benchmarks,
                   const std::filesystem::path& cpu_benchmarks);

}  // namespace figures
