// The attention problem as a chapter's kernels see it (every compiler: a chapter's .cuh, which nvcc
// compiles too, reaches this through its host header, so it holds nothing nvcc cannot compile, no
// fmt: its messages are made in kernel_problem.cpp):
//   Tile, KernelShape, every()        a kernel's compiled instances: head dim and Br x Bc tile
//   DeviceProblem, device_problem()   one attention problem as the kernel sees it, checked
//   compiled_index()                  which compiled instance runs the problem
//   fit_tile(), tile_for_device()     the tile a GPU's shared memory per block can hold
//   visible_keys()                    the causal mask's rule, in every kernel
//   KernelRun                         O, L and the wall time of a forward kernel, on host data
//   Builds, build_for()               the build of a chapter's kernels that runs: CPU, profiled, GPU
// A chapter's program includes common/program.h (the front door) as well.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/attention_shapes.h"
#include "common/device.h"
#include "common/simt/tools/profiled_copy.h"
#include "common/tensor.h"

namespace fa {

// A tile shape: Br query rows per thread block, Bc keys per tile of K and V (Dao 2023,
// FlashAttention-2, Algorithm 1, lines 1-2).
struct Tile {
  int Br = 64;
  int Bc = 64;
  bool operator==(const Tile&) const = default;
};

// One compiled instance of a chapter's kernel: its head dim and its tile (template parameters).
struct KernelShape {
  int head_dim = 0;
  Tile tile{};
  bool operator==(const KernelShape&) const = default;
};

// Every head dim of head_dims with every tile of tiles: what a chapter compiles when any of its
// head dims may run in any of its tiles.
template <std::size_t H, std::size_t T>
constexpr std::array<KernelShape, H * T> every(const std::array<int, H>& head_dims, const std::array<Tile, T>& tiles) {
  std::array<KernelShape, H * T> shapes{};
  for (std::size_t h = 0; h < H; ++h) {
    for (std::size_t t = 0; t < T; ++t) shapes[h * T + t] = {head_dims[h], tiles[t]};
  }
  return shapes;
}

// One attention problem as a kernel sees it: batch and heads folded into one index (the tensors are
// [batch * heads, seq_len, head_dim], row-major), sizes as int, the scale as float32, and the tile
// to run it in.
struct DeviceProblem {
  int batch_heads = 0;
  int seq_len_q = 0;
  int seq_len_k = 0;
  int head_dim = 0;
  float scale = 0.0f;
  bool causal = false;
  Tile tile{};
};

// The most batch * heads a chapter's grid allows: gridDim.y and gridDim.z are at most 65535 (CUDA
// C++ Programming Guide, "Compute Capabilities", technical specifications).
inline constexpr std::uint64_t kMaxBatchHeads = 65535;

// The problem `shape` as the kernel sees it, after every check a chapter makes before any work:
//   - head_dim and tile among `compiled` (when it is not empty; chapter 04's kernels take any);
//   - the scale (1/sqrt(head_dim) when not given) finite in float32;
//   - batch * heads at most kMaxBatchHeads, and one head's Q, K or V (seq_len * head_dim values)
//     within the kernels' int indexing (2^31 - 1).
// Throws std::invalid_argument starting with `who` and saying what is accepted (kernel_problem.cpp).
// Source: the kernels' template parameters and index arithmetic (chapters/0N_*/*.cuh).
DeviceProblem device_problem(std::string_view who, const AttentionShape& shape, std::optional<double> scale,
                             bool causal, Tile tile = {}, std::span<const KernelShape> compiled = {});

// A tile as Br x Bc, "64x32"; and "64x64, 32x64, 64x32", the tiles of `compiled` for head_dim (all
// of them when head_dim is 0), each once. Never throw (but for memory; kernel_problem.cpp).
std::string tile_name(Tile tile);
std::string tile_list(std::span<const KernelShape> compiled, int head_dim = 0);

// The tiles `compiled` holds for head_dim, in its order (what a chapter's tests loop over). Never
// throws (but for memory; kernel_problem.cpp).
std::vector<Tile> tiles_of(std::span<const KernelShape> compiled, int head_dim);

// Parses "64x32" (Br x Bc) into one of the tiles of `compiled`. Throws std::invalid_argument
// starting with "--tile TEXT:" and naming the tiles that are compiled (kernel_problem.cpp).
Tile parse_tile(std::string_view text, std::span<const KernelShape> compiled);

// The place of the problem's head dim and tile in `compiled`: the one place where a run-time problem
// meets a compile-time kernel instance. A chapter's .cuh keeps one launch per compiled shape, in
// kCompiled's order, and calls the one at this place:
//   kInstances[fa::compiled_index(problem, kCompiled)](Q, K, V, O, L, problem, mode);
// Throws std::invalid_argument when none matches (device_problem refuses such a problem first).
template <std::size_t N>
std::size_t compiled_index(const DeviceProblem& problem, const std::array<KernelShape, N>& compiled) {
  for (std::size_t n = 0; n < N; ++n) {
    if (problem.head_dim == compiled[n].head_dim && problem.tile == compiled[n].tile) return n;
  }
  throw std::invalid_argument("compiled_index: this head_dim and tile are not compiled");
}

// `a` then `b`: the instances a chapter compiles for every head dim (every()) and those it adds
// for some head dims only.
template <std::size_t N, std::size_t M>
constexpr std::array<KernelShape, N + M> join(const std::array<KernelShape, N>& a,
                                              const std::array<KernelShape, M>& b) {
  std::array<KernelShape, N + M> shapes{};
  for (std::size_t n = 0; n < N; ++n) shapes[n] = a[n];
  for (std::size_t m = 0; m < M; ++m) shapes[N + m] = b[m];
  return shapes;
}

// ---- The tile a GPU can hold ---------------------------------------------------------------------
// A block of a kernel keeps its tiles in shared memory, and a GPU gives a block at most so many
// bytes of it (cudaDevAttrMaxSharedMemoryPerBlockOptin: 65536 on a T4, 166912 on an A100, 232448 on
// an H100). Where the user names no tile, a chapter runs its default tile where it fits, else the
// compiled tile of the head dim that fits with the most work per block.

// Bytes of shared memory one block of the chapter's kernel needs with `tile`, at the problem's head
// dim (and, for chapter 08, its cache type): the chapter's own formula.
using SharedBytes = std::function<std::size_t(Tile)>;

// The tile a run takes, its shared memory per block, and why when it is not the default.
struct TileChoice {
  Tile tile{};
  std::size_t bytes = 0;  // shared memory per block of `tile`, bytes
  std::string why;        // empty for the default; else "the default 64x64 needs ... bytes ..."
};

// The pure choice, for a GPU that gives a block `limit` bytes of shared memory: `default_tile` when
// bytes(default_tile) <= limit; else, among the tiles `compiled` holds for head_dim, the one that
// fits with the largest Br * Bc, then the largest Br (the most work per block, the fewest blocks).
// Throws std::invalid_argument in one line starting with `who`, naming the bytes of the smallest
// tile, the limit and what to do (--device cpu), when no tile of head_dim fits. Never calls the GPU: the
// tests give it 65536 (T4), 166912 (A100) and 232448 (H100). Source: the chapters' kernels, whose
// shared memory `bytes` computes (kernel_problem.cpp).
TileChoice fit_tile(std::string_view who, Tile default_tile, int head_dim, std::span<const KernelShape> compiled,
                    const SharedBytes& bytes, std::size_t limit);

// The tile of a run: `given` when the user named one (a launch refuses it if it does not fit);
// else on the CPU always `default_tile` (no device limit there: common/simt/runtime/launch_cpu.h), and on the
// GPU fit_tile with this GPU's limit (gpu_shared_bytes_per_block, common/device.h). Throws as
// fit_tile, and std::runtime_error as require_device when device is gpu and no GPU can be used
// (kernel_problem.cpp).
TileChoice tile_for_device(std::string_view who, Device device, std::optional<Tile> given, Tile default_tile,
                           int head_dim, std::span<const KernelShape> compiled, const SharedBytes& bytes);

// How many keys query row i sees: every one of the seq_len_k, or under the causal mask (aligned to
// the bottom right, common/attention_shapes.h) the keys j <= i + seq_len_k - seq_len_q, which is
// none for the first rows when seq_len_q > seq_len_k. Keys 0 .. visible_keys - 1 are seen. The
// rule of every kernel's mask: constexpr, so that device code calls it too (nvcc's
// --expt-relaxed-constexpr, common/simt/CMakeLists.txt). Never throws.
constexpr int visible_keys(int i, int seq_len_q, int seq_len_k, bool causal) {
  if (!causal) return seq_len_k;
  const int visible = i - seq_len_q + 1 + seq_len_k;  // (i - seq_len_q + 1 <= 0 for a real row: no overflow)
  return visible < 0 ? 0 : (visible > seq_len_k ? seq_len_k : visible);
}

// The first query row that sees key j, the same rule read the other way (the backward pass walks the
// query rows of one key): 0 without the mask, i = j - (seq_len_k - seq_len_q) under it (0 when that
// is negative), seq_len_q when no row sees key j. Never throws.
constexpr int first_query_seeing(int j, int seq_len_q, int seq_len_k, bool causal) {
  if (!causal) return 0;
  const int first = j - seq_len_k + seq_len_q;  // (j - seq_len_k < 0 for a real key: no overflow)
  return first < 0 ? 0 : (first > seq_len_q ? seq_len_q : first);
}

// What one run of a forward kernel brings back to the host.
struct KernelRun {
  Tensor4<float> O;       // [batch, heads, seq_len_q, head_dim]
  std::vector<float> L;   // [batch, heads, seq_len_q]: the logsumexp of each row of the scaled scores,
                          // m + log(l); -inf for a row that sees no key
  double elapsed_ms = 0;  // wall time of the launch, the kernel finished (on the GPU this includes
                          // launch overhead: the GPU benchmarks time kernels with CUDA events)
};

// Milliseconds of wall time since `start` (a launch's, for KernelRun::elapsed_ms). Never throws.
inline double milliseconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// ---- Which build of a chapter's kernels runs ----------------------------------------------------
// A chapter's .cuh is compiled into up to three builds (add_kernels, cmake/Chapters.cmake), each
// with the same entry points: chNN::cpu (the host compiler through common/simt; always),
// chNN::cpu_profiled (the same, every memory access seen by simt's profile and race checker, for
// --profile and --racecheck; where the chapter's library has SIMT_PROFILED_KERNELS) and chNN::gpu
// (nvcc; where FA_HAVE_CUDA). Builds holds one entry point's three, nullptr for a build that this
// program does not have; FA_BUILDS makes it, so that a build not compiled is never named:
//   fa::build_for(device, FA_BUILDS(ch05, run_flash_attention_2))(Q, K, V, problem);
template <class Entry>
struct Builds {
  Entry* cpu = nullptr;
  Entry* cpu_profiled = nullptr;
  Entry* gpu = nullptr;
};

#if SIMT_PROFILED_KERNELS
#define FA_IF_PROFILED(entry) (&(entry))
#else
#define FA_IF_PROFILED(entry) nullptr
#endif
#if FA_HAVE_CUDA
#define FA_IF_GPU(entry) (&(entry))
#else
#define FA_IF_GPU(entry) nullptr
#endif
#define FA_BUILDS(chapter, entry)                                                                      \
  ::fa::Builds<decltype(chapter::cpu::entry)> {                                                        \
    &chapter::cpu::entry, FA_IF_PROFILED(chapter::cpu_profiled::entry), FA_IF_GPU(chapter::gpu::entry) \
  }

// The one choice of a build, for every chapter: on Device::gpu the GPU build; on the CPU the
// profiled build while simt's profile or race checker is on (only its accesses are seen:
// common/simt/tools/profiled_copy.h), else the plain one. The caller then calls what it returns.
// Throws std::runtime_error saying why when device is gpu and no GPU can be used (require_device);
// std::invalid_argument for a malformed SIMT_RACECHECK (simt::use_profiled_copy).
template <class Entry>
Entry& build_for(Device device, const Builds<Entry>& builds) {
  require_device(device);
  if (device == Device::gpu && builds.gpu != nullptr) return *builds.gpu;
  if (builds.cpu_profiled != nullptr && simt::use_profiled_copy()) return *builds.cpu_profiled;
  return *builds.cpu;
}

}  // namespace fa
