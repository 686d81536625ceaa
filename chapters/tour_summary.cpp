// tour_summary: the last step of the tour. Prints the summary file that the chapter demos filled
// with --summary (one tab-separated line per check, common/demo.h) as one table.
//
//   tour_summary build/default/tour_summary.tsv              the table
//   tour_summary build/default/tour_summary.tsv --expect 5   ... and fail unless 5 checks are there
//
// Exit status: 0 when every check passed (and --expect, if given, matches), 1 otherwise, so that
// the tour ends in an error when a chapter disagrees with the one before it.
#include <cstddef>
#include <exception>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "common/demo.h"

int main(int argc, char** argv) {
  CLI::App app{"Prints the tour's summary table from the lines the chapter demos wrote with --summary."};
  std::string path;
  std::optional<std::size_t> expect;
  app.add_option("file", path, "the summary file (tab-separated lines, see common/demo.h)")->required();
  app.add_option("--expect", expect, "the number of checks the tour ran; fewer or more is an error");
  CLI11_PARSE(app, argc, argv);

  try {
    const auto checks = fa::demo::read_summary(path);
    const bool colour = fa::demo::colour_enabled();
    fmt::print("\n{}", fa::demo::summary_table(checks, colour));
    bool ok = !checks.empty();
    for (const auto& c : checks) ok = ok && c.pass;
    if (expect && checks.size() != *expect) {
      fmt::print(stderr, "error: {} holds {} checks, but the tour ran {} demos that write one each\n", path,
                 checks.size(), *expect);
      ok = false;
    }
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}
