// The test kernels of simt's memory profile (simt_profile_kernels.cuh), as the test sees them:
// each runner allocates device buffers, launches its kernel once and returns. Only the profiled
// copy exists (namespace simt_profile_test::cpu_profiled, built where SIMT_PROFILED_KERNELS is 1):
// these kernels are there to be counted.
#pragma once

namespace simt_profile_test::cpu_profiled {

// One block of `warps` warps; lane l of every warp loads in[l * stride] (float) if l < active,
// and writes it to out[thread] (every lane).
void load_floats(unsigned stride, unsigned active, unsigned warps);
// One warp; every lane loads one element of `bytes` bytes (8: double, 16: four floats) at in[l].
void load_wide(unsigned bytes);
// One warp; lane l reads `bytes` bytes at word l * stride of a static __shared__ array
// (dynamic: of dynamic shared memory instead), then writes it to out[l].
void shared_strided(unsigned stride, unsigned bytes, bool dynamic);
// One warp; lanes 0 and 1 read word 0 of shared memory, lane l > 1 reads word l.
void shared_two_lanes_one_word();
// One warp; even lanes load a[l], odd lanes load b[l] (two instructions, 16 lanes each).
void divergent();
// One warp; lane l loads in[l + 32 k] for k = 0 .. l % 4: the k-th execution of the load by each
// lane is one instruction (4 instructions: 32, 24, 16 and 8 lanes active).
void uneven_loop();
// One warp; lane l copies in[4l .. 4l+3] to shared row l by cp.async (rows row_words words
// apart), then ldmatrix_x4 reads the 32 rows.
void ldmatrix_cp_async(unsigned row_words);
// One warp; each lane sums in[l] and in[l + 32] through a local array it indexes at run time
// (stack memory, not counted), with a shuffle between the two loads (a warp synchronisation point).
void stack_and_shuffle();

}  // namespace simt_profile_test::cpu_profiled
