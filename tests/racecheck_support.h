// The chapters' tests under simt's race checker (common/simt/tools/racecheck.h): a test case tagged
// [racecheck] runs its chapter's kernels on the CPU with the checker on, which then runs their
// profiled copies and sees every access, and requires that it found no race and no read of memory
// nothing wrote. Built where the build has profiled copies (SIMT_PROFILED_KERNELS: not under the
// asan and tsan presets) and not in a GPU test (the checker watches the CPU run).
#pragma once

#include <cstdint>
#include <functional>

#include "catch.h"
#include "common/simt/tools/racecheck.h"

namespace fa_test {

// Runs `launch_all`, which launches kernels and returns how many launches it made, with the race
// checker on; checks that the checker saw every one of them (so the test cannot pass by checking
// nothing) and found nothing, and prints its report where it did.
inline void require_race_free(const std::function<std::uint64_t()>& launch_all) {
  simt::racecheck::start();
  std::uint64_t launches = 0;
  try {
    launches = launch_all();
  } catch (...) {
    simt::racecheck::stop();
    throw;
  }
  simt::racecheck::stop();
  const simt::racecheck::Findings findings = simt::racecheck::findings();
  INFO(simt::racecheck::format_report(findings));
  CHECK(findings.launches == launches);
  CHECK(findings.unchecked_launches == 0);
  CHECK(findings.clean());
}

}  // namespace fa_test
