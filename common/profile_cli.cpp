#include "common/profile_cli.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <stdexcept>

#include <fmt/format.h>

#include "common/device.h"
#include "common/simt/tools/racecheck.h"

namespace fa {
namespace {

struct State {
  bool table = false;                   // --profile
  std::string json_path;                // --profile-json FILE
  bool racecheck = false;               // --racecheck
  const std::string* device = nullptr;  // the demo's --device; null: the kernels always run on the CPU
  bool profiling = false;               // the profile has started and not ended
};

State& state() {
  static State s;
  return s;
}

// Whatever end_profile() would print or write, when the program ends; nothing where no kernel was
// launched (a run refused before its work says only why).
void end_profile_at_exit() {
  try {
    simt::profile::stop();  // (idempotent)
    if (simt::profile::results().empty()) return;
    (void)end_profile();
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "error: {}\n", e.what());
    std::_Exit(1);
  }
}

// Once the flags are parsed: refuse what cannot be done, start what was asked for.
void begin() {
  State& s = state();
  const bool profile = s.table || !s.json_path.empty();
  if (!profile && !s.racecheck) return;
  const std::string flag = profile ? "--profile" : "--racecheck";
  if (!simt::profile::available()) throw std::invalid_argument(flag + ": " + simt::profile::unavailable_reason());
  if (s.device != nullptr) {
    const Device device = s.device->empty() ? default_device() : parse_device(*s.device);
    if (device == Device::gpu) {
      throw std::invalid_argument(
          profile
              ? "--profile counts the kernels' memory accesses on the CPU (common/simt); add --device cpu (on a GPU, "
                "scripts/gpu_check.sh collects the same metrics with Nsight Compute)"
              : "--racecheck checks the kernels as they run on the CPU (common/simt); add --device cpu (on a GPU, "
                "scripts/gpu_check.sh runs compute-sanitizer's racecheck)");
    }
  }
  if (s.racecheck) simt::racecheck::enable();  // reports when the program ends
  if (profile) {
    simt::profile::start();
    s.profiling = true;
    static std::once_flag once;
    std::call_once(once, [] { std::atexit(&end_profile_at_exit); });
  }
}

void add_flags(CLI::App& app) {
  State& s = state();
  app.add_flag("--profile", s.table,
               "count every global and shared access of the kernels on the CPU (sectors, wavefronts, bank "
               "conflicts, as Nsight Compute counts them) and print the table");
  app.add_option("--profile-json", s.json_path, "write the same profile to this file as JSON");
  app.add_flag("--racecheck", s.racecheck,
               "check the kernels on the CPU for races (shared and global memory, between warps, lanes and blocks, "
               "cp.async) and reads of unwritten memory; report each with both source lines, exit 1 if any");
  app.parse_complete_callback(&begin);
}

}  // namespace

void add_profile_flags(CLI::App& app, const std::string& device) {
  state().device = &device;
  add_flags(app);
}

void add_profile_flags(CLI::App& app) {
  state().device = nullptr;
  add_flags(app);
}

const std::string& profile_json_path() { return state().json_path; }

std::vector<simt::profile::KernelProfile> end_profile() {
  State& s = state();
  if (!s.profiling) return {};
  s.profiling = false;
  simt::profile::stop();
  std::vector<simt::profile::KernelProfile> kernels = simt::profile::results();
  if (s.table) {
    fmt::print("\nMemory profile (simt, per warp instruction, summed over launches):\n{}",
               simt::profile::format_table(kernels));
  }
  if (!s.json_path.empty()) {
    simt::profile::write_json(s.json_path, kernels);
    fmt::print("wrote the profile to {}\n", s.json_path);
  }
  return kernels;
}

}  // namespace fa
