// Host references for the simt test kernels: the same float additions in the same order as the
// kernels make them, so that a kernel's result must match bit for bit.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <vector>

namespace simt_test {

// Equal bit for bit (so NaN equals the same NaN, and -0 differs from +0); T: 4 bytes.
template <class T>
inline bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::bit_cast<std::uint32_t>(a[i]) != std::bit_cast<std::uint32_t>(b[i])) return false;
  }
  return true;
}

// The block tree of block_sum_kernel, on the host, in the same order of float additions.
inline std::vector<float> tree_sums(const std::vector<float>& in, unsigned block) {
  std::vector<float> out;
  for (std::size_t base = 0; base < in.size(); base += block) {
    std::vector<float> tile(block, 0.0f);
    for (unsigned t = 0; t < block && base + t < in.size(); ++t) tile[t] = in[base + t];
    for (unsigned stride = block / 2; stride > 0; stride /= 2) {
      for (unsigned t = 0; t < stride; ++t) tile[t] += tile[t + stride];
    }
    out.push_back(tile[0]);
  }
  return out;
}

// The butterfly of warp_sum_kernel on the host: lane 0's total, in the same order of additions.
inline std::vector<float> butterfly_sums(const std::vector<float>& in) {
  std::vector<float> out;
  for (std::size_t base = 0; base < in.size(); base += 32) {
    std::array<float, 32> v;
    for (unsigned lane = 0; lane < 32; ++lane) v[lane] = in[base + lane];
    for (unsigned offset = 16; offset > 0; offset /= 2) {
      std::array<float, 32> next;
      for (unsigned lane = 0; lane < 32; ++lane) next[lane] = v[lane] + v[lane ^ offset];
      v = next;
    }
    out.push_back(v[0]);
  }
  return out;
}

}  // namespace simt_test
