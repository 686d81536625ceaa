#include "chapters/07_backward/backward.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/attention_shapes.h"

namespace ch07 {

void check_head_dim(std::size_t head_dim) {
  if (std::find(kHeadDims.begin(), kHeadDims.end(), static_cast<int>(head_dim)) == kHeadDims.end()) {
    throw std::invalid_argument(fmt::format(
        "attention backward: head_dim {} is not supported; the kernels are compiled for head_dim {}",
        head_dim, fmt::join(kHeadDims, ", ")));
  }
}

Gradients flash_attention_2_backward(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K,
                                     const fa::Tensor4<float>& V, const fa::Tensor4<float>& O,
                                     std::span<const float> L, const fa::Tensor4<float>& dO,
                                     const Options& options, fa::Device device) {
  const fa::AttentionShape shape = fa::check_attention_shapes(Q.shape, K.shape, V.shape);
  check_head_dim(shape.head_dim);
  if (O.shape != Q.shape || dO.shape != Q.shape) {
    throw std::invalid_argument(fmt::format("attention backward: O {} and dO {} must have Q's shape {}",
                                            O.shape.str(), dO.shape.str(), Q.shape.str()));
  }
  const std::size_t rows = shape.batch * shape.heads * shape.seq_len_q;
  if (L.size() != rows || Q.values.size() != Q.shape.size() || K.values.size() != K.shape.size() ||
      V.values.size() != V.shape.size() || O.values.size() != O.shape.size() ||
      dO.values.size() != dO.shape.size()) {
    throw std::invalid_argument(fmt::format(
        "attention backward: L has {} values, expected one per query row, batch * heads * seq_len_q = {} "
        "(or a tensor's values do not fill its shape)",
        L.size(), rows));
  }
  const double scale = options.scale.value_or(fa::default_scale(shape.head_dim));
  if (!std::isfinite(scale)) {
    throw std::invalid_argument(fmt::format("attention backward: scale must be a finite number, got {}", scale));
  }
  if (shape.batch * shape.heads > 65535) {
    throw std::invalid_argument(fmt::format(
        "attention backward: batch * heads = {} is more than the 65535 the kernels' grid allows",
        shape.batch * shape.heads));
  }
  const std::size_t int_max = std::numeric_limits<int>::max();
  if (std::max(shape.seq_len_q, shape.seq_len_k) * shape.head_dim > int_max) {
    throw std::invalid_argument("attention backward: one head's Q, K or V has more than 2^31 - 1 values, "
                                "more than the kernels' int indexing supports");
  }
  fa::require_device(device);

  const DeviceProblem problem{static_cast<int>(shape.batch * shape.heads),
                              static_cast<int>(shape.seq_len_q),
                              static_cast<int>(shape.seq_len_k),
                              static_cast<int>(shape.head_dim),
                              static_cast<float>(scale),
                              options.causal,
                              options.dq == DqMethod::deterministic};
#if FA_HAVE_CUDA
  DeviceRun run = device == fa::Device::gpu
                      ? gpu::run_backward(Q.values, K.values, V.values, O.values, L, dO.values, problem)
                      : cpu::run_backward(Q.values, K.values, V.values, O.values, L, dO.values, problem);
#else
  DeviceRun run = cpu::run_backward(Q.values, K.values, V.values, O.values, L, dO.values, problem);  // gpu refused above
#endif
  return {fa::Tensor4<float>(Q.shape, std::move(run.dQ)), fa::Tensor4<float>(K.shape, std::move(run.dK)),
          fa::Tensor4<float>(V.shape, std::move(run.dV)), std::move(run.D), run.elapsed_ms};
}

}  // namespace ch07
