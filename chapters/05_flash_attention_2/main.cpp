// ch05_flash_attention_2: the FlashAttention-2 kernel, checked against chapter 04; and the HBM
// traffic model.
//
//   ch05_flash_attention_2                                random inputs, the GPU if there is one
//   ch05_flash_attention_2 --device cpu --seq-q 203 --seq-k 113 --causal --tile 32x64
//   ch05_flash_attention_2 --q q.npy --k k.npy --v v.npy --out o.npy
//   ch05_flash_attention_2 --traffic                      the seed's traffic table
//   ch05_flash_attention_2 --traffic --seq 16384 --head-dim 128 --br 64 --bytes 4
//   ch05_flash_attention_2 --summary tour.tsv             ... and append the check to tour.tsv
//
// The check at the end: O against chapter 04's O, and L against the log-sum-exp of chapter 04's
// rows of S, within the bounds of tests/05_flash_attention_2_test.cpp.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "chapters/04_naive_attention/naive_attention.h"
#include "chapters/05_flash_attention_2/flash_attention_2.h"
#include "chapters/05_flash_attention_2/profile_report.h"
#include "chapters/05_flash_attention_2/traffic_table.h"
#include "common/attention_cli.h"
#include "common/compare.h"
#include "common/demo.h"
#include "common/npy.h"
#include "common/profile_cli.h"

namespace {

// "64x64" -> {64, 64}; throws std::invalid_argument naming the accepted shapes.
ch05::TileShape parse_tile(const std::string& text) {
  for (const ch05::TileShape& t : ch05::kTileShapes) {
    if (text == fmt::format("{}x{}", t.Br, t.Bc)) return t;
  }
  std::string accepted;
  for (const ch05::TileShape& t : ch05::kTileShapes) accepted += fmt::format(" {}x{}", t.Br, t.Bc);
  throw std::invalid_argument(fmt::format("--tile {}: accepted Br x Bc shapes are{}", text, accepted));
}

// log-sum-exp of one row of chapter 04's S, in double; -inf for a row that sees no key.
double logsumexp(const float* s, std::size_t n) {
  double m = -INFINITY;
  for (std::size_t j = 0; j < n; ++j) m = std::max(m, static_cast<double>(s[j]));
  if (m == -INFINITY) return m;
  double l = 0.0;
  for (std::size_t j = 0; j < n; ++j) l += std::exp(static_cast<double>(s[j]) - m);
  return m + std::log(l);
}

// tests/05_flash_attention_2_test.cpp's bounds. O (kRelL2): both kernels compute S bit for bit
// alike and differ only in when they normalise, ~1e-7 measured; a missed rescale, a wrong mask or a
// lost tile gives 1e-3 to 1. L, per row: m is exact and log(l) carries the float sum's error, so
// |L - ref| <= u (|L| + seq_len_k + 1), with the unit roundoff u rounded up to 1.2e-7.
constexpr double rel_l2_bound = 1e-6;
constexpr double L_unit = 1.2e-7;

// The row of L closest to its bound: its error |L - ref| and its bound. A row that sees no key
// must be -inf in both; any other value there counts as an infinite error.
struct WorstL {
  double error = 0.0;
  double bound = 0.0;
};

WorstL worst_L(const std::vector<float>& L, const std::vector<double>& L_ref, std::size_t seq_len_k) {
  WorstL worst{0.0, L_unit * (static_cast<double>(seq_len_k) + 1.0)};
  double worst_ratio = -1.0;
  for (std::size_t r = 0; r < L.size(); ++r) {
    const double error = fa::abs_difference(L[r], L_ref[r]);  // NaN, or an infinity on one side only: inf
    const double bound =
        std::isinf(L_ref[r]) ? 0.0 : L_unit * (std::fabs(L_ref[r]) + static_cast<double>(seq_len_k) + 1.0);
    const double ratio = error == 0.0 ? 0.0 : bound > 0.0 ? error / bound : INFINITY;
    if (ratio > worst_ratio) {
      worst_ratio = ratio;
      worst = {error, bound};
    }
  }
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Chapter 05: the FlashAttention-2 forward kernel (S and P never leave the chip), "
               "and the HBM traffic model."};
  fa::AttentionCli cli;
  fa::add_attention_flags(app, cli);
  std::string tile_text = "64x64";
  app.add_option("--tile", tile_text, "Br x Bc tile shape of the kernel: 64x64, 32x64 or 64x32");
  bool traffic = false;
  ch05::TrafficCase traffic_case{};
  app.add_flag("--traffic", traffic, "print the HBM traffic table instead of running the kernel");
  app.add_option("--seq", traffic_case.seq_len, "with --traffic: sequence length N");
  app.add_option("--br", traffic_case.Br, "with --traffic: query rows per tile, Br (Bc is set equal)");
  app.add_option("--bytes", traffic_case.bytes, "with --traffic: bytes per value (2 for BF16, 4 for float32)");
  std::string summary_path;
  app.add_option("--summary", summary_path, "append the check against chapter 04 to this file (the tour's)")
      ->excludes("--traffic");
  fa::ProfileFlags profile;  // --profile, --profile-json: the kernel's memory accesses (common/simt/profile.h)
  fa::add_profile_flags(app, profile);
  CLI11_PARSE(app, argc, argv);

