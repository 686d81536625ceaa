// simt_bench: what a launch and a barrier cost on the CPU.
//
//   BM_empty_launch     one block of 32 threads that does nothing: the fixed cost of a launch
//   BM_two_barriers     1024 blocks of 256 threads, two __syncthreads() each (the launch that chose
//                       the fiber mechanism, docs/simt.md); argument: host threads
//   BM_mma              one block of one warp that runs 4096 mma_m16n8k16_bf16 in a row, on one
//                       host thread: what one warp-wide tensor-core instruction costs on the CPU
//                       (the rendezvous of 32 fibers and the 16x8x16 product)
//   BM_wgmma            one warpgroup (128 threads) that runs 1024 wgmma m64n128k16 bf16 in a row,
//                       A and B from shared memory through 128B-swizzled descriptors, each in its
//                       own fence / commit / wait, on one host thread
//   BM_mma_warpgroup    the same work as BM_wgmma with mma.sync: 4 warps, each 16 mma_m16n8k16 per
//                       step (its 16 rows times 128 columns), 1024 steps
// Counters: launches/s, and barriers/s counted per block (one block-wide __syncthreads() = 1) and
// per thread (one thread passing one barrier = 1); mma/s counts warp instructions; wgmma/s
// warpgroup instructions; steps/s the mma steps of 16 per warp that one wgmma replaces.
//
//   build/default/bin/simt_bench
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>

#include "common/simt/simt.h"

namespace bench::SIMT_BACKEND {

__global__ void empty_kernel() {}

__global__ void two_barriers_kernel(float* out) {
  __shared__ float tile[256];
  tile[threadIdx.x] = static_cast<float>(threadIdx.x);
  __syncthreads();
  const float neighbour = tile[(threadIdx.x + 1) % blockDim.x];
  __syncthreads();
  tile[threadIdx.x] = neighbour;
  if (threadIdx.x == 0) out[blockIdx.x] = tile[0];
}

// Each lane: `count` mma with its own fragments, accumulating in d (D = A B + D).
__global__ void mma_kernel(int count, float* out) {
  const unsigned lane = threadIdx.x;
  std::uint32_t a[4], b[2];
  for (unsigned i = 0; i < 4; ++i) a[i] = simt::pack_bf16x2(0.25f * static_cast<float>(lane % 7), 0.5f);
  for (unsigned i = 0; i < 2; ++i) b[i] = simt::pack_bf16x2(0.125f * static_cast<float>(lane % 5), -0.25f);
  float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int i = 0; i < count; ++i) simt::mma_m16n8k16_bf16(d, a, b, d);
  out[lane] = d[0] + d[1] + d[2] + d[3];
}

// Each thread of the warpgroup: `count` wgmma m64n128k16 on the same tiles of A (64 x 16) and B
// (128 x 16), K-major with the 128-byte swizzle, accumulating in d.
__global__ void wgmma_kernel(int count, float* out) {
  SIMT_DYNAMIC_SHARED(std::uint8_t, smem);  // 1024-aligned on the CPU: A at 0, B at 8192
  const unsigned t = threadIdx.x;
  for (unsigned i = t; i < (8192 + 16384) / 2; i += blockDim.x) {
    reinterpret_cast<std::uint16_t*>(smem)[i] = static_cast<std::uint16_t>(0x3f80u + i % 7);  // about 1
  }
  simt::fence_proxy_async_shared_cta();
  __syncthreads();
  const std::uint64_t a = simt::make_wgmma_descriptor(smem, simt::Swizzle::b128, 16, 1024);
  const std::uint64_t b = simt::make_wgmma_descriptor(smem + 8192, simt::Swizzle::b128, 16, 1024);
  float d[64] = {};
  for (int i = 0; i < count; ++i) {
    simt::wgmma_fence();
    simt::wgmma_m64nNk16_bf16<128>(d, a, b, true);
    simt::wgmma_commit_group();
    simt::wgmma_wait_group<0>();
  }
  out[t] = d[0] + d[63];
}

