// What the GPU benchmarks (chNN_gpu_bench) share: float32 device memory for host code, and the
// median time of a launch measured with CUDA events.
//
//   const fa::gpu_bench::DeviceArray Q(host_values), O(count);
//   const double ms = fa::gpu_bench::median_ms([&] { launch(Q.data(), O.data()); }, warmup, runs);
//
// For host code compiled by the host compiler that includes <cuda_runtime.h> (it uses the CUDA
// runtime directly rather than simt::DeviceBuffer, whose GPU version is for nvcc-compiled code).
// Source: the CUDA Runtime API reference, "Event Management" (cudaEventRecord, cudaEventElapsedTime:
// the time between two events, in milliseconds, about 0.5 microsecond resolution).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "common/cuda_check.h"  // after <cuda_runtime.h>

namespace fa::gpu_bench {

// Float32 device memory, filled from host values or left uninitialised. Throws std::runtime_error
// (FA_CUDA_CHECK) when the allocation or the copy fails.
class DeviceArray {
 public:
  explicit DeviceArray(std::size_t count) { FA_CUDA_CHECK(cudaMalloc(&data_, count * sizeof(float))); }
  explicit DeviceArray(const std::vector<float>& host) : DeviceArray(host.size()) {
    FA_CUDA_CHECK(cudaMemcpy(data_, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { cudaFree(data_); }
  float* data() const { return data_; }

 private:
  float* data_ = nullptr;
};

// Median of `runs` timings of launch(), in milliseconds, after `warmup` untimed calls; each timing
// is the time between a CUDA event recorded before launch() and one after it. runs must be >= 1.
// Throws std::runtime_error (FA_CUDA_CHECK) for a CUDA error, and what launch() throws.
template <class Launch>
double median_ms(const Launch& launch, int warmup, int runs) {
  for (int w = 0; w < warmup; ++w) launch();
  cudaEvent_t start, stop;
  FA_CUDA_CHECK(cudaEventCreate(&start));
  FA_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<float> times;
  for (int r = 0; r < runs; ++r) {
    FA_CUDA_CHECK(cudaEventRecord(start));
    launch();
    FA_CUDA_CHECK(cudaEventRecord(stop));
    FA_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    FA_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms);
  }
  FA_CUDA_CHECK(cudaEventDestroy(start));
  FA_CUDA_CHECK(cudaEventDestroy(stop));
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace fa::gpu_bench
