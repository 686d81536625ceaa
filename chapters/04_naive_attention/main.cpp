// ch04_naive_attention: attention as three kernels, checked against chapter 03.
//
//   ch04_naive_attention                                  random inputs, the GPU if there is one
//   ch04_naive_attention --device cpu --seq-q 1 --seq-k 257 --causal
//   ch04_naive_attention --q q.npy --k k.npy --v v.npy --out o.npy
#include <exception>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "chapters/03_online_weighted_sum/attention.h"
#include "chapters/04_naive_attention/naive_attention.h"
#include "common/attention_cli.h"
#include "common/compare.h"
#include "common/npy.h"

int main(int argc, char** argv) {
  CLI::App app{"Chapter 04: naive attention, three kernels that write S and P to global memory."};
  fa::AttentionCli cli;
  fa::add_attention_flags(app, cli);
  CLI11_PARSE(app, argc, argv);

  try {
    const fa::Device device = fa::chosen_device(cli);
    const fa::AttentionProblem in = fa::load_or_draw(cli);
    const fa::Shape4& q = in.Q.shape;
    const std::size_t seq_len_k = in.K.shape.seq_len;
    fmt::print("Chapter 04 - naive attention: S = Q K^T * scale, P = softmax(S), O = P V, one kernel each\n");
    fmt::print("Q {}, K and V with seq_len {}{}; inputs: {}; device: {}\n\n", q.str(), seq_len_k,
               cli.causal ? ", causal" : "", in.origin, fa::to_string(device));

    const ch04::Result out = ch04::naive_attention(in.Q, in.K, in.V, {cli.scale, cli.causal}, device);
    const double s_megabytes = static_cast<double>(out.S.size()) * sizeof(float) / 1e6;
    fmt::print("S and P: {} floats each ({:.3g} MB), each written to global memory and read back\n",
               out.S.size(), s_megabytes);
    fmt::print("time: {:.3f} ms for the three launches ({})\n", out.elapsed_ms, fa::to_string(device));

    const ch03::AttentionResult ref = ch03::attention(in.Q, in.K, in.V, {.scale = cli.scale, .causal = cli.causal});
    const fa::ErrorStats err = fa::compare(out.O.values, ref.O.values);
    // The test suite's bound for float32 kernels against the float64 chapter 03, for scores of
    // order 1 (tests/04_naive_attention_test.cpp explains it).
    fmt::print("agreement with chapter 03 (float64): {}\n  -> {}\n", fa::describe(err),
               err.rel_l2 <= 1e-6 ? "within the tests' bound, rel L2 <= 1e-6"
                                  : "outside the tests' bound of 1e-6 (large scores magnify float32 rounding)");

    if (!cli.out_path.empty()) {
      fa::write_npy_f32(cli.out_path, out.O);
      fmt::print("wrote O to {}\n", cli.out_path);
    }
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}
