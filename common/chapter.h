// What every CUDA chapter's kernel stands on, written once: the tile and the head dims a kernel is
// compiled for, the problem as the kernel sees it, the one dispatch from a problem to a compiled
// instance, the one run that brings O, L and the time back to the host, and the choice between the
// CPU and the GPU build of the kernel.
//
//   Tile, KernelShape, every()        a kernel's compiled instances: head dim and Br x Bc tile
//   DeviceProblem, device_problem()   one attention problem as the kernel sees it, checked
//   dispatch<kCompiled>(problem, f)   calls f.template operator()<shape>() for the problem's shape
//   KernelRun, run_forward()          O, L and the wall time of a forward kernel, on host data
//   run_on(device, cpu, gpu)          the CPU build of the kernels (common/simt) or the GPU build
//
// One run, from a demo's main() to the kernel and back (chapter 05; the other chapters are the same
// with their own names):
//   main.cpp                  ch05::flash_attention_2(Q, K, V, options, device)
//   flash_attention_2.h       check_problem -> fa::device_problem: refuses what is not compiled
//                             fa::run_on(device, ...) -> cpu:: or gpu::run_flash_attention_2
//   flash_attention_2.cuh     run_flash_attention_2 -> fa::run_forward: Q, K, V to the device, O
//                             and L filled with NaN, then launch_flash_attention_2 ->
//                             fa::dispatch<kCompiled>: the kernel instance for head_dim and tile,
//                             launched by simt::launch; O, L and the time come back as a KernelRun
//
// A chapter's kernel source (.cuh) is compiled twice, by the host compiler through common/simt
// (namespace chNN::cpu) and by nvcc (chNN::gpu); both include this header through the chapter's
// host header, so it holds nothing nvcc cannot compile (no fmt: device_problem's messages are made
// in chapter.cpp).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
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
// Throws std::invalid_argument starting with `who` and saying what is accepted (chapter.cpp).
// Source: the kernels' template parameters and index arithmetic (chapters/0N_*/*.cuh).
DeviceProblem device_problem(std::string_view who, const AttentionShape& shape, std::optional<double> scale,
                             bool causal, Tile tile = {}, std::span<const KernelShape> compiled = {});

// A tile as Br x Bc, "64x32"; and "64x64, 32x64, 64x32", the tiles of `compiled` for head_dim (all
// of them when head_dim is 0), each once. Never throw (but for memory; chapter.cpp).
std::string tile_name(Tile tile);
std::string tile_list(std::span<const KernelShape> compiled, int head_dim = 0);

// Parses "64x32" (Br x Bc) into one of the tiles of `compiled`. Throws std::invalid_argument
// starting with "--tile TEXT:" and naming the tiles that are compiled (chapter.cpp).
Tile parse_tile(std::string_view text, std::span<const KernelShape> compiled);

// Calls launch.template operator()<shape>() for the shape of `compiled` whose head dim and tile are
// the problem's: the one place where a run-time problem meets a compile-time kernel instance.
//   fa::dispatch<kCompiled>(problem, [&]<fa::KernelShape k>() {
//     simt::launch<kernel<k.head_dim, k.tile.Br, k.tile.Bc>>(...);
//   });
// Throws std::invalid_argument when none matches (device_problem refuses such a problem first).
template <const auto& compiled, class Launch>
void dispatch(const DeviceProblem& problem, Launch&& launch) {
  const bool launched = [&]<std::size_t... n>(std::index_sequence<n...>) {
    return ((problem.head_dim == compiled[n].head_dim && problem.tile == compiled[n].tile &&
             (launch.template operator()<compiled[n]>(), true)) ||
            ...);
  }
  (std::make_index_sequence<compiled.size()>{});
  if (!launched) throw std::invalid_argument("dispatch: this head_dim and tile are not compiled");
}

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

// The run of a forward kernel on host data, the same for every chapter; a chapter's .cuh calls it
// with its backend's simt::DeviceBuffer and its launch. It copies Q, K and V to the device as
// Element (float, or a 16-bit type that holds their values exactly: chapter 06), fills O and L with
// NaN (DeviceBuffer::poison) so that an element the kernel does not write cannot pass for a result
// (and simt's race checker reports a read of one, common/simt/racecheck.h), calls
// launch(Q, K, V, O, L) with the device pointers (the launch waits for the kernel), and copies O
// (widened to float32, exactly) and L back. Q: [batch, heads, seq_len_q, head_dim], the shape O
// gets; K, V: [batch, heads, seq_len_k, head_dim]. Throws what launch and the buffers throw.
template <class Element, template <class> class DeviceBuffer, class Launch>
KernelRun run_forward(const Tensor4<float>& Q, const Tensor4<float>& K, const Tensor4<float>& V, const Launch& launch) {
  const auto to_device = [](const std::vector<float>& host) {
    if constexpr (std::is_same_v<Element, float>) {
      return DeviceBuffer<float>(std::span<const float>(host));
    } else {
      const std::vector<Element> elements(host.begin(), host.end());
      return DeviceBuffer<Element>(std::span<const Element>(elements));
    }
  };
  const DeviceBuffer<Element> q = to_device(Q.values), k = to_device(K.values), v = to_device(V.values);
  DeviceBuffer<Element> o(Q.values.size());
  DeviceBuffer<float> l(Q.shape.batch * Q.shape.heads * Q.shape.seq_len);
  o.poison();  // 0xff bytes: NaN in float, bf16 and fp16, and unwritten for simt's race checker
  l.poison();

  const auto start = std::chrono::steady_clock::now();
  launch(q.data(), k.data(), v.data(), o.data(), l.data());
  const std::chrono::duration<double, std::milli> elapsed = std::chrono::steady_clock::now() - start;

  const std::vector<Element> O = o.to_host();
  return {Tensor4<float>(Q.shape, std::vector<float>(O.begin(), O.end())), l.to_host(), elapsed.count()};
}

// Runs cpu() (the kernels of chNN::cpu, through common/simt) or, on Device::gpu, gpu() (chNN::gpu,
// compiled by nvcc) and returns what it returns. In a build without the GPU path gpu is never called
// (nor linked), and Device::gpu throws std::runtime_error saying why (require_device).
template <class Cpu, class Gpu>
auto run_on(Device device, Cpu&& cpu, [[maybe_unused]] Gpu&& gpu) {
  require_device(device);
#if FA_HAVE_CUDA
  if (device == Device::gpu) return gpu();
#endif
  return cpu();
}

}  // namespace fa
