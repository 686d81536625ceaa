// The Hopper test kernels of common/simt (hopper.h), written once in ordinary CUDA: the host
// compiler builds them through common/simt (simt_hopper_test.cpp), nvcc for the GPU
// (simt_hopper_gpu_runs.cu, sm_90a). Include in ONE translation unit per backend and program.
//
// The kernels know nothing of the layouts: the host writes the shared-memory image of A and B
// (where each element lies, from the PTX ISA's figures: simt_hopper_reference.h) or the global
// matrices a TMA box is cut from, and every thread hands back its accumulator registers; the tests
// decide what each register holds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/simt/simt.h"
#include "simt_hopper_runs.h"

namespace simt_hopper_test::SIMT_BACKEND {

// The dynamic shared memory of a kernel, moved on to the next 1024-byte boundary of the shared
// address space (the repeat of the 128-byte swizzle). On the CPU the base is one already; on a
// GPU the launch asks for 1024 bytes more.
__device__ __forceinline__ std::uint8_t* aligned_shared(std::uint8_t* base) {
  const std::uint32_t address = simt::shared_address(base);
  return base + (1024u - address % 1024u) % 1024u;
}

// Thread 0 initialises the mbarrier for `count` arrivals and fences the init; the other threads
// pass. The __syncthreads() that makes it safe for them to use it is the caller's.
__device__ __forceinline__ void init_mbarrier(std::uint64_t* bar, unsigned count) {
  if (threadIdx.x == 0) {
    simt::mbarrier_init(bar, count);
    simt::fence_mbarrier_init();
  }
}

// The same for a ring of `stages` stages: full[s] for the producer's one arrival, empty[s] for
// the arrivals of the 128 threads of the consumer warpgroup.
__device__ __forceinline__ void init_ring(std::uint64_t* full, std::uint64_t* empty, int stages) {
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) {
      simt::mbarrier_init(&full[s], 1);
      simt::mbarrier_init(&empty[s], 128);
    }
    simt::fence_mbarrier_init();
  }
}

// One FP8 wgmma (.m64nNk32) of the types: A from desc_a, or from the registers ra.
template <int N, simt::Major major_a, simt::Major major_b, Fp8Types types, bool a_in_registers>
__device__ __forceinline__ void wgmma_fp8(float (&d)[N / 2], const std::uint32_t (&ra)[4], std::uint64_t desc_a,
                                          std::uint64_t desc_b, bool scale_d) {
  using enum Fp8Types;
  if constexpr (a_in_registers) {
    if constexpr (types == e4m3) simt::wgmma_m64nNk32_e4m3<N, major_b>(d, ra, desc_b, scale_d);
    if constexpr (types == e5m2) simt::wgmma_m64nNk32_e5m2<N, major_b>(d, ra, desc_b, scale_d);
    if constexpr (types == e4m3_e5m2) simt::wgmma_m64nNk32_e4m3_e5m2<N, major_b>(d, ra, desc_b, scale_d);
    if constexpr (types == e5m2_e4m3) simt::wgmma_m64nNk32_e5m2_e4m3<N, major_b>(d, ra, desc_b, scale_d);
  } else {
    if constexpr (types == e4m3) simt::wgmma_m64nNk32_e4m3<N, major_a, major_b>(d, desc_a, desc_b, scale_d);
    if constexpr (types == e5m2) simt::wgmma_m64nNk32_e5m2<N, major_a, major_b>(d, desc_a, desc_b, scale_d);
    if constexpr (types == e4m3_e5m2) simt::wgmma_m64nNk32_e4m3_e5m2<N, major_a, major_b>(d, desc_a, desc_b, scale_d);
    if constexpr (types == e5m2_e4m3) simt::wgmma_m64nNk32_e5m2_e4m3<N, major_a, major_b>(d, desc_a, desc_b, scale_d);
  }
}

// D = A B + C by one wgmma (or k_steps of them, each reading 32 bytes further along K in both
// operands' descriptors when those are K-major): A and B from the shared-memory image, or A from
// registers (a_regs: 4 per thread, thread-major). c and d_out: N / 2 per thread, thread-major.
// bf16 or f16 when fp8 is none, else the FP8 types.
template <int N, simt::Major major_a, simt::Major major_b, bool bf16, bool a_in_registers,
          Fp8Types fp8 = Fp8Types::none>
