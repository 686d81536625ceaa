// The demos' --profile and --profile-json FILE: simt's memory profile (common/simt/profile.h) of
// the kernels a demo runs on the CPU.
//
//   fa::ProfileFlags profile;
//   fa::add_profile_flags(app, profile);
//   ...
//   fa::begin_profile(profile, device);          // after the flags are parsed, before the kernels
//   ... run the kernels ...
//   const auto kernels = fa::end_profile(profile);   // prints the table, writes the JSON
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "common/device.h"
#include "common/simt/profile.h"

namespace fa {

struct ProfileFlags {
  bool table = false;     // --profile: print the profile's table
  std::string json_path;  // --profile-json FILE: write its JSON there
  bool wanted() const { return table || !json_path.empty(); }
};

// Registers --profile and --profile-json on app.
void add_profile_flags(CLI::App& app, ProfileFlags& flags);

// Starts recording when a profile is wanted. Throws std::invalid_argument where this build cannot
// profile (a sanitizer preset, a compiler other than GCC: the message says which) or when the
// kernels are to run on the GPU (the profile counts the CPU run: --device cpu).
void begin_profile(const ProfileFlags& flags, Device device);

// Stops recording and returns the profile of every kernel launched since begin_profile (empty when
// none was wanted); prints the table for --profile, writes the JSON for --profile-json (replaced
// whole or not at all; std::runtime_error when it cannot be written).
std::vector<simt::profile::KernelProfile> end_profile(const ProfileFlags& flags);

}  // namespace fa
