// What the CPU tests of common/simt share (simt_test.cpp, simt_tensor_core_test.cpp): restoring
// simt's controls after a test, the schedules every kernel runs under, and catching a launch's
// report. Include after catch.h and common/simt/simt.h (the CPU build).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace simt_test {

// Restores the schedule and the host thread count (to the environment's) when a test ends.
struct ControlsGuard {
  ControlsGuard() = default;
  ControlsGuard(const ControlsGuard&) = delete;
  ControlsGuard& operator=(const ControlsGuard&) = delete;
  ~ControlsGuard() {
    simt::reset_schedule();
    simt::reset_host_threads();
  }
};

// Every schedule a test runs under: both fixed orders and three random ones.
struct NamedSchedule {
  simt::Schedule schedule;
  std::uint64_t seed;
};
inline const std::vector<NamedSchedule> all_schedules = {{simt::Schedule::in_order, 0},
                                                         {simt::Schedule::reverse, 0},
                                                         {simt::Schedule::random, 1},
                                                         {simt::Schedule::random, 2},
                                                         {simt::Schedule::random, 3}};

inline std::string name(const NamedSchedule& s) {
  return std::string(simt::to_string(s.schedule)) + ":" + std::to_string(s.seed);
}

// Runs `launch` and returns the message of the std::runtime_error it must throw.
template <class F>
std::string runtime_error_of(F&& launch) {
  try {
    launch();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  FAIL("the launch did not throw std::runtime_error");
  return {};
}

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace simt_test
