// A kernel whose loop body can be counted by hand, for tests/sass_report_test.py: each iteration
// of its loop (kept a loop: #pragma unroll 1) issues, per warp,
//   1 LDGSTS (one cp.async per lane), 1 LDGDEPBAR (commit), 1 DEPBAR (wait), 2 BAR.SYNC,
//   2 LDSM (ldmatrix .x4 and .x4.trans), 4 HMMA (mma m16n8k16 bf16), 2 MUFU.EX2, 1 SHFL,
//   3 FADD (e += x + y, e += the shuffled e)
// and nothing else of those kinds, and the kernel has no LDSM or HMMA outside the loop.
#include <cstdint>

#include "common/simt/simt.h"

__global__ void __launch_bounds__(32) sass_report_kernel(const std::uint16_t* in, float* out, int n) {
  __shared__ __align__(16) std::uint16_t tile[32 * 8];  // 32 rows of 16 bytes: 4 matrices of 8 x 8
  const int lane = static_cast<int>(threadIdx.x);
  float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  float e = 0.0f;
#pragma unroll 1
  for (int i = 0; i < n; ++i) {
    simt::cp_async_16(tile + lane * 8, in + (i * 32 + lane) * 8);
    simt::cp_async_commit_group();
    simt::cp_async_wait_group<0>();
    __syncthreads();
    std::uint32_t a[4], b[4];
    simt::ldmatrix_x4(a, tile + lane * 8);
    simt::ldmatrix_x4_trans(b, tile + lane * 8);
    const std::uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
    simt::mma_m16n8k16_bf16(d, a, b0, d);
    simt::mma_m16n8k16_bf16(d, a, b1, d);
    simt::mma_m16n8k16_bf16(d, a, b0, d);
    simt::mma_m16n8k16_bf16(d, a, b1, d);
    e += simt::ex2_approx_ftz(d[0]) + simt::ex2_approx_ftz(d[1]);
    e += __shfl_xor_sync(0xffffffffu, e, 1);
    __syncthreads();
  }
  out[lane] = d[0] + d[1] + d[2] + d[3] + e;
}
