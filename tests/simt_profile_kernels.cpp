// The profile's test kernels, compiled as a profiled copy only (tests/CMakeLists.txt).
#include "simt_profile_kernels.cuh"
