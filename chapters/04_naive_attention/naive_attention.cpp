#include "chapters/04_naive_attention/naive_attention.h"

#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "chapters/04_naive_attention/backends.h"
#include "common/attention_shapes.h"
#include "common/simt/profile.h"

namespace ch04 {

namespace {

// The CPU copy of the kernels: the profiled one while simt's profile records (--profile; see
// common/simt/profile.h), the ordinary one otherwise.
DeviceRun run_on_cpu(std::span<const float> Q, std::span<const float> K, std::span<const float> V,
                     const DeviceProblem& problem) {
#if SIMT_PROFILED_KERNELS
  if (simt::profile::recording()) return cpu_profiled::run_naive_attention(Q, K, V, problem);
#endif
  return cpu::run_naive_attention(Q, K, V, problem);
}

}  // namespace

Result naive_attention(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K,
                       const fa::Tensor4<float>& V, const Options& options, fa::Device device) {
  const fa::AttentionShape shape = fa::check_attention_shapes(Q.shape, K.shape, V.shape);
  const double scale = options.scale.value_or(fa::default_scale(shape.head_dim));
  if (!std::isfinite(scale)) {
    throw std::invalid_argument(fmt::format("naive_attention: scale must be a finite number, got {}", scale));
  }
  const std::size_t int_max = std::numeric_limits<int>::max();
  if (shape.batch * shape.heads > 65535) {
    throw std::invalid_argument(fmt::format(
        "naive_attention: batch * heads = {} is more than the 65535 the kernels' grid allows",
        shape.batch * shape.heads));
  }
  if (shape.seq_len_q > 65535u * 16u) {
    throw std::invalid_argument(fmt::format(
        "naive_attention: seq_len_q = {} needs more than the 65535 blocks of 16 rows the kernels' "
        "grid allows in y (at most 1048560 query rows)", shape.seq_len_q));
  }
  if (shape.seq_len_q * shape.seq_len_k > int_max || shape.seq_len_k * shape.head_dim > int_max ||
      shape.seq_len_q * shape.head_dim > int_max) {
    throw std::invalid_argument("naive_attention: one head's S or Q/K/V has more than 2^31 - 1 values, "
                                "more than the kernels' int indexing supports");
  }
  fa::require_device(device);

  const DeviceProblem problem{static_cast<int>(shape.batch * shape.heads),
                              static_cast<int>(shape.seq_len_q), static_cast<int>(shape.seq_len_k),
                              static_cast<int>(shape.head_dim), static_cast<float>(scale),
                              options.causal};
#if FA_HAVE_CUDA
  DeviceRun run = device == fa::Device::gpu
                      ? gpu::run_naive_attention(Q.values, K.values, V.values, problem)
                      : run_on_cpu(Q.values, K.values, V.values, problem);
#else
  DeviceRun run = run_on_cpu(Q.values, K.values, V.values, problem);  // gpu refused above
#endif
  return {fa::Tensor4<float>(Q.shape, std::move(run.O)), std::move(run.S), std::move(run.P),
          run.elapsed_ms};
}

}  // namespace ch04
