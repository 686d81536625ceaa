// Where a kernel runs: on the CPU through common/simt, or on an NVIDIA GPU through the CUDA runtime.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace fa {

enum class Device { cpu, gpu };

// True when this program was built with nvcc (the GPU path) AND the CUDA runtime sees at least one
// device. Never throws: a driver that is missing or too old counts as "no GPU".
bool gpu_available();

// True when the GPU path was compiled into this program (nvcc was found at configure time).
bool gpu_path_built();

// "cpu" or "gpu".
std::string_view to_string(Device d);

// Parses "cpu" or "gpu"; throws std::invalid_argument naming the accepted values otherwise.
Device parse_device(std::string_view name);

// The device a demo uses when none is asked for: the GPU when one is available, else the CPU.
inline Device default_device() { return gpu_available() ? Device::gpu : Device::cpu; }

// Throws std::runtime_error saying why, when d == Device::gpu and no GPU can be used.
void require_device(Device d);

// The current GPU as a chapter that needs a newer one names it: its name and compute capability.
struct GpuInfo {
  std::string name;  // "Tesla T4"
  int major = 0;     // 7 for a T4 (sm_75), 8 for an A100, 9 for an H100 or H200
  int minor = 0;
};
// The current GPU's name and compute capability. Throws std::runtime_error saying why when no GPU
// can be used (require_device) or the CUDA runtime fails to say.
GpuInfo current_gpu();

// The bytes of shared memory the current GPU gives one block when a kernel opts in
// (cudaDevAttrMaxSharedMemoryPerBlockOptin: 65536 on a T4, 166912 on an A100, 232448 on an H100).
// Throws std::runtime_error as require_device when no GPU can be used, or when the CUDA runtime
// fails to say. Source: CUDA Runtime API, cudaDeviceGetAttribute.
std::size_t gpu_shared_bytes_per_block();

}  // namespace fa
