// What the GPU benchmarks (common/gpu_bench.h) run on the device: their inputs, drawn by cuRAND's
// device API, and the check that there is a device at all.
// Source: cuRAND Library, "Device API Overview" (curand_init with a subsequence per thread for
// Philox4_32_10, curand_normal4); CUDA Math API, "Bfloat16 Precision Conversion" and "Half
// Precision Conversion" (__float2bfloat16_rn, __float2half_rn).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <curand_kernel.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "common/gpu_bench.h"

namespace fa::bench {
namespace {

// The value a float becomes in the array's element type.
struct AsFloat {
  __device__ float operator()(float x) const { return x; }
};
struct AsBf16 {
  __device__ std::uint16_t operator()(float x) const { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }
};
struct AsFp16 {
  __device__ std::uint16_t operator()(float x) const { return __half_as_ushort(__float2half_rn(x)); }
};

// Value i of the array is element i % 4 of the four normals of Philox subsequence i / 4: the same
// numbers for a seed whatever the launch shape (a grid-stride loop over groups of four).
template <class T, class Convert>
__global__ void normal_kernel(T* values, std::size_t count, unsigned long long seed, Convert convert) {
  const std::size_t groups = (count + 3) / 4;
  for (std::size_t g = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; g < groups;
       g += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    curandStatePhilox4_32_10_t state;
    curand_init(seed, g, 0, &state);
    const float4 r = curand_normal4(&state);
    const float four[4] = {r.x, r.y, r.z, r.w};
    for (std::size_t k = 0; k < 4 && 4 * g + k < count; ++k) values[4 * g + k] = convert(four[k]);
  }
}

template <class T, class Convert>
void fill(T* values, std::size_t count, std::uint64_t seed, Convert convert) {
  if (count == 0) return;
  constexpr unsigned threads = 256;
  const std::size_t groups = (count + 3) / 4;
  // Enough blocks to fill the GPU several times over; the loop covers the rest.
  const unsigned blocks = static_cast<unsigned>(std::min<std::size_t>((groups + threads - 1) / threads, 4096));
  normal_kernel<<<blocks, threads>>>(values, count, seed, convert);
  SIMT_CUDA_CHECK(cudaGetLastError());
  SIMT_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace

int no_gpu_status(std::string_view program) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status == cudaSuccess && count > 0) return 0;
  const std::string why = status == cudaSuccess ? "no device" : cudaGetErrorString(status);
  (void)cudaGetLastError();  // the runtime keeps a "no driver" error otherwise
  std::fprintf(stderr, "%.*s: the CUDA runtime sees no GPU (%s); this program times kernels on a GPU\n",
               static_cast<int>(program.size()), program.data(), why.c_str());
  return kNoGpuStatus;
}

void print_plan(std::size_t rows, std::string_view what, double device_bytes) {
  std::printf("plan: %zu rows (%.*s); %.1f GB of device memory\n", rows, static_cast<int>(what.size()), what.data(),
              device_bytes / 1e9);
}

int plan_or_no_gpu(std::string_view program, bool plan, std::size_t rows, std::string_view what, double device_bytes) {
  if (plan) {
    print_plan(rows, what, device_bytes);
    return 0;
  }
  const int status = no_gpu_status(program);
  return status != 0 ? status : -1;
}

std::string device_name() {
  int device = 0;
  cudaDeviceProp prop{};
  SIMT_CUDA_CHECK(cudaGetDevice(&device));
  SIMT_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return prop.name;
}

void fill_normal(DeviceArray<float>& values, std::uint64_t seed) {
  fill(values.data(), values.size(), seed, AsFloat{});
}

void fill_normal(DeviceArray<std::uint16_t>& values, Float16 format, std::uint64_t seed) {
  if (format == Float16::bf16) {
    fill(values.data(), values.size(), seed, AsBf16{});
  } else {
    fill(values.data(), values.size(), seed, AsFp16{});
  }
}

}  // namespace fa::bench
