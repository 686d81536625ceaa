// ch07_backward: the FlashAttention-2 backward pass, checked against a float64 gradient built on
// chapter 03; O and L come from chapter 05's forward kernel.
//
//   ch07_backward                                       random inputs, the GPU if there is one
//   ch07_backward --device cpu --seq-q 203 --seq-k 113 --causal --deterministic
//   ch07_backward --q q.npy --k k.npy --v v.npy --do do.npy --dq dq.npy --dk dk.npy --dv dv.npy
//   ch07_backward --out o.npy                           ... and chapter 05's forward O
//   ch07_backward --summary tour.tsv                    ... and append the check to tour.tsv
//
// The check at the end: dQ, dK and dV each against the float64 gradient (reference.h), within the
// bounds of gradient_check.h, the ones tests/07_backward_test.cpp uses. Exit status 1 on FAIL or an
// error, 2 for anything refused before the work (common/program.h, Program).
#include <cstdint>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "chapters/05_flash_attention_2/flash_attention_2.h"
#include "chapters/07_backward/backward.h"
#include "chapters/07_backward/lab/gradient_check.h"
#include "chapters/07_backward/lab/reference.h"
#include "chapters/07_backward/lab/traffic_model.h"
#include "common/npy.h"
#include "common/program.h"
#include "common/random.h"
#include "common/simt/runtime/progress.h"

namespace {

// dO from --do (its shape, checked before any work, is Q's), or drawn normal(0, 1) from the seed
// after Q's, K's and V's. Throws std::runtime_error for a file that cannot be read.
fa::Tensor4<float> load_or_draw_dO(const std::string& path, const fa::Shape4& q_shape, std::uint64_t seed) {
  if (path.empty()) return fa::Tensor4<float>(q_shape, fa::normal<float>(q_shape.size(), seed + 3));
  return fa::read_npy_f32_4d(path);
}

// A rough cost of this demo on the CPU path, for the notice of a long run only: the floating-point
// operations of one score's worth of work, 4 x head_dim for the forward, 10 x head_dim for the
// backward kernels, and the float64 gradient and the float32 evaluation beside them (each a forward
// and a backward, 14 x head_dim), at a rate measured once on a 2-core laptop (1024 x 1024, 2 heads,
// head_dim 64: 5.6 GFLOP so counted in 3.5 s).
constexpr double kFlopsPerScore = 4 + 10 + 2 * 14;  // x head_dim
constexpr double kFlopsPerSecond = 1.6e9;

void print_traffic(const ch07::TrafficCase& c) {
  fmt::print("\nThe traffic model for one head of this problem (float32, non-causal, traffic_model.h):\n");
  fmt::print("  {:<18} {:>16} {:>16} {:>12}\n", "dQ method", "MB, no L2 reuse", "MB, each once", "GFLOP");
  for (bool deterministic : {false, true}) {
    const ch07::BackwardTraffic t = ch07::walk_backward(c, false, deterministic);
    fmt::print("  {:<18} {:>16.3f} {:>16.3f} {:>12.4f}\n", deterministic ? "deterministic" : "atomic",
               static_cast<double>(t.moved.total()) / 1e6, static_cast<double>(t.once.total()) / 1e6,
               ch07::backward_flops(c, false, deterministic) / 1e9);
  }
}

}  // namespace

