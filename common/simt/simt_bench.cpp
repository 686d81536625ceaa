// simt_bench: what a launch and a barrier cost on the CPU.
//
//   BM_empty_launch     one block of 32 threads that does nothing: the fixed cost of a launch
//   BM_two_barriers     1024 blocks of 256 threads, two __syncthreads() each (the launch that chose
//                       the fiber mechanism, docs/simt.md); argument: host threads
//   BM_mma              one block of one warp that runs 4096 mma_m16n8k16_bf16 in a row, on one
//                       host thread: what one warp-wide tensor-core instruction costs on the CPU
//                       (the rendezvous of 32 fibers and the 16x8x16 product)
// Counters: launches/s, and barriers/s counted per block (one block-wide __syncthreads() = 1) and
// per thread (one thread passing one barrier = 1); mma/s counts warp instructions.
//
//   build/default/bin/simt_bench
#include <benchmark/benchmark.h>

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

void BM_mma(benchmark::State& state) {
  constexpr int count = 4096;
  simt::set_host_threads(1);
  simt::DeviceBuffer<float> out(32);
  for (auto _ : state) simt::launch<bench::cpu::mma_kernel>(dim3(1), dim3(32), 0, count, out.data());
  state.counters["mma/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * count, benchmark::Counter::kIsRate);
  simt::reset_host_threads();
}
// Timed in CPU time, not real time: the figure is mma per second of one core, whatever else the
// machine runs (one host thread, no helpers: the block runs on the benchmark's own thread).
BENCHMARK(BM_mma)->Unit(benchmark::kMillisecond);

}  // namespace
