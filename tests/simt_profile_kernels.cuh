// The test kernels of simt's memory profile, written once in ordinary CUDA and compiled only as a
// profiled copy (simt_profile_kernels.cpp, cmake/SimtProfile.cmake). Each access pattern is one
// that tests/simt_profile_test.cpp works out by hand.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "common/simt/simt.h"
#include "simt_profile_kernels.h"

namespace simt_profile_test::SIMT_BACKEND {

struct Float4 {
  float x, y, z, w;
};

constexpr unsigned kSharedWords = 32 * 33 + 4;

__global__ void load_floats_kernel(const float* in, float* out, unsigned stride, unsigned active) {
  const unsigned lane = threadIdx.x % 32;
  float v = 0.0f;
  if (lane < active) v = in[lane * stride];
  out[threadIdx.x] = v;
}

template <class T>
__global__ void load_wide_kernel(const T* in, T* out) {
  out[threadIdx.x] = in[threadIdx.x];
}

// Fills kSharedWords words of `shared` (one warp), then lane l reads a T at word l * stride.
template <class T>
__device__ void fill_then_read(float* shared, T* out, unsigned stride) {
  const unsigned lane = threadIdx.x;
  for (unsigned w = lane; w < kSharedWords; w += 32) shared[w] = static_cast<float>(w);
  __syncthreads();
  T value;
  std::memcpy(&value, &shared[lane * stride], sizeof(T));
  out[lane] = value;
}

template <class T>
__global__ void shared_static_kernel(T* out, unsigned stride) {
  __shared__ __align__(16) float shared[kSharedWords];
  fill_then_read(shared, out, stride);
}

template <class T>
__global__ void shared_dynamic_kernel(T* out, unsigned stride) {
  SIMT_DYNAMIC_SHARED(float, shared);
  fill_then_read(shared, out, stride);
}

__global__ void two_lanes_one_word_kernel(float* out) {
  __shared__ float shared[32];
  const unsigned lane = threadIdx.x;
  shared[lane] = static_cast<float>(lane);
  __syncthreads();
  out[lane] = shared[lane < 2 ? 0 : lane];
}

__global__ void divergent_kernel(const float* a, const float* b, float* out) {
  const unsigned lane = threadIdx.x;
  float v;
  if (lane % 2 == 0) {   // different work after each load: Clang merges two bare loads into one
    v = a[lane] * 2.0f;  // (a select of the two addresses), GCC does not
  } else {
    v = b[lane] + 1.0f;
  }
  out[lane] = v;
}

__global__ void uneven_loop_kernel(const float* in, float* out) {
  const unsigned lane = threadIdx.x;
  float sum = 0.0f;
  for (unsigned k = 0; k <= lane % 4; ++k) sum += in[lane + 32 * k];
  out[lane] = sum;
}

__global__ void stack_and_shuffle_kernel(const float* in, float* out, unsigned pick) {
  const unsigned lane = threadIdx.x;
  volatile float local[4];  // the CUDA thread's stack: volatile keeps its loads and stores
  for (unsigned k = 0; k < 2; ++k) {
    local[(k + pick) % 4] = in[lane + 32 * k];
    local[(k + pick + 2) % 4] = __shfl_xor_sync(0xffffffffu, local[(k + pick) % 4], 1);
  }
  out[lane] = local[pick % 4] + local[(pick + 1) % 4];
}

// One warp: lane l copies 16 bytes of global memory to shared row l (cp.async), rows
// `row_words` 4-byte words apart; then ldmatrix_x4 reads the 32 rows back (lane l gives row l).
__global__ void ldmatrix_cp_async_kernel(const float* in, std::uint32_t* out, unsigned row_words) {
  __shared__ __align__(16) float shared[32 * 32];
  const unsigned lane = threadIdx.x;
  simt::cp_async_16(&shared[lane * row_words], &in[lane * 4]);
  simt::cp_async_commit_group();
  simt::cp_async_wait_group<0>();
  __syncthreads();
  std::uint32_t r[4];
  simt::ldmatrix_x4(r, &shared[lane * row_words]);
  for (int i = 0; i < 4; ++i) out[lane * 4 + i] = r[i];
}

std::vector<float> iota(std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i);
  return v;
}

void load_floats(unsigned stride, unsigned active, unsigned warps) {
  const std::vector<float> host = iota(32 * (stride + 1));
  simt::DeviceBuffer<float> in{std::span<const float>(host)}, out(32 * warps);
  simt::launch<load_floats_kernel>(dim3(1), dim3(32 * warps), 0, in.data(), out.data(), stride, active);
}

void load_wide(unsigned bytes) {
  if (bytes == 8) {
    const std::vector<double> host(32, 1.0);
    simt::DeviceBuffer<double> in{std::span<const double>(host)}, out(32);
    simt::launch<load_wide_kernel<double>>(dim3(1), dim3(32), 0, in.data(), out.data());
  } else {
    const std::vector<Float4> host(32, Float4{1, 2, 3, 4});
    simt::DeviceBuffer<Float4> in{std::span<const Float4>(host)}, out(32);
    simt::launch<load_wide_kernel<Float4>>(dim3(1), dim3(32), 0, in.data(), out.data());
  }
}

template <class T>
void shared_strided_as(unsigned stride, bool dynamic) {
  simt::DeviceBuffer<T> out(32);
  if (dynamic) {
    simt::launch<shared_dynamic_kernel<T>>(dim3(1), dim3(32), kSharedWords * sizeof(float), out.data(), stride);
  } else {
    simt::launch<shared_static_kernel<T>>(dim3(1), dim3(32), 0, out.data(), stride);
  }
}

void shared_strided(unsigned stride, unsigned bytes, bool dynamic) {
  if (bytes == 4) shared_strided_as<float>(stride, dynamic);
  if (bytes == 8) shared_strided_as<double>(stride, dynamic);
  if (bytes == 16) shared_strided_as<Float4>(stride, dynamic);
}

void shared_two_lanes_one_word() {
  simt::DeviceBuffer<float> out(32);
  simt::launch<two_lanes_one_word_kernel>(dim3(1), dim3(32), 0, out.data());
}

void divergent() {
  const std::vector<float> host = iota(32);
  simt::DeviceBuffer<float> a{std::span<const float>(host)}, b{std::span<const float>(host)}, out(32);
  simt::launch<divergent_kernel>(dim3(1), dim3(32), 0, a.data(), b.data(), out.data());
}

void uneven_loop() {
  const std::vector<float> host = iota(32 * 4);
  simt::DeviceBuffer<float> in{std::span<const float>(host)}, out(32);
  simt::launch<uneven_loop_kernel>(dim3(1), dim3(32), 0, in.data(), out.data());
}

void ldmatrix_cp_async(unsigned row_words) {
  const std::vector<float> host = iota(32 * 4);
  simt::DeviceBuffer<float> in{std::span<const float>(host)};
  simt::DeviceBuffer<std::uint32_t> out(32 * 4);
  simt::launch<ldmatrix_cp_async_kernel>(dim3(1), dim3(32), 0, in.data(), out.data(), row_words);
}

void stack_and_shuffle() {
  const std::vector<float> host = iota(64);
  simt::DeviceBuffer<float> in{std::span<const float>(host)}, out(32);
  simt::launch<stack_and_shuffle_kernel>(dim3(1), dim3(32), 0, in.data(), out.data(), 1u);
}

}  // namespace simt_profile_test::SIMT_BACKEND
