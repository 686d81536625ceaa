// simt_async_copy_race: a double buffer filled by cp.async without the barrier at the end of each
// tile, the race a GPU shows only now and then and the CPU emulation never shows in the numbers, and
// how simt's race checker finds it on every run, with both lines.
//
// Each block of 4 warps sums 8 tiles of 512 floats. Tile j+1 is copied (cp.async) into one half of
// a double buffer while the block reads tile j from the other half; thread t reads the floats
// t, t + 128, t + 256, t + 384 of the tile, which four different warps copied. Without the
// __syncthreads() at the end of each tile, a warp that is ahead starts the copy of tile j+2 into
// the half that a slower warp is still reading for tile j: on a GPU the slower warp then adds a
// value of tile j+2. On the CPU a cp.async lands only when its thread waits for it, after every
// thread has passed the barrier of tile j+1, so the sums come out right every time.
//
//   simt_async_copy_race            the sums, then the race checker's report: write-after-read
//   simt_async_copy_race --fixed    the barrier put back: 0 hazards
//   simt_async_copy_race --schedule reverse    the same report under any schedule
//
// The program is a profiled copy (every load and store calls simt's hooks) where the build has
// them; elsewhere (asan, tsan) it prints the sums and says that the race checker is not available.
// docs/simt.md ("Racecheck") walks through the report.
#include <cstddef>
#include <exception>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "common/simt/simt.h"
#include "common/simt/tools/racecheck.h"
#include "examples/example_flags.h"

namespace demo::SIMT_BACKEND {

constexpr int kThreads = 128;  // 4 warps
constexpr int kTile = 512;     // floats: one 16-byte cp.async per thread
constexpr int kTiles = 8;

// out[block * 128 + t] = the sum over the block's tiles of floats t, t + 128, t + 256, t + 384.
__global__ void tiled_sum(const float* in, float* out, bool end_barrier) {
  __shared__ __align__(16) float buffer[2][kTile];
  const int t = static_cast<int>(threadIdx.x);
  const float* tiles = in + static_cast<std::size_t>(blockIdx.x) * kTiles * kTile;
  simt::cp_async_16(&buffer[0][4 * t], tiles + 4 * t);  // tile 0
  simt::cp_async_commit_group();
  float sum = 0.0f;
  for (int j = 0; j < kTiles; ++j) {
    if (j + 1 < kTiles) {  // start tile j+1 into the other half, then wait for tile j only
      simt::cp_async_16(&buffer[(j + 1) % 2][4 * t], tiles + (j + 1) * kTile + 4 * t);
      simt::cp_async_commit_group();
      simt::cp_async_wait_group<1>();
    } else {
      simt::cp_async_wait_group<0>();
    }
    __syncthreads();  // every thread's part of tile j has landed
    for (int k = 0; k < 4; ++k) sum += buffer[j % 2][t + kThreads * k];
    if (end_barrier) __syncthreads();  // every warp is done with tile j before tile j+2 is copied over it
  }
  out[blockIdx.x * kThreads + threadIdx.x] = sum;
}

}  // namespace demo::SIMT_BACKEND

int main(int argc, char** argv) {
  namespace kernel = demo::SIMT_BACKEND;
  CLI::App app{"A cp.async double buffer without its end-of-tile barrier, and simt's race checker."};
  example::Flags flags{.blocks = 2};
  example::add_flags(app, flags, kernel::kThreads, 1024, "the end-of-tile __syncthreads()");
  CLI11_PARSE(app, argc, argv);
  const unsigned blocks = flags.blocks;
  const bool fixed = flags.fixed;

  try {
    const std::string schedule = example::apply_schedule(flags);
    const bool check = simt::racecheck::available();
    if (check) simt::racecheck::start();
    // Inputs: small integers, whose float sums are exact in any order.
    std::vector<float> in(std::size_t{blocks} * kernel::kTiles * kernel::kTile);
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>((i * 7) % 13);
    simt::DeviceBuffer<float> d_in{std::span<const float>(in)}, d_out(std::size_t{blocks} * kernel::kThreads);
    simt::launch<kernel::tiled_sum>(dim3(blocks), dim3(kernel::kThreads), 0, d_in.data(), d_out.data(), fixed);
    if (check) simt::racecheck::stop();
    const std::vector<float> out = d_out.to_host();

    unsigned wrong = 0;
    for (unsigned b = 0; b < blocks; ++b) {
      for (int t = 0; t < kernel::kThreads; ++t) {
        float expected = 0.0f;
        for (int j = 0; j < kernel::kTiles; ++j) {
          for (int k = 0; k < 4; ++k)
            expected += in[(b * kernel::kTiles + j) * kernel::kTile + t + kernel::kThreads * k];
        }
        wrong += out[b * kernel::kThreads + t] != expected;  // exact: sums of small integers
      }
    }
    fmt::print("{} blocks x 128 threads, {} tiles each, end-of-tile barrier {}, schedule {}\n", blocks, kernel::kTiles,
               fixed ? "present" : "MISSING", schedule);
    fmt::print("sums: {} of {} wrong (on the CPU a cp.async lands only at its wait: the race cannot change them)\n\n",
               wrong, blocks * kernel::kThreads);
    if (!check) {
      fmt::print("simt's race checker is {}\n", simt::racecheck::unavailable_reason());
      return 0;
    }
    const simt::racecheck::Findings findings = simt::racecheck::findings();
    fmt::print("{}", simt::racecheck::format_report(findings));
    return findings.clean() ? 0 : 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}
