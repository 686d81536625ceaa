// The test kernels of common/simt, written once in ordinary CUDA: the host compiler builds them
// through common/simt (simt_test.cpp, simt_gpu_test.cpp), nvcc builds them for the GPU
// (simt_gpu_runs.cu). A kernel that only the emulation accepts fails the nvcc build.
//
// Include this header in ONE translation unit per backend and program: the kernels and runners
// are ordinary (not inline) functions, as a kernel in a .cu file is.
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <vector>

#include "common/simt/simt.h"
#include "simt_test_runs.h"

namespace simt_test::SIMT_BACKEND {

constexpr unsigned max_block = 256;
constexpr unsigned full_mask = 0xffffffffu;

// ---- Kernels ---------------------------------------------------------------------------------

// out[blockIdx.x] = the sum of the block's slice of in (zeros past n), by a tree: at each step the
// first half of the active threads adds the second half. blockDim.x: a power of 2, <= 256.
__global__ void block_sum_kernel(const float* __restrict__ in, float* __restrict__ out, unsigned n) {
  __shared__ float tile[max_block];
  const unsigned t = threadIdx.x;
  const unsigned i = blockIdx.x * blockDim.x + t;
  tile[t] = i < n ? in[i] : 0.0f;
  __syncthreads();  // every load is in shared memory before anyone adds
  for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (t < stride) tile[t] += tile[t + stride];
    __syncthreads();  // this step's sums are in place before the next step reads them
  }
  if (t == 0) out[blockIdx.x] = tile[0];
}

// The same kernel with the first barrier forgotten: a thread may add tile[t + stride] before the
// thread that loads it has run. Under the in_order schedule thread 0 runs first and reads slots
// that hold nothing of this block yet.
__global__ void block_sum_missing_barrier_kernel(const float* __restrict__ in, float* __restrict__ out, unsigned n) {
  __shared__ float tile[max_block];
  const unsigned t = threadIdx.x;
  const unsigned i = blockIdx.x * blockDim.x + t;
  tile[t] = i < n ? in[i] : 0.0f;
  // (missing: __syncthreads();)
  for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (t < stride) tile[t] += tile[t + stride];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = tile[0];
}

// out[w] = the sum of warp w's 32 values: five butterfly steps leave the total in every lane.
__global__ void warp_sum_kernel(const float* __restrict__ in, float* __restrict__ out) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = in[i];
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(full_mask, v, offset);
  if (threadIdx.x % warpSize == 0) out[i / warpSize] = v;
}

// Five shuffles per thread, 5 ints out per thread (see simt_test_runs.h).
__global__ void warp_shuffles_kernel(const int* __restrict__ in, int* __restrict__ out) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  const int lane = static_cast<int>(threadIdx.x % warpSize);
  const int x = in[i];
  int sum = x;
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(full_mask, sum, offset);
  const int down = __shfl_down_sync(full_mask, x, 3);  // lane + 3; own value in lanes 29..31
  int scan = x;                                        // inclusive prefix sum over the warp
  for (unsigned d = 1; d < 32; d *= 2) {
    const int up = __shfl_up_sync(full_mask, scan, d);
    if (lane >= static_cast<int>(d)) scan += up;
  }
  const int broadcast = __shfl_sync(full_mask, x, 5);
  int segment_sum = x;  // width 8: four independent 8-lane reductions per warp
  for (int offset = 4; offset > 0; offset /= 2) segment_sum += __shfl_xor_sync(full_mask, segment_sum, offset, 8);
  int* o = out + 5 * i;
  o[0] = sum;
  o[1] = down;
  o[2] = scan;
  o[3] = broadcast;
  o[4] = segment_sum;
}

// Each thread of a 2-D grid of 3-D blocks records the built-in variables it sees, at its linear
// index in the grid (x fastest: thread, then block).
__global__ void thread_index_kernel(unsigned* __restrict__ out) {
  const unsigned threads_per_block = blockDim.x * blockDim.y * blockDim.z;
  const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  unsigned* o = out + 12 * (static_cast<std::size_t>(b) * threads_per_block + t);
  o[0] = threadIdx.x, o[1] = threadIdx.y, o[2] = threadIdx.z;
  o[3] = blockIdx.x, o[4] = blockIdx.y, o[5] = blockIdx.z;
  o[6] = blockDim.x, o[7] = blockDim.y, o[8] = blockDim.z;
  o[9] = gridDim.x, o[10] = gridDim.y, o[11] = gridDim.z;
}

// Each block reverses its slice through dynamic shared memory (blockDim.x floats of it).
__global__ void reverse_kernel(const float* __restrict__ in, float* __restrict__ out) {
  SIMT_DYNAMIC_SHARED(float, buffer);
  const unsigned t = threadIdx.x;
  const unsigned base = blockIdx.x * blockDim.x;
  buffer[t] = in[base + t];
  __syncthreads();
  out[base + t] = buffer[blockDim.x - 1 - t];
}

// Copies dynamic shared memory out before writing it: shows what a block finds there.
__global__ void unwritten_dynamic_shared_kernel(float* __restrict__ out) {
  SIMT_DYNAMIC_SHARED(float, buffer);
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = buffer[threadIdx.x];
  __syncthreads();
  buffer[threadIdx.x] = 1.0f;  // dirty it, so that a next block would see 1 without the poisoning
}

// out[blockIdx.x] += each value of the block's slice (out starts at zero).
__global__ void block_atomic_sum_kernel(const float* __restrict__ in, float* __restrict__ out) {
  atomicAdd(&out[blockIdx.x], in[blockIdx.x * blockDim.x + threadIdx.x]);
}

