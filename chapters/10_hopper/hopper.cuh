// Chapter 10: FlashAttention-3's forward design on Hopper's instructions.
//
// What changed since chapter 06: the algorithm is the same (the same m, l, acc, m_new, m_safe,
// rescale, the same causal mask, zeros and -inf for a row that sees no key); the machinery is
// Hopper's (Shah et al. 2024, FlashAttention-3, section 3.1):
//   - Warp specialisation: a block is three warpgroups (128 threads each). The first is the
//     producer: it lowers its registers (setmaxnreg.dec) and one of its threads issues every copy.
//     The other two are consumers, 64 query rows each: they raise their registers (setmaxnreg.inc)
//     and compute.
//   - Ping-pong (FA3 section 3.1): the two consumers take turns, through two named barriers, to
//     issue their S = Q K^T, so that on a GPU one's softmax runs under the other's GEMMs.
//   - Copies by TMA (cp.async.bulk.tensor) instead of cp.async: one thread moves a whole box of
//     64 columns (128 or 64 rows), which the hardware swizzles on its way into shared memory and zero-fills where it
//     lies past the tensor (the tail of seq_len_q or seq_len_k); the tensor map is 3D, [batch * heads]
//     [seq_len][head_dim], so that a box never reads the next head's rows.
//   - K_j and V_j travel through a ring of kStages stages. Each stage has a "full" mbarrier (the
//     producer's expect_tx, completed by the TMA's bytes) and an "empty" one (an arrival from each
//     of the consumers' 256 threads once it is done with the stage). FA3 Algorithm 1, lines 5-9
//     (producer) and 11-20 (consumer).
//   - S = Q_i K_j^T by wgmma with both operands in shared memory, read through matrix descriptors
//     (128-byte swizzle: the layout TMA wrote); O += P V_j by wgmma with P in registers as the A
//     operand (its accumulator layout is the A fragment's, as with mma.sync in chapter 06).
//   - One warpgroup owns 64 query rows (wgmma's M), four warps of 16: where a warp of chapter 06
//     held 32 rows as two mma tiles, here each warp holds 16 rows of the warpgroup's one tile.
//   - O_i leaves by TMA too (FA3's epilogue): each consumer writes its 64 rows of O_i into shared
//     memory, where its rows of Q_i were, swizzled as TMA laid Q_i out; then one of its threads
//     stores each box with one TMA store, which writes nothing past seq_len_q.
//
// The algorithm, for the block that owns query rows i0 .. i0+127 of head bh, with the line numbers of
// chapter 06 (Dao 2023, FlashAttention-2, Algorithm 1) and of FA3's Algorithm 1:
//   producer (FA3 lines 5-9):
//    4. Q_i by TMA (once), completed on q_full
//    7. for each key tile j: wait until stage j % kStages is empty; K_j, V_j by TMA into it,
//       completed on its full mbarrier
//   each consumer warpgroup, on its 64 rows (FA3 lines 11-20):
//    5. per row: m = -inf, l = 0, acc = 0 (acc: wgmma's accumulator fragments, HEAD_DIM / 2 a thread)
//    6. wait for Q_i; for each key tile j (skipping the tiles a causal mask hides entirely):
//         wait until stage j % kStages is full, and for this warpgroup's turn (ping-pong)
//    8.   S = Q_i K_j^T by wgmma (shared x shared); -inf where masked (keys >= seq_len_k, causal);
//         issued one tile ahead, in flight beside the previous tile's P V (FA3 Algorithm 2)
//    9.   m_new = max(m, rowmax(S)); P = exp(S - m_new); l = l exp(m - m_new) + rowsum(P)
//   10.   acc = acc exp(m - m_new) + P V_j by wgmma (P from registers); release the stage (empty);
//         m = m_new
//   12. O_i = acc / l (0 for a row that saw no key)
//   13. L_i = m + log(l) (-inf for such a row)
//   14. write O_i: the element type, two elements a shared store, into this warpgroup's rows of
//       Q_i (dead by then); fence.proxy.async; the warpgroup's named barrier; one thread stores
//       each box [64][64] by TMA (3D, so a box stops at its head's last row) and waits for its reads
//   15. write L_i (float32, plain stores)
//
// The exponentials are base 2, as in chapter 06, but the scale is applied to S before the max
// (s = S c with c = scale log2(e), then exp2(s - m)): one FMUL more a score than chapter 06's FFMA,
// and any finite scale works without moving it into Q_i (a TMA copy cannot scale on its way).
// L = m ln(2) + ln(l) turns it back to natural logarithms.
//
// Who holds what (PTX ISA, "Register Fragments" of wgmma .m64nNk16): thread `ct` of the consumer
// warpgroup, warp w = ct / 32, lane, g = lane / 4, t = lane % 4:
//   d[i] (accumulator, f32) = D[16 w + g + 8 ((i / 2) % 2)][8 (i / 4) + 2 t + i % 2]
//   a[j] (A from registers)  = A[16 w + g + 8 (j % 2)][8 (j / 2) + 2 t], two elements
// So a thread holds parts of rows 16 w + g and 16 w + g + 8, and the four threads of a quad hold
// whole rows: a row's max and sum combine with two xor-shuffles (lanes ^1, ^2), as in chapter 06.
//
// Shared memory (dynamic, 1024-byte aligned for the 128-byte swizzle's repeat), each 64-column half
// of a row of the head dim its own TMA box [rows][64] of 128-byte rows:
//   Q_i  [HEAD_DIM / 64][128][64]                         16 KiB a half (consumer wg: rows 64 wg ..)
//   K    [kStages][HEAD_DIM / 64][Bc][64], V the same     8 KiB a half a stage
//   O_i  consumer wg's 64 rows of each half of Q_i, once its last S = Q K^T is done (line 14)
// For HEAD_DIM = 128 that is 32 + 2 x 2 x 16 = 96 KiB (Hopper gives a block up to 227 KiB); O_i
// costs nothing more.
//
// Built three times, as every chapter's kernels are (ch10::cpu, ch10::cpu_profiled, ch10::gpu:
// fa::Builds, common/kernel_problem.h), the GPU build for sm_90a only. The pieces it shares with
// the FP8 kernel (hopper_fp8.cuh) are in hopper_common.cuh: the block's walk and barriers, line 8
// in the ping-pong's turn, line 9 on a tile, Algorithm 2's schedule of the tiles, lines 12-15.
//
// Source: Shah et al. 2024, FlashAttention-3 (arXiv:2407.08608), Algorithm 1, section 3.1 (producer
// and consumer warpgroups, setmaxnreg, the TMA ring); the PTX ISA, "Asynchronous Warpgroup Level
// Matrix Multiply-Accumulate Instructions" (wgmma, matrix descriptors, swizzles), "cp.async.bulk.tensor",
// "mbarrier", "setmaxnreg"; the CUDA Driver API, cuTensorMapEncodeTiled.
// Run the demo: build/default/bin/ch10_hopper
#pragma once

