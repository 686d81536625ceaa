// Running one block on the CPU: one fiber per CUDA thread, all on the calling host thread.
//
// The scheduler runs the block in rounds. In each round it resumes every CUDA thread that can run,
// in the order of the schedule (schedule.h); a thread runs until it reaches __syncthreads(), a warp
// shuffle, or the end of the kernel, and then the next one runs:
//   1. every thread is ready
//   2. loop while some thread has not finished the kernel:
//   3.   if no thread is ready:
//   4.     if the waiting threads do not all wait at the same __syncthreads() with none finished,
//          or a warp's shuffle cannot complete: stop, report the counts
//   5.     else release the barrier: every thread is ready again
//   6.   resume each ready thread in schedule order, until it waits or finishes
//   7.   when every unfinished lane of a warp waits at a shuffle: hand out the values, ready them
// A thread waits at most until the end of its round, so a divergent barrier is found at line 4,
// never a hang. Line 6 hands over from thread to thread: one that begins to wait continues the
// next ready thread of the round itself (a direct fiber switch), and the host takes over again at
// the end of the round; the order is the schedule's either way. A warp-collective instruction (mma, ldmatrix,
// __syncwarp: warp_collective.h) is completed during line 6 by the last lane of its warp to arrive, which readies the
// other 31; a warp whose 32 lanes cannot all reach it is reported at line 4 too.
#pragma once

#include "common/simt/runtime/detail/grid.h"
#include "common/simt/runtime/device_code.h"

namespace simt {
inline namespace cpu {
namespace detail {

// Runs block `block_idx` of `launch` on this host thread. Throws std::runtime_error naming the
// kernel, the block and what went wrong (divergent barrier, shuffle error, exception in the kernel).
void run_block(const GridLaunch& launch, uint3 block_idx);

// True while a CUDA thread of this host thread runs (that is, in kernel code).
bool in_kernel();

}  // namespace detail
}  // namespace cpu
}  // namespace simt
