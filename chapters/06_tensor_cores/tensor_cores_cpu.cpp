// The chapter 06 kernel compiled by the host compiler: it runs on the CPU through common/simt,
// which carries out mma.sync, ldmatrix and cp.async lane by lane as the PTX ISA defines them.
#include "chapters/06_tensor_cores/tensor_cores.cuh"
