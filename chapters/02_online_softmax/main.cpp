// ch02_online_softmax: the max and the sum of a softmax in one pass, step by step.
//
//   ch02_online_softmax                                a trace of 1, 3, 5, 2, then the agreement
//                                                      with chapter 01 on random scores
//   ch02_online_softmax --trace                        the trace only
//   ch02_online_softmax --trace --scores 1,3,5,2 --block 2
//                                                      your own scores, in blocks of 2
//   ch02_online_softmax --n 1000000 --seed 7           the agreement on other random scores
//   ch02_online_softmax --summary tour.tsv             ... and append the check to tour.tsv
//
// The check at the end: online softmax against chapter 01's safe softmax, in double and in float,
// within ch02::order_bound (online_softmax.h), the bound the tests use too.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include "chapters/01_safe_softmax/safe_softmax.h"
#include "chapters/02_online_softmax/online_softmax.h"
#include "chapters/02_online_softmax/trace.h"
#include "common/compare.h"
#include "common/program.h"
#include "common/random.h"

namespace {

constexpr std::size_t bar_width = 40;          // '#' characters for a term of 1.0, the largest
constexpr std::size_t max_traced_scores = 64;  // the trace prints ~n*n/(2*block) lines

// A term in [0, 1] as a bar of '#', bar_width long for 1.0; "NaN" for a NaN term.
std::string bar(double value) {
  if (std::isnan(value)) return "NaN";
  const double clamped = std::clamp(value, 0.0, 1.0);
  return std::string(static_cast<std::size_t>(std::lround(clamped * bar_width)), '#');
}

// "x[2] = 5" for one score, "x[2..3] = 5, 2" for a block.
std::string arrived(const ch02::Trace<double>& t, const ch02::TraceStep<double>& s) {
  const std::span<const double> block(t.x.data() + s.first, s.count);
  if (s.count == 1) return fmt::format("x[{}] = {:g} arrives", s.first, block[0]);
  return fmt::format("x[{}..{}] = {:g} arrive", s.first, s.first + s.count - 1, fmt::join(block, ", "));
}

// Why rescale has the value it has (line 3 of online_softmax.h).
std::string rescale_reason(const ch02::TraceStep<double>& s) {
  if (s.first == 0) return fmt::format("rescale = {:g}: the first scores, nothing to rescale yet", s.rescale);
  if (s.m_after > s.m_before) {
    return fmt::format("the max rose: rescale = exp({:g} - {:g}) = {:.6g}; every earlier term is multiplied by it",
                       s.m_before, s.m_after, s.rescale);
  }
  return fmt::format("the max did not rise: rescale = {:g}, the earlier terms stay as they are", s.rescale);
}

// What the trace's check found: the largest relative difference of a weight from chapter 01's, and
// the NaN and infinities of both (fa::nonfinite_report), in words; empty when there are none.
struct TraceCheck {
  double vs_ch01 = 0.0;
  std::string nonfinite;
};

// Prints the trace of scores in blocks of `block`, and returns its check against chapter 01.
TraceCheck print_trace(const std::vector<double>& scores, std::size_t block) {
  if (scores.size() > max_traced_scores) {
    throw std::invalid_argument(
        fmt::format("--trace prints every term at every step; give at most {} "
                    "scores (got {})",
                    max_traced_scores, scores.size()));
  }
  const auto t = ch02::online_softmax_trace(scores, block);
  fmt::print("Trace of x = [{:g}] in blocks of {}. Each bar is one term exp(x_j - m) of l; {} '#' = 1.0.\n",
             fmt::join(t.x, ", "), t.block, bar_width);
  for (std::size_t k = 0; k < t.steps.size(); ++k) {
    const auto& s = t.steps[k];
    fmt::print("\nstep {}: {}\n", k + 1, arrived(t, s));
    fmt::print("  m: {:g} -> {:g}   {}\n", s.m_before, s.m_after, rescale_reason(s));
    fmt::print("  l: l * rescale + block sum = {:.6g} * {:.6g} + {:.6g} = {:.6g}\n", s.l_before, s.rescale, s.block_sum,
               s.l_after);
    for (std::size_t j = 0; j < s.terms.size(); ++j) {
      fmt::print("     x[{}] = {:<8g} {:<11.6g} {}{}\n", j, t.x[j], s.terms[j], bar(s.terms[j]),
                 j >= s.first ? "   (new)" : "");
    }
  }
  const auto& last = t.steps.back();
  fmt::print("\npass 2: p_j = exp(x_j - m) / l with m = {:g}, l = {:.6g}\n", last.m_after, last.l_after);
  fmt::print("  online     p = [{:.6g}]\n", fmt::join(t.p, ", "));
  const auto safe = ch01::safe_softmax(t.x);
  fmt::print("  chapter 01 p = [{:.6g}]\n", fmt::join(safe, ", "));
  std::uint64_t max_ulp = 0;
  for (std::size_t i = 0; i < safe.size(); ++i) max_ulp = std::max(max_ulp, fa::ulp_distance(t.p[i], safe[i]));
  fmt::print("  largest difference: {} ulp\n", max_ulp);
  const fa::ErrorStats err = fa::compare(t.p, safe);
  // max_rel skips weights that are 0 in chapter 01; a NaN or an infinity there shows in max_abs.
  return {std::isfinite(err.max_abs) ? err.max_rel : INFINITY, fa::nonfinite_report(err)};
}

// The largest relative difference of a weight between online and chapter 01, over the block sizes
// of the agreement table, in double and in float.
struct Agreement {
  double in_double = 0.0;
  double in_float = 0.0;
  std::size_t block_sizes = 0;  // how many block sizes the table tried
};

// One row of the agreement table for type T: online_softmax(x, block) against chapter 01 (largest
// relative difference and ulp distance) and against the exact weights (largest relative error).
// worst: the largest "vs ch01" difference so far, raised to this row's.
template <class T>
std::string agreement(const std::vector<double>& drawn, const std::vector<long double>& exact, std::size_t block,
                      double& worst) {
  const std::vector<T> x(drawn.begin(), drawn.end());
  const auto online = ch02::online_softmax(x, block);
  const auto safe = ch01::safe_softmax(x);
  std::uint64_t max_ulp = 0;
  for (std::size_t i = 0; i < x.size(); ++i) max_ulp = std::max(max_ulp, fa::ulp_distance(online[i], safe[i]));
  const fa::ErrorStats err = fa::compare(online, safe);
  const double vs_ch01 = std::isfinite(err.max_abs) ? err.max_rel : INFINITY;  // as in print_trace
  worst = std::max(worst, vs_ch01);
  return fmt::format("{:>9.2g} {:>6}  {:>9.2g}", vs_ch01, max_ulp, fa::compare(online, exact).max_rel);
}

// Chapter 01's largest relative error against the exact weights, for type T.
template <class T>
double chapter_01_error(const std::vector<double>& drawn, const std::vector<long double>& exact) {
  const std::vector<T> x(drawn.begin(), drawn.end());
  return fa::compare(ch01::safe_softmax(x), exact).max_rel;
}

Agreement print_agreement(std::size_t n, std::uint64_t seed, std::size_t extra_block) {
  const auto drawn = fa::normal<double>(n, seed, 0.0, 5.0);
  // The exact weights, near enough: chapter 01's safe softmax in long double (64-bit mantissa).
  const auto exact = ch01::safe_softmax(std::vector<long double>(drawn.begin(), drawn.end()));
  fmt::print(
      "Agreement on {} random scores (normal, mean 0, standard deviation 5, seed {}):\n"
      "the largest relative difference of a weight, online against chapter 01 (and in ulps),\n"
      "and online against the exact weights (the definition evaluated in long double).\n\n",
      n, seed);
  fmt::print("  {:>8}   {:<29}   {:<29}\n", "block", "double", "float");
  fmt::print("  {:>8}   {:>9} {:>6}  {:>9}     {:>9} {:>6}  {:>9}\n", "", "vs ch01", "ulp", "vs exact", "vs ch01",
             "ulp", "vs exact");
  // A few block sizes below n, n itself (one block: chapter 01's order of additions), and --block.
  std::vector<std::size_t> blocks{n, std::min(extra_block, n)};
  for (std::size_t b : {1, 2, 3, 7, 64, 1024}) {
    if (b < n) blocks.push_back(b);
  }
  std::sort(blocks.begin(), blocks.end());
  blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
  Agreement worst;
  worst.block_sizes = blocks.size();
  for (std::size_t block : blocks) {
    const std::string in_double = agreement<double>(drawn, exact, block, worst.in_double);
    const std::string in_float = agreement<float>(drawn, exact, block, worst.in_float);
    fmt::print("  {:>8}   {}     {}\n", block, in_double, in_float);
  }
  fmt::print("  {:>8}   {:>27.2g}     {:>27.2g}\n", "ch01", chapter_01_error<double>(drawn, exact),
             chapter_01_error<float>(drawn, exact));
  fmt::print(
      "\nIn exact arithmetic the two forms compute the same m and the same l. In floating point l is\n"
      "a sum of {} rounded terms, and the forms round their additions in different places\n"
      "(the online sum is rescaled when the max rises, and summed block by block), so each is off\n"
      "the exact weights by its own summation error (last line: chapter 01's), and they differ from\n"
      "each other by about as much. With one block the order is chapter 01's and they agree exactly.\n",
      n);
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  fa::Program program(2, R"(Chapter 02: online softmax. The running max m and the running sum l in one pass,
rescaled by exp(m - m_new) when the max rises.)");
  CLI::App& app = program.app();
  bool trace_only = false;
  std::vector<double> scores{1.0, 3.0, 5.0, 2.0};
  std::uint64_t block = 1;
  std::uint64_t n = 100000;
  std::uint64_t seed = 2;
  app.add_flag("--trace", trace_only, "print only the step-by-step trace of --scores");
  fa::cli::add_number_list(app, "--scores", scores, "comma-separated scores to trace");
  fa::cli::add_integer(app, "--block", block, "scores per block (1: one score at a time)");
  fa::cli::add_integer(app, "--n", n, "number of random scores for the agreement with chapter 01", 1, 1000000000);
  fa::cli::add_integer(app, "--seed", seed, "seed of the random scores", 0);
  try {
    program.parse(argc, argv);
    fa::Plan plan;
    plan.add_input_values("--scores", scores, true);  // -inf: a masked score
    // Both runs print the trace of --scores: its limit is checked before anything is printed.
    if (scores.size() > max_traced_scores) {
      throw std::invalid_argument(fmt::format(
          "--scores: {} scores; the trace prints every term at every step, so it takes at most {} (--n sets the "
          "random scores of the agreement)",
          scores.size(), max_traced_scores));
    }
    // At the peak: the scores (double), the exact weights (long double, 16 bytes), and one row of the
    // agreement table's scores, online weights and chapter 01's weights in double.
    if (!trace_only) plan.memory.add("the random scores and their weights", fa::saturating_mul(8 + 16 + 3 * 8, n));
    program.check(plan);

    if (trace_only) {
      program.start(std::nullopt);
      const TraceCheck traced = print_trace(scores, block);
      const double bound = ch02::order_bound<double>(scores.size());
      std::string error = fmt::format("double {:.2g} (max rel)", traced.vs_ch01);
      if (!traced.nonfinite.empty()) error += fmt::format(", {}", traced.nonfinite);
      return program.finish(fa::Check{"02", "online softmax vs ch01, the traced scores", error,
                                      fmt::format("{:.1e}", bound), traced.vs_ch01 <= bound});
    }
    program.start(fa::Banner{"online softmax",
                             R"(One pass keeps the max m and the sum l = sum_j exp(x_j - m) of the scores seen so far.
When the max rises from m to m_new, every term already in l is too large by the same
factor exp(m_new - m), so l is multiplied by rescale = exp(m - m_new): the bars shrink together.)"});
    print_trace(scores, block);
    fmt::print("\n");
    const Agreement worst = print_agreement(n, seed, block);
    const double bound_double = ch02::order_bound<double>(n), bound_float = ch02::order_bound<float>(n);
    return program.finish(
        fa::Check{"02", fmt::format("online softmax vs ch01, {} block sizes", worst.block_sizes),
                  fmt::format("double {:.2g}, float {:.2g} (max rel)", worst.in_double, worst.in_float),
                  fmt::format("{:.1e}, {:.1e}", bound_double, bound_float),
                  worst.in_double <= bound_double && worst.in_float <= bound_float});
  } catch (...) {
    return program.exit_on_error();
  }
}
