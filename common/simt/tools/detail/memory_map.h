// Internal to common/simt: which memory an address of a CUDA thread's access is, for the two tools
// that watch a profiled kernel copy's accesses, the memory profile (profile.h) and the race checker
// (racecheck.h).
//
//   global   a DeviceBuffer (buffer.h registers each one while it lives): its allocation, and the
//            offset in it
//   shared   the block's dynamic shared memory, or a static __shared__ array, which is a
//            `static thread_local` variable and so lies in this host thread's block of the
//            program's thread-local storage (minus simt's own thread_local variables: threadIdx,
//            blockIdx, blockDim, gridDim, the dynamic shared pointer)
//   other    everything else: the CUDA thread's stack, the heap, simt's variables
//
// Each allocation also keeps, while the race checker is on, one bit per byte: written since it was
// allocated (by the host, or by a kernel), for the checker's uninitialised reads. A buffer poisoned
// by the host (DeviceBuffer(count), DeviceBuffer::poison) counts as unwritten; one copied from the
// host, filled, or written by a kernel as written.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace simt::memory {

// One byte of `written` per 8 bytes of the allocation, bit b for byte 8 i + b; updated with atomic
// operations, since blocks on several host threads write one buffer at once.
struct WrittenBits {
  explicit WrittenBits(std::size_t bytes) : bits((bytes + 7) / 8) {}
  std::vector<std::atomic<std::uint8_t>> bits;
  bool all_written(std::size_t offset, std::size_t bytes) const;
  void mark(std::size_t offset, std::size_t bytes, bool written);
};

struct Allocation {
  std::uintptr_t begin = 0;
  std::uintptr_t end = 0;
  std::uint64_t id = 0;                  // 1, 2, ... in the order of allocation: the buffer's number
  std::size_t element_bytes = 1;         // sizeof(T) of the DeviceBuffer<T>
  std::shared_ptr<WrittenBits> written;  // null unless the race checker was on when it was made
  std::size_t bytes() const { return end - begin; }
};

// The live allocations, sorted by begin, as one immutable snapshot: a block takes the snapshot once
// when it begins, and buffers made or freed meanwhile do not disturb it.
using Allocations = std::shared_ptr<const std::vector<Allocation>>;
Allocations allocations();

// DeviceBuffer's calls (through observer.h). `track_written`: keep the written bits (the race
// checker is on); the memory starts unwritten.
void register_allocation(const void* data, std::size_t bytes, std::size_t element_bytes, bool track_written);
void unregister_allocation(const void* data);
// The host wrote [data, data + bytes) (true) or poisoned it (false); does nothing where the bits
// are not kept.
void host_wrote(const void* data, std::size_t bytes, bool written);
// Every allocation counts as written from now on (a launch the race checker could not watch may
// have written any of them).
void mark_all_written();

// The allocation holding address a, or nullptr.
const Allocation* find(const std::vector<Allocation>& allocations, std::uintptr_t a);

// This host thread's block of the program's thread-local storage (where static __shared__ arrays
// live), found once per host thread.
struct Range {
  std::uintptr_t begin = 0;
  std::uintptr_t end = 0;
  bool contains(std::uintptr_t a) const { return a >= begin && a < end; }
};
Range program_thread_local_storage();

// True for an address inside one of simt's own thread_local variables (threadIdx, ...), which
// kernels read but which are not shared memory.
bool simt_variable(std::uintptr_t a);

}  // namespace simt::memory