// Each warp: `count` steps of 16 mma m16n8k16 (16 rows, 128 columns, k 16), what one wgmma
// m64n128k16 does for the warp's 16 rows.
__global__ void mma_warpgroup_kernel(int count, float* out) {
  const unsigned lane = threadIdx.x % 32;
  std::uint32_t a[4], b[2];
  for (unsigned i = 0; i < 4; ++i) a[i] = simt::pack_bf16x2(0.25f * static_cast<float>(lane % 7), 0.5f);
  for (unsigned i = 0; i < 2; ++i) b[i] = simt::pack_bf16x2(0.125f * static_cast<float>(lane % 5), -0.25f);
  float d[16][4] = {};
  for (int i = 0; i < count; ++i) {
    for (int j = 0; j < 16; ++j) simt::mma_m16n8k16_bf16(d[j], a, b, d[j]);
  }
  out[threadIdx.x] = d[0][0] + d[15][3];
}

}  // namespace bench::SIMT_BACKEND

namespace {

void BM_empty_launch(benchmark::State& state) {
  simt::set_host_threads(static_cast<unsigned>(state.range(0)));
  for (auto _ : state) simt::launch<bench::cpu::empty_kernel>(dim3(1), dim3(32), 0);
  state.counters["launches/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  simt::reset_host_threads();
}
BENCHMARK(BM_empty_launch)->Arg(1)->Arg(2)->UseRealTime();

void BM_two_barriers(benchmark::State& state) {
  constexpr unsigned blocks = 1024, threads = 256, barriers = 2;
  simt::set_host_threads(static_cast<unsigned>(state.range(0)));
  simt::DeviceBuffer<float> out(blocks);
  for (auto _ : state) {
    simt::launch<bench::cpu::two_barriers_kernel>(dim3(blocks), dim3(threads), 0, out.data());
  }
  const auto launches = static_cast<double>(state.iterations());
  state.counters["launches/s"] = benchmark::Counter(launches, benchmark::Counter::kIsRate);
  state.counters["block_barriers/s"] = benchmark::Counter(launches * blocks * barriers, benchmark::Counter::kIsRate);
  state.counters["thread_barriers/s"] =
      benchmark::Counter(launches * blocks * threads * barriers, benchmark::Counter::kIsRate);
  simt::reset_host_threads();
}
BENCHMARK(BM_two_barriers)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

// One block of `threads` that runs Kernel(count, out) on one host thread, `shared` bytes of
// dynamic shared memory; `counter` counts the kernel's `count` steps per second.
template <auto Kernel>
void run_steps(benchmark::State& state, unsigned threads, std::size_t shared, int count, const char* counter) {
  simt::set_host_threads(1);
  simt::DeviceBuffer<float> out(threads);
  for (auto _ : state) simt::launch<Kernel>(dim3(1), dim3(threads), shared, count, out.data());
  state.counters[counter] =
      benchmark::Counter(static_cast<double>(state.iterations()) * count, benchmark::Counter::kIsRate);
  simt::reset_host_threads();
}

void BM_mma(benchmark::State& state) { run_steps<bench::cpu::mma_kernel>(state, 32, 0, 4096, "mma/s"); }
// Timed in CPU time, not real time: the figure is mma per second of one core, whatever else the
// machine runs (one host thread, no helpers: the block runs on the benchmark's own thread).
BENCHMARK(BM_mma)->Unit(benchmark::kMillisecond);

void BM_wgmma(benchmark::State& state) {
  run_steps<bench::cpu::wgmma_kernel>(state, 128, 8192 + 16384, 1024, "wgmma/s");
}
BENCHMARK(BM_wgmma)->Unit(benchmark::kMillisecond);  // CPU time, as BM_mma

void BM_mma_warpgroup(benchmark::State& state) {
  run_steps<bench::cpu::mma_warpgroup_kernel>(state, 128, 0, 1024, "steps/s");
}
BENCHMARK(BM_mma_warpgroup)->Unit(benchmark::kMillisecond);  // CPU time, as BM_mma

}  // namespace
