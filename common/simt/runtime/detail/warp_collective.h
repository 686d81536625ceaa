// Internal to common/simt: what the emulated instructions (tensor_core.cpp) need from the block
// scheduler (block.cpp).
//
//   warp_collective(op, site)   the warp's rendezvous for an instruction that all 32 lanes execute
//                               together (mma, ldmatrix, __syncwarp). Each lane hands over its
//                               operands and waits; the last lane to arrive checks that every lane
//                               is at the same instruction at the same place, then runs
//                               op.complete once, on its own fiber, with all 32 lanes' operands
//                               (so ThreadSanitizer sees the memory accesses as that lane's), and
//                               the warp continues. Every arrival releases, and every departure
//                               acquires, a per-warp ThreadSanitizer token: what a lane wrote
//                               before the instruction is visible to all lanes after it.
//   current_async_copies(what)  the calling CUDA thread's cp.async copies in flight. The scheduler
//                               empties it before each block and lands what is left when the
//                               whole block has finished the kernel (land_async_copies,
//                               tensor_core.cpp).
//   warpgroup_collective(op, site)  the same for the 128 threads of a warpgroup (warps 4i .. 4i + 3):
//                               wgmma (hopper.cpp). A block whose last warpgroup is not whole cannot
//                               use it there.
//   wait_until(condition, site) the calling CUDA thread waits until condition.done(context) is true
//                               (an mbarrier phase, a named barrier: hopper.cpp). The scheduler
//                               asks again at the start of every round; when no thread can run
//                               any more, the launch fails with condition.describe(context).
//   block_finished()            called by the scheduler when every thread has finished the kernel:
//                               a report of the asynchronous work still in flight (hopper.cpp), or
//                               nothing.
//   current_block_serial()      changes with every block this host thread begins (hopper.cpp
//                               resets its per-block state on it).
//   current_lane(), current_warp()  of the calling CUDA thread.
//   where(site)                 "dir/file.cuh:42", as every report prints a place.
//   find_static_shared_memory()  called by the scheduler before each block (tensor_core.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <source_location>
#include <string>
#include <vector>

namespace simt {
inline namespace cpu {
namespace detail {

struct WarpCollective {
  const char* name = nullptr;  // the instruction as a kernel writes it, e.g. "ldmatrix_x4_trans"
  // Called once per warp instruction with lane_operands[0..31] = each lane's `operands`; may be
  // null (__syncwarp). Runs on the fiber of the last lane to arrive.
  void (*complete)(void* const* lane_operands) = nullptr;
  void* operands = nullptr;  // this lane's (on its stack; valid while it waits)
};

// Throws std::logic_error outside a kernel, std::invalid_argument (naming the instruction and its
// place) in a block whose size is not a multiple of 32. A mismatch between the lanes makes the
// launch fail with a report of where each lane is.
void warp_collective(const WarpCollective& op, const std::source_location& site);

void warpgroup_collective(const WarpCollective& op, const std::source_location& site);

struct BlockingWait {
  const char* name = nullptr;  // the instruction as a kernel writes it, e.g. "mbarrier_wait_parity"
  bool (*done)(const void* context) = nullptr;
  std::string (*describe)(const void* context) = nullptr;  // why it has not ended yet
  const void* context = nullptr;                           // on the waiting thread's stack
};
// Throws std::logic_error outside a kernel.
void wait_until(const BlockingWait& condition, const std::source_location& site);

// hopper.cpp: nothing, or what the block left in flight (a wgmma result never waited for, a TMA
// copy whose mbarrier nobody waited on).
std::optional<std::string> block_finished();

std::uint64_t current_block_serial();
unsigned current_block_threads();

// The dynamic shared memory of a block starts at a multiple of this (block.cpp), so that the low 18
// bits of an address in it are its offset: the CPU's shared-memory address (hopper.h).
inline constexpr std::size_t shared_window_bytes = std::size_t{1} << 18;

// One cp.async in flight: 16 bytes from `source` to `destination` (zeros if !valid), in group
// `group` of its thread (the number of groups the thread had committed when it started the copy).
struct AsyncCopy {
  std::byte* destination = nullptr;
  const std::byte* source = nullptr;
  bool valid = true;
  std::uint64_t group = 0;
};

struct AsyncCopies {
  std::vector<AsyncCopy> in_flight;  // in the order the thread started them
  std::uint64_t committed = 0;       // groups committed so far by this thread in this block
};

// Throws std::logic_error naming `what` outside a kernel.
AsyncCopies& current_async_copies(const char* what);
// Lands every copy of `copies`, oldest first, and empties it (tensor_core.cpp).
void land_async_copies(AsyncCopies& copies);

// Finds this host thread's thread-local storage (where static __shared__ arrays live) once, for
// the address checks of tensor_core.cpp. Called by the scheduler before each block, outside the
// fibers: found inside one, ThreadSanitizer would see the first fiber write the list and the others
// read it without synchronisation.
void find_static_shared_memory();

// tensor_core.cpp's address checks, for hopper.cpp: [address, address + bytes) lies in this block's
// dynamic shared memory or in this host thread's thread-local storage (static __shared__); an
// address as "0x55d0c2a0".
bool address_in_shared_memory(const void* address, std::size_t bytes);
std::string hex_address(const void* address);

// "dir/file.cuh:42": where a kernel called an instruction, as every report of simt prints it.
std::string where(const std::source_location& site);

unsigned current_lane();  // 0..31 within the warp
unsigned current_warp();  // warp index within the block

}  // namespace detail
}  // namespace cpu
}  // namespace simt