__global__ void wgmma_kernel(const std::uint32_t* __restrict__ image, unsigned image_words, OperandLayout a,
                             OperandLayout b, const std::uint32_t* __restrict__ a_regs, const float* __restrict__ c,
                             bool scale_d, float* __restrict__ d_out) {
  SIMT_DYNAMIC_SHARED(std::uint8_t, raw);
  std::uint8_t* smem = aligned_shared(raw);
  const unsigned t = threadIdx.x;
  for (unsigned i = t; i < image_words; i += blockDim.x) reinterpret_cast<std::uint32_t*>(smem)[i] = image[i];
  simt::fence_proxy_async_shared_cta();  // the generic proxy's stores, seen by wgmma (the async proxy)
  __syncthreads();
  float d[N / 2];
  for (int i = 0; i < N / 2; ++i) d[i] = c[t * (N / 2) + i];
  std::uint32_t ra[4];
  for (int i = 0; i < 4; ++i) ra[i] = a_in_registers ? a_regs[t * 4 + i] : 0u;
  const std::uint64_t desc_a = simt::make_wgmma_descriptor(smem + a.offset, a.swizzle, a.lbo, a.sbo);
  const std::uint64_t desc_b = simt::make_wgmma_descriptor(smem + b.offset, b.swizzle, b.lbo, b.sbo);
  simt::wgmma_fence_operand(d);
  simt::wgmma_fence();
  if constexpr (fp8 != Fp8Types::none) {
    wgmma_fp8<N, major_a, major_b, fp8, a_in_registers>(d, ra, desc_a, desc_b, scale_d);
  } else if constexpr (a_in_registers) {
    if constexpr (bf16) {
      simt::wgmma_m64nNk16_bf16<N, major_b>(d, ra, desc_b, scale_d);
    } else {
      simt::wgmma_m64nNk16_f16<N, major_b>(d, ra, desc_b, scale_d);
    }
  } else {
    if constexpr (bf16) {
      simt::wgmma_m64nNk16_bf16<N, major_a, major_b>(d, desc_a, desc_b, scale_d);
    } else {
      simt::wgmma_m64nNk16_f16<N, major_a, major_b>(d, desc_a, desc_b, scale_d);
    }
  }
  simt::wgmma_commit_group();
  simt::wgmma_wait_group<0>();
  simt::wgmma_fence_operand(d);
  for (int i = 0; i < N / 2; ++i) d_out[t * (N / 2) + i] = d[i];
}

// TMA, then wgmma: thread 0 starts every box of plan_a (from map_a) and plan_b (from map_b),
// expecting their bytes on one mbarrier; everybody waits on its phase 0, then the warpgroup runs
// plan.k_steps wgmma (D = sum over the steps of A_s B_s, A_s and B_s the descriptors moved on by
// k_step_bytes), one commit, one wait.
template <int N, simt::Major major_b, bool bf16>
__global__ void tma_wgmma_kernel(const __grid_constant__ simt::TensorMap map_a,
                                 const __grid_constant__ simt::TensorMap map_b, TmaPlan plan_a, TmaPlan plan_b,
                                 OperandLayout a, OperandLayout b, int k_steps, unsigned k_step_bytes_a,
                                 unsigned k_step_bytes_b, float* __restrict__ d_out) {
  SIMT_DYNAMIC_SHARED(std::uint8_t, raw);
  __shared__ __align__(8) std::uint64_t full;
  std::uint8_t* smem = aligned_shared(raw);
  const unsigned t = threadIdx.x;
  init_mbarrier(&full, 1);
  __syncthreads();
  if (t == 0) {
    simt::mbarrier_arrive_expect_tx(&full, plan_a.bytes + plan_b.bytes);
    for (int i = 0; i < plan_a.count; ++i) {
      simt::cp_async_bulk_tensor_2d_global_to_shared(smem + plan_a.dst[i], &map_a, plan_a.c0[i], plan_a.c1[i], &full);
    }
    for (int i = 0; i < plan_b.count; ++i) {
      simt::cp_async_bulk_tensor_2d_global_to_shared(smem + plan_b.dst[i], &map_b, plan_b.c0[i], plan_b.c1[i], &full);
    }
  }
  simt::mbarrier_wait_parity(&full, 0);
  float d[N / 2];
  for (int i = 0; i < N / 2; ++i) d[i] = 0.0f;
  simt::wgmma_fence_operand(d);
  simt::wgmma_fence();
  for (int s = 0; s < k_steps; ++s) {
    const std::uint64_t desc_a =
        simt::make_wgmma_descriptor(smem + a.offset + s * k_step_bytes_a, a.swizzle, a.lbo, a.sbo);
    const std::uint64_t desc_b =
        simt::make_wgmma_descriptor(smem + b.offset + s * k_step_bytes_b, b.swizzle, b.lbo, b.sbo);
    if constexpr (bf16) {
      simt::wgmma_m64nNk16_bf16<N, simt::Major::k, major_b>(d, desc_a, desc_b, s > 0);
    } else {
      simt::wgmma_m64nNk16_f16<N, simt::Major::k, major_b>(d, desc_a, desc_b, s > 0);
    }
  }
  simt::wgmma_commit_group();
  simt::wgmma_wait_group<0>();
  simt::wgmma_fence_operand(d);
  for (int i = 0; i < N / 2; ++i) d_out[t * (N / 2) + i] = d[i];
}

