// ch05_gpu_bench: chapter 04's naive kernels against chapter 05's FlashAttention-2 kernel on a GPU,
// timed with CUDA events. Run by scripts/gpu_check.sh; built only where nvcc was found.
//
// For each (kernel, seq_len N, head_dim d, causal) it prints one Markdown table row:
//   | kernel | seq_len | head_dim | causal | median ms | TFLOP/s | model MB | runs |
// 1. --warmup launches that the table does not count, each timed on its own to see how long a call
//    takes (a kernel slower than 100 ms gets no warm-up beyond the first launch);
// 2. runs = min(--runs, --budget-ms / the last warm-up's time), at least 1: a kernel of more than
//    100 ms gets fewer repetitions than a fast one (chapter 04 at N = 8192 takes seconds a call);
// 3. each run is one CUDA event pair around the launch(es) alone: the launches are asynchronous
//    (simt::LaunchMode::asynchronous), the shared-memory allowance was set by the warm-up
//    (set_max_dynamic_shared_bytes calls the runtime once per kernel), and the host waits for the
//    stop event only after it was recorded;
// 4. the median of the runs, and TFLOP/s counted as 4 * batch * heads * N^2 * d floating-point
//    operations (two matrix products of 2 N^2 d each), halved when causal.
// Beside it, the bytes the chapter 05 traffic model predicts for the whole batch in float32
// (standard attention for the naive kernels; FlashAttention-2 without L2 reuse, Br = 64, for the
// flash one; non-causal rows only, since the model counts every tile).
//
// The inputs are drawn once, on the GPU (fa::bench::fill_normal), for the largest shape; a smaller
// shape uses the beginning of each array. Where the CUDA runtime sees no GPU the program says so in
// one line and exits with 77; --plan prints what it would measure and exits without a GPU.
//
//   ch05_gpu_bench                                    the GPU check's table (batch 4, heads 16)
//   ch05_gpu_bench --seq 4096 --head-dim 64 --once    each kernel once, for a profiler (ncu)
//   ch05_gpu_bench --plan                             the rows and the device memory, no GPU needed
// Source: CUDA C++ Programming Guide, "Events" (cudaEventRecord, cudaEventElapsedTime) and
// "Asynchronous Concurrent Execution".
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include "chapters/04_naive_attention/naive_attention.h"
#include "chapters/05_flash_attention_2/flash_attention_2.h"
#include "chapters/05_flash_attention_2/lab/traffic_model.h"
#include "common/gpu_bench.h"
#include "common/simt/runtime/cuda_check.h"  // after <cuda_runtime.h>

