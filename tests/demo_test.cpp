// Tests of common/demo.h: when the demos colour their output, and the summary lines that the tour
// collects from every demo and prints as one table.
#include <cstdio>
#include <filesystem>
#include <functional>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>  // getpid

#include <CLI/CLI.hpp>

#include "catch.h"
#include "common/demo.h"
#include "common/front_door.h"
#include "common/npy.h"
#include "common/program.h"

namespace {

fa::Check sample(std::string chapter, bool pass) {
  return {std::move(chapter), "naive attention (cpu) vs ch03 in double", "O rel L2 4.1e-07", "1e-06", pass};
}

// A file name in the temporary folder that no other test process uses; removed on destruction.
struct TempFile {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("fa_demo_test_" + std::to_string(getpid()) + ".tsv");
  TempFile() { std::filesystem::remove(path); }
  ~TempFile() { std::filesystem::remove(path); }
};

}  // namespace

TEST_CASE("colour only on a terminal, without NO_COLOR, and not for TERM=dumb", "[common]") {
  CHECK(fa::demo::colour_wanted(true, nullptr, nullptr));
  CHECK(fa::demo::colour_wanted(true, nullptr, "xterm-256color"));
  CHECK_FALSE(fa::demo::colour_wanted(false, nullptr, "xterm-256color"));  // piped or redirected
  CHECK_FALSE(fa::demo::colour_wanted(true, "1", "xterm-256color"));
  // no-color.org: NO_COLOR counts when it is set to a non-empty string.
  CHECK(fa::demo::colour_wanted(true, "", "xterm-256color"));
  CHECK_FALSE(fa::demo::colour_wanted(true, nullptr, "dumb"));
}

TEST_CASE("paint adds escape codes only when asked to", "[common]") {
  CHECK(fa::demo::paint("PASS", fa::demo::pass_style, false) == "PASS");
  const std::string coloured = fa::demo::paint("PASS", fa::demo::pass_style, true);
  CHECK(coloured != "PASS");
  CHECK(coloured.find("\x1b[") == 0);
  CHECK(coloured.find("PASS") != std::string::npos);
}

TEST_CASE("a summary line is five tab-separated fields and reads back as it was written", "[common]") {
  const fa::Check c = sample("04", false);
  const std::string line = fa::demo::summary_line(c);
  CHECK(line == "04\tnaive attention (cpu) vs ch03 in double\tO rel L2 4.1e-07\t1e-06\tFAIL");
  const fa::Check back = fa::demo::parse_summary_line(line, 1);
  CHECK(back.chapter == c.chapter);
  CHECK(back.checked == c.checked);
  CHECK(back.error == c.error);
  CHECK(back.bound == c.bound);
  CHECK(back.pass == c.pass);
  CHECK(fa::demo::parse_summary_line(fa::demo::summary_line(sample("05", true)), 1).pass);
}

TEST_CASE("summary lines refuse fields that would break them, and malformed lines", "[common]") {
  fa::Check tab = sample("04", true);
  tab.error = "O\trel L2";
  CHECK_THROWS_AS(fa::demo::summary_line(tab), std::invalid_argument);
  fa::Check newline = sample("04", true);
  newline.checked = "two\nlines";
  CHECK_THROWS_AS(fa::demo::summary_line(newline), std::invalid_argument);
  CHECK_THROWS_AS(fa::demo::summary_line(sample("", true)), std::invalid_argument);

  CHECK_THROWS_AS(fa::demo::parse_summary_line("04\tchecked\terror\tPASS", 3), std::invalid_argument);
  CHECK_THROWS_AS(fa::demo::parse_summary_line("04\tchecked\terror\tbound\tPASS\textra", 3), std::invalid_argument);
  CHECK_THROWS_AS(fa::demo::parse_summary_line("04\tchecked\terror\tbound\tpassed", 3), std::invalid_argument);
  CHECK_THROWS_AS(fa::demo::parse_summary_line("04\t\terror\tbound\tPASS", 3), std::invalid_argument);
  std::string message;
  try {
    fa::demo::parse_summary_line("04\tchecked\terror\tPASS", 7);
  } catch (const std::invalid_argument& e) {
    message = e.what();
  }
  CHECK(message.find("line 7") != std::string::npos);  // the message names the line
}

