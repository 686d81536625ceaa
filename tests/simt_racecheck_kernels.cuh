// Small kernels that mirror the races of this book's kernels, each with the fix one flag away, for
// simt's race checker (common/simt/tools/racecheck.h). Written once in ordinary CUDA and compiled only as
// a profiled copy (simt_racecheck_kernels.cpp), whose every access the checker sees.
//
// The comments `// [name]` mark the lines tests/simt_racecheck_test.cpp expects in a report: the
// test reads them from this file, so that the kernels can move without the test changing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "common/simt/simt.h"
#include "simt_racecheck_kernels.h"

namespace simt_racecheck_test::SIMT_BACKEND {

// Chapter 06's double buffer: 2 warps; tile j+1 arrives by cp.async (one 16-byte row per thread,
// 64 rows of 8 bf16) while both warps read tile j with ldmatrix, every row by both warps. Without
// the barrier at the end of the tile, the copy of tile j+2 goes into the half that the other warp
// may still be reading.
constexpr int kRows = 64;
__global__ void double_buffer_kernel(const std::uint16_t* __restrict__ in, std::uint32_t* __restrict__ out, int tiles,
                                     bool end_barrier) {
  __shared__ __align__(16) std::uint16_t buffer[2][kRows * 8];
  const int t = static_cast<int>(threadIdx.x);
  const int lane = t % 32;
  simt::cp_async_16(&buffer[0][8 * t], in + 8 * t);
  simt::cp_async_commit_group();
  std::uint32_t acc = 0;
  for (int j = 0; j < tiles; ++j) {
    if (j + 1 < tiles) {
      simt::cp_async_16(&buffer[(j + 1) % 2][8 * t], in + (j + 1) * kRows * 8 + 8 * t);  // [copy]
      simt::cp_async_commit_group();
      simt::cp_async_wait_group<1>();
    } else {
      simt::cp_async_wait_group<0>();
    }
    __syncthreads();
    for (int half = 0; half < 2; ++half) {
      std::uint32_t r[4];
      simt::ldmatrix_x4(r, &buffer[j % 2][8 * (32 * half + lane)]);  // [ldmatrix]
      acc ^= r[0] ^ r[1] ^ r[2] ^ r[3];
    }
    if (end_barrier) __syncthreads();
  }
  out[t] = acc;
}

// Chapter 07's dQ: every block adds its part into the same elements. `+=` is a read and a write
// of its own; atomicAdd is one indivisible step, and atomics do not race with atomics.
__global__ void add_to_one_kernel(const float* __restrict__ in, float* __restrict__ total, bool atomic) {
  const float x = in[blockIdx.x * blockDim.x + threadIdx.x];
  if (atomic) {
    atomicAdd(&total[threadIdx.x], x);
  } else {
    total[threadIdx.x] += x;  // [plus-equals]
  }
}

// A barrier missing between a shared write and another warp's read: thread t reads the slot of
// thread 63 - t, which is in the other warp.
__global__ void missing_barrier_kernel(const float* __restrict__ in, float* __restrict__ out, bool barrier) {
  __shared__ float tile[64];
  const unsigned t = threadIdx.x;
  tile[t] = in[t];  // [store]
  if (barrier) __syncthreads();
  out[t] = tile[63 - t];  // [load]
}

// A warp-synchronous reduction as it was written before Volta: each step reads what other lanes
// wrote in the step before, with nothing between the steps but `volatile` (which only keeps the
// compiler from holding the values in registers) and the assumption that the 32 lanes run in
// lock-step. __syncwarp() between the steps is the fix.
__global__ void warp_reduction_kernel(const float* __restrict__ in, float* __restrict__ out, bool syncwarp) {
  __shared__ float shared[32];
  volatile float* s = shared;
  const unsigned lane = threadIdx.x;
  s[lane] = in[lane];
  __syncwarp();
  if (lane < 16) s[lane] = s[lane] + s[lane + 16];  // [step 16]
  if (syncwarp) __syncwarp();
  if (lane < 8) s[lane] = s[lane] + s[lane + 8];  // [step 8]
  if (syncwarp) __syncwarp();
  if (lane < 4) s[lane] = s[lane] + s[lane + 4];
  if (syncwarp) __syncwarp();
  if (lane < 2) s[lane] = s[lane] + s[lane + 2];
  if (syncwarp) __syncwarp();
  if (lane < 1) s[lane] = s[lane] + s[lane + 1];
  if (syncwarp) __syncwarp();
  if (lane == 0) out[0] = s[0];
}

// Uninitialised reads: shared memory that no thread wrote, an output never written, and an
// atomicAdd into a buffer that nobody zeroed (chapter 07's dQ with its line 3 forgotten).
__global__ void unwritten_shared_kernel(float* __restrict__ out, bool write_first) {
  __shared__ float tile[32];
  if (write_first) tile[threadIdx.x] = 1.0f;
  __syncthreads();
  out[threadIdx.x] = tile[threadIdx.x];  // [unwritten shared]
}
__global__ void read_output_kernel(const float* __restrict__ out, float* __restrict__ copy) {
  copy[threadIdx.x] = out[threadIdx.x];  // [unwritten global]
}
__global__ void accumulate_kernel(const float* __restrict__ in, float* __restrict__ sum) {
  atomicAdd(&sum[threadIdx.x], in[blockIdx.x * blockDim.x + threadIdx.x]);  // [atomic on unwritten]
}

// ---- Runners (simt_racecheck_kernels.h) ---------------------------------------------------------

std::vector<std::uint32_t> double_buffer(int tiles, bool end_barrier) {
  std::vector<std::uint16_t> in(static_cast<std::size_t>(tiles) * kRows * 8);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<std::uint16_t>(i * 2654435761u >> 16);
  simt::DeviceBuffer<std::uint16_t> d_in{std::span<const std::uint16_t>(in)};
  simt::DeviceBuffer<std::uint32_t> d_out(kRows);
  simt::launch<double_buffer_kernel>(dim3(1), dim3(kRows), 0, d_in.data(), d_out.data(), tiles, end_barrier);
  return d_out.to_host();
}

std::vector<float> add_to_one(unsigned blocks, bool atomic) {
  std::vector<float> in(std::size_t{blocks} * 32);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i % 7);
  simt::DeviceBuffer<float> d_in{std::span<const float>(in)}, d_total(32);
  d_total.fill(0.0f);
  simt::launch<add_to_one_kernel>(dim3(blocks), dim3(32), 0, d_in.data(), d_total.data(), atomic);
  return d_total.to_host();
}

