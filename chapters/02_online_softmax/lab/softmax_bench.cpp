// ch02_softmax_bench: what the online softmax saves. Chapter 01's safe softmax (three passes over
// the scores x: max, sum, normalise) against this chapter's online softmax (two passes: max and
// sum together, with the rescale, then normalise), both vectorised (softmax_simd.h), both on one
// thread, on rows of 1e3 to 1e8 float32 scores (4 kB to 400 MB).
//
// What to expect. Per score the safe form reads x three times and writes p once; the online form
// reads x twice and writes p once (Milakov and Gimelshein 2018, section 3, count the same 4
// against 3 memory accesses). A write to memory through the cache first reads the line
// (write-allocate), so in bytes moved the safe form costs 5 and the online form 4: once the row no
// longer fits in the last-level cache, safe / online tends to 5/4 = 1.25. With non-temporal
// (streaming) stores, which skip that read, the counts are 4 and 3, and the limit is 4/3. While the
// row fits in a cache the extra read costs little next to the exponentials, and the ratio is
// nearer 1. The exponential is Highway's vectorised Exp (softmax_simd.cpp says why), so that the
// arithmetic stays below the time memory needs and the saved pass can show.
//
// Benchmarks: BM_safe_three_pass/<n>/<store> and BM_online_two_pass/<n>/<store>, n the number of
// scores, store 0 = ordinary stores, 1 = streaming stores; BM_max_pass/<n>, the safe form's first
// pass alone (the pass the online form saves). Reported: time per row, and scores/s.
// Before a size is timed, both forms are checked against chapter 01's scalar softmax (see check()).
//
// Run it (Release build; a debug build measures nothing), about two minutes:
//   build/default/bin/ch02_softmax_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
// docs/02-online-softmax.md has the ratios measured on one machine, and how to read them.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <hwy/aligned_allocator.h>

#include "chapters/01_safe_softmax/safe_softmax.h"
#include "chapters/02_online_softmax/lab/softmax_simd.h"
#include "common/compare.h"
#include "common/random.h"
#include "common/tolerance.h"

