// figures/markdown_table.h: reading the Markdown tables of docs/benchmarks*.md, for the figures
// that draw measurements (measured_traffic.cpp, softmax_bench_data.cpp).
//
//   lines_of(text)  the lines, without their '\n' (line k of a message is lines[k - 1])
//   trim(s)         s without leading and trailing blanks (and a '\r')
//   cells_of(row)   the cells of "| a | b |", trimmed
//   number<T>(cell) the whole cell as a T, or nullopt when it is not one (std::from_chars)
#pragma once

#include <algorithm>
#include <charconv>
#include <optional>
#include <string_view>
#include <system_error>
#include <vector>

namespace figures::markdown {

inline std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> lines;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    lines.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return lines;
}

inline std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

inline std::vector<std::string_view> cells_of(std::string_view row) {
  row = trim(row);
  if (!row.empty() && row.front() == '|') row.remove_prefix(1);
  if (!row.empty() && row.back() == '|') row.remove_suffix(1);
  std::vector<std::string_view> cells;
  for (std::size_t at = 0;;) {
    const std::size_t bar = row.find('|', at);
    cells.push_back(trim(row.substr(at, bar == std::string_view::npos ? row.npos : bar - at)));
    if (bar == std::string_view::npos) return cells;
    at = bar + 1;
  }
}

template <class T>
std::optional<T> number(std::string_view cell) {
  T value{};
  const auto [end, error] = std::from_chars(cell.data(), cell.data() + cell.size(), value);
  if (error != std::errc{} || end != cell.data() + cell.size()) return std::nullopt;
  return value;
}

}  // namespace figures::markdown