std::vector<float> missing_barrier(bool barrier) {
  std::vector<float> in(64);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i);
  simt::DeviceBuffer<float> d_in{std::span<const float>(in)}, d_out(64);
  simt::launch<missing_barrier_kernel>(dim3(1), dim3(64), 0, d_in.data(), d_out.data(), barrier);
  return d_out.to_host();
}

float warp_reduction(bool syncwarp) {
  std::vector<float> in(32);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i);
  simt::DeviceBuffer<float> d_in{std::span<const float>(in)}, d_out(1);
  simt::launch<warp_reduction_kernel>(dim3(1), dim3(32), 0, d_in.data(), d_out.data(), syncwarp);
  return d_out.to_host()[0];
}

void unwritten_shared(bool write_first) {
  simt::DeviceBuffer<float> d_out(32);
  simt::launch<unwritten_shared_kernel>(dim3(1), dim3(32), 0, d_out.data(), write_first);
}

void read_unwritten_output() {
  simt::DeviceBuffer<float> d_out(32), d_copy(32);  // d_out: allocated, never written
  simt::launch<read_output_kernel>(dim3(1), dim3(32), 0, d_out.data(), d_copy.data());
}

void accumulate_into_unzeroed(unsigned blocks) {
  std::vector<float> in(std::size_t{blocks} * 32, 1.0f);
  simt::DeviceBuffer<float> d_in{std::span<const float>(in)}, d_sum(32);  // d_sum: never zeroed
  simt::launch<accumulate_kernel>(dim3(blocks), dim3(32), 0, d_in.data(), d_sum.data());
}

}  // namespace simt_racecheck_test::SIMT_BACKEND
