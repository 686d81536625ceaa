// ch06_gpu_bench: chapter 06's tensor-core FlashAttention-2 kernel on a GPU, timed with CUDA events.
// Built only where nvcc was found.
//
// For each (element type, seq_len N, head_dim d, causal) it prints one Markdown table row: the
// median time of --runs launches after --warmup launches, and TFLOP/s counted as
// 4 * batch * heads * N^2 * d floating-point operations (two matrix products of 2 N^2 d each),
// halved when causal (the work a causal kernel has to do; it skips the masked tiles). Only the
// kernel is inside the timed region: the shared-memory allowance is set before (prepare), and the
// launch puts the kernel on the stream without a host synchronisation (enqueue). The inputs are
// drawn once per element type, on the GPU (fa::bench::fill_normal), for the largest shape; a smaller
// shape uses the beginning of each array. Where the CUDA runtime sees no GPU the program says so in
// one line and exits with 77; --plan prints what it would measure and exits without a GPU.
//
//   ch06_gpu_bench --batch 4 --heads 16 --seq 1024 4096 8192 --head-dim 64 128 --dtype bf16 fp16
//   ch06_gpu_bench --seq 4096 --head-dim 128 --dtype bf16 --once    each kernel once, for ncu
//   ch06_gpu_bench --plan                                           the rows, no GPU needed
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include "chapters/06_tensor_cores/lab/gpu_bench_inputs.h"
#include "chapters/06_tensor_cores/tensor_cores.h"
#include "common/gpu_bench.h"
#include "common/simt/runtime/cuda_check.h"  // after <cuda_runtime.h>

int main(int argc, char** argv) {
  CLI::App app{"FlashAttention-2 on tensor cores (chapter 06), timed with CUDA events."};
  std::vector<int> seq_lens{1024, 4096, 8192};
  std::vector<int> head_dims{64, 128};
  std::vector<std::string> dtypes{"bf16", "fp16"};
  int batch = 4, heads = 16, warmup = 3, runs = 20;
  std::string tile_text = fa::tile_name(ch06::Options{}.tile);
  bool once = false, plan = false;
  fa::bench::add_flags(app, {seq_lens, head_dims, batch, heads, warmup, runs, once, plan}, {64, 128}, "launches");
  app.add_option("--dtype", dtypes, "element types")->check(CLI::IsMember({"bf16", "fp16"}));
  app.add_option("--tile", tile_text, "Br x Bc tile shape: " + fa::tile_list(ch06::kCompiled));
  CLI11_PARSE(app, argc, argv);
  if (!fa::bench::grid_fits(batch, heads)) return 2;

  try {
    const fa::Tile tile = fa::parse_tile(tile_text, ch06::kCompiled);
    for (int d : head_dims) {
      if (std::find(ch06::kHeadDims.begin(), ch06::kHeadDims.end(), d) == ch06::kHeadDims.end()) {
        throw std::invalid_argument(fmt::format("--head-dim {}: the kernel is compiled for 64 and 128", d));
      }
    }
    // One allocation of each tensor for the largest shape ([batch * heads, N, d] row-major: the first
    // batch * heads * N * d values are a whole problem).
    const std::size_t bh = static_cast<std::size_t>(batch) * heads;
    const std::size_t rows = bh * static_cast<std::size_t>(*std::max_element(seq_lens.begin(), seq_lens.end()));
    const std::size_t qkv = rows * static_cast<std::size_t>(*std::max_element(head_dims.begin(), head_dims.end()));
    if (const int status = fa::bench::plan_or_no_gpu(
            "ch06_gpu_bench", plan, dtypes.size() * seq_lens.size() * head_dims.size() * 2,
            fmt::format("dtype {}, seq_len {}, head_dim {}, causal no and yes, tile {}{}", fmt::join(dtypes, " "),
                        fmt::join(seq_lens, " "), fmt::join(head_dims, " "), tile_text,
                        once ? ", each kernel launched once" : ""),
            static_cast<double>(4 * qkv * sizeof(std::uint16_t) + rows * sizeof(float)));
        status >= 0)
      return status;
    if (!once) {
      fmt::print("device: {}; batch {}, heads {}, tile {}; median of {} runs after {} warm-up\n\n",
                 fa::bench::device_name(), batch, heads, tile_text, runs, warmup);
      fmt::print("| kernel | dtype | seq_len | head_dim | causal | median ms | TFLOP/s |\n");
      fmt::print("|---|---|---|---|---|---|---|\n");
    }
    fa::bench::DeviceArray<std::uint16_t> Q(qkv), K(qkv), V(qkv);
    const fa::bench::DeviceArray<std::uint16_t> O(qkv);
    const fa::bench::DeviceArray<float> L(rows);
    for (const std::string& dtype : dtypes) {
      const ch06::ElementType element = ch06::bench::fill_inputs(Q, K, V, dtype);
      for (int n : seq_lens) {
        for (int d : head_dims) {
          for (bool causal : {false, true}) {
            const ch06::DeviceProblem problem{
                {batch * heads, n, n, d, 1.0f / std::sqrt(static_cast<float>(d)), causal, tile}, element};
            auto run = [&] {
              ch06::gpu::launch_tensor_cores(Q.data(), K.data(), V.data(), O.data(), L.data(), problem,
                                             simt::LaunchMode::asynchronous);
            };
            if (once) {
              run();
              SIMT_CUDA_CHECK(cudaDeviceSynchronize());
              continue;
            }
            const double ms = fa::bench::median_ms(run, warmup, runs);
            fmt::print("| tensor cores (ch06) | {} | {} | {} | {} | {:.3f} | {:.1f} |\n", dtype, n, d,
                       causal ? "yes" : "no", ms, fa::bench::attention_tflops(batch, heads, n, d, causal, ms));
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
