#include "chapters/07_backward/backward.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/attention_shapes.h"
#include "common/simt/profiled_copy.h"

namespace ch07 {

namespace {

// The CPU copy of the kernels: the profiled one while simt's profile records or its race checker is
// on (--profile, --racecheck; common/simt/profiled_copy.h), the ordinary one otherwise.
BackwardRun run_on_cpu(std::span<const float> Q, std::span<const float> K, std::span<const float> V,
                       std::span<const float> O, std::span<const float> L, std::span<const float> dO,
                       const DeviceProblem& problem) {
#if SIMT_PROFILED_KERNELS
  if (simt::use_profiled_copy()) return cpu_profiled::run_backward(Q, K, V, O, L, dO, problem);
#endif
  return cpu::run_backward(Q, K, V, O, L, dO, problem);
}

}  // namespace

void check_head_dim(std::size_t head_dim) {
  if (std::find(kHeadDims.begin(), kHeadDims.end(), static_cast<int>(head_dim)) == kHeadDims.end()) {
    throw std::invalid_argument(
        fmt::format("attention backward: head_dim {} is not supported; the kernels are compiled for head_dim {}",
                    head_dim, fmt::join(kHeadDims, ", ")));
  }
}

Gradients flash_attention_2_backward(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K,
                                     const fa::Tensor4<float>& V, const fa::Tensor4<float>& O, std::span<const float> L,
                                     const fa::Tensor4<float>& dO, const Options& options, fa::Device device) {
  const fa::AttentionShape shape = fa::check_attention_shapes(Q.shape, K.shape, V.shape);
  check_head_dim(shape.head_dim);
  if (O.shape != Q.shape || dO.shape != Q.shape) {
    throw std::invalid_argument(fmt::format("attention backward: O {} and dO {} must have Q's shape {}", O.shape.str(),
                                            dO.shape.str(), Q.shape.str()));
  }
  const std::size_t rows = shape.batch * shape.heads * shape.seq_len_q;
  if (L.size() != rows || Q.values.size() != Q.shape.size() || K.values.size() != K.shape.size() ||
      V.values.size() != V.shape.size() || O.values.size() != O.shape.size() || dO.values.size() != dO.shape.size()) {
    throw std::invalid_argument(
        fmt::format("attention backward: L has {} values, expected one per query row, batch * heads * seq_len_q = {} "
                    "(or a tensor's values do not fill its shape)",
                    L.size(), rows));
  }
  const DeviceProblem problem{fa::device_problem("attention backward", shape, options.scale, options.causal),
                              options.dq == DqMethod::deterministic};
  BackwardRun run = fa::run_on(
      device, [&] { return run_on_cpu(Q.values, K.values, V.values, O.values, L, dO.values, problem); },
      [&] { return gpu::run_backward(Q.values, K.values, V.values, O.values, L, dO.values, problem); });
  return {fa::Tensor4<float>(Q.shape, std::move(run.dQ)), fa::Tensor4<float>(K.shape, std::move(run.dK)),
          fa::Tensor4<float>(V.shape, std::move(run.dV)), std::move(run.D), run.elapsed_ms};
}

}  // namespace ch07
