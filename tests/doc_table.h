// A row of a docs table, for the tests that keep a figure the docs quote true to the code (a kernel's
// bytes of shared memory in docs/workshop.md's table of what a T4 runs, for instance).
#pragma once

#include <cstddef>
#include <fstream>
#include <initializer_list>
#include <string>
#include <string_view>

#include "catch.h"
#include "common/kernel_problem.h"

namespace fa_test {

// The first line of `doc` (a path under the repository root, FA_SOURCE_DIR) that starts with
// `start`, e.g. "| 05 |"; empty when the file cannot be read or has no such line.
inline std::string doc_line(std::string_view source_dir, std::string_view doc, std::string_view start) {
  std::ifstream in(std::string(source_dir) + "/" + std::string(doc));
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with(start)) return line;
  }
  return {};
}

// n with a comma between groups of three digits, as the docs write bytes: 66560 -> "66,560".
inline std::string with_commas(std::size_t n) {
  std::string digits = std::to_string(n);
  for (std::size_t at = digits.size(); at > 3; at -= 3) digits.insert(at - 3, ",");
  return digits;
}

// A tile and the bytes of shared memory per block its kernel needs (the chapter's shared_bytes).
struct QuotedBytes {
  fa::Tile tile;
  std::size_t bytes = 0;
};

#ifdef FA_SOURCE_DIR
// Checks that the row of `chapter` ("05") in docs/workshop.md's table of what a T4 runs quotes each
// of `quotes` as the kernel counts it, "<tile> (<bytes> bytes)": "64x32 (41,728 bytes)".
inline void check_t4_row(const std::string& chapter, std::initializer_list<QuotedBytes> quotes) {
  const std::string row = doc_line(FA_SOURCE_DIR, "docs/workshop.md", "| " + chapter + " |");
  INFO(row);
  REQUIRE(!row.empty());
  for (const QuotedBytes& q : quotes) {
    const std::string quoted = fa::tile_name(q.tile) + " (" + with_commas(q.bytes) + " bytes)";
    INFO(quoted);
    CHECK(row.find(quoted) != std::string::npos);
  }
}
#endif

}  // namespace fa_test
