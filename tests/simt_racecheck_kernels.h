// The race checker's test kernels (simt_racecheck_kernels.cuh), as the test sees them: each runner
// allocates device buffers, launches its kernel once and returns. Only the profiled copy exists
// (namespace simt_racecheck_test::cpu_profiled, built where SIMT_PROFILED_KERNELS is 1): these
// kernels are there to be checked.
#pragma once

#include <cstdint>
#include <vector>

namespace simt_racecheck_test::cpu_profiled {

// One block of 2 warps sums (xor) `tiles` tiles of 64 rows through a cp.async double buffer read by
// ldmatrix; returns each thread's xor. With end_barrier false, the barrier at the end of each tile
// is missing.
std::vector<std::uint32_t> double_buffer(int tiles, bool end_barrier);
// `blocks` blocks of 32 threads add their values into the same 32 floats, by += or by atomicAdd;
// returns the 32 sums.
std::vector<float> add_to_one(unsigned blocks, bool atomic);
// One block of 2 warps: thread t stores in[t] to shared memory and reads the slot of thread 63 - t,
// with or without the barrier between; returns what each read.
std::vector<float> missing_barrier(bool barrier);
// One warp sums 32 floats (0, 1, ..., 31) by the warp-synchronous shared-memory tree, with or
// without __syncwarp() between its steps.
float warp_reduction(bool syncwarp);
// One warp reads a static __shared__ array that nothing wrote (unless write_first).
void unwritten_shared(bool write_first);
// One warp reads a DeviceBuffer that nothing wrote (allocated, poisoned, never filled).
void read_unwritten_output();
// `blocks` blocks of 32 threads atomicAdd into 32 floats that nothing zeroed.
void accumulate_into_unzeroed(unsigned blocks);

}  // namespace simt_racecheck_test::cpu_profiled
