// simt::to_device<Element>(host): float32 values from the host in a new DeviceBuffer<Element>, the
// one way every chapter puts its inputs on the device, on both backends.
//
//   const simt::DeviceBuffer<float> q = simt::to_device<float>(Q.values);        // copied
//   const simt::DeviceBuffer<simt::bf16> k = simt::to_device<simt::bf16>(K.values);  // rounded
//
// Element float: the values as they are. Element bf16 or f16: each value rounded to the nearest
// element, ties to even (simt's conversion, CUDA's __float2bfloat16_rn / __float2half_rn), which is
// exact for a value the type holds (chapter 06 checks that the inputs fit first: ch06::check_fits).
// Throws std::bad_alloc, or what the backend's allocation throws (a CUDA error on the GPU).
#pragma once

#include <cstddef>
#include <span>
#include <type_traits>
#include <vector>

#include "common/simt/runtime/backend.h"

namespace simt {
inline namespace SIMT_RUNTIME {

template <class Element>
DeviceBuffer<Element> to_device(std::span<const float> host) {
  if constexpr (std::is_same_v<Element, float>) {
    return DeviceBuffer<float>(host);
  } else {
    const std::vector<Element> elements(host.begin(), host.end());
    return DeviceBuffer<Element>(std::span<const Element>(elements));
  }
}

// simt::poisoned<Element>(n): a new DeviceBuffer of n elements for a kernel's output, filled with
// NaN (DeviceBuffer::poison): an element the kernel does not write cannot pass for a result, and
// simt's race checker reports a kernel's read of it. Throws as the allocation.
template <class Element>
DeviceBuffer<Element> poisoned(std::size_t n) {
  DeviceBuffer<Element> buffer(n);
  buffer.poison();
  return buffer;
}

// simt::to_host_float(device): the way back, a DeviceBuffer's elements on the host widened to
// float32, which holds every bf16 and f16 value exactly. Throws what DeviceBuffer::to_host throws.
template <class Element>
std::vector<float> to_host_float(const DeviceBuffer<Element>& device) {
  const std::vector<Element> host = device.to_host();
  if constexpr (std::is_same_v<Element, float>) {
    return host;
  } else {
    return std::vector<float>(host.begin(), host.end());
  }
}

}  // namespace SIMT_RUNTIME
}  // namespace simt