// One TMA load (rank 2 or 3) into shared memory; then every thread copies shared memory out, as it
// is (the swizzled image), `bytes` of it.
__global__ void tma_load_kernel(const __grid_constant__ simt::TensorMap map, unsigned rank, int c0, int c1, int c2,
                                unsigned bytes, std::uint8_t* __restrict__ out) {
  SIMT_DYNAMIC_SHARED(std::uint8_t, raw);
  __shared__ __align__(8) std::uint64_t full;
  std::uint8_t* smem = aligned_shared(raw);
  const unsigned t = threadIdx.x;
  init_mbarrier(&full, 1);
  if (t == 0) {
    simt::mbarrier_arrive_expect_tx(&full, bytes);
    if (rank == 2) {
      simt::cp_async_bulk_tensor_2d_global_to_shared(smem, &map, c0, c1, &full);
    } else {
      simt::cp_async_bulk_tensor_3d_global_to_shared(smem, &map, c0, c1, c2, &full);
    }
  }
  __syncthreads();
  simt::mbarrier_wait_parity(&full, 0);
  for (unsigned i = t; i < bytes; i += blockDim.x) out[i] = smem[i];
}

// Shared memory filled with `image` by ordinary stores, then one TMA store (rank 2 or 3) of the box
// at (c0, c1[, c2]) by thread 0, committed and waited for.
__global__ void tma_store_kernel(const __grid_constant__ simt::TensorMap map, unsigned rank, int c0, int c1, int c2,
                                 const std::uint8_t* __restrict__ image, unsigned bytes) {
  SIMT_DYNAMIC_SHARED(std::uint8_t, raw);
  std::uint8_t* smem = aligned_shared(raw);
  const unsigned t = threadIdx.x;
  for (unsigned i = t; i < bytes; i += blockDim.x) smem[i] = image[i];
  simt::fence_proxy_async_shared_cta();  // the stores above, seen by the TMA unit (the async proxy)
  __syncthreads();
  if (t == 0) {
    if (rank == 2) {
      simt::cp_async_bulk_tensor_2d_shared_to_global(&map, c0, c1, smem);
    } else {
      simt::cp_async_bulk_tensor_3d_shared_to_global(&map, c0, c1, c2, smem);
    }
    simt::cp_async_bulk_commit_group();
    simt::cp_async_bulk_wait_group<0>();
  }
}

// An mbarrier through two phases. 64 threads: each writes its slot, arrives; all wait on phase 0
// and read their neighbour's slot; then again for phase 1 with new values. Before anything,
// try_wait on parity 1 (the phase "before" phase 0) passes at once: passed_at_once[t] = 1.
__global__ void mbarrier_phases_kernel(unsigned* __restrict__ passed_at_once, unsigned* __restrict__ seen) {
  __shared__ __align__(8) std::uint64_t bar;
  __shared__ unsigned slots[64];
  const unsigned t = threadIdx.x, n = blockDim.x;
  if (t == 0) simt::mbarrier_init(&bar, n);
  simt::fence_mbarrier_init();
  __syncthreads();
  passed_at_once[t] = simt::mbarrier_try_wait_parity(&bar, 1) ? 1u : 0u;
  for (unsigned phase = 0; phase < 2; ++phase) {
    slots[t] = 100 * (phase + 1) + t;
    simt::mbarrier_arrive(&bar);
    simt::mbarrier_wait_parity(&bar, phase);
    seen[phase * n + t] = slots[(t + 1) % n];
    __syncthreads();  // every thread has read its neighbour before the slots change
  }
}

// Producer and consumers on a ring of `stages` slots, as FlashAttention-3 runs them: warp 0's lane 0
// produces `items` values (item i into slot i % stages), waiting on the slot's "empty" barrier and
// arriving on its "full" one; the 4 warps of warpgroup 1 wait on "full", sum the slot into their
// total, and release "empty". out[t - 128] = the consumer's total. __launch_bounds__ tells ptxas
// the register count at entry, without which it ignores setmaxnreg.
__global__ void __launch_bounds__(256, 1) producer_consumer_kernel(int items, int stages, float* __restrict__ out) {
  __shared__ __align__(8) std::uint64_t full[4];
  __shared__ __align__(8) std::uint64_t empty[4];
  __shared__ float slot[4][128];
  const unsigned t = threadIdx.x;
  init_ring(full, empty, stages);
  __syncthreads();
  if (t < 128) {
    simt::setmaxnreg_dec<40>();
    if (t == 0) {
      for (int i = 0; i < items; ++i) {
        const int s = i % stages;
        simt::mbarrier_wait_parity(&empty[s], ((i / stages) & 1) ^ 1);  // the first round passes at once
        for (int j = 0; j < 128; ++j) slot[s][j] = static_cast<float>(i * 1000 + j);
        simt::mbarrier_arrive(&full[s]);
      }
    }
  } else {
    simt::setmaxnreg_inc<232>();
    float total = 0.0f;
    for (int i = 0; i < items; ++i) {
      const int s = i % stages;
      simt::mbarrier_wait_parity(&full[s], (i / stages) & 1);
      total += slot[s][t - 128];
      simt::mbarrier_arrive(&empty[s]);
    }
    out[t - 128] = total;
  }
}

