// The simt test kernels and their runners compiled by nvcc: simt_test::gpu:: (simt_test_runs.h).
// Building this file is the check that every test kernel is CUDA that nvcc accepts.
#include "simt_test_kernels.cuh"
