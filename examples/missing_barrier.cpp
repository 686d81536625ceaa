// simt_missing_barrier: a block sum with one __syncthreads() forgotten, and how the CPU emulation
// shows it. Each block of 256 threads loads 256 values into shared memory and adds them by a tree;
// without the barrier after the loads, a thread can add a slot that its owner has not loaded yet.
//
//   simt_missing_barrier                        in_order schedule: thread 0 runs first, wrong sums
//   SIMT_SCHEDULE=reverse simt_missing_barrier  the environment chooses, unless --schedule does
//   simt_missing_barrier --schedule reverse     thread 255 first: every load happens in time, right
//   simt_missing_barrier --fixed                the barrier put back: right under every schedule
//   simt_missing_barrier --racecheck            simt's race checker names both lines, whatever the order
//   build/tsan/bin/simt_missing_barrier         ThreadSanitizer reports the race, whatever the order
#include <cmath>
#include <cstddef>
#include <span>
#include <string>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "common/random.h"
#include "common/simt/simt.h"
#include "common/simt/tools/racecheck.h"
#include "examples/example_flags.h"

namespace demo::SIMT_BACKEND {

constexpr unsigned block_size = 256;

// out[blockIdx.x] = sum of the block's 256 values. With `fixed` false, the barrier between the
// loads and the first addition is skipped: the bug this program is about.
__global__ void block_sum(const float* in, float* out, bool fixed) {
  __shared__ float tile[block_size];
  const unsigned t = threadIdx.x;
  tile[t] = in[blockIdx.x * block_size + t];
  if (fixed) __syncthreads();  // every load is in shared memory before anyone adds
  for (unsigned stride = block_size / 2; stride > 0; stride /= 2) {
    if (t < stride) tile[t] += tile[t + stride];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = tile[0];
}

}  // namespace demo::SIMT_BACKEND

int main(int argc, char** argv) {
  CLI::App app{"A block sum with a __syncthreads() missing, run on the CPU through common/simt."};
  example::Flags flags{.blocks = 4};
  example::add_flags(app, flags, demo::SIMT_BACKEND::block_size, 4096, "the missing __syncthreads()");
  bool racecheck = false;
  app.add_flag("--racecheck", racecheck,
               "check the kernel with simt's race checker: its report comes at the end, exit status 1 if it finds a "
               "hazard");
  CLI11_PARSE(app, argc, argv);
  const unsigned blocks = flags.blocks;
  const bool fixed = flags.fixed;

  try {
    if (racecheck) simt::racecheck::enable();  // throws, saying why, where this build has no profiled copy
    const std::string used_name = example::apply_schedule(flags);
    const auto in = fa::uniform<float>(std::size_t{blocks} * demo::SIMT_BACKEND::block_size, 2024, 0.0, 1.0);
    simt::DeviceBuffer<float> d_in{std::span<const float>(in)}, d_out(blocks);
    simt::launch<demo::SIMT_BACKEND::block_sum>(dim3(blocks), dim3(demo::SIMT_BACKEND::block_size), 0, d_in.data(),
                                                d_out.data(), fixed);
    const auto out = d_out.to_host();

    fmt::print("block sum of {} x 256 values, barrier {}, schedule {}\n", blocks, fixed ? "present" : "MISSING",
               used_name);
    unsigned wrong = 0;
    for (unsigned b = 0; b < blocks; ++b) {
      double expected = 0;
      for (unsigned t = 0; t < demo::SIMT_BACKEND::block_size; ++t)
        expected += in[b * demo::SIMT_BACKEND::block_size + t];
      // 256 float additions of values in [0, 1): the tree is off by at most ~1e-4 relative.
      const bool ok = std::fabs(out[b] - expected) <= 1e-4 * expected;
      wrong += !ok;
      fmt::print("  block {:3}: kernel {:10.4f}   host {:10.4f}   {}\n", b, out[b], expected, ok ? "ok" : "WRONG");
    }
    fmt::print("{} of {} blocks wrong\n", wrong, blocks);
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}
