// Internal to common/simt: what the rest of simt tells the two tools that watch the memory accesses
// of a profiled kernel copy, the memory profile (profile.h) and the race checker (racecheck.h).
// The scheduler (grid.cpp, block.cpp) says when a launch and a block begin and end and when a warp
// or the block synchronises; DeviceBuffer (buffer.h) says what is device memory and when the host
// writes or poisons it; simt's own instructions (tensor_core.cpp, device_code.h's atomicAdd) hand
// over the accesses they make. observer.cpp passes each event on to the tools that are on, and
// holds the hooks that GCC's instrumentation calls before every load and store of a profiled copy.
// Nothing here is for kernels or chapters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <source_location>
#include <string>
#include <string_view>
#include <vector>

namespace simt::observer {

// True where this build has the hooks (GCC's -fsanitize=thread instrumentation, no sanitizer preset), and
// a sentence saying why not where it does not ("" where it does).
bool hooks_available();
std::string unavailable_reason();

// True while the profile records or the race checker is on (one relaxed load of each flag).
bool active();

// grid.cpp, around every launch: `profiled_copy` tells whether the kernel is a profiled copy,
// whose accesses the hooks see (launch.h sets it from SIMT_PROFILED); `arguments` are its pointer
// arguments by position (nullptr for the others).
void launch_begin(std::string_view kernel, bool profiled_copy, const void* const* arguments, std::size_t count);
void launch_end();

// block.cpp, on the host thread that runs the block; block_begin only while active(), the others
// do nothing for a block that did not begin observed.
//   block_begin: before the first CUDA thread runs. `block_linear` = x + grid.x (y + grid.y z);
//                `shared` is the block's dynamic shared memory of `shared_bytes`.
//   warp_sync:   every unfinished lane of `warp` has reached the same warp-collective operation
//                (a shuffle, mma, ldmatrix, __syncwarp), which is complete
//   block_sync:  every thread of the block has reached the same __syncthreads(), which opens
//   block_end:   the block has finished (or failed)
struct BlockPlace {
  unsigned x, y, z;
};
void block_begin(std::string_view kernel, BlockPlace grid, std::uint64_t block_linear, const std::byte* shared,
                 std::size_t shared_bytes, unsigned threads);
void warp_sync(unsigned warp);
void block_sync();
void block_end();

// simt's own instructions (tensor_core.cpp), for CUDA thread `thread` (its linear index in the
// block), called at the instruction in the kernel, `site`:
//   ldmatrix_read:     one lane's 16-byte row read by ldmatrix
//   async_copy_issued: a cp.async: reads 16 bytes at global_src (unless !valid) and writes 16 bytes
//                      at shared_dst, at some moment until this thread's wait_group retires it
//   async_copy_landed: this thread's wait_group has retired the copy to shared_dst
void ldmatrix_read(const std::source_location& site, unsigned thread, const void* address);
void async_copy_issued(const std::source_location& site, unsigned thread, const void* shared_dst,
                       const void* global_src, bool valid);
void async_copy_landed(unsigned thread, const void* shared_dst);
// device_code.h's atomicAdd in a profiled copy: an atomic read-modify-write of `bytes` at `address`
// by the running CUDA thread, at `site`.
void atomic_access(const std::source_location& site, const void* address, std::uint32_t bytes);

// hopper.cpp, Hopper's instructions on the CPU (hopper.h); the race checker orders them
// (racecheck_async.h), and the memory profile counts the bytes of the TMA copies and of wgmma's
// operands (profile.h, TmaCounts and WgmmaCounts), which hopper.cpp passes on every call.
// async_watched() says whether a checked block runs on this host thread, so that the footprints
// (`chunks`: offsets in dynamic shared memory / 16) are worked out only then (empty otherwise).
// The three that start an access return the number to give back in its later events (0 where
// the race checker does not watch):
//   tma_load_issued:  a TMA copy into shared memory, started by `thread`, moving `bytes`
//   wgmma_read:       a wgmma of the warpgroup whose first thread is `thread` reads `chunks`,
//                     `bytes` of shared memory in all
//   tma_store_issued: a TMA store, started by `thread`, reads `chunks`, moving `bytes`
// Every other event is one AsyncEvent (what `object` and `value` are depends on the kind).
enum class AsyncKind : std::uint8_t {
  proxy_fence,         // fence.proxy.async.shared::cta by `thread`
  mbarrier_init,       // object: the mbarrier
  mbarrier_arrive,     // an arrival of `thread` (with or without expect_tx) on object
  mbarrier_completed,  // the phase of parity `value` of object has completed
  mbarrier_waited,     // `thread`'s wait for the phase of parity `value` of object has returned
  named_arrive,        // an arrival of `thread` on named barrier `value`
  named_completed,     // use `generation` of named barrier `value` has all its threads
  named_passed,        // `thread`'s bar.sync of that use has passed
  tma_landed,          // copy number `value` has landed, completing on mbarrier object
  read_retired,        // `thread`'s wait_group covers read number `value`
};
struct AsyncEvent {
  AsyncKind kind;
  unsigned thread = 0;
  const void* object = nullptr;
  std::uint64_t value = 0;
  std::uint64_t generation = 0;
};
// The bytes of one TMA copy: its whole box (elements past the tensor's edge included), and of them
// those inside the tensor (read from, or written to, global memory).
struct TmaBytes {
  std::uint64_t box = 0;
  std::uint64_t tensor = 0;
};
bool async_watched();
void async_event(const AsyncEvent& e);
std::uint32_t tma_load_issued(const std::source_location& site, unsigned thread, TmaBytes bytes,
                              const std::vector<std::uint32_t>& chunks);
std::uint32_t wgmma_read(const std::source_location& site, unsigned thread, std::uint64_t bytes,
                         const std::vector<std::uint32_t>& chunks);
std::uint32_t tma_store_issued(const std::source_location& site, unsigned thread, TmaBytes bytes,
                               const std::vector<std::uint32_t>& chunks);

// buffer.h. register_device_memory: [data, data + bytes) is device memory (a DeviceBuffer of
// elements of `element_bytes`), unwritten, until unregister_device_memory; host_wrote: the host
// copied into or filled [data, data + bytes) (written = true) or poisoned it (written = false).
void register_device_memory(const void* data, std::size_t bytes, std::size_t element_bytes);
void unregister_device_memory(const void* data);
void host_wrote(const void* data, std::size_t bytes, bool written);

}  // namespace simt::observer
