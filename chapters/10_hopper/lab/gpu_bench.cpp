// ch10_gpu_bench: chapter 10's Hopper kernel beside chapter 06's tensor-core kernel on one GPU, in
// one run, timed with CUDA events. Built only where nvcc was found; it measures on a Hopper GPU
// (compute capability 9.0) alone, the only one chapter 10's sm_90a kernel runs on.
//
// For each (element type, seq_len N, head_dim d, causal) it prints two Markdown table rows, one per
// kernel, on the same inputs: the median time of --runs launches after --warmup launches, TFLOP/s
// counted as 4 * batch * heads * N^2 * d floating-point operations (halved when causal), and, on
// chapter 10's row, chapter 06's time over chapter 10's (the speed-up, measured in the same run).
// For e4m3 (chapter 10's FP8 kernel, hopper_fp8.cuh; chapter 06 has none) one row, whose speed-up
// is chapter 10's bf16 time over its FP8 time, where bf16 was measured in the same run; its inputs
// are quantised per block of 64 rows, without the Hadamard transform (neither changes the kernel's
// work), once, before the timed launches.
// Only the kernel is inside the timed region: chapter 10's tensor maps are encoded, the FP8 inputs
// quantised and the shared-memory allowances set before (ch10::gpu::prepare_hopper,
// prepare_hopper_fp8), and each launch puts the kernel on the stream without a host
// synchronisation. The inputs are drawn once per element type, on the GPU
// (fa::bench::fill_normal; float32 for e4m3), for the largest shape; a smaller shape uses the
// beginning of each array. Where the CUDA runtime sees no GPU, or the GPU is not a Hopper, the
// program says so in one line and exits with 77 (skipped); --plan prints what it would measure and
// exits without a GPU.
//
//   ch10_gpu_bench --batch 4 --heads 16 --seq 1024 4096 8192 --head-dim 64 128 --dtype bf16 fp16 e4m3
//   ch10_gpu_bench --seq 4096 --head-dim 128 --dtype bf16 --once    each kernel once, for ncu
//   ch10_gpu_bench --plan                                           the rows, no GPU needed
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include "chapters/06_tensor_cores/lab/gpu_bench_inputs.h"
#include "chapters/06_tensor_cores/tensor_cores.h"
#include "chapters/10_hopper/hopper_fp8.h"
#include "common/gpu_bench.h"
#include "common/simt/runtime/cuda_check.h"  // after <cuda_runtime.h>

