#include "chapters/04_naive_attention/naive_attention.h"

#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "chapters/04_naive_attention/backends.h"
#include "common/memory.h"
#include "common/simt/profiled_copy.h"

namespace ch04 {

namespace {

// The CPU copy of the kernels: the profiled one while simt's profile records or its race checker is
// on (--profile, --racecheck; common/simt/profiled_copy.h), the ordinary one otherwise.
DeviceRun run_on_cpu(std::span<const float> Q, std::span<const float> K, std::span<const float> V,
                     const DeviceProblem& problem) {
#if SIMT_PROFILED_KERNELS
  if (simt::use_profiled_copy()) return cpu_profiled::run_naive_attention(Q, K, V, problem);
#endif
  return cpu::run_naive_attention(Q, K, V, problem);
}

}  // namespace

fa::DeviceProblem check_problem(const fa::AttentionShape& shape, const Options& options) {
  const fa::DeviceProblem problem = fa::device_problem("naive_attention", shape, options.scale, options.causal);
  if (shape.seq_len_q > 65535u * 16u) {
    throw std::invalid_argument(
        fmt::format("naive_attention: seq_len_q = {} needs more than the 65535 blocks of 16 rows the kernels' grid "
                    "allows in y (at most 1048560 query rows)",
                    shape.seq_len_q));
  }
  if (std::uint64_t{shape.seq_len_q} * shape.seq_len_k > std::numeric_limits<int>::max()) {
    throw std::invalid_argument(
        fmt::format("naive_attention: one head's S holds {} x {} scores, more than the 2^31 - 1 of the kernels' int "
                    "indexing",
                    shape.seq_len_q, shape.seq_len_k));
  }
  return problem;
}

std::uint64_t memory_needed(const fa::AttentionShape& s) {
  using fa::saturating_add, fa::saturating_mul;
  const std::uint64_t heads = saturating_mul(s.batch, s.heads);
  const std::uint64_t q = saturating_mul(heads, saturating_mul(s.seq_len_q, s.head_dim));
  const std::uint64_t k = saturating_mul(heads, saturating_mul(s.seq_len_k, s.head_dim));
  const std::uint64_t scores = saturating_mul(heads, saturating_mul(s.seq_len_q, s.seq_len_k));
  // On the device: Q, K, V, O, S, P; copied back: O, S, P.
  const std::uint64_t floats = saturating_add(saturating_add(saturating_mul(2, q), saturating_mul(2, k)),
                                              saturating_add(saturating_mul(4, scores), q));
  return saturating_mul(sizeof(float), floats);
}

Result naive_attention(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                       const Options& options, fa::Device device) {
  const fa::AttentionShape shape = fa::check_attention_shapes(Q.shape, K.shape, V.shape);
  const DeviceProblem problem = check_problem(shape, options);
  DeviceRun run = fa::run_on(
      device, [&] { return run_on_cpu(Q.values, K.values, V.values, problem); },
      [&] { return gpu::run_naive_attention(Q.values, K.values, V.values, problem); });
  return {fa::Tensor4<float>(Q.shape, std::move(run.O)), std::move(run.S), std::move(run.P), run.elapsed_ms};
}

}  // namespace ch04
