// memory_map.h: the registry of device memory, the thread-local storage of static __shared__
// arrays, and the written bits of the race checker's uninitialised reads.
#include "common/simt/tools/detail/memory_map.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "common/platform.h"
#include "common/simt/runtime/device_code.h"

namespace simt::memory {
namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::uintptr_t, Allocation> live;  // by begin
  std::uint64_t next_id = 1;
  Allocations snapshot = std::make_shared<std::vector<Allocation>>();

  void rebuild() {
    auto v = std::make_shared<std::vector<Allocation>>();
    v->reserve(live.size());
    for (const auto& [begin, a] : live) v->push_back(a);
    snapshot = std::move(v);
  }
};

Registry& registry() {
  static Registry r;
  return r;
}

template <class T>
bool inside(std::uintptr_t a, const T& variable) {
  const auto begin = reinterpret_cast<std::uintptr_t>(&variable);
  return a >= begin && a < begin + sizeof(T);
}

}  // namespace

bool WrittenBits::all_written(std::size_t offset, std::size_t bytes) const {
  for (std::size_t b = offset; b < offset + bytes; ++b) {
    if (((bits[b / 8].load(std::memory_order_relaxed) >> (b % 8)) & 1u) == 0) return false;
  }
  return true;
}

void WrittenBits::mark(std::size_t offset, std::size_t bytes, bool written) {
  for (std::size_t b = offset; b < offset + bytes;) {
    // Whole bytes of bits where the range covers them, one bit at a time at its ends.
    if (b % 8 == 0 && b + 8 <= offset + bytes) {
      bits[b / 8].store(written ? 0xff : 0, std::memory_order_relaxed);
      b += 8;
      continue;
    }
    const auto bit = static_cast<std::uint8_t>(1u << (b % 8));
    if (written) {
      bits[b / 8].fetch_or(bit, std::memory_order_relaxed);
    } else {
      bits[b / 8].fetch_and(static_cast<std::uint8_t>(~bit), std::memory_order_relaxed);
    }
    ++b;
  }
}

Allocations allocations() {
  Registry& r = registry();
  std::scoped_lock lock(r.mutex);
  return r.snapshot;
}

void register_allocation(const void* data, std::size_t bytes, std::size_t element_bytes, bool track_written) {
  if (data == nullptr || bytes == 0) return;
  Registry& r = registry();
  const auto begin = reinterpret_cast<std::uintptr_t>(data);
  Allocation a{begin, begin + bytes, 0, element_bytes,
               track_written ? std::make_shared<WrittenBits>(bytes) : std::shared_ptr<WrittenBits>()};
  std::scoped_lock lock(r.mutex);
  a.id = r.next_id++;
  r.live[begin] = std::move(a);
  r.rebuild();
}

void unregister_allocation(const void* data) {
  if (data == nullptr) return;
  Registry& r = registry();
  std::scoped_lock lock(r.mutex);
  if (r.live.erase(reinterpret_cast<std::uintptr_t>(data)) > 0) r.rebuild();
}

void host_wrote(const void* data, std::size_t bytes, bool written) {
  if (data == nullptr || bytes == 0) return;
  const Allocations all = allocations();
  const Allocation* a = find(*all, reinterpret_cast<std::uintptr_t>(data));
  if (a == nullptr || !a->written) return;
  const std::size_t offset = reinterpret_cast<std::uintptr_t>(data) - a->begin;
  a->written->mark(offset, std::min(bytes, a->bytes() - offset), written);
}

void mark_all_written() {
  const Allocations all = allocations();
  for (const Allocation& a : *all) {
    if (a.written) a.written->mark(0, a.bytes(), true);
  }
}

const Allocation* find(const std::vector<Allocation>& allocations, std::uintptr_t a) {
  auto it = std::upper_bound(allocations.begin(), allocations.end(), a,
                             [](std::uintptr_t x, const Allocation& r) { return x < r.begin; });
  if (it == allocations.begin()) return nullptr;
  --it;
  return a < it->end ? &*it : nullptr;
}

Range program_thread_local_storage() {
  thread_local const Range range = [] {
    const fa::platform::AddressRange r = fa::platform::program_thread_local_storage();
    return Range{r.begin, r.end};
  }();
  return range;
}

bool simt_variable(std::uintptr_t a) {
  return inside(a, ::simt::cpu::builtin::threadIdx) || inside(a, ::simt::cpu::builtin::blockIdx) ||
         inside(a, ::simt::cpu::builtin::blockDim) || inside(a, ::simt::cpu::builtin::gridDim) ||
         inside(a, ::simt::cpu::detail::dynamic_shared_memory);
}

}  // namespace simt::memory
