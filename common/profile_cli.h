// The demos' --profile, --profile-json FILE and --racecheck: simt's memory profile
// (common/simt/tools/profile.h) and race checker (common/simt/tools/racecheck.h) of the kernels a demo runs on
// the CPU. An attention demo gets all three with its inputs' flags (fa::AttentionFlags::add_to,
// common/program.h, which calls add_profile_flags with its --device); another program with one line:
//
//   fa::add_profile_flags(app);                 // kernels that always run on the CPU
//
// and one in its CMakeLists.txt gives its kernels the profiled copy that both tools watch:
//
//   add_kernels(chNN_lib kernels.cuh PROFILED)  // cmake/Chapters.cmake
//
// The flags take effect as soon as they are parsed: where this build has no profiled copies (the
// asan and tsan presets, a compiler other than GCC), or where the kernels would run on a GPU, the
// flag is refused with one line that says why (exit status 2), before any work. The profile's
// table is printed (and its JSON written) when the program ends, if it launched a kernel, or earlier where the demo
// calls end_profile() to use the counts itself. The race checker's report comes at the very end: every hazard, then one
// summary line, and exit status 1 if it found anything, whatever the demo's verdict was
// (common/simt/tools/racecheck.h).
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "common/simt/tools/profile.h"

namespace fa {

// Registers --profile, --profile-json and --racecheck on app. `device` is the demo's --device value
// ("cpu", "gpu", or empty: the GPU where there is one), read when the flags are parsed, so it must
// outlive app.parse(). Call it once per program.
void add_profile_flags(CLI::App& app, const std::string& device);
// The same for a program whose kernels always run on the CPU (simt's examples).
void add_profile_flags(CLI::App& app);

// The file --profile-json names, or empty where it was not given: an attention demo's front door
// checks that it can be written before any work (fa::AttentionFlags::plan, common/program.h).
const std::string& profile_json_path();

// Ends the profile now, if one was asked for: prints its table for --profile, writes the JSON for
// --profile-json (replaced whole or not at all; std::runtime_error when it cannot be written), and
// returns every kernel's counts (empty when no profile was asked for, or once it has ended). Where
// a demo does not call it, it runs when the program ends.
std::vector<simt::profile::KernelProfile> end_profile();

}  // namespace fa
