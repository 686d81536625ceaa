// The tensor-core test kernels of common/simt, written once in ordinary CUDA: the host compiler
// builds them through common/simt (simt_tensor_core_test.cpp), nvcc for the GPU
// (simt_tensor_core_gpu_runs.cu). Include in ONE translation unit per backend and program.
//
// The kernels that load fragments from global memory know nothing of the layouts: every lane
// loads "its" registers, and the tests decide what each lane holds (simt_tensor_core_tables.h).
// mma_ldmatrix_kernel is the other way round: written as a FlashAttention-2 kernel is, from the
// PTX ISA's layouts, and checked against the plain product.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "common/simt/simt.h"
#include "simt_tensor_core_runs.h"

namespace simt_tensor_test::SIMT_BACKEND {

// ---- Kernels ---------------------------------------------------------------------------------

// One mma per warp; lane l of warp w reads its registers at [(32 w + l) * k, ...).
__global__ void mma_fragment_kernel(bool bf16, const std::uint32_t* __restrict__ a, const std::uint32_t* __restrict__ b,
                                    const float* __restrict__ c, float* __restrict__ d) {
  const unsigned lane = blockIdx.x * blockDim.x + threadIdx.x;
  std::uint32_t ra[4], rb[2];
  float rc[4], rd[4];
  for (int i = 0; i < 4; ++i) ra[i] = a[4 * lane + i];
  for (int i = 0; i < 2; ++i) rb[i] = b[2 * lane + i];
  for (int i = 0; i < 4; ++i) rc[i] = c[4 * lane + i];
  if (bf16) {
    simt::mma_m16n8k16_bf16(rd, ra, rb, rc);
  } else {
    simt::mma_m16n8k16_f16(rd, ra, rb, rc);
  }
  for (int i = 0; i < 4; ++i) d[4 * lane + i] = rd[i];
}

// The tile (32 rows of 8 b16) goes to dynamic shared memory; lane l gives row row_of_lane[l].
template <int matrices, bool trans>
__global__ void ldmatrix_kernel(const std::uint16_t* __restrict__ tile, const int* __restrict__ row_of_lane,
                                std::uint32_t* __restrict__ out) {
  SIMT_DYNAMIC_SHARED(std::uint16_t, rows);
  const unsigned lane = threadIdx.x;
  for (unsigned i = lane; i < 32 * 8; i += 32) rows[i] = tile[i];
  __syncwarp();  // the whole tile is in shared memory before any lane loads from it
  const std::uint16_t* address = rows + 8 * row_of_lane[lane];
  std::uint32_t r[matrices];
  if constexpr (matrices == 1) {
    if constexpr (trans)
      simt::ldmatrix_x1_trans(r, address);
    else
      simt::ldmatrix_x1(r, address);
  } else if constexpr (matrices == 2) {
    if constexpr (trans)
      simt::ldmatrix_x2_trans(r, address);
    else
      simt::ldmatrix_x2(r, address);
  } else {
    if constexpr (trans)
      simt::ldmatrix_x4_trans(r, address);
    else
      simt::ldmatrix_x4(r, address);
  }
  for (int i = 0; i < matrices; ++i) out[matrices * lane + i] = r[i];
}

// D = A B + C with A (16x16) and B ([k][n], 16x8) row-major in static __shared__ memory, loaded
// the way a FlashAttention-2 kernel does (PTX ISA, "ldmatrix" and "Matrix Fragments for
// mma.m16n8k16 with floating point type"):
//   A: ldmatrix_x4; matrix i of the four is A's 8x8 block (rows 8 (i % 2).., cols 8 (i / 2)..),
//      which is what a[i] holds; lane l gives row l % 8 of matrix l / 8 = A row l % 16, col 8 (l / 16)
//   B: ldmatrix_x2_trans; matrix i is rows k = 8i .. 8i + 7 of B; .trans hands lane l the pair
//      B[2 (l % 4)][l / 4], B[2 (l % 4) + 1][l / 4] (+8i), which is what b[i] holds; lane l < 16
//      gives row l of B (lanes 16..31 repeat lanes 0..15; their addresses are not used)
//   D: d[i] is D[l / 4 + 8 (i / 2)][2 (l % 4) + i % 2]
__global__ void mma_ldmatrix_kernel(bool bf16, const std::uint16_t* __restrict__ A, const std::uint16_t* __restrict__ B,
                                    const float* __restrict__ C, float* __restrict__ D) {
  __shared__ __align__(16) std::uint16_t a_tile[16 * 16];
  __shared__ __align__(16) std::uint16_t b_tile[16 * 8];
  const unsigned lane = threadIdx.x;
  for (unsigned i = lane; i < 16 * 16; i += 32) a_tile[i] = A[i];
  for (unsigned i = lane; i < 16 * 8; i += 32) b_tile[i] = B[i];
  __syncwarp();
  std::uint32_t a[4], b[2];
  simt::ldmatrix_x4(a, a_tile + (lane % 16) * 16 + (lane / 16) * 8);
  simt::ldmatrix_x2_trans(b, b_tile + (lane % 16) * 8);
  const unsigned group = lane / 4, pair = 2 * (lane % 4);
  float c[4], d[4];
  for (int i = 0; i < 4; ++i) c[i] = C[(group + 8 * (i / 2)) * 8 + pair + i % 2];
  if (bf16) {
    simt::mma_m16n8k16_bf16(d, a, b, c);
  } else {
    simt::mma_m16n8k16_f16(d, a, b, c);
  }
  for (int i = 0; i < 4; ++i) D[(group + 8 * (i / 2)) * 8 + pair + i % 2] = d[i];
}

// Thread t: cp.async src[4t..4t+3] -> its slot; commit; read the slot (before the wait: on a GPU
// the value is undefined, on the CPU the old contents); wait; read it again; barrier; read the
// next thread's slot.
__global__ void async_copy_kernel(const std::uint32_t* __restrict__ src, bool valid, std::uint32_t* __restrict__ before,
                                  std::uint32_t* __restrict__ after, std::uint32_t* __restrict__ neighbour) {
  SIMT_DYNAMIC_SHARED(std::uint32_t, slots);
  const unsigned t = threadIdx.x, n = blockDim.x;
  simt::cp_async_16(slots + 4 * t, src + 4 * t, valid);
  simt::cp_async_commit_group();
  for (int i = 0; i < 4; ++i) before[4 * t + i] = slots[4 * t + i];
  simt::cp_async_wait_group<0>();
  for (int i = 0; i < 4; ++i) after[4 * t + i] = slots[4 * t + i];
  __syncthreads();  // every thread has waited for its copy: all slots are written
  for (int i = 0; i < 4; ++i) neighbour[4 * t + i] = slots[4 * ((t + 1) % n) + i];
}

// Two groups per thread: slot 2t gets src[8t..8t+3] (group 0), slot 2t + 1 gets src[8t+4..] (group 1).
__global__ void async_copy_two_groups_kernel(const std::uint32_t* __restrict__ src, std::uint32_t* __restrict__ first1,
                                             std::uint32_t* __restrict__ second1, std::uint32_t* __restrict__ second0) {
  SIMT_DYNAMIC_SHARED(std::uint32_t, slots);
  const unsigned t = threadIdx.x;
  simt::cp_async_16(slots + 8 * t, src + 8 * t);
  simt::cp_async_commit_group();
  simt::cp_async_16(slots + 8 * t + 4, src + 8 * t + 4);
  simt::cp_async_commit_group();
  simt::cp_async_wait_group<1>();  // group 0 is complete; group 1 may still be in flight
  for (int i = 0; i < 4; ++i) first1[4 * t + i] = slots[8 * t + i];
  for (int i = 0; i < 4; ++i) second1[4 * t + i] = slots[8 * t + 4 + i];
  simt::cp_async_wait_group<0>();
  for (int i = 0; i < 4; ++i) second0[4 * t + i] = slots[8 * t + 4 + i];
}

// The mistake cp.async invites: a barrier, but no wait. The copies are still in flight when the
// next thread's slot is read (wrong on the CPU always; on a GPU whenever the copy is slower).
__global__ void async_copy_barrier_only_kernel(const std::uint32_t* __restrict__ src,
                                               std::uint32_t* __restrict__ neighbour) {
  SIMT_DYNAMIC_SHARED(std::uint32_t, slots);
  const unsigned t = threadIdx.x, n = blockDim.x;
  simt::cp_async_16(slots + 4 * t, src + 4 * t);
  simt::cp_async_commit_group();
  __syncthreads();  // (missing before it: simt::cp_async_wait_group<0>();)
  for (int i = 0; i < 4; ++i) neighbour[4 * t + i] = slots[4 * ((t + 1) % n) + i];
}

__global__ void conversion_kernel(const float* __restrict__ in, unsigned n, std::uint16_t* __restrict__ bf16_bits,
                                  std::uint16_t* __restrict__ f16_bits, float* __restrict__ bf16_back,
                                  float* __restrict__ f16_back, std::uint32_t* __restrict__ bf16x2,
                                  std::uint32_t* __restrict__ f16x2) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const simt::bf16 b = simt::bf16(in[i]);
  const simt::f16 h = simt::f16(in[i]);
  std::memcpy(&bf16_bits[i], &b, 2);
  std::memcpy(&f16_bits[i], &h, 2);
  bf16_back[i] = static_cast<float>(b);
  f16_back[i] = static_cast<float>(h);
  bf16x2[i] = simt::pack_bf16x2(in[i], in[(i + 1) % n]);
  f16x2[i] = simt::pack_f16x2(in[i], in[(i + 1) % n]);
}