// Two consumer warpgroups take turns through named barriers 1 and 2, as FlashAttention-3's
// ping-pong does: warpgroup g waits at barrier 1 + g for its turn (its own 128 threads and the
// other warpgroup's 128 arrivals) and hands over by arriving at the other one. Warpgroup 1 hands
// warpgroup 0 the first turn. Each turn the warpgroup's thread 0 appends its number to `order`,
// which must read 0, 1, 0, 1, ...
__global__ void ping_pong_kernel(int turns, int* __restrict__ order) {
  __shared__ int position;
  const unsigned t = threadIdx.x, group = t / 128, mine = 1 + group, other = 2 - group;
  if (t == 0) position = 0;
  __syncthreads();
  if (group == 1) simt::named_barrier_arrive(1, 256);  // warpgroup 0 takes the first turn
  for (int turn = 0; turn < turns; ++turn) {
    simt::named_barrier_sync(mine, 256);  // the other warpgroup has handed over
    if (t % 128 == 0) order[position++] = static_cast<int>(group);
    if (group == 0 || turn + 1 < turns) simt::named_barrier_arrive(other, 256);  // hand over
  }
}

// The shape of chapter 10's kernel, without the softmax: O = (Q K^T) V for 64 queries and
// `tiles` tiles of 64 keys, head dim 64, bf16. Warpgroup 0 is the producer: its thread 0 loads Q
// once and each K_j, V_j by TMA (128B swizzle) into a ring of `stages` stages, each with a "full"
// and an "empty" mbarrier. Warpgroup 1 consumes: S = Q K_j^T by wgmma from shared memory (4 k-steps
// of 16 along the head dim, the descriptors moved 32 bytes each), S packed to bf16 in registers as
// the A operand of O += S V_j (4 k-steps along the keys; V_j N-major), then releases the stage.
// out: O as the consumers' registers (32 per thread, thread-major).
__global__ void __launch_bounds__(256, 1)
    gemm_pipeline_kernel(const __grid_constant__ simt::TensorMap map_q, const __grid_constant__ simt::TensorMap map_k,
                         const __grid_constant__ simt::TensorMap map_v, int tiles, int stages,
                         float* __restrict__ out) {
  constexpr unsigned tile_bytes = 64 * 64 * 2;  // 8 KiB: 64 rows of 128 bytes
  SIMT_DYNAMIC_SHARED(std::uint8_t, raw);
  __shared__ __align__(8) std::uint64_t q_full;
  __shared__ __align__(8) std::uint64_t full[2];
  __shared__ __align__(8) std::uint64_t empty[2];
  std::uint8_t* smem = aligned_shared(raw);
  std::uint8_t* q = smem;
  const auto k_tile = [&](int s) { return smem + tile_bytes * (1 + 2 * s); };
  const auto v_tile = [&](int s) { return smem + tile_bytes * (2 + 2 * s); };
  const unsigned t = threadIdx.x;
  if (t == 0) simt::mbarrier_init(&q_full, 1);
  init_ring(full, empty, stages);  // its fence covers q_full's init too: the same thread, before it
  __syncthreads();
  if (t < 128) {  // the producer warpgroup
    simt::setmaxnreg_dec<40>();
    if (t == 0) {
      simt::mbarrier_arrive_expect_tx(&q_full, tile_bytes);
      simt::cp_async_bulk_tensor_2d_global_to_shared(q, &map_q, 0, 0, &q_full);
      for (int j = 0; j < tiles; ++j) {
        const int s = j % stages;
        simt::mbarrier_wait_parity(&empty[s], ((j / stages) & 1) ^ 1);  // the first round passes at once
        simt::mbarrier_arrive_expect_tx(&full[s], 2 * tile_bytes);
        simt::cp_async_bulk_tensor_2d_global_to_shared(k_tile(s), &map_k, 0, 64 * j, &full[s]);
        simt::cp_async_bulk_tensor_2d_global_to_shared(v_tile(s), &map_v, 0, 64 * j, &full[s]);
      }
    }
    return;
  }
  simt::setmaxnreg_inc<232>();  // the consumer warpgroup
  float o[32];
  for (int i = 0; i < 32; ++i) o[i] = 0.0f;
  simt::mbarrier_wait_parity(&q_full, 0);
  for (int j = 0; j < tiles; ++j) {
    const int s = j % stages;
    simt::mbarrier_wait_parity(&full[s], (j / stages) & 1);
    float S[32];
    simt::wgmma_fence();
    for (int k = 0; k < 4; ++k) {  // S = Q K_j^T: both K-major, 16 of the head dim per step
      const std::uint64_t a = simt::make_wgmma_descriptor(q + 32 * k, simt::Swizzle::b128, 16, 1024);
      const std::uint64_t b = simt::make_wgmma_descriptor(k_tile(s) + 32 * k, simt::Swizzle::b128, 16, 1024);
      simt::wgmma_m64nNk16_bf16<64>(S, a, b, k > 0);
    }
    simt::wgmma_commit_group();
    simt::wgmma_wait_group<0>();
    simt::wgmma_fence_operand(S);
    simt::wgmma_fence_operand(o);
    simt::wgmma_fence();
    for (int c = 0; c < 4; ++c) {  // O += S V_j: S from registers, 16 keys per step; V_j N-major
      const std::uint32_t a[4] = {
          simt::pack_bf16x2(S[8 * c], S[8 * c + 1]), simt::pack_bf16x2(S[8 * c + 2], S[8 * c + 3]),
          simt::pack_bf16x2(S[8 * c + 4], S[8 * c + 5]), simt::pack_bf16x2(S[8 * c + 6], S[8 * c + 7])};
      const std::uint64_t b = simt::make_wgmma_descriptor(v_tile(s) + 2048 * c, simt::Swizzle::b128, 8192, 1024);
      simt::wgmma_m64nNk16_bf16<64, simt::Major::mn>(o, a, b, true);
    }
    simt::wgmma_commit_group();
    simt::wgmma_wait_group<0>();
    simt::wgmma_fence_operand(o);
    simt::mbarrier_arrive(&empty[s]);  // this thread is done with stage s
  }
  for (int i = 0; i < 32; ++i) out[(t - 128) * 32 + i] = o[i];
}

