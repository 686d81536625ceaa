#include "common/memory.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "common/platform.h"

namespace fa {

std::uint64_t available_memory_bytes() {
  std::uint64_t available = platform::available_physical_memory_bytes().value_or(0);
  // A container's own limit, where lower.
  if (const std::optional<std::uint64_t> left = platform::container_memory_left_bytes()) {
    available = std::min(available, *left);
  }
  // The address-space limit of this process (ulimit -v, RLIMIT_AS), less what it has mapped already.
  // Past it, every allocation fails.
  if (const std::optional<std::uint64_t> left = platform::address_space_left_bytes()) {
    available = std::min(available, *left);
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
