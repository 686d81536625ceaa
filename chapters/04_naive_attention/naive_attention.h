// Chapter 04's host API: attention as three kernels (naive_attention.cuh), on the CPU through
// common/simt or on an NVIDIA GPU, chosen at run time.
#pragma once

#include <optional>
#include <vector>

#include "common/device.h"
#include "common/tensor.h"

namespace ch04 {

struct Options {
  std::optional<double> scale;  // softmax scale; 1/sqrt(head_dim) when not given
  bool causal = false;          // bottom-right aligned causal mask (common/attention_shapes.h)
};

struct Result {
  fa::Tensor4<float> O;   // [batch, heads, seq_len_q, head_dim]
  std::vector<float> S;   // [batch, heads, seq_len_q, seq_len_k], scaled scores, -inf where masked
  std::vector<float> P;   // [batch, heads, seq_len_q, seq_len_k], softmax of each row of S
  double elapsed_ms = 0;  // wall time of the three launches (see backends.h)
};

// O = softmax(Q K^T * scale) V by three kernels that write S and P to global memory.
// Q: [batch, heads, seq_len_q, head_dim]; K, V: [batch, heads, seq_len_k, head_dim]; float32,
// row-major. Any head_dim >= 1, any seq_len >= 1.
// Throws std::invalid_argument for shapes that do not fit together (fa::check_attention_shapes),
// a scale that is not finite, sizes past the kernels' int indexing or the grid limits
// (batch * heads <= 65535, seq_len_q <= 1048560); std::runtime_error when device == gpu and no
// GPU can be used, or for a CUDA error.
// Source: Dao et al. 2022, FlashAttention, Algorithm 0; the first seed.
Result naive_attention(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K,
                       const fa::Tensor4<float>& V, const Options& options = {},
                       fa::Device device = fa::Device::cpu);

}  // namespace ch04
