// The tensor-core test kernels and their runners compiled by nvcc: simt_tensor_test::gpu::
// (simt_tensor_core_runs.h). Building this file is the check that every test kernel, and the inline
// PTX of common/simt/instructions/detail/tensor_core_gpu.h, is CUDA that nvcc and ptxas accept.
#include "simt_tensor_core_kernels.cuh"
