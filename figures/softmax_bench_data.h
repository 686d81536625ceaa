// figures/softmax_bench_data.h: the measured times of chapter 02's benchmark that figure 5
// (softmax-bench.svg) draws, read from docs/benchmarks-cpu.md.
//
// scripts/softmax_bench_table.py turns a run of ch02_softmax_bench (Google Benchmark's JSON) and
// the machine's caches (lscpu -C -B) into the section
//
//   ## Safe against online softmax (ch02_softmax_bench)
//
//   Machine: <CPU, from lscpu>; <how it was run>
//
//   | cache | bytes per core |
//   |---|---|
//   | L1d | 32768 |
//   ...
//
//   | n | safe us | online us | safe / online | safe us, streaming | online us, streaming | safe / online, streaming |
//   max pass us |
//   |---|---|---|---|---|---|---|---|
//   | 1000 | 1.55 | 1.52 | 1.02 | 1.63 | 1.65 | 0.99 | 0.03 |
//   ...
//
// read_softmax_bench():
//   1. finds the line that starts with "## Safe against online softmax"; none: nullopt
//   2. keeps the line that starts with "Machine:" (without the word)
//   3. reads the cache table (2 cells a row) and the times table (8 cells a row), up to the next
//      "#" heading
//   4. checks each printed ratio against the times it comes from (to the 2 decimals it is printed
//      with), so the table cannot say one thing and its times another
// Source: scripts/softmax_bench_table.py; chapters/02_online_softmax/lab/softmax_bench.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace figures {

struct CacheLevel {
  std::string name;         // "L1d", "L2", "L3"
  std::uint64_t bytes = 0;  // per core (lscpu's ONE-SIZE)
};

// One size: median times per row in microseconds.
struct SoftmaxBenchRow {
  std::int64_t n = 0;              // scores per row
  double safe_us = 0;              // BM_safe_three_pass/n/0
  double online_us = 0;            // BM_online_two_pass/n/0
  double safe_streaming_us = 0;    // BM_safe_three_pass/n/1
  double online_streaming_us = 0;  // BM_online_two_pass/n/1
  double max_pass_us = 0;          // BM_max_pass/n
  double ratio() const { return safe_us / online_us; }
  double streaming_ratio() const { return safe_streaming_us / online_streaming_us; }
};

struct SoftmaxBench {
  std::string machine;                // the "Machine:" line, without the word
  std::vector<CacheLevel> caches;     // in the file's order
  std::vector<SoftmaxBenchRow> rows;  // in the file's order, n increasing
};

// Reads the section of docs/benchmarks-cpu.md (lines 1-4 above). Returns nullopt when the text
// has no such section. Throws std::invalid_argument, naming the line and what was expected, when
// the section is there but a row cannot be read, a ratio disagrees with its times, the sizes do
// not increase, or either table is empty.
std::optional<SoftmaxBench> read_softmax_bench(std::string_view markdown);

}  // namespace figures
