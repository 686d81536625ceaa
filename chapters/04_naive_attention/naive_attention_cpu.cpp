// The chapter 04 kernels compiled by the host compiler: they run on the CPU through common/simt.
#include "chapters/04_naive_attention/naive_attention.cuh"