// ---- Broken kernels: run on the CPU only, to check the reports ----------------------------------

// Lanes 0..15 and 16..31 call mma at two different places.
__global__ void mma_two_places_kernel(float* out) {
  std::uint32_t a[4] = {}, b[2] = {};
  float c[4] = {}, d[4];
  if (threadIdx.x % 32 < 16) {
    simt::mma_m16n8k16_bf16(d, a, b, c);
  } else {
    simt::mma_m16n8k16_bf16(d, a, b, c);
  }
  out[threadIdx.x] = d[0];
}

// Lanes 16..31 skip the mma and wait at a barrier instead.
__global__ void mma_and_barrier_kernel(float* out) {
  std::uint32_t a[4] = {}, b[2] = {};
  float c[4] = {}, d[4] = {};
  if (threadIdx.x % 32 < 16) simt::mma_m16n8k16_f16(d, a, b, c);
  __syncthreads();
  out[threadIdx.x] = d[0];
}

// Lanes 24..31 return before the mma.
__global__ void mma_after_return_kernel(float* out) {
  if (threadIdx.x % 32 >= 24) return;
  std::uint32_t a[4] = {}, b[2] = {};
  float c[4] = {}, d[4];
  simt::mma_m16n8k16_bf16(d, a, b, c);
  out[threadIdx.x] = d[0];
}

