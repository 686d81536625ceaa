#include "chapters/05_flash_attention_2/flash_attention_2.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/memory.h"
#include "common/simt/profiled_copy.h"

namespace ch05 {

namespace {

// The CPU copy of the kernels: the profiled one while simt's profile records or its race checker is
// on (--profile, --racecheck; common/simt/profiled_copy.h), the ordinary one otherwise.
DeviceRun run_on_cpu(std::span<const float> Q, std::span<const float> K, std::span<const float> V,
                     const DeviceProblem& problem) {
#if SIMT_PROFILED_KERNELS
  if (simt::use_profiled_copy()) return cpu_profiled::run_flash_attention_2(Q, K, V, problem);
#endif
  return cpu::run_flash_attention_2(Q, K, V, problem);
}

std::string tile_list() {
  std::vector<std::string> names;
  for (const TileShape& t : kTileShapes) names.push_back(fmt::format("{}x{}", t.Br, t.Bc));
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

DeviceProblem check_problem(const fa::AttentionShape& shape, const Options& options) {
  if (std::find(kHeadDims.begin(), kHeadDims.end(), shape.head_dim) == kHeadDims.end()) {
    throw std::invalid_argument(
        fmt::format("flash_attention_2: head_dim {} is not supported; the kernel is compiled for head_dim {}",
                    shape.head_dim, fmt::join(kHeadDims, ", ")));
  }
  if (std::find(kTileShapes.begin(), kTileShapes.end(), options.tile) == kTileShapes.end()) {
    throw std::invalid_argument(fmt::format("flash_attention_2: tile Br x Bc = {}x{} is not compiled; choose one of {}",
                                            options.tile.Br, options.tile.Bc, tile_list()));
  }
  return {fa::device_problem("flash_attention_2", shape, options.scale, options.causal), options.tile};
}

std::uint64_t memory_needed(const fa::AttentionShape& s) {
  using fa::saturating_add, fa::saturating_mul;
  const std::uint64_t heads = saturating_mul(s.batch, s.heads);
  const std::uint64_t q = saturating_mul(heads, saturating_mul(s.seq_len_q, s.head_dim));
  const std::uint64_t k = saturating_mul(heads, saturating_mul(s.seq_len_k, s.head_dim));
  const std::uint64_t L = saturating_mul(heads, s.seq_len_q);
  // On the device: Q, K, V, O, L; copied back: O, L.
  const std::uint64_t floats =
      saturating_add(saturating_add(saturating_mul(3, q), saturating_mul(2, k)), saturating_mul(2, L));
  return saturating_mul(sizeof(float), floats);
}

Result flash_attention_2(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                         const Options& options, fa::Device device) {
  const fa::AttentionShape shape = fa::check_attention_shapes(Q.shape, K.shape, V.shape);
  const DeviceProblem problem = check_problem(shape, options);
  DeviceRun run = fa::run_on(
      device, [&] { return run_on_cpu(Q.values, K.values, V.values, problem); },
      [&] { return gpu::run_flash_attention_2(Q.values, K.values, V.values, problem); });
  return {fa::Tensor4<float>(Q.shape, std::move(run.O)), std::move(run.L), run.elapsed_ms};
}

}  // namespace ch05
