// The recorder behind simt::profile (profile.h), as the rest of simt sees it: the scheduler
// (block.cpp) says when a block starts and ends and when a warp or the block synchronises, buffer.h
// registers device memory, and simt's own warp-collective instructions hand over the accesses they
// make. Nothing here is for kernels or chapters.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <source_location>
#include <string_view>

#include "common/simt/profile.h"

namespace simt::profile::detail {

// True between start() and stop(); read once per block (relaxed), so that an ordinary run pays one
// load of a flag per block and per synchronisation point, nothing per access.
extern std::atomic<bool> recording_flag;
inline bool is_recording() { return recording_flag.load(std::memory_order_relaxed); }

// The scheduler's calls (block.cpp), on the host thread that runs the block. block_begin is called
// only while is_recording(); the others do nothing for a block that did not begin recorded.
//   block_begin: before the first CUDA thread of the block runs; `shared` is its dynamic shared
//                memory of `shared_bytes`, `threads` its size, `first_block` true for block (0,0,0)
//   warp_sync:   every unfinished lane of `warp` has reached the same warp-collective operation
//   block_sync:  every thread of the block has reached the same __syncthreads()
//   block_end:   the block has finished (or failed); its counts join the kernel's
void block_begin(std::string_view kernel, bool first_block, const std::byte* shared, std::size_t shared_bytes,
                 unsigned threads);
void warp_sync(unsigned warp);
void block_sync();
void block_end();

// One lane's access, for simt's own instructions that move memory (ldmatrix, cp.async; see
// tensor_core.cpp), made as the hardware makes it: `thread` is the CUDA thread's linear index in
// its block, `site` the instruction's place in the kernel (its file and line become the site's).
// The address is classified (global, shared, neither) as a hook would classify it. Does nothing
// unless this host thread's block is being recorded.
void record_instruction_access(const std::source_location& site, unsigned thread, const void* address,
                               std::uint32_t bytes, Op op);

// Device memory (buffer.h): [data, data + bytes) is global memory until unregistered.
void register_device_memory(const void* data, std::size_t bytes);
void unregister_device_memory(const void* data);

}  // namespace simt::profile::detail