// ---- Kernels that break the rules: run on the CPU only, to check what it shows -------------------

// Two wgmma groups in flight at once, as FlashAttention-3 overlaps the next S = Q K^T with this
// tile's softmax: D = A B into acc0 (group 0) and into acc1 (group 1); early = acc0 before any
// wait, then wgmma_wait_group<1> (group 0 done): mid0 = acc0, mid1 = acc1 (still in flight); then
// wgmma_wait_group<0>: final1 = acc1. Reading an accumulator in flight is undefined on a GPU; the
// CPU shows wgmma_pending_bits there. 64 registers per thread each, for N = 128.
__global__ void wgmma_groups_kernel(const std::uint32_t* __restrict__ image, unsigned image_words, OperandLayout a,
                                    OperandLayout b, float* __restrict__ early, float* __restrict__ mid0,
                                    float* __restrict__ mid1, float* __restrict__ final1) {
  SIMT_DYNAMIC_SHARED(std::uint8_t, raw);
  std::uint8_t* smem = aligned_shared(raw);
  const unsigned t = threadIdx.x;
  for (unsigned i = t; i < image_words; i += blockDim.x) reinterpret_cast<std::uint32_t*>(smem)[i] = image[i];
  simt::fence_proxy_async_shared_cta();
  __syncthreads();
  const std::uint64_t desc_a = simt::make_wgmma_descriptor(smem + a.offset, a.swizzle, a.lbo, a.sbo);
  const std::uint64_t desc_b = simt::make_wgmma_descriptor(smem + b.offset, b.swizzle, b.lbo, b.sbo);
  float acc0[64], acc1[64];
  simt::wgmma_fence();
  simt::wgmma_m64nNk16_bf16<128>(acc0, desc_a, desc_b, false);
  simt::wgmma_commit_group();
  simt::wgmma_fence();
  simt::wgmma_m64nNk16_bf16<128>(acc1, desc_a, desc_b, false);
  simt::wgmma_commit_group();
  for (int i = 0; i < 64; ++i) early[t * 64 + i] = acc0[i];
  simt::wgmma_wait_group<1>();
  for (int i = 0; i < 64; ++i) mid0[t * 64 + i] = acc0[i];
  for (int i = 0; i < 64; ++i) mid1[t * 64 + i] = acc1[i];
  simt::wgmma_wait_group<0>();
  for (int i = 0; i < 64; ++i) final1[t * 64 + i] = acc1[i];
}

