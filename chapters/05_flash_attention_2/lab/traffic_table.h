// Chapter 05: the HBM traffic table that `ch05_flash_attention_2 --traffic` prints.
//
// What this adds to traffic_model.h: the traffic table, one row per problem size:
//   standard attention    standard_attention_bytes (closed form, any N)
//   FA2, no L2 reuse      walk_fa2(...).moved      (the tile walk: exact for any N)
//   floor                 walk_fa2(...).once       (equals floor_bytes, 4eNd)
// each in MB (10^6 bytes) to 3 significant figures, trailing zeros dropped, as the book
//      prints them: 136 MB, 34.6 MB, 2.1 MB.
//
// Source: the traffic table, "one head, forward pass (model, BF16, blocks of 128)", whose figures this
// code computes (docs/05-flash-attention-2.md).
// Run the demo: build/default/bin/ch05_flash_attention_2 --traffic
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "chapters/05_flash_attention_2/lab/traffic_model.h"

namespace ch05 {

// The three sizes of the traffic table: BF16 (2 bytes), blocks of 128.
inline std::vector<TrafficCase> traffic_table_cases() {
  return {TrafficCase{4096, 64, 128, 128, 2, 4}, TrafficCase{4096, 128, 128, 128, 2, 4},
          TrafficCase{8192, 128, 128, 128, 2, 4}};
}

// bytes as megabytes (10^6 bytes) to 3 significant figures, trailing zeros and point dropped:
// 136314880 -> "136", 34603008 -> "34.6", 2097152 -> "2.1", 2164260864 -> "2160", 0 -> "0".
inline std::string format_megabytes(std::uint64_t bytes) {
  if (bytes == 0) return "0";
  double mb = static_cast<double>(bytes) / 1e6;
  const int exponent = static_cast<int>(std::floor(std::log10(mb)));  // mb = x.yz * 10^exponent
  if (exponent > 2) {  // 2164.26 -> 2160: round away the digits after the third
    const double unit = std::pow(10.0, exponent - 2);
    mb = std::round(mb / unit) * unit;
  }
  const int decimals = exponent >= 2 ? 0 : 2 - exponent;  // the third significant figure's place
  std::string s = fmt::format("{:.{}f}", mb, decimals);
  if (s.find('.') != std::string::npos) {
    s.erase(s.find_last_not_of('0') + 1);  // 2.10 -> 2.1, as the traffic table prints it
    if (s.back() == '.') s.pop_back();     // 10.0 -> 10
  }
  return s;
}

// One row of the table, in bytes.
struct TrafficRow {
  TrafficCase c;
  std::uint64_t standard = 0;  // standard attention
  std::uint64_t fa2 = 0;       // FA2, no L2 reuse
  std::uint64_t floor = 0;     // every value once
};

// Computes the three columns for one case. Throws std::invalid_argument as walk_fa2.
inline TrafficRow traffic_row(const TrafficCase& c) {
  const Traffic t = walk_fa2(c);
  return TrafficRow{c, standard_attention_bytes(c), t.moved.total(), t.once.total()};
}

// The table for the given cases, one line each, with a title and column heads; ends in '\n'.
// Throws std::invalid_argument (naming the bad field) as walk_fa2, for the first bad case.
inline std::string format_traffic_table(std::span<const TrafficCase> cases) {
  std::string out = "HBM traffic of one head's forward pass (model; MB = 10^6 bytes)\n\n";
  out += fmt::format("  {:>18}  {:>5}  {:>11}  {:>18}  {:>16}  {:>24}\n", "seq_len x head_dim", "bytes", "Br x Bc",
                     "standard attention", "FA2, no L2 reuse", "every value once (floor)");
  for (const TrafficCase& c : cases) {
    const TrafficRow r = traffic_row(c);
    out +=
        fmt::format("  {:>18}  {:>5}  {:>11}  {:>18}  {:>16}  {:>24}\n", fmt::format("{} x {}", c.seq_len, c.head_dim),
                    c.bytes, fmt::format("{} x {}", c.Br, c.Bc), format_megabytes(r.standard) + " MB",
                    format_megabytes(r.fa2) + " MB", format_megabytes(r.floor) + " MB");
  }
  return out;
}

}  // namespace ch05
