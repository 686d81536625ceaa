// simt's trace: the order in which the CPU emulation carries out Hopper's asynchronous operations,
// for a program that draws or checks it (figures/hopper_trace.cpp, chapter 10's pipeline). Nothing
// here is for kernels or chapters; the events are observer.h's AsyncEvent and three of their own.
//
// While a TraceListener is installed (TraceScope), hopper.cpp hands it every AsyncEvent of observer.h, and
// three events that only the trace needs (the race checker and the profile have their own views of
// them), each at the moment the emulation carries it out:
//   TraceTma:       a TMA copy into shared memory issued by `thread`: its mbarrier, its box's first
//                   coordinates (c0 innermost), its destination (offset in dynamic shared memory)
//                   and its bytes
//   TraceWgmma:     a wgmma of the warpgroup whose first thread is `thread`, at the rendezvous of its
//                   128 threads: N, whether A comes from registers, both descriptors (desc_a is
//                   unused then) and the commit group it joins (the groups its threads had
//                   committed before it)
//   TraceWgmmaWait: `thread`'s wgmma_wait_group<pending> has returned, with `committed` groups
//                   committed: every group below committed - pending has landed
// Their order is the emulator's step order on the host thread that runs the block: the order in
// which its fibers (one per CUDA thread, block.h) reached them, not time on any GPU. TraceScope makes
// it one order, the same on every run: while it lives, launches run in_order on one host thread.
#pragma once

#include <array>
#include <cstdint>

#include "common/simt/tools/detail/observer.h"

namespace simt::observer {

struct TraceTma {
  unsigned thread = 0;
  const void* mbarrier = nullptr;
  std::array<int, 5> coordinates{};
  std::uint32_t shared_dst = 0;
  std::uint32_t bytes = 0;
};
struct TraceWgmma {
  unsigned thread = 0;
  unsigned n = 0;
  bool a_in_registers = false;
  std::uint64_t desc_a = 0, desc_b = 0;
  std::uint64_t group = 0;
};
struct TraceWgmmaWait {
  unsigned thread = 0;
  std::uint64_t committed = 0;
  int pending = 0;
};
class TraceListener {
 public:
  virtual ~TraceListener() = default;
  virtual void on(const AsyncEvent&) {}
  virtual void on(const TraceTma&) {}
  virtual void on(const TraceWgmma&) {}
  virtual void on(const TraceWgmmaWait&) {}
};
// Installs `listener` for its lifetime, with the schedule in_order and one host thread (set_schedule,
// set_host_threads; both reset at the end, as tests reset them). One scope at a time: a second
// throws std::logic_error. Not for use while another thread launches kernels.
class TraceScope {
 public:
  explicit TraceScope(TraceListener& listener);
  ~TraceScope();
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;
};
// hopper.cpp: each a call to the listener, where one is installed (nothing otherwise).
void trace(const TraceTma& e);
void trace(const TraceWgmma& e);
void trace(const TraceWgmmaWait& e);

}  // namespace simt::observer
