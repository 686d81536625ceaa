// The chapter 07 kernels compiled by the host compiler: they run on the CPU through common/simt.
#include "chapters/07_backward/backward.cuh"