namespace {

using ch02::simd::Store;

// One row of n scores, normal(0, 5) as in the chapter's tests, and room for its n weights,
// allocated (and touched, so that no page fault is timed) once per size.
struct Row {
  std::vector<float> x;
  hwy::AlignedFreeUniquePtr<float[]> p;  // 64-byte aligned, as streaming stores need
};

Row& row(std::size_t n) {
  static std::map<std::size_t, Row> rows;
  auto it = rows.find(n);
  if (it == rows.end()) {
    Row r{fa::normal<float>(n, 20 + n, 0.0, 5.0), hwy::AllocateAligned<float>(n)};
    for (std::size_t i = 0; i < n; ++i) r.p[i] = 0.0f;
    it = rows.emplace(n, std::move(r)).first;
  }
  return it->second;
}

using Kernel = void (*)(std::span<const float>, std::span<float>, Store);

// The vectorised form against chapter 01's scalar safe softmax in float64 (the reference), with the
// book's rule for a float32 result (common/tolerance.h): its error may be at most twice the error
// that the plain float32 evaluation of the same formula (ch01::safe_softmax<float>) makes on the
// same row, plus the unit roundoff 2^-24 (for rows where the plain error happens to be near 0).
// Relative L2, so that the many tiny weights do not hide the large ones; compare() counts a NaN
// against a number as an infinite error, so a lost NaN fails. Returns "" when the form agrees,
// else a one-line description of the disagreement.
std::string check_row(Kernel kernel, std::span<const float> x, Store store, const std::string& what) {
  hwy::AlignedFreeUniquePtr<float[]> p = hwy::AllocateAligned<float>(x.size());
  kernel(x, std::span<float>(p.get(), x.size()), store);
  const std::vector<double> x64(x.begin(), x.end());
  const std::vector<double> ref = ch01::safe_softmax(std::span<const double>(x64));
  const std::vector<float> plain = ch01::safe_softmax(x);
  const fa::ErrorStats plain_error = fa::compare(plain, ref);
  const fa::ErrorStats error = fa::compare(std::span<const float>(p.get(), x.size()), std::span<const double>(ref));
  const double bound = fa::bound_from_plain(plain_error.rel_l2);
  if (error.rel_l2 <= bound) return "";
  return fmt::format("vectorised softmax disagrees with chapter 01 on {}: {}; bound {}", what, fa::describe(error),
                     fa::explain_bound(plain_error.rel_l2));
}

// The row of the benchmark (up to 1e6 scores; above that the scalar references take seconds, and
// the kernels are the same code at every size), and once the special values of the book's
// conventions: masked (-inf) scores, a fully masked row (all zeros), a row whose first block is
// fully masked (the guard of line 3), a NaN (all NaN). The special rows are 2500 long: two whole
// blocks of ch02::simd::kBlock = 1024, a shorter third block, and a tail of 4 scores after the
// last whole vector of 8 (AVX2) or 16 (AVX-512).
std::string check(Kernel kernel, const Row& r, std::size_t n, Store store) {
  if (n <= 1000000) {
    if (std::string wrong = check_row(kernel, r.x, store, fmt::format("{} scores", n)); !wrong.empty()) {
      return wrong;
    }
  }
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> masked = fa::normal<float>(2500, 7, 0.0, 5.0);  // 7, 8: random seeds
  for (std::size_t i = 0; i < masked.size(); i += 3) masked[i] = -inf;
  std::vector<float> nan_row = fa::normal<float>(2500, 8, 0.0, 5.0);
  nan_row[2049] = std::numeric_limits<float>::quiet_NaN();  // in the third block
  std::vector<float> all_masked(2500, -inf);
  std::vector<float> masked_start = fa::normal<float>(2500, 9, 0.0, 5.0);  // 9: a random seed
  std::fill(masked_start.begin(), masked_start.begin() + 1500, -inf);      // m stays -inf for a block
  for (const auto& [row, what] :
       {std::pair{&masked, "a row with every third score -inf"}, std::pair{&all_masked, "a row of only -inf"},
        std::pair{&masked_start, "a row whose first 1500 scores are -inf"},
        std::pair{&nan_row, "a row with one NaN"}}) {
    if (std::string wrong = check_row(kernel, *row, store, what); !wrong.empty()) return wrong;
  }
  return "";
}

void run(benchmark::State& state, Kernel kernel) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto store = state.range(1) == 0 ? Store::cached : Store::streaming;
  Row& r = row(n);
  if (const std::string wrong = check(kernel, r, n, store); !wrong.empty()) {
    state.SkipWithError(wrong.c_str());
    return;
  }
  const std::span<const float> x(r.x);
  const std::span<float> p(r.p.get(), n);
  for (auto _ : state) {
    kernel(x, p, store);
    benchmark::DoNotOptimize(p.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(n));
}

// Chapter 01: lines 1-3 of safe_softmax.h, three passes.
void BM_safe_three_pass(benchmark::State& state) { run(state, ch02::simd::safe_softmax); }

// Chapter 02: lines 1-6 of online_softmax.h, two passes, blocks of ch02::simd::kBlock scores.
void BM_online_two_pass(benchmark::State& state) { run(state, ch02::simd::online_softmax); }

// Chapter 01's line 1 alone: what the online form saves. Its time should be about the difference
// of the two forms' times, and the ratio safe / online about 1 + max pass / online.
void BM_max_pass(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const std::span<const float> x(row(n).x);
  for (auto _ : state) benchmark::DoNotOptimize(ch02::simd::max_pass(x));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(n));
}

}  // namespace

// Sizes 1e3, 1e4, ..., 1e8, each with ordinary and with streaming stores; for each, the safe form
// and then the online form, so that the two forms of one size are timed close together. A row of
// 1e8 takes about 0.2 s; MinTime keeps each measurement of the big sizes to a few rows.
int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("simd", ch02::simd::target_name() + " (Google Highway, chosen at run time)");
  for (std::int64_t store = 0; store <= 1; ++store) {
    for (std::int64_t n = 1000; n <= 100000000; n *= 10) {
      for (auto* b : {benchmark::RegisterBenchmark("BM_safe_three_pass", BM_safe_three_pass),
                      benchmark::RegisterBenchmark("BM_online_two_pass", BM_online_two_pass)}) {
        b->Args({n, store})->MinTime(0.3)->Unit(benchmark::kMicrosecond);
      }
      if (store == 0) {
        benchmark::RegisterBenchmark("BM_max_pass", BM_max_pass)->Arg(n)->MinTime(0.3)->Unit(benchmark::kMicrosecond);
      }
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
