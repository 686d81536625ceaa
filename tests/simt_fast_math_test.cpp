// simt::ex2_approx_ftz on the CPU (common/simt/instructions/fast_math.h): 2^x as std::exp2f computes it, with
// the .ftz of the PTX instruction: subnormal inputs count as 0, subnormal results become 0. Called
// directly and from a kernel (simt_fast_math_kernels.cuh), which must agree.
#include <cmath>
#include <vector>

#include "catch.h"
#include "simt_fast_math_cases.h"
#include "simt_fast_math_kernels.cuh"

using namespace simt_fast_math_test;

TEST_CASE("ex2_approx_ftz flushes subnormal inputs and results, keeps the rest, as the PTX ISA says", "[simt]") {
  for (const SpecialCase& c : special_cases()) {
    INFO(c.what << ": x = " << c.x);
    CHECK(simt::ex2_approx_ftz(c.x) == c.expected);
  }
  CHECK(std::isnan(simt::ex2_approx_ftz(std::nanf(""))));
}

TEST_CASE("ex2_approx_ftz is exp2f wherever the result is normal, and 0 below", "[simt]") {
  const std::vector<float> x = sweep();
  const std::vector<float> in_kernel = cpu::ex2_approx_ftz_of(x);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float reference = std::exp2(x[i]);
    INFO("x = " << x[i] << ", exp2f = " << reference);
    CHECK(simt::ex2_approx_ftz(x[i]) == (reference < 0x1p-126f ? 0.0f : reference));
    CHECK(in_kernel[i] == simt::ex2_approx_ftz(x[i]));
  }
}
