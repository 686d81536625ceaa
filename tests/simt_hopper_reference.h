// What the PTX ISA's figures say about wgmma and its shared-memory layouts, written from the figures
// themselves and not from common/simt's emulation (hopper.cpp), for the Hopper tests on the CPU and
// the GPU. Each function answers "where does this element go?" as a reader of the figures would:
//   d_slot(row, col)       which thread and register of the warpgroup hold D[row][col] ("WGMMA
//                          .m64nNk16 register fragment layout for accumulator matrix D": each warp
//                          16 rows; in a warp, rows as the 8 groups of 4 lanes, 8-column blocks
//                          one after the other, 4 registers per block)
//   a_slot(row, col)       the same for A from registers ("... for matrix A")
//   figure_chunk(s, r, c)  the 16-byte chunk where chunk c of row r of a swizzle atom lands (the
//                          swizzle figures: 128B: c XOR r; 64B: rows in pairs, c XOR r / 2; 32B: rows
//                          in fours, c XOR r / 4)
//   place(...)             the byte offset of operand element (mn, k) in a canonical layout
//                          ("Shared Memory Matrix Layout": atoms of 8 rows, core matrices of 8 rows
//                          of 16 bytes; LBO and SBO as "Strides" defines them)
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "common/simt/instructions/hopper.h"

namespace simt_hopper_test {

struct Slot {
  unsigned thread;    // 0 .. 127 in the warpgroup
  unsigned reg;       // d[reg] or a[reg]
  unsigned high = 0;  // A: the element in bits 16-31
};

inline Slot d_slot(unsigned row, unsigned col) {
  const unsigned warp = row / 16, lane = 4 * (row % 8) + (col % 8) / 2;
  return {32 * warp + lane, 4 * (col / 8) + 2 * ((row % 16) / 8) + col % 2};
}

inline Slot a_slot(unsigned row, unsigned col) {
  const unsigned warp = row / 16, lane = 4 * (row % 8) + (col % 8) / 2;
  return {32 * warp + lane, 2 * (col / 8) + (row % 16) / 8, col % 2};
}

// "WGMMA .m64nNk32 register fragment layout for matrix A" (FP8): each warp 16 rows; in a warp,
// rows as the 8 groups of 4 lanes, each lane 4 consecutive columns of a 16-column block (the
// lowest in bits 0-7); rows 8-15 of the warp in the next register, the next block two on.
inline Slot a_slot_fp8(unsigned row, unsigned col) {
  const unsigned warp = row / 16, lane = 4 * (row % 8) + (col % 16) / 4;
  return {32 * warp + lane, 2 * (col / 16) + (row % 16) / 8, col % 4};
}

inline unsigned figure_chunk(simt::Swizzle s, unsigned r, unsigned c) {
  switch (s) {
    case simt::Swizzle::b128:
      return c ^ r;
    case simt::Swizzle::b64:
      return c ^ (r / 2);
    case simt::Swizzle::b32:
      return c ^ (r / 4);
    case simt::Swizzle::none:
      break;
  }
  return c;
}

// The byte offset of element (mn, k) from the operand's start, for elements of `bytes` bytes (2:
// bf16, f16; 1: FP8, K-major only, where a row of 16 bytes holds 16 elements of k).
//   K-major, no swizzle: core matrices of 8 mn-rows x 8 k (16 bytes a row); LBO between core
//     matrices along K, SBO along M/N.
//   K-major, swizzle of span S: atoms of 8 mn-rows of S bytes (S / 2 elements of k), rows swizzled
//     by the figure; atoms along M/N SBO apart.
//   M/N-major, no swizzle: core matrices of 8 k-rows x 8 mn (16 bytes a row); LBO along K, SBO
//     along M/N.
//   M/N-major, swizzle of span S: atoms of 8 k-rows of S bytes (S / 2 elements of mn), swizzled;
//     LBO between atoms along M/N, SBO between groups of 8 k.
inline std::uint32_t place(simt::Major major, simt::Swizzle s, std::uint32_t lbo, std::uint32_t sbo, unsigned mn,
                           unsigned k, unsigned bytes = 2) {
  const unsigned span = simt::swizzle_span(s);
  if (major == simt::Major::k) {
    const unsigned byte = bytes * k;  // along the row; below S for a swizzled one
    if (s == simt::Swizzle::none) return (mn / 8) * sbo + (byte / 16) * lbo + (mn % 8) * 16 + byte % 16;
    const unsigned r = mn % 8;
    return (mn / 8) * sbo + r * span + figure_chunk(s, r, byte / 16) * 16 + byte % 16;
  }
  if (s == simt::Swizzle::none) return (mn / 8) * sbo + (k / 8) * lbo + (k % 8) * 16 + (mn % 8) * 2;
  const unsigned per_row = span / 2, r = k % 8, byte = 2 * (mn % per_row);
  return (mn / per_row) * lbo + (k / 8) * sbo + r * span + figure_chunk(s, r, byte / 16) * 16 + byte % 16;
}

// D (64 x n, row-major) from the warpgroup's registers (n / 2 per thread, thread-major).
inline std::vector<float> d_matrix(const std::vector<float>& registers, unsigned n) {
  std::vector<float> D(64 * n);
  for (unsigned row = 0; row < 64; ++row) {
    for (unsigned col = 0; col < n; ++col) {
      const Slot s = d_slot(row, col);
      D[row * n + col] = registers[s.thread * (n / 2) + s.reg];
    }
  }
  return D;
}

// The registers that hold C (64 x n, row-major).
inline std::vector<float> d_registers(const std::vector<float>& C, unsigned n) {
  std::vector<float> r(64 * n);
  for (unsigned row = 0; row < 64; ++row) {
    for (unsigned col = 0; col < n; ++col) {
      const Slot s = d_slot(row, col);
      r[s.thread * (n / 2) + s.reg] = C[row * n + col];
    }
  }
  return r;
}

}  // namespace simt_hopper_test
