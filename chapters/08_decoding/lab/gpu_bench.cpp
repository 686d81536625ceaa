// ch08_gpu_bench: chapter 08's split-KV decoding on a GPU, timed with CUDA events. Built only where
// nvcc was found.
//
// Each row is one decoding step: one new token per sequence of a batch, every sequence holding
// `context` keys of a bf16 cache (or --dtype fp16) in pages of --page-size rows, with
// --heads query heads on --kv-heads K/V heads (grouped-query attention; the default 64 on 8 is
// 8:1) of head_dim --head-dim. For each (batch, context) it prints two Markdown rows, the split
// count of FlashAttention-2's rule for the GPU's SMs (ch08::choose_splits) and one split, each with
// the median time of --runs steps after --warmup (the split kernel and the combine), the cache's
// bytes over that time (the K and V rows of every key: the term that sets the floor of a decoding
// step, traffic_model.h), that rate as a share of 4.8 TB/s (an H200's DRAM), and the speedup of the
// splits over one split. Only the kernels are inside the timed region: launch_decoding with
// LaunchMode::asynchronous, its shared-memory allowance set by the untimed warm-up. The inputs are
// drawn once, on the GPU (fa::bench::fill_normal), for the largest shape; a smaller one uses the
// first pages of each sequence's share of the pool and the first sequences' queries. Where the CUDA
// runtime sees no GPU the program says so in one line and exits with 77; --plan prints what it
// would measure and exits without a GPU.
//
//   ch08_gpu_bench --batch 1 8 64 --context 1024 8192 32768 131072
//   ch08_gpu_bench --batch 1 --context 32768 --once         each kernel once, for ncu
//   ch08_gpu_bench --plan                                   the rows, no GPU needed
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

#include "chapters/08_decoding/decoding.h"
#include "chapters/08_decoding/lab/traffic_model.h"
#include "common/gpu_bench.h"
#include "common/simt/runtime/cuda_check.h"  // after <cuda_runtime.h>

