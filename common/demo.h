// How a demo's verdict and the tour's table look, for the front door (common/program.h, Program)
// and the tour (chapters/tour_summary.cpp); a chapter's main.cpp does not need this file.
//
//   1. the banner: a rule, then "Chapter NN - title", then what the demo shows     print_banner
//   2. the verdict: PASS or FAIL, what was checked against the chapter before,
//      the largest error and the bound it must stay under                        print_verdict
//   3. with --summary FILE, the same check appended to FILE as one tab-separated
//      line                                                                        append_summary
//
// The tour truncates FILE, runs every demo with --summary FILE, and ends with `tour_summary FILE`
// (chapters/tour_summary.cpp), which prints the lines of step 3 as one table.
//
// Colour: headings and PASS/FAIL are coloured (fmt's colour API, the 16 standard ANSI colours)
// only when standard output is a terminal, NO_COLOR is unset or empty (https://no-color.org) and
// TERM is not "dumb"; piped into a file or a pager, the output is plain text.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/color.h>
#include <fmt/format.h>
#include <unistd.h>  // isatty

#include "common/program.h"

namespace fa::demo {

// ---------------------------------------------------------------------------------------------
// Colour.

// The rule of the header comment, on its inputs: is_terminal (isatty on stdout), the value of
// NO_COLOR and of TERM (nullptr when unset). Never throws.
inline bool colour_wanted(bool is_terminal, const char* no_color, const char* term) {
  if (no_color != nullptr && no_color[0] != '\0') return false;
  if (term != nullptr && std::string_view(term) == "dumb") return false;
  return is_terminal;
}

// colour_wanted() for this process's stdout and environment, decided once. Never throws.
inline bool colour_enabled() {
  static const bool enabled = colour_wanted(isatty(fileno(stdout)) != 0, std::getenv("NO_COLOR"), std::getenv("TERM"));
  return enabled;
}

// text wrapped in the escape codes of style when colour is true; text unchanged otherwise.
inline std::string paint(std::string_view text, fmt::text_style style, bool colour) {
  if (!colour) return std::string(text);
  return fmt::format(style, "{}", text);
}

inline const fmt::text_style heading_style = fmt::emphasis::bold | fmt::fg(fmt::terminal_color::bright_cyan);
inline const fmt::text_style pass_style = fmt::emphasis::bold | fmt::fg(fmt::terminal_color::green);
inline const fmt::text_style fail_style = fmt::emphasis::bold | fmt::fg(fmt::terminal_color::red);

// ---------------------------------------------------------------------------------------------
// Step 1: the banner.

inline constexpr std::size_t rule_width = 96;

// Prints a rule of '=', "Chapter NN - title" (chapter 2 -> "02"), both in the heading colour where
// colour is enabled, then the paragraph and a blank line.
inline void print_banner(int chapter, const Banner& banner) {
  const bool colour = colour_enabled();
  fmt::print("{}\n", paint(std::string(rule_width, '='), heading_style, colour));
  fmt::print("{}\n", paint(fmt::format("Chapter {:02} - {}", chapter, banner.title), heading_style, colour));
  fmt::print("{}\n\n", banner.shows);
}

// ---------------------------------------------------------------------------------------------
// Steps 2 and 3: one check of a chapter against the stage before it (fa::Check, common/program.h).

// "PASS  <checked>: <error>; bound <bound>", PASS in green or FAIL in red when colour is true.
inline std::string verdict_line(const Check& c, bool colour) {
  const std::string word = c.pass ? paint("PASS", pass_style, colour) : paint("FAIL", fail_style, colour);
  return fmt::format("{}  {}: {}; bound {}", word, c.checked, c.error, c.bound);
}

// Prints a blank line and then verdict_line(c) on stdout.
inline void print_verdict(const Check& c) { fmt::print("\n{}\n", verdict_line(c, colour_enabled())); }

// The check as one line of the summary file, without the '\n':
// chapter TAB checked TAB error TAB bound TAB PASS|FAIL.
// Throws std::invalid_argument when a field is empty or holds a tab or a line break (they would
// break the line into the wrong fields).
inline std::string summary_line(const Check& c) {
  const std::string_view names[] = {"chapter", "checked", "error", "bound"};
  const std::string_view fields[] = {c.chapter, c.checked, c.error, c.bound};
  for (std::size_t i = 0; i < 4; ++i) {
    if (fields[i].empty()) {
      throw std::invalid_argument(fmt::format("summary line: the field '{}' is empty", names[i]));
    }
    if (fields[i].find_first_of("\t\r\n") != std::string_view::npos) {
      throw std::invalid_argument(
          fmt::format("summary line: the field '{}' (\"{}\") holds a tab or a line break; fields are tab-separated",
                      names[i], fields[i]));
    }
  }
  return fmt::format("{}\t{}\t{}\t{}\t{}", c.chapter, c.checked, c.error, c.bound, c.pass ? "PASS" : "FAIL");
}

// Parses one line written by summary_line. line_number (from 1) is only for the message. Throws
// std::invalid_argument, naming the line, unless the line has exactly five tab-separated fields,
// the first four non-empty and the last PASS or FAIL.
inline Check parse_summary_line(std::string_view line, std::size_t line_number) {
  std::vector<std::string> fields;
  std::size_t start = 0;
  while (true) {
    const std::size_t tab = line.find('\t', start);
    fields.emplace_back(line.substr(start, tab == std::string_view::npos ? line.npos : tab - start));
    if (tab == std::string_view::npos) break;
    start = tab + 1;
  }
  if (fields.size() != 5) {
    throw std::invalid_argument(
        fmt::format("summary line {}: {} tab-separated fields, expected 5 (chapter, checked, error, bound, PASS|FAIL)",
                    line_number, fields.size()));
  }
  for (std::size_t i = 0; i < 4; ++i) {
    if (fields[i].empty()) {
      throw std::invalid_argument(fmt::format("summary line {}: field {} is empty", line_number, i + 1));
    }
  }
  if (fields[4] != "PASS" && fields[4] != "FAIL") {
    throw std::invalid_argument(
        fmt::format("summary line {}: last field is '{}', expected PASS or FAIL", line_number, fields[4]));
  }
  return Check{fields[0], fields[1], fields[2], fields[3], fields[4] == "PASS"};
}

// Appends summary_line(c) and '\n' to the file at path (created if missing). Throws
// std::runtime_error naming the path when it cannot be opened or written, and std::invalid_argument
// as summary_line.
inline void append_summary(const std::string& path, const Check& c) {
  const std::string line = summary_line(c) + "\n";
  std::ofstream out(path, std::ios::app);
  if (!out) throw std::runtime_error(fmt::format("--summary {}: cannot open the file for appending", path));
  out << line;
  out.flush();
  if (!out) throw std::runtime_error(fmt::format("--summary {}: writing failed", path));
}

// Every line of the file at path (empty lines skipped), parsed by parse_summary_line. Throws
// std::runtime_error naming the path when it cannot be opened, std::invalid_argument as
// parse_summary_line.
inline std::vector<Check> read_summary(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(fmt::format("{}: cannot open the summary file", path));
  std::vector<Check> checks;
  std::string line;
  for (std::size_t number = 1; std::getline(in, line); ++number) {
    if (!line.empty()) checks.push_back(parse_summary_line(line, number));
  }
  return checks;
}

// The checks as a table with a title and column heads, one row per check, columns padded to their
// widest entry, and a last line "N of M checks passed"; ends in '\n'. PASS and FAIL are coloured
// when colour is true (the padding is computed on the plain text).
inline std::string summary_table(std::span<const Check> checks, bool colour) {
  std::size_t w_checked = std::string_view("what it checked").size();
  std::size_t w_error = std::string_view("max error against the stage before").size();
  std::size_t w_bound = std::string_view("bound").size();
  for (const Check& c : checks) {
    w_checked = std::max(w_checked, c.checked.size());
    w_error = std::max(w_error, c.error.size());
    w_bound = std::max(w_bound, c.bound.size());
  }
  std::string out = paint("The tour: every chapter checked against the stage before it", heading_style, colour);
  out += "\n\n";
  out += fmt::format("  {:<7}  {:<{}}  {:<{}}  {:<{}}  {}\n", "chapter", "what it checked", w_checked,
                     "max error against the stage before", w_error, "bound", w_bound, "result");
  std::size_t passed = 0;
  for (const Check& c : checks) {
    passed += c.pass ? 1 : 0;
    const std::string result = c.pass ? paint("PASS", pass_style, colour) : paint("FAIL", fail_style, colour);
    out += fmt::format("  {:<7}  {:<{}}  {:<{}}  {:<{}}  {}\n", c.chapter, c.checked, w_checked, c.error, w_error,
                       c.bound, w_bound, result);
  }
  const bool all = passed == checks.size() && !checks.empty();
  out += "\n" +
         paint(fmt::format("{} of {} checks passed", passed, checks.size()), all ? pass_style : fail_style, colour) +
         "\n";
  return out;
}

}  // namespace fa::demo
