// ch03_online_weighted_sum: one query's attention output, block by block, then whole attention.
//
//   ch03_online_weighted_sum                       the worked example (scores 1, 3, 5, 2;
//                                                  values 10, 20, 30, 40; blocks of two), then
//                                                  attention on a small random problem
//   ch03_online_weighted_sum --scores 1,3,5,2 --values "10 1;20 2;30 3;40 4" --block 3
//                                                  your own numbers (values may be vectors)
//   ch03_online_weighted_sum --seq-q 1 --seq-k 257 --head-dim 64 --causal --block 64
//                                                  your own attention problem
//   ch03_online_weighted_sum --summary tour.tsv    ... and append the check to tour.tsv
//
// The check at the end: the one query and the whole attention, each against the all-at-once
// evaluation built on chapter 02's softmax, within ch03::kSameSumBound and ch03::kAttentionBound (the bounds the tests
// use too); with the default scores and values, also the worked example's output, 28.98474626.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "chapters/03_online_weighted_sum/attention.h"
#include "chapters/03_online_weighted_sum/online_weighted_sum.h"
#include "common/compare.h"
#include "common/program.h"
#include "common/random.h"
#include "common/tensor.h"

namespace {

// Value rows from the command line: "10,20,30,40" is four rows of one value; rows separated by ';'
// hold several values separated by spaces or commas: "10 1;20 2;30 3;40 4".
struct ValueRows {
  std::vector<double> flat;
  std::size_t rows = 0;
  std::size_t cols = 0;
};

// The numbers of one row of --values: separated by commas or spaces ("10 1" or "10,1").
std::vector<double> parse_row(const std::string& row) {
  std::string commas;
  bool in_number = false;
  for (char ch : row) {  // "10  1" and "10, 1" both become "10,1"
    const bool separator = ch == ' ' || ch == ',' || ch == '\t';
    if (separator) {
      if (in_number) commas += ',';
      in_number = false;
    } else {
      commas += ch;
      in_number = true;
    }
  }
  if (!commas.empty() && commas.back() == ',') commas.pop_back();
  return fa::cli::parse_number_list("--values", commas);
}

// Parses --values. Throws std::invalid_argument naming the flag and what is accepted.
ValueRows parse_values(const std::string& text) {
  ValueRows v;
  if (text.find(';') == std::string::npos) {
    v.flat = fa::cli::parse_number_list("--values", text);
    v.rows = v.flat.size();
    v.cols = 1;
    return v;
  }
  std::istringstream in(text);
  std::string row;
  while (std::getline(in, row, ';')) {
    const std::vector<double> numbers = parse_row(row);
    if (v.rows > 0 && numbers.size() != v.cols) {
      throw std::invalid_argument(
          fmt::format("--values: row {} has {} values but row 1 has {}; every row needs head_dim values", v.rows + 1,
                      numbers.size(), v.cols));
    }
    v.cols = numbers.size();
    v.flat.insert(v.flat.end(), numbers.begin(), numbers.end());
    ++v.rows;
  }
  if (v.cols == 0) throw std::invalid_argument("--values: the rows are empty; give at least one value per row");
  return v;
}

// A figure to four places; a vector of figures in brackets. (fmt prints -inf as "-inf".)
std::string f4(double x) { return fmt::format("{:.4f}", x); }
std::string f4(const std::vector<double>& x) {
  if (x.size() == 1) return f4(x[0]);
  return fmt::format("[{:.4f}]", fmt::join(x, ", "));
}

std::string f4_list(const std::vector<double>& x) {
  std::vector<std::string> parts;
  for (double xi : x) parts.push_back(f4(xi));
  return fmt::format("{}", fmt::join(parts, ", "));
}

std::string value_row(const fa::MatrixView<const double>& values, std::size_t j) {
  if (values.cols() == 1) return fmt::format("{:g}", values(j, 0));
  return fmt::format("[{:g}]", fmt::join(values.row(j), ", "));
}

// Prints the block-by-block trace of one query. Returns the output o (one number per column of
// values) and its largest absolute difference from the all-at-once evaluation.
struct QueryResult {
  std::vector<double> output;
  double max_abs = 0.0;
  std::string nonfinite;  // the NaN and infinities of both, in words (fa::nonfinite_report); empty if none
};

QueryResult print_trace(std::span<const double> scores, fa::MatrixView<const double> values, std::size_t block) {
  fmt::print("scores {:g}; values", fmt::join(scores, ", "));
  for (std::size_t j = 0; j < values.rows(); ++j) fmt::print("{} {}", j == 0 ? "" : ",", value_row(values, j));
  fmt::print("; blocks of {}\n", block);

  const std::vector<ch03::BlockStep> steps = ch03::trace_online_weighted_sum(scores, values, block);
  for (std::size_t b = 0; b < steps.size(); ++b) {
    const ch03::BlockStep& st = steps[b];
    fmt::print("\nblock {}: keys j = {}-{}, scores {:g}\n", b + 1, st.first, st.first + st.count - 1,
               fmt::join(scores.subspan(st.first, st.count), ", "));
    fmt::print("  line 2  block max {}; running max m {} -> {}\n", f4(st.block_max), f4(st.m_old), f4(st.m_new));
    fmt::print("  line 3  rescale = exp(m_old - m_new) = {}{}\n", f4(st.rescale),
               b == 0 ? "  (first block: nothing carried yet)" : "");
    fmt::print("  line 4  weights p = exp(s - m_new): {}\n", f4_list(st.p));
    fmt::print("  line 4  l   = rescale * l   + sum p   = {} carried + {} own = {} total\n", f4(st.l_carried),
               f4(st.l_block), f4(st.l));
    fmt::print("  line 5  acc = rescale * acc + sum p v = {} carried + {} own = {} total\n", f4(st.acc_carried),
               f4(st.acc_block), f4(st.acc));
    fmt::print("          output so far acc / l = {}\n", f4(st.output));
  }
  const ch03::BlockStep& last = steps.back();
  const std::vector<double> all_at_once = ch03::weighted_sum_all_at_once(scores, values);
  const fa::ErrorStats err = fa::compare(last.output, all_at_once);
  fmt::print("\nline 7, after the last block: o = acc / l = {} / {} = {}\n", f4(last.acc), f4(last.l), f4(last.output));
  fmt::print("all at once (chapter 02's softmax of every score, then the weighted sum): {}\n", f4(all_at_once));
  fmt::print("online {}, all at once {}: max abs difference {:.2g}\n", f4(last.output), f4(all_at_once), err.max_abs);
  return {last.output, err.max_abs, fa::nonfinite_report(err)};
}

struct ProblemFlags {
  fa::AttentionShape shape{1, 2, 8, 8, 4};  // batch, heads, seq_len_q, seq_len_k, head_dim
  bool causal = false;
  std::optional<double> scale;
  std::uint64_t seed = 3;
};

// Prints whole attention for the problem f; returns the largest absolute differences of O and of L
// from the all-at-once evaluation.
struct AttentionDifference {
  double O = 0.0;
  double L = 0.0;
};

AttentionDifference print_attention(const ProblemFlags& f, std::size_t block) {
  const fa::Shape4 q_shape{f.shape.batch, f.shape.heads, f.shape.seq_len_q, f.shape.head_dim};
  const fa::Shape4 kv_shape{f.shape.batch, f.shape.heads, f.shape.seq_len_k, f.shape.head_dim};
  const fa::Tensor4<double> Q(q_shape, fa::normal(q_shape.size(), f.seed));
  const fa::Tensor4<double> K(kv_shape, fa::normal(kv_shape.size(), f.seed + 1));
  const fa::Tensor4<double> V(kv_shape, fa::normal(kv_shape.size(), f.seed + 2));
  const ch03::AttentionOptions options{f.scale, f.causal, block};

  const ch03::AttentionResult online = ch03::attention(Q, K, V, options);
  const ch03::AttentionResult reference = ch03::attention_all_at_once(Q, K, V, options);

  fmt::print("\nWhole attention on the CPU, O = softmax(Q K^T * scale) V, each query row by the recurrence\n");
  fmt::print("  Q {}, K and V {}\n", q_shape.str(), kv_shape.str());
  fmt::print("  scale {:.6g}, {}, key blocks of {}, inputs normal(0, 1) from seed {}\n",
             options.scale.value_or(fa::default_scale(f.shape.head_dim)), f.causal ? "causal" : "not causal", block,
             f.seed);
  const std::size_t shown = std::min<std::size_t>(f.shape.seq_len_q, 8);
  fmt::print("  O[0, 0] (first {} of {} rows) and L[0, 0]:\n", shown, f.shape.seq_len_q);
  const fa::MatrixView<const double> O00 = online.O.view().head(0, 0);
  for (std::size_t i = 0; i < shown; ++i) {
    const auto row = O00.row(i);
    const std::size_t cols = std::min<std::size_t>(row.size(), 6);
    fmt::print("    row {:>3}: {: .4f}{}   L {:.4f}\n", i, fmt::join(row.first(cols), " "),
               cols < row.size() ? " ..." : "", online.L[i]);
  }
  const fa::ErrorStats o_err = fa::compare(online.O.values, reference.O.values);
  const fa::ErrorStats l_err = fa::compare(online.L, reference.L);
  fmt::print("  against the all-at-once evaluation (whole rows of S, chapter 02's softmax, then P V):\n");
  fmt::print("    O: max abs difference {:.2g}, rel L2 {:.2g};  L: max abs difference {:.2g}\n", o_err.max_abs,
             o_err.rel_l2, l_err.max_abs);
  return {o_err.max_abs, l_err.max_abs};
}

}  // namespace

