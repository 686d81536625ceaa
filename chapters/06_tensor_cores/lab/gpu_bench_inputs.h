// The inputs of a GPU benchmark of chapter 06's element types (ch06_gpu_bench, and chapter 10's,
// which times its kernel beside chapter 06's on the same inputs). Host code for the host compiler,
// included only where nvcc was found, as common/gpu_bench.h.
#pragma once

#include <cstdint>
#include <string>

#include "chapters/06_tensor_cores/tensor_cores.h"
#include "common/gpu_bench.h"

namespace ch06::bench {

// Q, K and V ([batch * heads][seq_len][head_dim] 16-bit values on the device, any length) drawn
// normal(0, 1) on the GPU in the element type `dtype` names ("bf16" or "fp16"), seeds 1, 2, 3
// (fa::bench::fill_qkv); returns that element type. Throws std::invalid_argument for another dtype
// (parse_element_type), std::runtime_error on a CUDA error.
inline ElementType fill_inputs(fa::bench::DeviceArray<std::uint16_t>& Q, fa::bench::DeviceArray<std::uint16_t>& K,
                               fa::bench::DeviceArray<std::uint16_t>& V, const std::string& dtype) {
  const ElementType element = parse_element_type(dtype);
  fa::bench::fill_qkv(Q, K, V, element == ElementType::bf16 ? fa::bench::Float16::bf16 : fa::bench::Float16::fp16);
  return element;
}

}  // namespace ch06::bench