// mode 0: no wgmma_fence; 1: d written between the wgmma and its wait; 2: no wait before the end;
// 3: threads 64..127 skip the wgmma; 4: the descriptor of A in static __shared__ memory; 5: a
// 128B-swizzled descriptor 256 bytes into its pattern; 6: threads give different descriptors.
__global__ void wgmma_misuse_kernel(int mode, float* __restrict__ out) {
  SIMT_DYNAMIC_SHARED(std::uint8_t, smem);
  __shared__ __align__(1024) std::uint8_t tile[2048];
  const unsigned t = threadIdx.x;
  for (unsigned i = t; i < 4096; i += blockDim.x) smem[i] = 0;
  __syncthreads();
  float d[8] = {};
  const std::uint8_t* a = mode == 4 ? tile : mode == 5 ? smem + 256 : smem;
  const simt::Swizzle swizzle = mode == 5 ? simt::Swizzle::b128 : simt::Swizzle::none;
  std::uint64_t desc_a = simt::make_wgmma_descriptor(a, swizzle, 128, 256);
  if (mode == 6 && t == 77) desc_a += 1;
  const std::uint64_t desc_b = simt::make_wgmma_descriptor(smem + 2048, simt::Swizzle::none, 128, 256);
  if (mode != 0) simt::wgmma_fence();
  if (mode != 3 || t < 64) simt::wgmma_m64nNk16_bf16<16>(d, desc_a, desc_b, false);
  simt::wgmma_commit_group();
  if (mode == 1) d[3] *= 2.0f;  // as a rescale of the accumulator would, before the wait
  if (mode != 2) simt::wgmma_wait_group<0>();
  out[t] = d[0];
}

// mode 0: wait on the parity of the phase that never completes (phase 0 needs 2 arrivals, 1
// comes); 1: expect_tx of 256 bytes, a copy of 128; 2: an mbarrier never initialised (in dynamic
// shared memory, poisoned); 3: a named barrier given 128 by the even threads and 64 by the odd
// ones; 4: a named barrier for 128 threads that 64 reach; 5: a second arrive_expect_tx on a phase
// of one arrival that still waits for its bytes (a producer that does not wait on "empty").
__global__ void barrier_misuse_kernel(int mode, const __grid_constant__ simt::TensorMap map, float* __restrict__ out) {
  SIMT_DYNAMIC_SHARED(std::uint8_t, smem);
  __shared__ __align__(8) std::uint64_t bar;
  const unsigned t = threadIdx.x;
  if (t == 0 && mode != 2) simt::mbarrier_init(&bar, mode == 0 ? 2 : 1);
  __syncthreads();
  if (mode == 0) {
    if (t == 0) simt::mbarrier_arrive(&bar);
    simt::mbarrier_wait_parity(&bar, 0);
  } else if (mode == 1) {
    if (t == 0) {
      simt::mbarrier_arrive_expect_tx(&bar, 256);
      simt::cp_async_bulk_tensor_2d_global_to_shared(smem, &map, 0, 0, &bar);
    }
    simt::mbarrier_wait_parity(&bar, 0);
  } else if (mode == 2) {
    simt::mbarrier_arrive(reinterpret_cast<std::uint64_t*>(smem + 512));
  } else if (mode == 3) {
    simt::named_barrier_sync(3, t % 2 == 0 ? 128 : 64);
  } else if (mode == 5) {
    if (t == 0) {
      simt::mbarrier_arrive_expect_tx(&bar, 128);
      simt::mbarrier_arrive_expect_tx(&bar, 128);
    }
  } else {
    if (t < 64) simt::named_barrier_sync(4, 128);
  }
  out[t] = 1.0f;
}

// ---- Runners (declared in simt_hopper_runs.h) -----------------------------------------------------

template <int N, simt::Major major_a, simt::Major major_b, bool bf16, bool a_in_registers,
          Fp8Types fp8 = Fp8Types::none>
std::vector<float> run_wgmma(const WgmmaProblemImage& p) {
  simt::DeviceBuffer<std::uint32_t> image(p.image),
      a_regs(p.a_registers.empty() ? std::vector<std::uint32_t>(512, 0u) : p.a_registers);
  simt::DeviceBuffer<float> c(p.c), d(128 * N / 2);
  const std::size_t bytes = p.image.size() * 4 + 1024;
  using Kernel = decltype(&wgmma_kernel<N, major_a, major_b, bf16, a_in_registers, fp8>);
  constexpr Kernel kernel = &wgmma_kernel<N, major_a, major_b, bf16, a_in_registers, fp8>;
  simt::set_max_dynamic_shared_bytes<kernel>(bytes);
  simt::launch<kernel>(dim3(1), dim3(128), bytes, image.data(), static_cast<unsigned>(p.image.size()), p.a, p.b,
                       a_regs.data(), c.data(), p.scale_d, d.data());
  return d.to_host();
}

