// common/simt: one kernel source, two ways to run it. The one header a kernel or its host code
// includes.
//
// Under nvcc (__CUDACC__) this is a pass-through to the CUDA runtime (runtime/runtime_gpu.h):
// kernels run on the GPU. Under the host C++ compiler it is a CPU implementation of CUDA's
// execution model. The folder has three parts, each with a detail/ that only simt includes:
//   runtime/       what a kernel may write (device_code.h: __global__, threadIdx, __shared__,
//                  __syncthreads(), shuffles, atomics, math), simt::launch<Kernel>(grid, block,
//                  dynamic_shared_bytes, args...) (launch_cpu.h), simt::DeviceBuffer<T>
//                  (buffer_cpu.h) and to_device.h, the CPU-only controls (schedule.h); behind them
//                  detail/grid.h (blocks on host threads), detail/block.h (a block's threads as
//                  fibers, the barrier, the shuffles), detail/fiber.h (Boost.Context's switch)
//   instructions/  tensor_core.h (mma.sync m16n8k16, ldmatrix, cp.async, __syncwarp), hopper.h
//                  (wgmma, mbarrier, TMA), fast_math.h (ex2.approx.ftz), the number types; each
//                  for both backends: detail/X_gpu.h is the PTX, detail/X_cpu.h and .cpp the
//                  emulation
//   tools/         the memory profile (profile.h) and the race checker (racecheck.h), fed by
//                  detail/observer.h, which the runtime and the instructions call
// The runtime is the one part whose GPU side is a single file (runtime_gpu.h): under nvcc the
// CUDA runtime itself is the launch, the buffer and the kernel-side words.
//
// SIMT_BACKEND is `gpu` or `cpu` (runtime/backend.h); write kernels as
//   namespace chNN::SIMT_BACKEND { template <...> __global__ void kernel(...) { ... } }
// so that a program may hold both compilations of the same kernel.
// A g++ translation unit must not include <cuda_runtime.h> as well: both declare dim3.
// docs/simt.md explains the mapping and what the CPU cannot show.
// Source: CUDA C++ Programming Guide (execution model, "C++ Language Extensions"); PTX ISA
// (shfl.sync); Boost.Context (the fcontext switch); docs/simt.md, "The code" (why that switch,
// and the sanitizers' annotations).
// See it work: build/default/bin/simt_missing_barrier (--schedule reverse, --fixed), and
// build/tsan/bin/simt_missing_barrier under the tsan preset.
#pragma once

#include "common/simt/runtime/backend.h"

#if defined(__CUDACC__)
#include "common/simt/runtime/runtime_gpu.h"
#else
#include "common/simt/runtime/buffer_cpu.h"
#include "common/simt/runtime/device_code.h"
#include "common/simt/runtime/launch_cpu.h"
#include "common/simt/runtime/schedule.h"
#endif
#include "common/simt/instructions/fast_math.h"
#include "common/simt/instructions/hopper.h"
#include "common/simt/instructions/tensor_core.h"
#include "common/simt/runtime/to_device.h"  // after the backend's DeviceBuffer
#include "common/simt/runtime/word_access.h"

// SIMT_UNROLL before a loop over a kernel's register arrays (fragments, accumulators): full
// unrolling under nvcc, without which it keeps those arrays in local memory instead of registers
// (CUDA C++ Programming Guide, "#pragma unroll"). The host compiler needs no hint.
#if defined(__CUDACC__)
#define SIMT_UNROLL _Pragma("unroll")
#else
#define SIMT_UNROLL
#endif