namespace {

// Float32 device memory (common/gpu_bench.h, shared by every chapter's GPU benchmark).
using DeviceArray = fa::bench::DeviceArray<float>;

// A pair of CUDA events: elapsed milliseconds of what was queued between start() and stop().
class EventPair {
 public:
  EventPair() {
    SIMT_CUDA_CHECK(cudaEventCreate(&start_));
    SIMT_CUDA_CHECK(cudaEventCreate(&stop_));
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  ~EventPair() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  void start() { SIMT_CUDA_CHECK(cudaEventRecord(start_)); }
  // Records the stop event, then waits for it: the only host synchronisation of a timed run.
  double stop_and_wait() {
    SIMT_CUDA_CHECK(cudaEventRecord(stop_));
    SIMT_CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0;
    SIMT_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return ms;
  }

 private:
  cudaEvent_t start_{}, stop_{};
};

struct Config {
  int batch = 4, heads = 16, seq_len = 1024, head_dim = 64;
  bool causal = false;
};

struct Timing {
  double median_ms = 0;
  int runs = 0;
};

// Steps 1-4 of the header for one kernel: `launch` queues its kernel(s) without waiting.
template <class Launch>
Timing measure(const char* kernel, const Launch& launch, int warmup, int runs, double budget_ms) {
  try {
    EventPair events;
    // The warm-ups are timed too, only to size the runs: by the last one, since the first may
    // include loading the kernel's code onto the GPU.
    constexpr double slow_ms = 100.0;
    double warm_ms = 0;
    for (int w = 0; w < warmup && (w == 0 || warm_ms <= slow_ms); ++w) {
      events.start();
      launch();
      warm_ms = events.stop_and_wait();
    }
    const int fit = static_cast<int>(budget_ms / std::max(warm_ms, 1e-3));
    const int timed = std::clamp(fit, 1, runs);
    std::vector<double> times;
    for (int r = 0; r < timed; ++r) {
      events.start();
      launch();
      times.push_back(events.stop_and_wait());
    }
    SIMT_CUDA_CHECK(cudaGetLastError());  // an error an asynchronous launch left behind
    std::sort(times.begin(), times.end());
    const std::size_t n = times.size();
    const double median = n % 2 == 1 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
    return {median, timed};
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string(kernel) + ": " + e.what());
  }
}

double tflops(const Config& c, double ms) {
  const double n = c.seq_len;
  const double flops = 4.0 * c.batch * c.heads * n * n * c.head_dim * (c.causal ? 0.5 : 1.0);
  return flops / (ms * 1e-3) / 1e12;
}

// The traffic model's bytes for the whole batch, float32, Br = Bc = 64 (chapter 05's tile).
double model_megabytes(const Config& c, bool flash) {
  const ch05::TrafficCase t{.seq_len = c.seq_len, .head_dim = c.head_dim, .Br = 64, .Bc = 64, .bytes = 4};
  const double per_head = flash ? static_cast<double>(ch05::fa2_bytes_closed_form(t))
                                : static_cast<double>(ch05::standard_attention_bytes(t));
  return per_head * c.batch * c.heads / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Naive attention (chapter 04) against FlashAttention-2 (chapter 05), timed with CUDA events."};
  std::vector<int> seq_lens{1024, 4096, 8192};
  std::vector<int> head_dims{64, 128};
  int batch = 4, heads = 16, warmup = 3, runs = 20;
  double budget_ms = 1000;
  bool once = false, plan = false;
  fa::bench::add_flags(app, {seq_lens, head_dims, batch, heads, warmup, runs, once, plan}, {32, 64, 128}, "launches");
  app.add_option("--budget-ms", budget_ms, "time for the timed runs of one row: fewer runs for a slow kernel")
      ->check(CLI::Range(1.0, 1e7))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (!fa::bench::grid_fits(batch, heads)) return 2;
  // One allocation of each tensor for the largest shape; a smaller shape uses the beginning of it
  // ([batch * heads, N, d] row-major, so the first batch * heads * N * d values are a whole
  // problem).
  const std::size_t bh = static_cast<std::size_t>(batch) * heads;
  const std::size_t max_n = static_cast<std::size_t>(*std::max_element(seq_lens.begin(), seq_lens.end()));
  const std::size_t max_d = static_cast<std::size_t>(*std::max_element(head_dims.begin(), head_dims.end()));
  const std::size_t qkv = bh * max_n * max_d;
  const std::size_t floats = 4 * qkv + bh * max_n + 2 * bh * max_n * max_n;  // Q K V O, L, S P
  const double gigabytes = static_cast<double>(floats) * sizeof(float) / 1e9;
  if (const int status = fa::bench::plan_or_no_gpu(
          "ch05_gpu_bench", plan, 2 * seq_lens.size() * head_dims.size() * 2,
          fmt::format("naive and flash-attention-2, seq_len {}, head_dim {}, causal no and yes{}",
                      fmt::join(seq_lens, " "), fmt::join(head_dims, " "), once ? ", each kernel launched once" : ""),
          gigabytes * 1e9);
      status >= 0)
    return status;

  try {
    if (!once) {
      fmt::print(
          "device: {}; batch {}, heads {}, float32; median of up to {} runs after {} warm-up "
          "(fewer where a call takes over 100 ms: at most {:.0f} ms of runs per row); "
          "{:.1f} GB of device memory\n\n",
          fa::bench::device_name(), batch, heads, runs, warmup, budget_ms, gigabytes);
      fmt::print("| kernel | seq_len | head_dim | causal | median ms | TFLOP/s | model MB | runs |\n");
      fmt::print("|---|---|---|---|---|---|---|---|\n");
      std::fflush(stdout);
    }
    DeviceArray Q(qkv), K(qkv), V(qkv);
    fa::bench::fill_normal(Q, 1);
    fa::bench::fill_normal(K, 2);
    fa::bench::fill_normal(V, 3);
    const DeviceArray O(qkv), L(bh * max_n), S(bh * max_n * max_n), P(bh * max_n * max_n);

    for (int n : seq_lens) {
      for (int d : head_dims) {
        for (bool causal : {false, true}) {
          const Config c{batch, heads, n, d, causal};
          const float scale = 1.0f / std::sqrt(static_cast<float>(d));
          const fa::DeviceProblem naive{batch * heads, n, n, d, scale, causal};
          const fa::DeviceProblem flash{batch * heads, n, n, d, scale, causal, {64, 64}};
          const auto mode = once ? simt::LaunchMode::synchronous : simt::LaunchMode::asynchronous;
          auto run_naive = [&] {
            ch04::gpu::launch_naive_attention(Q.data(), K.data(), V.data(), S.data(), P.data(), O.data(), naive, mode);
          };
          auto run_flash = [&] {
            ch05::gpu::launch_flash_attention_2(Q.data(), K.data(), V.data(), O.data(), L.data(), flash, mode);
          };
          if (once) {
            run_naive();
            run_flash();
            continue;
          }
          const Timing naive_t = measure("naive (ch04)", run_naive, warmup, runs, budget_ms);
          const Timing flash_t = measure("flash-attention-2 (ch05)", run_flash, warmup, runs, budget_ms);
          for (auto [name, t, is_flash] :
               {std::tuple{"naive (ch04)", naive_t, false}, std::tuple{"flash-attention-2 (ch05)", flash_t, true}}) {
            // The model counts a full (non-causal) pass; the causal kernels skip tiles it counts.
            const std::string model = causal ? "-" : fmt::format("{:.4g}", model_megabytes(c, is_flash));
            fmt::print("| {} | {} | {} | {} | {:.3f} | {:.2f} | {} | {} |\n", name, n, d, causal ? "yes" : "no",
                       t.median_ms, tflops(c, t.median_ms), model, t.runs);
          }
          std::fflush(stdout);
        }
      }
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}
