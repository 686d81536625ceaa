// SIMT_CUDA_CHECK(call): runs a CUDA runtime call and throws std::runtime_error when it fails.
//
//   SIMT_CUDA_CHECK(cudaMalloc(&p, bytes));
//   -> std::runtime_error("CUDA error: cudaMalloc(&p, bytes) failed: out of memory
//                          (cudaErrorMemoryAllocation) at chapters/.../x.cu:42")
//
// The message names the call as written, the CUDA error string and its name, and the file and
// line, so a failure is reported where it happened. Available where the CUDA runtime is: in code
// compiled by nvcc, or in host code that included <cuda_runtime.h> (or _api.h) before this header.
// Source: the CUDA Runtime API reference, "Error Handling" (cudaGetErrorString, cudaGetErrorName).
#pragma once

#if defined(__CUDACC__)
#include <cuda_runtime.h>
#endif

#if defined(CUDART_VERSION)

#include <stdexcept>
#include <string>

namespace simt {

// Throws std::runtime_error naming `call`, the error and where; does nothing for cudaSuccess.
inline void cuda_check(cudaError_t status, const char* call, const char* file, int line) {
  if (status == cudaSuccess) return;
  throw std::runtime_error(std::string("CUDA error: ") + call + " failed: " + cudaGetErrorString(status) + " (" +
                           cudaGetErrorName(status) + ") at " + file + ":" + std::to_string(line));
}

}  // namespace simt

#define SIMT_CUDA_CHECK(call) ::simt::cuda_check((call), #call, __FILE__, __LINE__)

#endif  // CUDART_VERSION