#include <array>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "chapters/10_hopper/hopper.h"
#include "chapters/10_hopper/hopper_common.cuh"  // kStages, kWarpgroup, ..., the pieces both kernels share
#include "common/simt/simt.h"

namespace ch10::SIMT_BACKEND {

// Bytes of dynamic shared memory a block asks for: Q_i, the ring, and 1024 for the alignment.
constexpr std::size_t shared_bytes(int head_dim, int Br, int Bc) {
  return 2u * static_cast<std::size_t>(head_dim) * (static_cast<std::size_t>(Br) + 2u * kStages * Bc) + kSwizzleRepeat;
}

// The wgmma of one element type (bf16 or fp16): A and B from shared memory (S = Q K^T), A from
// registers (O += P V), and the float pair -> element pair packing of P.
template <class Element>
struct ElementOps {
  static constexpr bool kBf16 = std::is_same_v<Element, simt::bf16>;
  __device__ static __forceinline__ std::uint32_t pack(float lo, float hi) { return pack_pair<Element>(lo, hi); }
  template <int N>
  __device__ static __forceinline__ void qk(float (&d)[N / 2], std::uint64_t a, std::uint64_t b, bool scale_d) {
    if constexpr (kBf16) {
      simt::wgmma_m64nNk16_bf16<N>(d, a, b, scale_d);
    } else {
      simt::wgmma_m64nNk16_f16<N>(d, a, b, scale_d);
    }
  }
  template <int N>
  __device__ static __forceinline__ void pv(float (&d)[N / 2], const std::uint32_t (&a)[4], std::uint64_t b) {
    if constexpr (kBf16) {
      simt::wgmma_m64nNk16_bf16<N, simt::Major::mn>(d, a, b, true);
    } else {
      simt::wgmma_m64nNk16_f16<N, simt::Major::mn>(d, a, b, true);
    }
  }
};

// Grid: (ceil(seq_len_q / Br), batch * heads); block: kThreads (the producer warpgroup, then the
// two consumers); dynamic shared memory: shared_bytes(HEAD_DIM, Br, Bc).
// map_q, map_k, map_v, map_o: 3D tensor maps of [batch * heads][seq_len][HEAD_DIM] Element, boxes
// of [Br, Bc or 64][64], 128-byte swizzle (launch_instance); map_o is O's, which the kernel writes.
// L: [batch * heads, seq_len_q], float32. scale_log2 = scale * log2(e), any finite value.
template <class Element, int HEAD_DIM, int Br, int Bc>
__global__ void __launch_bounds__(kThreads, 1)
    hopper_kernel(const __grid_constant__ simt::TensorMap map_q, const __grid_constant__ simt::TensorMap map_k,
                  const __grid_constant__ simt::TensorMap map_v, const __grid_constant__ simt::TensorMap map_o,
                  float* __restrict__ L, int seq_len_q, int seq_len_k, float scale_log2, bool causal) {
  static_assert(Br == 64 * kConsumers, "64 rows (wgmma's M) per consumer warpgroup");
  static_assert(HEAD_DIM % kBoxColumns == 0 && Bc % 16 == 0 && Bc <= 256, "whole boxes; wgmma's N is at most 256");
  constexpr int kHalves = HEAD_DIM / kBoxColumns;  // 128-byte boxes across a row of the head dim
  constexpr unsigned kQHalf = Br * kSwizzleBytes;  // bytes of one box of Q_i
  constexpr unsigned kKVHalf = Bc * kSwizzleBytes;
  constexpr unsigned kQBytes = kHalves * kQHalf;
  constexpr unsigned kKVBytes = kHalves * kKVHalf;  // K_j (V_j the same)
  using Ops = ElementOps<Element>;

  SIMT_DYNAMIC_SHARED(std::uint8_t, raw);
  __shared__ __align__(8) std::uint64_t q_full;
  __shared__ __align__(8) std::uint64_t full[kStages];
  __shared__ __align__(8) std::uint64_t empty[kStages];
  std::uint8_t* const Qs = aligned_shared(raw);
  const auto Ks = [&](int stage) { return Qs + kQBytes + 2u * kKVBytes * static_cast<unsigned>(stage); };
  const auto Vs = [&](int stage) { return Ks(stage) + kKVBytes; };

  const int tid = static_cast<int>(threadIdx.x);
  const BlockWalk walk = block_walk<Br, Bc>(seq_len_q, seq_len_k, causal);  // hopper_common.cuh: i0, bh, the tiles
  const int i0 = walk.i0, bh = walk.bh, num_tiles = walk.num_tiles, unmasked_keys = walk.unmasked_keys;
  auto visible = [&](int i) { return fa::visible_keys(i, seq_len_q, seq_len_k, causal); };

  init_barriers(tid, q_full, full, empty);  // hopper_common.cuh

  if (tid < kWarpgroup) {
    // ---- The producer warpgroup (FA3 Algorithm 1, lines 5-9) ----
    simt::setmaxnreg_dec<kProducerRegisters>();
    if (tid == 0) {
      // Line 4: Q_i, once; rows past seq_len_q arrive as zeros (and are never written back).
      simt::mbarrier_arrive_expect_tx(&q_full, kQBytes);
      for (int h = 0; h < kHalves; ++h) {
        simt::cp_async_bulk_tensor_3d_global_to_shared(Qs + h * kQHalf, &map_q, h * kBoxColumns, i0, bh, &q_full);
      }
      // Line 7: K_j and V_j into stage j % kStages once the consumer has released it. The wait on
      // "empty" of the first round is on the parity of the phase before phase 0, which counts as
      // completed: it passes at once (PTX ISA, "mbarrier.try_wait", phase parity).
      for (int j = 0; j < num_tiles; ++j) {
        const int s = j % kStages;
        // graded 10a: line 7, the producer: wait for stage s to be empty, announce its bytes, copy K_j, V_j in
        simt::mbarrier_wait_parity(&empty[s], ((j / kStages) & 1) ^ 1);
        simt::mbarrier_arrive_expect_tx(&full[s], 2 * kKVBytes);  // a box is counted whole, zeros included
        for (int h = 0; h < kHalves; ++h) {
          simt::cp_async_bulk_tensor_3d_global_to_shared(Ks(s) + h * kKVHalf, &map_k, h * kBoxColumns, j * Bc, bh,
                                                         &full[s]);
          simt::cp_async_bulk_tensor_3d_global_to_shared(Vs(s) + h * kKVHalf, &map_v, h * kBoxColumns, j * Bc, bh,
                                                         &full[s]);
        }
        // end graded
      }
    }
    return;
  }

  // ---- The consumer warpgroup (FA3 Algorithm 1, lines 11-20) ----
  simt::setmaxnreg_inc<kConsumerRegisters>();
  const int wg = tid / kWarpgroup - 1;  // which consumer: rows 64 wg .. 64 wg + 63 of the block
  const int ct = tid % kWarpgroup;
  const int warp = ct / 32;
  const int lane = ct % 32;
  const int g = lane / 4;  // this thread holds rows 16 warp + g and 16 warp + g + 8 of the tile
  const int t = lane % 4;  // ... columns 2t, 2t+1 of each 8-wide block
  const int row0 = 64 * wg + 16 * warp + g;
  std::uint8_t* const Qw = Qs + 64u * kSwizzleBytes * static_cast<unsigned>(wg);  // its 64 rows of each box

  // Line 5: the running state of this thread's two rows, [h]: row row0 + 8 h. m is the running max
  // of the scaled scores s = S c; l is this thread's part of the row sum (its own columns), the
  // quad's four parts added once, at the end. acc: the accumulator fragments of O_i.
  float m[2] = {-INFINITY, -INFINITY};
  float l[2] = {0.0f, 0.0f};
  float acc[HEAD_DIM / 2];
  SIMT_UNROLL
  for (int i = 0; i < HEAD_DIM / 2; ++i) acc[i] = 0.0f;
  const float c = scale_log2;

  // Ping-pong (FA3 section 3.1): the two consumers take turns to issue S = Q K^T, so that one's
  // softmax runs while the other's GEMMs do. Warpgroup 0 goes first: warpgroup 1 gives it its first
  // turn. Each bar.sync / bar.arrive counts both warpgroups' 256 threads (PTX ISA, "bar, barrier").
  // Warpgroup 1 hands back one turn fewer than it is given (none after its last tile), so that
  // every use of each barrier is complete when the block ends.
  if (wg == 1 && num_tiles > 0) simt::named_barrier_arrive(kTurn + 0, kConsumers * kWarpgroup);

  // Line 8: S = Q_i K_jj^T into `scores`, 16 columns of the head dim per wgmma, issued and committed
  // but not waited for. A = Q_i (64 x 16) and B = K_jj^T (16 x Bc) are both K-major: element
  // (row, k) of a 128B-swizzled box lies at row 128 + 2 k, swizzled; a descriptor moved 32 bytes
  // along the row reads the next 16 (the swizzle is applied to the address, so the start need not
  // be at a chunk's home). SBO = 1024: 8 rows of 128 bytes (PTX ISA, "Shared Memory Matrix Layout",
  // K-major with a 128-byte swizzle; LBO is unused there). Around it, the ping-pong's turn.
  auto issue_scores = [&](int jj, float(&scores)[Bc / 2]) {
    scores_in_turn(jj, num_tiles, wg, full, [&](int ss) {
      SIMT_UNROLL
      for (int kd = 0; kd < HEAD_DIM / 16; ++kd) {
        const unsigned at = (kd / 4) * kQHalf + 32u * (kd % 4);
        const unsigned kv_at = (kd / 4) * kKVHalf + 32u * (kd % 4);
        const std::uint64_t a = simt::make_wgmma_descriptor(Qw + at, simt::Swizzle::b128, 16, kSwizzleRepeat);
        const std::uint64_t b = simt::make_wgmma_descriptor(Ks(ss) + kv_at, simt::Swizzle::b128, 16, kSwizzleRepeat);
        Ops::template qk<Bc>(scores, a, b, kd > 0);
      }
    });
  };

  // Line 9 on tile jj, whose scores S holds (waited for): m_new, m_safe, rescale; P in place of S;
  // l rescaled and the tile's sum added. acc is left alone (its P V may still be in flight).
  float S[Bc / 2];
  float m_new[2], m_safe[2], rescale[2];
  const int visible_rows[2] = {visible(i0 + row0), visible(i0 + row0 + 8)};
  auto softmax = [&](int jj) {
    online_softmax<Bc>(S, c, jj * Bc + Bc > unmasked_keys, jj * Bc, visible_rows, t, m, l, m_new, m_safe, rescale);
  };

  // P as A from registers: columns 16 ks .. 16 ks + 15 of the accumulator, packed in pairs, are
  // exactly the A fragment of the next wgmma ("Who holds what", above), rounded to the
  // element type.
  std::uint32_t p[Bc / 16][4];
  auto pack_P = [&](std::uint32_t(&into)[Bc / 16][4]) {
    SIMT_UNROLL
    for (int ks = 0; ks < Bc / 16; ++ks) {
      into[ks][0] = Ops::pack(S[8 * ks], S[8 * ks + 1]);
      into[ks][1] = Ops::pack(S[8 * ks + 2], S[8 * ks + 3]);
      into[ks][2] = Ops::pack(S[8 * ks + 4], S[8 * ks + 5]);
      into[ks][3] = Ops::pack(S[8 * ks + 6], S[8 * ks + 7]);
    }
  };

  // Line 10: acc += P V_j from stage s, one commit group. B = V_j (Bc keys x HEAD_DIM) is N-major
  // (the head dim contiguous): element (key, n) at (n / 64) LBO + (key / 8) SBO + (key % 8) 128 +
  // (n % 64) 2, so LBO = one box (Bc rows of 128 bytes) and SBO = 1024; 16 keys further is 2048
  // bytes. A = p, read by the wgmma until the wait that covers it: p is not written before then.
  auto issue_pv = [&](int jj) {
    const int s = jj % kStages;
    simt::wgmma_fence_operand(acc);
    simt::wgmma_fence();
    SIMT_UNROLL
    for (int ks = 0; ks < Bc / 16; ++ks) {
      const std::uint64_t b = simt::make_wgmma_descriptor(Vs(s) + 16u * kSwizzleBytes * static_cast<unsigned>(ks),
                                                          simt::Swizzle::b128, kKVHalf, kSwizzleRepeat);
      Ops::template pv<HEAD_DIM>(acc, p[ks], b);
    }
    simt::wgmma_commit_group();
  };
  // Line 10 for tile jj, after its softmax: acc exp(m - m_new), before its P V (tile 0's acc is 0:
  // its rescale can wait); m = m_new.
  auto advance = [&](int jj) {
    if (jj > 0) {
      SIMT_UNROLL
      for (int i = 0; i < HEAD_DIM / 2; ++i) acc[i] *= rescale[(i / 2) % 2];
    }
    m[0] = m_new[0];
    m[1] = m_new[1];
  };
  // Lines 6-10 under FA3 Algorithm 2's schedule (hopper_common.cuh): S of tile j+1 in flight beside
  // P V_j, its softmax under P V_j.
  simt::mbarrier_wait_parity(&q_full, 0);  // Q_i has landed (phase 0)
  overlapped_tiles(
      num_tiles, S, acc, empty, [&](int jj) { issue_scores(jj, S); }, softmax, [&] { pack_P(p); }, issue_pv, advance);

  // Lines 12-15 (hopper_common.cuh, write_O_and_L): O_i through shared memory, where this
  // warpgroup's rows of Q_i were, by TMA; L_i. Q_i is dead: the last wgmma that read it (S of the
  // last tile) is in a group that this thread's last wgmma_wait_group<0> covers (with no tile,
  // only the TMA copy wrote Q_i, and q_full was waited for). The other warpgroup's rows are its own.
  write_O_and_L<Element, HEAD_DIM>(acc, l, m, 1.0f, Qw, kQHalf, row0 - 64 * wg, t, ct, wg, &map_o, i0 + 64 * wg, bh, L,
                                   i0 + row0, seq_len_q);
}

// One launch of a compiled instance, prepared for memory already on this backend's device: the
// kernel's shared-memory allowance asked for and the four tensor maps encoded (host calls, once);
// `launch` launches that instance with these arguments, waiting for it or only putting it on the
// stream as its mode says (common/simt/runtime/launch_mode.h). run_typed launches it once, the GPU
// benchmark (lab/gpu_bench.cpp, through prepare_hopper) many times, without the maps' encoding in
// its timed region. Grid: (ceil(seq_len_q / Br), batch * heads); block: kThreads. O's boxes are a
// consumer warpgroup's 64 rows.
struct Launch {
  void (*launch)(const Launch& arguments, simt::LaunchMode mode);
  std::array<simt::TensorMap, 4> maps;  // Q, K, V, O
  dim3 grid;
  std::size_t shared_bytes;
  float* L;
  int seq_len_q, seq_len_k;
  float scale_log2;
  bool causal;
};

template <class Element, fa::KernelShape k>
void launch_instance(const Launch& a, simt::LaunchMode mode) {
  constexpr auto kernel = hopper_kernel<Element, k.head_dim, k.tile.Br, k.tile.Bc>;
  simt::launch<kernel>(mode, a.grid, dim3(kThreads), a.shared_bytes, a.maps[0], a.maps[1], a.maps[2], a.maps[3], a.L,
                       a.seq_len_q, a.seq_len_k, a.scale_log2, a.causal);
}

template <class Element, fa::KernelShape k>
Launch prepare_instance(const void* Q, const void* K, const void* V, void* O, float* L, const DeviceProblem& p) {
  constexpr int Br = k.tile.Br, Bc = k.tile.Bc;
  constexpr std::size_t bytes = shared_bytes(k.head_dim, Br, Bc);
  simt::set_max_dynamic_shared_bytes<hopper_kernel<Element, k.head_dim, Br, Bc>>(bytes);
  return {&launch_instance<Element, k>,
          {tensor_map(static_cast<const Element*>(Q), p.batch_heads, p.seq_len_q, k.head_dim, Br),
           tensor_map(static_cast<const Element*>(K), p.batch_heads, p.seq_len_k, k.head_dim, Bc),
           tensor_map(static_cast<const Element*>(V), p.batch_heads, p.seq_len_k, k.head_dim, Bc),
           tensor_map(static_cast<const Element*>(O), p.batch_heads, p.seq_len_q, k.head_dim, Br / kConsumers)},
          dim3(static_cast<unsigned>((p.seq_len_q + Br - 1) / Br), static_cast<unsigned>(p.batch_heads)),
          bytes,
          L,
          p.seq_len_q,
          p.seq_len_k,
          static_cast<float>(static_cast<double>(p.scale) * 1.4426950408889634),  // scale * log2(e)
          p.causal};
}

// Every compiled instance's preparation for one element type, in kCompiled's order.
template <class Element, std::size_t... n>
constexpr auto instances(std::index_sequence<n...>) {
  return std::array{&prepare_instance<Element, kCompiled[n]>...};
}
template <class Element>
inline constexpr auto kInstances = instances<Element>(std::make_index_sequence<kCompiled.size()>{});

// The instance compiled for the problem's element type and head_dim (fa::compiled_index), prepared
// (prepare_instance), as hopper.h's Prepared. Throws what simt::make_tensor_map throws.
Prepared prepare_hopper(const void* Q, const void* K, const void* V, void* O, float* L, const DeviceProblem& problem) {
  const std::size_t n = fa::compiled_index(problem, kCompiled);
  const Launch a = problem.element == ElementType::bf16 ? kInstances<simt::bf16>[n](Q, K, V, O, L, problem)
                                                        : kInstances<simt::f16>[n](Q, K, V, O, L, problem);
  return [a](simt::LaunchMode mode) { a.launch(a, mode); };
}

// Host data in, host data out, for one element type: Q, K, V rounded to it on their way to the
// device (simt::to_device), O and L filled with NaN (poison: an element the kernel does not write
// cannot pass for a result), the launch of the instance for the head dim, O (widened to float32,
// exactly) and L back.
template <class Element>
Result run_typed(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                 const DeviceProblem& problem) {
  const auto q = simt::to_device<Element>(Q.values), k = simt::to_device<Element>(K.values),
             v = simt::to_device<Element>(V.values);
  auto o = simt::poisoned<Element>(Q.values.size());
  auto l = simt::poisoned<float>(static_cast<std::size_t>(problem.batch_heads) * problem.seq_len_q);
  const Launch launch = kInstances<Element>[fa::compiled_index(problem, kCompiled)](q.data(), k.data(), v.data(),
                                                                                    o.data(), l.data(), problem);
  const auto start = std::chrono::steady_clock::now();
  launch.launch(launch, simt::LaunchMode::synchronous);
  const double elapsed_ms = fa::milliseconds_since(start);
  return {fa::Tensor4<float>(Q.shape, simt::to_host_float(o)), l.to_host(), elapsed_ms};
}

// Host data in, host data out: the run for the problem's element type.
Result run_hopper(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                  const DeviceProblem& problem) {
  if (problem.element == ElementType::bf16) return run_typed<simt::bf16>(Q, K, V, problem);
  return run_typed<simt::f16>(Q, K, V, problem);
}

#if defined(__CUDACC__)
// wgmma and setmaxnreg exist on sm_90a only: the GPU build holds this kernel for sm_90a alone
// (CMakeLists.txt, CH10_SM90A), and a Hopper GPU (compute capability 9.0) is the only one it runs on.
void require_hopper() {
  int device = 0;
  cudaDeviceProp prop{};
  SIMT_CUDA_CHECK(cudaGetDevice(&device));
  SIMT_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
#if !CH10_SM90A
  throw std::runtime_error("chapter 10 needs its kernel built for sm_90a (CUDA 12.0 or newer); this build has none");
#endif
  if (prop.major != 9 || prop.minor != 0) {
    throw std::runtime_error("chapter 10 needs a Hopper GPU (compute capability 9.0, sm_90a); " +
                             std::string(prop.name) + " is " + std::to_string(prop.major) + "." +
                             std::to_string(prop.minor) + " (run it with --device cpu)");
  }
}
#endif

}  // namespace ch10::SIMT_BACKEND
