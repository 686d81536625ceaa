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
// rows of S, within the bounds of lab/vs_chapter_04.h (the tests use the same); and O and L against chapter
// 03 in double on a sample of rows, the recurrence this kernel runs, within the same bounds. Where
// chapter 04 cannot run the problem (its S and P would not fit, or pass its kernels' limits),
// against chapter 03 alone; the demo says so before it starts.
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "chapters/03_online_weighted_sum/attention.h"
#include "chapters/04_naive_attention/lab/vs_chapter_03.h"
#include "chapters/04_naive_attention/naive_attention.h"
#include "chapters/05_flash_attention_2/flash_attention_2.h"
#include "chapters/05_flash_attention_2/lab/profile_report.h"
#include "chapters/05_flash_attention_2/lab/traffic_table.h"
#include "chapters/05_flash_attention_2/lab/vs_chapter_04.h"
#include "common/profile_cli.h"
#include "common/program.h"
#include "common/simt/runtime/progress.h"

namespace {

// Rough CPU-path rates, measured on a 2-core laptop (for the estimate of a long run only).
constexpr double kFlashFlopsPerSecond = 1e9;    // this chapter's kernel through common/simt
constexpr double kNaiveFlopsPerSecond = 0.5e9;  // chapter 04's three kernels

// Rows of chapter 03's float64 reference (a sample spread over the problem: the rows are
// independent, and a few hundred of them catch a wrong recurrence at once).
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

// O and L of chapter 03 (float64) on a sample of rows, and this kernel's O and L on the same rows,
// compared: O in relative L2, L row by row with lab/vs_chapter_04.h's bound, which against float64 scores
// gains twice the plain float32 evaluation's error of each row's L (common/tolerance.h's rule).
struct AgainstChapter03 {
  std::size_t rows = 0;
  fa::ErrorStats O;
  ch05::WorstL L;
};

AgainstChapter03 against_chapter_03(const fa::AttentionFlags::Inputs& in, const ch05::Result& flash,
                                    const fa::AttentionShape& shape, const ch03::AttentionOptions& options) {
  const std::vector<std::size_t> rows = fa::sample_rows(fa::attention_rows(shape), kReferenceRows);
  const ch03::AttentionRows ref = ch03::attention_rows(in.Q, in.K, in.V, options, rows);
  std::vector<float> O_rows, L_rows;
  for (std::size_t r : rows) {
    O_rows.insert(O_rows.end(), flash.O.values.begin() + static_cast<std::ptrdiff_t>(r * shape.head_dim),
                  flash.O.values.begin() + static_cast<std::ptrdiff_t>((r + 1) * shape.head_dim));
    L_rows.push_back(flash.L[r]);
  }
  const ch03::PlainRows<float> plain = ch03::plain_attention_rows<float>(in.Q, in.K, in.V, options, rows);
  const std::vector<double> all_magnitudes =
      ch05::L_magnitudes(in.Q, in.K, options.scale.value_or(fa::default_scale(shape.head_dim)));
  std::vector<double> allowance(rows.size()), magnitudes(rows.size());
  for (std::size_t n = 0; n < rows.size(); ++n) {
    const double e = fa::abs_difference(plain.L[n], ref.L[n]);
    allowance[n] = std::isfinite(e) ? 2.0 * e : 0.0;
    magnitudes[n] = all_magnitudes[rows[n]];
  }
  return {rows.size(), fa::compare(O_rows, ref.O),
          ch05::worst_L(L_rows, ref.L, magnitudes, shape.seq_len_k, allowance)};
}

}  // namespace

