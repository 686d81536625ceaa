// The chapter 06 kernel compiled by nvcc: it runs on an NVIDIA GPU (sm_80 or newer: mma.sync with
// bf16 inputs and cp.async first appear there).
#include "chapters/06_tensor_cores/tensor_cores.cuh"
