// The inputs both tests of simt::ex2_approx_ftz use (simt_fast_math_test.cpp on the CPU,
// simt_fast_math_gpu_test.cpp on a GPU), and what the PTX ISA's .ftz makes of the special ones.
#pragma once

#include <cmath>
#include <limits>
#include <vector>

namespace simt_fast_math_test {

// A sweep of ordinary inputs: every 1/64 from -149 to 127 (the results run from below float's
// smallest subnormal, through the subnormals, up to float's largest values).
inline std::vector<float> sweep() {
  std::vector<float> x;
  for (int k = -149 * 64; k <= 127 * 64; ++k) x.push_back(static_cast<float>(k) / 64.0f);
  return x;
}

struct SpecialCase {
  float x;
  float expected;  // exactly
  const char* what;
  bool by_definition;  // fixed by the instruction's definition (zeros, infinities, flushes), not by
                       // the accuracy of the approximation: exact on a GPU too
};

inline std::vector<SpecialCase> special_cases() {
  const float inf = std::numeric_limits<float>::infinity();
  return {
      {0.0f, 1.0f, "+0", true},
      {-0.0f, 1.0f, "-0", true},
      {0x1p-149f, 1.0f, "the smallest subnormal, flushed to 0 on the way in", true},
      {-0x1.fffffcp-127f, 1.0f, "the largest negative subnormal, flushed", true},
      {-inf, 0.0f, "-inf", true},
      {inf, inf, "+inf", true},
      {-126.0f, 0x1p-126f, "2^-126, the smallest normal result, kept", false},
      {-126.5f, 0.0f, "2^-126.5, a subnormal result, flushed", true},
      {-140.0f, 0.0f, "2^-140, a subnormal result, flushed", true},
      {-200.0f, 0.0f, "far below every float", true},
      {1.0f, 2.0f, "an exact power of two", false},
      {-10.0f, 0x1p-10f, "an exact power of two", false},
  };
}

}  // namespace simt_fast_math_test
