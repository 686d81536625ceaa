// simt's test kernels as a profiled copy, for tests/simt_racecheck_test.cpp (tests/CMakeLists.txt).
#include "simt_test_kernels.cuh"
