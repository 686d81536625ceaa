// ch10_hopper_fp8: chapter 10's kernel in FP8 (e4m3; FlashAttention-3, section 3.3), checked
// against the lab's model of the same recipe, its error against float64 printed beside chapter
// 06's bf16 kernel's.
//
//   ch10_hopper_fp8                                    random inputs, per-block scales, the GPU if it is a Hopper
//   ch10_hopper_fp8 --device cpu --quant tensor --hadamard --seq-q 203 --seq-k 113 --causal
//   ch10_hopper_fp8 --p-scale 64                       P's static scale before its cast
//   ch10_hopper_fp8 --summary tour.tsv                 ... and append the check to tour.tsv
//
// The check at the end: O against the lab's model (lab/fp8_error.h, model_of_kernel) within
// kFp8ModelBound, L within kFp8ModelLBound (hopper_fp8.h), lab/fp8_vs_model.h.
#include <string>
#include <utility>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "chapters/06_tensor_cores/tensor_cores.h"
#include "chapters/10_hopper/hopper_fp8.h"
#include "chapters/10_hopper/lab/fp8_vs_model.h"
#include "common/profile_cli.h"
#include "common/program.h"
#include "common/simt/runtime/progress.h"

namespace {

// The rate of this demo on the CPU path, for the notice of a long run only: chapter 06's, measured
// on a 2-core laptop (the FP8 kernel's emulation runs about as fast).
constexpr double kFlopsPerSecond = 0.6e9;

}  // namespace

int main(int argc, char** argv) {
  fa::Program program(10, R"(Chapter 10 in FP8: FlashAttention-3's forward design with e4m3 operands (wgmma .e4m3, block
or per-head scales, an optional Hadamard rotation), checked against the lab's model of its recipe.)");
  CLI::App& app = program.app();
  fa::AttentionFlags flags;
  flags.add_to(app);
  fa::Output& out = program.add_output("--out", "O");
  ch10::Fp8Options options;
  std::string quant_text = "block";
  fa::cli::add_choice(app, "--quant", quant_text, "one scale per 64-row tile (block) or per head (tensor)",
                      {"tensor", "block"});
  app.add_flag("--hadamard", options.hadamard, "rotate Q and K by a random-sign Hadamard transform first");
  app.add_option("--p-scale", options.p_scale, "P's static scale before its cast, a power of two up to 256");
  try {
    program.parse(argc, argv);
    options.scale = flags.scale;
    options.causal = flags.causal;
    options.quant = quant_text == "tensor" ? ch10::Quant::tensor : ch10::Quant::block;
    options.seed = flags.seed;

    // Everything this run needs, checked before anything is allocated or printed; on --device gpu,
    // a GPU that is not a Hopper (or a build without sm_90a) is refused here, in one line.
    const fa::Device device = flags.chosen_device(ch10::check_device);
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

    const fa::AttentionFlags::Inputs in = flags.load();
    const std::string recipe =
        fmt::format("e4m3 per {}{}, P scaled by {}", options.quant == ch10::Quant::block ? "block" : "tensor",
                    options.hadamard ? " + Hadamard" : "", options.p_scale);
    program.start(fa::Banner{
        fmt::format("FlashAttention-3 in FP8 on Hopper: {}, Br = 128, Bc = 64, 2 TMA stages", recipe),
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
    const ch06::Result bf16 = ch06::tensor_core_attention(
        ch06::round_to(Q, ch06::ElementType::bf16, "Q"), ch06::round_to(K, ch06::ElementType::bf16, "K"),
        ch06::round_to(V, ch06::ElementType::bf16, "V"), options_06, device);
    progress.stop();
    fmt::print("time: {:.3f} ms for the quantisation and the FP8 kernel ({}; wall clock of one run, not a benchmark)\n",
               r.run.elapsed_ms, fa::to_string(device));

    const fa::Check check =
        ch10::against_fp8_model(fmt::format("Hopper FP8 ({}, {}) vs its model", recipe, fa::to_string(device)), r, bf16,
                                Q, K, V, options, problem);
    out.write(std::move(r.run.O));
    return program.finish(check);
  } catch (...) {
    return program.exit_on_error();
  }
}
