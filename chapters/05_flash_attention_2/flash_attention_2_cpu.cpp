// The chapter 05 kernel compiled by the host compiler: it runs on the CPU through common/simt.
#include "chapters/05_flash_attention_2/flash_attention_2.cuh"
