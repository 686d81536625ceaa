// ch05_gpu_bench: chapter 04's naive kernels against chapter 05's FlashAttention-2 kernel on a GPU,
// timed with CUDA events. Run by scripts/gpu_check.sh; built only where nvcc was found.
//
// For each (kernel, seq_len N, head_dim d, causal) it prints one Markdown table row: the median
// time of --runs launches after --warmup launches, and TFLOP/s counted as 4 * batch * heads * N^2
// * d floating-point operations (two matrix products of 2 N^2 d each), halved when causal. Beside
// it, the bytes the chapter 05 traffic model predicts for the whole batch in float32 (standard
// attention for the naive kernels; FlashAttention-2 without L2 reuse, Br = 64, for the flash one;
// non-causal rows only, since the model counts every tile).
//
//   ch05_gpu_bench                           the GPU check's table (batch 4, heads 16)
//   ch05_gpu_bench --seq 4096 --head-dim 64 --once   each kernel once, for a profiler (ncu)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <tuple>
#include <vector>

#include <CLI/CLI.hpp>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include "chapters/04_naive_attention/backends.h"
#include "chapters/05_flash_attention_2/backends.h"
#include "chapters/05_flash_attention_2/traffic_model.h"
#include "common/cuda_check.h"  // after <cuda_runtime.h>
#include "common/gpu_timing.h"
#include "common/random.h"

namespace {

using fa::gpu_bench::DeviceArray;
using fa::gpu_bench::median_ms;

struct Config {
  int batch = 4, heads = 16, seq_len = 1024, head_dim = 64;
  bool causal = false;
};

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
  bool once = false;
  app.add_option("--seq", seq_lens, "sequence lengths (queries = keys)");
  app.add_option("--head-dim", head_dims, "head dims (32, 64 or 128)");
  app.add_option("--batch", batch, "batch size")->check(CLI::PositiveNumber);
  app.add_option("--heads", heads, "heads")->check(CLI::PositiveNumber);
  app.add_option("--warmup", warmup, "untimed launches first")->check(CLI::NonNegativeNumber);
  app.add_option("--runs", runs, "timed launches (the median is reported)")->check(CLI::PositiveNumber);
  app.add_flag("--once", once, "launch each kernel once, untimed (for ncu), then stop");
  CLI11_PARSE(app, argc, argv);

  try {
    int device = 0;
    cudaDeviceProp prop{};
    FA_CUDA_CHECK(cudaGetDevice(&device));
    FA_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    if (!once) {
      fmt::print("device: {}; batch {}, heads {}, float32; median of {} runs after {} warm-up\n\n",
                 prop.name, batch, heads, runs, warmup);
      fmt::print("| kernel | seq_len | head_dim | causal | median ms | TFLOP/s | model MB |\n");
      fmt::print("|---|---|---|---|---|---|---|\n");
    }
    for (int n : seq_lens) {
      for (int d : head_dims) {
        const std::size_t qkv = static_cast<std::size_t>(batch) * heads * n * d;
        const std::size_t scores = static_cast<std::size_t>(batch) * heads * n * n;
        const DeviceArray Q(fa::normal<float>(qkv, 1)), K(fa::normal<float>(qkv, 2)),
            V(fa::normal<float>(qkv, 3)), O(qkv), L(static_cast<std::size_t>(batch) * heads * n);
        const DeviceArray S(scores), P(scores);
        for (bool causal : {false, true}) {
          const Config c{batch, heads, n, d, causal};
          const float scale = 1.0f / std::sqrt(static_cast<float>(d));
          const ch04::DeviceProblem naive{batch * heads, n, n, d, scale, causal};
          const ch05::DeviceProblem flash{batch * heads, n, n, d, scale, causal, {64, 64}};
          auto run_naive = [&] {
            ch04::gpu::launch_naive_attention(Q.data(), K.data(), V.data(), S.data(), P.data(), O.data(), naive);
          };
          auto run_flash = [&] {
            ch05::gpu::launch_flash_attention_2(Q.data(), K.data(), V.data(), O.data(), L.data(), flash);
          };
          if (once) {
            run_naive();
            run_flash();
            continue;
          }
          const double naive_ms = median_ms(run_naive, warmup, runs);
          const double flash_ms = median_ms(run_flash, warmup, runs);
          for (auto [name, ms, is_flash] : {std::tuple{"naive (ch04)", naive_ms, false},
                                            std::tuple{"flash-attention-2 (ch05)", flash_ms, true}}) {
            // The model counts a full (non-causal) pass; the causal kernels skip tiles it counts.
            const std::string model = causal ? "-" : fmt::format("{:.4g}", model_megabytes(c, is_flash));
            fmt::print("| {} | {} | {} | {} | {:.3f} | {:.2f} | {} |\n", name, n, d,
                       causal ? "yes" : "no", ms, tflops(c, ms), model);
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
