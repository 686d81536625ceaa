// What the CPU tests of common/simt share (simt_test.cpp, simt_tensor_core_test.cpp): restoring
// simt's controls after a test, the schedules every kernel runs under, and catching a launch's
// report. Include after catch.h and common/simt/simt.h (the CPU build).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
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

// Runs test() once under each of all_schedules, named for the report (INFO) in each run.
template <class F>
void for_each_schedule(F&& test) {
  for (const auto& s : all_schedules) {
    simt::set_schedule(s.schedule, s.seed);
    INFO("schedule " << name(s));
    test();
  }
}

// Checks that `message` mentions every one of `parts` (printing the message when one is missing).
inline void check_mentions(const std::string& message, std::initializer_list<std::string_view> parts) {
  INFO(message);
  for (std::string_view part : parts) CHECK(message.find(part) != std::string::npos);
}

// Runs `launch` and returns the message of the std::runtime_error it must throw.
template <class F>
std::string runtime_error_of(F&& launch) {
  std::string message = fa_test::message_of<std::runtime_error>(launch);
  if (message.empty()) FAIL("the launch did not throw std::runtime_error");
  return message;
}

// The message of the std::runtime_error that launching Kernel(out) as one block of `threads`
// threads must throw, under the default schedule; out holds `out_size` floats of 1 (by default one
// per thread).
template <auto Kernel>
std::string launch_error(unsigned threads, std::size_t out_size = 0) {
  ControlsGuard guard;
  simt::DeviceBuffer<float> out(out_size == 0 ? threads : out_size);
  out.fill(1.0f);
  return runtime_error_of([&] { simt::launch<Kernel>(dim3(1), dim3(threads), 0, out.data()); });
}

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace simt_test