// *count += 1 for each negative value.
__global__ void count_negative_kernel(const float* __restrict__ in, unsigned n, int* __restrict__ count) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && in[i] < 0.0f) atomicAdd(count, 1);
}

// ---- Broken kernels: run on the CPU only, to check the reports (on a GPU they hang or worse) ----

// The upper half of each block returns early; the lower half waits at a barrier for it.
__global__ void early_return_kernel(float* out) {
  if (threadIdx.x >= blockDim.x / 2) return;
  out[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f;
  __syncthreads();
}

// Odd and even threads wait at two different barriers.
__global__ void two_barriers_kernel(float* out) {
  if (threadIdx.x % 2 == 0) {
    out[threadIdx.x] = 0.0f;
    __syncthreads();
  } else {
    out[threadIdx.x] = 1.0f;
    __syncthreads();
  }
}

// Lane 0 of each warp waits at a barrier while the other lanes shuffle.
__global__ void shuffle_and_barrier_kernel(float* out) {
  float v = out[threadIdx.x];
  if (threadIdx.x % warpSize == 0) {
    __syncthreads();
  } else {
    v = __shfl_xor_sync(full_mask, v, 1);
  }
  out[threadIdx.x] = v;
}

// A shuffle with a partial mask: the CPU emulation accepts only the full mask.
__global__ void half_mask_kernel(float* out) { out[threadIdx.x] = __shfl_xor_sync(0x0000ffffu, out[threadIdx.x], 1); }

// With 48 threads, lanes 0..15 of warp 1 read lanes 16..31 in the first step, which do not exist.
__global__ void partial_warp_kernel(float* out) {
  float v = out[threadIdx.x];
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(full_mask, v, offset);
  out[threadIdx.x] = v;
}

// ---- Runners (declared in simt_test_runs.h) -----------------------------------------------------

// One sum per block of `block` values, by Kernel (block_sum_kernel or its broken twin).
template <auto Kernel>
std::vector<float> block_sums_by(std::span<const float> in, unsigned block) {
  const auto n = static_cast<unsigned>(in.size());
  const unsigned blocks = (n + block - 1) / block;
  simt::DeviceBuffer<float> d_in(in), d_out(blocks);
  simt::launch<Kernel>(dim3(blocks), dim3(block), 0, d_in.data(), d_out.data(), n);
  return d_out.to_host();
}

std::vector<float> block_sums(std::span<const float> in, unsigned block) {
  return block_sums_by<block_sum_kernel>(in, block);
}

std::vector<float> block_sums_missing_barrier(std::span<const float> in, unsigned block) {
  return block_sums_by<block_sum_missing_barrier_kernel>(in, block);
}

std::vector<float> warp_sums(std::span<const float> in) {
  const unsigned block = 128;
  simt::DeviceBuffer<float> d_in(in), d_out(in.size() / 32);
  simt::launch<warp_sum_kernel>(dim3(static_cast<unsigned>(in.size()) / block), dim3(block), 0, d_in.data(),
                                d_out.data());
  return d_out.to_host();
}

std::vector<int> warp_shuffles(std::span<const int> in) {
  const unsigned block = 64;
  simt::DeviceBuffer<int> d_in(in), d_out(5 * in.size());
  simt::launch<warp_shuffles_kernel>(dim3(static_cast<unsigned>(in.size()) / block), dim3(block), 0, d_in.data(),
                                     d_out.data());
  return d_out.to_host();
}

std::vector<unsigned> thread_indices(std::array<unsigned, 3> grid, std::array<unsigned, 3> block) {
  const std::size_t threads = std::size_t{grid[0]} * grid[1] * grid[2] * block[0] * block[1] * block[2];
  simt::DeviceBuffer<unsigned> d_out(12 * threads);
  simt::launch<thread_index_kernel>(dim3(grid[0], grid[1], grid[2]), dim3(block[0], block[1], block[2]), 0,
                                    d_out.data());
  return d_out.to_host();
}

std::vector<float> reverse_blocks(std::span<const float> in, unsigned block) {
  simt::DeviceBuffer<float> d_in(in), d_out(in.size());
  simt::launch<reverse_kernel>(dim3(static_cast<unsigned>(in.size()) / block), dim3(block), block * sizeof(float),
                               d_in.data(), d_out.data());
  return d_out.to_host();
}

std::vector<float> unwritten_dynamic_shared(unsigned blocks, unsigned block) {
  simt::DeviceBuffer<float> d_out(std::size_t{blocks} * block);
  simt::launch<unwritten_dynamic_shared_kernel>(dim3(blocks), dim3(block), block * sizeof(float), d_out.data());
  return d_out.to_host();
}

std::vector<float> block_atomic_sums(std::span<const float> in, unsigned block) {
  const auto blocks = static_cast<unsigned>(in.size()) / block;
  simt::DeviceBuffer<float> d_in(in), d_out(blocks);
  d_out.fill(0.0f);
  simt::launch<block_atomic_sum_kernel>(dim3(blocks), dim3(block), 0, d_in.data(), d_out.data());
  return d_out.to_host();
}

int count_negative(std::span<const float> in) {
  const auto n = static_cast<unsigned>(in.size());
  const unsigned block = 128;
  simt::DeviceBuffer<float> d_in(in);
  simt::DeviceBuffer<int> d_count(1);
  d_count.fill(0);
  simt::launch<count_negative_kernel>(dim3((n + block - 1) / block), dim3(block), 0, d_in.data(), n, d_count.data());
  return d_count.to_host()[0];
}

}  // namespace simt_test::SIMT_BACKEND
