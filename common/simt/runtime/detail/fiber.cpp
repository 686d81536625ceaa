// Fibers over Boost.Context's fcontext layer, with the sanitizers told about every switch.
//
// Under ThreadSanitizer this file is compiled without TSan's instrumentation (CMakeLists.txt) and
// with SIMT_TSAN_ANNOTATIONS=1: TSan must see no memory access of the scheduler between
// __tsan_switch_to_fiber and the jump (it would charge it to the wrong fiber), and it must see the
// scheduler's bookkeeping not at all (it would report it as races between fibers). What TSan needs
// to know, it is told by the annotations below and in block.cpp.
#include "common/simt/runtime/detail/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>
#include <string>

#include <boost/context/detail/fcontext.hpp>

#include "common/platform.h"

#if defined(__SANITIZE_ADDRESS__)
#define SIMT_ASAN 1
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#else
#define SIMT_ASAN 0
#endif

#if defined(__SANITIZE_THREAD__) || SIMT_TSAN_ANNOTATIONS
#define SIMT_TSAN 1
#include <sanitizer/tsan_interface.h>
#else
#define SIMT_TSAN 0
#endif

namespace simt {
inline namespace cpu {
namespace detail {

namespace fctx = boost::context::detail;

// What travels with every jump (jump_fcontext's data): who jumps, and to whom; nullptr is the host.
// The one that lands records where the one that jumped continues later (Fiber::landed).
struct Fiber::Jump {
  Fiber* from;
  Fiber* to;
};

// A switch from fiber to fiber (switch_to) goes through ontop_fcontext with this function, which
// runs on the target's stack and ends in a `ret` to where the target stopped. jump_fcontext ends in
// an indirect `jmp` instead, which leaves the call that entered it on the return stack buffer: every
// return of the target after the switch would then be mispredicted. The targets are the other
// lanes of a warp, stopped at the same call, so with the `ret` the prediction is right: simt_bench's
// BM_mma runs about twice as fast as with jump_fcontext. (Between the host and a fiber the two
// sides stop at different calls, and jump_fcontext is the cheaper of the two.)
fctx::transfer_t pass_through(fctx::transfer_t t) { return t; }

// A jump to `to` from a fiber: the first one into a new fiber starts it (make_fcontext's entry),
// every later one continues it at its last switch.
fctx::transfer_t jump_to(void*& to, bool& fresh, void* data) {
  if (fresh) {
    fresh = false;
    return fctx::jump_fcontext(to, data);
  }
  return fctx::ontop_fcontext(to, data, &pass_through);
}

// make_fcontext wants a plain function of transfer_t; this one unpacks it for Fiber::entry.
struct FiberEntry {
  static void start(fctx::transfer_t from) { Fiber::entry(from.fctx, static_cast<const Fiber::Jump*>(from.data)); }
};

namespace {

std::size_t page_bytes() {
  static const std::size_t bytes = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return bytes;
}

}  // namespace

std::size_t Fiber::stack_bytes() { return (SIMT_ASAN || SIMT_TSAN) ? 256 * 1024 : 64 * 1024; }

Fiber::Fiber(Body body, void* arg, const char* name) : body_(body), arg_(arg) {
  // The stack, with one inaccessible page below it: the stack grows down, into the guard page.
  mapping_bytes_ = page_bytes() + stack_bytes();
  mapping_ = fa::platform::map_stack(mapping_bytes_);
  if (mapping_ == nullptr) {
    throw std::runtime_error("simt: cannot map a fiber stack of " + std::to_string(mapping_bytes_) +
                             " bytes: " + std::strerror(errno));
  }
  mprotect(mapping_, page_bytes(), PROT_NONE);
  // Start each stack at a different offset within its page (0, 64, ..., 4032 bytes below the top):
  // page-aligned tops would put the hot frames of all fibers in the same few cache sets, and a
  // block of 256 fibers would evict itself on every round.
  thread_local unsigned fibers_made = 0;
  const std::size_t color = (fibers_made++ % 64) * 64;
  char* top = static_cast<char*>(mapping_) + mapping_bytes_ - color;
  context_ = fctx::make_fcontext(top, stack_bytes() - color, &FiberEntry::start);
  asan_bottom_ = static_cast<char*>(mapping_) + page_bytes();
  asan_size_ = stack_bytes();
#if SIMT_ASAN
  // AddressSanitizer does not clear its shadow when memory is unmapped: a stack mapped where an
  // earlier fiber's stack was still carries that fiber's poisoned frames, and the first access of
  // the new fiber (before it could unpoison anything) would be reported, or crash the report.
  __asan_unpoison_memory_region(asan_bottom_, asan_size_);
#endif
#if SIMT_TSAN
  tsan_fiber_ = __tsan_create_fiber(0);
  __tsan_set_fiber_name(tsan_fiber_, name);
#else
  (void)name;
#endif
}

Fiber::~Fiber() {
#if SIMT_TSAN
  __tsan_destroy_fiber(tsan_fiber_);
#endif
  // The fiber is idle (suspended between two bodies): its stack holds nothing that needs a destructor.
#if SIMT_ASAN
  __asan_unpoison_memory_region(asan_bottom_, asan_size_);  // the frames it stopped in stay poisoned
#endif
  if (mapping_ != nullptr) munmap(mapping_, mapping_bytes_);
}

Fiber* Fiber::resume() {
#if SIMT_ASAN
  void* host_fake_stack = nullptr;
  __sanitizer_start_switch_fiber(&host_fake_stack, asan_bottom_, asan_size_);
#endif
#if SIMT_TSAN
  tsan_host_ = __tsan_get_current_fiber();
  // With synchronisation: what the host did before this switch (the block's setup, the kernel's
  // arguments) happens before what the fiber does next.
  __tsan_switch_to_fiber(tsan_fiber_, 0);
#endif
  Jump jump{nullptr, this};
  fresh_ = false;
  const fctx::transfer_t back = fctx::jump_fcontext(context_, &jump);
#if SIMT_ASAN
  __sanitizer_finish_switch_fiber(host_fake_stack, nullptr, nullptr);
#endif
  // Back from this fiber, or from the last of the fibers it switched to.
  Fiber* returned = static_cast<const Jump*>(back.data)->from;
  returned->context_ = back.fctx;
  return returned;
}

void Fiber::suspend() {
#if SIMT_TSAN
  // Without synchronisation: otherwise everything a CUDA thread did would happen before everything
  // the next one does (through the host), and TSan could never see a missing barrier.
  __tsan_switch_to_fiber(tsan_host_, __tsan_switch_to_fiber_no_sync);
#endif
#if SIMT_ASAN
  __sanitizer_start_switch_fiber(&asan_fake_stack_, asan_host_bottom_, asan_host_size_);
#endif
  Jump jump{this, nullptr};
  const fctx::transfer_t from = fctx::jump_fcontext(host_context_, &jump);
  landed(from.fctx, static_cast<const Jump*>(from.data));
}

void Fiber::switch_to(Fiber& next) {
#if SIMT_TSAN
  __tsan_switch_to_fiber(next.tsan_fiber_, __tsan_switch_to_fiber_no_sync);  // no sync, as suspend()
#endif
#if SIMT_ASAN
  __sanitizer_start_switch_fiber(&asan_fake_stack_, next.asan_bottom_, next.asan_size_);
#endif
  Jump jump{this, &next};
  const fctx::transfer_t from = jump_to(next.context_, next.fresh_, &jump);
  landed(from.fctx, static_cast<const Jump*>(from.data));
}

inline void Fiber::landed(void* from_context, const Jump* jump) {
  if (jump->from == nullptr) {  // from the host, in resume()
#if SIMT_ASAN
    __sanitizer_finish_switch_fiber(asan_fake_stack_, &asan_host_bottom_, &asan_host_size_);
#endif
    host_context_ = from_context;
    return;
  }
  // From another fiber, which continues later at from_context; the host waits where it waited
  // for that one.
#if SIMT_ASAN
  __sanitizer_finish_switch_fiber(asan_fake_stack_, nullptr, nullptr);
#endif
  Fiber& from = *jump->from;
  from.context_ = from_context;
  host_context_ = from.host_context_;
  asan_host_bottom_ = from.asan_host_bottom_;
  asan_host_size_ = from.asan_host_size_;
  tsan_host_ = from.tsan_host_;
}

void Fiber::entry(void* from_context, const Jump* jump) noexcept {
  Fiber* self = jump->to;
  self->landed(from_context, jump);
  for (;;) {
    self->body_(self->arg_);  // must not throw: nothing below this frame could catch it
    self->suspend();
  }
}

}  // namespace detail
}  // namespace cpu
}  // namespace simt