TEST_CASE("append_summary adds lines that read_summary returns in order", "[common]") {
  const TempFile file;
  fa::demo::append_summary(file.path.string(), sample("01", true));
  fa::demo::append_summary(file.path.string(), sample("02", false));
  const std::vector<fa::Check> checks = fa::demo::read_summary(file.path.string());
  REQUIRE(checks.size() == 2);
  CHECK(checks[0].chapter == "01");
  CHECK(checks[0].pass);
  CHECK(checks[1].chapter == "02");
  CHECK_FALSE(checks[1].pass);

  CHECK_THROWS_AS(fa::demo::read_summary((file.path / "missing.tsv").string()), std::runtime_error);
  CHECK_THROWS_AS(fa::demo::append_summary((file.path / "no_such_folder" / "x.tsv").string(), sample("01", true)),
                  std::runtime_error);
}

TEST_CASE("the summary table lines up its columns and counts the checks that passed", "[common]") {
  std::vector<fa::Check> checks{sample("01", true), sample("02", false)};
  checks[0].checked = "a much longer description of what chapter 01 checked";
  const std::string table = fa::demo::summary_table(checks, false);
  CHECK(table.find("1 of 2 checks passed") != std::string::npos);
  CHECK(table.find("\x1b[") == std::string::npos);  // no colour asked for, none given

  // The result column starts at the same place on the head row and on both check rows.
  std::vector<std::size_t> result_column;
  for (const std::string word : {"result", "PASS", "FAIL"}) {
    const std::size_t at = table.find(word);
    REQUIRE(at != std::string::npos);
    result_column.push_back(at - table.rfind('\n', at) - 1);
  }
  CHECK(result_column[0] == result_column[1]);
  CHECK(result_column[1] == result_column[2]);

  CHECK(fa::demo::summary_table(checks, true).find("\x1b[") != std::string::npos);
  CHECK(fa::demo::summary_table({}, false).find("0 of 0 checks passed") != std::string::npos);
}

namespace {

// A demo's main() in miniature: the front door's steps in the order a chapter's main() calls them,
// around the chapter's checks (plan_step) and its work. Returns the exit status.
int run_demo(fa::Program& program, std::vector<std::string> args, const std::function<void(fa::Plan&)>& plan_step,
             const std::function<std::optional<fa::Check>()>& work) {
  std::vector<char*> argv{const_cast<char*>("demo")};
  for (auto& a : args) argv.push_back(a.data());
  try {
    program.parse(static_cast<int>(argv.size()), argv.data());
    fa::Plan plan;
    plan_step(plan);
    program.check(plan);
    program.start(std::nullopt);
    return program.finish(work());
  } catch (...) {
    return program.exit_on_error();
  }
}

}  // namespace

TEST_CASE("a demo's exit status: 0 for PASS, 1 for FAIL or an error, 2 for a refusal before any work", "[common]") {
  auto run = [](std::vector<std::string> args, std::function<std::optional<fa::Check>()> body) {
    fa::Program program(4, "test");
    std::uint64_t n = 1;
    fa::cli::add_size(program.app(), "--n", n, "a size");
    return run_demo(
        program, std::move(args), [](fa::Plan&) {}, body);
  };
  CHECK(run({}, [] { return sample("04", true); }) == 0);
  CHECK(run({}, [] { return sample("04", false); }) == 1);  // FAIL exits with status 1
  CHECK(run({}, [] { return std::optional<fa::Check>(); }) == 0);
  CHECK(run({}, []() -> std::optional<fa::Check> { throw std::runtime_error("boom"); }) == 1);
  CHECK(run({"--n", "0"}, [] { return sample("04", true); }) == 2);
  CHECK(run({"--n", "-1"}, [] { return sample("04", true); }) == 2);
  // --summary appends the check, and a FAIL is written as FAIL.
  TempFile file;
  CHECK(run({"--summary", file.path.string()}, [] { return sample("05", false); }) == 1);
  const auto checks = fa::demo::read_summary(file.path.string());
  REQUIRE(checks.size() == 1);
  CHECK_FALSE(checks[0].pass);
}

