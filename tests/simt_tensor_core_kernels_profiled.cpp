// simt's tensor-core test kernels as a profiled copy, for tests/simt_racecheck_test.cpp (tests/CMakeLists.txt).
#include "simt_tensor_core_kernels.cuh"
