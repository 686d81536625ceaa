// The CPU-only controls: the schedule and the host thread count, set by the API or read from the
// environment (schedule.h).
#include "common/simt/runtime/schedule.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

namespace simt {
inline namespace cpu {
namespace {

constexpr unsigned max_host_threads = 256;

struct Settings {
  std::mutex mutex;
  std::optional<ScheduleChoice> schedule;  // set by set_schedule
  std::optional<unsigned> threads;         // set by set_host_threads
};

Settings& settings() {
  static Settings s;
  return s;
}

// An unsigned number, the whole of `text`, or nothing.
std::optional<std::uint64_t> parse_number(std::string_view text) {
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// What an API call set (the Settings member), else the environment variable `name` as `parse`
// reads it (throwing for a malformed value), else `fallback` when it is unset or empty.
template <class T, class Parse>
T setting(std::optional<T> Settings::*member, const char* name, T fallback, const Parse& parse) {
  {
    std::scoped_lock lock(settings().mutex);
    if (settings().*member) return *(settings().*member);
  }
  const char* env = std::getenv(name);
  if (env == nullptr || *env == '\0') return fallback;
  return parse(std::string_view(env));
}

}  // namespace

std::string_view to_string(Schedule s) {
  constexpr std::string_view kNames[] = {"in_order", "reverse", "random"};  // in the order of Schedule
  return kNames[static_cast<int>(s)];
}

ScheduleChoice parse_schedule(std::string_view text) {
  if (text == "in_order") return {Schedule::in_order, 0};
  if (text == "reverse") return {Schedule::reverse, 0};
  if (text == "random") return {Schedule::random, 0};
  if (text.starts_with("random:")) {
    if (const auto seed = parse_number(text.substr(7))) return {Schedule::random, *seed};
  }
  throw std::invalid_argument("unknown schedule '" + std::string(text) +
                              "': accepted values are in_order, reverse, random and random:<seed> "
                              "(seed an unsigned integer)");
}

void set_schedule(Schedule s, std::uint64_t seed) {
  std::scoped_lock lock(settings().mutex);
  settings().schedule = ScheduleChoice{s, seed};
}

void reset_schedule() {
  std::scoped_lock lock(settings().mutex);
  settings().schedule.reset();
}

ScheduleChoice current_schedule_choice() {
  return setting(&Settings::schedule, "SIMT_SCHEDULE", ScheduleChoice{}, [](std::string_view text) {
    try {
      return parse_schedule(text);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string("SIMT_SCHEDULE: ") + e.what());
    }
  });
}

Schedule current_schedule() { return current_schedule_choice().schedule; }

void set_host_threads(unsigned n) {
  if (n < 1 || n > max_host_threads) {
    throw std::invalid_argument("set_host_threads(" + std::to_string(n) + "): accepted values are 1 to " +
                                std::to_string(max_host_threads));
  }
  std::scoped_lock lock(settings().mutex);
  settings().threads = n;
}

void reset_host_threads() {
  std::scoped_lock lock(settings().mutex);
  settings().threads.reset();
}

unsigned host_threads() {
  const unsigned fallback = std::clamp(std::thread::hardware_concurrency(), 1u, 8u);
  return setting(&Settings::threads, "SIMT_THREADS", fallback, [](std::string_view text) {
    const auto n = parse_number(text);
    if (!n || *n < 1 || *n > max_host_threads) {
      throw std::invalid_argument("SIMT_THREADS='" + std::string(text) + "': accepted values are 1 to " +
                                  std::to_string(max_host_threads));
    }
    return static_cast<unsigned>(*n);
  });
}

}  // namespace cpu
}  // namespace simt
