// Chapter 05's host API: the FlashAttention-2 forward kernel (flash_attention_2.cuh), on the CPU
// through common/simt or on an NVIDIA GPU, chosen at run time.
//
// The road of one run: main.cpp calls flash_attention_2() below, which checks the problem
// (check_problem) and calls run_flash_attention_2 of the build that runs on the device
// (fa::build_for); that run, in flash_attention_2.cuh, puts Q, K and V on the device, launches the
// compiled instance for head_dim and the tile, and brings O, L and the time back (fa::KernelRun).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "common/kernel_problem.h"
#include "common/memory.h"
#include "common/simt/runtime/launch_mode.h"
#include "common/tensor.h"

namespace ch05 {

// The head dims and tile shapes compiled into the kernel (template parameters): every head dim in
// every tile of kTileShapes, and the tiles of kSmallGpuShapes for one head dim each. Anything else
// is refused before a launch. Br != Bc is allowed: (32, 64) and (64, 32) are there to prove it.
// kSmallGpuShapes: 32x32 at head dim 128 (53760 bytes of shared memory per block, shared_bytes),
// the one tile of head dim 128 that a GPU with 64 KiB per block (a T4) can hold; head dims 32 and
// 64 have one among kTileShapes (docs/workshop.md, "On Colab or Kaggle").
inline constexpr std::array<int, 3> kHeadDims{32, 64, 128};
inline constexpr std::array<fa::Tile, 3> kTileShapes{{{64, 64}, {32, 64}, {64, 32}}};
inline constexpr std::array<fa::KernelShape, 1> kSmallGpuShapes{{{128, {32, 32}}}};
inline constexpr auto kCompiled = fa::join(fa::every(kHeadDims, kTileShapes), kSmallGpuShapes);
inline constexpr fa::Tile kDefaultTile{64, 64};  // where none is given, if the device holds it

// Floats of dynamic shared memory one block of the kernel needs (flash_attention_2.cuh, "Shared
// memory"): Q_i [Br][head_dim+1], K_j and V_j [Bc][head_dim+1] and P [Br][Bc+1]. Never throws.
constexpr std::size_t shared_floats(int head_dim, int Br, int Bc) {
  return static_cast<std::size_t>(Br) * (head_dim + 1) + 2u * Bc * (head_dim + 1) +
         static_cast<std::size_t>(Br) * (Bc + 1);
}
// The same in bytes, for a tile: 66560 for 64x64 at head dim 64, 53760 for 32x32 at 128.
constexpr std::size_t shared_bytes(int head_dim, fa::Tile tile) {
  return shared_floats(head_dim, tile.Br, tile.Bc) * sizeof(float);
}

struct Options {
  std::optional<double> scale;   // softmax scale; 1/sqrt(head_dim) when not given
  bool causal = false;           // bottom-right aligned causal mask (common/attention_shapes.h)
  std::optional<fa::Tile> tile;  // a tile kCompiled holds for the head dim; when not given, choose_tile's
};

// O [batch, heads, seq_len_q, head_dim], L [batch, heads, seq_len_q] (m + log(l); -inf for a row
// that sees no key) and the wall time of the launch.
using Result = fa::KernelRun;

// The kernel's two entry points, compiled into each build of flash_attention_2.cuh (ch05::cpu,
// ch05::cpu_profiled, ch05::gpu: fa::Builds, common/kernel_problem.h). head_dim and the tile must be among
// kCompiled (check_problem refuses anything else first).
//   Run:     host data in, host data out: the path of flash_attention_2().
//   Launch:  on memory already on the GPU, waiting for the kernel or not as `mode` says
//            (common/simt/runtime/launch_mode.h): what the GPU benchmarks time.
using Run = Result(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                   const fa::DeviceProblem& problem);
using Launch = void(const float* Q, const float* K, const float* V, float* O, float* L,
                    const fa::DeviceProblem& problem, simt::LaunchMode mode);
namespace cpu {
Run run_flash_attention_2;
}  // namespace cpu
namespace cpu_profiled {
Run run_flash_attention_2;
}  // namespace cpu_profiled
namespace gpu {
Run run_flash_attention_2;
Launch launch_flash_attention_2;
}  // namespace gpu

// The tile a run of `options` takes at head_dim on `device`: options.tile when given; else
// kDefaultTile on the CPU, and on a GPU kDefaultTile where its shared memory per block holds it,
// else the tile of head_dim that fits with the most work per block (fa::tile_for_device: 64x32 at
// head dim 64 and 32x32 at 128 on a T4). TileChoice::why says why when it is not the default.
// Throws as fa::tile_for_device (no tile fits; no GPU).
inline fa::TileChoice choose_tile(int head_dim, const Options& options, fa::Device device) {
  const auto bytes = [head_dim](fa::Tile tile) { return shared_bytes(head_dim, tile); };
  return fa::tile_for_device("flash_attention_2", device, options.tile, kDefaultTile, head_dim, kCompiled, bytes);
}

// The problem as the kernel sees it, after every check flash_attention_2 makes before any work:
// head_dim and options.tile among kCompiled, and fa::device_problem's (scale finite in float32,
// batch * heads <= 65535, int indexing of one head's Q, K, V); its tile is choose_tile's on `device`.
// Throws std::invalid_argument naming what is accepted, and as choose_tile.
inline fa::DeviceProblem check_problem(const fa::AttentionShape& shape, const Options& options,
                                       fa::Device device = fa::Device::cpu) {
  fa::DeviceProblem p = fa::device_problem("flash_attention_2", shape, options.scale, options.causal,
                                           options.tile.value_or(kDefaultTile), kCompiled);
  p.tile = choose_tile(p.head_dim, options, device).tile;  // (the head dim and a given tile checked first)
  return p;
}

// The bytes flash_attention_2 allocates: Q, K, V, O and L on the device and O, L copied back (on
// the CPU path the "device" is host memory too). Never throws (saturates at 2^64 - 1).
inline std::uint64_t memory_needed(const fa::AttentionShape& s) {
  const fa::AttentionCounts n = fa::attention_counts(s);
  return fa::bytes_of(sizeof(float) * (3 * n.q + 2 * n.k + 2 * n.rows));  // Q, K, V, O, L; O, L back
}

// O = softmax(Q K^T * scale) V and L by the FlashAttention-2 forward kernel, which never writes
// S or P to global memory.
// Q: [batch, heads, seq_len_q, head_dim]; K, V: [batch, heads, seq_len_k, head_dim]; float32,
// row-major; any seq_len >= 1; head_dim one of kHeadDims; options.tile, when given, one that
// kCompiled holds for head_dim (when not: choose_tile's, which on a GPU is one its shared memory holds).
// Throws std::invalid_argument for shapes that do not fit together (fa::check_attention_shapes)
// and as check_problem (also when no compiled tile fits a GPU's shared memory per block);
// std::runtime_error when device == gpu and no GPU can be used, or for a CUDA error.
// Source: Dao 2023, FlashAttention-2, Algorithm 1 (forward pass).
inline Result flash_attention_2(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                                const Options& options = {}, fa::Device device = fa::Device::cpu) {
  const fa::DeviceProblem problem =
      check_problem(fa::check_attention_shapes(Q.shape, K.shape, V.shape), options, device);
  return fa::build_for(device, FA_BUILDS(ch05, run_flash_attention_2))(Q, K, V, problem);
}

}  // namespace ch05
