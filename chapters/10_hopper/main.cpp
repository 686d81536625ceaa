// ch10_hopper: FlashAttention-3's forward design on Hopper's instructions (bf16 or fp16), checked
// against chapter 06's tensor-core kernel on the same rounded inputs; or the FP8 kernel (e4m3).
//
//   ch10_hopper                                            random inputs, bf16, the GPU if it is a Hopper
//   ch10_hopper --device cpu --dtype fp16 --seq-q 203 --seq-k 113 --causal --head-dim 128
//   ch10_hopper --q q.npy --k k.npy --v v.npy --out o.npy  ('<f4' or '<f2' files)
//   ch10_hopper --summary tour.tsv                          ... and append the check to tour.tsv
//   ch10_hopper --device cpu --profile                      simt's memory profile, and the TMA and wgmma
//                                                           bytes beside the kernel's walk (lab/tma_traffic.h)
//   ch10_hopper --dtype e4m3 [--quant tensor|block] [--hadamard] [--p-scale 256]
//                                                           the FP8 kernel (hopper_fp8.cuh)
//
// The check at the end: O against chapter 06's O within twice chapter 06's error budget (each of
// the two kernels is within one budget of chapter 05's float32 O: error_budget.h), and L against
// chapter 06's L within twice chapter 06's bound on L (L_bounds), for the same reason.
// With --dtype e4m3: O against the lab's model of the same recipe (lab/fp8_error.h,
// model_of_kernel) within kFp8ModelBound, L within kFp8ModelLBound (hopper.h); and the RMSE of O against float64,
// beside the model's and chapter 06's bf16 kernel's.
#include <cmath>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "chapters/05_flash_attention_2/lab/vs_chapter_04.h"
#include "chapters/06_tensor_cores/lab/error_budget.h"
#include "chapters/06_tensor_cores/tensor_cores.h"
#include "chapters/10_hopper/hopper.h"
#include "chapters/10_hopper/lab/fp8_error.h"
#include "chapters/10_hopper/lab/tma_traffic.h"
#include "common/program.h"
#include "common/profile_cli.h"
#include "common/simt/runtime/progress.h"

