// Chapter 05's host API: the FlashAttention-2 forward kernel (flash_attention_2.cuh), on the CPU
// through common/simt or on an NVIDIA GPU, chosen at run time.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "chapters/05_flash_attention_2/backends.h"
#include "common/attention_shapes.h"
#include "common/device.h"
#include "common/tensor.h"

namespace ch05 {

// The head dims and tile shapes compiled into the kernel (template parameters); anything else is
// refused before a launch. Br != Bc is allowed: (32, 64) and (64, 32) are there to prove it.
inline constexpr std::array<int, 3> kHeadDims{32, 64, 128};
inline constexpr std::array<TileShape, 3> kTileShapes{{{64, 64}, {32, 64}, {64, 32}}};

struct Options {
  std::optional<double> scale;  // softmax scale; 1/sqrt(head_dim) when not given
  bool causal = false;          // bottom-right aligned causal mask (common/attention_shapes.h)
  TileShape tile{64, 64};       // one of kTileShapes
};

struct Result {
  fa::Tensor4<float> O;   // [batch, heads, seq_len_q, head_dim]
  std::vector<float> L;   // [batch, heads, seq_len_q]: logsumexp of each row of the scaled scores,
                          // m + log(l); -inf for a row that sees no key
  double elapsed_ms = 0;  // wall time of the launch (see backends.h)
};

// The problem as the kernel sees it, after every check flash_attention_2 makes before any work:
// head_dim one of kHeadDims, options.tile one of kTileShapes, and fa::device_problem's checks
// (scale finite in float32, batch * heads <= 65535, int indexing of one head's Q, K, V). Throws
// std::invalid_argument naming what is accepted.
DeviceProblem check_problem(const fa::AttentionShape& shape, const Options& options);

// The bytes flash_attention_2 allocates: Q, K, V, O and L on the device and O, L copied back (on
// the CPU path the "device" is host memory too). Never throws (saturates at 2^64 - 1).
std::uint64_t memory_needed(const fa::AttentionShape& shape);

// O = softmax(Q K^T * scale) V and L by the FlashAttention-2 forward kernel, which never writes
// S or P to global memory.
// Q: [batch, heads, seq_len_q, head_dim]; K, V: [batch, heads, seq_len_k, head_dim]; float32,
// row-major; any seq_len >= 1; head_dim one of kHeadDims; options.tile one of kTileShapes.
// Throws std::invalid_argument for shapes that do not fit together (fa::check_attention_shapes)
// and as check_problem; std::runtime_error when device == gpu and no GPU can be used, or for a
// CUDA error.
// Source: Dao 2023, FlashAttention-2, Algorithm 1 (forward pass).
Result flash_attention_2(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                         const Options& options = {}, fa::Device device = fa::Device::cpu);

}  // namespace ch05
