// simt's race checker (common/simt/tools/racecheck.h): the races this book's kernels can have, planted in
// small kernels that mirror them (simt_racecheck_kernels.cuh), each found with its kind and both
// source lines under every schedule and number of host threads, with the same report word for
// word; their fixed versions clean; uninitialised reads; and simt's own test kernels clean, except
// the ones that show a mistake on purpose, which are reported.
//
// The expected lines are the ones marked `// [name]` in the kernel file, read from the source tree
// (FA_SOURCE_DIR), so that editing the kernels above a marked line does not break the test.
#include <cstdint>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "catch.h"
#include "common/simt/runtime/schedule.h"
#include "common/simt/tools/racecheck.h"
#if SIMT_PROFILED_KERNELS
#include "simt_racecheck_kernels.h"
#include "simt_tensor_core_runs.h"
#include "simt_test_runs.h"
#endif

#if SIMT_PROFILED_KERNELS
namespace {

namespace kernels = simt_racecheck_test::cpu_profiled;
using simt::racecheck::Findings;
using simt::racecheck::Hazard;

const std::string kKernelFile = "tests/simt_racecheck_kernels.cuh";

// The line of the source file (path from the repository's top) that holds `text`, which must
// occur exactly once.
int line_of(const std::string& file, const std::string& text) {
  std::ifstream in(std::string(FA_SOURCE_DIR) + "/" + file);
  if (!in) throw std::runtime_error("cannot read " + file);
  int found = 0, number = 0, count = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (line.find(text) != std::string::npos) {
      found = number;
      ++count;
    }
  }
  if (count != 1) throw std::runtime_error(file + ": '" + text + "' occurs " + std::to_string(count) + " times");
  return found;
}
int marked(const std::string& name) { return line_of(kKernelFile, "// [" + name + "]"); }

// True when a report places `access` at `file`:`line`. A plain load or store ("read (4 bytes)") is
// placed by the program's debug information, which simt reads with libdw (SIMT_SOURCE_LINES: 0 on
// macOS, which has none): without it, nowhere (the report gives its address instead). simt's
// instructions (atomicAdd, cp.async) carry their own std::source_location.
bool placed_at(const simt::racecheck::Access& access, const std::string& file, int line) {
  const bool plain = access.operation.starts_with("read (") || access.operation.starts_with("write (");
  if (plain && !SIMT_SOURCE_LINES) return access.file.empty() && access.line == 0;
  return access.file == file && access.line == line;
}

struct Run {
  simt::Schedule schedule;
  std::uint64_t seed;
  unsigned threads;
  std::string name() const {
    return std::string(simt::to_string(schedule)) + (seed != 0 ? ":" + std::to_string(seed) : "") + ", " +
           std::to_string(threads) + " host thread" + (threads == 1 ? "" : "s");
  }
};

// Every schedule (random with two seeds), each with 1, 2 and 4 host threads.
std::vector<Run> runs() {
  std::vector<Run> all;
  for (const auto& [schedule, seed] : {std::pair{simt::Schedule::in_order, 0}, std::pair{simt::Schedule::reverse, 0},
                                       std::pair{simt::Schedule::random, 1}, std::pair{simt::Schedule::random, 2}}) {
    for (unsigned threads : {1u, 2u, 4u}) all.push_back({schedule, static_cast<std::uint64_t>(seed), threads});
  }
  return all;
}

// Runs `launch` under `run` with the checker on; what it found.
Findings check(const Run& run, const std::function<void()>& launch) {
  simt::set_schedule(run.schedule, run.seed);
  simt::set_host_threads(run.threads);
  simt::racecheck::start();
  try {
    launch();
  } catch (...) {
    simt::racecheck::stop();
    simt::reset_schedule();
    simt::reset_host_threads();
    throw;
  }
  simt::racecheck::stop();
  simt::reset_schedule();
  simt::reset_host_threads();
  return simt::racecheck::findings();
}

