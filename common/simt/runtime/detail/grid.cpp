// The host threads that run the blocks of a grid (grid.h).
#include "common/simt/runtime/detail/grid.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include <unistd.h>  // isatty

#include "common/simt/runtime/detail/block.h"
#include "common/simt/runtime/progress.h"
#include "common/simt/tools/detail/observer.h"

namespace simt {
namespace {

// The label of the live ShowProgress (progress.h); empty when there is none.
std::mutex progress_mutex;
std::string progress_label;

std::string current_progress_label() {
  std::scoped_lock lock(progress_mutex);
  return progress_label;
}

}  // namespace

ShowProgress::ShowProgress(std::string label, bool show) {
  if (!show) return;
  const char* term = std::getenv("TERM");
  const bool terminal = isatty(fileno(stdout)) != 0 && !(term != nullptr && std::strcmp(term, "dumb") == 0);
  std::scoped_lock lock(progress_mutex);
  progress_label = terminal ? std::move(label) : std::string();
  showing_ = true;
}

void ShowProgress::stop() {
  if (!showing_) return;
  std::scoped_lock lock(progress_mutex);
  progress_label.clear();
  showing_ = false;
}

inline namespace cpu {
namespace detail {
namespace {

// Prints "\r  label: done / total blocks" on the caller's thread at most twice a second while a
// launch runs, and clears the line at its end (progress.h).
class ProgressLine {
 public:
  ProgressLine(std::string label, std::uint64_t total) : label_(std::move(label)), total_(total) {}
  ~ProgressLine() {
    if (shown_ == 0) return;
    std::printf("\r%*s\r", static_cast<int>(shown_), "");
    std::fflush(stdout);
  }
  void update(std::uint64_t done) {
    if (label_.empty()) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::milliseconds(500)) return;
    last_ = now;
    const int n = std::printf("\r  %s: %llu / %llu blocks", label_.c_str(), static_cast<unsigned long long>(done),
                              static_cast<unsigned long long>(total_));
    if (n > 0) shown_ = std::max<std::size_t>(shown_, static_cast<std::size_t>(n));
    std::fflush(stdout);
  }

 private:
  std::string label_;
  std::uint64_t total_;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
  std::size_t shown_ = 0;
};

// The pool: helper threads 1..n-1 (the caller of run_grid is thread 0). They sleep between
// launches; each keeps its fibers, since those live in its thread_local BlockRunner.
class HostThreads {
 public:
  ~HostThreads() { stop(); }

  void run(const GridLaunch& launch) {
    std::scoped_lock one_launch_at_a_time(launch_mutex_);
    observer::launch_begin(launch.kernel_name, launch.profiled_copy,  // simt's race checker: a launch begins
                           launch.pointer_arguments, GridLaunch::kArguments);
    const std::uint64_t blocks = std::uint64_t{launch.grid.x} * launch.grid.y * launch.grid.z;
    const unsigned wanted = host_threads();
    if (helpers_.size() != wanted - 1) resize(wanted - 1);
    const auto helpers = static_cast<unsigned>(std::min<std::uint64_t>(wanted, blocks) - 1);
    {
      std::scoped_lock lock(mutex_);
      launch_ = &launch;
      blocks_ = blocks;
      next_block_ = 0;
      failed_ = false;
      error_ = nullptr;
      error_block_ = UINT64_MAX;
      helpers_wanted_ = helpers;
      helpers_busy_ = helpers;
      ++generation_;
    }
    done_blocks_ = 0;
    if (helpers > 0) wake_.notify_all();
    ProgressLine progress(current_progress_label(), blocks);
    work(launch, &progress);
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return helpers_busy_ == 0; });
    launch_ = nullptr;
    lock.unlock();
    observer::launch_end();  // ... and ends: the races between its blocks
    if (error_) std::rethrow_exception(error_);
  }

 private:
  // Takes block indices until none is left or a block has failed. The caller of run() passes its
  // progress line; the helpers pass none.
  void work(const GridLaunch& launch, ProgressLine* progress = nullptr) {
    const dim3 g = launch.grid;
    while (!failed_.load(std::memory_order_relaxed)) {
      const std::uint64_t b = next_block_.fetch_add(1, std::memory_order_relaxed);
      if (b >= blocks_) break;
      const uint3 block_idx{static_cast<unsigned>(b % g.x), static_cast<unsigned>((b / g.x) % g.y),
                            static_cast<unsigned>(b / (std::uint64_t{g.x} * g.y))};
      try {
        run_block(launch, block_idx);
      } catch (...) {
        // Keep the failure of the lowest block: every block below it has been started, so the
        // report does not depend on how the host threads happened to interleave.
        std::scoped_lock lock(mutex_);
        if (b < error_block_) {
          error_block_ = b;
          error_ = std::current_exception();
        }
        failed_ = true;
      }
      const std::uint64_t done = done_blocks_.fetch_add(1, std::memory_order_relaxed) + 1;
      if (progress != nullptr) progress->update(done);
    }
  }

  // `seen`: the last launch generation this helper has been offered (it starts at the current one,
  // so that a helper created between two launches waits for the next).
  void helper_loop(unsigned index, std::uint64_t seen) {
    std::unique_lock lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return stopping_ || (generation_ != seen && index <= helpers_wanted_); });
      if (stopping_) return;
      seen = generation_;
      const GridLaunch& launch = *launch_;
      lock.unlock();
      work(launch);
      lock.lock();
      if (--helpers_busy_ == 0) done_.notify_all();
    }
  }

  void resize(unsigned helpers) {
    stop();
    stopping_ = false;
    const std::uint64_t now = generation_;  // no launch runs: resize is called before the next
    for (unsigned i = 1; i <= helpers; ++i) helpers_.emplace_back([this, i, now] { helper_loop(i, now); });
  }

  void stop() {
    {
      std::scoped_lock lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& t : helpers_) t.join();
    helpers_.clear();
  }

  std::mutex launch_mutex_;
  std::mutex mutex_;  // guards everything below except the two atomics
  std::condition_variable wake_, done_;
  std::vector<std::thread> helpers_;
  bool stopping_ = false;
  std::uint64_t generation_ = 0;
  unsigned helpers_wanted_ = 0;
  unsigned helpers_busy_ = 0;
  const GridLaunch* launch_ = nullptr;
  std::uint64_t blocks_ = 0;
  std::atomic<std::uint64_t> next_block_{0};
  std::atomic<std::uint64_t> done_blocks_{0};  // for the progress line
  std::atomic<bool> failed_{false};
  std::exception_ptr error_;
  std::uint64_t error_block_ = UINT64_MAX;
};

}  // namespace

void run_grid(const GridLaunch& launch) {
  if (in_kernel()) {
    throw std::logic_error("simt::launch of " + std::string(launch.kernel_name) +
                           " from inside a kernel: a kernel cannot launch another on the CPU");
  }
  static HostThreads threads;
  threads.run(launch);
}

}  // namespace detail
}  // namespace cpu
}  // namespace simt
