// Chapter 04's host API: attention as three kernels (naive_attention.cuh), on the CPU through
// common/simt or on an NVIDIA GPU, chosen at run time.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "common/attention_shapes.h"
#include "common/device.h"
#include "common/device_problem.h"
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
  double elapsed_ms = 0;  // wall time of the three launches (common/device_problem.h, DeviceRun)
};

// The problem as the kernels see it, after every check naive_attention makes before any work:
// fa::device_problem's (scale finite in float32, batch * heads <= 65535, int indexing of one
// head's Q, K, V), one head's S within int indexing (seq_len_q * seq_len_k <= 2^31 - 1), and
// seq_len_q <= 1048560 (65535 blocks of 16 rows in gridDim.y). Throws std::invalid_argument
// saying what is accepted.
fa::DeviceProblem check_problem(const fa::AttentionShape& shape, const Options& options);

// The bytes naive_attention allocates for a problem at its peak: Q, K, V, O, S and P on the
// device, and O, S and P copied back (on the CPU path the "device" is host memory too). Never
// throws (saturates at 2^64 - 1).
std::uint64_t memory_needed(const fa::AttentionShape& shape);

// O = softmax(Q K^T * scale) V by three kernels that write S and P to global memory.
// Q: [batch, heads, seq_len_q, head_dim]; K, V: [batch, heads, seq_len_k, head_dim]; float32,
// row-major. Any head_dim >= 1, any seq_len >= 1.
// Throws std::invalid_argument for shapes that do not fit together (fa::check_attention_shapes)
// and as check_problem; std::runtime_error when device == gpu and no GPU can be used, or for a
// CUDA error.
// Source: Dao et al. 2022, FlashAttention, Algorithm 0 (standard attention).
Result naive_attention(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                       const Options& options = {}, fa::Device device = fa::Device::cpu);

}  // namespace ch04