TEST_CASE("a bound that is infinite or NaN bounds nothing: the check fails", "[common]") {
  CHECK(fa::within(1e-7, 1e-6));
  CHECK_FALSE(fa::within(1e-7, std::numeric_limits<double>::infinity()));
  CHECK_FALSE(fa::within(0.0, std::numeric_limits<double>::quiet_NaN()));
  CHECK_FALSE(fa::within(std::numeric_limits<double>::quiet_NaN(), 1.0));
  const auto same = fa::compare(std::vector<double>{1.0, 2.0}, std::vector<double>{1.0, 2.0});
  CHECK(fa::within(same, 1e-6));
  CHECK_FALSE(fa::within(same, std::numeric_limits<double>::infinity()));
  CHECK(fa::bound_text(std::numeric_limits<double>::infinity()) == "inf (no bound)");
  CHECK(fa::bound_text(1e-6) == "1e-06");
}

TEST_CASE("a relative bound of 1 or more checks nothing: the check fails, and its text says so", "[common]") {
  // ch07_backward --scale 1e-45 --seq-q 16 --seq-k 16 passed with dQ 44% off against a bound of 1.9.
  CHECK(fa::within(0.44, 1.9));  // an absolute bound may be large
  CHECK_FALSE(fa::within_relative(0.44, 1.9));
  CHECK_FALSE(fa::within_relative(0.0, 1.0));
  CHECK(fa::within_relative(0.44, 0.5));
  const auto same = fa::compare(std::vector<double>{1.0, 2.0}, std::vector<double>{1.0, 2.0});
  CHECK_FALSE(fa::within(same, 1.0));  // (a comparison's error is relative L2)
  CHECK(fa::relative_bound_text(1.9) == "1.9 (1 or more: checks nothing)");
  CHECK(fa::relative_bound_text(0.5) == "0.5");
}

TEST_CASE("NaN or an infinity in an input is refused, naming the flag, the file and the first index", "[common]") {
  // (Without --allow-nonfinite, which no test here gives: nonfinite_verdict then changes nothing.)
  const auto message = [](const fa::Plan& plan) -> std::string {
    try {
      fa::check_finite_inputs(plan);
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "";
  };
  fa::Plan scores;
  const std::vector<double> masked{1.0, -std::numeric_limits<double>::infinity(), 3.0};
  scores.add_input_values("--scores", masked, true);  // -inf: a masked score
  CHECK(message(scores).empty());
  fa::Plan values;
  values.add_input_values("--values", masked);
  CHECK(message(values).rfind("--values: item 2 is -inf; an input must be finite", 0) == 0);
  TempFile file;
  const std::string path = file.path.string() + ".npy";
  fa::Tensor4<float> t(fa::Shape4{1, 1, 2, 4}, std::vector<float>(8, 0.5f));
  t.values[5] = std::numeric_limits<float>::infinity();
  fa::write_npy_f32(path, t);
  fa::Plan files;
  files.add_input("--k", path);
  CHECK(message(files).rfind("--k " + path + ": the value at [0, 0, 1, 1] (value 5 of 8) is inf", 0) == 0);
  fa::Check check{"04", "checked", "O rel L2 0", "1e-06", true};
  fa::nonfinite_verdict(check);
  CHECK(check.pass);
  std::filesystem::remove(path);
}

TEST_CASE("NaN from finite inputs is a FAIL that says what is known; NaN from NaN inputs is propagation", "[common]") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const fa::Shape4 shape{1, 2, 3, 2};  // [batch, heads, seq_len, head_dim]
  const fa::Tensor4<float> Q(shape, std::vector<float>{3, 4, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0});
  const fa::Tensor4<float> K(shape, std::vector<float>{0, 0, 5, 12, 0, 0, 0, 0, 0, 0, 0, 0});
  // |q| at most 5, |k| at most 13: 65, times |scale| where that is above 1.
  CHECK(fa::score_magnitude_bound(Q, K, 0.5) == 65.0);
  CHECK(fa::score_magnitude_bound(Q, K, -4.0) == 260.0);

  fa::Tensor4<float> O(shape, 0.25f);
  O.values[9] = nan;  // [0, 1, 1, 1]
  O.values[11] = inf;
  const auto printed_by = [&](double scale) {
    std::FILE* file = std::tmpfile();
    REQUIRE(file != nullptr);
    CHECK(fa::report_nonfinite("O", O, Q, K, scale, {Q.values, K.values}, file));
    std::rewind(file);
    std::string text;
    for (int c = std::fgetc(file); c != EOF; c = std::fgetc(file)) text += static_cast<char>(c);
    std::fclose(file);
    return text;
  };
  std::string printed = printed_by(0.5);
  CHECK(printed.find("O holds 1 NaN and 1 inf although every input is finite") != std::string::npos);
  CHECK(printed.find("the first at [0, 1, 1, 1] (value 9 of 12)") != std::string::npos);
  CHECK(printed.find("no score can reach 3.4e38 on this input") != std::string::npos);
  CHECK(printed.find("= 65, below half of it") != std::string::npos);

  // A scale that makes scores of 3.4e38 possible: the message says the scores may have overflowed.
  printed = printed_by(3.0e37);
  CHECK(printed.find("a score can reach 3.4e38 on this input") != std::string::npos);

  fa::Tensor4<float> K_nan = K;
  K_nan.values[0] = nan;
  CHECK_FALSE(fa::report_nonfinite("O", O, Q, K_nan, 0.5, {Q.values, K_nan.values}));
  CHECK_FALSE(fa::report_nonfinite("O", fa::Tensor4<float>(shape, 0.25f), Q, K, 0.5, {Q.values, K.values}));
}