// Checks that `launch` reports a hazard of `kind` between the lines marked `first` and `second`
// (in that order, with those operations), and the same report under every run.
void expect_hazard(const std::function<void()>& launch, const std::string& kind, bool warning, const std::string& first,
                   const std::string& first_operation, const std::string& second, const std::string& second_operation) {
  std::string report_of_first_run;
  for (const Run& run : runs()) {
    INFO(run.name());
    const Findings f = check(run, launch);
    const std::string report = simt::racecheck::format_report(f);
    INFO(report);
    const Hazard* h = simt::racecheck::find(f, kind);
    REQUIRE(h != nullptr);
    CHECK(h->warning == warning);
    CHECK(placed_at(h->first, kKernelFile, marked(first)));
    CHECK(h->first.operation == first_operation);
    CHECK(placed_at(h->second, kKernelFile, marked(second)));
    CHECK(h->second.operation == second_operation);
    CHECK(f.errors() + f.warnings() > 0);
    if (report_of_first_run.empty()) {
      report_of_first_run = report;
    } else {
      CHECK(report == report_of_first_run);
    }
  }
}

// Checks that `launch` (which launches `launches` kernels) is clean under every run.
void expect_clean(const std::function<void()>& launch, std::uint64_t launches) {
  for (const Run& run : runs()) {
    INFO(run.name());
    const Findings f = check(run, launch);
    INFO(simt::racecheck::format_report(f));
    CHECK(f.launches == launches);
    CHECK(f.unchecked_launches == 0);
    CHECK(f.clean());
  }
}

}  // namespace

TEST_CASE("a double buffer without its end-of-tile barrier: cp.async write after the other warp's ldmatrix read",
          "[simt][racecheck]") {
  // Chapter 06's race. On the CPU a copy lands only at its wait, so the values are right anyway.
  const std::vector<std::uint32_t> racy = kernels::double_buffer(4, false);
  CHECK(racy == kernels::double_buffer(4, true));
  expect_hazard([] { (void)kernels::double_buffer(4, false); }, "shared write-after-read", false, "ldmatrix",
                "ldmatrix read", "copy", "cp.async write");
  expect_clean([] { (void)kernels::double_buffer(4, true); }, 1);
}

TEST_CASE("a plain += from several blocks into one element is a global race between blocks; atomicAdd is not",
          "[simt][racecheck]") {
  // Chapter 07's dQ with atomicAdd replaced by +=: a load and a store of each block.
  expect_hazard([] { (void)kernels::add_to_one(4, false); }, "global write-after-write", false, "plus-equals",
                "write (4 bytes)", "plus-equals", "write (4 bytes)");
  expect_hazard([] { (void)kernels::add_to_one(4, false); }, "global write-after-read", false, "plus-equals",
                "read (4 bytes)", "plus-equals", "write (4 bytes)");
  expect_clean([] { (void)kernels::add_to_one(4, true); }, 1);
  // Blocks 0, 1, 2, 3 add 32 k + t (mod 7) to element t: exact integers in any order.
  const std::vector<float> sums = kernels::add_to_one(4, true);
  for (unsigned t = 0; t < 32; ++t) {
    float expected = 0.0f;
    for (unsigned k = 0; k < 4; ++k) expected += static_cast<float>((32 * k + t) % 7);
    CHECK(sums[t] == expected);
  }
}

TEST_CASE("a barrier missing between a shared write and another warp's read is a read-after-write between warps",
          "[simt][racecheck]") {
  expect_hazard([] { (void)kernels::missing_barrier(false); }, "shared read-after-write", false, "store",
                "write (4 bytes)", "load", "read (4 bytes)");
  expect_clean([] { (void)kernels::missing_barrier(true); }, 1);
}

