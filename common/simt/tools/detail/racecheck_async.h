// Internal to common/simt: the race checker's rules for Hopper's asynchronous instructions, which
// the barrier intervals of racecheck.cpp cannot order (docs/simt.md, "Racecheck on Hopper").
//
// What orders what. An mbarrier and a named barrier order by phases, not by intervals: what a
// thread did before it arrives happens before what a thread does after its wait for that phase
// returns. So this part keeps a vector clock per warp (a warp is one timeline: its lanes count as
// ordered with each other, in lock-step), joined along every edge that CUDA promises:
//   - __syncthreads(): every warp with every warp;
//   - mbarrier: each arrival is a release into the current phase; a TMA copy's bytes release what
//     its thread had done when it started the copy; a wait for a phase that completed acquires all
//     of them. A wait whose phase never completed (the parity of a phase before the first, on a new
//     mbarrier) acquires nothing;
//   - named barriers (bar.sync / bar.arrive): each arrival releases into the barrier's use, and a
//     bar.sync that passes acquires it.
// A thread's count moves on after each release, so what it does next is not ordered by it.
//
// What it checks, per 16-byte chunk of dynamic shared memory (the unit of TMA and wgmma's core
// matrices):
//   - a TMA write (from the copy's start) against every earlier access to the chunk: an ordinary
//     write or read, or a wgmma or TMA store that read it; a wgmma's read lasts until a
//     wgmma_wait_group of its warpgroup covers it, a TMA store's until its thread's
//     cp_async_bulk_wait_group;
//   - an ordinary read or write against the chunk's TMA write, and a write against the reads of
//     wgmma and TMA stores still in flight or not ordered before it;
//   - a wgmma or TMA store read against the ordinary writes and the TMA write before it; an
//     ordinary write that is ordered before the read but with no fence.proxy.async of the writing
//     thread between the write and what orders it is an `unfenced_write` (PTX ISA, "Memory
//     Consistency Model", "Proxies": the async proxy sees generic-proxy writes only through the
//     fence).
// Two ordinary accesses are not this part's business: racecheck.cpp's intervals check them.
// Exact for these rules whatever the schedule: the clocks depend on which phase each wait
// returned for, not on when.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

#include "common/simt/tools/detail/observer.h"
#include "common/simt/tools/detail/racecheck_findings.h"

namespace simt::racecheck::detail {

class AsyncOrder {
 public:
  // A new block of `threads` CUDA threads and `shared_bytes` of dynamic shared memory; `block`
  // carries the block's place (block, grid) into every example.
  void begin(unsigned threads, std::size_t shared_bytes, const Example& block);

  // An ordinary load or store (or atomic: a write) of dynamic shared memory, `offset` bytes in.
  void generic(unsigned thread, std::uintptr_t site, std::uint64_t offset, std::uint32_t bytes, bool write,
               Records& out);
  void block_sync();
  // Everything else that orders (fences, mbarriers, named barriers, a copy's landing, a read's
  // retirement), as hopper.cpp reports it.
  void on(const observer::AsyncEvent& e);

  // A TMA copy into the 16-byte chunks `chunks` (offsets / 16), started by `thread` at `site`;
  // returns the copy's number, for its tma_landed event.
  std::uint32_t tma_write(unsigned thread, std::uintptr_t site, const std::vector<std::uint32_t>& chunks, Records& out);
  // A read by the async proxy (op: wgmma_read, by the warpgroup whose first thread is `thread`, or
  // tma_store_read, by `thread` alone); returns its number, for its read_retired events.
  std::uint32_t async_read(Operation op, unsigned thread, std::uintptr_t site, const std::vector<std::uint32_t>& chunks,
                           Records& out);

 private:
  using Clock = std::vector<std::uint32_t>;  // per warp of the block: the epochs seen
  struct Access {
    std::uint16_t thread = 0;
    std::uint16_t warp = 0;
    std::uint32_t epoch = 0;
    std::uintptr_t site = 0;
    std::uint16_t mask = 0;  // the bytes of the chunk (ordinary writes)
    std::uint8_t bytes = 0;
  };
  struct Chunk {
    std::uint32_t block_stamp = 0;
    bool tma = false;                  // `tma_write` holds the chunk's latest write
    Access tma_write;                  // epoch: the issuing warp's, when the copy started
    std::vector<Access> writes;        // ordinary writes since the TMA write, the latest of each thread
    std::vector<Access> reads;         // ordinary reads since, the latest of each warp
    std::vector<std::uint32_t> async;  // wgmma and TMA store reads since, the latest of each (op, warp)
    void clear_accesses() {
      writes.clear();
      reads.clear();
      async.clear();
    }
  };
  struct AsyncRead {
    Operation op;
    std::uintptr_t site;
    std::uint16_t thread, first_warp;
    std::vector<std::uint32_t> retired;  // per warp of the reader: its epoch at the covering wait
  };
  struct Barrier {
    Clock phase;  // the releases of the current phase
    Clock done[2];
    bool completed[2] = {false, false};
  };
  struct Named {
    Clock use;
    std::map<std::uint64_t, Clock> done;  // by generation, the last few
  };

  Chunk& chunk(std::uint32_t index);
  Access access_of(unsigned thread, std::uintptr_t site, std::uint32_t bytes) const;
  void report_open_reads(Records& out, const Chunk& k, const Clock& c, const Access& x, Operation op,
                         std::uint32_t chunk);
  void acquire_if(unsigned thread, const Clock* from);
  void retired(std::uint32_t read, unsigned thread);
  void release_into(Clock& target, unsigned thread);
  void tick(unsigned thread);
  static bool ordered(const Access& a, const Clock& c) { return c[a.warp] >= a.epoch; }
  bool fenced(const Access& write, const Clock& c) const;
  bool retired_before(const AsyncRead& r, const Clock& c) const;
  void report(Records& out, Kind kind, const Access& first, Operation first_op, const Access& second,
              Operation second_op, std::uint32_t chunk);

  Example block_;
  unsigned warps_ = 0;
  std::uint32_t block_stamp_ = 0;
  std::vector<Clock> clocks_;                       // per warp: its view; its own entry, its lanes' largest count
  std::vector<std::uint32_t> counts_;               // per thread: its releases, from 1
  std::vector<std::vector<std::uint32_t>> fences_;  // per thread: the epochs of its proxy fences
  std::vector<Chunk> chunks_;                       // per 16 bytes of dynamic shared memory
  std::vector<AsyncRead> reads_;
  std::vector<Clock> copies_;  // per TMA copy: its thread's clock when it started
  std::unordered_map<const void*, Barrier> barriers_;
  std::map<unsigned, Named> named_;
};

}  // namespace simt::racecheck::detail
