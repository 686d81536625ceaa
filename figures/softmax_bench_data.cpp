// figures/softmax_bench_data.cpp: reads chapter 02's benchmark table of docs/benchmarks-cpu.md
// (lines 1-4 of softmax_bench_data.h).
#include "figures/softmax_bench_data.h"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "figures/markdown_table.h"

namespace figures {
namespace {

constexpr std::string_view section = "## Safe against online softmax";
constexpr std::string_view times_head =
    "| n | safe us | online us | safe / online | safe us, streaming | online us, streaming | "
    "safe / online, streaming | max pass us |";

[[noreturn]] void bad_row(std::size_t line_number, std::string_view line, std::string_view why) {
  throw std::invalid_argument(
      fmt::format("docs/benchmarks-cpu.md, line {}: {}: \"{}\"; expected | cache | bytes per core | rows and {} "
                  "rows, as scripts/softmax_bench_table.py prints them",
                  line_number, why, line, times_head));
}

// A printed ratio (2 decimals) agrees with its times when it is their ratio rounded.
bool agrees(double printed, double safe_us, double online_us) {
  return std::fabs(printed - safe_us / online_us) <= 0.005 + 1e-9;
}

}  // namespace

std::optional<SoftmaxBench> read_softmax_bench(std::string_view markdown_text) {
  using markdown::cells_of;
  using markdown::number;
  using markdown::trim;
  const std::vector<std::string_view> lines = markdown::lines_of(markdown_text);  // numbered from 1

  // line 1: the section's heading.
  std::size_t first = 0;
  while (first < lines.size() && !trim(lines[first]).starts_with(section)) ++first;
  if (first == lines.size()) return std::nullopt;

  SoftmaxBench bench;
  for (std::size_t k = first + 1; k < lines.size() && !trim(lines[k]).starts_with("#"); ++k) {
    const std::string_view line = trim(lines[k]);
    if (line.starts_with("Machine:")) {  // line 2
      bench.machine = std::string(trim(line.substr(8)));
      continue;
    }
    if (!line.starts_with("|")) continue;
    const std::vector<std::string_view> cells = cells_of(line);
    if (cells[0] == "cache" || cells[0] == "n" || cells[0].starts_with("---")) continue;  // heads, rules
    if (cells.size() == 2) {                                                              // line 3: a cache level
      const auto bytes = number<std::uint64_t>(cells[1]);
      if (!bytes || *bytes == 0) bad_row(k + 1, line, "a cache size that is not a whole number of bytes");
      bench.caches.push_back(CacheLevel{std::string(cells[0]), *bytes});
      continue;
    }
    if (cells.size() != 8) bad_row(k + 1, line, fmt::format("{} cells instead of 2 or 8", cells.size()));
    std::vector<double> v;  // line 3: the times; line 4: the ratios
    for (std::size_t c = 1; c < 8; ++c) {
      const auto x = number<double>(cells[c]);
      if (!x || !(*x > 0)) bad_row(k + 1, line, fmt::format("cell {} is not a positive number", c + 1));
      v.push_back(*x);
    }
    const auto n = number<std::int64_t>(cells[0]);
    if (!n || *n < 1) bad_row(k + 1, line, "n is not a whole number of scores");
    const SoftmaxBenchRow row{*n, v[0], v[1], v[3], v[4], v[6]};
    if (!bench.rows.empty() && row.n <= bench.rows.back().n) bad_row(k + 1, line, "n does not increase");
    if (!agrees(v[2], row.safe_us, row.online_us) || !agrees(v[5], row.safe_streaming_us, row.online_streaming_us)) {
      bad_row(k + 1, line, "a ratio that is not safe us / online us to 2 decimals");
    }
    bench.rows.push_back(row);
  }
  if (bench.caches.empty() || bench.rows.empty()) {
    throw std::invalid_argument(
        fmt::format("docs/benchmarks-cpu.md, line {}: the section \"{}\" lacks its {} table; expected a cache table "
                    "and a times table, as scripts/softmax_bench_table.py prints them",
                    first + 1, trim(lines[first]).substr(3), bench.caches.empty() ? "cache" : "times"));
  }
  return bench;
}

}  // namespace figures
