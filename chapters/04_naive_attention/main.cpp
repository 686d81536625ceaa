// ch04_naive_attention: attention as three kernels, checked against chapter 03.
//
//   ch04_naive_attention                                  random inputs, the GPU if there is one
//   ch04_naive_attention --device cpu --seq-q 1 --seq-k 257 --causal
//   ch04_naive_attention --q q.npy --k k.npy --v v.npy --out o.npy
//   ch04_naive_attention --summary tour.tsv                ... and append the check to tour.tsv
//
// The check at the end: O against chapter 03's attention in double on the same float inputs,
// within the bound of lab/vs_chapter_03.h (the tests use the same).
#include <optional>
#include <string>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "chapters/03_online_weighted_sum/attention.h"
#include "chapters/04_naive_attention/lab/profile_report.h"
#include "chapters/04_naive_attention/lab/vs_chapter_03.h"
#include "chapters/04_naive_attention/naive_attention.h"
#include "common/profile_cli.h"
#include "common/program.h"
#include "common/simt/runtime/progress.h"

namespace {

// Rough CPU-path rates of this demo's two computations, measured on a 2-core laptop (for the
// estimate of a long run only): the three kernels through common/simt, and chapter 03 in double.
constexpr double kKernelFlopsPerSecond = 0.5e9;
constexpr double kChapter03FlopsPerSecond = 1e9;

}  // namespace

int main(int argc, char** argv) {
  fa::Program program(4, "Chapter 04: naive attention, three kernels that write S and P to global memory.");
  fa::AttentionFlags flags;
  flags.add_to(program.app());
  fa::Output& out = program.add_output("--out", "O");
  try {
    program.parse(argc, argv);

    // Everything this run needs, checked before anything is allocated.
    fa::Plan plan;
    const fa::AttentionShape shape = flags.plan(plan);  // and the device, the files, simt's settings
    const fa::Device device = flags.chosen_device();
    const ch04::Options options{flags.scale, flags.causal};
    (void)ch04::check_problem(shape, options);
    plan.memory.add("chapter 04's kernels (Q, K, V, O, S, P and the copies back)", ch04::memory_needed(shape));
    plan.memory.add("chapter 03's reference (float64)", ch03::memory_needed(shape));
    program.check(plan);

    program.start(
        fa::Banner{"naive attention: S = Q K^T * scale, P = softmax(S), O = P V, one kernel each",
                   R"(Three kernels, each a full pass through global memory: the first writes every score of S, the
second reads S back and writes the weights P, the third reads P and V and writes O. They are
CUDA C++; without a GPU they run on the CPU through common/simt. O is compared with chapter 03's
attention, computed in double on the same float inputs.)"});

    const bool long_run = device == fa::Device::cpu &&
                          fa::announce_long_run(fa::forward_flops(shape),
                                                1.0 / (1.0 / kKernelFlopsPerSecond + 1.0 / kChapter03FlopsPerSecond));
    const fa::AttentionFlags::Inputs in = flags.load();
    fmt::print("{}\n\n", flags.describe(in, device));

    simt::ShowProgress progress("chapter 04's kernels", long_run);
    ch04::Result result = ch04::naive_attention(in.Q, in.K, in.V, options, device);
    progress.stop();
    fmt::print("{}", ch04::format_profile_beside_model(fa::end_profile(), shape.batch * shape.heads, shape.seq_len_q,
                                                       shape.seq_len_k, shape.head_dim));
    fmt::print("S and P: {} floats each ({}), each written to global memory and read back\n", result.S.size(),
               fa::format_bytes(result.S.size() * sizeof(float)));
    fmt::print("time: {:.3f} ms for the three launches ({})\n", result.elapsed_ms, fa::to_string(device));

    const ch03::AttentionOptions reference_options{.scale = flags.scale, .causal = flags.causal};
    const ch03::AttentionResult ref = ch03::attention(in.Q, in.K, in.V, reference_options);
    const ch04::Agreement agreement = ch04::agreement_bound(in.Q, in.K, in.V, reference_options);
    const fa::ErrorStats err = fa::compare(result.O.values, ref.O.values);
    fmt::print("agreement with chapter 03 (float64): {}\n", fa::describe(err));
    fmt::print("  bound: {}\n", fa::explain_bound(agreement.plain_error));
    const bool overflowed =
        fa::report_nonfinite("O", result.O, in.Q, in.K, flags.scale.value_or(fa::default_scale(in.Q.shape.head_dim)),
                             {in.Q.values, in.K.values, in.V.values});

    const bool pass = fa::within(err, agreement.bound) && !overflowed;
    out.write(std::move(result.O));
    return program.finish(fa::Check{"04", fmt::format("naive attention ({}) vs ch03 in double", fa::to_string(device)),
                                    fa::error_field("O", err), fa::bound_text(agreement.bound), pass});
  } catch (...) {
    return program.exit_on_error();
  }
}
