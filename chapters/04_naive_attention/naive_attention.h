// Chapter 04's host API: attention as three kernels (naive_attention.cuh), on the CPU through
// common/simt or on an NVIDIA GPU, chosen at run time.
//
// The road of one run: main.cpp calls naive_attention() below, which checks the problem
// (check_problem) and calls run_naive_attention of the build that runs on the device
// (fa::build_for); that run, in naive_attention.cuh, puts Q, K and V on the device, launches the
// three kernels and brings O, S, P and the time back.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/kernel_problem.h"
#include "common/memory.h"
#include "common/simt/runtime/launch_mode.h"
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
  double elapsed_ms = 0;  // wall time of the three launches, kernels finished (fa::KernelRun)
};

// The kernels' two entry points, compiled into each build of naive_attention.cuh (ch04::cpu,
// ch04::cpu_profiled, ch04::gpu: fa::Builds, common/kernel_problem.h).
//   Run:     host data in, host data out: the path of naive_attention().
//   Launch:  the three launches on memory already on the GPU, waiting for the kernels or not as
//            `mode` says (common/simt/runtime/launch_mode.h): what the GPU benchmark times. S and P hold
//            batch_heads * seq_len_q * seq_len_k floats.
using Run = Result(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                   const fa::DeviceProblem& problem);
using Launch = void(const float* Q, const float* K, const float* V, float* S, float* P, float* O,
                    const fa::DeviceProblem& problem, simt::LaunchMode mode);
namespace cpu {
Run run_naive_attention;
}  // namespace cpu
namespace cpu_profiled {
Run run_naive_attention;
}  // namespace cpu_profiled
namespace gpu {
Run run_naive_attention;
Launch launch_naive_attention;
}  // namespace gpu

// The most query rows the kernels' grid allows: 65535 blocks of 16 rows in gridDim.y.
inline constexpr std::uint64_t kMaxSeqLenQ = 65535u * 16u;

// The problem as the kernels see it, after every check naive_attention makes before any work:
// fa::device_problem's (scale finite in float32, batch * heads <= 65535, int indexing of one
// head's Q, K, V), seq_len_q <= kMaxSeqLenQ, and one head's S within int indexing
// (seq_len_q * seq_len_k <= 2^31 - 1). Throws std::invalid_argument saying what is accepted.
inline fa::DeviceProblem check_problem(const fa::AttentionShape& shape, const Options& options) {
  const fa::DeviceProblem problem = fa::device_problem("naive_attention", shape, options.scale, options.causal);
  if (shape.seq_len_q > kMaxSeqLenQ) {
    throw std::invalid_argument("naive_attention: seq_len_q = " + std::to_string(shape.seq_len_q) +
                                " needs more than the 65535 blocks of 16 rows the kernels' grid allows in y (at "
                                "most 1048560 query rows)");
  }
  if (std::uint64_t{shape.seq_len_q} * shape.seq_len_k > std::numeric_limits<int>::max()) {
    throw std::invalid_argument("naive_attention: one head's S holds " + std::to_string(shape.seq_len_q) + " x " +
                                std::to_string(shape.seq_len_k) +
                                " scores, more than the 2^31 - 1 of the kernels' int indexing");
  }
  return problem;
}

// The bytes naive_attention allocates for a problem at its peak: Q, K, V, O, S and P on the
// device, and O, S and P copied back (on the CPU path the "device" is host memory too). Never
// throws (saturates at 2^64 - 1).
inline std::uint64_t memory_needed(const fa::AttentionShape& s) {
  const fa::AttentionCounts n = fa::attention_counts(s);
  return fa::bytes_of(sizeof(float) * (3 * n.q + 2 * n.k + 4 * n.scores));  // Q, K, V, O, S, P; O, S, P back
}

// O = softmax(Q K^T * scale) V by three kernels that write S and P to global memory.
// Q: [batch, heads, seq_len_q, head_dim]; K, V: [batch, heads, seq_len_k, head_dim]; float32,
// row-major. Any head_dim >= 1, any seq_len >= 1.
// Throws std::invalid_argument for shapes that do not fit together (fa::check_attention_shapes)
// and as check_problem; std::runtime_error when device == gpu and no GPU can be used, or for a
// CUDA error.
// Source: Dao et al. 2022, FlashAttention, Algorithm 0 (standard attention).
inline Result naive_attention(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                              const Options& options = {}, fa::Device device = fa::Device::cpu) {
  const fa::DeviceProblem problem = check_problem(fa::check_attention_shapes(Q.shape, K.shape, V.shape), options);
  return fa::build_for(device, FA_BUILDS(ch04, run_naive_attention))(Q, K, V, problem);
}

}  // namespace ch04
