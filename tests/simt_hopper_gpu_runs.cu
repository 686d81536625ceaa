// The Hopper test kernels and their runners compiled by nvcc: simt_hopper_test::gpu::
// (simt_hopper_runs.h). Built for sm_90a (tests/CMakeLists.txt): compiling this file is the check
// that the inline PTX of common/simt/instructions/detail/hopper_gpu.h is what ptxas accepts.
#include "simt_hopper_kernels.cuh"
