// observer.h: the events of simt's scheduler, DeviceBuffer and instructions, passed on to the
// memory profile (profile_recorder.h) and the race checker (racecheck_recorder.h); and the hooks
// that GCC's or Clang's outline instrumentation calls before every load and store of a profiled
// kernel copy.
//
// This file is never instrumented itself. A hook keeps an access only while a CUDA thread runs on
// this host thread, in a block that one of the two tools watches (host code of a profiled
// translation unit calls the hooks too); each tool then classifies the address (memory_map.h).
#include "common/simt/tools/detail/observer.h"

#include <atomic>
#include <cstring>
#include <stdexcept>

#include "common/simt/runtime/detail/block.h"
#include "common/simt/runtime/detail/tsan_annotations.h"
#include "common/simt/runtime/device_code.h"
#include "common/simt/runtime/schedule.h"
#include "common/simt/tools/detail/memory_map.h"
#include "common/simt/tools/detail/profile_recorder.h"
#include "common/simt/tools/detail/racecheck_async.h"
#include "common/simt/tools/detail/racecheck_recorder.h"
#include "common/simt/tools/detail/sites.h"
#include "common/simt/tools/profiled_copy.h"
#include "common/simt/tools/trace.h"

namespace simt {

bool use_profiled_copy() { return observer::active(); }

namespace observer {
namespace {

// What watches the block that runs on this host thread (set by block_begin, cleared by block_end).
thread_local bool profile_block = false;
thread_local bool racecheck_block = false;

unsigned current_thread_linear() {
  const auto t = ::simt::cpu::builtin::threadIdx;
  const auto b = ::simt::cpu::builtin::blockDim;
  return t.x + b.x * (t.y + b.y * t.z);
}

}  // namespace

bool hooks_available() { return SIMT_PROFILE_HOOKS != 0; }

std::string unavailable_reason() {
#if SIMT_PROFILE_HOOKS
  return "";
#elif defined(__SANITIZE_ADDRESS__)
  return "not available in the asan build: the profiled kernels are compiled with ThreadSanitizer's "
         "instrumentation, which does not combine with AddressSanitizer; use the default preset";
#elif defined(__SANITIZE_THREAD__)
  return "not available in the tsan build: ThreadSanitizer's own runtime takes the calls the profiled kernels "
         "would make to simt; use the default preset";
#else
  return "not available in this build: it needs the memory-access instrumentation of GCC or of Clang 15 "
         "or newer (-fsanitize=thread, without its runtime); build with one of them and the default preset";
#endif
}

bool active() { return profile::detail::is_recording() || racecheck::detail::is_enabled(); }

void launch_begin(std::string_view kernel, bool profiled_copy, const void* const* arguments, std::size_t count) {
  if (racecheck::detail::is_enabled()) racecheck::detail::launch_begin(kernel, profiled_copy, arguments, count);
}

void launch_end() {
  if (racecheck::detail::is_enabled()) racecheck::detail::launch_end();
}

void block_begin(std::string_view kernel, BlockPlace grid, std::uint64_t block_linear, const std::byte* shared,
                 std::size_t shared_bytes, unsigned threads) {
  profile_block = profile::detail::is_recording();
  if (profile_block) profile::detail::block_begin(kernel, block_linear == 0, shared, shared_bytes, threads);
  racecheck_block = racecheck::detail::is_enabled();
  if (racecheck_block) {
    racecheck::detail::block_begin(kernel, grid, block_linear, shared, shared_bytes, threads);
  }
}

void warp_sync(unsigned warp) {
  if (profile_block) profile::detail::warp_sync(warp);
  if (racecheck_block) racecheck::detail::warp_sync(warp);
}

void block_sync() {
  if (profile_block) profile::detail::block_sync();
  if (racecheck_block) racecheck::detail::block_sync();
}

void block_end() {
  if (!profile_block && !racecheck_block) return;  // (written only when set: fibers read them)
  if (profile_block) profile::detail::block_end();
  if (racecheck_block) racecheck::detail::block_end();
  profile_block = racecheck_block = false;
}

void ldmatrix_read(const std::source_location& site, unsigned thread, const void* address) {
  if (!profile_block && !racecheck_block) return;
  const std::uintptr_t key = sites::key(site);
  const auto a = reinterpret_cast<std::uintptr_t>(address);
  if (profile_block) profile::detail::record(thread, key, a, 16, profile::Op::load);
  if (racecheck_block) racecheck::detail::access(thread, key, a, 16, racecheck::detail::Operation::ldmatrix_read);
}

void async_copy_issued(const std::source_location& site, unsigned thread, const void* shared_dst,
                       const void* global_src, bool valid) {
  if (!profile_block && !racecheck_block) return;
  const std::uintptr_t key = sites::key(site);
  if (profile_block) {
    // The profile counts the instruction where it is issued: a 16-byte global read (none when
    // !valid) and a 16-byte shared write.
    if (valid)
      profile::detail::record(thread, key, reinterpret_cast<std::uintptr_t>(global_src), 16, profile::Op::load);
    profile::detail::record(thread, key, reinterpret_cast<std::uintptr_t>(shared_dst), 16, profile::Op::store);
  }
  if (racecheck_block) racecheck::detail::async_copy_issued(thread, key, shared_dst, global_src, valid);
}

void async_copy_landed(unsigned thread, const void* shared_dst) {
  if (racecheck_block) racecheck::detail::async_copy_landed(thread, shared_dst);
}

void atomic_access(const std::source_location& site, const void* address, std::uint32_t bytes) {
  // Not counted by the profile: Nsight Compute counts atomics under metrics of their own.
  if (!racecheck_block || !::simt::cpu::detail::in_kernel()) return;
  racecheck::detail::access(current_thread_linear(), sites::key(site), reinterpret_cast<std::uintptr_t>(address), bytes,
                            racecheck::detail::Operation::atomic);
}

// The trace's listener (TraceScope), and the address ThreadSanitizer orders its calls by: the
// fibers of a block are threads to it, and not every event is inside hopper.cpp's bookkeeping.
namespace {
std::atomic<TraceListener*> trace_listener{nullptr};
char trace_token = 0;

template <class Event>
void to_listener(const Event& e) {
  TraceListener* listener = trace_listener.load(std::memory_order_acquire);
  if (listener == nullptr) return;
  SIMT_TSAN_ACQUIRE(&trace_token);
  listener->on(e);
  SIMT_TSAN_RELEASE(&trace_token);
}
}  // namespace

TraceScope::TraceScope(TraceListener& listener) {
  TraceListener* none = nullptr;
  if (!trace_listener.compare_exchange_strong(none, &listener)) {
    throw std::logic_error("simt::observer::TraceScope: a trace listener is installed already");
  }
  set_schedule(Schedule::in_order);
  set_host_threads(1);
}

TraceScope::~TraceScope() {
  reset_schedule();
  reset_host_threads();
  trace_listener.store(nullptr, std::memory_order_release);
}

void trace(const TraceTma& e) { to_listener(e); }
void trace(const TraceWgmma& e) { to_listener(e); }
void trace(const TraceWgmmaWait& e) { to_listener(e); }

bool async_watched() { return racecheck_block && racecheck::detail::async_order() != nullptr; }
void async_event(const AsyncEvent& e) {
  to_listener(e);
  if (!racecheck_block) return;
  if (racecheck::detail::AsyncOrder* order = racecheck::detail::async_order()) order->on(e);
}
std::uint32_t tma_load_issued(const std::source_location& site, unsigned thread, TmaBytes bytes,
                              const std::vector<std::uint32_t>& chunks) {
  if (profile_block) profile::detail::tma_copy(profile::Op::load, bytes.box, bytes.tensor);
  if (!async_watched()) return 0;
  return racecheck::detail::tma_write(thread, sites::key(site), chunks);
}
std::uint32_t wgmma_read(const std::source_location& site, unsigned thread, std::uint64_t bytes,
                         const std::vector<std::uint32_t>& chunks) {
  if (profile_block) profile::detail::wgmma_read(bytes);
  if (!async_watched()) return 0;
  return racecheck::detail::async_read(racecheck::detail::Operation::wgmma_read, thread, sites::key(site), chunks);
}
std::uint32_t tma_store_issued(const std::source_location& site, unsigned thread, TmaBytes bytes,
                               const std::vector<std::uint32_t>& chunks) {
  if (profile_block) profile::detail::tma_copy(profile::Op::store, bytes.box, bytes.tensor);
  if (!async_watched()) return 0;
  return racecheck::detail::async_read(racecheck::detail::Operation::tma_store_read, thread, sites::key(site), chunks);
}

}  // namespace observer

// device_code.h's atomicAdd in a profiled copy.
inline namespace cpu {
namespace detail {
namespace {
template <class T>
T atomic_add(T* address, T value, const std::source_location& site) {
  observer::atomic_access(site, address, sizeof(T));
  return std::atomic_ref<T>(*address).fetch_add(value, std::memory_order_relaxed);
}
}  // namespace
float atomic_add_seen(float* address, float value, const std::source_location& site) {
  return atomic_add(address, value, site);
}
int atomic_add_seen(int* address, int value, const std::source_location& site) {
  return atomic_add(address, value, site);
}
unsigned atomic_add_seen(unsigned* address, unsigned value, const std::source_location& site) {
  return atomic_add(address, value, site);
}
}  // namespace detail
}  // namespace cpu

namespace observer {

void register_device_memory(const void* data, std::size_t bytes, std::size_t element_bytes) {
  // The written bits cost one bit per byte: kept only while the race checker is on.
  memory::register_allocation(data, bytes, element_bytes, racecheck::detail::is_enabled());
}

void unregister_device_memory(const void* data) { memory::unregister_allocation(data); }

void host_wrote(const void* data, std::size_t bytes, bool written) { memory::host_wrote(data, bytes, written); }

// Steps 1-2 of profile.cpp's list, for both tools: an access of a CUDA thread of a watched block.
inline void hook(std::uintptr_t address, std::uint32_t bytes, bool store, void* site) {
  if ((!profile_block && !racecheck_block) || !::simt::cpu::detail::in_kernel()) return;
  const unsigned thread = current_thread_linear();
  const auto key = reinterpret_cast<std::uintptr_t>(site);
  if (profile_block)
    profile::detail::record(thread, key, address, bytes, store ? profile::Op::store : profile::Op::load);
  if (racecheck_block) {
    racecheck::detail::access(thread, key, address, bytes,
                              store ? racecheck::detail::Operation::write : racecheck::detail::Operation::read);
  }
}

}  // namespace observer
}  // namespace simt

