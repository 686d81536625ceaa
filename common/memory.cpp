#include "common/memory.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

namespace fa {

namespace {

// The first unsigned number in a file (cgroup v2's memory.max holds "max" when there is no limit:
// no number, nothing). Never throws.
std::optional<std::uint64_t> number_in_file(const char* path) {
  std::FILE* f = std::fopen(path, "r");
  if (f == nullptr) return std::nullopt;
  unsigned long long value = 0;
  const bool read = std::fscanf(f, "%llu", &value) == 1;
  std::fclose(f);
  return read ? std::optional<std::uint64_t>(value) : std::nullopt;
}

}  // namespace

std::uint64_t available_memory_bytes() {
  std::uint64_t available = 0;
  bool found = false;
  if (std::FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    unsigned long long kib = 0;
    while (std::fgets(line, sizeof line, f) != nullptr) {
      if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1) {
        found = true;
        break;
      }
    }
    std::fclose(f);
    available = saturating_mul(kib, 1024);
  }
  if (!found) {
    const long pages = sysconf(_SC_AVPHYS_PAGES);
    const long page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0) return 0;
    available = saturating_mul(static_cast<std::uint64_t>(pages), static_cast<std::uint64_t>(page));
  }
  // A container's own limit (cgroup v2: memory.max, less what the group already uses), where lower.
  const std::optional<std::uint64_t> limit = number_in_file("/sys/fs/cgroup/memory.max");
  const std::optional<std::uint64_t> used = number_in_file("/sys/fs/cgroup/memory.current");
  if (limit && used) available = std::min(available, *limit > *used ? *limit - *used : 0);
  // The address-space limit of this process (ulimit -v, RLIMIT_AS), less what it has mapped already
  // (the first number of /proc/self/statm, in pages). Past it, every allocation fails.
  rlimit address_space{};
  if (getrlimit(RLIMIT_AS, &address_space) == 0 && address_space.rlim_cur != RLIM_INFINITY) {
    const std::optional<std::uint64_t> pages = number_in_file("/proc/self/statm");
    const long page = sysconf(_SC_PAGESIZE);
    const std::uint64_t mapped = pages && page > 0 ? saturating_mul(*pages, static_cast<std::uint64_t>(page)) : 0;
    const std::uint64_t cap = address_space.rlim_cur;
    available = std::min(available, cap > mapped ? cap - mapped : 0);
  }
  return available;
}

std::uint64_t saturating_mul(std::uint64_t a, std::uint64_t b) {
  std::uint64_t product = 0;
  return __builtin_mul_overflow(a, b, &product) ? std::numeric_limits<std::uint64_t>::max() : product;
}

std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) {
  std::uint64_t sum = 0;
  return __builtin_add_overflow(a, b, &sum) ? std::numeric_limits<std::uint64_t>::max() : sum;
}

std::uint64_t bytes_of(double bytes) {
  if (!(bytes < 18446744073709551615.0)) return std::numeric_limits<std::uint64_t>::max();  // also NaN
  return bytes <= 0.0 ? 0 : static_cast<std::uint64_t>(std::ceil(bytes));
}

std::string format_bytes(std::uint64_t bytes) {
  if (bytes == std::numeric_limits<std::uint64_t>::max()) return "more than 18 EB (2^64 bytes)";
  const double b = static_cast<double>(bytes);
  if (b >= 1e15) return fmt::format("{:.0f} TB", b / 1e12);
  if (b >= 1e12) return fmt::format("{:.3g} TB", b / 1e12);
  if (b >= 1e9) return fmt::format("{:.3g} GB", b / 1e9);
  if (b >= 1e6) return fmt::format("{:.3g} MB", b / 1e6);
  if (b >= 1e3) return fmt::format("{:.3g} kB", b / 1e3);
  return fmt::format("{} bytes", bytes);
}

void MemoryPlan::add(std::string what, std::uint64_t bytes) {
  parts_.emplace_back(std::move(what), bytes);
  total_ = saturating_add(total_, bytes);
}

void MemoryPlan::check(std::string_view who) const {
  const std::uint64_t available = available_memory_bytes();
  if (total_ <= available) return;
  std::string parts;
  for (const auto& [what, bytes] : parts_) {
    if (bytes == 0) continue;
    parts += fmt::format("{}{}: {}", parts.empty() ? "" : "; ", what, format_bytes(bytes));
  }
  throw std::runtime_error(
      fmt::format("{}: this run needs {} ({}) but {} of memory are available; use a "
                  "smaller problem",
                  who, format_bytes(total_), parts, format_bytes(available)));
}

}  // namespace fa
