// simt_out_of_bounds: a kernel that reads one element past the end of an array, for the asan
// preset to catch. Each thread t reads element t + 1, so the last thread of the block reads past
// the end. Built without AddressSanitizer, it prints whatever lay there.
//
//   build/asan/bin/simt_out_of_bounds global          AddressSanitizer: heap-buffer-overflow
//   build/asan/bin/simt_out_of_bounds dynamic-shared  AddressSanitizer: heap-buffer-overflow
//   build/asan/bin/simt_out_of_bounds static-shared   UBSan: index 64 out of bounds for 'float [64]'
// (a static __shared__ array is thread_local storage, which ASan does not guard; UBSan's bounds
// check catches a direct index into it, not an access through a pointer.)
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "common/simt/simt.h"

namespace demo::SIMT_BACKEND {

constexpr unsigned threads = 64;

__global__ void read_global(const float* in, float* out) { out[threadIdx.x] = in[threadIdx.x + 1]; }

__global__ void read_dynamic_shared(const float* in, float* out) {
  SIMT_DYNAMIC_SHARED(float, buffer);
  buffer[threadIdx.x] = in[threadIdx.x];
  __syncthreads();
  out[threadIdx.x] = buffer[threadIdx.x + 1];
}

__global__ void read_static_shared(const float* in, float* out) {
  __shared__ float tile[threads];
  tile[threadIdx.x] = in[threadIdx.x];
  __syncthreads();
  out[threadIdx.x] = tile[threadIdx.x + 1];
}

}  // namespace demo::SIMT_BACKEND

int main(int argc, char** argv) {
  CLI::App app{"A kernel that reads one past the end, for the asan preset to catch."};
  std::string memory = "global";
  app.add_option("memory", memory, "global, dynamic-shared or static-shared")
      ->check(CLI::IsMember({"global", "dynamic-shared", "static-shared"}));
  CLI11_PARSE(app, argc, argv);

  using namespace demo::cpu;
  const std::vector<float> host(threads, 1.0f);
  simt::DeviceBuffer<float> in{std::span<const float>(host)}, out(threads);
  if (memory == "global") simt::launch<read_global>(dim3(1), dim3(threads), 0, in.data(), out.data());
  if (memory == "dynamic-shared") {
    simt::launch<read_dynamic_shared>(dim3(1), dim3(threads), threads * sizeof(float), in.data(), out.data());
  }
  if (memory == "static-shared") simt::launch<read_static_shared>(dim3(1), dim3(threads), 0, in.data(), out.data());
  fmt::print("no error reported; the last thread read {}\n", out.to_host().back());
  return 0;
}
