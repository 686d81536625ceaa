// Chapter 07's host API: the FlashAttention-2 backward pass (backward.cuh), on the CPU through
// common/simt or on an NVIDIA GPU, chosen at run time.
//
// The road of one run: main.cpp calls flash_attention_2_backward() below, which checks the problem
// (check_problem) and calls run_backward of the build that runs on the device (fa::build_for); that
// run, in backward.cuh, puts the inputs on the device, launches the kernels compiled for head_dim
// and brings dQ, dK, dV, D and the time back.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/kernel_problem.h"
#include "common/memory.h"
#include "common/simt/runtime/launch_mode.h"
#include "common/tensor.h"

namespace ch07 {

// The tile each compiled head dim runs with by default: Br query rows and Bc keys, the same in both
// kernels of the backward pass. Br != Bc on purpose, so that a kernel that mixes up query rows and
// keys cannot pass. head_dim 128 takes 32 x 32 so that the dK, dV kernel's shared memory (K_j, V_j,
// Q_i, dO_i, P, dS) stays under 99 KiB, what a block of most GPUs may have.
constexpr fa::Tile tile_for_head_dim(int head_dim) { return head_dim == 128 ? fa::Tile{32, 32} : fa::Tile{32, 64}; }

// The head dims compiled into the kernels (template parameters), each with its default tile, and
// kSmallGpuShapes: the tiles a GPU with 64 KiB of shared memory per block (a T4) holds where the
// default does not (shared_bytes: 41984 bytes for 32x32 at head dim 64, 53888 for 16x32 at 128;
// the defaults need 66816 and 74752). Anything else is refused before a launch.
inline constexpr std::array<int, 3> kHeadDims{32, 64, 128};
inline constexpr std::array<fa::KernelShape, 2> kSmallGpuShapes{{{64, {32, 32}}, {128, {16, 32}}}};
inline constexpr auto kCompiled = fa::join(
    std::array<fa::KernelShape, 3>{
        {{32, tile_for_head_dim(32)}, {64, tile_for_head_dim(64)}, {128, tile_for_head_dim(128)}}},
    kSmallGpuShapes);

// Floats of dynamic shared memory of one block (backward.cuh, SharedTiles): K_j, V_j
// [Bc][head_dim+1], Q_i, dO_i [Br][head_dim+1], dS [Br][Bc+1], with_P (the dK, dV kernel) P
// [Br][Bc+1] too, L_i, D_i [Br]. Never throws.
constexpr std::size_t shared_floats(int head_dim, fa::Tile tile, bool with_P) {
  const auto Br = static_cast<std::size_t>(tile.Br), Bc = static_cast<std::size_t>(tile.Bc);
  const std::size_t stride = static_cast<std::size_t>(head_dim) + 1, p_stride = Bc + 1;
  return 2 * Bc * stride + 2 * Br * stride + (with_P ? 2 : 1) * Br * p_stride + 2 * Br;
}
// The bytes of shared memory per block a tile needs: the dK, dV kernel's, the larger of the two.
constexpr std::size_t shared_bytes(int head_dim, fa::Tile tile) { return shared_floats(head_dim, tile, true) * 4; }

// How dQ is produced (backward.cuh): by atomicAdd from the dK, dV kernel (one pass; the order of
// the float additions depends on which block comes first), or by a second kernel with the query
// blocks outside (the same bits on every run, at the price of recomputing S, P and dP).
enum class DqMethod { atomic, deterministic };

struct Options {
  std::optional<double> scale;  // softmax scale; 1/sqrt(head_dim) when not given
  bool causal = false;          // bottom-right aligned causal mask (common/attention_shapes.h)
  DqMethod dq = DqMethod::atomic;
  std::optional<fa::Tile> tile;  // a tile kCompiled holds for the head dim; when not given, choose_tile's
};

struct Gradients {
  fa::Tensor4<float> dQ;  // [batch, heads, seq_len_q, head_dim]
  fa::Tensor4<float> dK;  // [batch, heads, seq_len_k, head_dim]
  fa::Tensor4<float> dV;  // [batch, heads, seq_len_k, head_dim]
  std::vector<float> D;   // [batch, heads, seq_len_q]: rowsum(dO * O), line 4 of backward.cuh
  double elapsed_ms = 0;  // wall time of the launches, kernels finished (fa::KernelRun)
};

// One backward problem as the kernels see it (common/kernel_problem.h; the tile is choose_tile's), and how
// dQ is made.
struct DeviceProblem : fa::DeviceProblem {
  bool deterministic = false;  // dQ from its own kernel (query blocks outside) instead of atomics
};

// The kernels' two entry points, compiled into each build of backward.cuh (ch07::cpu,
// ch07::cpu_profiled, ch07::gpu: fa::Builds, common/kernel_problem.h). head_dim and the tile must be among
// kCompiled (check_problem refuses anything else).
//   Run:     host data in, host data out: the path of flash_attention_2_backward(). Shapes as there.
//   Launch:  on memory already on the GPU, the preprocessing kernel (D, and dQ = 0 for the atomic
//            method), the dK, dV kernel, and with problem.deterministic the dQ kernel, waiting for
//            them or not as `mode` says (common/simt/runtime/launch_mode.h): what the GPU benchmark times.
//            Q, O, dO, dQ: [batch_heads, seq_len_q, head_dim]; K, V, dK, dV: [batch_heads, seq_len_k,
//            head_dim]; L, D: [batch_heads, seq_len_q].
using Run = Gradients(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                      const fa::Tensor4<float>& O, std::span<const float> L, const fa::Tensor4<float>& dO,
                      const DeviceProblem& problem);
using Launch = void(const float* Q, const float* K, const float* V, const float* O, const float* L, const float* dO,
                    float* D, float* dQ, float* dK, float* dV, const DeviceProblem& problem, simt::LaunchMode mode);
namespace cpu {
Run run_backward;
}  // namespace cpu
namespace cpu_profiled {
Run run_backward;
}  // namespace cpu_profiled
namespace gpu {
Run run_backward;
Launch launch_backward;
}  // namespace gpu

// The tile a run of `options` takes at head_dim on `device`: options.tile when given; else
// tile_for_head_dim's on the CPU, and on a GPU that one where its shared memory per block holds it,
// else the tile of head_dim that fits with the most work per block (fa::tile_for_device: 32x32 at
// head dim 64 and 16x32 at 128 on a T4). TileChoice::why says why when it is not the default.
// Throws as fa::tile_for_device (no tile fits; no GPU).
inline fa::TileChoice choose_tile(int head_dim, const Options& options, fa::Device device) {
  return fa::tile_for_device("attention backward", device, options.tile, tile_for_head_dim(head_dim), head_dim,
                             kCompiled, [head_dim](fa::Tile tile) { return shared_bytes(head_dim, tile); });
}

// The problem as the kernels see it, after every check flash_attention_2_backward makes before any
// work: head_dim among kHeadDims, options.tile (when given) among kCompiled's for it,
// fa::device_problem's (scale finite in float32, batch * heads <= 65535, int indexing of one head's
// Q, K, V); its tile is choose_tile's on `device`. Throws std::invalid_argument naming what is
// accepted, and as choose_tile.
inline DeviceProblem check_problem(const fa::AttentionShape& shape, const Options& options,
                                   fa::Device device = fa::Device::cpu) {
  const int head_dim = static_cast<int>(shape.head_dim);
  DeviceProblem problem{fa::device_problem("attention backward", shape, options.scale, options.causal,
                                           options.tile.value_or(tile_for_head_dim(head_dim)), kCompiled),
                        options.dq == DqMethod::deterministic};
  if (!options.tile) problem.tile = choose_tile(head_dim, options, device).tile;  // after the checks above
  return problem;
}

// The bytes flash_attention_2_backward allocates: Q, K, V, O, L, dO, and dQ, dK, dV, D on the device,
// and dQ, dK, dV, D copied back (on the CPU path the "device" is host memory too). Never throws
// (saturates at 2^64 - 1).
inline std::uint64_t memory_needed(const fa::AttentionShape& s) {
  const fa::AttentionCounts n = fa::attention_counts(s);
  // On the device: Q, O, dO, dQ and K, V, dK, dV, and L, D; copied back: dQ, dK, dV, D.
  return fa::bytes_of(sizeof(float) * (5 * n.q + 6 * n.k + 3 * n.rows));
}

// dQ, dK, dV of a loss whose gradient with respect to O = softmax(Q K^T * scale) V is dO, by the
// FlashAttention-2 backward pass, from the forward pass's O and L (chapter 05's
// ch05::flash_attention_2 gives both; options.scale and options.causal must be the forward's).
// Q, O, dO: [batch, heads, seq_len_q, head_dim]; K, V: [batch, heads, seq_len_k, head_dim];
// L: [batch, heads, seq_len_q], the logsumexp of each row of the scaled scores (-inf for a row that
// sees no key); float32, row-major; any seq_len >= 1; head_dim one of kHeadDims; the tile
// choose_tile's (options.tile, or on a GPU one that its shared memory per block holds).
// Throws std::invalid_argument (naming what is accepted) for another head_dim or tile, shapes that do not
// fit together (O or dO not shaped as Q, L not one value per query row), a scale that is not finite,
// sizes past the kernels' int indexing or batch * heads > 65535 (the grid's y limit);
// std::invalid_argument too when no compiled tile fits a GPU's shared memory per block;
// std::runtime_error when device == gpu and no GPU can be used, or for a CUDA error.
// Source: Dao 2023, FlashAttention-2, Algorithm 2 (backward pass).
inline Gradients flash_attention_2_backward(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K,
                                            const fa::Tensor4<float>& V, const fa::Tensor4<float>& O,
                                            std::span<const float> L, const fa::Tensor4<float>& dO,
                                            const Options& options = {}, fa::Device device = fa::Device::cpu) {
  const fa::AttentionShape shape = fa::check_attention_shapes(Q.shape, K.shape, V.shape);
  const DeviceProblem problem = check_problem(shape, options, device);
  if (O.shape != Q.shape || dO.shape != Q.shape) {
    throw std::invalid_argument("attention backward: O " + O.shape.str() + " and dO " + dO.shape.str() +
                                " must have Q's shape " + Q.shape.str());
  }
  if (L.size() != fa::attention_rows(shape)) {
    throw std::invalid_argument("attention backward: L has " + std::to_string(L.size()) +
                                " values, expected one per query row, batch * heads * seq_len_q = " +
                                std::to_string(fa::attention_rows(shape)));
  }
  return fa::build_for(device, FA_BUILDS(ch07, run_backward))(Q, K, V, O, L, dO, problem);
}

}  // namespace ch07