TEST_CASE("a warp-synchronous reduction without __syncwarp is a read-after-write between lanes (a warning)",
          "[simt][racecheck]") {
  expect_hazard([] { (void)kernels::warp_reduction(false); }, "shared read-after-write", true, "step 16",
                "write (4 bytes)", "step 8", "read (4 bytes)");
  expect_clean([] { (void)kernels::warp_reduction(true); }, 1);
  CHECK(kernels::warp_reduction(true) == 496.0f);  // 0 + 1 + ... + 31
}

TEST_CASE("reads of memory nothing wrote: shared, a poisoned buffer, and an atomicAdd into unzeroed memory",
          "[simt][racecheck]") {
  const Run run{simt::Schedule::in_order, 0, 2};
  {
    const Findings f = check(run, [] { kernels::unwritten_shared(false); });
    INFO(simt::racecheck::format_report(f));
    const Hazard* h = simt::racecheck::find(f, "uninitialised shared read");
    REQUIRE(h != nullptr);
    CHECK(placed_at(h->first, kKernelFile, marked("unwritten shared")));
    CHECK(f.uninitialised() == 1);
    CHECK(f.errors() + f.warnings() == 0);
    expect_clean([] { kernels::unwritten_shared(true); }, 1);
  }
  {
    const Findings f = check(run, [] { kernels::read_unwritten_output(); });
    INFO(simt::racecheck::format_report(f));
    const Hazard* h = simt::racecheck::find(f, "uninitialised global read");
    REQUIRE(h != nullptr);
    CHECK(placed_at(h->first, kKernelFile, marked("unwritten global")));
    CHECK(h->count == 32);  // 32 words, one per lane
  }
  {
    const Findings f = check(run, [] { kernels::accumulate_into_unzeroed(4); });
    INFO(simt::racecheck::format_report(f));
    const Hazard* h = simt::racecheck::find(f, "uninitialised global read");
    REQUIRE(h != nullptr);
    CHECK(placed_at(h->first, kKernelFile, marked("atomic on unwritten")));
    CHECK(h->first.operation == "atomicAdd");
    CHECK(f.errors() + f.warnings() == 0);  // atomics do not race with atomics
  }
}

TEST_CASE("simt's own test kernels are clean under the race checker", "[simt][racecheck]") {
  namespace runs = simt_test::cpu_profiled;
  namespace tc = simt_tensor_test::cpu_profiled;
  const Run run{simt::Schedule::random, 7, 2};
  std::vector<float> floats(1024);
  for (std::size_t i = 0; i < floats.size(); ++i) floats[i] = static_cast<float>(i % 17) - 8.0f;
  std::vector<int> ints(128);
  for (std::size_t i = 0; i < ints.size(); ++i) ints[i] = static_cast<int>(i * 37 % 101);
  std::vector<std::uint32_t> words(32 * 8);
  for (std::size_t i = 0; i < words.size(); ++i) words[i] = static_cast<std::uint32_t>(i * 2654435761u);
  std::vector<std::uint16_t> halves(32 * 8);
  for (std::size_t i = 0; i < halves.size(); ++i) halves[i] = static_cast<std::uint16_t>(0x3c00 + i % 64);
  std::vector<int> rows(32);
  for (int l = 0; l < 32; ++l) rows[static_cast<std::size_t>(l)] = (l * 5) % 32;
  std::vector<float> c(64 * 4, 0.5f);
  const std::vector<std::function<void()>> clean = {
      [&] { (void)runs::block_sums(floats, 256); },
      [&] { (void)runs::warp_sums(floats); },
      [&] { (void)runs::warp_shuffles(ints); },
      [&] {
        (void)runs::thread_indices({2, 2, 1}, {8, 4, 2});
      },
      [&] { (void)runs::reverse_blocks(floats, 128); },
      [&] { (void)runs::block_atomic_sums(floats, 128); },
      [&] { (void)runs::count_negative(floats); },
      [&] { (void)tc::mma_fragments(true, std::span(words).first(64 * 4), std::span(words).first(64 * 2), c); },
      [&] { (void)tc::ldmatrix_registers(4, true, halves, rows); },
      [&] { (void)tc::ldmatrix_registers(2, false, halves, rows); },
      [&] {
        (void)tc::mma_through_ldmatrix(false, std::span(halves).first(256), std::span(halves).first(128),
                                       std::span(c).first(128));
      },
      [&] { (void)tc::conversions(floats); },
  };
  for (std::size_t k = 0; k < clean.size(); ++k) {
    INFO("runner " << k);
    const Findings f = check(run, clean[k]);
    INFO(simt::racecheck::format_report(f));
    CHECK(f.launches == 1);
    CHECK(f.clean());
  }
}

