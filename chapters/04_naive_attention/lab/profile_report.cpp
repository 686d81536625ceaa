#include "chapters/04_naive_attention/lab/profile_report.h"

#include <fmt/format.h>

namespace ch04 {

std::string format_profile_beside_model(const std::vector<simt::profile::KernelProfile>& kernels,
                                        std::uint64_t batch_heads, std::uint64_t seq_len_q, std::uint64_t seq_len_k,
                                        std::uint64_t head_dim) {
  const auto* scores = simt::profile::find_kernel(kernels, "scores_kernel");
  const auto* softmax = simt::profile::find_kernel(kernels, "softmax_kernel");
  const auto* pv = simt::profile::find_kernel(kernels, "pv_kernel");
  if (scores == nullptr || softmax == nullptr || pv == nullptr) return "";
  const std::uint64_t pass = 4 * batch_heads * seq_len_q * seq_len_k;   // one pass over S or P, float32
  const std::uint64_t v_once = 4 * batch_heads * seq_len_k * head_dim;  // V read once, as the model has it
  struct Row {
    const char* what;
    const simt::profile::GlobalCounts& measured;
    std::uint64_t model;
  };
  const Row rows[] = {{"S written (scores_kernel stores)", scores->global_store, pass},
                      {"S read (softmax_kernel loads)", softmax->global_load, pass},
                      {"P written (softmax_kernel stores)", softmax->global_store, pass},
                      {"P and V read (pv_kernel loads)", pv->global_load, pass + v_once}};
  std::string out = fmt::format(
      "\nS and P in global memory, measured by simt's profile beside the standard-attention model's 4 N^2 term\n"
      "(float32, {} head{}, N^2 = {} x {}):\n"
      "  {:<36} {:>16} {:>14} {:>12}\n",
      batch_heads, batch_heads == 1 ? "" : "s", seq_len_q, seq_len_k, "", "requested bytes", "sectors x 32",
      "model bytes");
  std::uint64_t measured_total = 0, sectors_total = 0;
  for (const Row& r : rows) {
    out += fmt::format("  {:<36} {:>16} {:>14} {:>12}\n", r.what, r.measured.bytes, 32 * r.measured.sectors, r.model);
    measured_total += r.measured.bytes;
    sectors_total += 32 * r.measured.sectors;
  }
  out += fmt::format("  {:<36} {:>16} {:>14} {:>12}\n", "in all (the model: 4 N^2 e + N d e)", measured_total,
                     sectors_total, 4 * pass + v_once);
  out +=
      "  The model counts each pass once; the kernels request each row of S three times (max, sum, P)\n"
      "  and each row of P and each column of V once per output column or row: on a GPU the L1 and L2\n"
      "  caches serve those repeats, and the sectors show what each instruction needed.\n";
  return out;
}

}  // namespace ch04
