// ch07_gpu_bench: chapter 07's backward pass on a GPU, atomic dQ against deterministic dQ, timed
// with CUDA events. Built only where nvcc was found.
//
// For each (method, seq_len N, head_dim d, causal) it prints one Markdown table row: the median
// time of --runs passes after --warmup passes, and TFLOP/s counted as FlashAttention's benchmarks
// count the backward pass: 2.5 times the forward's 4 * batch * heads * N^2 * d (five matrix
// products of 2 N^2 d against the forward's two), halved when causal. Only the backward kernels are
// inside the timed region (the preprocessing, the dK, dV kernel and, deterministic, the dq kernel);
// chapter 05's forward runs once before, untimed, to give O and L.
//
//   ch07_gpu_bench --batch 4 --heads 16 --seq 1024 4096 --head-dim 64 128 --runs 10 --warmup 2
//   ch07_gpu_bench --seq 4096 --head-dim 64 --once        each pass once, untimed (for ncu)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "chapters/05_flash_attention_2/flash_attention_2.h"
#include "chapters/07_backward/backward.h"
#include "common/gpu_bench.h"
#include "common/random.h"
#include "common/simt/cuda_check.h"  // after <cuda_runtime.h>

namespace {

using DeviceArray = fa::bench::DeviceArray<float>;
using fa::bench::median_ms;

// 2.5 x the forward's 4 b h N^2 d, halved when causal (FlashAttention's benchmark convention).
double tflops(int batch, int heads, int n, int d, bool causal, double ms) {
  const double flops = 2.5 * 4.0 * batch * heads * static_cast<double>(n) * n * d * (causal ? 0.5 : 1.0);
  return flops / (ms * 1e-3) / 1e12;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Chapter 07's backward pass, atomic against deterministic dQ, timed with CUDA events."};
  std::vector<int> seq_lens{1024, 4096};
  std::vector<int> head_dims{64, 128};
  int batch = 4, heads = 16, warmup = 2, runs = 10;
  bool once = false;
  fa::bench::add_flags(app, {seq_lens, head_dims, batch, heads, warmup, runs, once}, {32, 64, 128}, "passes");
  CLI11_PARSE(app, argc, argv);

  try {
    fa::bench::check_grid(batch, heads);
    const cudaDeviceProp prop = fa::bench::device_properties();  // or one line: no GPU
    if (!once) {
      fmt::print(
          "device: {}; batch {}, heads {}, float32; median of {} runs after {} warm-up; FLOPs: 2.5 x the "
          "forward's\n\n",
          prop.name, batch, heads, runs, warmup);
      fmt::print("| kernel | seq_len | head_dim | causal | median ms | TFLOP/s |\n");
      fmt::print("|---|---|---|---|---|---|\n");
    }
    for (int n : seq_lens) {
      for (int d : head_dims) {
        const std::size_t qkv = static_cast<std::size_t>(batch) * heads * n * d;
        const std::size_t rows = static_cast<std::size_t>(batch) * heads * n;
        const DeviceArray Q(fa::normal<float>(qkv, 1)), K(fa::normal<float>(qkv, 2)), V(fa::normal<float>(qkv, 3)),
            dO(fa::normal<float>(qkv, 4)), O(qkv), L(rows), D(rows), dQ(qkv), dK(qkv), dV(qkv);
        for (bool causal : {false, true}) {
          const float scale = 1.0f / std::sqrt(static_cast<float>(d));
          const fa::DeviceProblem forward{batch * heads, n, n, d, scale, causal, {64, 64}};
          ch05::gpu::launch_flash_attention_2(Q.data(), K.data(), V.data(), O.data(), L.data(), forward,
                                              simt::LaunchMode::synchronous);
          for (bool deterministic : {false, true}) {
            const ch07::DeviceProblem problem{{batch * heads, n, n, d, scale, causal, ch07::tile_for_head_dim(d)},
                                              deterministic};
            auto pass = [&] {
              ch07::gpu::launch_backward(Q.data(), K.data(), V.data(), O.data(), L.data(), dO.data(), D.data(),
                                         dQ.data(), dK.data(), dV.data(), problem, simt::LaunchMode::synchronous);
            };
            if (once) {
              pass();
              continue;
            }
            const double ms = median_ms(pass, warmup, runs);
            fmt::print("| {} | {} | {} | {} | {:.3f} | {:.2f} |\n",
                       deterministic ? "backward deterministic dQ (ch07)" : "backward atomic dQ (ch07)", n, d,
                       causal ? "yes" : "no", ms, tflops(batch, heads, n, d, causal, ms));
            std::fflush(stdout);
          }
        }
      }
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}