int main(int argc, char** argv) {
  fa::Program program(
      5, "Chapter 05: the FlashAttention-2 forward kernel (S and P never leave the chip), and the HBM traffic model.");
  CLI::App& app = program.app();
  fa::AttentionFlags flags;
  flags.add_to(app);
  fa::Output& out = program.add_output("--out", "O");
  fa::Tile tile = ch05::kDefaultTile;  // without --tile: ch05::choose_tile's (on a GPU, one it can hold)
  fa::cli::add_tile(app, tile, ch05::kCompiled);
  bool traffic = false;
  std::uint64_t traffic_seq = 4096, traffic_br = 128, traffic_bytes = 2;
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
  out.option()->excludes(traffic_flag);

  try {
    program.parse(argc, argv);
    if (traffic) {
      program.start(
          fa::Banner{"the HBM traffic model",
                     R"(Bytes moved between HBM (the GPU's memory) and the chip by one head's forward pass, from the
model in traffic_model.h: standard attention, which writes S and P and reads them back;
FlashAttention-2 when no re-read of K and V hits the L2 cache; and the floor, every value
read or written once.)"});
      const bool custom = app.count("--seq") + app.count("--head-dim") + app.count("--br") + app.count("--bytes") > 0;
      if (!custom) {
        fmt::print("{}", ch05::format_traffic_table(ch05::traffic_table_cases()));
        fmt::print("\n(the traffic table: BF16, blocks of 128; try --seq, --head-dim, --br, --bytes)\n");
      } else {
        const auto br = static_cast<std::int64_t>(traffic_br);
        const ch05::TrafficCase c{static_cast<std::int64_t>(traffic_seq),
                                  static_cast<std::int64_t>(flags.head_dim),
                                  br,
                                  br,
                                  static_cast<std::int64_t>(traffic_bytes),
                                  4};
        fmt::print("{}", ch05::format_traffic_table(std::vector<ch05::TrafficCase>{c}));
      }
      return program.finish(std::nullopt);
    }

    // Everything this run needs, checked before anything is allocated.
    ch05::Options options{flags.scale, flags.causal, std::nullopt};
    if (app.count("--tile") > 0) options.tile = tile;
    const ch04::Options naive_options{flags.scale, flags.causal};
    const fa::Device device = flags.chosen_device();
    fa::Plan plan;
    const fa::AttentionShape shape = flags.plan(plan);
    (void)ch05::check_problem(shape, options);
    const fa::TileChoice chosen = ch05::choose_tile(static_cast<int>(shape.head_dim), options, device);
    tile = chosen.tile;
    options.tile = tile;
    plan.memory.add("this chapter's kernel (Q, K, V, O, L and the copies back)", ch05::memory_needed(shape));
    plan.memory.add("chapter 03's reference on a sample of rows (float64)",
                    fa::saturating_mul(2 * 8 * kReferenceRows, fa::saturating_add(shape.head_dim, 1)));
    const std::optional<std::string> no_chapter_04 = why_no_chapter_04(shape, naive_options, plan.memory);
    if (!no_chapter_04) plan.memory.add("chapter 04's kernels (with S and P)", ch04::memory_needed(shape));
    program.check(plan);

    program.start(
        fa::Banner{fmt::format("FlashAttention-2: Br = {} query rows per block, K and V streamed in tiles of Bc = {}{}",
                               tile.Br, tile.Bc, fa::tile_note("tile", chosen)),
                   R"(One kernel: each thread block holds Br query rows with their running max m, sum l and un-scaled
output, and streams K and V through shared memory in tiles of Bc keys, folding each tile in with
chapter 03's recurrence. S and P exist only a tile at a time, on chip. O is compared with chapter
04's three kernels on the same inputs, and L = m + log(l) with the log-sum-exp of chapter 04's S;
both also with chapter 03 (float64) on a sample of rows.)"});

    if (no_chapter_04) {
      fmt::print(
          "Chapter 04 cannot run this problem: {}.\nSo O and L are compared with chapter 03 (float64) alone.\n\n",
          *no_chapter_04);
    }
    const double rate =
        no_chapter_04 ? kFlashFlopsPerSecond : 1.0 / (1.0 / kFlashFlopsPerSecond + 1.0 / kNaiveFlopsPerSecond);
    const bool long_run = device == fa::Device::cpu && fa::announce_long_run(fa::forward_flops(shape), rate);
    const fa::AttentionFlags::Inputs in = flags.load();
    fmt::print("{}\n\n", flags.describe(in, device));

    simt::ShowProgress progress("FlashAttention-2", long_run);
    ch05::Result flash = ch05::flash_attention_2(in.Q, in.K, in.V, options, device);
    progress.stop();
    fmt::print("{}",
               ch05::format_profile_beside_model(fa::end_profile(), in.Q.shape, shape.seq_len_k, tile, flags.causal));
    const ch03::AttentionOptions reference_options{.scale = flags.scale, .causal = flags.causal};
    const ch04::Agreement agreement = ch04::agreement_bound(in.Q, in.K, in.V, reference_options);
    const AgainstChapter03 ch03 = against_chapter_03(in, flash, shape, reference_options);
    bool pass = fa::within(ch03.O, agreement.bound) && ch03.L.pass;
    std::string checked = fmt::format("vs ch03 on {} rows", ch03.rows);
    std::string error = fa::error_field("O", ch03.O);
    double L_error = ch03.L.error, L_bound = ch03.L.bound;
    if (!no_chapter_04) {
      simt::ShowProgress naive_progress("chapter 04's kernels", long_run);
      const ch04::Result naive = ch04::naive_attention(in.Q, in.K, in.V, naive_options, device);
      naive_progress.stop();
      fmt::print(
          "time: {:.3f} ms for FlashAttention-2, {:.3f} ms for chapter 04's three kernels ({}; wall "
          "clock of one run, not a benchmark)\n",
          flash.elapsed_ms, naive.elapsed_ms, fa::to_string(device));
      const fa::ErrorStats err_O = fa::compare(flash.O.values, naive.O.values);
      std::vector<double> L_ref(flash.L.size());
      for (std::size_t r = 0; r < L_ref.size(); ++r) {
        L_ref[r] = ch05::logsumexp(std::span<const float>(naive.S).subspan(r * shape.seq_len_k, shape.seq_len_k));
      }
      const ch05::WorstL L_worst = ch05::worst_L(
          flash.L, L_ref, ch05::L_magnitudes(in.Q, in.K, flags.scale.value_or(fa::default_scale(shape.head_dim))),
          shape.seq_len_k);
      fmt::print("agreement with chapter 04, O: {}\n", fa::describe(err_O));
      fmt::print("  L = m + log(l), the row furthest from chapter 04's: row {}, |L - L_ref| = {:.3g}, bound {:.3g}\n",
                 L_worst.row, L_worst.error, L_worst.bound);
      pass = pass && fa::within(err_O, agreement.bound) && L_worst.pass;
      checked = fmt::format("vs ch04, and ch03 on {} rows", ch03.rows);
      error = fmt::format("{}; ch03 {:.2g}", fa::error_field("O", err_O), ch03.O.rel_l2);
      if (L_worst.error / L_worst.bound > L_error / L_bound || !(L_worst.error <= L_worst.bound)) {
        L_error = L_worst.error;
        L_bound = L_worst.bound;
      }
    } else {
      fmt::print("time: {:.3f} ms for FlashAttention-2 ({}; wall clock of one run, not a benchmark)\n",
                 flash.elapsed_ms, fa::to_string(device));
    }
    fmt::print("agreement with chapter 03 (float64) on {} rows, O: {}\n", ch03.rows, fa::describe(ch03.O));
    fmt::print("  L, the row furthest from chapter 03's: row {} of those, |L - L_ref| = {:.3g}, bound {:.3g}\n",
               ch03.L.row, ch03.L.error, ch03.L.bound);
    fmt::print("bound on O: {}\n", fa::explain_bound(agreement.plain_error));
    const bool overflowed =
        fa::report_nonfinite("O", flash.O, in.Q, in.K, flags.scale.value_or(fa::default_scale(shape.head_dim)),
                             {in.Q.values, in.K.values, in.V.values});

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
    out.write(std::move(flash.O));
    return program.finish(fa::Check{
        "05", fmt::format("FlashAttention-2 ({}, {}) {}", fa::to_string(device), fa::tile_name(tile), checked),
        fmt::format("{}, L {:.2g}", error, L_error),
        fmt::format("{}, {:.1e}", fa::bound_text(agreement.bound), L_bound), pass && !overflowed});
  } catch (...) {
    return program.exit_on_error();
  }
}
