#include "common/device.h"

#include <stdexcept>

#include <fmt/format.h>

#if FA_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace fa {

bool gpu_path_built() { return FA_HAVE_CUDA != 0; }

bool gpu_available() {
#if FA_HAVE_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no driver" error
    return false;
  }
  return count > 0;
#else
  return false;
#endif
}

std::string_view to_string(Device d) { return d == Device::gpu ? "gpu" : "cpu"; }

Device parse_device(std::string_view name) {
  if (name == "cpu") return Device::cpu;
  if (name == "gpu") return Device::gpu;
  throw std::invalid_argument(fmt::format("unknown device '{}': accepted values are cpu and gpu", name));
}

void require_device(Device d) {
  if (d != Device::gpu) return;
  if (!gpu_path_built()) {
    throw std::runtime_error(
        "--device gpu: this program was built without the GPU path (nvcc was not found at configure "
        "time); use --device cpu, or configure with the cuda preset");
  }
  if (!gpu_available()) {
    throw std::runtime_error("--device gpu: the CUDA runtime sees no GPU on this machine; use --device cpu");
  }
}

GpuInfo current_gpu() {
  require_device(Device::gpu);
#if FA_HAVE_CUDA
  int device = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    const cudaError_t error = cudaGetLastError();
    throw std::runtime_error(fmt::format("the CUDA runtime cannot describe the GPU: {}", cudaGetErrorString(error)));
  }
  return {prop.name, prop.major, prop.minor};
#else
  return {};  // (require_device threw: no GPU path)
#endif
}

std::size_t gpu_shared_bytes_per_block() {
  require_device(Device::gpu);
#if FA_HAVE_CUDA
  int device = 0, limit = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess) {
    const cudaError_t error = cudaGetLastError();
    throw std::runtime_error(
        fmt::format("the CUDA runtime cannot say the GPU's shared memory per block: {}", cudaGetErrorString(error)));
  }
  return static_cast<std::size_t>(limit);
#else
  return 0;   // (require_device threw: no GPU path)
#endif
}

}  // namespace fa
