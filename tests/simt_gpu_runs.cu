// The simt test kernels and their runners compiled by nvcc: simt_test::gpu:: (simt_test_runs.h).
// Building this file is the check that every test kernel is CUDA that nvcc accepts.
#include "simt_test_kernels.cuh"

// What the GPU path does with memory nothing wrote yet (common/simt/runtime/runtime_gpu.h, SIMT_POISON): whether
// this nvcc build poisons, whether a fresh DeviceBuffer is filled in this run (not with SIMT_POISON=0
// in the environment), and what a fresh DeviceBuffer of `count` floats holds.
namespace simt_test::gpu {
bool poisons() { return SIMT_POISON != 0; }
bool poisons_fresh_buffers() { return simt::detail::poison_device_memory(); }
std::vector<float> fresh_buffer(std::size_t count) { return simt::DeviceBuffer<float>(count).to_host(); }
}  // namespace simt_test::gpu
