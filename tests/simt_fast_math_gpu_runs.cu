// simt_fast_math_kernels.cuh compiled by nvcc: simt_fast_math_test::gpu.
#include "simt_fast_math_kernels.cuh"
