// ch02_softmax_bench: chapter 01's safe softmax (three passes over x: max, sum, normalise) against
// this chapter's online softmax (two passes: max and sum together, then normalise), on rows of
// 1e3 to 1e8 doubles (8 kB to 800 MB).
//
// Per score, the safe form reads x three times and writes p once; the online form reads x twice
// and writes p once (Milakov and Gimelshein 2018, section 3, count the same 4 against 3 memory
// accesses). While x fits in a cache the extra read is cheap; once it does not, each pass streams
// x from memory again, so the ratio safe / online is the number to watch as n grows. Both forms
// also compute about two exp() per score, which costs more than a cached read.
//
// Reported: time per row and bytes/s, counting the 8 bytes of each score once (the same count for
// both forms, so the ratio of bytes/s is the inverse ratio of times).
// Run it: build/default/bin/ch02_softmax_bench   (about half a minute; --benchmark_filter=online
// runs one form only). Build the default preset (Release) first: a debug build measures nothing.
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include <benchmark/benchmark.h>

#include "chapters/01_safe_softmax/safe_softmax.h"
#include "chapters/02_online_softmax/online_softmax.h"
#include "common/random.h"

namespace {

// One row of n scores per size, drawn once and shared by every benchmark of that size.
const std::vector<double>& scores(std::size_t n) {
  static std::map<std::size_t, std::vector<double>> rows;
  auto it = rows.find(n);
  if (it == rows.end()) it = rows.emplace(n, fa::normal<double>(n, 20 + n, 0.0, 5.0)).first;
  return it->second;
}

void report(benchmark::State& state, std::size_t n) {
  const auto bytes = static_cast<std::int64_t>(n * sizeof(double));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * bytes);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(n));
}

// Chapter 01: lines 1-3 of safe_softmax.h, three passes.
void BM_safe_three_pass(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const std::span<const double> x(scores(n));
  for (auto _ : state) {
    auto p = ch01::safe_softmax(x);
    benchmark::DoNotOptimize(p.data());
    benchmark::ClobberMemory();
  }
  report(state, n);
}

// Chapter 02: lines 1-6 of online_softmax.h, two passes; the second argument is the block size
// (1 = one score at a time, as in the paper; 256 = blocks, as FlashAttention sees the scores).
void BM_online_two_pass(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto block = static_cast<std::size_t>(state.range(1));
  const std::span<const double> x(scores(n));
  for (auto _ : state) {
    auto p = ch02::online_softmax(x, block);
    benchmark::DoNotOptimize(p.data());
    benchmark::ClobberMemory();
  }
  report(state, n);
}

// Sizes 1e3, 1e4, ..., 1e8. A row of 1e8 takes about a second; MinTime keeps the repetitions of
// the big sizes to one or two.
void sizes(benchmark::internal::Benchmark* b, std::int64_t block) {
  for (std::int64_t n = 1000; n <= 100000000; n *= 10) {
    if (block == 0) {
      b->Args({n});
    } else {
      b->Args({n, block});
    }
  }
  b->MinTime(0.2)->Unit(benchmark::kMicrosecond);
}

}  // namespace

BENCHMARK(BM_safe_three_pass)->Apply([](benchmark::internal::Benchmark* b) { sizes(b, 0); });
BENCHMARK(BM_online_two_pass)->Apply([](benchmark::internal::Benchmark* b) { sizes(b, 1); });
BENCHMARK(BM_online_two_pass)->Apply([](benchmark::internal::Benchmark* b) { sizes(b, 256); });
