// The chapter 04 kernels compiled by nvcc: they run on an NVIDIA GPU.
#include "chapters/04_naive_attention/naive_attention.cuh"
