// Internal to common/simt: the findings of the race checker as its two parts record them, the
// barrier-interval rules (racecheck.cpp) and the order of the async proxy (racecheck_async.cpp):
// one hazard is a kind and two (site, operation) sides, with a count and the smallest example.
// Nothing here is for kernels or chapters.
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <tuple>

#include "common/simt/tools/detail/observer.h"
#include "common/simt/tools/detail/racecheck_recorder.h"

namespace simt::racecheck::detail {

constexpr std::uint16_t kNone = 0xffff;
constexpr std::uint64_t kNoBlock = ~std::uint64_t{0};
constexpr unsigned kWarpLanes = 32;
constexpr unsigned kWordBytes = 4;

inline bool is_read(Operation op) {
  return op == Operation::read || op == Operation::ldmatrix_read || op == Operation::cp_async_read ||
         op == Operation::wgmma_read || op == Operation::tma_store_read;
}
inline bool is_write(Operation op) { return !is_read(op); }
// Two accesses to one byte by two threads race unless both only read or both are atomics.
inline bool can_race(Operation a, Operation b) {
  if (is_read(a) && is_read(b)) return false;
  return !(a == Operation::atomic && b == Operation::atomic);
}

// unfenced_write: a generic-proxy store that wgmma or a TMA store (the async proxy) reads, ordered
// before the read but with no fence.proxy.async of the writing thread between them.
enum class Kind : std::uint8_t {
  read_after_write,
  write_after_read,
  write_after_write,
  uninitialised_read,
  unfenced_write
};
enum class Space : std::uint8_t { shared, global };

// ---- Findings --------------------------------------------------------------------------------

// One side of a hazard: a site and what it did there.
struct SiteOp {
  std::uintptr_t site = 0;
  Operation op = Operation::read;
  std::uint8_t bytes = 0;
  auto operator<=>(const SiteOp&) const = default;
};

struct HazardKey {
  Kind kind;
  Space space;
  bool warning;
  SiteOp first, second;
  auto operator<=>(const HazardKey&) const = default;
};

// How the two accesses of an example are related.
enum class Who : std::uint8_t { warps, lanes, blocks, one_thread, uninitialised };

// One example of a hazard: where and by whom. Examples are compared by key(); the smallest is
// kept, so the one reported does not depend on the order blocks and threads ran in.
struct Example {
  std::uint64_t block = 0;                   // linear block index (the smaller one between blocks)
  std::uint64_t other_block = 0;             // the other block, between blocks
  std::uint32_t interval = 0;                // barriers passed by the block before it
  std::uint64_t offset = 0;                  // byte offset in the block's shared memory, or in the buffer
  std::uint32_t thread_a = 0, thread_b = 0;  // linear indices in their blocks
  Who who = Who::warps;
  bool static_shared = false;
  int argument = -1;  // global memory: the kernel argument (from 0) that points into the buffer; -1: none
  std::uint64_t buffer_bytes = 0;
  std::uint64_t element_bytes = 1;
  observer::BlockPlace grid{1, 1, 1};
  auto key() const { return std::tuple(block, other_block, interval, argument, offset, thread_a, thread_b); }
};

struct Record {
  std::uint64_t count = 0;
  Example example;
  void add(std::uint64_t n, const Example& e) {
    if (count == 0 || e.key() < example.key()) example = e;
    count += n;
  }
  void add(const Record& r) {
    if (r.count > 0) add(r.count, r.example);
  }
};

using Records = std::map<HazardKey, Record>;

}  // namespace simt::racecheck::detail
