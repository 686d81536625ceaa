// The block scheduler (block.h): CUDA threads as fibers, a counting barrier over live threads, warp
// shuffles through a per-warp rendezvous. Step comments point at the numbered lines of block.h.
//
// ThreadSanitizer: this file is compiled without TSan's instrumentation (see fiber.cpp). A fiber
// switches to the host without synchronisation, so TSan sees the CUDA threads of a block as
// unsynchronised threads; the happens-before edges CUDA does promise are added by hand:
//   - __syncthreads(): every thread releases a token before it waits and acquires it after. The
//     token alternates between two addresses with the barrier's parity: with one address, a thread
//     that leaves barrier k early and reaches barrier k+1 would release into the token that a
//     slower thread still acquires for barrier k, and hide a race between the two barriers.
//   - end of block: each thread releases `block_done_` as it finishes, and the host acquires it
//     once the whole block is done, so the next block (which reuses the same shared memory) and
//     the caller of simt::launch see everything the block wrote.
//   - an exception thrown in a kernel: the thread releases its `error` before it finishes, and
//     the host acquires it before it reads the message.
//   - warp-collective instructions (mma, ldmatrix, __syncwarp; warp_collective.h): every lane
//     releases the warp's token as it arrives, the last lane acquires it before it completes the
//     instruction and releases it after, and every lane acquires it as it leaves. The token
//     alternates between two addresses with the warp's count of collectives, as the barrier's does.
//   - the host's work before a round (the block's setup: its shared memory filled, the kernel's
//     arguments): the host releases `host_token_` before it resumes a thread, and a thread acquires
//     it whenever it starts or continues, also when another thread handed over to it (wait()), a
//     switch that itself synchronises nothing.
#include "common/simt/runtime/detail/block.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/simt/runtime/detail/fiber.h"
#include "common/simt/runtime/detail/tsan_annotations.h"
#include "common/simt/runtime/detail/warp_collective.h"
#include "common/simt/runtime/launch_checks.h"
#include "common/simt/tools/detail/observer.h"  // simt's memory profile and race checker: one call at each sync point

