// ch07_gpu_bench: chapter 07's backward pass on a GPU, atomic dQ against deterministic dQ, timed
// with CUDA events. Built only where nvcc was found.
//
// For each (method, seq_len N, head_dim d, causal) it prints one Markdown table row: the median
// time of --runs passes after --warmup passes, and TFLOP/s counted as FlashAttention's benchmarks
// count the backward pass: 2.5 times the forward's 4 * batch * heads * N^2 * d (five matrix
// products of 2 N^2 d against the forward's two), halved when causal. Only the backward kernels are
// inside the timed region (the preprocessing, the dK, dV kernel and, deterministic, the dq kernel),
// launched without a host synchronisation between them (simt::LaunchMode::asynchronous); chapter
// 05's forward runs once before, untimed, to give O and L. The inputs are drawn once, on the GPU
// (fa::bench::fill_normal), for the largest shape; a smaller shape uses the beginning of each array.
// Where the CUDA runtime sees no GPU the program says so in one line and exits with 77; --plan
// prints what it would measure and exits without a GPU.
//
//   ch07_gpu_bench --batch 4 --heads 16 --seq 1024 4096 --head-dim 64 128 --runs 10 --warmup 2
//   ch07_gpu_bench --seq 4096 --head-dim 64 --once        each pass once, untimed (for ncu)
//   ch07_gpu_bench --plan                                 the rows, no GPU needed
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include "chapters/05_flash_attention_2/flash_attention_2.h"
#include "chapters/07_backward/backward.h"
#include "common/gpu_bench.h"
#include "common/simt/runtime/cuda_check.h"  // after <cuda_runtime.h>

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
  bool once = false, plan = false;
  fa::bench::add_flags(app, {seq_lens, head_dims, batch, heads, warmup, runs, once, plan}, {32, 64, 128}, "passes");
  CLI11_PARSE(app, argc, argv);
  if (!fa::bench::grid_fits(batch, heads)) return 2;

  // One allocation of each tensor for the largest shape ([batch * heads, N, d] row-major: the first
  // batch * heads * N * d values are a whole problem).
  const std::size_t max_n = static_cast<std::size_t>(*std::max_element(seq_lens.begin(), seq_lens.end()));
  const std::size_t max_d = static_cast<std::size_t>(*std::max_element(head_dims.begin(), head_dims.end()));
  const std::size_t rows = static_cast<std::size_t>(batch) * heads * max_n;
  const std::size_t qkv = rows * max_d;
  if (const int status = fa::bench::plan_or_no_gpu(
          "ch07_gpu_bench", plan, 2 * seq_lens.size() * head_dims.size() * 2,
          fmt::format("atomic and deterministic dQ, seq_len {}, head_dim {}, causal no and yes{}",
                      fmt::join(seq_lens, " "), fmt::join(head_dims, " "), once ? ", each pass once" : ""),
          static_cast<double>((8 * qkv + 2 * rows) * sizeof(float)));
      status >= 0)
    return status;

  try {
    if (!once) {
      fmt::print(
          "device: {}; batch {}, heads {}, float32; median of {} runs after {} warm-up; FLOPs: 2.5 x the "
          "forward's\n\n",
          fa::bench::device_name(), batch, heads, runs, warmup);
      fmt::print("| kernel | seq_len | head_dim | causal | median ms | TFLOP/s |\n");
      fmt::print("|---|---|---|---|---|---|\n");
    }
    DeviceArray Q(qkv), K(qkv), V(qkv), dO(qkv);
    fa::bench::fill_normal(Q, 1);
    fa::bench::fill_normal(K, 2);
    fa::bench::fill_normal(V, 3);
    fa::bench::fill_normal(dO, 4);
    const DeviceArray O(qkv), L(rows), D(rows), dQ(qkv), dK(qkv), dV(qkv);
    for (int n : seq_lens) {
      for (int d : head_dims) {
        for (bool causal : {false, true}) {
          const float scale = 1.0f / std::sqrt(static_cast<float>(d));
          const fa::DeviceProblem forward{batch * heads, n, n, d, scale, causal, {64, 64}};
          ch05::gpu::launch_flash_attention_2(Q.data(), K.data(), V.data(), O.data(), L.data(), forward,
                                              simt::LaunchMode::synchronous);
          for (bool deterministic : {false, true}) {
            const ch07::DeviceProblem problem{{batch * heads, n, n, d, scale, causal, ch07::tile_for_head_dim(d)},
                                              deterministic};
            const auto mode = once ? simt::LaunchMode::synchronous : simt::LaunchMode::asynchronous;
            auto pass = [&] {
              ch07::gpu::launch_backward(Q.data(), K.data(), V.data(), O.data(), L.data(), dO.data(), D.data(),
                                         dQ.data(), dK.data(), dV.data(), problem, mode);
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
