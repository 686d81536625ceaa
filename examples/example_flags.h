// The flags that simt's race examples share (missing_barrier.cpp, async_copy_race.cpp): --schedule,
// --blocks and --fixed, and the schedule they run under.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "common/simt/runtime/schedule.h"

namespace example {

struct Flags {
  std::string schedule;  // empty: SIMT_SCHEDULE, or in_order, as in every program that uses simt
  unsigned blocks = 1;   // the grid
  bool fixed = false;    // the kernel with its barrier
};

// Registers --schedule on app, and has every option show its default.
inline void add_schedule_flag(CLI::App& app, Flags& flags) {
  app.option_defaults()->always_capture_default();
  app.add_option("--schedule", flags.schedule, "in_order, reverse, random or random:<seed>")
      ->default_str("SIMT_SCHEDULE, or in_order");
}

// Registers --schedule, and --mistake, one of "none" and `mistakes`, into `mistake` (Hopper's
// examples: mbarrier_ring.cpp, async_proxy_race.cpp).
inline void add_mistake_flags(CLI::App& app, Flags& flags, std::string& mistake, std::vector<std::string> mistakes) {
  add_schedule_flag(app, flags);
  mistakes.insert(mistakes.begin(), "none");
  std::string names = mistakes.front();
  for (std::size_t i = 1; i < mistakes.size(); ++i) names += (i + 1 == mistakes.size() ? " or " : ", ") + mistakes[i];
  app.add_option("--mistake", mistake, names)->check(CLI::IsMember(mistakes));
}

// The position of `mistake` in the list add_mistake_flags was given, from 1; 0 for "none".
inline int mistake_number(const std::string& mistake, const std::vector<std::string>& mistakes) {
  for (std::size_t i = 0; i < mistakes.size(); ++i) {
    if (mistakes[i] == mistake) return static_cast<int>(i + 1);
  }
  return 0;
}

// Registers --schedule, --blocks (1 to max_blocks blocks of `threads` threads) and --fixed (whose
// help says what it puts back) on app, each showing its default.
inline void add_flags(CLI::App& app, Flags& flags, unsigned threads, unsigned max_blocks, const std::string& fixed) {
  add_schedule_flag(app, flags);
  app.add_option("--blocks", flags.blocks, fmt::format("number of blocks of {} threads", threads))
      ->check(CLI::Range(1u, max_blocks));
  app.add_flag("--fixed", flags.fixed, "put " + fixed + " back");
}

// Sets the schedule --schedule names, where it was given, and returns the one that applies as the
// programs print it ("reverse", "random:7"). Throws std::invalid_argument for a malformed one.
inline std::string apply_schedule(const Flags& flags) {
  if (!flags.schedule.empty()) {
    const simt::ScheduleChoice choice = simt::parse_schedule(flags.schedule);
    simt::set_schedule(choice.schedule, choice.seed);
  }
  const simt::ScheduleChoice used = simt::current_schedule_choice();
  return used.schedule == simt::Schedule::random && used.seed != 0 ? fmt::format("random:{}", used.seed)
                                                                   : std::string(simt::to_string(used.schedule));
}

}  // namespace example
