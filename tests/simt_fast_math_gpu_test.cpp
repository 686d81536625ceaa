// simt::ex2_approx_ftz on a real GPU (label gpu; SKIPPED without one): ex2.approx.ftz.f32 against
// the CPU's version of it (simt_fast_math_test.cpp). The special inputs and every flushed result
// must match exactly; elsewhere the GPU's approximation may differ from std::exp2f by its stated
// error, 2 ulp (CUDA C++ Programming Guide, "Mathematical Functions": exp2f, the same hardware
// approximation), and std::exp2f is itself within 1 ulp: 3 ulp in all.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "catch.h"
#include "simt_fast_math_cases.h"
#include "simt_fast_math_kernels.cuh"  // the CPU build, simt_fast_math_test::cpu

namespace simt_fast_math_test::gpu {
std::vector<float> ex2_approx_ftz_of(std::span<const float> in);
}

using namespace simt_fast_math_test;

namespace {

// How many floats lie between a and b (both finite and >= 0: ordered as their bit patterns).
std::int64_t ulps_apart(float a, float b) {
  return std::llabs(static_cast<std::int64_t>(std::bit_cast<std::int32_t>(a)) - std::bit_cast<std::int32_t>(b));
}

}  // namespace

TEST_CASE("on the GPU ex2.approx.ftz gives the values its definition fixes exactly", "[simt][gpu]") {
  std::vector<SpecialCase> cases;
  std::vector<float> x;
  for (const SpecialCase& c : special_cases()) {
    if (c.by_definition) cases.push_back(c), x.push_back(c.x);
  }
  const std::vector<float> y = gpu::ex2_approx_ftz_of(x);
  for (std::size_t i = 0; i < x.size(); ++i) {
    INFO(cases[i].what << ": x = " << x[i] << ", GPU " << y[i]);
    CHECK(y[i] == cases[i].expected);
  }
}

TEST_CASE("on the GPU ex2.approx.ftz is within 3 ulp of the CPU's, and 0 exactly where the CPU flushes",
          "[simt][gpu]") {
  const std::vector<float> x = sweep();
  const std::vector<float> gpu_y = gpu::ex2_approx_ftz_of(x);
  const std::vector<float> cpu_y = cpu::ex2_approx_ftz_of(x);
  for (std::size_t i = 0; i < x.size(); ++i) {
    INFO("x = " << x[i] << ": GPU " << gpu_y[i] << ", CPU " << cpu_y[i]);
    // Within 3 ulp of 2^-126 a result may land on either side of the flush (x within 2^-20 of
    // -126, which the sweep's steps of 1/64 meet only at -126 itself).
    const bool at_the_edge = x[i] == -126.0f;
    if (at_the_edge && (gpu_y[i] == 0.0f || cpu_y[i] == 0.0f)) continue;
    if (cpu_y[i] == 0.0f) {
      CHECK(gpu_y[i] == 0.0f);
    } else {
      CHECK(ulps_apart(gpu_y[i], cpu_y[i]) <= 3);
    }
  }
}
