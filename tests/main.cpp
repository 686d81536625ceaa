// The main() of every test executable. With FA_TEST_ON_GPU it first checks for a device, and exits
// with 77 when there is none: CTest's SKIP_RETURN_CODE turns that into SKIPPED, never a pass.
#if __has_include(<catch2/catch_session.hpp>)
#include <catch2/catch_session.hpp>
#else
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#endif

#include <cstdio>

#include "common/device.h"

int main(int argc, char* argv[]) {
#if FA_TEST_ON_GPU
  if (!fa::gpu_available()) {
    std::puts(fa::gpu_path_built() ? "SKIPPED: no GPU on this machine"
                                   : "SKIPPED: built without the GPU path (nvcc not found)");
    return 77;
  }
#endif
  return Catch::Session().run(argc, argv);
}
