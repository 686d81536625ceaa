// ch10_hopper: FlashAttention-3's forward design on Hopper's instructions (bf16 or fp16), checked
// against chapter 06's tensor-core kernel on the same rounded inputs. The FP8 kernel (e4m3) is
// ch10_hopper_fp8 (main_fp8.cpp).
//
//   ch10_hopper                                            random inputs, bf16, the GPU if it is a Hopper
//   ch10_hopper --device cpu --dtype fp16 --seq-q 203 --seq-k 113 --causal --head-dim 128
//   ch10_hopper --q q.npy --k k.npy --v v.npy --out o.npy  ('<f4' or '<f2' files)
//   ch10_hopper --summary tour.tsv                          ... and append the check to tour.tsv
//   ch10_hopper --device cpu --profile                      simt's memory profile, and the TMA and wgmma
//                                                           bytes beside the kernel's walk (lab/tma_traffic.h)
//
// The check at the end: O against chapter 06's O within twice chapter 06's error budget (each of
// the two kernels is within one budget of chapter 05's float32 O: error_budget.h), and L against
// chapter 06's L within twice chapter 06's bound on L (L_bounds), for the same reason
// (lab/vs_chapter_06.h).
#include <string>
#include <utility>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "chapters/06_tensor_cores/lab/error_budget.h"
#include "chapters/06_tensor_cores/tensor_cores.h"
#include "chapters/10_hopper/hopper.h"
#include "chapters/10_hopper/lab/tma_traffic.h"
#include "chapters/10_hopper/lab/vs_chapter_06.h"
#include "common/profile_cli.h"
#include "common/program.h"
#include "common/simt/runtime/progress.h"

namespace {

// The rate of this demo on the CPU path, for the notice of a long run only: chapter 06's, measured
// on a 2-core laptop (this kernel's emulation ran as fast as chapter 06's on 256 x 256).
constexpr double kFlopsPerSecond = 0.6e9;

}  // namespace

int main(int argc, char** argv) {
  fa::Program program(10, R"(Chapter 10: FlashAttention-3's forward design on Hopper (wgmma, TMA, mbarriers, a producer
and two consumer warpgroups; bf16 or fp16 inputs, float32 accumulation), checked against chapter 06.
FP8 (e4m3) is ch10_hopper_fp8.)");
  CLI::App& app = program.app();
  fa::AttentionFlags flags;
  flags.accept_f16_files = true;
  flags.add_to(app);
  fa::Output& out = program.add_output("--out", "O");
  std::string dtype_text = "bf16";
  fa::cli::add_choice(app, "--dtype", dtype_text, "element type of Q, K, V and O in the kernel (e4m3: ch10_hopper_fp8)",
                      {"bf16", "fp16", "e4m3"});
  try {
    program.parse(argc, argv);
    // The GPU when one is asked for (--device gpu: it must be a Hopper), or, when none is named,
    // when the GPU found is one; else the CPU.
    const fa::Device device = flags.chosen_device(ch10::check_device);
    // Everything this run needs, checked before anything is allocated or printed; on --device gpu,
    // a GPU that is not a Hopper (or a build without sm_90a) is refused here, in one line (status 2).
    const ch10::ElementType element = ch10::parse_element_type(dtype_text);
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
    const bool long_run =
        device == fa::Device::cpu && fa::announce_long_run(3 * fa::forward_flops(shape), kFlopsPerSecond);
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

    const fa::Check check =
        ch10::against_chapter_06(fmt::format("Hopper ({}, {}) vs ch06", type, fa::to_string(device)), h, tc, Q, K, V,
                                 scale, flags.causal, element);
    out.write(std::move(h.O));
    return program.finish(check);
  } catch (...) {
    return program.exit_on_error();
  }
}