namespace {

// Runs a Program with one output --out and one input file --in (a Plan input), the given flags and
// work; returns the exit status.
int run_with_files(std::vector<std::string> args, const std::function<std::optional<fa::Check>(fa::Output&)>& work) {
  fa::Program program(4, "test");
  fa::Output& out = program.add_output("--out", "O");
  std::string input;
  program.app().add_option("--in", input, "an input file");
  const auto plan_step = [&](fa::Plan& plan) {
    if (!input.empty()) plan.add_input("--in", input);
  };
  return run_demo(program, std::move(args), plan_step, [&] { return work(out); });
}

}  // namespace

TEST_CASE("the front door checks every file before the work and writes the outputs after it", "[common]") {
  const TempFile file;  // its path, for a .npy output here
  const std::string out = file.path.string() + ".npy";
  std::filesystem::remove(out);
  bool worked = false;
  const auto work = [&](fa::Output& o) -> std::optional<fa::Check> {
    worked = true;
    o.write(fa::Tensor4<float>(fa::Shape4{1, 1, 1, 2}, std::vector<float>{1.0f, 2.0f}));
    return sample("04", true);
  };
  // Refused before the work (status 2, nothing done): an output that is an input, an empty path,
  // --summary in a folder that does not exist, an output in one.
  CHECK(run_with_files({"--out", out, "--in", out}, work) == 2);
  CHECK(run_with_files({"--out", ""}, work) == 2);
  CHECK(run_with_files({"--summary", out + "/no-such-folder/s.tsv"}, work) == 2);
  CHECK(run_with_files({"--out", out + ".d/o.npy"}, work) == 2);
  CHECK_FALSE(worked);
  CHECK_FALSE(std::filesystem::exists(out));
  // Accepted: the work runs, and the output is written after it.
  CHECK(run_with_files({"--out", out}, work) == 0);
  CHECK(worked);
  CHECK(std::filesystem::exists(out));
  std::filesystem::remove(out);
  // An output the work did not hand over is an error of the run (status 1).
  CHECK(run_with_files({"--out", out}, [](fa::Output&) { return sample("04", true); }) == 1);
}

TEST_CASE("the verdict's error field counts NaN", "[common]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const auto err = fa::compare(std::vector<double>{nan, 1.0}, std::vector<double>{nan, 1.0});
  CHECK(fa::error_field("O", err) == "O rel L2 0, 1 NaN, all where the reference has them too");
}