namespace {

// The problem of one row: `batch` sequences of `context` keys each, one new token, in the pool of
// the largest shape (each sequence's pages in a range of its own, pages_per_seq_max wide).
struct Row {
  ch08::Plan plan;
  std::vector<int> table, lengths;
};

Row make_row(int batch, int context, int heads, int head_dim, int page_size, int pages_per_seq_max,
             const fa::Shape4& pool, const ch08::Options& options) {
  const int pages_per_seq = (context + page_size - 1) / page_size;
  Row row;
  for (int b = 0; b < batch; ++b) {
    for (int n = 0; n < pages_per_seq; ++n) row.table.push_back(b * pages_per_seq_max + n);
  }
  row.lengths.assign(static_cast<std::size_t>(batch), context);
  const fa::Shape4 q{static_cast<std::size_t>(batch), static_cast<std::size_t>(heads), 1,
                     static_cast<std::size_t>(head_dim)};
  row.plan = ch08::check_problem(q, {pool, static_cast<std::size_t>(pages_per_seq), row.lengths}, options);
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Split-KV decoding (chapter 08) on a GPU, timed with CUDA events, beside the DRAM floor."};
  std::vector<int> batches{1, 8, 64};
  std::vector<int> contexts{1024, 8192, 32768, 131072};
  int heads = 64, kv_heads = 8, head_dim = 128, page_size = 256, sms = 0, warmup = 3, runs = 20;
  std::string dtype = "bf16";
  bool once = false, plan = false;
  app.add_option("--batch", batches, "sequences per step, each in turn")->check(CLI::Range(1, 4096));
  app.add_option("--context", contexts, "keys in every sequence's cache, each in turn")->check(CLI::Range(1, 1 << 24));
  app.add_option("--heads", heads, "query heads")->check(CLI::Range(1, 1024));
  app.add_option("--kv-heads", kv_heads, "K/V heads (heads must be a multiple of it)")->check(CLI::Range(1, 1024));
  app.add_option("--head-dim", head_dim, "head dim (64 or 128)");
  app.add_option("--page-size", page_size, "rows per page of the paged cache")->check(CLI::Range(1, 1 << 24));
  app.add_option("--dtype", dtype, "the cache's element type")->check(CLI::IsMember({"bf16", "fp16"}));
  app.add_option("--sms", sms, "the SMs the split count fills (default: the GPU's; 132 with --plan)")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--warmup", warmup, "untimed steps first")->check(CLI::NonNegativeNumber);
  app.add_option("--runs", runs, "timed steps (the median is reported)")->check(CLI::PositiveNumber);
  app.add_flag("--once", once, "launch each step once, untimed (for ncu), then stop");
  app.add_flag("--plan", plan, "print the rows it would measure and the device memory, then stop (no GPU needed)");
  app.footer("Exit status: 0 measured, 1 a CUDA or kernel error or a bad value, 2 a bad flag, 77 no GPU seen.");
  CLI11_PARSE(app, argc, argv);

  try {
    if (heads % kv_heads != 0) {
      throw std::invalid_argument(fmt::format("--kv-heads {}: --heads {} is not a multiple of it", kv_heads, heads));
    }
    const ch08::CacheType type = ch08::parse_cache_type(dtype);
    const int batch_max = *std::max_element(batches.begin(), batches.end());
    const int context_max = *std::max_element(contexts.begin(), contexts.end());
    const int pages_per_seq_max = (context_max + page_size - 1) / page_size;
    const fa::Shape4 pool{static_cast<std::size_t>(batch_max) * pages_per_seq_max, static_cast<std::size_t>(kv_heads),
                          static_cast<std::size_t>(page_size), static_cast<std::size_t>(head_dim)};
    // Every row's problem, checked (head dim, sizes, limits) before any CUDA call.
    ch08::Options options;
    options.cache_type = type;
    options.sms = sms > 0 ? sms : ch08::kDefaultSms;
    for (int b : batches) {
      for (int c : contexts) (void)make_row(b, c, heads, head_dim, page_size, pages_per_seq_max, pool, options);
    }
    const std::size_t element = sizeof(std::uint16_t);
    const std::size_t q_values = static_cast<std::size_t>(batch_max) * heads * head_dim;
    const double device_bytes =
        static_cast<double>(2 * pool.size() * element + q_values * element) +
        4.0 * (static_cast<double>(ch08::kMaxSplits + 1) * static_cast<double>(q_values + q_values / head_dim) +
               static_cast<double>(batch_max) * (pages_per_seq_max + 1));
    if (const int status = fa::bench::plan_or_no_gpu(
            "ch08_gpu_bench", plan, 2 * batches.size() * contexts.size(),
            fmt::format("batch {}, context {}, {} heads on {} K/V heads, head_dim {}, {} pages of {} "
                        "rows; the splits of FlashAttention-2's rule for {} SMs, and one split{}",
                        fmt::join(batches, " "), fmt::join(contexts, " "), heads, kv_heads, head_dim, dtype, page_size,
                        options.sms, once ? ", each launched once" : ""),
            device_bytes);
        status >= 0)
      return status;
    if (sms == 0) {
      int device = 0;
      SIMT_CUDA_CHECK(cudaGetDevice(&device));
      SIMT_CUDA_CHECK(cudaDeviceGetAttribute(&options.sms, cudaDevAttrMultiProcessorCount, device));
    }

    // The pool (K and V) and the queries, drawn on the GPU; the outputs and the largest scratch.
    fa::bench::DeviceArray<std::uint16_t> K(pool.size()), V(pool.size()), Q(q_values);
    const auto format = type == ch08::CacheType::fp16 ? fa::bench::Float16::fp16 : fa::bench::Float16::bf16;
    fa::bench::fill_normal(K, format, 2);
    fa::bench::fill_normal(V, format, 3);
    fa::bench::fill_normal(Q, format, 1);
    const fa::bench::DeviceArray<float> O(q_values), L(q_values / head_dim),
        O_parts(static_cast<std::size_t>(ch08::kMaxSplits) * q_values),
        L_parts(static_cast<std::size_t>(ch08::kMaxSplits) * (q_values / head_dim));
    fa::bench::DeviceArray<int> table(static_cast<std::size_t>(batch_max) * pages_per_seq_max),
        lengths(static_cast<std::size_t>(batch_max));

    if (!once) {
      fmt::print(
          "device: {}; {} heads on {} K/V heads, head_dim {}, one new token per sequence, a {} cache in pages of {} "
          "rows; splits by FlashAttention-2's rule for {} SMs; median of {} steps after {} warm-up; GB/s: the cache's "
          "bytes (K and V of every key) over the time\n\n",
          fa::bench::device_name(), heads, kv_heads, head_dim, dtype, page_size, options.sms, runs, warmup);
      fmt::print("| kernel | batch | context | splits | median ms | GB/s | of 4.8 TB/s | speedup over 1 split |\n");
      fmt::print("|---|---|---|---|---|---|---|---|\n");
    }
    for (int b : batches) {
      for (int c : contexts) {
        const Row row = make_row(b, c, heads, head_dim, page_size, pages_per_seq_max, pool, options);
        SIMT_CUDA_CHECK(
            cudaMemcpy(table.data(), row.table.data(), row.table.size() * sizeof(int), cudaMemcpyHostToDevice));
        SIMT_CUDA_CHECK(
            cudaMemcpy(lengths.data(), row.lengths.data(), row.lengths.size() * sizeof(int), cudaMemcpyHostToDevice));
        ch08::Options one_split = options;
        one_split.splits = 1;
        const Row single = make_row(b, c, heads, head_dim, page_size, pages_per_seq_max, pool, one_split);
        const double cache_bytes = static_cast<double>(ch08::decode_traffic(row.plan.problem, row.lengths).cache);
        std::vector<double> ms;  // the rule's split count, then one split
        for (const Row* r : {&row, &single}) {
          auto step = [&] {
            ch08::gpu::launch_decoding(Q.data(), K.data(), V.data(), table.data(), lengths.data(), O_parts.data(),
                                       L_parts.data(), O.data(), L.data(), r->plan.problem,
                                       simt::LaunchMode::asynchronous);
          };
          if (once) {
            step();
            SIMT_CUDA_CHECK(cudaDeviceSynchronize());
          } else {
            ms.push_back(fa::bench::median_ms(step, warmup, runs));
          }
        }
        if (once) continue;
        for (std::size_t k = 0; k < 2; ++k) {
          const double rate = cache_bytes / (ms[k] * 1e-3) / 1e9;
          fmt::print("| split-KV (ch08) | {} | {} | {} | {:.4f} | {:.0f} | {:.0f}% | {} |\n", b, c,
                     k == 0 ? fmt::format("{} (rule)", row.plan.problem.splits) : std::string("1"), ms[k], rate,
                     100.0 * rate / (ch08::kH200DramBytesPerSecond / 1e9),
                     k == 0 ? fmt::format("{:.2f}x", ms[1] / ms[0]) : std::string("-"));
        }
        std::fflush(stdout);
      }
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}
