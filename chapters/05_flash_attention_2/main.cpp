// ch05_flash_attention_2: the FlashAttention-2 kernel, checked against chapter 04; and the HBM
// traffic model.
//
//   ch05_flash_attention_2                                random inputs, the GPU if there is one
//   ch05_flash_attention_2 --device cpu --seq-q 203 --seq-k 113 --causal --tile 32x64
//   ch05_flash_attention_2 --q q.npy --k k.npy --v v.npy --out o.npy
//   ch05_flash_attention_2 --traffic                      the traffic table
//   ch05_flash_attention_2 --traffic --seq 16384 --head-dim 128 --br 64 --bytes 4
//   ch05_flash_attention_2 --summary tour.tsv             ... and append the check to tour.tsv
//
// The check at the end: O against chapter 04's O, and L against the log-sum-exp of chapter 04's
// rows of S, within the bounds of agreement.h (the tests use the same). Where chapter 04 cannot run
// the problem (its S and P would not fit, or pass its kernels' limits), against chapter 03 in double
// on a sample of rows instead; the demo says so before it starts.
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "chapters/03_online_weighted_sum/attention.h"
#include "chapters/04_naive_attention/agreement.h"
#include "chapters/04_naive_attention/naive_attention.h"
#include "chapters/05_flash_attention_2/agreement.h"
#include "chapters/05_flash_attention_2/flash_attention_2.h"
#include "chapters/05_flash_attention_2/profile_report.h"
#include "chapters/05_flash_attention_2/traffic_table.h"
#include "common/attention_cli.h"
#include "common/cli.h"
#include "common/compare.h"
#include "common/memory.h"
#include "common/npy.h"
#include "common/profile_cli.h"
#include "common/program.h"
#include "common/simt/progress.h"

