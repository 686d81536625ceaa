// simt_mbarrier_ring: a producer warp fills a ring of two stages by TMA and a consumer warpgroup
// sums what arrives, synchronised by a "full" and an "empty" mbarrier per stage, as chapter 10's
// kernel is; and the two mistakes of an mbarrier that hang a GPU, shown on the CPU.
//
// Each of 6 tiles (64 rows of 64 floats, 16 KiB) is copied by one TMA into stage j % 2; the producer
// announces its bytes with mbarrier_arrive_expect_tx on the stage's "full" mbarrier, and waits on
// the "empty" one before it refills a stage. Consumer thread t adds row t / 2, half t % 2 of every
// tile, and arrives on "empty" when it is done with the stage.
//
//   simt_mbarrier_ring                               the sums, right
//   simt_mbarrier_ring --mistake wrong-parity        the producer waits on "empty" with the
//       consumers' parity instead of the opposite one: its first wait is for a phase that only the
//       consumers' first release completes, and they wait for the producer's first tile. On a GPU
//       the kernel hangs; simt stops and names both waits.
//   simt_mbarrier_ring --mistake short-expect-tx     the producer announces 16 bytes fewer than the
//       copy brings: the phase never completes. On a GPU the kernel hangs; simt stops and says why.
//   simt_mbarrier_ring --mistake long-expect-tx      16 bytes more: the same
//   simt_mbarrier_ring --mistake early-release --racecheck    a consumer releases the stage (arrives
//       on "empty") before it has read it: the producer may refill it under the reads. The sums are
//       right on the CPU, where a copy lands only when someone waits for it; simt's race checker
//       names the read and the TMA copy that may overwrite it
//
// docs/simt.md ("Hopper on the CPU") walks through the reports.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "common/simt/simt.h"
#include "common/simt/tools/racecheck.h"
#include "examples/example_flags.h"

namespace demo::SIMT_BACKEND {

constexpr int kRows = 64, kCols = 64, kTiles = 6, kStages = 2;
constexpr unsigned kTileBytes = kRows * kCols * sizeof(float);

// mistake: 0 none, 1 the producer's wrong parity, 2 expect 16 bytes fewer, 3 expect 16 bytes more,
// 4 the consumers release a stage before they read it.
// out[t]: consumer thread t's sum.
__global__ void __launch_bounds__(256, 1)
    ring_sum(const __grid_constant__ simt::TensorMap tiles, int mistake, float* __restrict__ out) {
  SIMT_DYNAMIC_SHARED(float, stage);  // kStages tiles, one after the other (1024-byte aligned on the CPU)
  __shared__ __align__(8) std::uint64_t full[kStages];
  __shared__ __align__(8) std::uint64_t empty[kStages];
  const unsigned t = threadIdx.x;
  if (t == 0) {
    for (int s = 0; s < kStages; ++s) {
      simt::mbarrier_init(&full[s], 1);
      simt::mbarrier_init(&empty[s], 128);
    }
    simt::fence_mbarrier_init();
  }
  __syncthreads();
  if (t < 128) {  // the producer warpgroup: thread 0 does the work
    if (t != 0) return;
    const unsigned bytes = mistake == 2 ? kTileBytes - 16 : mistake == 3 ? kTileBytes + 16 : kTileBytes;
    for (int j = 0; j < kTiles; ++j) {
      const int s = j % kStages;
      const unsigned parity = ((j / kStages) & 1) ^ (mistake == 1 ? 0 : 1);  // right: the first round passes at once
      simt::mbarrier_wait_parity(&empty[s], parity);
      simt::mbarrier_arrive_expect_tx(&full[s], bytes);
      simt::cp_async_bulk_tensor_2d_global_to_shared(stage + s * kRows * kCols, &tiles, 0, kRows * j, &full[s]);
    }
    return;
  }
  const unsigned c = t - 128, row = c / 2, half = c % 2;  // the consumer warpgroup
  float sum = 0.0f;
  for (int j = 0; j < kTiles; ++j) {
    const int s = j % kStages;
    simt::mbarrier_wait_parity(&full[s], (j / kStages) & 1);
    if (mistake == 4) simt::mbarrier_arrive(&empty[s]);  // too early: the reads below are not done
    for (int k = 0; k < kCols / 2; ++k) sum += stage[s * kRows * kCols + row * kCols + half * (kCols / 2) + k];
    if (mistake != 4) simt::mbarrier_arrive(&empty[s]);
  }
  out[c] = sum;
}

}  // namespace demo::SIMT_BACKEND

int main(int argc, char** argv) {
  namespace kernel = demo::SIMT_BACKEND;
  CLI::App app{"A TMA ring with full and empty mbarriers, and the mistakes that hang a GPU."};
  example::Flags flags;
  std::string mistake = "none";
  const std::vector<std::string> mistakes = {"wrong-parity", "short-expect-tx", "long-expect-tx", "early-release"};
  example::add_mistake_flags(app, flags, mistake, mistakes);
  bool racecheck = false;
  app.add_flag("--racecheck", racecheck,
               "check the kernel with simt's race checker: its report comes at the end, exit status 1 if it finds a "
               "hazard");
  CLI11_PARSE(app, argc, argv);
  const int which = example::mistake_number(mistake, mistakes);

  try {
    if (racecheck) simt::racecheck::enable();  // throws, saying why, where this build has no profiled copy
    const std::string schedule = example::apply_schedule(flags);
    // Inputs: small integers, whose float sums are exact in any order.
    std::vector<float> in(std::size_t{kernel::kTiles} * kernel::kRows * kernel::kCols);
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>((i * 7) % 13);
    simt::DeviceBuffer<float> d_in{std::span<const float>(in)}, d_out(128);
    const simt::TensorMap map =
        simt::make_tensor_map_2d(d_in.data(), kernel::kCols, kernel::kTiles * kernel::kRows, kernel::kCols,
                                 kernel::kCols, kernel::kRows, simt::Swizzle::none);
    const std::size_t shared = kernel::kStages * kernel::kTileBytes;
    simt::set_max_dynamic_shared_bytes<kernel::ring_sum>(shared);
    fmt::print("{} tiles of {} x {} floats through {} stages, mistake {}, schedule {}\n", kernel::kTiles, kernel::kRows,
               kernel::kCols, kernel::kStages, mistake, schedule);
    simt::launch<kernel::ring_sum>(dim3(1), dim3(256), shared, map, which, d_out.data());
    const std::vector<float> out = d_out.to_host();
    unsigned wrong = 0, nan = 0;
    for (unsigned c = 0; c < 128; ++c) {
      float expected = 0.0f;
      for (int j = 0; j < kernel::kTiles; ++j) {
        for (int k = 0; k < kernel::kCols / 2; ++k) {
          expected += in[(std::size_t{static_cast<unsigned>(j)} * kernel::kRows + c / 2) * kernel::kCols +
                         (c % 2) * (kernel::kCols / 2) + static_cast<unsigned>(k)];
        }
      }
      wrong += out[c] != expected;  // exact: sums of small integers
      nan += std::isnan(out[c]);
    }
    fmt::print("sums: {} of 128 wrong ({} NaN)\n", wrong, nan);
    return wrong == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}
