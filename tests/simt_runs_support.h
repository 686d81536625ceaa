// What the runners of simt's tensor-core and Hopper test kernels share (simt_tensor_core_runs.h,
// simt_hopper_runs.h): their declaration for both backends, and the GPU's compute capability, which
// says whether a GPU has the instructions a test case runs (SIMT_SKIP_UNLESS_CC). nvcc compiles
// compute_capability() where it compiles this header: in the one .cu file per program that builds
// the kernels (the test's *_gpu_runs.cu).
#pragma once

#include <string>

// SIMT_DECLARE_RUNNERS(space, runners): the runners (a list of declarations) for each backend,
// space::cpu (the host compiler's build of the kernels) and space::gpu (nvcc's).
#define SIMT_DECLARE_RUNNERS(space, runners) \
  namespace space::cpu {                     \
  runners                                    \
  }                                          \
  namespace space::gpu {                     \
  runners                                    \
  }

namespace simt_gpu_tests {

// The compute capability of device 0 as 10 * major + minor (80 for an A100, 90 for an H100 or H200).
int compute_capability();

// What a test case skipped on a GPU of compute capability `cc` says: the capability, then why.
inline std::string skip_reason(int cc, const std::string& why) {
  return "this GPU has compute capability " + std::to_string(cc / 10) + "." + std::to_string(cc % 10) + "; " + why;
}

}  // namespace simt_gpu_tests

// SIMT_SKIP_UNLESS_CC(wanted, why): ends the current test case as skipped (FA_SKIP, catch.h), saying
// the GPU's compute capability and why, unless wanted(cc) holds for it.
#define SIMT_SKIP_UNLESS_CC(wanted, why)                                                \
  do {                                                                                  \
    const int capability = simt_gpu_tests::compute_capability();                        \
    if (!(wanted)(capability)) FA_SKIP(simt_gpu_tests::skip_reason(capability, (why))); \
  } while (false)

#if defined(__CUDACC__)
#include <cuda_runtime.h>

#include "common/simt/runtime/cuda_check.h"

int simt_gpu_tests::compute_capability() {
  int device = 0, major = 0, minor = 0;
  SIMT_CUDA_CHECK(cudaGetDevice(&device));
  SIMT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  SIMT_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return 10 * major + minor;
}
#endif
