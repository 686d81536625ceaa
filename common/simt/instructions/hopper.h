// Hopper's instructions (sm_90a) as functions of namespace simt: wgmma (bf16, f16, FP8), its
// shared-memory matrix descriptor, mbarrier, named barriers, the async proxy's fence, setmaxnreg,
// and TMA (cp.async.bulk.tensor, with the tensor map of tensor_map.h). Included by tensor_core.h, so by
// simt.h, for both backends: under nvcc each function is the PTX instruction (hopper_gpu.h, inline
// asm); for the host compiler an emulation from the PTX ISA's definitions (hopper_cpu.h,
// hopper.cpp). docs/simt.md, "Hopper on the CPU", walks through all of it.
//
// ---- Shapes and layouts (both backends) -------------------------------------------------------
//
//   Swizzle { none, b32, b64, b128 }   how 16-byte chunks are placed in shared memory; one enum
//       for the wgmma descriptor and the tensor map. With span S = 32, 64 or 128 bytes, the chunk
//       at byte address x goes to x XOR (((x >> 7) & (S / 16 - 1)) << 4): bits 4.. of the address
//       are XORed with bits 7.. (PTX ISA, "Shared Memory Matrix Layout", the swizzle atoms of
//       Table "Various combinations of swizzling mode, leading dimension and swizzle-atom
//       layout"; CUDA C++ Programming Guide, "Tensor Memory Access", swizzle patterns). The
//       pattern repeats every 8 S bytes (256, 512, 1024).
//   swizzled_address(x, swizzle)        that function, for kernels and tests that write a
//                                       swizzled tile by hand.
//   Major { k, mn }                     how a wgmma operand lies in shared memory: K-major (k
//       contiguous; imm-trans = 0) or M/N-major (m or n contiguous; imm-trans = 1).
//
//   wgmma_descriptor(shared_address, swizzle, leading_byte_offset, stride_byte_offset,
//                    base_offset = 0)  -> std::uint64_t
//       the 64-bit shared-memory matrix descriptor of the PTX ISA, "Matrix Descriptor Format":
//         bits  0-13  (start address & 0x3FFFF) >> 4
//         bits 16-29  (leading dimension byte offset & 0x3FFFF) >> 4
//         bits 32-45  (stride dimension byte offset & 0x3FFFF) >> 4
//         bits 49-51  matrix base offset (0 when the swizzle pattern starts at its repeat boundary)
//         bits 62-63  swizzle mode: 0 none, 1 128B, 2 64B, 3 32B
//       decode_wgmma_descriptor(desc) gives the fields back.
//   make_wgmma_descriptor(pointer, swizzle, lbo, sbo)   in a kernel: the same from a pointer into
//       shared memory (shared_address(pointer) as the start address).
//   shared_address(pointer)  in a kernel: the 32-bit shared-memory address (GPU:
//       __cvta_generic_to_shared; CPU: the offset in the block's dynamic shared memory, which is
//       where every wgmma and TMA operand must lie on the CPU).
//
//   What the descriptor means (PTX ISA, "Shared Memory Matrix Layout" and "Strides"; in the
//   canonical layouts CUTLASS writes in cute/atom/mma_traits_sm90_gmma.hpp). The operand is
//   MN x 16 (A: 64 x 16, B: N x 16) elements of 2 bytes; a core matrix is 8 rows of 16 bytes.
//   Element (mn, k) lies at start + offset, then swizzled:
//     K-major,  no swizzle  offset = (mn / 8) SBO + (k / 8) LBO + (mn % 8) 16 + (k % 8) 2
//     K-major,  span S      offset = (mn / 8) SBO + (mn % 8) S + (k / 8) 16 + (k % 8) 2   (LBO unused)
//     MN-major, no swizzle  offset = (mn / 8) SBO + (k / 8) LBO + (k % 8) 16 + (mn % 8) 2
//     MN-major, span S      offset = (mn / (S / 2)) LBO + (k / 8) SBO + (k % 8) S + (mn % (S / 2)) 2
//   So SBO steps over 8 rows of the strided dimension, LBO over the leading one, except for an
//   M/N-major swizzled operand, where LBO steps from one S-byte-wide column of atoms to the next
//   in M/N and SBO over 8 k.
//
// ---- wgmma (PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate Instructions") ---
//
//   wgmma_m64nNk16_bf16<N, major_a, major_b>(d, desc_a, desc_b, scale_d)
//   wgmma_m64nNk16_f16 <N, major_a, major_b>(d, desc_a, desc_b, scale_d)
//       wgmma.mma_async.sync.aligned.m64nNk16.f32.{bf16,f16}.{bf16,f16} with A and B from shared
//       memory: D (64 x N, f32) = A (64 x 16) B (16 x N) + (scale_d ? D : 0).
//   wgmma_m64nNk16_bf16<N, major_b>(d, a, desc_b, scale_d)   (and _f16): A from registers.
//       float (&d)[N / 2], const std::uint32_t (&a)[4], std::uint64_t desc_a / desc_b, bool
//       scale_d. N: 8, 16, 32, 64, 96, 128, 192 or 256 (the PTX allows every multiple of 8 up to
//       256; these are the ones written out for nvcc). With warp w = (thread % 128) / 32 of the
//       warpgroup, lane l, g = l / 4 and t = l % 4 ("Register Fragments", figures "WGMMA
//       .m64nNk16 register fragment layout for accumulator matrix D" and "... for matrix A"):
//         d[i]: D[16 w + g + 8 ((i / 2) % 2)][8 (i / 4) + 2 t + i % 2]
//         a[j]: A[16 w + g + 8 (j % 2)][8 (j / 2) + 2 t], the next column in bits 16-31
//       (each warp's 16 rows as mma.m16n8k16's A and C fragments). So the f32 accumulator of one
//       wgmma, packed in pairs, is the A operand of the next: columns 16 c .. 16 c + 15 of D are
//       a = {pack(d[8c], d[8c+1]), pack(d[8c+2], d[8c+3]), pack(d[8c+4], d[8c+5]), pack(d[8c+6], d[8c+7])}.
//   wgmma_m64nNk32_e4m3<N, major_a = Major::k, major_b = Major::k>(d, desc_a, desc_b, scale_d)
//   wgmma_m64nNk32_e5m2<N, ...>, wgmma_m64nNk32_e4m3_e5m2<N, ...>, wgmma_m64nNk32_e5m2_e4m3<N, ...>
//       wgmma.mma_async.sync.aligned.m64nNk32.f32.{e4m3,e5m2}.{e4m3,e5m2} with A and B from shared
//       memory: D (64 x N, f32) = A (64 x 32) B (32 x N) + (scale_d ? D : 0). One type in the name:
//       A and B both of it; two: A's, then B's (the PTX lets them differ for FP8 only). The PTX
//       ISA, "wgmma.mma_async" (Syntax, "FP8 floating point type"), and "Matrix Fragments for
//       wgmma.mma_async.m64nNk32".
//   wgmma_m64nNk32_e4m3<N, major_b = Major::k>(d, a, desc_b, scale_d)   (and the other three): A
//       from registers. float (&d)[N / 2] as for k16 (the same accumulator fragment), const
//       std::uint32_t (&a)[4]: 16 codes per thread, 4 per register, the lowest k in bits 0-7
//       (figure "WGMMA .m64nNk32 register fragment layout for matrix A"):
//         byte b of a[j]: A[16 w + g + 8 (j % 2)][16 (j / 2) + 4 t + b]
//       (each warp's 16 rows as mma.m16n8k32's A fragment). N as for k16.
//       In shared memory an FP8 operand is MN x 32 codes of 1 byte: a row of k is 32 bytes, as a
//       row of 16 bf16, and the core matrices are 8 rows of 16 codes. The K-major rows of the table
//       above hold with the byte offset of k, k itself, in place of 2 k:
//         K-major, no swizzle  offset = (mn / 8) SBO + (k / 16) LBO + (mn % 8) 16 + k % 16
//         K-major, span S      offset = (mn / 8) SBO + (mn % 8) S + k                   (LBO unused)
//       Both operands must be K-major: the PTX ISA gives FP8 wgmma no imm-trans-a/-b ("the
//       transpose operation is only supported for the .f16/.bf16 types"). major_a and major_b are
//       there to say so in one place: Major::mn does not compile for the GPU, and on the CPU the
//       wgmma is an error naming the line (simt::launch throws std::runtime_error). Write a V-like
//       operand transposed into shared memory instead (FlashAttention-3 transposes V in its kernel).
//       Accumulation: the PTX ISA does not say how the tensor core adds the 32 products to D. On
//       the GPU it is what the hardware does; DeepSeek-V3's technical report (2024, section 3.3.2,
//       "Increasing accumulation precision") measured that H800's FP8 GEMM keeps about 14 bits of
//       the sum before the f32 add. The CPU emulation takes one of two assumptions, chosen at run
//       time by set_fp8_accumulation (hopper_cpu.h):
//         Fp8Accumulation::exact (the default): the 32 products summed exactly, then added to D
//           with one rounding to f32 (to nearest, ties to even);
//         Fp8Accumulation::truncated14: each product exact; the largest product's leading bit, at
//           2^E, fixes the alignment; each product keeps its bits of weight 2^(E - 13) and above
//           (14 bits from 2^E down), the rest cut off toward zero; the 32 cut products are summed
//           exactly, and that sum is added to D with one rounding to f32. A product below
//           2^(E - 13) counts for nothing, and what a large term's cancellation leaves keeps at
//           most 14 bits.
//       A NaN code or an infinity among the operands (or in D) gives what IEEE arithmetic in
//       double gives: NaN, or an infinity. imm-scale-a and imm-scale-b are 1 (no negation).
//   wgmma_fence_operand(d)     no instruction: keeps nvcc from moving reads or writes of d across
//                              it (after wgmma_wait_group, before wgmma_fence). CPU: nothing.
//   wgmma_fence()              wgmma.fence.sync.aligned: before the first wgmma of a batch, after
//                              the registers it reads (d, a) were written by ordinary code.
//   wgmma_commit_group()       wgmma.commit_group.sync.aligned: closes the batch of wgmma issued
//                              since the last commit into one group.
//   wgmma_wait_group<N>()      wgmma.wait_group.sync.aligned N: waits until at most the N newest
//                              groups are in flight. Only then may the thread read (or write) the
//                              d of the older groups.
//   Who may call them: all 128 threads of a warpgroup (4 consecutive warps, the first a multiple of
//   4), at the same instruction, with the same descriptors and scale_d. Architecture: sm_90a only
//   (not sm_90, not later GPUs); elsewhere the functions trap at run time.
//
// ---- mbarrier, named barriers, fences, setmaxnreg ----------------------------------------------
//
//   mbarrier_init(bar, count)                mbarrier.init.shared::cta.b64: phase 0, count expected
//                                            arrivals (1 .. 2^20 - 1), transaction count 0.
//   fence_mbarrier_init()                    fence.mbarrier_init.release.cluster: the init is seen
//                                            by the async proxy (TMA) and the other threads (with
//                                            a __syncthreads() after it).
//   mbarrier_arrive(bar)                     mbarrier.arrive.shared::cta.b64: one arrival.
//   mbarrier_arrive_expect_tx(bar, bytes)    mbarrier.arrive.expect_tx: expect `bytes` more
//                                            transaction bytes in this phase, then arrive.
//   mbarrier_expect_tx(bar, bytes)           mbarrier.expect_tx: the expectation alone.
//   mbarrier_try_wait_parity(bar, parity)    mbarrier.try_wait.parity: true once the phase whose
//                                            parity is `parity` has completed (the current phase
//                                            has the other parity); may block for a while first.
//   mbarrier_wait_parity(bar, parity)        try_wait in a loop until it is true.
//       bar: a std::uint64_t in shared memory, 8-byte aligned. A phase completes when its
//       pending arrivals reach 0 and its transaction count is 0; then the next phase begins with
//       the count given to init. PTX ISA, "Parallel Synchronization and Communication
//       Instructions: mbarrier" (Phase Completion, Tx-count, mbarrier.try_wait).
//   fence_proxy_async_shared_cta()           fence.proxy.async.shared::cta: what this thread's
//                                            ordinary stores wrote to shared memory is seen by
//                                            the async proxy (wgmma, TMA) after it. PTX ISA,
//                                            "membar/fence", "Proxies".
//   named_barrier_sync(id, count)            bar.sync id, count: waits until `count` threads
//   named_barrier_arrive(id, count)          bar.arrive id, count: arrives without waiting.
//       id 1 .. 15 (0 is __syncthreads()'s), count a multiple of 32 up to the block size; every
//       thread of one use of a barrier gives the same count. PTX ISA, "bar, barrier".
//   setmaxnreg_inc<count>(), setmaxnreg_dec<count>()   setmaxnreg.{inc,dec}.sync.aligned.u32:
//       the warpgroup's per-thread register budget goes up (down) to count, 24 .. 256, a multiple
//       of 8. All 128 threads at the same one. sm_90a. On the CPU a checked no-op. PTX ISA,
//       "setmaxnreg".
//
// ---- TMA (PTX ISA, "cp.async.bulk.tensor"; CUDA Driver API, cuTensorMapEncodeTiled) -------------
//
//   cp_async_bulk_tensor_2d_global_to_shared(dst, map, c0, c1, bar)
//   cp_async_bulk_tensor_3d_global_to_shared(dst, map, c0, c1, c2, bar)
//       cp.async.bulk.tensor.{2d,3d}.shared::cluster.global.mbarrier::complete_tx::bytes: one
//       thread copies the box of `map` (tensor_map.h) whose first element has coordinates (c0,
//       c1[, c2]) (c0 innermost; elements outside the tensor read as zeros) to shared memory at
//       dst, laid out densely (c0 fastest) and swizzled as the map says; when it has landed, the
//       box's bytes are completed on the mbarrier bar (which expect_tx must have announced).
//       dst: 128-byte aligned, and aligned to 8 S for a swizzle of span S. sm_90.
//   cp_async_bulk_tensor_2d_shared_to_global(map, c0, c1, src)
//   cp_async_bulk_tensor_3d_shared_to_global(map, c0, c1, c2, src)
//       cp.async.bulk.tensor.{2d,3d}.global.shared::cta.bulk_group: the way back. One thread
//       stores the box at (c0, c1[, c2]) from shared memory at src (laid out and swizzled as for
//       the load); elements outside the tensor are not written. What ordinary stores put at src
//       needs fence_proxy_async_shared_cta() before it. sm_90.
//   cp_async_bulk_commit_group()        cp.async.bulk.commit_group: closes this thread's group of
//                                       stores.
//   cp_async_bulk_wait_group<N>()       cp.async.bulk.wait_group N: at most the N newest groups
//                                       are still in flight (their writes done).
//   cp_async_bulk_wait_group_read<N>()  cp.async.bulk.wait_group.read N: the same for their reads
//                                       of shared memory (src may be written again). Per thread.
//
// Source: PTX ISA 8.x/9.x, the sections named above; CUTLASS, cute/atom/mma_traits_sm90_gmma.hpp
// (the canonical layouts, read for the meaning of LBO and SBO in each mode).
#pragma once

