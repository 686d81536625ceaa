// Running a grid on the CPU: the blocks of a launch spread over a few host threads.
//
// Every block runs from start to end on one host thread (block.h), so that its __shared__ arrays,
// mapped to thread_local storage, are the block's own. Host threads take the next block index from
// a shared counter until none is left. The caller of simt::launch is one of the host threads; the
// others are a pool that lives as long as the program, so that each keeps its fibers (and their
// stacks) from one launch to the next.
#pragma once

#include <cstddef>
#include <string_view>

#include "common/simt/runtime/device_code.h"
#include "common/simt/runtime/schedule.h"

namespace simt {
inline namespace cpu {
namespace detail {

// One launch, as simt::launch hands it over: the kernel bound to its arguments (`invoke(params)`
// runs the kernel body for the current CUDA thread) and the configuration.
struct GridLaunch {
  std::string_view kernel_name;
  dim3 grid;
  dim3 block;
  std::size_t dynamic_shared_bytes = 0;
  void (*invoke)(const void* params) = nullptr;
  const void* params = nullptr;
  ScheduleChoice schedule;
  bool profiled_copy = false;  // the kernel is a profiled copy (SIMT_PROFILED): simt's hooks see its accesses
  // The kernel's pointer arguments, by position (nullptr for the others), for reports that name a
  // buffer by the argument it was passed as.
  static constexpr std::size_t kArguments = 16;
  const void* pointer_arguments[kArguments] = {};
};

// Runs every block of the grid and returns when all are done. Launches from several host threads
// are run one after the other. Throws std::runtime_error for the failing block with the lowest
// index (divergent barrier, a shuffle error, an exception in the kernel), after the blocks already
// started have finished; std::logic_error when called from inside a kernel.
void run_grid(const GridLaunch& launch);

}  // namespace detail
}  // namespace cpu
}  // namespace simt
