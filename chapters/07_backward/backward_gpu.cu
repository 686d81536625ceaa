// The chapter 07 kernels compiled by nvcc: they run on an NVIDIA GPU.
#include "chapters/07_backward/backward.cuh"
