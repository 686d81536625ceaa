// figures/measured_traffic.cpp: reads the Nsight Compute table of docs/benchmarks.md (lines 1-4 of
// measured_traffic.h).
#include "figures/measured_traffic.h"

#include "figures/markdown_table.h"

#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

namespace figures {
namespace {

constexpr std::string_view section = "## Measured DRAM traffic (Nsight Compute)";

using markdown::cells_of;
using markdown::number;
using markdown::trim;

[[noreturn]] void bad_row(std::size_t line_number, std::string_view line, std::string_view why) {
  throw std::invalid_argument(
      fmt::format("docs/benchmarks.md, line {}: {} in the table \"{}\": \"{}\"; expected "
                  "| kernel | seq_len | head_dim | causal | DRAM MB (ncu) | model MB |, as scripts/ncu_table.py "
                  "prints it",
                  line_number, why, section.substr(3), line));
}

}  // namespace

std::optional<MeasuredTraffic> read_measured_traffic(std::string_view markdown_text) {
  const std::vector<std::string_view> lines = markdown::lines_of(markdown_text);  // numbered from 1

  // line 1: the section's heading.
  std::size_t first = 0;
  while (first < lines.size() && !trim(lines[first]).starts_with(section)) ++first;
  if (first == lines.size()) return std::nullopt;
  MeasuredTraffic measured;
  measured.heading = std::string(trim(lines[first]).substr(3));

  // lines 2-4: its rows, up to the next heading.
  constexpr double missing = std::numeric_limits<double>::quiet_NaN();
  for (std::size_t n = first + 1; n < lines.size() && !trim(lines[n]).starts_with("#"); ++n) {
    const std::string_view line = trim(lines[n]);
    if (!line.starts_with("|")) continue;
    const std::vector<std::string_view> cells = cells_of(line);
    if (cells.size() != 6) bad_row(n + 1, line, fmt::format("{} cells instead of 6", cells.size()));
    if (cells[0] == "kernel" || cells[0].starts_with("---")) continue;  // the head and its rule
    const auto seq_len = number<std::int64_t>(cells[1]);
    const auto head_dim = number<std::int64_t>(cells[2]);
    const auto measured_mb = number<double>(cells[4]);
    if (!seq_len || !head_dim || !measured_mb || *seq_len < 1 || *head_dim < 1 || *measured_mb < 0) {
      bad_row(n + 1, line, "seq_len, head_dim or DRAM MB is not a number of the right sign");
    }
    if (cells[3] != "no") continue;  // line 3: causal rows have no model to compare with
    const double model_mb = number<double>(cells[5]).value_or(missing);
    const bool naive = cells[0].starts_with("naive");
    if (!naive && !cells[0].starts_with("flash")) {
      bad_row(n + 1, line, "a kernel that is neither \"naive ...\" nor \"flash-attention-2 ...\"");
    }
    // line 4: one entry per size, filled by its two rows.
    MeasuredSize* size = nullptr;
    for (MeasuredSize& s : measured.sizes) {
      if (s.seq_len == *seq_len && s.head_dim == *head_dim) size = &s;
    }
    if (size == nullptr) {
      size = &measured.sizes.emplace_back(MeasuredSize{*seq_len, *head_dim, -1.0, missing, -1.0, missing});
    }
    double& slot = naive ? size->naive_measured_mb : size->flash_measured_mb;
    if (slot >= 0) bad_row(n + 1, line, "a second row for the same kernel and size");
    slot = *measured_mb;
    (naive ? size->naive_model_mb : size->flash_model_mb) = model_mb;
  }

  if (measured.sizes.empty()) {
    throw std::invalid_argument(
        fmt::format("docs/benchmarks.md, line {}: the section \"{}\" has no row with causal \"no\"; expected "
                    "at least one naive and one flash-attention-2 row, as scripts/ncu_table.py prints them",
                    first + 1, measured.heading));
  }
  for (const MeasuredSize& s : measured.sizes) {
    if (s.naive_measured_mb < 0 || s.flash_measured_mb < 0) {
      throw std::invalid_argument(
          fmt::format("docs/benchmarks.md: the section \"{}\" has a {} row for seq_len {}, head_dim {} but no {} "
                      "row; expected both kernels for every size",
                      measured.heading, s.naive_measured_mb < 0 ? "flash-attention-2" : "naive", s.seq_len, s.head_dim,
                      s.naive_measured_mb < 0 ? "naive" : "flash-attention-2"));
    }
  }
  return measured;
}

}  // namespace figures
