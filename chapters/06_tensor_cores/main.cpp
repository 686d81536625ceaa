// ch06_tensor_cores: FlashAttention-2 on tensor cores (bf16 or fp16), checked against chapter 05's
// float32 kernel on the same inputs, within the element type's error budget.
//
//   ch06_tensor_cores                                     random inputs, bf16, the GPU if there is one
//   ch06_tensor_cores --device cpu --dtype fp16 --seq-q 203 --seq-k 113 --causal --tile 64x64
//   ch06_tensor_cores --q q.npy --k k.npy --v v.npy --out o.npy    ('<f4' or '<f2' files)
//   ch06_tensor_cores --summary tour.tsv                  ... and append the check to tour.tsv
//
// The check at the end: O against chapter 05's O within error_budget.h's bound (the bound of
// tests/06_tensor_cores_test.cpp), and L against chapter 05's L.
#include <algorithm>
#include <cmath>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "chapters/05_flash_attention_2/flash_attention_2.h"
#include "chapters/06_tensor_cores/error_budget.h"
#include "chapters/06_tensor_cores/tensor_cores.h"
#include "common/attention_cli.h"
#include "common/compare.h"
#include "common/demo.h"
#include "common/memory.h"
#include "common/npy.h"
#include "common/profile_cli.h"
#include "common/program.h"

