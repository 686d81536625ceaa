// SIMT_BACKEND: the name of the backend this translation unit is compiled for.
//
//   gpu           under nvcc (__CUDACC__): kernels run on an NVIDIA GPU through the CUDA runtime;
//   cpu           under the host C++ compiler: kernels run on the CPU through common/simt;
//   cpu_profiled  the same, in the profiled copy of a kernel's translation unit (SIMT_PROFILED=1,
//                 cmake/SimtProfile.cmake): every access of its kernels is seen by simt's memory
//                 profile (profile.h) and race checker (racecheck.h). It shares simt's CPU runtime
//                 (simt::cpu); only the kernels' namespace differs.
// SIMT_BACKEND_PROFILED is true in the profiled copy, so that its launches say so (launch.h).
//
// Everything of simt's host API lives in `namespace simt { inline namespace SIMT_BACKEND { ... } }`,
// and chapter kernels in `namespace chNN::SIMT_BACKEND { ... }`. A program can then link one
// translation unit compiled by g++ and one compiled by nvcc from the same kernel source: the two
// copies are simt::cpu::launch and simt::gpu::launch, chNN::cpu::kernel and chNN::gpu::kernel, and
// no definition clashes with the other.
#pragma once

#if defined(__CUDACC__)
#define SIMT_BACKEND gpu
#define SIMT_BACKEND_PROFILED false
#elif SIMT_PROFILED
#define SIMT_BACKEND cpu_profiled
#define SIMT_BACKEND_PROFILED true
#else
#define SIMT_BACKEND cpu
#define SIMT_BACKEND_PROFILED false
#endif

// SIMT_RUNTIME: the namespace of simt's runtime (DeviceBuffer, launch) in this translation unit: gpu
// under nvcc, cpu for the host compiler, the profiled copy included (it shares the CPU's runtime).
#if defined(__CUDACC__)
#define SIMT_RUNTIME gpu
#else
#define SIMT_RUNTIME cpu
#endif