// ---- The hooks -------------------------------------------------------------------------------
// GCC's or Clang's -fsanitize=thread instrumentation, compiled without its runtime, calls these
// before every load and store of a profiled translation unit, with the size in the name (range: the
// size is the second argument, for a copy of a struct or a fixed-size memcpy), and __tsan_init from
// a constructor. Unlike AddressSanitizer's instrumentation, it reports both the load and the store
// of a read-modify-write (x += 1), which a race checker needs: GCC as two calls, Clang as one
// __tsan_read_write4 (cmake/SimtProfile.cmake asks it to). It also turns the program's atomic
// operations into calls, which these functions carry out (sequentially consistent, whatever order
// was asked for; the kernels' own atomicAdd does not come here: device_code.h), and reports the
// stores of vtable pointers, which need nothing.
#if SIMT_PROFILE_HOOKS
extern "C" {
// The hook for `bytes` at `a`, a load or a store, from the instrumented code that called the hook.
#define SIMT_HOOK(a, bytes, store)                                                                    \
  simt::observer::hook(reinterpret_cast<std::uintptr_t>(a), static_cast<std::uint32_t>(bytes), store, \
                       __builtin_return_address(0))
#define SIMT_MEMORY_HOOK(size)                                                                   \
  void __tsan_read##size(void* a) { SIMT_HOOK(a, size, false); }                                 \
  void __tsan_write##size(void* a) { SIMT_HOOK(a, size, true); }                                 \
  void __tsan_unaligned_read##size(void* a) { SIMT_HOOK(a, size, false); }                       \
  void __tsan_unaligned_write##size(void* a) { SIMT_HOOK(a, size, true); }                       \
  void __tsan_read_write##size(void* a) { SIMT_HOOK(a, size, false), SIMT_HOOK(a, size, true); } \
  void __tsan_unaligned_read_write##size(void* a) { SIMT_HOOK(a, size, false), SIMT_HOOK(a, size, true); }
SIMT_MEMORY_HOOK(1)
SIMT_MEMORY_HOOK(2)
SIMT_MEMORY_HOOK(4)
SIMT_MEMORY_HOOK(8)
SIMT_MEMORY_HOOK(16)
#undef SIMT_MEMORY_HOOK
void __tsan_read_range(void* a, unsigned long size) { SIMT_HOOK(a, size, false); }
void __tsan_write_range(void* a, unsigned long size) { SIMT_HOOK(a, size, true); }
// Clang (LLVM 16 on) calls these in place of memcpy, memmove and memset.
void* __tsan_memcpy(void* to, const void* from, unsigned long size) {
  SIMT_HOOK(from, size, false), SIMT_HOOK(to, size, true);
  return std::memcpy(to, from, size);
}
void* __tsan_memmove(void* to, const void* from, unsigned long size) {
  SIMT_HOOK(from, size, false), SIMT_HOOK(to, size, true);
  return std::memmove(to, from, size);
}
void* __tsan_memset(void* to, int value, unsigned long size) {
  SIMT_HOOK(to, size, true);
  return std::memset(to, value, size);
}
#undef SIMT_HOOK
void __tsan_init() {}
void __tsan_func_entry(void*) {}
void __tsan_func_exit() {}
void __tsan_vptr_update(void**, void*) {}
void __tsan_vptr_read(void**) {}

#define SIMT_ATOMICS(bits, T)                                                                                         \
  T __tsan_atomic##bits##_load(const volatile T* a, int) { return __atomic_load_n(a, __ATOMIC_SEQ_CST); }             \
  void __tsan_atomic##bits##_store(volatile T* a, T v, int) { __atomic_store_n(a, v, __ATOMIC_SEQ_CST); }             \
  T __tsan_atomic##bits##_exchange(volatile T* a, T v, int) { return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST); }   \
  T __tsan_atomic##bits##_fetch_add(volatile T* a, T v, int) { return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST); }   \
  T __tsan_atomic##bits##_fetch_sub(volatile T* a, T v, int) { return __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST); }   \
  T __tsan_atomic##bits##_fetch_and(volatile T* a, T v, int) { return __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST); }   \
  T __tsan_atomic##bits##_fetch_or(volatile T* a, T v, int) { return __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST); }     \
  T __tsan_atomic##bits##_fetch_xor(volatile T* a, T v, int) { return __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST); }   \
  T __tsan_atomic##bits##_fetch_nand(volatile T* a, T v, int) { return __atomic_fetch_nand(a, v, __ATOMIC_SEQ_CST); } \
  int __tsan_atomic##bits##_compare_exchange_strong(volatile T* a, T* expected, T v, int, int) {                      \
    return __atomic_compare_exchange_n(a, expected, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                    \
  }                                                                                                                   \
  int __tsan_atomic##bits##_compare_exchange_weak(volatile T* a, T* expected, T v, int, int) {                        \
    return __atomic_compare_exchange_n(a, expected, v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                     \
  }                                                                                                                   \
  T __tsan_atomic##bits##_compare_exchange_val(volatile T* a, T expected, T v, int, int) {                            \
    __atomic_compare_exchange_n(a, &expected, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                          \
    return expected;                                                                                                  \
  }
SIMT_ATOMICS(8, char)
SIMT_ATOMICS(16, short)
SIMT_ATOMICS(32, int)
SIMT_ATOMICS(64, long)
#undef SIMT_ATOMICS
void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
void __tsan_atomic_signal_fence(int) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }
}  // extern "C"
#endif
