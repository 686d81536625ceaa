// The tensor-core test kernels and their runners compiled by nvcc: simt_tensor_test::gpu::
// (simt_tensor_core_runs.h). Building this file is the check that every test kernel, and the inline
// PTX of common/simt/tensor_core_gpu.h, is CUDA that nvcc and ptxas accept.
#include "simt_tensor_core_kernels.cuh"

namespace simt_tensor_test::gpu {

int compute_capability() {
  int device = 0, major = 0, minor = 0;
  SIMT_CUDA_CHECK(cudaGetDevice(&device));
  SIMT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  SIMT_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return 10 * major + minor;
}

}  // namespace simt_tensor_test::gpu