template <int N, bool bf16, bool a_in_registers>
std::vector<float> run_wgmma_majors(const WgmmaProblemImage& p) {
  using simt::Major;
  if (p.major_a == Major::k && p.major_b == Major::k) return run_wgmma<N, Major::k, Major::k, bf16, a_in_registers>(p);
  if (p.major_a == Major::k) return run_wgmma<N, Major::k, Major::mn, bf16, a_in_registers>(p);
  if (p.major_b == Major::k) return run_wgmma<N, Major::mn, Major::k, bf16, a_in_registers>(p);
  return run_wgmma<N, Major::mn, Major::mn, bf16, a_in_registers>(p);
}

template <int N>
std::vector<float> run_wgmma_n(const WgmmaProblemImage& p) {
  if (p.bf16) {
    return p.a_registers.empty() ? run_wgmma_majors<N, true, false>(p) : run_wgmma_majors<N, true, true>(p);
  }
  return p.a_registers.empty() ? run_wgmma_majors<N, false, false>(p) : run_wgmma_majors<N, false, true>(p);
}

// FP8: both operands K-major (an N-major B, on the CPU only, to see the emulation refuse it: it
// does not compile for the GPU).
template <int N, Fp8Types types>
std::vector<float> run_wgmma_fp8(const WgmmaProblemImage& p) {
  using simt::Major;
#if !defined(__CUDACC__)
  if (p.major_b == Major::mn) return run_wgmma<N, Major::k, Major::mn, false, false, types>(p);
#endif
  return p.a_registers.empty() ? run_wgmma<N, Major::k, Major::k, false, false, types>(p)
                               : run_wgmma<N, Major::k, Major::k, false, true, types>(p);
}

// e4m3 at every N; the other types at 64 and 256 (each instantiation is a kernel for nvcc).
template <int N>
std::vector<float> run_wgmma_fp8_n(const WgmmaProblemImage& p) {
  if (p.fp8 == Fp8Types::e4m3) return run_wgmma_fp8<N, Fp8Types::e4m3>(p);
  if constexpr (N == 64 || N == 256) {
    if (p.fp8 == Fp8Types::e5m2) return run_wgmma_fp8<N, Fp8Types::e5m2>(p);
    if (p.fp8 == Fp8Types::e4m3_e5m2) return run_wgmma_fp8<N, Fp8Types::e4m3_e5m2>(p);
    return run_wgmma_fp8<N, Fp8Types::e5m2_e4m3>(p);
  }
  throw std::invalid_argument("simt_hopper_test: FP8 types other than e4m3 run at N = 64 and 256 only");
}

// The run of p.n among the N of hopper.h.
template <int... Ns>
std::vector<float> wgmma_fp8_any_n(const WgmmaProblemImage& p, std::integer_sequence<int, Ns...>) {
  std::vector<float> d;
  if (!((p.n == Ns && (d = run_wgmma_fp8_n<Ns>(p), true)) || ...)) {
    throw std::invalid_argument("simt_hopper_test: no FP8 wgmma of N = " + std::to_string(p.n));
  }
  return d;
}

std::vector<float> wgmma(const WgmmaProblemImage& p) {
  if (p.fp8 != Fp8Types::none) {
    return wgmma_fp8_any_n(p, std::integer_sequence<int, 8, 16, 32, 64, 96, 128, 192, 256>{});
  }
  switch (p.n) {
    case 64:
      return run_wgmma_n<64>(p);
    case 128:
      return run_wgmma_n<128>(p);
    case 256:
      return run_wgmma_n<256>(p);
    default:
      return run_wgmma_n<16>(p);
  }
}

template <int N, simt::Major major_b, bool bf16>
std::vector<float> run_tma_wgmma(const TmaProblem& p) {
  simt::DeviceBuffer<std::uint16_t> a(p.a), b(p.b);
  simt::DeviceBuffer<float> d(128 * N / 2);
  // The maps read the device copies of A and B.
  const simt::TensorMap map_a = simt::make_tensor_map_2d(a.data(), p.shape_a.cols, p.shape_a.rows, p.shape_a.cols,
                                                         p.shape_a.box_cols, p.shape_a.box_rows, p.shape_a.swizzle);
  const simt::TensorMap map_b = simt::make_tensor_map_2d(b.data(), p.shape_b.cols, p.shape_b.rows, p.shape_b.cols,
                                                         p.shape_b.box_cols, p.shape_b.box_rows, p.shape_b.swizzle);
  const std::size_t bytes = p.shared_bytes + 1024;
  simt::set_max_dynamic_shared_bytes<tma_wgmma_kernel<N, major_b, bf16>>(bytes);
  simt::launch<tma_wgmma_kernel<N, major_b, bf16>>(dim3(1), dim3(128), bytes, map_a, map_b, p.plan_a, p.plan_b,
                                                   p.layout_a, p.layout_b, p.k_steps, p.k_step_bytes_a,
                                                   p.k_step_bytes_b, d.data());
  return d.to_host();
}