namespace simt {
inline namespace cpu {
namespace detail {
namespace {

constexpr unsigned lanes_per_warp = 32;
constexpr unsigned full_mask = 0xffffffffu;

// Thrown into the CUDA threads of a failed block to unwind their stacks; caught in thread_body.
struct Cancelled {};

enum class State { ready, running, at_barrier, at_shuffle, at_collective, at_wait, finished };

class BlockRunner;

// One CUDA thread: its fiber, its index, and what it waits for.
struct CudaThread {
  BlockRunner* runner = nullptr;
  std::unique_ptr<Fiber> fiber;
  unsigned linear = 0;  // x + y * blockDim.x + z * blockDim.x * blockDim.y
  uint3 idx{0, 0, 0};
  State state = State::ready;
  bool started = false;       // has begun the kernel in this block
  bool cancel = false;        // the block failed: unwind at the next barrier or shuffle
  unsigned barriers = 0;      // barriers passed in this block; its parity picks the TSan token
  std::source_location site;  // the __syncthreads() or shuffle it waits at
  ShuffleMode shuffle_mode = ShuffleMode::idx;
  std::uint64_t shuffle_value = 0;             // this lane's value
  unsigned shuffle_source = 0;                 // the lane it reads
  std::uint64_t shuffle_result = 0;            // what it reads
  const WarpCollective* collective = nullptr;  // the warp- or warpgroup-collective instruction it waits at
  unsigned collective_lanes = 0;               // 32 (a warp's) or 128 (a warpgroup's)
  const BlockingWait* blocking = nullptr;      // the condition it waits for (at_wait: mbarrier, named barrier)
  AsyncCopies async;                           // its cp.async copies in flight (tensor_core.cpp)
  std::exception_ptr error;                    // thrown by the kernel
};

struct Warp {
  unsigned size = 0;              // lanes that exist (fewer than 32 in a block's last, partial warp)
  unsigned live = 0;              // lanes that have not finished the kernel
  unsigned arrived = 0;           // lanes waiting at a shuffle
  unsigned at_collective = 0;     // lanes waiting at a warp-collective instruction (mma, ldmatrix, ...)
  unsigned collectives = 0;       // warp-collective instructions completed; its parity picks the token
  char collective_token[2] = {};  // TSan: the collectives' release/acquire addresses, by parity
};

// The 4 warps 4i .. 4i + 3 of a block: wgmma and the other warpgroup-collective instructions.
struct Warpgroup {
  unsigned at_collective = 0;     // threads waiting at a warpgroup-collective instruction
  unsigned collectives = 0;       // completed; its parity picks the token
  char collective_token[2] = {};  // TSan: as Warp's
};

thread_local CudaThread* current = nullptr;   // the CUDA thread running on this host thread
thread_local std::uint64_t block_serial = 0;  // counts the blocks this host thread has begun

bool same_site(const std::source_location& a, const std::source_location& b) {
  return a.line() == b.line() && a.column() == b.column() &&
         (a.file_name() == b.file_name() || std::strcmp(a.file_name(), b.file_name()) == 0);
}

const char* shuffle_name(ShuffleMode mode) {
  switch (mode) {
    case ShuffleMode::idx:
      return "__shfl_sync";
    case ShuffleMode::up:
      return "__shfl_up_sync";
    case ShuffleMode::down:
      return "__shfl_down_sync";
    case ShuffleMode::bfly:
      return "__shfl_xor_sync";
  }
  return "a shuffle";
}

// SplitMix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number generators", 2014): a few
// instructions, and every seed gives a well-mixed sequence.
std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void thread_body(void* arg);

class BlockRunner {
 public:
  void run(const GridLaunch& launch, uint3 block_idx);
  void barrier(CudaThread& t, const std::source_location& site);
  std::uint64_t shuffle(CudaThread& t, ShuffleMode mode, std::uint64_t bits, unsigned source,
                        const std::source_location& site);
  void collective(CudaThread& t, const WarpCollective& op, const std::source_location& site, unsigned lanes);
  void wait_until(CudaThread& t, const BlockingWait& condition, const std::source_location& site);
  const GridLaunch& launch() const { return *launch_; }
  char* block_done_token() { return &block_done_; }
  char* host_token() { return &host_token_; }

 private:
  void prepare(const GridLaunch& launch, uint3 block_idx);
  const std::vector<unsigned>& order(unsigned round);
  void step(CudaThread& t);
  void start(CudaThread& t);
  void account(CudaThread& t);
  void wait(CudaThread& t);
  CudaThread* next_ready();
  void complete_shuffle(unsigned warp);
  std::optional<std::string> why_stuck() const;
  std::string where_lanes_are(unsigned warp) const;
  std::string where_threads_are(unsigned first, unsigned count, const char* noun) const;
  void poll_waits();
  void release_barrier();
  void cancel_started_threads();
  void fail(std::string what);
  std::string block_name() const;

  std::vector<std::unique_ptr<CudaThread>> pool_;  // grows to the largest block seen; reused
  std::vector<Warp> warps_;
  std::vector<Warpgroup> warpgroups_;
  unsigned waiting_ = 0;  // threads at_wait (a BlockingWait)
  std::vector<unsigned> order_;
  unsigned position_ = 0;          // this round's position in order_: the thread running now
  CudaThread* running_ = nullptr;  // the thread to account for when the host's resume returns
  const GridLaunch* launch_ = nullptr;
  uint3 block_idx_{0, 0, 0};
  std::uint64_t block_linear_ = 0;
  unsigned threads_ = 0;               // in this block
  unsigned live_ = 0;                  // threads that have not finished
  unsigned finished_ = 0;              // threads that have finished
  unsigned ready_ = 0;                 // threads that can run
  unsigned at_barrier_ = 0;            // threads waiting at __syncthreads()
  unsigned at_other_barrier_ = 0;      // of those, how many wait at another one than the first
  std::source_location barrier_site_;  // where the first of them waits
  std::optional<std::string> failure_;
  // Dynamic shared memory, exactly the launch's size, at an address that is a multiple of 256 KiB:
  // its low 18 bits are then the offset in it, the CPU's shared-memory address (hopper.h).
  struct AlignedDelete {
    void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t{shared_window_bytes}); }
  };
  std::unique_ptr<std::byte[], AlignedDelete> shared_;
  std::size_t shared_bytes_ = 0;
  bool shared_allocated_ = false;
  char barrier_token_[2] = {};  // TSan: the barrier's release/acquire addresses, by parity
  char block_done_ = 0;         // TSan: the end-of-block release/acquire address
  char host_token_ = 0;         // TSan: what the host did before it resumed a thread
};

thread_local BlockRunner this_thread_runner;

void BlockRunner::prepare(const GridLaunch& launch, uint3 block_idx) {
  launch_ = &launch;
  block_idx_ = block_idx;
  block_linear_ =
      block_idx.x + std::uint64_t{launch.grid.x} * (block_idx.y + std::uint64_t{launch.grid.y} * block_idx.z);
  const dim3 b = launch.block;
  threads_ = b.x * b.y * b.z;

  while (pool_.size() < threads_) {
    auto t = std::make_unique<CudaThread>();
    t->runner = this;
    const std::string name = "simt CUDA thread " + std::to_string(pool_.size());
    t->fiber = std::make_unique<Fiber>(&thread_body, t.get(), name.c_str());
    pool_.push_back(std::move(t));
  }

  builtin::blockIdx = block_idx;
  builtin::blockDim = launch.block;
  builtin::gridDim = launch.grid;

  // Dynamic shared memory at its exact size (so AddressSanitizer sees a read past its end), filled
  // with 0xff bytes: NaN as a float or a double, -1 as an int. A read before the block has written
  // it shows up in the results.
  if (!shared_allocated_ || shared_bytes_ != launch.dynamic_shared_bytes) {
    shared_.reset(new (std::align_val_t{shared_window_bytes}) std::byte[launch.dynamic_shared_bytes]);
    shared_bytes_ = launch.dynamic_shared_bytes;
    shared_allocated_ = true;
  }
  std::memset(shared_.get(), 0xff, shared_bytes_);
  dynamic_shared_memory = shared_.get();
  if (observer::active()) {  // profile.h, racecheck.h: this block's accesses are counted or checked
    observer::block_begin(launch.kernel_name, {launch.grid.x, launch.grid.y, launch.grid.z}, block_linear_,
                          shared_.get(), shared_bytes_, threads_);
  }
  dynamic_shared_size = shared_bytes_;
  find_static_shared_memory();  // for the tensor-core instructions' address checks

  for (unsigned i = 0; i < threads_; ++i) {  // line 1: every thread is ready
    CudaThread& t = *pool_[i];
    t.linear = i;
    t.idx = {i % b.x, (i / b.x) % b.y, i / (b.x * b.y)};
    t.state = State::ready;
    t.started = false;
    t.cancel = false;
    t.barriers = 0;
    t.async = {};
    t.blocking = nullptr;
    t.error = nullptr;
  }
  warps_.assign((threads_ + lanes_per_warp - 1) / lanes_per_warp, Warp{});
  warpgroups_.assign((warps_.size() + 3) / 4, Warpgroup{});
  waiting_ = 0;
  ++block_serial;
  for (unsigned w = 0; w < warps_.size(); ++w) {
    const unsigned size = std::min(lanes_per_warp, threads_ - w * lanes_per_warp);
    warps_[w] = {size, size, 0};
  }
  live_ = threads_;
  finished_ = 0;
  ready_ = threads_;
  at_barrier_ = 0;
  at_other_barrier_ = 0;
  failure_.reset();

  order_.resize(threads_);
  for (unsigned i = 0; i < threads_; ++i) {
    order_[i] = launch.schedule.schedule == Schedule::reverse ? threads_ - 1 - i : i;
  }
}

// The order of this round: fixed for in_order and reverse; for random, a permutation drawn from
// (seed, block, round) alone, so that the run does not depend on which host thread runs the block.
const std::vector<unsigned>& BlockRunner::order(unsigned round) {
  if (launch_->schedule.schedule != Schedule::random) return order_;
  std::uint64_t state = launch_->schedule.seed;
  state = splitmix64(state) ^ block_linear_;
  state = splitmix64(state) ^ round;
  for (unsigned i = 0; i < threads_; ++i) order_[i] = i;
  for (unsigned i = threads_ - 1; i > 0; --i) {  // Fisher-Yates shuffle
    const auto j = static_cast<unsigned>(splitmix64(state) % (i + 1));
    std::swap(order_[i], order_[j]);
  }
  return order_;
}

void BlockRunner::run(const GridLaunch& launch, uint3 block_idx) {
  prepare(launch, block_idx);
  unsigned round = 0;
  while (live_ > 0 && !failure_) {   // line 2
    if (waiting_ > 0) poll_waits();  // an mbarrier phase or a named barrier may have completed
    if (ready_ == 0) {               // line 3: every unfinished thread waits
      if (auto problem = why_stuck()) {
        fail(*problem);  // line 4
        break;
      }
      release_barrier();  // line 5
    }
    const std::vector<unsigned>& this_round = order(round++);  // line 6
    // A thread that waits hands over to the next ready one of the round itself (wait()), so
    // position_ may have moved on when step() returns.
    for (position_ = 0; position_ < threads_; ++position_) {
      CudaThread& t = *pool_[this_round[position_]];
      if (t.state == State::ready) step(t);
      if (failure_) break;
    }
  }
  if (!failure_) {
    if (auto problem = block_finished()) fail(*problem);  // hopper.cpp: work still in flight
  }
  if (failure_) cancel_started_threads();
  observer::block_end();  // the block's counts join its kernel's; its hazards are checked
  SIMT_TSAN_ACQUIRE(&block_done_);
  // cp.async copies still in flight land when the block ends (after a failure they are dropped,
  // by prepare()): a thread that finished early never shows them to the threads still running.
  if (!failure_) {
    for (unsigned i = 0; i < threads_; ++i) land_async_copies(pool_[i]->async);
  }
  if (failure_) throw std::runtime_error(*failure_);
}

// Makes `t` the running CUDA thread; whoever calls it then switches to t's fiber.
void BlockRunner::start(CudaThread& t) {
  --ready_;
  t.state = State::running;
  t.started = true;
  builtin::threadIdx = t.idx;
  current = &t;
  running_ = &t;
}

// Resumes one CUDA thread; it runs until it waits or finishes, and may hand over to the next
// threads of the round (wait()). The one that comes back to the host is counted here, unless it
// counted itself.
void BlockRunner::step(CudaThread& t) {
  start(t);
  SIMT_TSAN_RELEASE(&host_token_);
  t.fiber->resume();
  current = nullptr;
  if (running_ != nullptr) account(*running_);
  running_ = nullptr;
}

// Kernel side, in __syncthreads(), a shuffle or a warp-collective instruction: `t` waits. Counts
// where it went (as step() would on the host), then continues the next ready thread of this
// round, in schedule order, straight from this fiber: one switch instead of two through the host,
// and the same order. At the end of the round, or after a failure, back to the host. Returns when
// t runs again.
void BlockRunner::wait(CudaThread& t) {
  current = nullptr;
  account(t);
  CudaThread* next = failure_ ? nullptr : next_ready();
  if (next != nullptr) {
    start(*next);
    t.fiber->switch_to(*next->fiber);
  } else {
    running_ = nullptr;  // counted already
    t.fiber->suspend();
  }
  SIMT_TSAN_ACQUIRE(&host_token_);  // t runs again
}

// The next thread of this round (after position_) that can run, or nullptr; moves position_ to it.
CudaThread* BlockRunner::next_ready() {
  while (++position_ < threads_) {
    CudaThread& t = *pool_[order_[position_]];
    if (t.state == State::ready) return &t;
  }
  return nullptr;
}

// Counts where the CUDA thread that ran last went.
void BlockRunner::account(CudaThread& t) {
  Warp& warp = warps_[t.linear / lanes_per_warp];
  switch (t.state) {
    case State::at_barrier:
      if (at_barrier_++ == 0) {
        barrier_site_ = t.site;
      } else if (!same_site(t.site, barrier_site_)) {
        ++at_other_barrier_;
      }
      break;
    case State::at_shuffle:
      if (++warp.arrived == warp.live) complete_shuffle(t.linear / lanes_per_warp);  // line 7
      break;
    case State::at_collective:  // counted in warp.at_collective by collective()
    case State::at_wait:        // counted in waiting_ by wait_until()
      break;
    case State::finished:
      --live_;
      ++finished_;
      --warp.live;
      if (t.error) {
        SIMT_TSAN_ACQUIRE(&t.error);  // the exception was made on the fiber: see its contents
        std::string what = "unknown exception";
        try {
          std::rethrow_exception(t.error);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        fail("thread " + rules::str3(t.idx) + " stopped with an error: " + what);
      } else if (warp.arrived > 0 && warp.arrived == warp.live) {
        complete_shuffle(t.linear / lanes_per_warp);  // line 7: the others were waiting for it
      }
      break;
    case State::ready:
    case State::running:
      fail("internal error: a CUDA thread returned to the scheduler without waiting or finishing");
      break;
  }
}

// line 7: every unfinished lane of `warp` waits at a shuffle; each reads its source lane's value.
void BlockRunner::complete_shuffle(unsigned warp) {
  Warp& w = warps_[warp];
  const unsigned first = warp * lanes_per_warp;
  const CudaThread* leader = nullptr;
  for (unsigned lane = 0; lane < w.size; ++lane) {
    CudaThread& t = *pool_[first + lane];
    if (t.state != State::at_shuffle) continue;
    if (leader == nullptr) leader = &t;
    if (!same_site(t.site, leader->site)) {
      return fail("the lanes of warp " + std::to_string(warp) + " wait at different shuffles: lane " +
                  std::to_string(leader->linear - first) + " at " + shuffle_name(leader->shuffle_mode) + " (" +
                  where(leader->site) + "), lane " + std::to_string(lane) + " at " + shuffle_name(t.shuffle_mode) +
                  " (" + where(t.site) +
                  "); with the full mask every "
                  "lane must call the same shuffle");
    }
    const unsigned source = t.shuffle_source;
    if (source >= w.size) {
      return fail("lane " + std::to_string(lane) + " of warp " + std::to_string(warp) + " reads lane " +
                  std::to_string(source) + " in " + shuffle_name(t.shuffle_mode) + " (" + where(t.site) +
                  "), which does not exist: the block has " + std::to_string(threads_) + " threads, so this warp has " +
                  std::to_string(w.size) + " lanes (on a GPU the value is undefined)");
    }
    const CudaThread& from = *pool_[first + source];
    if (from.state != State::at_shuffle) {
      return fail("lane " + std::to_string(lane) + " of warp " + std::to_string(warp) + " reads lane " +
                  std::to_string(source) + " in " + shuffle_name(t.shuffle_mode) + " (" + where(t.site) +
                  "), which has already finished the kernel (on a GPU the value is undefined)");
    }
    t.shuffle_result = from.shuffle_value;
  }
  for (unsigned lane = 0; lane < w.size; ++lane) {
    CudaThread& t = *pool_[first + lane];
    if (t.state == State::at_shuffle) t.state = State::ready;
  }
  ready_ += w.arrived;
  w.arrived = 0;
  observer::warp_sync(warp);  // the warp's instructions so far are complete
}

// line 4: nothing can run. Says why that is an error, or nothing when it is an ordinary barrier.
std::optional<std::string> BlockRunner::why_stuck() const {
  // A warpgroup-collective instruction (wgmma) that not all 128 threads of the warpgroup reach.
  for (unsigned g = 0; g < warpgroups_.size(); ++g) {
    if (warpgroups_[g].at_collective == 0) continue;
    return std::to_string(warpgroups_[g].at_collective) + " of the 128 threads of warpgroup " + std::to_string(g) +
           " (warps " + std::to_string(4 * g) + "-" + std::to_string(4 * g + 3) +
           ") wait at a warpgroup-collective instruction that the others do not reach: " +
           where_threads_are(4 * g * lanes_per_warp, 4 * lanes_per_warp, "thread") +
           ". All 128 threads of a warpgroup must execute the same wgmma at the same place (on a GPU this is "
           "undefined behaviour: a hang or wrong results)";
  }
  // A wait that nothing can end any more: an mbarrier phase or a named barrier that cannot complete.
  // Each distinct wait once (where, and why it cannot end), with the threads that wait there.
  if (waiting_ > 0) {
    struct Group {
      std::string place, why;
      unsigned first = 0, last = 0, count = 0;
    };
    std::vector<Group> groups;
    for (unsigned i = 0; i < threads_; ++i) {
      const CudaThread& t = *pool_[i];
      if (t.state != State::at_wait) continue;
      std::string place = std::string(t.blocking->name) + " (" + where(t.site) + ")";
      std::string why = t.blocking->describe(t.blocking->context);
      auto g =
          std::find_if(groups.begin(), groups.end(), [&](const Group& x) { return x.place == place && x.why == why; });
      if (g == groups.end()) {
        groups.push_back({std::move(place), std::move(why), i, i, 1});
      } else {
        g->last = i;
        ++g->count;
      }
    }
    std::string report = "a wait that can never end: ";
    for (std::size_t k = 0; k < groups.size(); ++k) {
      const Group& g = groups[k];
      const std::string who =
          g.count == 1 ? "thread " + std::to_string(g.first) + " waits"
          : g.last - g.first + 1 == g.count
              ? "threads " + std::to_string(g.first) + "-" + std::to_string(g.last) + " wait"
              : std::to_string(g.count) + " threads (the first " + std::to_string(g.first) + ") wait";
      report += (k > 0 ? "; " : "") + who + " at " + g.place + ": " + g.why;
    }
    return report + ". No thread of the block can run any more (" + where_threads_are(0, threads_, "thread") +
           "). On a GPU this kernel hangs";
  }
  // A warp-collective instruction that not all 32 lanes of the warp reach.
  for (unsigned w = 0; w < warps_.size(); ++w) {
    if (warps_[w].at_collective == 0) continue;
    return std::to_string(warps_[w].at_collective) + " of the 32 lanes of warp " + std::to_string(w) +
           " wait at a warp-collective instruction that the others do not reach: " + where_lanes_are(w) +
           ". All 32 lanes must execute the same mma, ldmatrix or __syncwarp "
           "(on a GPU this is undefined behaviour: a hang or wrong results)";
  }
  // A warp whose shuffle cannot complete: some of its lanes wait at a barrier instead.
  for (unsigned w = 0; w < warps_.size(); ++w) {
    if (warps_[w].arrived == 0) continue;
    const CudaThread* shuffling = nullptr;
    const CudaThread* waiting = nullptr;
    for (unsigned lane = 0; lane < warps_[w].size; ++lane) {
      const CudaThread& t = *pool_[w * lanes_per_warp + lane];
      if (t.state == State::at_shuffle && shuffling == nullptr) shuffling = &t;
      if (t.state == State::at_barrier && waiting == nullptr) waiting = &t;
    }
    const unsigned at_shuffle = warps_[w].arrived;
    if (shuffling == nullptr || waiting == nullptr) return "internal error: a warp shuffle is stuck";
    return std::to_string(at_shuffle) + " of the " + std::to_string(warps_[w].live) + " unfinished lanes of warp " +
           std::to_string(w) + " arrived at " + shuffle_name(shuffling->shuffle_mode) + " (" + where(shuffling->site) +
           "); " + std::to_string(warps_[w].live - at_shuffle) + " wait at __syncthreads() (" + where(waiting->site) +
           "). With the full mask every unfinished lane of the warp must "
           "call the same shuffle (on a GPU this is undefined behaviour)";
  }
  // Every unfinished thread waits at a barrier. It is the same barrier for all, and nobody has
  // finished the kernel: an ordinary __syncthreads().
  if (finished_ == 0 && at_other_barrier_ == 0) return std::nullopt;
  const CudaThread* first = nullptr;
  unsigned arrived = 0;
  const CudaThread* elsewhere = nullptr;
  unsigned elsewhere_count = 0;
  for (unsigned i = 0; i < threads_; ++i) {
    const CudaThread& t = *pool_[i];
    if (t.state != State::at_barrier) continue;
    if (first == nullptr) first = &t;
    if (same_site(t.site, first->site)) {
      ++arrived;
    } else {
      if (elsewhere == nullptr) elsewhere = &t;
      ++elsewhere_count;
    }
  }
  if (finished_ == 0 && elsewhere_count == 0) return std::nullopt;
  std::string report = "a __syncthreads() that not every thread of the block reaches: " + std::to_string(arrived) +
                       " of " + std::to_string(threads_) + " threads arrived at __syncthreads() (" +
                       where(first->site) + ")";
  if (finished_ > 0) {
    report += "; " + std::to_string(finished_) + " exited (returned from the kernel) without reaching it";
  }
  if (elsewhere_count > 0) {
    report +=
        "; " + std::to_string(elsewhere_count) + " wait at another __syncthreads() (" + where(elsewhere->site) + ")";
  }
  return report +
         ". Every thread of a block must reach the same __syncthreads() (on a GPU this is "
         "undefined behaviour: a hang or wrong results)";
}

// Where each lane of `warp` is, lanes in the same place grouped: "lanes 0-15 at mma_m16n8k16_bf16
// (dir/file.cuh:40); lanes 16-31 at __syncthreads() (dir/file.cuh:44)".
std::string BlockRunner::where_lanes_are(unsigned warp) const {
  return where_threads_are(warp * lanes_per_warp, warps_[warp].size, "lane");
}

// Where each of the threads first .. first + count - 1 is, numbered from 0 and grouped as above.
std::string BlockRunner::where_threads_are(unsigned first_thread, unsigned count, const char* noun) const {
  const auto place = [&](unsigned lane) -> std::string {
    const CudaThread& t = *pool_[first_thread + lane];
    switch (t.state) {
      case State::at_barrier:
        return "at __syncthreads() (" + where(t.site) + ")";
      case State::at_shuffle:
        return std::string("at ") + shuffle_name(t.shuffle_mode) + " (" + where(t.site) + ")";
      case State::at_collective:
        return std::string("at ") + t.collective->name + " (" + where(t.site) + ")";
      case State::at_wait:
        return std::string("at ") + t.blocking->name + " (" + where(t.site) + ")";
      case State::finished:
        return "exited (returned from the kernel)";
      case State::ready:
      case State::running:
        break;
    }
    return "still running";
  };
  std::string report;
  unsigned first = 0;
  std::string first_place = place(0);
  const std::string one = noun, many = one + "s";
  for (unsigned lane = 1; lane <= count; ++lane) {
    const std::string here = lane < count ? place(lane) : std::string();
    if (lane < count && here == first_place) continue;
    if (!report.empty()) report += "; ";
    report += (lane - 1 == first ? one + " " + std::to_string(first)
                                 : many + " " + std::to_string(first) + "-" + std::to_string(lane - 1)) +
              " " + first_place;
    first = lane;
    first_place = here;
  }
  return report;
}

// line 5: every thread waits at the same barrier; all continue.
void BlockRunner::release_barrier() {
  for (unsigned i = 0; i < threads_; ++i) {
    CudaThread& t = *pool_[i];
    if (t.state == State::at_barrier) t.state = State::ready;
  }
  ready_ = at_barrier_;
  at_barrier_ = 0;
  at_other_barrier_ = 0;
  observer::block_sync();  // every warp's instructions so far are complete
}

// After a failure: unwind every thread that is in the middle of the kernel (it throws Cancelled
// from its __syncthreads() or shuffle), so that each fiber is idle again and can be reused.
void BlockRunner::cancel_started_threads() {
  for (unsigned i = 0; i < threads_; ++i) {
    CudaThread& t = *pool_[i];
    if (!t.started || t.state == State::finished) continue;
    t.cancel = true;
    builtin::threadIdx = t.idx;
    current = &t;
    SIMT_TSAN_RELEASE(&host_token_);
    t.fiber->resume();
    current = nullptr;
  }
}

void BlockRunner::fail(std::string what) {
  if (!failure_) failure_ = "simt: kernel " + std::string(launch_->kernel_name) + ", " + block_name() + ": " + what;
}

std::string BlockRunner::block_name() const {
  return "block " + rules::str3(block_idx_) + " of grid " + rules::str3(launch_->grid);
}

// Kernel side (runs on the fiber of `t`): wait at __syncthreads() until the host releases the block.
void BlockRunner::barrier(CudaThread& t, const std::source_location& site) {
  if (t.cancel) throw Cancelled{};
  t.site = site;
  t.state = State::at_barrier;
  SIMT_TSAN_RELEASE(&barrier_token_[t.barriers % 2]);
  wait(t);
  if (t.cancel) throw Cancelled{};
  SIMT_TSAN_ACQUIRE(&barrier_token_[t.barriers % 2]);
  ++t.barriers;
}

// Kernel side: leave this lane's value, wait until the whole warp has, read the source lane's.
std::uint64_t BlockRunner::shuffle(CudaThread& t, ShuffleMode mode, std::uint64_t bits, unsigned source,
                                   const std::source_location& site) {
  if (t.cancel) throw Cancelled{};
  t.site = site;
  t.shuffle_mode = mode;
  t.shuffle_value = bits;
  t.shuffle_source = source;
  t.state = State::at_shuffle;
  wait(t);
  if (t.cancel) throw Cancelled{};
  return t.shuffle_result;
}

// Kernel side: a warp-collective instruction (lanes = 32) or a warpgroup-collective one (lanes = 128,
// the 4 warps 4i .. 4i + 3; warp_collective.h). The threads wait; the last one to arrive checks that
// all are at the same instruction and place, completes it, and readies them.
void BlockRunner::collective(CudaThread& t, const WarpCollective& op, const std::source_location& site,
                             unsigned lanes) {
  if (t.cancel) throw Cancelled{};
  const bool warpgroup = lanes != lanes_per_warp;
  if (threads_ % lanes_per_warp != 0) {
    throw std::invalid_argument(std::string(op.name) + " (" + where(site) + ") in a block of " +
                                std::to_string(threads_) + " threads: " + (warpgroup ? "warpgroup" : "warp") +
                                "-collective instructions "
                                "need whole warps, so the block size must be a multiple of 32 (on a GPU "
                                "the missing lanes make the result undefined)");
  }
  const unsigned warp_index = t.linear / lanes_per_warp;
  const unsigned group_index = t.linear / lanes;
  if (warpgroup && (group_index + 1) * lanes > threads_) {
    throw std::invalid_argument(std::string(op.name) + " (" + where(site) + ") in warpgroup " +
                                std::to_string(group_index) + " of a block of " + std::to_string(threads_) +
                                " threads: that warpgroup has only " +
                                std::to_string((threads_ - group_index * lanes) / lanes_per_warp) +
                                " warps; a warpgroup is 4 whole warps (warps 4i to 4i + 3), so the block size must "
                                "be a multiple of 128 where every warp may execute a wgmma");
  }
  unsigned& at_collective = warpgroup ? warpgroups_[group_index].at_collective : warps_[warp_index].at_collective;
  unsigned& collectives = warpgroup ? warpgroups_[group_index].collectives : warps_[warp_index].collectives;
  char* token = warpgroup ? &warpgroups_[group_index].collective_token[collectives % 2]
                          : &warps_[warp_index].collective_token[collectives % 2];
  t.site = site;
  t.collective = &op;
  t.collective_lanes = lanes;
  SIMT_TSAN_RELEASE(token);
  if (++at_collective < lanes) {
    t.state = State::at_collective;
    wait(t);
    if (t.cancel) throw Cancelled{};
    SIMT_TSAN_ACQUIRE(token);
    return;
  }
  // The last thread: all wait at a collective. The same one? (Gather the operands on the way.)
  const unsigned first = group_index * lanes;
  void* operands[4 * lanes_per_warp];
  bool same = true;
  for (unsigned lane = 0; lane < lanes && same; ++lane) {
    const CudaThread& other = *pool_[first + lane];
    operands[lane] = other.collective->operands;
    if (&other == &t) continue;
    same = other.collective->name == op.name && same_site(other.site, site);
  }
  if (!same) {
    t.state = State::at_collective;  // so that the report shows this lane where it is
    if (warpgroup) {
      fail("the threads of warpgroup " + std::to_string(group_index) +
           " wait at different warpgroup-collective instructions: " + where_threads_are(first, lanes, "thread") +
           ". All 128 threads must execute the same one at the same place (on a GPU this is undefined "
           "behaviour)");
    } else {
      fail("the lanes of warp " + std::to_string(warp_index) +
           " wait at different warp-collective instructions: " + where_lanes_are(warp_index) +
           ". All 32 lanes must execute the same one at the same place (on a GPU this is undefined "
           "behaviour)");
    }
    t.fiber->suspend();  // the scheduler cancels the block
    throw Cancelled{};
  }
  SIMT_TSAN_ACQUIRE(token);
  if (op.complete != nullptr) op.complete(operands);
  SIMT_TSAN_RELEASE(token);
  ++collectives;
  at_collective = 0;
  for (unsigned w = first / lanes_per_warp; w < (first + lanes) / lanes_per_warp; ++w) {
    observer::warp_sync(w);  // the warp's instructions so far are complete
  }
  for (unsigned lane = 0; lane < lanes; ++lane) {
    CudaThread& other = *pool_[first + lane];
    if (&other != &t) other.state = State::ready;
  }
  ready_ += lanes - 1;
}

// Kernel side: wait until condition.done() (an mbarrier phase, a named barrier). The scheduler asks
// again at the start of every round (poll_waits); a wait that nothing can end is reported by
// why_stuck() with condition.describe().
void BlockRunner::wait_until(CudaThread& t, const BlockingWait& condition, const std::source_location& site) {
  if (t.cancel) throw Cancelled{};
  if (condition.done(condition.context)) return;
  t.site = site;
  t.blocking = &condition;
  t.state = State::at_wait;
  ++waiting_;
  wait(t);
  if (t.cancel) throw Cancelled{};
}

// Start of a round: every thread whose wait has ended is ready again.
void BlockRunner::poll_waits() {
  for (unsigned i = 0; i < threads_ && waiting_ > 0; ++i) {
    CudaThread& t = *pool_[i];
    if (t.state != State::at_wait || !t.blocking->done(t.blocking->context)) continue;
    t.state = State::ready;
    t.blocking = nullptr;
    --waiting_;
    ++ready_;
  }
}

// The body of every fiber: the kernel, for one CUDA thread of one block.
void thread_body(void* arg) {
  CudaThread& t = *static_cast<CudaThread*>(arg);
  SIMT_TSAN_ACQUIRE(t.runner->host_token());
  try {
    const GridLaunch& launch = t.runner->launch();
    launch.invoke(launch.params);
  } catch (const Cancelled&) {
    // the block failed elsewhere; this thread's stack is unwound, nothing to report
  } catch (...) {
    t.error = std::current_exception();
    SIMT_TSAN_RELEASE(&t.error);
  }
  t.state = State::finished;
  SIMT_TSAN_RELEASE(t.runner->block_done_token());
}

CudaThread& current_thread(const char* what) {
  if (current == nullptr) {
    throw std::logic_error(std::string(what) + " called outside a kernel: only code run by simt::launch may call it");
  }
  return *current;
}

}  // namespace

// "dir/file.cuh:42": the last two parts of the path are enough to find the line.
std::string where(const std::source_location& site) {
  const std::string_view path = site.file_name();
  std::size_t cut = path.rfind('/');
  if (cut != std::string_view::npos && cut > 0) cut = path.rfind('/', cut - 1);
  const std::string_view shown = cut == std::string_view::npos ? path : path.substr(cut + 1);
  return std::string(shown) + ":" + std::to_string(site.line());
}

void run_block(const GridLaunch& launch, uint3 block_idx) { this_thread_runner.run(launch, block_idx); }

bool in_kernel() { return current != nullptr; }

void syncthreads(const std::source_location& site) {
  CudaThread& t = current_thread("__syncthreads()");
  t.runner->barrier(t, site);
}

void warp_collective(const WarpCollective& op, const std::source_location& site) {
  CudaThread& t = current_thread(op.name);
  t.runner->collective(t, op, site, lanes_per_warp);
}

void warpgroup_collective(const WarpCollective& op, const std::source_location& site) {
  CudaThread& t = current_thread(op.name);
  t.runner->collective(t, op, site, 4 * lanes_per_warp);
}

void wait_until(const BlockingWait& condition, const std::source_location& site) {
  CudaThread& t = current_thread(condition.name);
  t.runner->wait_until(t, condition, site);
}

std::uint64_t current_block_serial() { return block_serial; }
unsigned current_block_threads() { return builtin::blockDim.x * builtin::blockDim.y * builtin::blockDim.z; }

AsyncCopies& current_async_copies(const char* what) { return current_thread(what).async; }

unsigned current_lane() { return current_thread("the lane index").linear % lanes_per_warp; }
unsigned current_warp() { return current_thread("the warp index").linear / lanes_per_warp; }

std::uint64_t shuffle(ShuffleMode mode, unsigned mask, std::uint64_t bits, int operand, int width,
                      const std::source_location& site) {
  CudaThread& t = current_thread(shuffle_name(mode));
  if (mask != full_mask) {
    throw std::invalid_argument(std::string(shuffle_name(mode)) + " (" + where(site) + "): mask " +
                                std::to_string(mask) + " is not supported on the CPU; use the full mask 0xffffffff");
  }
  if (width < 1 || width > 32 || (width & (width - 1)) != 0) {
    throw std::invalid_argument(std::string(shuffle_name(mode)) + " (" + where(site) + "): width " +
                                std::to_string(width) + "; accepted: 1, 2, 4, 8, 16 or 32");
  }
  // Which lane this one reads: PTX ISA, shfl.sync. Lanes form segments of `width`; a read that
  // would leave the segment (up, down) or go past its end (bfly) returns this lane's own value.
  const int lane = static_cast<int>(t.linear % lanes_per_warp);
  const int first = lane & ~(width - 1);
  const int last = first + width - 1;
  const int b = operand & 31;
  int source = lane;
  switch (mode) {
    case ShuffleMode::idx:
      source = first + (operand & (width - 1));
      break;
    case ShuffleMode::up:
      source = lane - b >= first ? lane - b : lane;
      break;
    case ShuffleMode::down:
      source = lane + b <= last ? lane + b : lane;
      break;
    case ShuffleMode::bfly:
      source = (lane ^ b) <= last ? (lane ^ b) : lane;
      break;
  }
  return t.runner->shuffle(t, mode, bits, static_cast<unsigned>(source), site);
}

}  // namespace detail
}  // namespace cpu
}  // namespace simt