// A rough cost of whole attention here, for the notice of a long run only: the recurrence and the
// all-at-once evaluation, each 4 x head_dim operations a score in float64 and an exp() (counted as
// 50), at about 1 GFLOP/s (plain loops on one core of a 2-core laptop: 2 heads of 1000 x 1000 at
// head_dim 64 took 1.5 s, 4 heads of 2000 x 2000 at head_dim 4 took 3.3 s).
constexpr double kExpFlops = 50;
constexpr double kFlopsPerSecond = 1e9;

int main(int argc, char** argv) {
  fa::Program program(3, R"(Chapter 03: one attention query's output by the online weighted sum (max, sum and
un-scaled weighted sum carried across blocks of keys), then whole attention on the CPU.)");
  CLI::App& app = program.app();
  std::vector<double> scores{1.0, 3.0, 5.0, 2.0};
  std::string values_text;
  std::uint64_t block = 2;
  ProblemFlags f;
  fa::cli::add_number_list(app, "--scores", scores, "comma-separated scores of one query");
  app.add_option("--values", values_text,
                 "one value per score, \"10,20,30,40\", or rows of head_dim values, \"10 1;20 2;30 3;40 4\"")
      ->check(CLI::Validator(
          [](std::string& text) {
            try {
              (void)parse_values(text);
            } catch (const std::invalid_argument& e) {
              // CLI11 names the flag itself: give the rest of the message.
              const std::string message = e.what();
              return message.rfind("--values", 0) == 0 ? message.substr(message.find(": ") + 2) : message;
            }
            return std::string();
          },
          "", "values"))
      ->default_str("10, 20, 30, ...");
  fa::cli::add_integer(app, "--block", block, "keys per block, for the trace and for attention");
  fa::cli::add_size(app, "--batch", f.shape.batch, "attention: batch size");
  fa::cli::add_size(app, "--heads", f.shape.heads, "attention: heads");
  fa::cli::add_size(app, "--seq-q", f.shape.seq_len_q, "attention: query rows per head");
  fa::cli::add_size(app, "--seq-k", f.shape.seq_len_k, "attention: keys per head");
  fa::cli::add_size(app, "--head-dim", f.shape.head_dim, "attention: head dimension");
  app.add_flag("--causal", f.causal, "attention: causal mask, aligned to the bottom right");
  fa::cli::add_scale(app, "--scale", f.scale, "attention: scale of Q K^T");
  fa::cli::add_integer(app, "--seed", f.seed, "attention: seed of the random Q, K, V", 0);
  try {
    program.parse(argc, argv);
    fa::Plan plan;
    ValueRows values;
    if (values_text.empty()) {
      for (std::size_t j = 0; j < scores.size(); ++j) values.flat.push_back(10.0 * static_cast<double>(j + 1));
      values.rows = scores.size();
      values.cols = 1;
    } else {
      values = parse_values(values_text);
    }
    plan.add_input_values("--scores", scores, true);  // -inf: a masked key
    plan.add_input_values("--values", values.flat);
    if (values.rows != scores.size()) {
      throw std::invalid_argument(
          fmt::format("--values: {} rows for {} scores; give one value row per score", values.rows, scores.size()));
    }
    const fa::AttentionCounts n = fa::attention_counts(f.shape);
    plan.memory.add("Q, K, V (float64)", fa::bytes_of(sizeof(double) * (n.q + 2 * n.k)));
    plan.memory.add("attention and its all-at-once reference", fa::saturating_mul(2, ch03::memory_needed(f.shape)));
    program.check(plan);

    program.start(
        fa::Banner{"the online weighted sum",
                   R"(o = sum_j softmax(s)_j v_j with the keys taken a block at a time. Carried across blocks: the
max m, the sum l and the un-scaled weighted sum acc; when the max rises, l and acc are both
multiplied by rescale = exp(m_old - m_new); acc is divided by l once, after the last block.
(Line numbers refer to chapters/03_online_weighted_sum/online_weighted_sum.h.))"});

    const QueryResult query = print_trace(
        scores, fa::MatrixView<const double>(std::span<const double>(values.flat), values.rows, values.cols), block);
    // (Plain loops, no kernel: the notice says how long, and no progress line follows.)
    (void)fa::announce_long_run(2 * (4 * static_cast<double>(f.shape.head_dim) + kExpFlops) *
                                    static_cast<double>(f.shape.batch * f.shape.heads) *
                                    static_cast<double>(f.shape.seq_len_q) * static_cast<double>(f.shape.seq_len_k),
                                kFlopsPerSecond);
    const AttentionDifference attention = print_attention(f, block);

    double largest_value = 1.0;
    for (double v : values.flat) largest_value = std::max(largest_value, std::fabs(v));
    const double query_difference = query.max_abs / largest_value;
    const double attention_difference = std::max(attention.O, attention.L);
    bool pass = query_difference <= ch03::kSameSumBound && attention_difference <= ch03::kAttentionBound;
    std::string checked = "online vs all at once (ch02's softmax)";
    std::string error = fmt::format("query {:.2g}, O/L {:.2g}", query_difference, attention_difference);
    if (!query.nonfinite.empty()) error += fmt::format(" (query: {})", query.nonfinite);
    std::string bound = fmt::format("{:.0e}, {:.0e}", ch03::kSameSumBound, ch03::kAttentionBound);
    // The default scores and values are the worked example: its eight-place output too.
    const bool worked_example = !app.count("--scores") && values_text.empty() && block == 2;
    if (worked_example) {
      const double example_error = std::fabs(query.output[0] - ch03::kWorkedExampleOutput);
      pass = pass && example_error <= ch03::kWorkedExampleBound;
      checked = "online vs all at once, the worked example";
      error += fmt::format(", 28.9847: {:.2g}", example_error);
      bound += fmt::format(", {:.0e}", ch03::kWorkedExampleBound);
    }
    return program.finish(fa::Check{"03", checked, error, bound, pass});
  } catch (...) {
    return program.exit_on_error();
  }
}