std::vector<float> tma_wgmma(const TmaProblem& p) {
  using simt::Major;
  if (p.n == 64) {
    if (p.major_b == Major::k)
      return p.bf16 ? run_tma_wgmma<64, Major::k, true>(p) : run_tma_wgmma<64, Major::k, false>(p);
    return p.bf16 ? run_tma_wgmma<64, Major::mn, true>(p) : run_tma_wgmma<64, Major::mn, false>(p);
  }
  if (p.major_b == Major::k)
    return p.bf16 ? run_tma_wgmma<128, Major::k, true>(p) : run_tma_wgmma<128, Major::k, false>(p);
  return p.bf16 ? run_tma_wgmma<128, Major::mn, true>(p) : run_tma_wgmma<128, Major::mn, false>(p);
}

simt::TensorMap box_map(const TmaBox& p, const std::uint16_t* global) {
  if (p.rank == 2) {
    return simt::make_tensor_map(global, {p.dims[0], p.dims[1]}, {p.dims[0] * 2}, {p.box[0], p.box[1]}, p.swizzle,
                                 {p.element_strides[0], p.element_strides[1]});
  }
  return simt::make_tensor_map(global, {p.dims[0], p.dims[1], p.dims[2]}, {p.dims[0] * 2, p.dims[0] * p.dims[1] * 2},
                               {p.box[0], p.box[1], p.box[2]}, p.swizzle,
                               {p.element_strides[0], p.element_strides[1], p.element_strides[2]});
}

std::vector<std::uint8_t> tma_load(const TmaBox& p) {
  simt::DeviceBuffer<std::uint16_t> global(p.global);
  simt::DeviceBuffer<std::uint8_t> out(p.bytes);
  const simt::TensorMap map = box_map(p, global.data());
  simt::launch<tma_load_kernel>(dim3(1), dim3(128), p.bytes + 1024, map, p.rank, p.coordinates[0], p.coordinates[1],
                                p.coordinates[2], p.bytes, out.data());
  return out.to_host();
}

std::vector<std::uint16_t> tma_store(const TmaBox& p, const std::vector<std::uint8_t>& image) {
  simt::DeviceBuffer<std::uint16_t> global(p.global);
  simt::DeviceBuffer<std::uint8_t> d_image(image);
  const simt::TensorMap map = box_map(p, global.data());
  simt::launch<tma_store_kernel>(dim3(1), dim3(128), p.bytes + 1024, map, p.rank, p.coordinates[0], p.coordinates[1],
                                 p.coordinates[2], d_image.data(), p.bytes);
  return global.to_host();
}

std::vector<float> gemm_pipeline(const std::vector<std::uint16_t>& q, const std::vector<std::uint16_t>& k,
                                 const std::vector<std::uint16_t>& v, int tiles, int stages) {
  simt::DeviceBuffer<std::uint16_t> d_q(q), d_k(k), d_v(v);
  simt::DeviceBuffer<float> out(128 * 32);
  const auto keys = static_cast<std::uint64_t>(64 * tiles);
  const simt::TensorMap map_q = simt::make_tensor_map_2d(d_q.data(), 64, 64, 64, 64, 64, simt::Swizzle::b128);
  const simt::TensorMap map_k = simt::make_tensor_map_2d(d_k.data(), 64, keys, 64, 64, 64, simt::Swizzle::b128);
  const simt::TensorMap map_v = simt::make_tensor_map_2d(d_v.data(), 64, keys, 64, 64, 64, simt::Swizzle::b128);
  const std::size_t bytes = 5 * 8192 + 1024;
  simt::set_max_dynamic_shared_bytes<gemm_pipeline_kernel>(bytes);
  simt::launch<gemm_pipeline_kernel>(dim3(1), dim3(256), bytes, map_q, map_k, map_v, tiles, stages, out.data());
  return out.to_host();
}

MbarrierRun mbarrier_phases() {
  simt::DeviceBuffer<unsigned> passed(64), seen(128);
  simt::launch<mbarrier_phases_kernel>(dim3(1), dim3(64), 0, passed.data(), seen.data());
  return {passed.to_host(), seen.to_host()};
}

std::vector<float> producer_consumer(int items, int stages) {
  simt::DeviceBuffer<float> out(128);
  simt::launch<producer_consumer_kernel>(dim3(1), dim3(256), 0, items, stages, out.data());
  return out.to_host();
}

std::vector<int> ping_pong(int turns) {
  simt::DeviceBuffer<int> order(2 * turns);
  simt::launch<ping_pong_kernel>(dim3(1), dim3(256), 0, turns, order.data());
  return order.to_host();
}

}  // namespace simt_hopper_test::SIMT_BACKEND
