#include "chapters/06_tensor_cores/tensor_cores.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "common/device.h"
#include "common/simt/instructions/half_precision.h"

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

}  // namespace

void check_fits(const fa::Tensor4<float>& x, ElementType element, std::string_view name) {
  for (std::size_t k = 0; k < x.values.size(); ++k) {
    if (std::isfinite(x.values[k]) && std::isinf(element_value(element_bits(x.values[k], element), element))) {
      // fp16's range ends at 65504, bf16's at 3.39e38, just short of float32's 3.40e38.
      throw std::invalid_argument(fmt::format(
          "{}[{}] = {} does not fit in {}: its largest finite value is {}", name, k, x.values[k], to_string(element),
          element == ElementType::fp16 ? "65504 (scale the inputs, or use bf16, whose range is float32's)"
                                       : "3.39e38 (scale the inputs)"));
    }
  }
}

std::vector<std::uint16_t> to_element_bits(const fa::Tensor4<float>& x, ElementType element, std::string_view name) {
  check_fits(x, element, name);
  std::vector<std::uint16_t> bits(x.values.size());
  for (std::size_t k = 0; k < bits.size(); ++k) bits[k] = element_bits(x.values[k], element);
  return bits;
}

fa::Tensor4<float> round_to(const fa::Tensor4<float>& x, ElementType element, std::string_view name) {
  const std::vector<std::uint16_t> bits = to_element_bits(x, element, name);
  fa::Tensor4<float> out(x.shape);
  for (std::size_t k = 0; k < bits.size(); ++k) out.values[k] = element_value(bits[k], element);
  return out;
}

void check_device(fa::Device device) {
  fa::require_device(device);
  if (device != fa::Device::gpu) return;
  const fa::GpuInfo gpu = fa::current_gpu();
  if (gpu.major < 8) {
    throw std::runtime_error(
        fmt::format("chapter 06 needs a GPU of compute capability 8.0 or newer (sm_80: mma.sync "
                    "m16n8k16 on bf16 and fp16, cp.async); {} is {}.{} (run it with --device cpu)",
                    gpu.name, gpu.major, gpu.minor));
  }
  if (!CH06_GPU) {
    throw std::runtime_error(fmt::format(
        "chapter 06's kernel is not in this build's GPU path: an architecture of CMAKE_CUDA_ARCHITECTURES is older "
        "than sm_80, which its mma.sync m16n8k16 needs; reconfigure with -DCMAKE_CUDA_ARCHITECTURES=native for this "
        "{} ({}.{}), or run it with --device cpu",
        gpu.name, gpu.major, gpu.minor));
  }
}

fa::Device reference_device(fa::Device device) noexcept {
  try {
    check_device(device);
    return device;
  } catch (const std::exception&) {
    return fa::Device::cpu;
  }
}

ElementType parse_element_type(std::string_view name) {
  for (ElementType e : kElementTypes) {
    if (name == to_string(e)) return e;
  }
  throw std::invalid_argument(fmt::format("element type '{}' is not supported; choose bf16 or fp16", name));
}

}  // namespace ch06