// Any block size: launched with 48 threads.
__global__ void mma_any_block_kernel(float* out) {
  std::uint32_t a[4] = {}, b[2] = {};
  float c[4] = {}, d[4];
  simt::mma_m16n8k16_bf16(d, a, b, c);
  out[threadIdx.x] = d[0];
}

// Lane `bad_lane` gives a wrong row address: `global` (not shared memory), or with `misaligned`
// its own row 4 bytes on (shared memory, but not 16-byte aligned).
__global__ void ldmatrix_bad_address_kernel(const std::uint16_t* global, unsigned bad_lane, bool misaligned,
                                            std::uint32_t* out) {
  __shared__ __align__(16) std::uint16_t tile[32 * 8];
  for (unsigned i = threadIdx.x; i < 32 * 8; i += 32) tile[i] = static_cast<std::uint16_t>(i);
  __syncwarp();
  const std::uint16_t* row = tile + 8 * threadIdx.x;
  if (threadIdx.x == bad_lane) row = misaligned ? row + 2 : global;
  std::uint32_t r[4];
  simt::ldmatrix_x4(r, row);
  out[threadIdx.x] = r[0];
}

// Lanes 0..15 load with ldmatrix_x4, lanes 16..31 with ldmatrix_x4_trans.
__global__ void ldmatrix_mixed_kernel(std::uint32_t* out) {
  __shared__ __align__(16) std::uint16_t tile[32 * 8];
  for (unsigned i = threadIdx.x; i < 32 * 8; i += 32) tile[i] = static_cast<std::uint16_t>(i);
  __syncwarp();
  std::uint32_t r[4];
  if (threadIdx.x < 16) {
    simt::ldmatrix_x4(r, tile + 8 * threadIdx.x);
  } else {
    simt::ldmatrix_x4_trans(r, tile + 8 * threadIdx.x);
  }
  out[threadIdx.x] = r[0];
}

// cp.async with one thing wrong, by mode: 0 a destination in global memory, 1 a source 4 bytes
// past a 16-byte boundary, 2 the same for the destination, 3 a destination 8 bytes before the end
// of dynamic shared memory (launched with 24 bytes of it: the 16 bytes do not fit).
__global__ void cp_async_bad_kernel(std::uint32_t* dst_global, const std::uint32_t* src, int mode) {
  __shared__ __align__(16) std::uint32_t slots[32 * 4];
  SIMT_DYNAMIC_SHARED(std::uint32_t, dynamic);
  std::uint32_t* dst = mode == 0 ? dst_global : mode == 3 ? dynamic + 4 : slots + 4 * threadIdx.x;
  if (mode == 2) dst += 1;  // 4 bytes past a 16-byte boundary
  simt::cp_async_16(dst, src + 4 * threadIdx.x + (mode == 1 ? 1 : 0));
  simt::cp_async_wait_group<0>();
}

// __syncwarp with half a warp's mask.
__global__ void syncwarp_half_mask_kernel() { __syncwarp(0x0000ffffu); }

// ---- Runners (declared in simt_tensor_core_runs.h) ---------------------------------------------

