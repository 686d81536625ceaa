#include "common/profile_cli.h"

#include <stdexcept>

#include <fmt/format.h>

namespace fa {

void add_profile_flags(CLI::App& app, ProfileFlags& flags) {
  app.add_flag("--profile", flags.table,
               "count every global and shared access of the kernels on the CPU (sectors, wavefronts, bank "
               "conflicts, as Nsight Compute counts them) and print the table");
  app.add_option("--profile-json", flags.json_path, "write the same profile to this file as JSON");
}

void begin_profile(const ProfileFlags& flags, Device device) {
  if (!flags.wanted()) return;
  if (!simt::profile::available()) {
    throw std::invalid_argument("--profile: " + simt::profile::unavailable_reason());
  }
  if (device == Device::gpu) {
    throw std::invalid_argument(
        "--profile counts the kernels' memory accesses on the CPU (common/simt); "
        "add --device cpu (on a GPU, scripts/gpu_check.sh collects the same metrics "
        "with Nsight Compute)");
  }
  simt::profile::start();
}

std::vector<simt::profile::KernelProfile> end_profile(const ProfileFlags& flags) {
  if (!flags.wanted()) return {};
  simt::profile::stop();
  std::vector<simt::profile::KernelProfile> kernels = simt::profile::results();
  if (flags.table) {
    fmt::print("\nMemory profile (simt, per warp instruction, summed over launches):\n{}",
               simt::profile::format_table(kernels));
  }
  if (!flags.json_path.empty()) {
    simt::profile::write_json(flags.json_path, kernels);
    fmt::print("wrote the profile to {}\n", flags.json_path);
  }
  return kernels;
}

}  // namespace fa