namespace {

// The rate of this demo on the CPU path, for the notice of a long run only: chapter 06's, measured
// on a 2-core laptop (this kernel's emulation ran as fast as chapter 06's on 256 x 256).
constexpr double kFlopsPerSecond = 0.6e9;

// The FP8 run: the kernel, the lab's model, chapter 06's bf16 kernel and float64 on the same inputs.
int run_e4m3(fa::Program& program, const fa::AttentionFlags& flags, fa::Output& out, fa::Device device,
             const ch10::Fp8Options& options) {
  fa::Plan plan;
  const fa::AttentionShape shape = flags.plan(plan);
  const ch10::Fp8Problem problem = ch10::check_fp8_problem(shape, options);
  const ch06::Options options_06{flags.scale, flags.causal, ch06::Options{}.tile, ch06::ElementType::bf16};
  (void)ch06::check_problem(shape, options_06);
  ch10::check_device(device);
  plan.memory.add("the inputs, the kernel's, the model's and chapter 06's (Q, K, V, O, L)",
                  3 * ch10::memory_needed(shape));
  plan.memory.add("the float64 reference O", fa::bytes_of(8.0 * static_cast<double>(fa::attention_counts(shape).q)));
  program.check(plan);
  fa::AttentionFlags::Inputs in = flags.load();
  const std::string recipe =
      fmt::format("e4m3 per {}{}, P scaled by {}", options.quant == ch10::Quant::block ? "block" : "tensor",
                  options.hadamard ? " + Hadamard" : "", options.p_scale);
  program.start(
      fa::Banner{fmt::format("FlashAttention-3 in FP8 on Hopper: {}, Br = 128, Bc = 64, 2 TMA stages", recipe),
                 R"(Q, K and V quantised to e4m3 on the device (a scale per 64-row tile, or per head; Q and K rotated by
a random-sign Hadamard transform first with --hadamard); S = Q K^T and O += P V by FP8 wgmma, V
transposed in shared memory by the producer warpgroup (FP8 wgmma reads K-major operands only),
P quantised with a static scale, its keys relabelled instead of moved between lanes. O is
compared with the lab's model of the same recipe, and its error against float64 printed beside
chapter 06's bf16 kernel's.)"});
  const fa::Tensor4<float>&Q = in.Q, &K = in.K, &V = in.V;
  fmt::print("{}; quantised to {}\n\n", flags.describe(in, device), recipe);

  simt::ShowProgress progress(
      "the FP8 kernel and chapter 06's",
      device == fa::Device::cpu && fa::announce_long_run(3 * fa::forward_flops(shape), kFlopsPerSecond));
  ch10::Fp8Result r = ch10::fp8_attention(Q, K, V, options, device);
  const auto Q16 = ch06::round_to(Q, ch06::ElementType::bf16, "Q"),
             K16 = ch06::round_to(K, ch06::ElementType::bf16, "K"),
             V16 = ch06::round_to(V, ch06::ElementType::bf16, "V");
  const ch06::Result tc = ch06::tensor_core_attention(Q16, K16, V16, options_06, device);
  progress.stop();
  fmt::print("time: {:.3f} ms for the quantisation and the FP8 kernel ({}; wall clock of one run, not a benchmark)\n",
             r.run.elapsed_ms, fa::to_string(device));

  const ch06::DeviceProblem& p = problem.problem;
  const ch10::fp8::Problem head{static_cast<std::size_t>(p.seq_len_q),
                                static_cast<std::size_t>(p.seq_len_k),
                                static_cast<std::size_t>(shape.head_dim),
                                p.causal,
                                p.scale,
                                options.p_scale};
  const auto bh = static_cast<std::size_t>(p.batch_heads);
  const ch10::fp8::Quant quant =
      options.quant == ch10::Quant::block ? ch10::fp8::Quant::block : ch10::fp8::Quant::tensor;
  const ch10::fp8::KernelModel model =
      ch10::fp8::model_of_kernel(Q.values, K.values, V.values, bh, head, quant, options.hadamard, options.seed);
  const std::vector<double> reference = ch10::fp8::reference_of_heads(Q.values, K.values, V.values, bh, head);
  const fa::ErrorStats err_O = fa::compare(r.run.O.values, model.O);
  double L_error = 0.0;
  for (std::size_t i = 0; i < model.L.size(); ++i) {
    const double e = std::isinf(model.L[i]) && r.run.L[i] == model.L[i] ? 0.0 : std::fabs(r.run.L[i] - model.L[i]);
    L_error = std::isnan(e) ? e : std::max(L_error, e);
  }
  fmt::print("agreement with the lab's model of the recipe, O: {}\n  -> {}\n", fa::describe(err_O),
             fa::within(err_O, ch10::kFp8ModelBound) ? "within the bound" : "OUTSIDE the bound");
  fmt::print("L against the model's L: max |difference| {:.2g}\n", L_error);
  const auto rmse = [&](std::span<const float> O) { return ch10::fp8::compare_outputs(O, reference).rmse; };
  fmt::print("RMSE of O against float64: FP8 kernel {:.3e}, the model {:.3e}, chapter 06's bf16 kernel {:.3e}\n",
             rmse(r.run.O.values), rmse(model.O), rmse(tc.O.values));
  const bool overflowed = fa::report_nonfinite("O", r.run.O, Q, K, p.scale, {Q.values, K.values, V.values});
  out.write(std::move(r.run.O));
  return program.finish(fa::Check{
      "10", fmt::format("Hopper FP8 ({}, {}) vs its model", recipe, fa::to_string(device)),
      fmt::format("{}, L {:.2g}", fa::error_field("O", err_O), L_error),
      fmt::format("{}, {:.0e}", fa::relative_bound_text(ch10::kFp8ModelBound, "{:.1e}"), ch10::kFp8ModelLBound),
      fa::within(err_O, ch10::kFp8ModelBound) && fa::within(L_error, ch10::kFp8ModelLBound) && !overflowed});
}

}  // namespace

