// Chapter 06's host API: FlashAttention-2 on tensor cores (tensor_cores.cuh), bf16 or fp16 inputs,
// float32 accumulation, on the CPU through common/simt or on an NVIDIA GPU, chosen at run time.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chapters/06_tensor_cores/backends.h"
#include "common/attention_shapes.h"
#include "common/device.h"
#include "common/tensor.h"

namespace ch06 {

// What is compiled into the kernel (template parameters); anything else is refused before a
// launch. Br != Bc: (128, 64) is the default, (64, 64) the square one.
inline constexpr std::array<int, 2> kHeadDims{64, 128};
inline constexpr std::array<TileShape, 2> kTileShapes{{{128, 64}, {64, 64}}};
inline constexpr std::array<ElementType, 2> kElementTypes{ElementType::bf16, ElementType::f16};

// "bf16" or "fp16" -> the element type. Throws std::invalid_argument naming the accepted names.
ElementType parse_element_type(std::string_view name);

// "Br x Bc" as the demo and the messages write it, e.g. "128x64"; and the list of kTileShapes.
std::string tile_name(TileShape tile);
std::string tile_list();

// x with every value rounded to the nearest `element` value, ties to even (the inputs the kernel
// actually sees), back in float32, which holds every bf16 and fp16 value exactly. NaN stays NaN.
// Throws std::invalid_argument, naming `name`, the index and the value, for a finite value that
// the element type cannot hold (|x| > 65504, after rounding, for fp16; beyond float's range
// nothing is finite, so bf16 never refuses).
fa::Tensor4<float> round_to(const fa::Tensor4<float>& x, ElementType element, std::string_view name);
// The same rounding, as the elements' 16-bit patterns (what the kernel reads: backends.h).
std::vector<std::uint16_t> to_element_bits(const fa::Tensor4<float>& x, ElementType element, std::string_view name);

struct Options {
  std::optional<double> scale;              // softmax scale; 1/sqrt(head_dim) when not given
  bool causal = false;                      // bottom-right aligned causal mask (common/attention_shapes.h)
  TileShape tile{128, 64};                  // one of kTileShapes
  ElementType element = ElementType::bf16;  // the type of Q, K, V and O inside the kernel
};

struct Result {
  fa::Tensor4<float> O;   // [batch, heads, seq_len_q, head_dim]: the kernel's bf16/fp16 output,
                          // widened to float32 (exactly)
  std::vector<float> L;   // [batch, heads, seq_len_q]: float32 logsumexp of each row of the scaled
                          // scores, m + log(l); -inf for a row that sees no key
  double elapsed_ms = 0;  // wall time of the launch (see backends.h)
};

// The problem as the kernel will see it, after every check that tensor_core_attention makes
// before it touches the data (common/device_problem.h's limits, the head dim, the tile). Throws
// std::invalid_argument as tensor_core_attention does, except for the inputs' values (round_to
// checks those).
DeviceProblem check_problem(const fa::AttentionShape& shape, const Options& options);

// O = softmax(Q K^T * scale) V and L by the FlashAttention-2 forward kernel on tensor cores.
// Q: [batch, heads, seq_len_q, head_dim]; K, V: [batch, heads, seq_len_k, head_dim]; float32,
// row-major, rounded here to options.element (round_to) before they go to the kernel; any
// seq_len >= 1; head_dim one of kHeadDims; options.tile one of kTileShapes.
// Throws std::invalid_argument (naming what is accepted) for another head_dim or tile shape,
// shapes that do not fit together, a scale that is not finite, an input the element type cannot
// hold, sizes past the kernel's int indexing, or batch * heads > 65535 (the grid's y limit);
// std::runtime_error when device == gpu and no GPU can be used, or for a CUDA error.
// Source: Dao 2023, FlashAttention-2, Algorithm 1 (forward pass) and section 3.3 (warps).
Result tensor_core_attention(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                             const Options& options = {}, fa::Device device = fa::Device::cpu);

}  // namespace ch06