#include <cstdint>

#include "common/simt/instructions/half_precision.h"
#include "common/simt/runtime/backend.h"

#if defined(__CUDACC__)
#define SIMT_HOST_DEVICE __host__ __device__
#else
#define SIMT_HOST_DEVICE
#endif

namespace simt {

enum class Swizzle : std::uint8_t { none, b32, b64, b128 };
enum class Major : std::uint8_t { k, mn };

// The span of a swizzle in bytes: 32, 64, 128; 16 (one chunk: nothing moves) for none.
SIMT_HOST_DEVICE constexpr std::uint32_t swizzle_span(Swizzle s) {
  return s == Swizzle::b32 ? 32u : s == Swizzle::b64 ? 64u : s == Swizzle::b128 ? 128u : 16u;
}

// Bits 4 .. 4 + log2(S / 16) - 1 of x XOR bits 7 .. 7 + log2(S / 16) - 1.
SIMT_HOST_DEVICE constexpr std::uint32_t swizzled_address(std::uint32_t x, Swizzle s) {
  const std::uint32_t chunks = swizzle_span(s) / 16u;  // 1, 2, 4, 8
  return x ^ (((x >> 7) & (chunks - 1u)) << 4);
}

// The descriptor's 2-bit swizzle field ("Matrix Descriptor Format").
SIMT_HOST_DEVICE constexpr std::uint64_t descriptor_swizzle_code(Swizzle s) {
  return s == Swizzle::b128 ? 1u : s == Swizzle::b64 ? 2u : s == Swizzle::b32 ? 3u : 0u;
}

SIMT_HOST_DEVICE constexpr std::uint64_t wgmma_descriptor(std::uint32_t shared_address, Swizzle swizzle,
                                                          std::uint32_t leading_byte_offset,
                                                          std::uint32_t stride_byte_offset, unsigned base_offset = 0) {
  const auto encode = [](std::uint32_t x) { return static_cast<std::uint64_t>((x & 0x3FFFFu) >> 4); };
  return encode(shared_address) | encode(leading_byte_offset) << 16 | encode(stride_byte_offset) << 32 |
         static_cast<std::uint64_t>(base_offset & 7u) << 49 | descriptor_swizzle_code(swizzle) << 62;
}

struct WgmmaDescriptorFields {
  std::uint32_t start_address;        // bytes
  std::uint32_t leading_byte_offset;  // bytes
  std::uint32_t stride_byte_offset;   // bytes
  unsigned base_offset;
  Swizzle swizzle;
};

SIMT_HOST_DEVICE constexpr WgmmaDescriptorFields decode_wgmma_descriptor(std::uint64_t d) {
  const auto field = [d](unsigned shift) { return static_cast<std::uint32_t>((d >> shift) & 0x3FFFu) << 4; };
  const unsigned code = static_cast<unsigned>(d >> 62);
  const Swizzle swizzle = code == 1   ? Swizzle::b128
                          : code == 2 ? Swizzle::b64
                          : code == 3 ? Swizzle::b32
                                      : Swizzle::none;
  return {field(0), field(16), field(32), static_cast<unsigned>((d >> 49) & 7u), swizzle};
}

// The N of wgmma .m64nNk16 and .m64nNk32 that both backends provide (hopper_gpu_wgmma.h writes
// each out).
constexpr bool wgmma_n_supported(int n) {
  return n == 8 || n == 16 || n == 32 || n == 64 || n == 96 || n == 128 || n == 192 || n == 256;
}

// How the CPU's emulation of FP8 wgmma adds the 32 products of one k32 step to D (the comment
// above; hopper_cpu.h's set_fp8_accumulation chooses). The GPU does what its hardware does.
enum class Fp8Accumulation : std::uint8_t { exact, truncated14 };

}  // namespace simt

#if defined(__CUDACC__)
#include "common/simt/instructions/detail/hopper_gpu.h"
#else
#include "common/simt/instructions/detail/hopper_cpu.h"
#endif
