// simt::store_word(dst, word) and simt::copy_16_bytes(dst, src): a 32-bit store and a 16-byte copy
// to or from aligned addresses, the two ways a kernel writes packed pairs of 2-byte elements.
// On the GPU each is one plain access (a 32-bit store; a uint4 load and store, 128 bits each);
// on the CPU a std::memcpy, which says the same without breaking C++'s aliasing rules (the bytes
// are bf16 or f16 pairs, not a std::uint32_t object). dst and src: 4- and 16-byte aligned, in
// shared or global memory. Never throws.
// Source: CUDA C++ Programming Guide, "Device Memory Accesses" (sizes and alignment of one access).
#pragma once

#include <cstdint>
#include <cstring>

namespace simt {

__device__ __forceinline__ void store_word(void* dst, std::uint32_t word) {
#if defined(__CUDACC__)
  *static_cast<std::uint32_t*>(dst) = word;
#else
  std::memcpy(dst, &word, sizeof word);
#endif
}

__device__ __forceinline__ void copy_16_bytes(void* dst, const void* src) {
#if defined(__CUDACC__)
  *static_cast<uint4*>(dst) = *static_cast<const uint4*>(src);
#else
  std::memcpy(dst, src, 16);
#endif
}

}  // namespace simt
