// The recorder behind simt::profile (profile.h), as observer.cpp drives it: observer.h is what the
// scheduler, DeviceBuffer and simt's own instructions call, and it hands each event to this
// recorder while a profile is being recorded. Nothing here is for kernels or chapters.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/simt/tools/profile.h"

namespace simt::profile::detail {

// True between start() and stop(); read once per block (relaxed), so that an ordinary run pays one
// load of a flag per block and per synchronisation point, nothing per access.
extern std::atomic<bool> recording_flag;
inline bool is_recording() { return recording_flag.load(std::memory_order_relaxed); }

// On the host thread that runs the block. block_begin is called only while is_recording(); the
// others do nothing for a block that did not begin recorded.
//   block_begin: before the first CUDA thread of the block runs; `shared` is its dynamic shared
//                memory of `shared_bytes`, `threads` its size, `first_block` true for block (0,0,0)
//   warp_sync:   every unfinished lane of `warp` has reached the same warp-collective operation
//   block_sync:  every thread of the block has reached the same __syncthreads()
//   block_end:   the block has finished (or failed); its counts join the kernel's
//   record:      one access of CUDA thread `thread` (linear index in its block) at `site` (a key of
//                sites.h); the address is classified (global, shared, neither) here
//   tma_copy:    a TMA copy issued in the block, global -> shared (Op::load) or shared -> global
//                (Op::store), of a box of `box_bytes`, `tensor_bytes` of them inside the tensor
//   wgmma_read:  a wgmma issued by a warpgroup of the block reads `bytes` of shared memory
void block_begin(std::string_view kernel, bool first_block, const std::byte* shared, std::size_t shared_bytes,
                 unsigned threads);
void warp_sync(unsigned warp);
void block_sync();
void block_end();
void record(unsigned thread, std::uintptr_t site, std::uintptr_t address, std::uint32_t bytes, Op op);
void tma_copy(Op op, std::uint64_t box_bytes, std::uint64_t tensor_bytes);
void wgmma_read(std::uint64_t bytes);

}  // namespace simt::profile::detail
