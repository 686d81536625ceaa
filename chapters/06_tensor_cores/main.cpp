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
#include <string>
#include <utility>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "chapters/05_flash_attention_2/flash_attention_2.h"
#include "chapters/06_tensor_cores/lab/error_budget.h"
#include "chapters/06_tensor_cores/lab/vs_chapter_05.h"
#include "chapters/06_tensor_cores/tensor_cores.h"
#include "common/program.h"
#include "common/simt/runtime/progress.h"

namespace {

// A rough rate of this demo on the CPU path, for the notice of a long run only (three forward
// passes: the tensor-core kernel, chapter 05's and the error budget's float64 evaluation), measured
// once on a 2-core laptop (1024 x 1024, 2 heads, head_dim 64: 1.6 GFLOP so counted in 2.6 s).
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
    const double scale = flags.scale.value_or(fa::default_scale(shape.head_dim));
    ch06::round_inputs(in.Q, in.K, in.V, scale, element);

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

    // A long run says so, and shows the kernels' blocks.
    const bool long_run =
        device == fa::Device::cpu && fa::announce_long_run(3 * fa::forward_flops(shape), kFlopsPerSecond);
    simt::ShowProgress progress("the tensor-core kernel and chapter 05's", long_run);
    ch06::Result tc = ch06::tensor_core_attention(Q, K, V, {flags.scale, flags.causal, tile, element}, device);
    const ch05::Result f32 = ch05::flash_attention_2(Q, K, V, {flags.scale, flags.causal, fa::Tile{64, 64}}, device);
    progress.stop();
    fmt::print(
        "time: {:.3f} ms on tensor cores ({}), {:.3f} ms for chapter 05's float32 kernel ({}; wall clock of "
        "one run, not a benchmark)\n",
        tc.elapsed_ms, type, f32.elapsed_ms, fa::to_string(device));

    const fa::Check check = ch06::against_chapter_05(
        fmt::format("tensor cores ({}, {}, {}) vs ch05", type, fa::to_string(device), fa::tile_name(tile)), tc, f32, Q,
        K, V, scale, flags.causal, element);
    out.write(std::move(tc.O));
    return program.finish(check);
  } catch (...) {
    return program.exit_on_error();
  }
}
