// figures/measured_traffic.h: the measured DRAM bytes that figure 3 shows beside the model.
//
// scripts/gpu_check.sh, run on a machine with an NVIDIA GPU and Nsight Compute, writes
// docs/benchmarks.md with a section
//
//   ## Measured DRAM traffic (Nsight Compute) beside the traffic model, N = 4096, batch 4, heads 16
//
//   | kernel | seq_len | head_dim | causal | DRAM MB (ncu) | model MB |
//   |---|---|---|---|---|---|
//   | naive (ch04: scores + softmax + pv) | 4096 | 64 | no | 17480 | 1.745e+04 |
//   | flash-attention-2 (ch05) | 4096 | 64 | no | 611.2 | 8724 |
//   ...
//
// (the measured figures above are made up, to show the form). scripts/ncu_table.py prints the
// table; its "model MB" column is chapter 05's traffic model as ch05_gpu_bench computes it for
// the measured configuration. read_measured_traffic():
//   1. finds the line that starts with "## Measured DRAM traffic (Nsight Compute)"; none: nullopt
//   2. reads the table rows under it, up to the next "#" heading
//   3. keeps the rows with causal "no" (the model counts every tile, so only those compare)
//   4. pairs the naive and the flash-attention-2 row of each (seq_len, head_dim), in file order
// Source: scripts/gpu_check.sh (step 7) and scripts/ncu_table.py.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace figures {

// One size, both kernels: megabytes (10^6 bytes) for the whole call (every batch and head).
// A model cell that is not a number ("-", "?") is NaN.
struct MeasuredSize {
  std::int64_t seq_len = 0;
  std::int64_t head_dim = 0;
  double naive_measured_mb = 0;  // chapter 04's three kernels, summed
  double naive_model_mb = 0;     // standard attention, the model
  double flash_measured_mb = 0;  // chapter 05's kernel
  double flash_model_mb = 0;     // FlashAttention-2 without L2 reuse, the model
};

struct MeasuredTraffic {
  std::string heading;              // the section's heading, without "## "
  std::vector<MeasuredSize> sizes;  // in the file's order
};

// Reads the measured table from the text of docs/benchmarks.md (lines 1-4 above). Returns nullopt
// when the text has no such section. Throws std::invalid_argument, naming the line and what was
// expected, when the section is there but a row cannot be read, a size lacks its naive or its
// flash-attention-2 row, or no non-causal row is left.
std::optional<MeasuredTraffic> read_measured_traffic(std::string_view markdown);

}  // namespace figures
