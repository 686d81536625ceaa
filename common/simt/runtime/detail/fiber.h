// A fiber: a stack of its own and a saved set of registers, so that a function can stop in the
// middle (suspend) and later continue where it stopped (resume), on the same host thread.
//
// common/simt runs each CUDA thread of a block on a fiber. A fiber here runs `body(arg)` once per
// resume-from-idle, in an endless loop, so that it is created once and reused for every block of
// every launch (creating one is the slow part, 2-4 ms each under ThreadSanitizer):
//
//   host thread                       fiber
//   resume()  ------------------->    body(arg) runs ... suspend()      (e.g. in __syncthreads)
//   (returns) <-------------------
//   resume()  ------------------->    ... body continues ... returns; suspend()   (done; idle)
//   (returns) <-------------------
//   resume()  ------------------->    body(arg) runs again from the top (the next block)
//
// A fiber may also hand the host thread straight to another suspended fiber (switch_to): one jump
// instead of two through the host. The host's resume() returns when some fiber of the chain
// suspends, and says which one (the scheduler runs the lanes of a warp this way, one after the
// other, to the next warp-collective instruction).
//
// The switch is Boost.Context's fcontext layer (make_fcontext, jump_fcontext, ontop_fcontext: ~13
// ns; fiber.cpp says why every switch after the first goes through ontop_fcontext); its stack
// has a guard page below it, so an overflow stops the program instead of corrupting memory. The
// sanitizers are told about every switch (fiber.cpp), so AddressSanitizer knows which stack is in
// use and ThreadSanitizer treats each fiber as a thread of its own.
//
// A fiber belongs to the host thread that created it: only that thread may resume it.
// Source: Boost.Context, "Context switching with call/cc ... fcontext" (boost/context/detail/
// fcontext.hpp); the sanitizers' fiber interfaces in <sanitizer/common_interface_defs.h> and
// <sanitizer/tsan_interface.h>; docs/simt.md, "The code" (the switch's measured cost).
#pragma once

#include <cstddef>

namespace simt {
inline namespace cpu {
namespace detail {

class Fiber {
 public:
  using Body = void (*)(void* arg);

  // Maps a stack (stack_bytes() plus a guard page). Throws std::runtime_error if that fails.
  Fiber(Body body, void* arg, const char* name);
  ~Fiber();
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  // Host side: runs the fiber until it, or a fiber it switched to, suspends (or finishes its
  // body); returns that fiber.
  Fiber* resume();
  // Fiber side: returns control to the host thread; returns when this fiber is continued again
  // (by the host's resume() or by another fiber's switch_to()).
  void suspend();
  // Fiber side: continues `next`, a suspended fiber of the same host thread, without passing
  // through the host; returns when this fiber is continued again.
  void switch_to(Fiber& next);

  // The stack size of every fiber: 64 KiB, or 256 KiB under a sanitizer, whose reports are
  // printed on the fiber's stack and need up to ~20 KiB.
  static std::size_t stack_bytes();

 private:
  struct Jump;  // who jumps to whom (fiber.cpp)
  [[noreturn]] static void entry(void* from_context, const Jump* jump) noexcept;
  // After a jump into this fiber: records where the one that jumped continues later.
  [[gnu::always_inline]] inline void landed(void* from_context, const Jump* jump);
  friend struct FiberEntry;

  Body body_;
  void* arg_;
  void* mapping_ = nullptr;  // guard page + stack
  std::size_t mapping_bytes_ = 0;
  void* context_ = nullptr;       // where the fiber continues (fcontext_t)
  bool fresh_ = true;             // never entered yet: context_ is make_fcontext's start
  void* host_context_ = nullptr;  // where the host thread continues (fcontext_t)
  // AddressSanitizer: this fiber's fake stack while it is switched out, its own stack, and the
  // host's stack.
  void* asan_fake_stack_ = nullptr;
  const void* asan_bottom_ = nullptr;
  std::size_t asan_size_ = 0;
  const void* asan_host_bottom_ = nullptr;
  std::size_t asan_host_size_ = 0;
  // ThreadSanitizer: this fiber's and the host thread's contexts.
  void* tsan_fiber_ = nullptr;
  void* tsan_host_ = nullptr;
};

}  // namespace detail
}  // namespace cpu
}  // namespace simt
