// The race checker's test kernels, compiled as a profiled copy only (tests/CMakeLists.txt).
#include "simt_racecheck_kernels.cuh"
