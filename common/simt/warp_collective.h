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
//   current_lane(), current_warp()  of the calling CUDA thread.
//   where(site)                 "dir/file.cuh:42", as every report prints a place.
//   find_static_shared_memory()  called by the scheduler before each block (tensor_core.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
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

// "dir/file.cuh:42": where a kernel called an instruction, as every report of simt prints it.
std::string where(const std::source_location& site);

unsigned current_lane();  // 0..31 within the warp
unsigned current_warp();  // warp index within the block

}  // namespace detail
}  // namespace cpu
}  // namespace simt
