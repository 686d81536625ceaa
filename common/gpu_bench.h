// What the GPU benchmark programs (chNN_gpu_bench) share: the one-line refusal where the CUDA
// runtime sees no GPU, device memory, inputs drawn on the GPU, and the median time of a launch
// measured with CUDA events. Host code for the host compiler, included only where nvcc was found
// (the programs are built only there; add_gpu_benchmark in cmake/GpuCheck.cmake); gpu_bench.cu
// holds what runs on the device.
//
//   if (int status = fa::bench::plan_or_no_gpu("ch05_gpu_bench", plan, rows, what, bytes); status >= 0)
//     return status;                                                   --plan, or no GPU: one line
//   fa::bench::DeviceArray<float> Q(count);  fa::bench::fill_normal(Q, seed);   cudaMalloc, cuRAND
//   double ms = fa::bench::median_ms([&] { launch(); }, warmup, runs);
//
// The launch must only put work on the default stream; median_ms records an event before and
// after it, waits for the second, and reads the time between them (cudaEventElapsedTime, about
// 0.5 microseconds of resolution). Every CUDA call is checked (common/simt/runtime/cuda_check.h).
// Source: CUDA C++ Programming Guide, "Events" (timing with cudaEventRecord/cudaEventElapsedTime);
// cuRAND Library, "Device API Overview" (Philox4_32_10, curand_normal4).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include <cuda_runtime.h>
#include <CLI/CLI.hpp>

#include "common/simt/runtime/cuda_check.h"  // after <cuda_runtime.h>

namespace fa::bench {

// The exit status of a benchmark that cannot measure on this machine: as a GPU test's (CTest's
// SKIP_RETURN_CODE) and as scripts/gpu_check.sh reads a step's "skipped".
inline constexpr int kNoGpuStatus = 77;

// 0 where the CUDA runtime sees a GPU. Otherwise prints one line to stderr, "<program>: the CUDA
// runtime sees no GPU (<the runtime's reason>) ...", and returns kNoGpuStatus, for main to return.
int no_gpu_status(std::string_view program);

// --plan, what scripts/gpu_check.sh --dry-run runs without a GPU: prints one line, "plan: <rows>
// rows (<what>); <GB> GB of device memory", once the flags are checked and before any CUDA call.
void print_plan(std::size_t rows, std::string_view what, double device_bytes);

// What a benchmark does before its first CUDA call: with --plan (`plan`), prints the plan line
// (print_plan) and returns 0; where the CUDA runtime sees no GPU, prints one line (no_gpu_status)
// and returns kNoGpuStatus; otherwise returns -1, and the benchmark measures.
int plan_or_no_gpu(std::string_view program, bool plan, std::size_t rows, std::string_view what, double device_bytes);

// The name of the current device (cudaGetDeviceProperties). Throws std::runtime_error on a CUDA error.
std::string device_name();

// The variables of the flags that every attention benchmark takes (add_flags), each holding its
// default.
struct Flags {
  std::vector<int>& seq_lens;
  std::vector<int>& head_dims;
  int& batch;
  int& heads;
  int& warmup;
  int& runs;
  bool& once;
  bool& plan;
};

// Registers --seq, --head-dim (one of `compiled`), --batch, --heads, --warmup, --runs, --once and
// --plan on app, each showing its default; `timed` names what is timed ("launches", "passes").
// batch * heads beyond the grid's y limit is refused after the parse (grid_fits).
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
  app.add_flag("--plan", f.plan, "print the rows it would measure and the device memory, then stop (no GPU needed)");
  app.footer("Exit status: 0 measured, 1 a CUDA or kernel error, 2 a bad flag, 77 no GPU seen.");
}

// Whether batch * heads fits the grid's y limit, 65535 (CUDA C++ Programming Guide, "Compute
// Capabilities": maximum y-dimension of a grid of thread blocks); where it does not, prints one line
// to stderr saying so, for main to return 2 (a bad flag).
inline bool grid_fits(int batch, int heads) {
  const long long blocks = static_cast<long long>(batch) * heads;
  if (blocks <= 65535) return true;
  std::fprintf(stderr, "error: --batch times --heads is %lld; accepted: at most 65535 (the grid's y limit)\n", blocks);
  return false;
}

// Device memory of `count` values of T, filled from host values or left uninitialised. (The
// programs are compiled by the host compiler, so they use the CUDA runtime directly rather than
// simt::DeviceBuffer, whose GPU version is for nvcc-compiled code.)
template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(std::size_t count) : size_(count) {
    SIMT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data_), count * sizeof(T)));
  }
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) {
    SIMT_CUDA_CHECK(cudaMemcpy(data_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { cudaFree(data_); }
  T* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

// The 16-bit floating-point formats a benchmark's inputs may come in.
enum class Float16 { bf16, fp16 };

// Fills every value of `values` with a normal(0, 1) draw made on the GPU, seeded: cuRAND's Philox
// generator, four values per thread, so that a benchmark's inputs cost milliseconds (a CPU draw of
// 10^9 values takes a minute). The 16-bit overload stores bf16 or fp16 bits, rounded to nearest.
// Waits for the kernel; throws std::runtime_error on a CUDA error.
void fill_normal(DeviceArray<float>& values, std::uint64_t seed);
void fill_normal(DeviceArray<std::uint16_t>& values, Float16 format, std::uint64_t seed);

// Q, K and V of a 16-bit benchmark, each filled by fill_normal in `format`, with seeds 1, 2 and 3:
// the same inputs in every benchmark that compares kernels across chapters.
inline void fill_qkv(DeviceArray<std::uint16_t>& Q, DeviceArray<std::uint16_t>& K, DeviceArray<std::uint16_t>& V,
                     Float16 format) {
  fill_normal(Q, format, 1);
  fill_normal(K, format, 2);
  fill_normal(V, format, 3);
}

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