namespace {

// The row of L closest to its bound (error_budget.h's L_bounds): its error |L - L_05| and its
// bound. A NaN, or an infinity on one side only, is an infinite error (common/compare.h).
struct WorstL {
  double error = 0.0;
  double bound = 0.0;
};

WorstL worst_L(const std::vector<float>& L, const std::vector<float>& L_05, const std::vector<double>& bounds) {
  WorstL worst{0.0, bounds.empty() ? 0.0 : bounds[0]};
  double worst_ratio = -1.0;
  for (std::size_t r = 0; r < L.size(); ++r) {
    const double error = fa::abs_difference(L[r], L_05[r]);
    const double ratio = error == 0.0 ? 0.0 : bounds[r] > 0.0 ? error / bounds[r] : INFINITY;
    if (ratio > worst_ratio) {
      worst_ratio = ratio;
      worst = {error, bounds[r]};
    }
  }
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  fa::demo::Program program(
      "Chapter 06: FlashAttention-2 on tensor cores (mma.sync m16n8k16, bf16 or fp16 inputs, float32 "
      "accumulation), checked against chapter 05.");
  CLI::App& app = program.app();
  fa::AttentionCli cli;
  cli.accept_f16_files = true;
  fa::add_attention_flags(app, cli);
  fa::add_profile_flags(app, cli.device);  // --profile, --profile-json, --racecheck (common/profile_cli.h)
  std::string tile_text = fa::tile_name(ch06::Options{}.tile);
  app.add_option("--tile", tile_text, "Br x Bc tile shape of the kernel: " + fa::tile_list(ch06::kCompiled))
      ->capture_default_str();
  std::string dtype_text = "bf16";
  app.add_option("--dtype", dtype_text, "element type of Q, K, V and O in the kernel")
      ->check(CLI::IsMember({"bf16", "fp16"}))
      ->capture_default_str();

  return program.run(argc, argv, [&]() -> std::optional<fa::demo::Check> {
    // Everything this run needs, checked before anything is allocated or printed.
    const fa::Tile tile = fa::parse_tile(tile_text, ch06::kCompiled);
    const ch06::ElementType element = ch06::parse_element_type(dtype_text);
    const fa::Device device = fa::chosen_device(cli);
    const fa::AttentionShape shape = fa::plan_inputs(cli);
    const ch06::Options options{cli.scale, cli.causal, tile, element};
    (void)ch06::check_problem(shape, options);
    (void)ch05::check_problem(shape, {cli.scale, cli.causal, {64, 64}});
    fa::MemoryPlan plan;
    fa::add_inputs(plan, shape);
    plan.add("the rounded inputs and chapter 05's kernel (Q, K, V, O, L)", 2 * ch05::memory_needed(shape));
    plan.check("ch06_tensor_cores");

    const fa::AttentionProblem in = fa::load_or_draw(cli);
    const fa::Tensor4<float> Q = ch06::round_to(in.Q, element, "Q");
    const fa::Tensor4<float> K = ch06::round_to(in.K, element, "K");
    const fa::Tensor4<float> V = ch06::round_to(in.V, element, "V");
    const std::string type = std::string(ch06::to_string(element));
    fa::demo::print_heading(6, fmt::format("FlashAttention-2 on tensor cores: {}, Br = {} rows (32 per warp), Bc = {}",
                                           type, tile.Br, tile.Bc));
    fa::demo::print_shows(
        "Chapter 05's algorithm with its two matrix products on tensor cores: each warp holds 32 query rows\n"
        "as mma.sync fragments, S = Q K^T and O += P V are m16n8k16 products of " +
        type +
        " numbers summed in\n"
        "float32, P goes from the accumulator registers straight into the next product's operand, and K, V\n"
        "arrive by cp.async into swizzled shared memory. O is compared with chapter 05's float32 kernel on\n"
        "the same inputs, within the error that " +
        type + " itself brings (FlashAttention's rule).");
    fmt::print("Q {}, K and V with seq_len {}{}; inputs: {}, rounded to {} (round to nearest even); device: {}\n\n",
               in.Q.shape.str(), in.K.shape.seq_len, cli.causal ? ", causal" : "", in.origin, type,
               fa::to_string(device));

    const ch06::Result tc = ch06::tensor_core_attention(Q, K, V, options, device);
    const ch05::Result f32 = ch05::flash_attention_2(Q, K, V, {cli.scale, cli.causal, {64, 64}}, device);
    fmt::print(
        "time: {:.3f} ms on tensor cores ({}), {:.3f} ms for chapter 05's float32 kernel ({}; wall clock of "
        "one run, not a benchmark)\n",
        tc.elapsed_ms, type, f32.elapsed_ms, fa::to_string(device));

    const double scale = cli.scale.value_or(fa::default_scale(shape.head_dim));
    const ch06::ErrorBudget budget = ch06::error_budget(Q, K, V, scale, cli.causal, element);
    fmt::print(
        "error budget of {} (unit roundoff {:.2g}): an evaluation in float64 with P and O rounded to {} is\n"
        "  {:.3g} from exact (rel L2); the bound is {} x that + {:.0e} = {:.3g}\n",
        type, ch06::unit_roundoff(element), type, budget.reference_rel_l2, ch06::kBudgetFactor, ch06::kFloat32Floor,
        budget.bound);
    const fa::ErrorStats err_O = fa::compare(tc.O.values, f32.O.values);
    fmt::print("agreement with chapter 05, O: {}\n  -> {}\n", fa::describe(err_O),
               err_O.rel_l2 <= budget.bound ? "within the budget" : "OUTSIDE the budget");
    const fa::ErrorStats err_L = fa::compare(tc.L, f32.L);
    fmt::print("L against chapter 05's L: {}\n", fa::describe(err_L));

    if (!cli.out_path.empty()) {
      fa::write_npy_f32(cli.out_path, tc.O);
      fmt::print("wrote O to {} (float32 '<f4', holding {} values)\n", cli.out_path, type);
    }
    const WorstL L_worst = worst_L(tc.L, f32.L, ch06::L_bounds(Q, K, scale, f32.L));
    return fa::demo::Check{
        "06", fmt::format("tensor cores ({}, {}, {}) vs ch05", type, fa::to_string(device), fa::tile_name(tile)),
        fmt::format("{}, L {:.2g}", fa::demo::error_field("O", err_O), L_worst.error),
        fmt::format("{:.1e}, {:.1e}", budget.bound, L_worst.bound),
        err_O.rel_l2 <= budget.bound && L_worst.error <= L_worst.bound};
  });
}
