// ch04_naive_attention: attention as three kernels, checked against chapter 03.
//
//   ch04_naive_attention                                  random inputs, the GPU if there is one
//   ch04_naive_attention --device cpu --seq-q 1 --seq-k 257 --causal
//   ch04_naive_attention --q q.npy --k k.npy --v v.npy --out o.npy
//   ch04_naive_attention --summary tour.tsv                ... and append the check to tour.tsv
//
// The check at the end: O against chapter 03's attention in double on the same float inputs,
// within the bound of tests/04_naive_attention_test.cpp (kRelL2).
#include <exception>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "chapters/03_online_weighted_sum/attention.h"
#include "chapters/04_naive_attention/naive_attention.h"
#include "chapters/04_naive_attention/profile_report.h"
#include "common/attention_cli.h"
#include "common/compare.h"
#include "common/demo.h"
#include "common/npy.h"
#include "common/profile_cli.h"

namespace {

// tests/04_naive_attention_test.cpp's bound (kRelL2): float32 kernels against the float64
// chapter 03 on scores of order 1 measure a few 1e-7; a wrong mask, index or normalisation gives
// 1e-2 to 1.
constexpr double rel_l2_bound = 1e-6;

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Chapter 04: naive attention, three kernels that write S and P to global memory."};
  fa::AttentionCli cli;
  fa::add_attention_flags(app, cli);
  std::string summary_path;
  app.add_option("--summary", summary_path, "append the check against chapter 03 to this file (the tour's)");
  fa::ProfileFlags profile;  // --profile, --profile-json: the kernels' memory accesses (common/simt/profile.h)
  fa::add_profile_flags(app, profile);
  CLI11_PARSE(app, argc, argv);

  try {
    const fa::Device device = fa::chosen_device(cli);
    const fa::AttentionProblem in = fa::load_or_draw(cli);
    const fa::Shape4& q = in.Q.shape;
    const std::size_t seq_len_k = in.K.shape.seq_len;
    fa::demo::print_heading(4, "naive attention: S = Q K^T * scale, P = softmax(S), O = P V, one kernel each");
    fa::demo::print_shows(
        "Three kernels, each a full pass through global memory: the first writes every score of S, the\n"
        "second reads S back and writes the weights P, the third reads P and V and writes O. They are\n"
        "CUDA C++; without a GPU they run on the CPU through common/simt. O is compared with chapter 03's\n"
        "attention, computed in double on the same float inputs.");
    fmt::print("Q {}, K and V with seq_len {}{}; inputs: {}; device: {}\n\n", q.str(), seq_len_k,
               cli.causal ? ", causal" : "", in.origin, fa::to_string(device));

    fa::begin_profile(profile, device);
    const ch04::Result out = ch04::naive_attention(in.Q, in.K, in.V, {cli.scale, cli.causal}, device);
    fmt::print("{}", ch04::format_profile_beside_model(fa::end_profile(profile), q.batch * q.heads, q.seq_len,
                                                       seq_len_k, q.head_dim));
    const double s_megabytes = static_cast<double>(out.S.size()) * sizeof(float) / 1e6;
    fmt::print("S and P: {} floats each ({:.3g} MB), each written to global memory and read back\n",
               out.S.size(), s_megabytes);
    fmt::print("time: {:.3f} ms for the three launches ({})\n", out.elapsed_ms, fa::to_string(device));

    const ch03::AttentionResult ref = ch03::attention(in.Q, in.K, in.V, {.scale = cli.scale, .causal = cli.causal});
    const fa::ErrorStats err = fa::compare(out.O.values, ref.O.values);
    // The test suite's bound for float32 kernels against the float64 chapter 03, for scores of
    // order 1 (tests/04_naive_attention_test.cpp explains it).
    fmt::print("agreement with chapter 03 (float64): {}\n  -> {}\n", fa::describe(err),
               err.rel_l2 <= rel_l2_bound ? "within the tests' bound, rel L2 <= 1e-6"
                                          : "OUTSIDE the tests' bound of 1e-6 (a wrong result, or scores far from "
                                            "order 1, whose float32 rounding the bound does not cover)");

    if (!cli.out_path.empty()) {
      fa::write_npy_f32(cli.out_path, out.O);
      fmt::print("wrote O to {}\n", cli.out_path);
    }
    const fa::demo::Check check{"04", fmt::format("naive attention ({}) vs ch03 in double", fa::to_string(device)),
                                fmt::format("O rel L2 {:.2g}", err.rel_l2), fmt::format("{:.0e}", rel_l2_bound),
                                err.rel_l2 <= rel_l2_bound};
    fa::demo::print_verdict(check);
    if (!summary_path.empty()) fa::demo::append_summary(summary_path, check);
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}
