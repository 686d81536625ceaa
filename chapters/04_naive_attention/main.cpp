// ch04_naive_attention: attention as three kernels, checked against chapter 03.
//
//   ch04_naive_attention                                  random inputs, the GPU if there is one
//   ch04_naive_attention --device cpu --seq-q 1 --seq-k 257 --causal
//   ch04_naive_attention --q q.npy --k k.npy --v v.npy --out o.npy
//   ch04_naive_attention --summary tour.tsv                ... and append the check to tour.tsv
//
// The check at the end: O against chapter 03's attention in double on the same float inputs,
// within the bound of agreement.h (the tests use the same).
#include <optional>
#include <string>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "chapters/03_online_weighted_sum/attention.h"
#include "chapters/04_naive_attention/agreement.h"
#include "chapters/04_naive_attention/naive_attention.h"
#include "chapters/04_naive_attention/profile_report.h"
#include "common/chapter.h"
#include "common/profile_cli.h"
#include "common/simt/progress.h"

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
  ch04::Options options;  // from the flags, once they are parsed
  fa::Device device{};
  fa::AttentionShape shape;

  // Everything this run needs, checked before anything is allocated.
  const auto before_work = [&](fa::Plan& plan) -> std::optional<fa::Banner> {
    options = {flags.scale, flags.causal};
    device = flags.chosen_device();
    shape = flags.plan(plan);
    (void)ch04::check_problem(shape, options);
    plan.memory.add("chapter 04's kernels (Q, K, V, O, S, P and the copies back)", ch04::memory_needed(shape));
    plan.memory.add("chapter 03's reference (float64)", ch03::memory_needed(shape));
    return fa::Banner{"naive attention: S = Q K^T * scale, P = softmax(S), O = P V, one kernel each",
                      R"(Three kernels, each a full pass through global memory: the first writes every score of S, the
second reads S back and writes the weights P, the third reads P and V and writes O. They are
CUDA C++; without a GPU they run on the CPU through common/simt. O is compared with chapter 03's
attention, computed in double on the same float inputs.)"};
  };

  return program.run(argc, argv, before_work, [&]() -> std::optional<fa::Check> {
    const double flops = 4.0 * static_cast<double>(shape.batch * shape.heads) * static_cast<double>(shape.seq_len_q) *
                         static_cast<double>(shape.seq_len_k) * static_cast<double>(shape.head_dim);
    const bool long_run =
        device == fa::Device::cpu &&
        fa::announce_long_run(flops, 1.0 / (1.0 / kKernelFlopsPerSecond + 1.0 / kChapter03FlopsPerSecond));
    const fa::AttentionFlags::Inputs in = flags.load();
    fmt::print("Q {}, K and V with seq_len {}{}; inputs: {}; device: {}\n\n", in.Q.shape.str(), shape.seq_len_k,
               flags.causal ? ", causal" : "", in.origin, fa::to_string(device));

    ch04::Result result = [&] {
      const std::optional<simt::ShowProgress> progress =
          long_run ? std::optional<simt::ShowProgress>(std::in_place, "chapter 04's kernels") : std::nullopt;
      return ch04::naive_attention(in.Q, in.K, in.V, options, device);
    }();
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
    const bool overflowed = fa::report_overflow("O", result.O.values, {in.Q.values, in.K.values, in.V.values});

    const bool pass = fa::within(err, agreement.bound) && !overflowed;
    out.write(std::move(result.O));
    return fa::Check{"04", fmt::format("naive attention ({}) vs ch03 in double", fa::to_string(device)),
                     fa::error_field("O", err), fa::bound_text(agreement.bound), pass};
  });
}