  try {
    if (traffic) {
      fa::demo::print_heading(5, "the HBM traffic model");
      fa::demo::print_shows(
          "Bytes moved between HBM (the GPU's memory) and the chip by one head's forward pass, from the\n"
          "model in traffic_model.h: standard attention, which writes S and P and reads them back;\n"
          "FlashAttention-2 when no re-read of K and V hits the L2 cache; and the floor, every value\n"
          "read or written once.");
      const bool custom = app.count("--seq") + app.count("--head-dim") + app.count("--br") + app.count("--bytes") > 0;
      if (!custom) {
        const auto cases = ch05::seed_traffic_cases();
        fmt::print("{}", ch05::format_traffic_table(cases));
        fmt::print("\n(the seed's table: BF16, blocks of 128; try --seq, --head-dim, --br, --bytes)\n");
      } else {
        traffic_case.head_dim = static_cast<std::int64_t>(cli.head_dim);
        traffic_case.Bc = traffic_case.Br;
        fmt::print("{}", ch05::format_traffic_table(std::vector<ch05::TrafficCase>{traffic_case}));
      }
      return 0;
    }

    const ch05::TileShape tile = parse_tile(tile_text);
    const fa::Device device = fa::chosen_device(cli);
    const fa::AttentionProblem in = fa::load_or_draw(cli);
    const std::size_t seq_len_k = in.K.shape.seq_len;
    fa::demo::print_heading(5, fmt::format("FlashAttention-2: Br = {} query rows per block, K and V streamed in tiles of Bc = {}",
                                           tile.Br, tile.Bc));
    fa::demo::print_shows(
        "One kernel: each thread block holds Br query rows with their running max m, sum l and un-scaled\n"
        "output, and streams K and V through shared memory in tiles of Bc keys, folding each tile in with\n"
        "chapter 03's recurrence. S and P exist only a tile at a time, on chip. O is compared with chapter\n"
        "04's three kernels on the same inputs, and L = m + log(l) with the log-sum-exp of chapter 04's S.");
    fmt::print("Q {}, K and V with seq_len {}{}; inputs: {}; device: {}\n\n", in.Q.shape.str(), seq_len_k,
               cli.causal ? ", causal" : "", in.origin, fa::to_string(device));

    fa::begin_profile(profile, device);
    const ch05::Result flash = ch05::flash_attention_2(in.Q, in.K, in.V, {cli.scale, cli.causal, tile}, device);
    fmt::print("{}", ch05::format_profile_beside_model(fa::end_profile(profile), in.Q.shape, seq_len_k, tile, cli.causal));
    const ch04::Result naive = ch04::naive_attention(in.Q, in.K, in.V, {cli.scale, cli.causal}, device);
    fmt::print("time: {:.3f} ms for FlashAttention-2, {:.3f} ms for chapter 04's three kernels ({}; wall "
               "clock of one run, not a benchmark)\n", flash.elapsed_ms, naive.elapsed_ms, fa::to_string(device));

    const fa::ErrorStats err_O = fa::compare(flash.O.values, naive.O.values);
    std::vector<double> L_ref(flash.L.size());
    for (std::size_t r = 0; r < L_ref.size(); ++r) L_ref[r] = logsumexp(&naive.S[r * seq_len_k], seq_len_k);
    const fa::ErrorStats err_L = fa::compare(flash.L, L_ref);
    fmt::print("agreement with chapter 04, O: {}\n  -> {}\n", fa::describe(err_O),
               err_O.rel_l2 <= rel_l2_bound ? "within the tests' bound, rel L2 <= 1e-6" : "OUTSIDE the tests' bound of 1e-6");
    fmt::print("L = m + log(l) against log-sum-exp of chapter 04's S: {}\n", fa::describe(err_L));

    const ch05::TrafficCase model{static_cast<std::int64_t>(seq_len_k), static_cast<std::int64_t>(in.Q.shape.head_dim),
                                  tile.Br, tile.Bc, 4, 4};
    if (in.Q.shape.seq_len == seq_len_k) {
      fmt::print("\nThe traffic model for one head of this problem (float32, non-causal):\n{}",
                 ch05::format_traffic_table(std::vector<ch05::TrafficCase>{model}));
    }
    if (!cli.out_path.empty()) {
      fa::write_npy_f32(cli.out_path, flash.O);
      fmt::print("wrote O to {}\n", cli.out_path);
    }
    const WorstL L_worst = worst_L(flash.L, L_ref, seq_len_k);
    const fa::demo::Check check{
        "05", fmt::format("FlashAttention-2 ({}, {}x{}) vs ch04", fa::to_string(device), tile.Br, tile.Bc),
        fmt::format("O rel L2 {:.2g}, L {:.2g}", err_O.rel_l2, L_worst.error),
        fmt::format("{:.0e}, {:.1e}", rel_l2_bound, L_worst.bound),
        err_O.rel_l2 <= rel_l2_bound && L_worst.error <= L_worst.bound};
    fa::demo::print_verdict(check);
    if (!summary_path.empty()) fa::demo::append_summary(summary_path, check);
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}