int main(int argc, char** argv) {
  fa::Program program(7, R"(Chapter 07: the FlashAttention-2 backward pass: dQ, dK, dV recomputed tile by tile
from the forward's L, checked against a float64 gradient.)");
  CLI::App& app = program.app();
  fa::AttentionFlags flags;
  flags.add_to(app);
  std::string do_path;
  bool deterministic = false;
  app.add_option("--do", do_path,
                 "dO, the gradient of the loss with respect to O, as a .npy file "
                 "(float32, Q's shape; default: normal(0, 1) from the seed)")
      ->check(CLI::Validator([](std::string& text) { return text.empty() ? std::string("the path is empty") : ""; }, "",
                             "file"));
  fa::Output& out_O = program.add_output("--out", "O (chapter 05's forward)");
  fa::Output& out_dQ = program.add_output("--dq", "dQ");
  fa::Output& out_dK = program.add_output("--dk", "dK");
  fa::Output& out_dV = program.add_output("--dv", "dV");
  app.add_flag("--deterministic", deterministic,
               "dQ from its own kernel (query blocks outside): the same bits on every run");
  try {
    program.parse(argc, argv);

    // Everything this run needs, checked before anything is allocated.
    const ch07::DqMethod method = deterministic ? ch07::DqMethod::deterministic : ch07::DqMethod::atomic;
    const fa::Device device = flags.chosen_device();
    fa::Plan plan;
    const fa::AttentionShape shape = flags.plan(plan);
    try {
      (void)ch07::check_problem(shape, {flags.scale, flags.causal, method});
      (void)ch05::check_problem(shape, {flags.scale, flags.causal});
    } catch (const std::invalid_argument& e) {
      if (flags.q_path.empty()) throw;
      throw std::invalid_argument(fmt::format("{}, {}, {}: {}", flags.q_path, flags.k_path, flags.v_path, e.what()));
    }
    const fa::Shape4 q_shape{shape.batch, shape.heads, shape.seq_len_q, shape.head_dim};
    if (!do_path.empty()) {
      const fa::Shape4 do_shape = fa::read_npy_shape(do_path);
      if (do_shape != q_shape) {
        throw std::invalid_argument(
            fmt::format("--do {}: shape {}, but dO must have Q's shape {}", do_path, do_shape.str(), q_shape.str()));
      }
      plan.add_input("--do", do_path);
    }
    plan.memory.add("dO (float32)", fa::saturating_mul(sizeof(float), q_shape.size()));
    plan.memory.add("chapter 05's forward (Q, K, V, O, L and the copies back)", ch05::memory_needed(shape));
    plan.memory.add("the backward kernels (inputs, dQ, dK, dV, D and the copies back)", ch07::memory_needed(shape));
    plan.memory.add("the float64 gradient and its forward, and the float32 evaluation", ch07::reference_memory(shape));
    program.check(plan);
    // The tiles of this device (on a GPU, ones its shared memory per block holds), named in the
    // banner when they are not the defaults.
    const int head_dim = static_cast<int>(shape.head_dim);
    const fa::TileChoice backward_tile = ch07::choose_tile(head_dim, {flags.scale, flags.causal, method}, device);
    const std::string tiles =
        fa::tile_note("backward tile", backward_tile) +
        fa::tile_note("chapter 05's tile", ch05::choose_tile(head_dim, {flags.scale, flags.causal}, device));

    program.start(
        fa::Banner{"the backward pass: dQ, dK, dV from the saved logsumexp L" + tiles,
                   R"(Chapter 05's forward kernel gives O and L = m + log(l). The backward pass recomputes each tile of
P = exp(S - L) from Q, K and L alone, and turns dO into dV = P^T dO, dS = P * (dP - D) with
D = rowsum(dO * O), dK = dS^T Q * scale and dQ = dS K * scale. A thread block owns Bc keys and
keeps their dK, dV on chip while the query blocks stream past; dQ is summed by atomicAdd, or
(--deterministic) by a second kernel that owns query rows. Each gradient is compared with a
float64 gradient built on chapter 03, within a bound set by a plain float32 evaluation.)"});

    const double flops = kFlopsPerScore * static_cast<double>(shape.batch * shape.heads) *
                         static_cast<double>(shape.seq_len_q) * static_cast<double>(shape.seq_len_k) *
                         static_cast<double>(shape.head_dim);
    const bool long_run = device == fa::Device::cpu && fa::announce_long_run(flops, kFlopsPerSecond);
    const fa::AttentionFlags::Inputs in = flags.load();
    const fa::Tensor4<float> dO = load_or_draw_dO(do_path, in.Q.shape, flags.seed);
    const std::size_t seq_len_k = in.K.shape.seq_len;
    fmt::print("Q {}, K and V with seq_len {}{}; inputs: {}; dO: {}; device: {}\n", in.Q.shape.str(), seq_len_k,
               flags.causal ? ", causal" : "", in.origin,
               do_path.empty() ? fmt::format("normal(0, 1), seed {}", flags.seed + 3) : do_path, fa::to_string(device));
    fmt::print("dQ: {}\n\n", deterministic ? "deterministic (the dq kernel, query blocks outside: same bits every run)"
                                           : "atomic (atomicAdd from the dK, dV kernel: the order of the adds varies)");

    // A long run shows the kernels' blocks as they finish.
    simt::ShowProgress progress("chapter 05's forward and the backward kernels", long_run);
    ch05::Result forward = ch05::flash_attention_2(in.Q, in.K, in.V, {flags.scale, flags.causal}, device);
    ch07::Gradients g = ch07::flash_attention_2_backward(in.Q, in.K, in.V, forward.O, forward.L, dO,
                                                         {flags.scale, flags.causal, method}, device);
    progress.stop();
    fmt::print(
        "time: {:.3f} ms for the backward pass, {:.3f} ms for chapter 05's forward ({}; wall clock of one "
        "run, not a benchmark)\n",
        g.elapsed_ms, forward.elapsed_ms, fa::to_string(device));

    const double scale = flags.scale.value_or(fa::default_scale(in.Q.shape.head_dim));
    const ch07::GradientsOf<double> reference =
        ch07::attention_backward_reference(in.Q, in.K, in.V, dO, scale, flags.causal);
    const ch07::GradientsOf<float> float32 =
        ch07::attention_backward_float32(in.Q, in.K, in.V, dO, forward.O, forward.L, scale, flags.causal);
    const ch07::GradientChecks checks = ch07::check_gradients(g, reference, float32);
    fmt::print("agreement with the float64 gradient (bound = 2 x the float32 evaluation's error + {:.1g}):\n",
               fa::kFloat32UnitRoundoff);
    fmt::print("  dQ: {}\n  dK: {}\n  dV: {}\n", ch07::describe(checks.dQ), ch07::describe(checks.dK),
               ch07::describe(checks.dV));

    const std::initializer_list<std::span<const float>> inputs{in.Q.values, in.K.values, in.V.values, dO.values};
    const bool overflowed = fa::report_nonfinite("dQ", g.dQ, in.Q, in.K, scale, inputs) ||
                            fa::report_nonfinite("dK", g.dK, in.Q, in.K, scale, inputs) ||
                            fa::report_nonfinite("dV", g.dV, in.Q, in.K, scale, inputs);

    if (in.Q.shape.seq_len == seq_len_k) {
      const fa::Tile tile = backward_tile.tile;
      print_traffic({static_cast<std::int64_t>(seq_len_k), static_cast<std::int64_t>(in.Q.shape.head_dim), tile.Br,
                     tile.Bc, 4, 4});
    }
    out_O.write(std::move(forward.O));
    out_dQ.write(std::move(g.dQ));
    out_dK.write(std::move(g.dK));
    out_dV.write(std::move(g.dV));

    const std::size_t not_finite = checks.dQ.not_finite + checks.dK.not_finite + checks.dV.not_finite;
    return program.finish(fa::Check{
        "07",
        fmt::format("backward ({}, {} dQ) vs float64 gradient", fa::to_string(device),
                    deterministic ? "deterministic" : "atomic"),
        fmt::format("dQ {:.2g}, dK {:.2g}, dV {:.2g} (rel L2){}", checks.dQ.error.rel_l2, checks.dK.error.rel_l2,
                    checks.dV.error.rel_l2, not_finite > 0 ? fmt::format(", {} NaN or inf", not_finite) : ""),
        fmt::format("{}, {}, {}", fa::relative_bound_text(checks.dQ.bound, "{:.1e}"),
                    fa::relative_bound_text(checks.dK.bound, "{:.1e}"),
                    fa::relative_bound_text(checks.dV.bound, "{:.1e}")),
        checks.pass() && !overflowed});
  } catch (...) {
    return program.exit_on_error();
  }
}
