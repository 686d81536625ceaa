#include "chapters/06_tensor_cores/tensor_cores.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/attention_shapes.h"
#include "common/simt/profiled_copy.h"
#include "common/simt/simt.h"

namespace ch06 {

namespace {

// The element's 16 bits, rounded from x (round to nearest even: simt's conversion, which is
// CUDA's __float2bfloat16_rn / __float2half_rn).
std::uint16_t element_bits(float x, ElementType element) {
  return element == ElementType::bf16 ? std::bit_cast<std::uint16_t>(simt::bf16(x))
                                      : std::bit_cast<std::uint16_t>(simt::f16(x));
}

float element_value(std::uint16_t bits, ElementType element) {
  return element == ElementType::bf16 ? static_cast<float>(std::bit_cast<simt::bf16>(bits))
                                      : static_cast<float>(std::bit_cast<simt::f16>(bits));
}

// The CPU copy of the kernel: the profiled one while simt's profile records or its race checker is
// on (--profile, --racecheck; common/simt/profiled_copy.h), the ordinary one otherwise.
DeviceRun run_on_cpu(std::span<const std::uint16_t> Q, std::span<const std::uint16_t> K,
                     std::span<const std::uint16_t> V, const DeviceProblem& problem) {
#if SIMT_PROFILED_KERNELS
  if (simt::use_profiled_copy()) return cpu_profiled::run_tensor_cores(Q, K, V, problem);
#endif
  return cpu::run_tensor_cores(Q, K, V, problem);
}

}  // namespace

std::vector<std::uint16_t> to_element_bits(const fa::Tensor4<float>& x, ElementType element, std::string_view name) {
  std::vector<std::uint16_t> bits(x.values.size());
  for (std::size_t k = 0; k < bits.size(); ++k) {
    bits[k] = element_bits(x.values[k], element);
    if (std::isfinite(x.values[k]) && std::isinf(element_value(bits[k], element))) {
      throw std::invalid_argument(
          fmt::format("{}[{}] = {} does not fit in {}: its largest finite value is {} (scale the inputs, or use bf16)",
                      name, k, x.values[k], to_string(element), element == ElementType::f16 ? "65504" : "3.39e38"));
    }
  }
  return bits;
}

ElementType parse_element_type(std::string_view name) {
  for (ElementType e : kElementTypes) {
    if (name == to_string(e)) return e;
  }
  throw std::invalid_argument(fmt::format("element type '{}' is not supported; choose bf16 or fp16", name));
}

std::string tile_name(TileShape tile) { return fmt::format("{}x{}", tile.Br, tile.Bc); }

std::string tile_list() {
  std::vector<std::string> names;
  for (const TileShape& t : kTileShapes) names.push_back(tile_name(t));
  return fmt::format("{}", fmt::join(names, ", "));
}

fa::Tensor4<float> round_to(const fa::Tensor4<float>& x, ElementType element, std::string_view name) {
  const std::vector<std::uint16_t> bits = to_element_bits(x, element, name);
  fa::Tensor4<float> out(x.shape);
  for (std::size_t k = 0; k < bits.size(); ++k) out.values[k] = element_value(bits[k], element);
  return out;
}

DeviceProblem check_problem(const fa::AttentionShape& shape, const Options& options) {
  if (std::find(kHeadDims.begin(), kHeadDims.end(), static_cast<int>(shape.head_dim)) == kHeadDims.end()) {
    throw std::invalid_argument(
        fmt::format("tensor_core_attention: head_dim {} is not supported; the kernel is compiled for head_dim {}",
                    shape.head_dim, fmt::join(kHeadDims, ", ")));
  }
  if (std::find(kTileShapes.begin(), kTileShapes.end(), options.tile) == kTileShapes.end()) {
    throw std::invalid_argument(
        fmt::format("tensor_core_attention: tile Br x Bc = {} is not compiled; choose one of {}",
                    tile_name(options.tile), tile_list()));
  }
  return {fa::device_problem("tensor_core_attention", shape, options.scale, options.causal), options.tile,
          options.element};
}

Result tensor_core_attention(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                             const Options& options, fa::Device device) {
  const DeviceProblem problem = check_problem(fa::check_attention_shapes(Q.shape, K.shape, V.shape), options);
  const std::vector<std::uint16_t> q = to_element_bits(Q, options.element, "Q");
  const std::vector<std::uint16_t> k = to_element_bits(K, options.element, "K");
  const std::vector<std::uint16_t> v = to_element_bits(V, options.element, "V");
  DeviceRun run = fa::run_on(
      device, [&] { return run_on_cpu(q, k, v, problem); }, [&] { return gpu::run_tensor_cores(q, k, v, problem); });
  fa::Tensor4<float> O(Q.shape);
  for (std::size_t n = 0; n < O.values.size(); ++n) O.values[n] = element_value(run.O[n], options.element);
  return {std::move(O), std::move(run.L), run.elapsed_ms};
}

}  // namespace ch06
