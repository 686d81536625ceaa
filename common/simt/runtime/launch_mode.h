// simt::LaunchMode: whether a launch waits for its kernel. Plain C++ with no CUDA in it, so that
// host code compiled by g++ (a chapter's host header, a GPU benchmark) can name it.
//
//   simt::launch<kernel>(grid, block, bytes, args...)                                 waits
//   simt::launch<kernel>(simt::LaunchMode::asynchronous, grid, block, bytes, args...) does not
//   simt::launch_async<kernel>(grid, block, bytes, args...)                           does not
//
// On the GPU (gpu.h) a synchronous launch is Kernel<<<...>>> followed by cudaGetLastError and
// cudaDeviceSynchronize, so that a fault inside the kernel is reported by the launch that caused it,
// naming the kernel. An asynchronous launch checks cudaGetLastError only (a bad configuration is
// still reported at once) and returns while the kernel runs; a fault inside it surfaces at the next
// call that waits for the device (cudaDeviceSynchronize, cudaEventSynchronize, a cudaMemcpy). A
// benchmark uses it so that the region between two CUDA events holds only the kernels.
// On the CPU (launch.h) both modes run every block to completion before returning: the emulation
// has no queue to put a kernel in.
//
// Source: CUDA C++ Programming Guide, "Asynchronous Concurrent Execution" (kernel launches return
// before the device has completed the task) and "Error Checking".
#pragma once

namespace simt {

enum class LaunchMode {
  synchronous,   // return when the kernel has finished; its faults are reported by this launch
  asynchronous,  // GPU: return once the kernel is queued; CPU: the same as synchronous
};

}  // namespace simt
