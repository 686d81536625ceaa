// The test kernel of common/simt/instructions/fast_math.h, written once and compiled for both backends (as the
// chapters' kernels are): simt_fast_math_test::cpu (host compiler, simt_fast_math_test.cpp) and
// simt_fast_math_test::gpu (nvcc, simt_fast_math_gpu_runs.cu).
#pragma once

#include <span>
#include <vector>

#include "common/simt/simt.h"

namespace simt_fast_math_test::SIMT_BACKEND {

__global__ void ex2_kernel(const float* in, float* out, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = simt::ex2_approx_ftz(in[i]);
}

// simt::ex2_approx_ftz of each value, computed in a kernel. (Defined here, as the runners of
// simt_tensor_core_kernels.cuh are: each program includes this file once per backend.)
std::vector<float> ex2_approx_ftz_of(std::span<const float> in) {
  const auto n = static_cast<unsigned>(in.size());
  simt::DeviceBuffer<float> d_in(in), d_out(n);
  const unsigned block = 128;
  simt::launch<ex2_kernel>(dim3((n + block - 1) / block), dim3(block), 0, d_in.data(), d_out.data(), n);
  return d_out.to_host();
}

}  // namespace simt_fast_math_test::SIMT_BACKEND
