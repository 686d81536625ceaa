// The checker behind simt::racecheck (racecheck.h), as observer.cpp drives it: observer.h is what
// the scheduler, DeviceBuffer and simt's own instructions call, and it hands each event to this
// checker while racecheck is enabled(). Nothing here is for kernels or chapters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "common/simt/observer.h"

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
// thread (nothing otherwise): racecheck_async.h says what each one orders. Chunks are offsets in
// dynamic shared memory / 16; tma_write and async_read return a number for tma_landed and
// async_read_retired.
bool checking_block();
void proxy_fence(unsigned thread);
void mbarrier_init(const void* bar);
void mbarrier_arrive(unsigned thread, const void* bar);
void mbarrier_phase_completed(const void* bar, unsigned parity);
void mbarrier_waited(unsigned thread, const void* bar, unsigned parity);
void named_arrive(unsigned thread, unsigned id);
void named_completed(unsigned id, std::uint64_t generation);
void named_passed(unsigned thread, unsigned id, std::uint64_t generation);
std::uint32_t tma_write(unsigned thread, std::uintptr_t site, const std::vector<std::uint32_t>& chunks);
void tma_landed(std::uint32_t copy, const void* bar);
std::uint32_t async_read(Operation op, unsigned thread, std::uintptr_t site, const std::vector<std::uint32_t>& chunks);
void async_read_retired(std::uint32_t read, unsigned thread);

}  // namespace simt::racecheck::detail
