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
#include "chapters/05_flash_attention_2/lab/vs_chapter_04.h"
#include "chapters/06_tensor_cores/lab/error_budget.h"
#include "chapters/06_tensor_cores/tensor_cores.h"
#include "common/program.h"
#include "common/simt/runtime/progress.h"

namespace {

// A rough cost of this demo on the CPU path, for the notice of a long run only: the tensor-core
// kernel, chapter 05's kernel and the error budget's float64 evaluation, 4 x head_dim operations a
// score each, at a rate measured once on a 2-core laptop (1024 x 1024, 2 heads, head_dim 64: 1.6
// GFLOP so counted in 2.6 s).
constexpr double kFlopsPerScore = 3 * 4;  // x head_dim
constexpr double kFlopsPerSecond = 0.6e9;

}  // namespace

int main(int argc, char** argv) {
  fa::Program program(6, R"(Chapter 06: FlashAttention-2 on tensor cores (mma.sync m16n8k16, bf16 or fp16 inputs,
float32 accumulation), checked against chapter 05.)");
  CLI::App& app = program.app();
  fa::AttentionFlags flags;
  flags.accept_f16_files = true;
  flags.add_to(app);
  fa::Output& out = program.add_output("--out", "O");
  fa::Tile tile = ch06::Options{}.tile;
  fa::cli::add_tile(app, tile, ch06::kCompiled);
  std::string dtype_text = "bf16";
  fa::cli::add_choice(app, "--dtype", dtype_text, "element type of Q, K, V and O in the kernel", {"bf16", "fp16"});
  try {
    program.parse(argc, argv);

    // Everything this run needs, checked before anything is allocated or printed; on --device gpu,
    // a GPU older than sm_80 (a T4), or a build whose GPU path lacks this kernel, is refused here,
    // in one line (status 2).
    const ch06::ElementType element = ch06::parse_element_type(dtype_text);
    const std::string type(ch06::to_string(element));
    // The GPU when one is asked for (--device gpu), or, when none is named, when the GPU there is
    // can run this kernel; else the CPU.
    const fa::Device device = flags.chosen_device(ch06::check_device);
    fa::Plan plan;
    const fa::AttentionShape shape = flags.plan(plan);
    (void)ch06::check_problem(shape, {flags.scale, flags.causal, tile, element});
    (void)ch05::check_problem(shape, {flags.scale, flags.causal, fa::Tile{64, 64}});
    plan.memory.add("the rounded inputs and chapter 05's kernel (Q, K, V, O, L)", 2 * ch05::memory_needed(shape));
    plan.memory.add("the error budget's two float64 evaluations of O", ch06::budget_memory(shape));
    program.check(plan);
    // The inputs, rounded: a value the element type cannot hold is refused here, before the banner,
    // and so are scores past what the kernel's exponent can hold to the budget (error_budget.h).
    fa::AttentionFlags::Inputs in = flags.load();
    ch06::round_inputs(in.Q, in.K, in.V, flags.scale.value_or(fa::default_scale(shape.head_dim)), element);

    program.start(fa::Banner{
        fmt::format("FlashAttention-2 on tensor cores: {}, Br = {} rows (32 per warp), Bc = {}", type, tile.Br,
                    tile.Bc),
        fmt::format(
            R"(Chapter 05's algorithm with its two matrix products on tensor cores: each warp holds 32 query rows
as mma.sync fragments, S = Q K^T and O += P V are m16n8k16 products of {0} numbers summed in
float32, P goes from the accumulator registers straight into the next product's operand, and K, V
arrive by cp.async into swizzled shared memory. O is compared with chapter 05's float32 kernel on
the same inputs, within the error that {0} itself brings (FlashAttention's rule).)",
            type)});

    const fa::Tensor4<float>&Q = in.Q, &K = in.K, &V = in.V;
    fmt::print("Q {}, K and V with seq_len {}{}; inputs: {}, rounded to {} (round to nearest even); device: {}\n\n",
               Q.shape.str(), K.shape.seq_len, flags.causal ? ", causal" : "", in.origin, type, fa::to_string(device));

    const double flops = kFlopsPerScore * static_cast<double>(shape.batch * shape.heads) *
                         static_cast<double>(shape.seq_len_q) * static_cast<double>(shape.seq_len_k) *
                         static_cast<double>(shape.head_dim);
    // A long run says so, and shows the kernels' blocks.
    const bool long_run = device == fa::Device::cpu && fa::announce_long_run(flops, kFlopsPerSecond);
    simt::ShowProgress progress("the tensor-core kernel and chapter 05's", long_run);
    ch06::Result tc = ch06::tensor_core_attention(Q, K, V, {flags.scale, flags.causal, tile, element}, device);
    const ch05::Result f32 = ch05::flash_attention_2(Q, K, V, {flags.scale, flags.causal, fa::Tile{64, 64}}, device);
    progress.stop();
    fmt::print(
        "time: {:.3f} ms on tensor cores ({}), {:.3f} ms for chapter 05's float32 kernel ({}; wall clock of "
        "one run, not a benchmark)\n",
        tc.elapsed_ms, type, f32.elapsed_ms, fa::to_string(device));

    const double scale = flags.scale.value_or(fa::default_scale(shape.head_dim));
    const ch06::ErrorBudget budget = ch06::error_budget(Q, K, V, scale, flags.causal, element);
    fmt::print(
        "error budget of {} (unit roundoff {:.2g}): an evaluation in float64 with P and O rounded to {} is\n"
        "  {:.3g} from exact (rel L2); the bound is {} x that + {:.0e} = {:.3g}\n",
        type, ch06::unit_roundoff(element), type, budget.reference_rel_l2, ch06::kBudgetFactor, ch06::kFloat32Floor,
        budget.bound);
    const fa::ErrorStats err_O = fa::compare(tc.O.values, f32.O.values);
    fmt::print("agreement with chapter 05, O: {}\n  -> {}\n", fa::describe(err_O),
               fa::within(err_O, budget.bound) ? "within the budget" : "OUTSIDE the budget");
    const fa::ErrorStats err_L = fa::compare(tc.L, f32.L);
    fmt::print("L against chapter 05's L: {}\n", fa::describe(err_L));
    const bool overflowed = fa::report_nonfinite("O", tc.O, Q, K, scale, {Q.values, K.values, V.values});

    const std::vector<double> L_05(f32.L.begin(), f32.L.end());
    const ch05::WorstL L_worst = ch05::worst_row(tc.L, L_05, ch06::L_bounds(Q, K, scale, f32.L));
    out.write(std::move(tc.O));
    return program.finish(fa::Check{
        "06", fmt::format("tensor cores ({}, {}, {}) vs ch05", type, fa::to_string(device), fa::tile_name(tile)),
        fmt::format("{}, L {:.2g}", fa::error_field("O", err_O), L_worst.error),
        fmt::format("{}, {}", fa::relative_bound_text(budget.bound, "{:.1e}"), fa::bound_text(L_worst.bound, "{:.1e}")),
        fa::within(err_O, budget.bound) && L_worst.pass && !overflowed});
  } catch (...) {
    return program.exit_on_error();
  }
}
