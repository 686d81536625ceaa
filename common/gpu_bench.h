// What the GPU benchmark programs (chNN_gpu_bench) share: device memory filled from host values,
// and the median time of a launch measured with CUDA events. Host code for the host compiler,
// included only where nvcc was found (the programs are built only there).
//
//   fa::bench::DeviceArray<float> Q(host_values);          cudaMalloc + cudaMemcpy
//   double ms = fa::bench::median_ms([&] { launch(); }, warmup, runs);
//
// The launch must only put work on the default stream; median_ms records an event before and
// after it, waits for the second, and reads the time between them (cudaEventElapsedTime, about
// 0.5 microseconds of resolution). Every CUDA call is checked (common/simt/cuda_check.h).
// Source: CUDA C++ Programming Guide, "Events" (timing with cudaEventRecord/cudaEventElapsedTime).
#pragma once

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <CLI/CLI.hpp>

#include "common/simt/cuda_check.h"  // after <cuda_runtime.h>

namespace fa::bench {

// The variables of the flags that every GPU benchmark takes (add_flags), each holding its default.
struct Flags {
  std::vector<int>& seq_lens;
  std::vector<int>& head_dims;
  int& batch;
  int& heads;
  int& warmup;
  int& runs;
  bool& once;
};

// Registers --seq, --head-dim (one of `compiled`), --batch, --heads, --warmup, --runs and --once on
// app, each showing its default; `timed` names what is timed ("launches", "passes"). batch * heads
// beyond the grid's y limit is refused after the parse (check_grid).
inline void add_flags(CLI::App& app, const Flags& f, const std::vector<int>& compiled, const std::string& timed) {
  app.add_option("--seq", f.seq_lens, "sequence lengths (queries = keys)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--head-dim", f.head_dims, "head dims")->check(CLI::IsMember(compiled))->capture_default_str();
  app.add_option("--batch", f.batch, "batch size")->check(CLI::Range(1, 65535))->capture_default_str();
  app.add_option("--heads", f.heads, "heads")->check(CLI::Range(1, 65535))->capture_default_str();
  app.add_option("--warmup", f.warmup, "untimed " + timed + " first")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--runs", f.runs, "timed " + timed + " at most (the median is reported)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_flag("--once", f.once, "run each kernel once, untimed (for ncu), then stop");
}

// Throws std::invalid_argument when batch * heads exceeds 65535, the grid's y limit (CUDA C++
// Programming Guide, "Compute Capabilities": maximum y-dimension of a grid of thread blocks).
inline void check_grid(int batch, int heads) {
  const long long blocks = static_cast<long long>(batch) * heads;
  if (blocks > 65535) {
    throw std::invalid_argument("--batch times --heads is " + std::to_string(blocks) +
                                "; accepted: at most 65535 (the grid's y limit)");
  }
}

// The properties of the GPU the benchmark runs on (the current device). Throws std::runtime_error
// with one line where the CUDA runtime sees no GPU (none present, none visible, or a driver that is
// missing or too old), rather than the runtime's message about the call that failed.
// Source: CUDA Runtime API, cudaGetDeviceCount and cudaGetDeviceProperties.
inline cudaDeviceProp device_properties() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    static_cast<void>(cudaGetLastError());  // the failed call's error, cleared
    throw std::runtime_error(
        "the CUDA runtime sees no GPU on this machine: this benchmark times the kernels on a GPU "
        "(the chapter's demo and tests run them on the CPU)");
  }
  int device = 0;
  cudaDeviceProp prop{};
  SIMT_CUDA_CHECK(cudaGetDevice(&device));
  SIMT_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return prop;
}

// Device memory of `count` values of T, filled from host values or left uninitialised. (The
// programs are compiled by the host compiler, so they use the CUDA runtime directly rather than
// simt::DeviceBuffer, whose GPU version is for nvcc-compiled code.)
template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(std::size_t count) {
    SIMT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data_), count * sizeof(T)));
  }
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) {
    SIMT_CUDA_CHECK(cudaMemcpy(data_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { cudaFree(data_); }
  T* data() const { return data_; }

 private:
  T* data_ = nullptr;
};

// Median of `runs` timings of launch(), in milliseconds, after `warmup` untimed calls (and a
// synchronisation, so that they are finished before the first timed one starts).
template <class Launch>
double median_ms(const Launch& launch, int warmup, int runs) {
  for (int w = 0; w < warmup; ++w) launch();
  SIMT_CUDA_CHECK(cudaDeviceSynchronize());
  cudaEvent_t start, stop;
  SIMT_CUDA_CHECK(cudaEventCreate(&start));
  SIMT_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<float> times;
  for (int r = 0; r < runs; ++r) {
    SIMT_CUDA_CHECK(cudaEventRecord(start));
    launch();
    SIMT_CUDA_CHECK(cudaEventRecord(stop));
    SIMT_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    SIMT_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms);
  }
  SIMT_CUDA_CHECK(cudaEventDestroy(start));
  SIMT_CUDA_CHECK(cudaEventDestroy(stop));
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// Floating-point operations per second, in TFLOP/s, of attention's two matrix products
// (4 * batch * heads * N^2 * d), halved when causal, done in `ms` milliseconds.
inline double attention_tflops(int batch, int heads, int seq_len, int head_dim, bool causal, double ms) {
  const double n = seq_len;
  const double flops = 4.0 * batch * heads * n * n * head_dim * (causal ? 0.5 : 1.0);
  return flops / (ms * 1e-3) / 1e12;
}

}  // namespace fa::bench
