// Chapter 07's host API: the FlashAttention-2 backward pass (backward.cuh), on the CPU through
// common/simt or on an NVIDIA GPU, chosen at run time.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <span>
#include <vector>

#include "chapters/07_backward/backends.h"
#include "common/device.h"
#include "common/tensor.h"

namespace ch07 {

// The head dims compiled into the kernels (template parameters); anything else is refused before
// a launch. Each runs with the tile of tile_for_head_dim() (backends.h).
inline constexpr std::array<int, 3> kHeadDims{32, 64, 128};

// Throws std::invalid_argument, naming kHeadDims, unless head_dim is one of them.
void check_head_dim(std::size_t head_dim);

// How dQ is produced (backward.cuh): by atomicAdd from the dK, dV kernel (one pass; the order of
// the float additions depends on which block comes first), or by a second kernel with the query
// blocks outside (the same bits on every run, at the price of recomputing S, P and dP).
enum class DqMethod { atomic, deterministic };

struct Options {
  std::optional<double> scale;  // softmax scale; 1/sqrt(head_dim) when not given
  bool causal = false;          // bottom-right aligned causal mask (common/attention_shapes.h)
  DqMethod dq = DqMethod::atomic;
};

struct Gradients {
  fa::Tensor4<float> dQ;  // [batch, heads, seq_len_q, head_dim]
  fa::Tensor4<float> dK;  // [batch, heads, seq_len_k, head_dim]
  fa::Tensor4<float> dV;  // [batch, heads, seq_len_k, head_dim]
  std::vector<float> D;   // [batch, heads, seq_len_q]: rowsum(dO * O), line 4 of backward.cuh
  double elapsed_ms = 0;  // wall time of the launches (see backends.h)
};

// dQ, dK, dV of a loss whose gradient with respect to O = softmax(Q K^T * scale) V is dO, by the
// FlashAttention-2 backward pass, from the forward pass's O and L (chapter 05's
// ch05::flash_attention_2 gives both; options.scale and options.causal must be the forward's).
// Q, O, dO: [batch, heads, seq_len_q, head_dim]; K, V: [batch, heads, seq_len_k, head_dim];
// L: [batch, heads, seq_len_q], the logsumexp of each row of the scaled scores (-inf for a row that
// sees no key); float32, row-major; any seq_len >= 1; head_dim one of kHeadDims.
// Throws std::invalid_argument (naming what is accepted) for another head_dim, shapes that do not
// fit together (O or dO not shaped as Q, L not one value per query row), a scale that is not finite,
// sizes past the kernels' int indexing or batch * heads > 65535 (the grid's y limit);
// std::runtime_error when device == gpu and no GPU can be used, or for a CUDA error.
// Source: Dao 2023, FlashAttention-2, Algorithm 2 (backward pass).
Gradients flash_attention_2_backward(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K,
                                     const fa::Tensor4<float>& V, const fa::Tensor4<float>& O, std::span<const float> L,
                                     const fa::Tensor4<float>& dO, const Options& options = {},
                                     fa::Device device = fa::Device::cpu);

}  // namespace ch07