namespace {

// Rough CPU-path rates, measured on a 2-core laptop (for the estimate of a long run only).
constexpr double kFlashFlopsPerSecond = 1e9;    // this chapter's kernel through common/simt
constexpr double kNaiveFlopsPerSecond = 0.5e9;  // chapter 04's three kernels

// Rows of chapter 03's float64 reference when chapter 04 cannot run the problem.
constexpr std::size_t kReferenceRows = 512;

// Why chapter 04 cannot run this problem in this run, or nothing when it can: its own limits
// (ch04::check_problem), or its S and P beside everything else would not fit in memory.
std::optional<std::string> why_no_chapter_04(const fa::AttentionShape& shape, const ch04::Options& options,
                                             const fa::MemoryPlan& without_it) {
  try {
    (void)ch04::check_problem(shape, options);
  } catch (const std::invalid_argument& e) {
    return std::string(e.what());
  }
  const std::uint64_t needed = fa::saturating_add(without_it.total(), ch04::memory_needed(shape));
  if (needed > fa::available_memory_bytes()) {
    return fmt::format("its S and P need {}, and with the rest this run would need {} of the {} available",
                       fa::format_bytes(ch04::memory_needed(shape)), fa::format_bytes(needed),
                       fa::format_bytes(fa::available_memory_bytes()));
  }
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  fa::demo::Program program(
      "Chapter 05: the FlashAttention-2 forward kernel (S and P never leave the chip), and the HBM traffic model.");
  CLI::App& app = program.app();
  fa::AttentionCli cli;
  fa::add_attention_flags(app, cli);
  std::string tile_text = "64x64";
  app.add_option("--tile", tile_text, "Br x Bc tile shape of the kernel: 64x64, 32x64 or 64x32");
  bool traffic = false;
  std::size_t traffic_seq = 4096, traffic_br = 128, traffic_bytes = 2;
  auto* traffic_flag = app.add_flag("--traffic", traffic, "print the HBM traffic table instead of running the kernel");
  fa::cli::add_integer(app, "--seq", traffic_seq, "with --traffic: sequence length N", 1, ch05::kMaxSeqLen)
      ->needs(traffic_flag);
  fa::cli::add_integer(app, "--br", traffic_br, "with --traffic: query rows per tile, Br (Bc is set equal)", 1,
                       ch05::kMaxBlock)
      ->needs(traffic_flag);
  fa::cli::add_integer(app, "--bytes", traffic_bytes, "with --traffic: bytes per value (2 for BF16, 4 for float32)", 1,
                       ch05::kMaxBytesPerValue)
      ->needs(traffic_flag);
  program.summary_option()->excludes(traffic_flag);
  fa::add_profile_flags(app, cli.device);  // --profile, --profile-json, --racecheck (common/profile_cli.h)

  return program.run(argc, argv, [&]() -> std::optional<fa::demo::Check> {
    if (traffic) {
      fa::demo::print_heading(5, "the HBM traffic model");
      fa::demo::print_shows(
          "Bytes moved between HBM (the GPU's memory) and the chip by one head's forward pass, from the\n"
          "model in traffic_model.h: standard attention, which writes S and P and reads them back;\n"
          "FlashAttention-2 when no re-read of K and V hits the L2 cache; and the floor, every value\n"
          "read or written once.");
      const bool custom = app.count("--seq") + app.count("--head-dim") + app.count("--br") + app.count("--bytes") > 0;
      if (!custom) {
        fmt::print("{}", ch05::format_traffic_table(ch05::traffic_table_cases()));
        fmt::print("\n(the traffic table: BF16, blocks of 128; try --seq, --head-dim, --br, --bytes)\n");
      } else {
        const auto br = static_cast<std::int64_t>(traffic_br);
        const ch05::TrafficCase c{static_cast<std::int64_t>(traffic_seq),
                                  static_cast<std::int64_t>(cli.head_dim),
                                  br,
                                  br,
                                  static_cast<std::int64_t>(traffic_bytes),
                                  4};
        fmt::print("{}", ch05::format_traffic_table(std::vector<ch05::TrafficCase>{c}));
      }
      return std::nullopt;
    }

    // Everything this run needs, checked before anything is allocated.
    const fa::Tile tile = fa::parse_tile(tile_text, ch05::kCompiled);
    const fa::Device device = fa::chosen_device(cli);
    const fa::AttentionShape shape = fa::plan_inputs(cli);
    const ch05::Options options{cli.scale, cli.causal, tile};
    const ch04::Options naive_options{cli.scale, cli.causal};
    (void)ch05::check_problem(shape, options);
    fa::MemoryPlan plan;
    fa::add_inputs(plan, shape);
    plan.add("this chapter's kernel (Q, K, V, O, L and the copies back)", ch05::memory_needed(shape));
    const std::optional<std::string> no_chapter_04 = why_no_chapter_04(shape, naive_options, plan);
    if (!no_chapter_04) plan.add("chapter 04's kernels (with S and P)", ch04::memory_needed(shape));
    plan.check("ch05_flash_attention_2");

    fa::demo::print_heading(
        5, fmt::format("FlashAttention-2: Br = {} query rows per block, K and V streamed in tiles of Bc = {}", tile.Br,
                       tile.Bc));
    fa::demo::print_shows(
        "One kernel: each thread block holds Br query rows with their running max m, sum l and un-scaled\n"
        "output, and streams K and V through shared memory in tiles of Bc keys, folding each tile in with\n"
        "chapter 03's recurrence. S and P exist only a tile at a time, on chip. O is compared with chapter\n"
        "04's three kernels on the same inputs, and L = m + log(l) with the log-sum-exp of chapter 04's S.");
    if (no_chapter_04) {
      fmt::print(
          "Chapter 04 cannot run this problem: {}.\nSo O and L are compared with chapter 03 (float64) on {} "
          "rows spread over the problem instead.\n\n",
          *no_chapter_04, kReferenceRows);
    }
    const double flops = 4.0 * static_cast<double>(shape.batch * shape.heads) * static_cast<double>(shape.seq_len_q) *
                         static_cast<double>(shape.seq_len_k) * static_cast<double>(shape.head_dim);
    const double rate =
        no_chapter_04 ? kFlashFlopsPerSecond : 1.0 / (1.0 / kFlashFlopsPerSecond + 1.0 / kNaiveFlopsPerSecond);
    const bool long_run = device == fa::Device::cpu && fa::demo::announce_long_run(flops, rate);
    const fa::AttentionProblem in = fa::load_or_draw(cli);
    fmt::print("Q {}, K and V with seq_len {}{}; inputs: {}; device: {}\n\n", in.Q.shape.str(), shape.seq_len_k,
               cli.causal ? ", causal" : "", in.origin, fa::to_string(device));
    const auto with_progress = [&](const char* label, const auto& run) {
      const std::optional<simt::ShowProgress> progress =
          long_run ? std::optional<simt::ShowProgress>(std::in_place, label) : std::nullopt;
      return run();
    };

    const ch05::Result flash =
        with_progress("FlashAttention-2", [&] { return ch05::flash_attention_2(in.Q, in.K, in.V, options, device); });
    fmt::print("{}",
               ch05::format_profile_beside_model(fa::end_profile(), in.Q.shape, shape.seq_len_k, tile, cli.causal));
    const ch03::AttentionOptions reference_options{.scale = cli.scale, .causal = cli.causal};
    const ch04::Agreement agreement = ch04::agreement_bound(in.Q, in.K, in.V, reference_options);
    fa::ErrorStats err_O;
    ch05::WorstL L_worst;
    std::string against;
    if (!no_chapter_04) {
      const ch04::Result naive = with_progress(
          "chapter 04's kernels", [&] { return ch04::naive_attention(in.Q, in.K, in.V, naive_options, device); });
      fmt::print(
          "time: {:.3f} ms for FlashAttention-2, {:.3f} ms for chapter 04's three kernels ({}; wall "
          "clock of one run, not a benchmark)\n",
          flash.elapsed_ms, naive.elapsed_ms, fa::to_string(device));
      err_O = fa::compare(flash.O.values, naive.O.values);
      std::vector<double> L_ref(flash.L.size());
      for (std::size_t r = 0; r < L_ref.size(); ++r) {
        L_ref[r] = ch05::logsumexp(std::span<const float>(naive.S).subspan(r * shape.seq_len_k, shape.seq_len_k));
      }
      L_worst = ch05::worst_L(flash.L, L_ref, shape.seq_len_k);
      against = "ch04";
      fmt::print("agreement with chapter 04, O: {}\n", fa::describe(err_O));
    } else {
      fmt::print("time: {:.3f} ms for FlashAttention-2 ({}; wall clock of one run, not a benchmark)\n",
                 flash.elapsed_ms, fa::to_string(device));
      const std::vector<std::size_t> rows = fa::sample_rows(fa::attention_rows(shape), kReferenceRows);
      const ch03::AttentionRows ref = ch03::attention_rows(in.Q, in.K, in.V, reference_options, rows);
      std::vector<float> O_rows, L_rows;
      for (std::size_t r : rows) {
        O_rows.insert(O_rows.end(), flash.O.values.begin() + static_cast<std::ptrdiff_t>(r * shape.head_dim),
                      flash.O.values.begin() + static_cast<std::ptrdiff_t>((r + 1) * shape.head_dim));
        L_rows.push_back(flash.L[r]);
      }
      err_O = fa::compare(O_rows, ref.O);
      // The scores are double here: each row's bound gains twice the plain float32 evaluation's error.
      const ch03::PlainRows<float> plain = ch03::plain_attention_rows<float>(in.Q, in.K, in.V, reference_options, rows);
      std::vector<double> allowance(rows.size());
      for (std::size_t n = 0; n < rows.size(); ++n) {
        const double e = fa::abs_difference(plain.L[n], ref.L[n]);
        allowance[n] = std::isfinite(e) ? 2.0 * e : 0.0;
      }
      L_worst = ch05::worst_L(L_rows, ref.L, shape.seq_len_k, allowance);
      against = fmt::format("ch03 on {} rows", rows.size());
      fmt::print("agreement with chapter 03 (float64) on {} rows, O: {}\n", rows.size(), fa::describe(err_O));
    }
    fmt::print("  bound: {}\n", fa::explain_bound(agreement.plain_error));
    fmt::print("L = m + log(l), the row furthest from its reference: row {}, |L - L_ref| = {:.3g}, bound {:.3g}\n",
               L_worst.row, L_worst.error, L_worst.bound);

    if (in.Q.shape.seq_len == shape.seq_len_k) {
      const ch05::TrafficCase model{static_cast<std::int64_t>(shape.seq_len_k),
                                    static_cast<std::int64_t>(shape.head_dim),
                                    tile.Br,
                                    tile.Bc,
                                    4,
                                    4};
      fmt::print("\nThe traffic model for one head of this problem (float32, non-causal):\n{}",
                 ch05::format_traffic_table(std::vector<ch05::TrafficCase>{model}));
    }
    if (!cli.out_path.empty()) {
      fa::write_npy_f32(cli.out_path, flash.O);
      fmt::print("wrote O to {}\n", cli.out_path);
    }
    return fa::demo::Check{
        "05", fmt::format("FlashAttention-2 ({}, {}x{}) vs {}", fa::to_string(device), tile.Br, tile.Bc, against),
        fmt::format("{}, L {:.2g}", fa::demo::error_field("O", err_O), L_worst.error),
        fmt::format("{:.2g}, {:.1e}", agreement.bound, L_worst.bound),
        fa::agrees(err_O, agreement.bound) && L_worst.pass};
  });
}
