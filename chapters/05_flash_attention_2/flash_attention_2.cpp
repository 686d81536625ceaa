#include "chapters/05_flash_attention_2/flash_attention_2.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/attention_shapes.h"
#include "common/simt/profile.h"

namespace ch05 {

namespace {

// The CPU copy of the kernels: the profiled one while simt's profile records (--profile; see
// common/simt/profile.h), the ordinary one otherwise.
DeviceRun run_on_cpu(std::span<const float> Q, std::span<const float> K, std::span<const float> V,
                     const DeviceProblem& problem) {
#if SIMT_PROFILED_KERNELS
  if (simt::profile::recording()) return cpu_profiled::run_flash_attention_2(Q, K, V, problem);
#endif
  return cpu::run_flash_attention_2(Q, K, V, problem);
}

std::string tile_list() {
  std::vector<std::string> names;
  for (const TileShape& t : kTileShapes) names.push_back(fmt::format("{}x{}", t.Br, t.Bc));
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

Result flash_attention_2(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K,
                         const fa::Tensor4<float>& V, const Options& options, fa::Device device) {
  const fa::AttentionShape shape = fa::check_attention_shapes(Q.shape, K.shape, V.shape);
  if (std::find(kHeadDims.begin(), kHeadDims.end(), static_cast<int>(shape.head_dim)) == kHeadDims.end()) {
    throw std::invalid_argument(fmt::format(
        "flash_attention_2: head_dim {} is not supported; the kernel is compiled for head_dim {}",
        shape.head_dim, fmt::join(kHeadDims, ", ")));
  }
  if (std::find(kTileShapes.begin(), kTileShapes.end(), options.tile) == kTileShapes.end()) {
    throw std::invalid_argument(fmt::format(
        "flash_attention_2: tile Br x Bc = {}x{} is not compiled; choose one of {}", options.tile.Br,
        options.tile.Bc, tile_list()));
  }
  const double scale = options.scale.value_or(fa::default_scale(shape.head_dim));
  if (!std::isfinite(scale)) {
    throw std::invalid_argument(fmt::format("flash_attention_2: scale must be a finite number, got {}", scale));
  }
  if (shape.batch * shape.heads > 65535) {
    throw std::invalid_argument(fmt::format(
        "flash_attention_2: batch * heads = {} is more than the 65535 the kernel's grid allows",
        shape.batch * shape.heads));
  }
  const std::size_t int_max = std::numeric_limits<int>::max();
  if (std::max(shape.seq_len_q, shape.seq_len_k) * shape.head_dim > int_max) {
    throw std::invalid_argument("flash_attention_2: one head's Q, K or V has more than 2^31 - 1 values, "
                                "more than the kernel's int indexing supports");
  }
  fa::require_device(device);

  const DeviceProblem problem{static_cast<int>(shape.batch * shape.heads),
                              static_cast<int>(shape.seq_len_q),
                              static_cast<int>(shape.seq_len_k),
                              static_cast<int>(shape.head_dim),
                              static_cast<float>(scale),
                              options.causal,
                              options.tile};
#if FA_HAVE_CUDA
  DeviceRun run = device == fa::Device::gpu
                      ? gpu::run_flash_attention_2(Q.values, K.values, V.values, problem)
                      : run_on_cpu(Q.values, K.values, V.values, problem);
#else
  DeviceRun run = run_on_cpu(Q.values, K.values, V.values, problem);  // gpu refused above
#endif
  return {fa::Tensor4<float>(Q.shape, std::move(run.O)), std::move(run.L), run.elapsed_ms};
}

}  // namespace ch05