std::vector<float> mma_fragments(bool bf16, std::span<const std::uint32_t> a, std::span<const std::uint32_t> b,
                                 std::span<const float> c) {
  const auto warps = static_cast<unsigned>(a.size() / (32 * 4));
  simt::DeviceBuffer<std::uint32_t> d_a(a), d_b(b);
  simt::DeviceBuffer<float> d_c(c), d_d(c.size());
  const unsigned block = 64;
  simt::launch<mma_fragment_kernel>(dim3(warps * 32 / block), dim3(block), 0, bf16, d_a.data(), d_b.data(), d_c.data(),
                                    d_d.data());
  return d_d.to_host();
}

template <int matrices, bool trans>
std::vector<std::uint32_t> run_ldmatrix(std::span<const std::uint16_t> tile, std::span<const int> row_of_lane) {
  simt::DeviceBuffer<std::uint16_t> d_tile(tile);
  simt::DeviceBuffer<int> d_rows(row_of_lane);
  simt::DeviceBuffer<std::uint32_t> d_out(32 * matrices);
  simt::launch<ldmatrix_kernel<matrices, trans>>(dim3(1), dim3(32), 32 * 8 * sizeof(std::uint16_t), d_tile.data(),
                                                 d_rows.data(), d_out.data());
  return d_out.to_host();
}

std::vector<std::uint32_t> ldmatrix_registers(int matrices, bool trans, std::span<const std::uint16_t> tile,
                                              std::span<const int> row_of_lane) {
  switch (matrices * 2 + (trans ? 1 : 0)) {
    case 2:
      return run_ldmatrix<1, false>(tile, row_of_lane);
    case 3:
      return run_ldmatrix<1, true>(tile, row_of_lane);
    case 4:
      return run_ldmatrix<2, false>(tile, row_of_lane);
    case 5:
      return run_ldmatrix<2, true>(tile, row_of_lane);
    case 8:
      return run_ldmatrix<4, false>(tile, row_of_lane);
    default:
      return run_ldmatrix<4, true>(tile, row_of_lane);
  }
}

std::vector<float> mma_through_ldmatrix(bool bf16, std::span<const std::uint16_t> A, std::span<const std::uint16_t> B,
                                        std::span<const float> C) {
  simt::DeviceBuffer<std::uint16_t> d_A(A), d_B(B);
  simt::DeviceBuffer<float> d_C(C), d_D(16 * 8);
  simt::launch<mma_ldmatrix_kernel>(dim3(1), dim3(32), 0, bf16, d_A.data(), d_B.data(), d_C.data(), d_D.data());
  return d_D.to_host();
}

AsyncCopyRun async_copy(std::span<const std::uint32_t> src, unsigned threads, bool valid) {
  simt::DeviceBuffer<std::uint32_t> d_src(src), before(4 * threads), after(4 * threads), neighbour(4 * threads);
  simt::launch<async_copy_kernel>(dim3(1), dim3(threads), 16 * threads, d_src.data(), valid, before.data(),
                                  after.data(), neighbour.data());
  return {before.to_host(), after.to_host(), neighbour.to_host()};
}

TwoGroupRun async_copy_two_groups(std::span<const std::uint32_t> src, unsigned threads) {
  simt::DeviceBuffer<std::uint32_t> d_src(src), first1(4 * threads), second1(4 * threads), second0(4 * threads);
  simt::launch<async_copy_two_groups_kernel>(dim3(1), dim3(threads), 32 * threads, d_src.data(), first1.data(),
                                             second1.data(), second0.data());
  return {first1.to_host(), second1.to_host(), second0.to_host()};
}

std::vector<std::uint32_t> async_copy_barrier_only(std::span<const std::uint32_t> src, unsigned threads) {
  simt::DeviceBuffer<std::uint32_t> d_src(src), neighbour(4 * threads);
  simt::launch<async_copy_barrier_only_kernel>(dim3(1), dim3(threads), 16 * threads, d_src.data(), neighbour.data());
  return neighbour.to_host();
}

Conversions conversions(std::span<const float> in) {
  const auto n = static_cast<unsigned>(in.size());
  simt::DeviceBuffer<float> d_in(in), bf16_back(n), f16_back(n);
  simt::DeviceBuffer<std::uint16_t> bf16_bits(n), f16_bits(n);
  simt::DeviceBuffer<std::uint32_t> bf16x2(n), f16x2(n);
  const unsigned block = 64;
  simt::launch<conversion_kernel>(dim3((n + block - 1) / block), dim3(block), 0, d_in.data(), n, bf16_bits.data(),
                                  f16_bits.data(), bf16_back.data(), f16_back.data(), bf16x2.data(), f16x2.data());
  return {bf16_bits.to_host(), f16_bits.to_host(), bf16_back.to_host(),
          f16_back.to_host(),  bf16x2.to_host(),   f16x2.to_host()};
}

}  // namespace simt_tensor_test::SIMT_BACKEND
