// The chapter 05 kernel compiled by nvcc: it runs on an NVIDIA GPU.
#include "chapters/05_flash_attention_2/flash_attention_2.cuh"