namespace {

// The e4m3 rows: chapter 10's FP8 kernel on float32 inputs drawn on the GPU (seeds 1, 2, 3, as the
// 16-bit ones), quantised per block once for each shape (prepare_hopper_fp8), then timed as the
// other rows; O (bf16) and L into chapter 10's buffers.
void run_fp8(const std::vector<int>& seq_lens, const std::vector<int>& head_dims, int batch, int heads, int warmup,
             int runs, bool once, std::size_t qkv, const fa::bench::DeviceArray<std::uint16_t>& O,
             const fa::bench::DeviceArray<float>& L, const std::map<std::tuple<int, int, bool>, double>& bf16_ms10) {
  fa::bench::DeviceArray<float> Q(qkv), K(qkv), V(qkv);
  fa::bench::fill_normal(Q, 1);
  fa::bench::fill_normal(K, 2);
  fa::bench::fill_normal(V, 3);
  for (int n : seq_lens) {
    for (int d : head_dims) {
      for (bool causal : {false, true}) {
        const float scale = 1.0f / std::sqrt(static_cast<float>(d));
        const ch10::Fp8Problem problem{
            {{batch * heads, n, n, d, scale, causal, ch10::kTileShapes[0]}, ch10::ElementType::bf16},
            ch10::Quant::block};
        const ch10::Prepared launch =
            ch10::gpu::prepare_hopper_fp8(Q.data(), K.data(), V.data(), O.data(), L.data(), problem);
        auto run = [&] { launch(simt::LaunchMode::asynchronous); };
        if (once) {
          run();
          SIMT_CUDA_CHECK(cudaDeviceSynchronize());
          continue;
        }
        const double ms = fa::bench::median_ms(run, warmup, runs);
        const auto bf16 = bf16_ms10.find({n, d, causal});
        fmt::print("| Hopper FP8 (ch10) | e4m3 | {} | {} | {} | {:.3f} | {:.1f} | {} |\n", n, d, causal ? "yes" : "no",
                   ms, fa::bench::attention_tflops(batch, heads, n, d, causal, ms),
                   bf16 == bf16_ms10.end() ? std::string() : fmt::format("{:.2f}x", bf16->second / ms));
        std::fflush(stdout);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"FlashAttention-3's design (chapter 10) beside chapter 06's kernel, timed with CUDA events."};
  std::vector<int> seq_lens{1024, 4096, 8192};
  std::vector<int> head_dims{64, 128};
  std::vector<std::string> dtypes{"bf16", "fp16"};
  int batch = 4, heads = 16, warmup = 3, runs = 20;
  bool once = false, plan = false;
  fa::bench::add_flags(app, {seq_lens, head_dims, batch, heads, warmup, runs, once, plan}, {64, 128}, "launches");
  app.add_option("--dtype", dtypes, "element types (e4m3: chapter 10's FP8 kernel alone)")
      ->check(CLI::IsMember({"bf16", "fp16", "e4m3"}));
  CLI11_PARSE(app, argc, argv);
  if (!fa::bench::grid_fits(batch, heads)) return 2;

  try {
    // One allocation of each tensor for the largest shape ([batch * heads, N, d] row-major: the first
    // batch * heads * N * d values are a whole problem); each kernel writes its own O.
    const std::size_t bh = static_cast<std::size_t>(batch) * heads;
    const std::size_t rows = bh * static_cast<std::size_t>(*std::max_element(seq_lens.begin(), seq_lens.end()));
    const std::size_t qkv = rows * static_cast<std::size_t>(*std::max_element(head_dims.begin(), head_dims.end()));
    const bool fp8 = std::find(dtypes.begin(), dtypes.end(), "e4m3") != dtypes.end();
    const std::size_t shapes = seq_lens.size() * head_dims.size() * 2;
    // Two rows a shape for bf16 and fp16, one for e4m3; on the device 16-bit Q, K, V and two O, two
    // L, and for e4m3 float32 Q, K, V and their codes.
    if (const int status = fa::bench::plan_or_no_gpu(
            "ch10_gpu_bench", plan, (2 * dtypes.size() - (fp8 ? 1 : 0)) * shapes,
            fmt::format("chapters 10 and 06; dtype {}, seq_len {}, head_dim {}, causal no and yes{}",
                        fmt::join(dtypes, " "), fmt::join(seq_lens, " "), fmt::join(head_dims, " "),
                        once ? ", each kernel launched once" : ""),
            static_cast<double>(5 * qkv * sizeof(std::uint16_t) + 2 * rows * sizeof(float) +
                                (fp8 ? 3 * qkv * (sizeof(float) + 1) : 0)));
        status >= 0)
      return status;
    try {
      ch10::gpu::require_hopper();
    } catch (const std::runtime_error& e) {
      fmt::print(stderr, "ch10_gpu_bench: {}\n", e.what());
      return fa::bench::kNoGpuStatus;
    }
    if (!once) {
      fmt::print(
          "device: {}; batch {}, heads {}; chapter 10's tile 128 x 64, chapter 06's {}; median of {} runs "
          "after {} warm-up\n\n",
          fa::bench::device_name(), batch, heads, fa::tile_name(ch06::Options{}.tile), runs, warmup);
      fmt::print(
          "speed-up: chapter 06's time over chapter 10's (bf16, fp16); chapter 10's bf16 time over its FP8 time "
          "(e4m3)\n\n");
      fmt::print("| kernel | dtype | seq_len | head_dim | causal | median ms | TFLOP/s | speed-up |\n");
      fmt::print("|---|---|---|---|---|---|---|---|\n");
    }
    fa::bench::DeviceArray<std::uint16_t> Q(qkv), K(qkv), V(qkv);
    const fa::bench::DeviceArray<std::uint16_t> O06(qkv), O10(qkv);
    const fa::bench::DeviceArray<float> L06(rows), L10(rows);
    std::map<std::tuple<int, int, bool>, double> bf16_ms10;  // chapter 10's bf16 times, for the e4m3 rows
    for (const std::string& dtype : dtypes) {
      if (dtype == "e4m3") {
        run_fp8(seq_lens, head_dims, batch, heads, warmup, runs, once, qkv, O10, L10, bf16_ms10);
        continue;
      }
      const ch06::ElementType element = ch06::bench::fill_inputs(Q, K, V, dtype);
      for (int n : seq_lens) {
        for (int d : head_dims) {
          for (bool causal : {false, true}) {
            const float scale = 1.0f / std::sqrt(static_cast<float>(d));
            const ch06::DeviceProblem p06{{batch * heads, n, n, d, scale, causal, ch06::Options{}.tile}, element};
            const ch10::DeviceProblem p10{{batch * heads, n, n, d, scale, causal, ch10::kTileShapes[0]}, element};
            auto run06 = [&] {
              ch06::gpu::launch_tensor_cores(Q.data(), K.data(), V.data(), O06.data(), L06.data(), p06,
                                             simt::LaunchMode::asynchronous);
            };
            const ch10::Prepared launch10 =
                ch10::gpu::prepare_hopper(Q.data(), K.data(), V.data(), O10.data(), L10.data(), p10);
            auto run10 = [&] { launch10(simt::LaunchMode::asynchronous); };
            if (once) {
              run06();
              run10();
              SIMT_CUDA_CHECK(cudaDeviceSynchronize());
              continue;
            }
            const double ms06 = fa::bench::median_ms(run06, warmup, runs);
            const double ms10 = fa::bench::median_ms(run10, warmup, runs);
            const char* c = causal ? "yes" : "no";
            fmt::print("| tensor cores (ch06) | {} | {} | {} | {} | {:.3f} | {:.1f} | |\n", dtype, n, d, c, ms06,
                       fa::bench::attention_tflops(batch, heads, n, d, causal, ms06));
            fmt::print("| Hopper (ch10) | {} | {} | {} | {} | {:.3f} | {:.1f} | {:.2f}x |\n", dtype, n, d, c, ms10,
                       fa::bench::attention_tflops(batch, heads, n, d, causal, ms10), ms06 / ms10);
            if (dtype == "bf16") bf16_ms10[{n, d, causal}] = ms10;
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