int main(int argc, char** argv) {
  fa::Program program(10, R"(Chapter 10: FlashAttention-3's forward design on Hopper (wgmma, TMA, mbarriers, a producer
and two consumer warpgroups; bf16 or fp16 inputs, float32 accumulation), checked against chapter 06;
or in FP8 (--dtype e4m3), checked against the lab's model of its recipe.)");
  CLI::App& app = program.app();
  fa::AttentionFlags flags;
  flags.accept_f16_files = true;
  flags.add_to(app);
  fa::Output& out = program.add_output("--out", "O");
  std::string dtype_text = "bf16";
  fa::cli::add_choice(app, "--dtype", dtype_text, "element type of Q, K, V (and O, but bf16 for e4m3) in the kernel",
                      {"bf16", "fp16", "e4m3"});
  ch10::Fp8Options fp8;
  std::string quant_text = "block";
  fa::cli::add_choice(app, "--quant", quant_text, "e4m3: one scale per 64-row tile (block) or per head (tensor)",
                      {"tensor", "block"});
  app.add_flag("--hadamard", fp8.hadamard, "e4m3: rotate Q and K by a random-sign Hadamard transform first");
  app.add_option("--p-scale", fp8.p_scale, "e4m3: P's static scale before its cast, a power of two up to 256");
  try {
    program.parse(argc, argv);
    // The FP8 flags mean nothing to the 16-bit kernel: refused rather than ignored.
    for (const char* flag : {"--quant", "--hadamard", "--p-scale"}) {
      if (dtype_text != "e4m3" && app.count(flag) > 0) {
        throw std::invalid_argument(std::string(flag) + " applies to --dtype e4m3 only");
      }
    }

    // The GPU when one is asked for (--device gpu: it must be a Hopper), or, when none is named,
    // when the GPU found is one; else the CPU.
    const fa::Device device = flags.chosen_device(ch10::check_device);
    if (dtype_text == "e4m3") {
      fp8.scale = flags.scale;
      fp8.causal = flags.causal;
      fp8.quant = quant_text == "tensor" ? ch10::Quant::tensor : ch10::Quant::block;
      fp8.seed = flags.seed;
      return run_e4m3(program, flags, out, device, fp8);
    }
    // Everything this run needs, checked before anything is allocated or printed; on --device gpu,
    // a GPU that is not a Hopper (or a build without sm_90a) is refused here, in one line (status 2).
    const ch10::ElementType element = ch06::parse_element_type(dtype_text);
    fa::Plan plan;
    const fa::AttentionShape shape = flags.plan(plan);
    const ch10::DeviceProblem problem = ch10::check_problem(shape, {flags.scale, flags.causal, element});
    const ch06::Options options_06{flags.scale, flags.causal, ch06::Options{}.tile, element};
    (void)ch06::check_problem(shape, options_06);
    ch10::check_device(device);
    plan.memory.add("the rounded inputs, this kernel's and chapter 06's (Q, K, V, O, L)",
                    2 * ch10::memory_needed(shape));
    plan.memory.add("the error budget's two float64 evaluations of O", ch06::budget_memory(shape));
    program.check(plan);
    // The inputs, rounded as chapter 06 rounds them: a value the element type cannot hold is
    // refused here, before the banner, and so are scores past what the budget holds for.
    fa::AttentionFlags::Inputs in = flags.load();
    const double scale = flags.scale.value_or(fa::default_scale(shape.head_dim));
    ch06::round_inputs(in.Q, in.K, in.V, scale, element);

    const std::string type(ch06::to_string(element));
    program.start(fa::Banner{
        fmt::format("FlashAttention-3 on Hopper: {}, Br = 128 rows (two consumer warpgroups of 64), Bc = 64, 2 TMA "
                    "stages",
                    type),
        fmt::format(
            R"(Chapter 06's algorithm on Hopper's instructions: a producer warpgroup copies Q_i once and K_j, V_j
by TMA into a ring of two stages, each guarded by a "full" and an "empty" mbarrier; two consumer
warpgroups, taking turns (ping-pong), compute S = Q K^T by wgmma straight from the swizzled shared
memory, the online softmax in registers, and O += P V by wgmma with P as its register operand, in
{0} numbers summed in float32; O leaves through shared memory by TMA. O is compared with chapter
06's mma.sync kernel on the same inputs.)",
            type)});

    const fa::Tensor4<float>&Q = in.Q, &K = in.K, &V = in.V;
    fmt::print("{}; rounded to {} (round to nearest even)\n\n", flags.describe(in, device), type);

    // A long run says so, and shows the kernels' blocks: this kernel, chapter 06's and the budget's
    // float64 evaluation, each a forward pass's operations.
    const double flops = 3 * fa::forward_flops(shape);
    const bool long_run = device == fa::Device::cpu && fa::announce_long_run(flops, kFlopsPerSecond);
    simt::ShowProgress progress("the Hopper kernel and chapter 06's", long_run);
    ch10::Result h = ch10::hopper_attention(Q, K, V, {flags.scale, flags.causal, element}, device);
    const ch06::Result tc = ch06::tensor_core_attention(Q, K, V, options_06, device);
    progress.stop();
    fmt::print(
        "time: {:.3f} ms on Hopper's path, {:.3f} ms for chapter 06's kernel ({}; wall clock of one run, "
        "not a benchmark)\n",
        h.elapsed_ms, tc.elapsed_ms, fa::to_string(device));
    // --profile: the table of both kernels, then this one's TMA and wgmma bytes beside its walk.
    fmt::print("{}", ch10::format_tma_beside_model(fa::end_profile(), ch10::tma_traffic(problem)));

    // Each kernel is within one budget of chapter 05's float32 O (error_budget.h), so the two are
    // within two budgets of each other (the triangle inequality); likewise L.
    const ch06::ErrorBudget budget = ch06::error_budget(Q, K, V, scale, flags.causal, element);
    const double bound = 2 * budget.bound;
    fmt::print(
        "error budget of {}: chapter 06's bound {:.3g} (rel L2 against float32); twice that between the\n"
        "  two kernels: {:.3g}\n",
        type, budget.bound, bound);
    const fa::ErrorStats err_O = fa::compare(h.O.values, tc.O.values);
    fmt::print("agreement with chapter 06, O: {}\n  -> {}\n", fa::describe(err_O),
               fa::within(err_O, bound) ? "within the budget" : "OUTSIDE the budget");
    const bool overflowed = fa::report_nonfinite("O", h.O, Q, K, scale, {Q.values, K.values, V.values});

    std::vector<double> L_bounds = ch06::L_bounds(Q, K, scale, tc.L);
    for (double& b : L_bounds) b *= 2;
    const std::vector<double> L_06(tc.L.begin(), tc.L.end());
    const ch05::WorstL L_worst = ch05::worst_row(h.L, L_06, L_bounds);
    fmt::print("L against chapter 06's L: {}\n", fa::describe(fa::compare(h.L, tc.L)));
    out.write(std::move(h.O));
    return program.finish(fa::Check{
        "10", fmt::format("Hopper ({}, {}) vs ch06", type, fa::to_string(device)),
        fmt::format("{}, L {:.2g}", fa::error_field("O", err_O), L_worst.error),
        fmt::format("{}, {}", fa::relative_bound_text(bound, "{:.1e}"), fa::bound_text(L_worst.bound, "{:.1e}")),
        fa::within(err_O, bound) && L_worst.pass && !overflowed});
  } catch (...) {
    return program.exit_on_error();
  }
}
