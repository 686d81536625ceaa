// The main() of every test executable. With FA_TEST_ON_GPU it first checks for a device, and exits
// with 77 when there is none: CTest's SKIP_RETURN_CODE turns that into SKIPPED, never a pass.
// Listing the test cases (--list-tests, --list-test-names-only, ...) runs nothing and needs no
// device (tests/sanitizer_subset.cmake lists a GPU test's cases on any machine).
#if __has_include(<catch2/catch_session.hpp>)
#include <catch2/catch_session.hpp>
#else
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#endif

#include <cstdio>
#include <string_view>

#include "common/device.h"

int main(int argc, char* argv[]) {
#if FA_TEST_ON_GPU
  bool listing = false;
  for (int i = 1; i < argc; ++i) listing = listing || std::string_view(argv[i]).starts_with("--list");
  if (!listing && !fa::gpu_available()) {
    std::puts(fa::gpu_path_built() ? "SKIPPED: no GPU on this machine"
                                   : "SKIPPED: built without the GPU path (nvcc not found)");
    return 77;
  }
#endif
  return Catch::Session().run(argc, argv);
}