TEST_CASE("simt's test kernels that show a mistake on purpose are reported with it", "[simt][racecheck]") {
  namespace runs = simt_test::cpu_profiled;
  namespace tc = simt_tensor_test::cpu_profiled;
  const Run run{simt::Schedule::in_order, 0, 2};
  std::vector<float> floats(256, 1.0f);
  std::vector<std::uint32_t> words(32 * 4, 7u), two_groups(32 * 8, 9u);
  const auto report_of = [&](const std::function<void()>& launch) {
    const Findings f = check(run, launch);
    return std::pair{f, simt::racecheck::format_report(f)};
  };
  {  // the block sum without the barrier after the loads
    const auto [f, report] = report_of([&] { (void)runs::block_sums_missing_barrier(floats, 256); });
    INFO(report);
    const Hazard* h = simt::racecheck::find(f, "shared read-after-write");
    REQUIRE(h != nullptr);
    const std::string file = "tests/simt_test_kernels.cuh";
    CHECK(placed_at(h->first, file, line_of(file, "// (missing: __syncthreads();)") - 1));
  }
  {  // a thread reads its own cp.async destination before its wait
    const auto [f, report] = report_of([&] { (void)tc::async_copy(words, 32, true); });
    INFO(report);
    const Hazard* h = simt::racecheck::find(f, "shared read-after-write");
    REQUIRE(h != nullptr);
    CHECK(h->first.operation == "cp.async write");
    CHECK(h->who.find("before its own cp_async_wait_group") != std::string::npos);
  }
  {  // a barrier, but no wait: the neighbour's copy may still be in flight
    const auto [f, report] = report_of([&] { (void)tc::async_copy_barrier_only(words, 32); });
    INFO(report);
    const Hazard* h = simt::racecheck::find(f, "shared read-after-write");
    REQUIRE(h != nullptr);
    CHECK(h->first.operation == "cp.async write");
    const std::string file = "tests/simt_tensor_core_kernels.cuh";
    CHECK(placed_at(h->second, file, line_of(file, "(missing before it: simt::cp_async_wait") + 1));
  }
  {  // group 1 read after wait_group<1>, which leaves it in flight
    const auto [f, report] = report_of([&] { (void)tc::async_copy_two_groups(two_groups, 32); });
    INFO(report);
    const Hazard* h = simt::racecheck::find(f, "shared read-after-write");
    REQUIRE(h != nullptr);
    const std::string file = "tests/simt_tensor_core_kernels.cuh";
    CHECK(placed_at(h->second, file, line_of(file, "second1[4 * t + i] =")));
  }
  {  // dynamic shared memory read before anything wrote it
    const auto [f, report] = report_of([&] { (void)runs::unwritten_dynamic_shared(2, 64); });
    INFO(report);
    REQUIRE(simt::racecheck::find(f, "uninitialised shared read") != nullptr);
  }
}

#else
// Without profiled copies (the asan and tsan presets, a compiler other than GCC) there is nothing to
// check, and the checker says why.
TEST_CASE("where the build has no profiled copies, the race checker says why it is not available",
          "[simt][racecheck]") {
  CHECK_FALSE(simt::racecheck::available());
  CHECK_THROWS_AS(simt::racecheck::start(), std::logic_error);
  CHECK(simt::racecheck::unavailable_reason().find("not available") != std::string::npos);
}
#endif
