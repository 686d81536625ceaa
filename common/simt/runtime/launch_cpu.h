// simt::launch on the CPU: the stand-in for kernel<<<grid, block, dynamic_shared_bytes>>>(args...).
//
//   simt::launch<ch04::cpu::scores_kernel>(grid, block, 0, Q, K, S, n);
//   simt::set_max_dynamic_shared_bytes<flash_kernel<64, 64, 64>>(bytes);   // above 48 KiB
//   simt::launch<flash_kernel<64, 64, 64>>(grid, block, bytes, ...);
//   simt::launch_async<...>(...), simt::launch<...>(simt::LaunchMode, ...)   the same on the CPU
//
// The kernel is a template argument, so that its name (for error messages) comes from the
// compiler, and so that nvcc's version of this function (gpu.h) can write Kernel<<<...>>>.
// The arguments are copied once, as CUDA copies them into the kernel's parameter space, and every
// CUDA thread calls the kernel with those copies.
#pragma once

#include <atomic>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "common/simt/runtime/detail/grid.h"
#include "common/simt/runtime/device_code.h"
#include "common/simt/runtime/launch_checks.h"
#include "common/simt/runtime/launch_mode.h"
#include "common/simt/runtime/schedule.h"

namespace simt {
inline namespace cpu {
namespace detail {

// The dynamic shared memory a kernel may ask for: 48 KiB, or what set_max_dynamic_shared_bytes set.
template <auto Kernel>
inline std::atomic<std::size_t> max_dynamic_shared_bytes{rules::default_dynamic_shared_bytes};

// Calls the kernel with the launch's copies of the arguments.
template <auto Kernel, class Params>
void invoke(const void* params) {
  std::apply(Kernel, *static_cast<const Params*>(params));
}

// The pointer arguments of a launch, by position (GridLaunch::pointer_arguments).
template <class Params, std::size_t... I>
void note_pointer_arguments(const Params& params, GridLaunch& run, std::index_sequence<I...>) {
  [[maybe_unused]] const auto note = [&](std::size_t i, const auto& argument) {
    if constexpr (std::is_pointer_v<std::decay_t<decltype(argument)>>) {
      if (i < GridLaunch::kArguments) run.pointer_arguments[i] = static_cast<const void*>(argument);
    }
  };
  (note(I, std::get<I>(params)), ...);
}

}  // namespace detail

// Lets `Kernel` be launched with up to `bytes` of dynamic shared memory (CUDA: cudaFuncSetAttribute
// with cudaFuncAttributeMaxDynamicSharedMemorySize). Throws std::invalid_argument above 227 KiB,
// the most a block of an H100/H200 can have.
template <auto Kernel>
void set_max_dynamic_shared_bytes(std::size_t bytes) {
  if (bytes > rules::max_dynamic_shared_bytes) {
    throw std::invalid_argument("set_max_dynamic_shared_bytes for " + std::string(rules::kernel_name<Kernel>()) + ": " +
                                std::to_string(bytes) + " bytes; accepted: at most " +
                                std::to_string(rules::max_dynamic_shared_bytes) + " (227 KiB)");
  }
  detail::max_dynamic_shared_bytes<Kernel> = bytes;
}

// Runs Kernel on a grid of `grid` blocks of `block` threads, each block with
// `dynamic_shared_bytes` of dynamic shared memory, and returns when every block is done.
// Throws std::invalid_argument for an empty grid or block, a block of more than 1024 threads or
// dimensions beyond CUDA's limits, or more dynamic shared memory than the kernel's limit (48 KiB
// unless raised by set_max_dynamic_shared_bytes); std::invalid_argument for a bad SIMT_SCHEDULE or
// SIMT_THREADS; std::runtime_error for a divergent __syncthreads(), a bad shuffle, or an exception
// thrown inside the kernel (the message names the kernel, the block and what happened).
template <auto Kernel, class... Args>
void launch(dim3 grid, dim3 block, std::size_t dynamic_shared_bytes, Args&&... args) {
  using Params = std::tuple<std::decay_t<Args>...>;
  static_assert(std::is_invocable_v<decltype(Kernel), const std::decay_t<Args>&...>,
                "simt::launch: the arguments do not match the kernel's parameters");
  const std::string_view name = rules::kernel_name<Kernel>();
  rules::check_launch_shape(name, grid, block);
  const std::size_t limit = detail::max_dynamic_shared_bytes<Kernel>;
  if (dynamic_shared_bytes > limit) {
    throw std::invalid_argument(
        "simt::launch of " + std::string(name) + ": " + std::to_string(dynamic_shared_bytes) +
        " bytes of dynamic shared memory, but this kernel's limit is " + std::to_string(limit) +
        (limit == rules::default_dynamic_shared_bytes
             ? " (48 KiB, CUDA's default); call simt::set_max_dynamic_shared_bytes<Kernel>(bytes) "
               "first, for up to 227 KiB"
             : " (set by set_max_dynamic_shared_bytes)"));
  }
  const Params params(std::forward<Args>(args)...);
  detail::GridLaunch run;
  run.kernel_name = name;
  run.grid = grid;
  run.block = block;
  run.dynamic_shared_bytes = dynamic_shared_bytes;
  run.invoke = &detail::invoke<Kernel, Params>;
  run.params = &params;
  run.schedule = current_schedule_choice();
  run.profiled_copy = SIMT_BACKEND_PROFILED;
  detail::note_pointer_arguments(params, run, std::index_sequence_for<Args...>{});
  detail::run_grid(run);
}

// CUDA's asynchronous launch (launch_mode.h). The CPU has no queue to put a kernel in, so this runs
// every block to completion, exactly as launch() does, and throws what launch() throws.
template <auto Kernel, class... Args>
void launch_async(dim3 grid, dim3 block, std::size_t dynamic_shared_bytes, Args&&... args) {
  launch<Kernel>(grid, block, dynamic_shared_bytes, std::forward<Args>(args)...);
}

// launch() or launch_async() as `mode` says, for host code that serves both (a chapter's launch
// function, called by its tests synchronously and by a GPU benchmark asynchronously).
template <auto Kernel, class... Args>
void launch(LaunchMode mode, dim3 grid, dim3 block, std::size_t dynamic_shared_bytes, Args&&... args) {
  (void)mode;  // both modes are synchronous on the CPU
  launch<Kernel>(grid, block, dynamic_shared_bytes, std::forward<Args>(args)...);
}

}  // namespace cpu
}  // namespace simt
