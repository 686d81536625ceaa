// simt_bank_conflicts: one warp reads shared memory at shared[lane * stride] (stride in 4-byte
// words), `bytes` bytes per lane, and the profile counts the wavefronts and bank conflicts of that
// one instruction as Nsight Compute would: the exercise every CUDA course sets.
//
//   simt_bank_conflicts --stride 1 --profile     1 wavefront: 32 lanes, 32 banks
//   simt_bank_conflicts --stride 2 --profile     2 wavefronts: lanes l and l + 16 share a bank
//   simt_bank_conflicts --stride 32 --profile    32 wavefronts: every lane in bank 0
//   simt_bank_conflicts --stride 33 --profile    1 wavefront: the +1 padding of a 32-wide tile
//   simt_bank_conflicts --stride 0 --profile     1 wavefront: one word, broadcast to all lanes
//   simt_bank_conflicts --stride 2 --bytes 8 --profile --profile-json conflicts.json
//
// Without --profile it prints each lane's word and bank and the count that the rule of
// common/simt/tools/detail/profile_counting.h predicts; with --profile, what the profiled kernel measured.
// docs/profiling.md draws the banks for these strides.
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "common/profile_cli.h"
#include "common/simt/simt.h"
#include "common/simt/tools/detail/profile_counting.h"

namespace demo::SIMT_BACKEND {

// One warp: lane l loads Bytes bytes at shared word l * stride and stores them to out[l].
// The shared array holds 32 lanes of the largest stride accepted (32 words) plus 4 words.
constexpr unsigned kSharedWords = 32 * 33 + 4;

template <class T>
__global__ void read_strided(const T* in, T* out, unsigned stride) {
  __shared__ __align__(16) float shared[kSharedWords];
  const unsigned lane = threadIdx.x;
  T* words = reinterpret_cast<T*>(shared);
  for (unsigned w = lane; w < kSharedWords * 4 / sizeof(T); w += 32) words[w] = in[w];
  __syncthreads();
  const unsigned word = lane * stride;                     // in 4-byte words
  out[lane] = *reinterpret_cast<const T*>(&shared[word]);  // the instruction this example is about
}

template <class T>
void run(unsigned stride) {
  std::vector<T> host(kSharedWords * 4 / sizeof(T));
  for (std::size_t i = 0; i < host.size(); ++i) std::memset(&host[i], static_cast<int>(i & 0x7f), sizeof(T));
  simt::DeviceBuffer<T> in{std::span<const T>(host)}, out(32);
  simt::launch<read_strided<T>>(dim3(1), dim3(32), 0, in.data(), out.data(), stride);
}

}  // namespace demo::SIMT_BACKEND

namespace {

struct Vec2 {
  float x, y;
};
struct Vec4 {
  float x, y, z, w;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"One warp reads shared[lane * stride]: the wavefronts and bank conflicts of that load."};
  unsigned stride = 1;
  unsigned bytes = 4;
  app.add_option("--stride", stride, "words (4 bytes) between the addresses of neighbouring lanes, 0 to 33");
  app.add_option("--bytes", bytes, "bytes each lane reads: 4 (float), 8 (float2) or 16 (float4)");
  fa::add_profile_flags(app);  // --profile, --profile-json, --racecheck (common/profile_cli.h)
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {  // --profile where this build cannot profile
    fmt::print(stderr, "error: {}\n", e.what());
    return 2;
  }

  try {
    if (bytes != 4 && bytes != 8 && bytes != 16) {
      throw std::invalid_argument(fmt::format("--bytes {}: accepted 4, 8 or 16", bytes));
    }
    if (stride > 33) throw std::invalid_argument(fmt::format("--stride {}: accepted 0 to 33 words", stride));
    if (stride % (bytes / 4) != 0) {
      throw std::invalid_argument(
          fmt::format("--stride {} with --bytes {}: an access of {} bytes must start at a multiple of {} bytes, so the "
                      "stride must be a multiple of {} words",
                      stride, bytes, bytes, bytes, bytes / 4));
    }
    fmt::print("One warp, lane l reads {} bytes at shared word l * {}\n", bytes, stride);
    simt::profile::WarpAccess access;
    for (unsigned lane = 0; lane < 32; ++lane) access.set(lane, std::uint64_t{lane} * stride * 4, bytes);
    fmt::print("lane : word (bank)\n");
    for (unsigned lane = 0; lane < 32; ++lane) {
      const unsigned word = lane * stride;
      fmt::print("{:>4} : {:>4} ({:>2}){}", lane, word, word % 32, lane % 8 == 7 ? "\n" : "   ");
    }
    const simt::profile::SharedCost cost = simt::profile::shared_cost(access);
    fmt::print("by the rule: {} wavefront{}, {} bank conflict{}\n", cost.wavefronts, cost.wavefronts == 1 ? "" : "s",
               cost.bank_conflicts, cost.bank_conflicts == 1 ? "" : "s");

    if (bytes == 4) demo::SIMT_BACKEND::run<float>(stride);
    if (bytes == 8) demo::SIMT_BACKEND::run<Vec2>(stride);
    if (bytes == 16) demo::SIMT_BACKEND::run<Vec4>(stride);
    fa::end_profile();
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}
