// The checker behind simt::racecheck (racecheck.h), as observer.cpp drives it: observer.h is what
// the scheduler, DeviceBuffer and simt's own instructions call, and it hands each event to this
// checker while racecheck is enabled(). Nothing here is for kernels or chapters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "common/simt/tools/detail/observer.h"

namespace simt::racecheck::detail {

// What one access is.
enum class Operation : std::uint8_t {
  read,            // an ordinary load of a profiled copy
  write,           // an ordinary store
  ldmatrix_read,   // one lane's row of an ldmatrix
  cp_async_read,   // the global read of a cp.async
  cp_async_write,  // the shared write of a cp.async (until its wait_group retires it)
  atomic,          // atomicAdd: a read and a write in one indivisible step
  // The async proxy (racecheck_async.cpp), never entered in the barrier intervals:
  tma_write,       // cp.async.bulk.tensor global -> shared: its box, from the issue until its mbarrier phase
  tma_store_read,  // cp.async.bulk.tensor shared -> global: its box, from the issue until its wait_group
  wgmma_read,      // wgmma's operands in shared memory, from the issue until the wait_group that covers it
};

// True while enable() or start() is on (a relaxed load, after the first call has read
// SIMT_RACECHECK).
bool is_enabled();

// The events of observer.h, for the checker.
void launch_begin(std::string_view kernel, bool profiled_copy, const void* const* arguments, std::size_t count);
void launch_end();
void block_begin(std::string_view kernel, observer::BlockPlace grid, std::uint64_t block_linear,
                 const std::byte* shared, std::size_t shared_bytes, unsigned threads);
void warp_sync(unsigned warp);
void block_sync();
void block_end();
// One access of CUDA thread `thread` of the block being checked on this host thread (nothing
// otherwise); `site` is a key of sites.h.
void access(unsigned thread, std::uintptr_t site, std::uintptr_t address, std::uint32_t bytes, Operation op);
void async_copy_issued(unsigned thread, std::uintptr_t site, const void* shared_dst, const void* global_src,
                       bool valid);
void async_copy_landed(unsigned thread, const void* shared_dst);

// Hopper's instructions (hopper.cpp through observer.h), for the block being checked on this host
// thread: its AsyncOrder (racecheck_async.h), or nullptr where none is checked here. tma_write
// and async_read also mark the copy's bytes written for the interval rules and return the
// number the later events give back (0 where no block is checked).
class AsyncOrder;
AsyncOrder* async_order();
std::uint32_t tma_write(unsigned thread, std::uintptr_t site, const std::vector<std::uint32_t>& chunks);
std::uint32_t async_read(Operation op, unsigned thread, std::uintptr_t site, const std::vector<std::uint32_t>& chunks);

}  // namespace simt::racecheck::detail
