// How much memory a run needs, checked before anything is allocated or computed, so that a problem
// too large for the machine is refused at once with the figures instead of ending, minutes later,
// in a bare std::bad_alloc (or in the kernel of the operating system's out-of-memory killer).
//
//   fa::MemoryPlan plan;
//   plan.add("Q, K, V and O", 4 * elements);
//   plan.add("S and P", 2 * 4 * scores);
//   plan.check("ch04_naive_attention");   // throws if the total exceeds what is available
//
// Sizes are added with overflow checks: a sum past 2^64 bytes counts as "too large" rather than
// wrapping to a small number.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fa {

// The memory this process may still allocate, in bytes: what the system could give it without
// swapping (Linux: MemAvailable of /proc/meminfo, the kernel's estimate; common/platform.h says
// what else and macOS's figure); in a container with a memory limit (cgroup v2's memory.max), at
// most what that limit leaves; under an address-space limit (ulimit -v, RLIMIT_AS), at most what
// this process may still map. Never throws; returns 0 if nothing can be read (then every plan
// fails, with that reason).
std::uint64_t available_memory_bytes();

// a * b, or UINT64_MAX when the product does not fit in 64 bits. Never throws.
std::uint64_t saturating_mul(std::uint64_t a, std::uint64_t b);
// a + b, or UINT64_MAX when the sum does not fit. Never throws.
std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b);

// A count of bytes computed in double, as a memory plan adds it: rounded up, and 2^64 - 1 (more than
// any machine has) for anything at or past 2^64, or NaN. Counting in double does not wrap around
// as 64-bit integers do, and its rounding (1 in 2^53) is far below what decides a plan. Never throws.
std::uint64_t bytes_of(double bytes);

// Bytes as "1.64 TB" (10^12), "8.39 GB" (10^9), "512 MB", "1.2 kB", "12 bytes". Never throws.
std::string format_bytes(std::uint64_t bytes);

class MemoryPlan {
 public:
  // Adds one allocation (or a group of them) under a name for the message.
  void add(std::string what, std::uint64_t bytes);
  std::uint64_t total() const { return total_; }
  // Throws std::runtime_error starting with `who` when total() exceeds available_memory_bytes():
  // "who: this run needs 8.39 GB (Q, K, V: 1.6 GB; S and P: 6.7 GB) but 5.2 GB of memory are
  // available; use a smaller problem". Does nothing otherwise.
  void check(std::string_view who) const;

 private:
  std::vector<std::pair<std::string, std::uint64_t>> parts_;
  std::uint64_t total_ = 0;
};

}  // namespace fa
