// common/simt: one kernel source, two ways to run it. The one header a kernel or its host code
// includes.
//
// Under nvcc (__CUDACC__) this is a pass-through to the CUDA runtime (gpu.h): kernels run on the
// GPU. Under the host C++ compiler it is a CPU implementation of CUDA's execution model:
//   device_code.h  what a kernel may write (__global__, threadIdx, __shared__, __syncthreads(),
//                  warp shuffles, atomicAdd, the math functions)
//   launch.h       simt::launch<Kernel>(grid, block, dynamic_shared_bytes, args...)
//   buffer.h       simt::DeviceBuffer<T>; to_device.h simt::to_device<Element>(host), inputs to it
//   schedule.h     CPU-only controls: the order of a block's threads, the number of host threads
//   tensor_core.h  mma.sync m16n8k16, ldmatrix, cp.async, __syncwarp, simt::bf16 and simt::f16 (for
//                  both backends: the PTX instructions under nvcc, their emulation on the CPU)
//   fast_math.h    simt::ex2_approx_ftz, the GPU's fast exp2 (both backends)
// and behind them grid.h (blocks on host threads), block.h (the threads of a block as fibers, the
// barrier, the shuffles) and fiber.h (Boost.Context's fcontext switch).
//
// SIMT_BACKEND is `gpu` or `cpu` (backend.h); write kernels as
//   namespace chNN::SIMT_BACKEND { template <...> __global__ void kernel(...) { ... } }
// so that a program may hold both compilations of the same kernel.
// A g++ translation unit must not include <cuda_runtime.h> as well: both declare dim3.
// docs/simt.md explains the mapping and what the CPU cannot show.
// Source: CUDA C++ Programming Guide (execution model, "C++ Language Extensions"); PTX ISA
// (shfl.sync); notes/simt-measurements.md (the switch mechanism, the sanitizer annotations).
// See it work: build/default/bin/simt_missing_barrier (--schedule reverse, --fixed), and
// build/tsan/bin/simt_missing_barrier under the tsan preset.
#pragma once

#include "common/simt/backend.h"

#if defined(__CUDACC__)
#include "common/simt/fast_math.h"
#include "common/simt/gpu.h"
#include "common/simt/tensor_core.h"
#else
#include "common/simt/buffer.h"
#include "common/simt/device_code.h"
#include "common/simt/fast_math.h"
#include "common/simt/launch.h"
#include "common/simt/schedule.h"
#include "common/simt/tensor_core.h"
#endif
#include "common/simt/to_device.h"  // after the backend's DeviceBuffer
