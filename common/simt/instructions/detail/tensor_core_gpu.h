// tensor_core.h under nvcc: each function is one PTX instruction (inline asm). Shared-memory
// operands are 32-bit .shared addresses, made from generic pointers by __cvta_generic_to_shared.
//
// Architectures. mma.m16n8k16 with .bf16 or .f16 inputs and cp.async need sm_80 (A100) or later;
// ldmatrix needs sm_75. The project builds for sm_80 when no GPU is present (cmake/Options.cmake)
// and for the local GPU otherwise. Compiled for an older GPU (a Turing card such as the T4, sm_75):
//   - mma_m16n8k16_*: traps at run time instead of failing the whole build (ptxas refuses
//     .m16n8k16 below sm_80). Chapter 06, its one user, is then built for the CPU only
//     (FA_CUDA_SM80, cmake/Options.cmake), so no kernel of the project reaches the trap; simt's
//     GPU test of it skips there.
//   - cp_async_16: a plain synchronous 16-byte copy (zeros when !valid, without reading the source),
//     and cp_async_commit_group / cp_async_wait_group do nothing. The same semantics: a copy that
//     is complete before it returns is one that cp.async could have made, and every wait finds
//     its groups complete. Chapter 08's decoding kernel runs on a T4 so (without the overlap of
//     the copy with the arithmetic that cp.async gives on sm_80).
// Source: PTX ISA, "mma" (Target ISA notes), "ldmatrix", "cp.async"; CUDA C++ Programming Guide,
// "Address Space Conversion Functions" (__cvta_generic_to_shared).
#pragma once

#include <cstdint>

#include "common/simt/instructions/half_precision.h"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define SIMT_SM80_OR_TRAP() __trap()
#else
#define SIMT_SM80_OR_TRAP() ((void)0)
#endif

namespace simt {
inline namespace gpu {

// The body of mma_m16n8k16_{bf16,f16}: one instruction, TYPE the input type. The string must be a
// literal, hence a macro rather than a template.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define SIMT_MMA_M16N8K16(TYPE)                                                                                     \
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." TYPE "." TYPE                                               \
               ".f32 "                                                                                              \
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"                              \
               : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])                                                     \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]), \
                 "f"(c[3]))
#else
#define SIMT_MMA_M16N8K16(TYPE) SIMT_SM80_OR_TRAP()
#endif

__device__ __forceinline__ void mma_m16n8k16_bf16(float (&d)[4], const std::uint32_t (&a)[4],
                                                  const std::uint32_t (&b)[2], const float (&c)[4]) {
  SIMT_MMA_M16N8K16("bf16");
}

__device__ __forceinline__ void mma_m16n8k16_f16(float (&d)[4], const std::uint32_t (&a)[4],
                                                 const std::uint32_t (&b)[2], const float (&c)[4]) {
  SIMT_MMA_M16N8K16("f16");
}

__device__ __forceinline__ std::uint32_t shared_address(const void* pointer) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(pointer));
}

// The "memory" clobbers: ldmatrix reads, and cp.async writes, memory that ordinary C++ accesses
// too, so the compiler must not move those accesses across the instruction.
__device__ __forceinline__ void ldmatrix_x1(std::uint32_t (&r)[1], const void* row_address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n"
               : "=r"(r[0])
               : "r"(shared_address(row_address))
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x2(std::uint32_t (&r)[2], const void* row_address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(shared_address(row_address))
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], const void* row_address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row_address))
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x1_trans(std::uint32_t (&r)[1], const void* row_address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n"
               : "=r"(r[0])
               : "r"(shared_address(row_address))
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x2_trans(std::uint32_t (&r)[2], const void* row_address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(shared_address(row_address))
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], const void* row_address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row_address))
               : "memory");
}

// .cg: cached in L2 only, the one cache option that 16-byte copies allow besides .ca; the data
// goes to shared memory, so L1 would only hold a second copy of it.
__device__ __forceinline__ void cp_async_16(void* shared_dst, const void* global_src, bool valid = true) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  const int src_size = valid ? 16 : 0;  // 0: read nothing, fill the 16 bytes with zeros
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(shared_dst)), "l"(global_src),
               "r"(src_size)
               : "memory");
#else
  // sm_75: both addresses are 16-byte aligned (as cp.async requires), so one int4 each way.
  *static_cast<int4*>(shared_dst) = valid ? *static_cast<const int4*>(global_src) : make_int4(0, 0, 0, 0);
#endif
}

__device__ __forceinline__ void cp_async_commit_group() {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
  // sm_75: nothing to group; cp_async_16 copied at once.
}

template <int N>
__device__ __forceinline__ void cp_async_wait_group() {
  static_assert(N >= 0, "cp.async.wait_group N: N is the number of groups left in flight, >= 0");
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
  // sm_75: nothing in flight; cp_async_16 copied at once.
}

}  // namespace gpu
}  // namespace simt

#undef SIMT_MMA_M16N8K16
#undef SIMT_SM80_OR_TRAP
