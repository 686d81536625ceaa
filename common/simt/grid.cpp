// The host threads that run the blocks of a grid (grid.h).
#include "common/simt/grid.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "common/simt/block.h"

namespace simt {
inline namespace cpu {
namespace detail {
namespace {

// The pool: helper threads 1..n-1 (the caller of run_grid is thread 0). They sleep between
// launches; each keeps its fibers, since those live in its thread_local BlockRunner.
class HostThreads {
 public:
  ~HostThreads() { stop(); }

  void run(const GridLaunch& launch) {
    std::scoped_lock one_launch_at_a_time(launch_mutex_);
    const std::uint64_t blocks =
        std::uint64_t{launch.grid.x} * launch.grid.y * launch.grid.z;
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
    if (helpers > 0) wake_.notify_all();
    work(launch);
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return helpers_busy_ == 0; });
    launch_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  // Takes block indices until none is left or a block has failed.
  void work(const GridLaunch& launch) {
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
