// simt_async_proxy_race: one warpgroup writes A and B into shared memory with ordinary stores and
// multiplies them with one wgmma, the way a kernel that stages its own operands does; and the
// three mistakes around it that give wrong numbers on a GPU only now and then, found by simt's race
// checker on the CPU every time.
//
// Thread t of the warpgroup stores row t / 2, half t % 2, of A (64 x 16) and of B (64 x 16, N x K:
// D = A B^T), in the layout of a K-major operand without swizzle (core matrices of 8 rows of 16
// bytes). wgmma reads them through the async proxy, which sees an ordinary store only after the
// storing thread's fence.proxy.async (PTX ISA, "Memory Consistency Model", "Proxies"); the
// __syncthreads() after the fence orders every thread's stores and fence before the wgmma.
//
//   simt_async_proxy_race                                 D right, and racecheck finds nothing
//   simt_async_proxy_race --mistake no-fence              the fence left out: on the CPU D is still
//       right (the CPU has one proxy), and racecheck names the store and the wgmma
//   simt_async_proxy_race --mistake overwrite-early       A is overwritten after the wgmma is
//       issued but before wgmma_wait_group: the wgmma may still be reading it. Racecheck names the
//       wgmma and the store
//   simt_async_proxy_race --mistake rescale-early         the accumulator is scaled before the wait:
//       the wgmma owns it until then, and simt stops at the wait
//
// The checks need the race checker, which is always on in this program (where the build has
// profiled copies: cmake/SimtProfile.cmake). docs/simt.md ("Racecheck on Hopper") walks through
// the reports.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "common/simt/simt.h"
#include "common/simt/tools/racecheck.h"
#include "examples/example_flags.h"

namespace demo::SIMT_BACKEND {

constexpr int kRows = 64, kK = 16, kN = 64;
constexpr unsigned kOperandBytes = kRows * kK * 2;  // 2048 bytes each, bf16
// K-major without swizzle: element (mn, k) at (mn / 8) SBO + (k / 8) LBO + (mn % 8) 16 + (k % 8) 2.
constexpr unsigned kLbo = 128, kSbo = 256;

__device__ inline unsigned operand_offset(unsigned mn, unsigned k) {
  return (mn / 8) * kSbo + (k / 8) * kLbo + (mn % 8) * 16 + (k % 8) * 2;
}

// mistake: 0 none, 1 no fence, 2 A overwritten before the wait, 3 d scaled before the wait.
// a, b: row-major 64 x 16 bf16 bits; d: row-major 64 x 64.
__global__ void __launch_bounds__(128, 1)
    stage_and_multiply(const std::uint16_t* __restrict__ a, const std::uint16_t* __restrict__ b, int mistake,
                       float* __restrict__ d_out) {
  SIMT_DYNAMIC_SHARED(std::uint8_t, smem);  // A, then B
  const unsigned t = threadIdx.x, row = t / 2, half = t % 2;
  for (unsigned k = 8 * half; k < 8 * half + 8; ++k) {
    const std::uint16_t x = a[row * kK + k], y = b[row * kK + k];
    std::memcpy(smem + operand_offset(row, k), &x, 2);
    std::memcpy(smem + kOperandBytes + operand_offset(row, k), &y, 2);
  }
  if (mistake != 1) simt::fence_proxy_async_shared_cta();  // these stores, for the async proxy
  __syncthreads();

  float d[kN / 2];
  for (float& x : d) x = 0.0f;
  simt::wgmma_fence();
  const std::uint64_t desc_a = simt::make_wgmma_descriptor(smem, simt::Swizzle::none, kLbo, kSbo);
  const std::uint64_t desc_b = simt::make_wgmma_descriptor(smem + kOperandBytes, simt::Swizzle::none, kLbo, kSbo);
  simt::wgmma_m64nNk16_bf16<kN, simt::Major::k, simt::Major::k>(d, desc_a, desc_b, false);
  simt::wgmma_commit_group();
  if (mistake == 2) {
    const std::uint16_t zero = 0;
    std::memcpy(smem + operand_offset(row, 8 * half), &zero, 2);  // wgmma may still be reading A
  }
  if (mistake == 3) {
    for (float& x : d) x *= 2.0f;  // wgmma still owns d
  }
  simt::wgmma_wait_group<0>();
  simt::wgmma_fence_operand(d);

  // d[i] = D[16 w + g + 8 ((i / 2) % 2)][8 (i / 4) + 2 t4 + i % 2] (PTX ISA, wgmma's D fragment).
  const unsigned w = t / 32, lane = t % 32, g = lane / 4, t4 = lane % 4;
  for (unsigned i = 0; i < kN / 2; ++i) {
    d_out[(16 * w + g + 8 * ((i / 2) % 2)) * kN + 8 * (i / 4) + 2 * t4 + i % 2] = d[i];
  }
}

}  // namespace demo::SIMT_BACKEND

int main(int argc, char** argv) {
  namespace kernel = demo::SIMT_BACKEND;
  CLI::App app{
      "One warpgroup stages A and B with ordinary stores and multiplies them by wgmma; the async proxy's "
      "mistakes, found by simt's race checker."};
  example::Flags flags;
  std::string mistake = "none";
  const std::vector<std::string> mistakes = {"no-fence", "overwrite-early", "rescale-early"};
  example::add_mistake_flags(app, flags, mistake, mistakes);
  CLI11_PARSE(app, argc, argv);
  const int which = example::mistake_number(mistake, mistakes);

  try {
    simt::racecheck::enable();  // throws, saying why, where this build has no profiled copy
    const std::string schedule = example::apply_schedule(flags);
    // Small integers, exact in bf16, whose products and sums are exact in float32.
    std::vector<std::uint16_t> a(kernel::kRows * kernel::kK), b(kernel::kN * kernel::kK);
    std::vector<float> fa(a.size()), fb(b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      fa[i] = static_cast<float>(static_cast<int>((i * 7) % 11) - 5);
      fb[i] = static_cast<float>(static_cast<int>((i * 5) % 7) - 3);
      a[i] = static_cast<std::uint16_t>(simt::pack_bf16x2(fa[i], 0.0f) & 0xffffu);
      b[i] = static_cast<std::uint16_t>(simt::pack_bf16x2(fb[i], 0.0f) & 0xffffu);
    }
    simt::DeviceBuffer<std::uint16_t> d_a{std::span<const std::uint16_t>(a)}, d_b{std::span<const std::uint16_t>(b)};
    simt::DeviceBuffer<float> d_d(kernel::kRows * kernel::kN);
    const std::size_t shared = 2 * kernel::kOperandBytes;
    fmt::print(
        "A (64 x 16) and B (64 x 16) staged by ordinary stores, D = A B^T by one wgmma, mistake {}, schedule {}\n",
        mistake, schedule);
    simt::launch<kernel::stage_and_multiply>(dim3(1), dim3(128), shared, d_a.data(), d_b.data(), which, d_d.data());
    const std::vector<float> d = d_d.to_host();
    unsigned wrong = 0;
    for (int m = 0; m < kernel::kRows; ++m) {
      for (int n = 0; n < kernel::kN; ++n) {
        float expected = 0.0f;
        for (int k = 0; k < kernel::kK; ++k) expected += fa[m * kernel::kK + k] * fb[n * kernel::kK + k];
        wrong += d[static_cast<std::size_t>(m * kernel::kN + n)] != expected;  // exact: small integers
      }
    }
    fmt::print("D: {} of {} wrong\n", wrong, kernel::kRows * kernel::kN);
    return wrong == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}
