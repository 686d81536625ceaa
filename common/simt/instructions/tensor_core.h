// The tensor-core and async-copy instructions of a FlashAttention-2 kernel, as functions of
// namespace simt. Included by simt.h for both backends: under nvcc each function is the PTX
// instruction itself (tensor_core_gpu.h, inline asm); for the host compiler it is an emulation
// with the PTX ISA's exact per-lane layouts (tensor_core_cpu.h, tensor_core.cpp).
//
//   simt::bf16, simt::f16, pack_bf16x2(lo, hi), pack_f16x2(lo, hi)            half_precision.h
//
//   mma_m16n8k16_bf16(d, a, b, c)   mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
//   mma_m16n8k16_f16(d, a, b, c)    mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
//       float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const float (&c)[4]:
//       D (16x8, f32) = A (16x16, row-major) * B (16x8, column-major) + C (16x8, f32), the warp's
//       32 lanes holding the fragments of the PTX ISA, "Matrix Fragments for mma.m16n8k16 with
//       floating point type". With groupID = lane / 4 and t = lane % 4:
//         a[0]: A[groupID    ][2t, 2t+1]      a[1]: A[groupID + 8][2t, 2t+1]
//         a[2]: A[groupID    ][2t+8, 2t+9]    a[3]: A[groupID + 8][2t+8, 2t+9]
//         b[0]: B[2t, 2t+1  ][groupID]         b[1]: B[2t+8, 2t+9][groupID]
//         c[0], c[1]: C[groupID][2t, 2t+1]    c[2], c[3]: C[groupID + 8][2t, 2t+1]   (d: as c)
//       each register of a and b two elements, the first in bits 0-15.
//
//   ldmatrix_x1(r, row_address), ldmatrix_x2, ldmatrix_x4        ldmatrix.sync.aligned.m8n8.{x1,x2,x4}.shared.b16
//   ldmatrix_x1_trans, ldmatrix_x2_trans, ldmatrix_x4_trans      the same with .trans
//       std::uint32_t (&r)[N], const void* row_address (shared memory, 16-byte aligned):
//       loads N 8x8 matrices of 16-bit elements. Lane 8i + j gives the address of row j of matrix
//       i (lanes 0-7 for .x1, 0-15 for .x2, all 32 for .x4; the other lanes' addresses are not
//       used). Lane l receives in r[i] row l / 4, columns 2(l % 4) and 2(l % 4) + 1 of matrix i
//       (the first in bits 0-15): exactly an A or C fragment's layout. With .trans it receives
//       column l / 4, rows 2(l % 4) and 2(l % 4) + 1: the matrix read as column-major, which is
//       how a row-major [k][n] tile becomes a B fragment.
//
//   cp_async_16(shared_dst, global_src, valid = true)   cp.async.cg.shared.global [dst], [src], 16, src_size
//       copies 16 bytes from global to shared memory without waiting; valid == false copies
//       nothing and fills the 16 bytes with zeros (src_size 0). Both addresses 16-byte aligned.
//   cp_async_commit_group()                             cp.async.commit_group
//       closes this thread's current group of copies.
//   cp_async_wait_group<N>()                            cp.async.wait_group N
//       waits until at most the N most recent committed groups of this thread are in flight.
//       Only then may this thread read what the older groups wrote; other threads read it after
//       a __syncthreads() that follows the wait.
//
//   __syncwarp()   bar.warp.sync 0xffffffff: the 32 lanes of the warp meet, and what each wrote
//                  before is visible to the others after.
//
// Who may call them: mma, ldmatrix and __syncwarp are warp-collective: all 32 lanes of a warp call
// the same instruction at the same place, in blocks of a multiple of 32 threads. cp.async is per
// thread. Architectures: sm_80 and later (ldmatrix alone exists from sm_75); see
// tensor_core_gpu.h. On the CPU every misuse is an error that names the kernel, the block, the
// warp or lane, and where; docs/simt.md, "Tensor cores and async copies on the CPU".
// Source: PTX ISA, "Warp Level Matrix Multiply-Accumulate Instructions" (mma, "Matrix Fragments
// for mma.m16n8k16 with floating point type"), "ldmatrix", "cp.async", "cp.async.commit_group",
// "cp.async.wait_group", "bar.warp.sync"; CUDA C++ Programming Guide, "Warp Synchronize Function".
// Hopper's (sm_90a) instructions are in hopper.h; simt.h includes both.
#pragma once

#include "common/simt/instructions/half_precision.h"
#include "common/simt/runtime/backend.h"

#if defined(__CUDACC__)
#include "common/simt/instructions/detail/tensor_core_gpu.h"
#else
#include "common/simt/instructions/detail/tensor_core_cpu.h"
#endif
