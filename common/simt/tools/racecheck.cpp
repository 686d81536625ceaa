// The race checker (racecheck.h, racecheck_recorder.h).
//
// This file is never instrumented itself. How the accesses of a profiled kernel copy become hazards:
//   1. every access of a CUDA thread to shared or global memory (observer.cpp's hooks, ldmatrix,
//      cp.async, atomicAdd) arrives here with the thread, the site and the address; the block's
//      state gives the rest: the barrier interval (__syncthreads() passed), the thread's warp and
//      the warp's epoch (warp-collective operations completed), the thread's position (its
//      accesses since the barrier)
//   2. each 4-byte word the access touches keeps, for the current barrier interval, one entry per
//      (site, operation, bytes of the word): the two smallest warps that made it, the smallest
//      thread of each, the smallest position, and while one warp alone made it, the two smallest
//      threads of that warp's latest epoch. None of that depends on the order the accesses came in.
//   3. two lanes of one warp in the same epoch race if their entries can race (not two reads, not
//      two atomics) and share a byte: checked as each access arrives, against the entries already
//      there (a warp's epochs only grow, so its lanes' earlier epochs are done)
//   4. at the end of the interval (the next __syncthreads() or the end of the block), two entries
//      of a word that can race, share a byte and hold two different warps race between warps
//   5. a cp.async's shared write is an entry of the interval it is issued in, and also a slot on its
//      words that stays open until a barrier after its wait_group: an access of a later interval,
//      or of the same warp after a later warp synchronisation, races with it unless the slot is
//      closed for it
//   6. global memory: the same per block, and, for the whole launch, per word the (site,
//      operation, bytes) entries with the two smallest blocks each; at the end of the launch two
//      entries that can race, share a byte and hold two different blocks race between blocks
//   7. uninitialised reads, decided where every write that could matter is known, so that the
//      order of the threads does not change the verdict: a read of a shared byte that no earlier
//      barrier interval of the block wrote, and that no other thread (and the reading thread not
//      before the read) writes in the read's own interval, at the end of the interval; a read of a
//      DeviceBuffer byte that nothing had written when the launch began (memory_map.h's bits) and
//      that no other thread of the launch (and the reading thread not before the read) writes
//      with a plain store, at the end of the launch. An atomicAdd on unwritten memory reads it:
//      atomics initialise nothing until their launch (or interval) is over.
// Each hazard joins its kernel's findings under (kind, the two sites and operations); its count
// grows by one per word, interval and block (launch, between blocks), and it keeps the smallest
// example (block, interval, offset, threads), so that the report is the same on every run.
#include "common/simt/tools/racecheck.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common/simt/tools/detail/memory_map.h"
#include "common/simt/tools/detail/observer.h"
#include "common/simt/tools/detail/racecheck_async.h"
#include "common/simt/tools/detail/racecheck_findings.h"
#include "common/simt/tools/detail/racecheck_recorder.h"
#include "common/simt/tools/detail/sites.h"

namespace simt::racecheck {
namespace detail {
namespace {

struct Results {
  std::mutex mutex;
  std::vector<std::string> order;  // kernels in the order of their first checked launch
  std::map<std::string, Records> kernels;
  std::uint64_t launches = 0;
  std::uint64_t unchecked_launches = 0;
  std::vector<std::string> unchecked_kernels;
};

Results& results() {
  static Results r;
  return r;
}

using sites::display_name;

void merge_into_results(const std::string& kernel, const Records& records) {
  if (records.empty()) return;
  Results& r = results();
  std::scoped_lock lock(r.mutex);
  Records& mine = r.kernels[kernel];
  for (const auto& [key, record] : records) mine[key].add(record);
}

// The kind of a hazard between two racing accesses, and which comes first: for a read and a write,
// the one earlier in its own thread since the barrier (ties: the write, read-after-write); for two
// writes, the smaller site first.
HazardKey hazard_key(Space space, bool warning, const SiteOp& a, std::uint32_t a_position, const SiteOp& b,
                     std::uint32_t b_position) {
  if (is_write(a.op) && is_write(b.op)) {
    return {Kind::write_after_write, space, warning, std::min(a, b), std::max(a, b)};
  }
  const bool a_writes = is_write(a.op);
  const SiteOp& w = a_writes ? a : b;
  const SiteOp& r = a_writes ? b : a;
  const std::uint32_t w_position = a_writes ? a_position : b_position;
  const std::uint32_t r_position = a_writes ? b_position : a_position;
  if (w_position <= r_position) return {Kind::read_after_write, space, warning, w, r};
  return {Kind::write_after_read, space, warning, r, w};
}

// ---- Per word: the entries of one barrier interval (steps 2-4) --------------------------------

struct Entry {
  std::uintptr_t site = 0;
  std::uint32_t position = 0;                // the smallest
  std::uint32_t epoch = 0;                   // while warp[1] == kNone: the latest epoch of warp[0] seen here
  std::uint16_t warp[2] = {kNone, kNone};    // the two smallest warps
  std::uint16_t thread[2] = {kNone, kNone};  // the smallest thread of warp[0], of warp[1]
  std::uint16_t lane[2] = {kNone, kNone};    // while single-warp: the two smallest threads at `epoch`
  std::uint16_t thread_max = 0;              // the largest thread (with thread[0]: one thread or several)
  Operation op = Operation::read;
  std::uint8_t mask = 0;  // bytes of the word
  std::uint8_t bytes = 0;
  SiteOp site_op() const { return {site, op, bytes}; }
  bool only_thread(std::uint16_t t) const { return warp[1] == kNone && thread[0] == t && thread_max == t; }
};

// A read that may be of unwritten memory (step 7): its site, its thread (the smallest, where
// several threads' reads were joined), the bytes of the word, the earliest position.
struct Candidate {
  std::uintptr_t site;
  std::uint64_t block;  // for global memory (the smallest block)
  std::uint32_t position;
  std::uint16_t thread;
  Operation op;
  std::uint8_t mask, bytes;
  SiteOp site_op() const { return {site, op, bytes}; }
};

// Adds a read to a word's candidates: one per site, operation and bytes, with the smallest
// (block, thread) and position.
void add_candidate(std::vector<Candidate>& list, const Candidate& c) {
  for (Candidate& mine : list) {
    if (mine.site == c.site && mine.op == c.op && mine.mask == c.mask) {
      if (std::tie(c.block, c.thread) < std::tie(mine.block, mine.thread)) {
        mine.block = c.block;
        mine.thread = c.thread;
      }
      mine.position = std::min(mine.position, c.position);
      return;
    }
  }
  list.push_back(c);
}

// Two entries of a word (a <= b) whose accesses race between two lanes of one warp, and the
// smallest pair of threads found doing so.
struct IntraPair {
  std::uint16_t a, b;
  std::uint16_t t1, t2;
};

// The newest cp.async to a shared word (step 5).
struct AsyncSlot {
  std::uint32_t block_stamp = 0;  // valid while equal to the block's stamp
  std::uint16_t issuer = kNone;   // the thread; kNone: no copy open here
  bool landed = false;
  std::uintptr_t site = 0;
  std::uint32_t issue_interval = 0, issue_epoch = 0, issue_position = 0;
  std::uint32_t land_interval = 0, land_epoch = 0;
};

// What a word holds besides its first entry, made the first time a word needs it.
struct WordExtra {
  std::vector<Entry> more;            // entries after the first
  std::vector<IntraPair> intra;       // races between lanes found in this interval
  std::vector<Candidate> candidates;  // shared memory: reads that may be of unwritten bytes
};

// One 4-byte word: the first entry inline, so that the common word (one site touches it in an
// interval) is one cache line.
struct Word {
  std::uint32_t stamp = 0;        // the interval the entries, `intra` and `candidates` belong to
  std::uint32_t block_stamp = 0;  // the block `written` belongs to
  std::uint8_t written = 0;       // shared memory: the bytes earlier intervals of this block wrote
  bool extras = false;            // `intra` or `candidates` may hold something of this interval
  std::uint16_t count = 0;        // entries of this interval
  Entry first;
  std::unique_ptr<WordExtra> extra;

  std::size_t size() const { return count; }
  Entry& entry(std::size_t i) { return i == 0 ? first : extra->more[i - 1]; }
  const Entry& entry(std::size_t i) const { return i == 0 ? first : extra->more[i - 1]; }
  WordExtra& more() {
    if (!extra) extra = std::make_unique<WordExtra>();
    return *extra;
  }
  void push(const Entry& e) {
    if (count++ == 0) {
      first = e;
    } else {
      if (count == 2) more().more.clear();
      extra->more.push_back(e);
    }
  }
  // A new interval: no entries, nothing found.
  void reset(std::uint32_t new_stamp) {
    stamp = new_stamp;
    count = 0;
    if (extras) {
      extra->intra.clear();
      extra->candidates.clear();
      extras = false;
    }
  }
};

// A global word of the block: its interval entries, and what the whole block did to it (for the
// launch: one line per site, operation and bytes, with the smallest thread and position).
struct Summary {
  std::uintptr_t site;
  std::uint32_t position;
  std::uint16_t thread, thread_max;
  Operation op;
  std::uint8_t mask, bytes;
};
struct GlobalWord {
  Word word;
  std::vector<Summary> summary;
  std::vector<Candidate> candidates;  // reads of bytes unwritten when they were made
  const memory::Allocation* allocation = nullptr;
  std::uint64_t index = 0;  // the word's index in its allocation
};

// The global words one block touches: an open-addressing table from (allocation, word) to a pool of
// GlobalWord that keeps its memory from block to block (so that a block allocates nothing once the
// pool has grown to its size).
class GlobalWords {
 public:
  void clear() {
    for (std::uint32_t slot : used_slots_) slots_[slot] = kEmpty;
    used_slots_.clear();
    used_ = 0;
  }
  // The word `index` of allocation `a`, made (empty) the first time in this block.
  GlobalWord& get(const memory::Allocation& a, std::uint64_t index) {
    if (2 * (used_ + 1) > slots_.size()) grow();
    const std::uint64_t key = (a.id << 40) ^ index;
    std::size_t slot = hash(key) & (slots_.size() - 1);
    while (slots_[slot] != kEmpty) {
      GlobalWord& g = pool_[slots_[slot]];
      if (g.allocation->id == a.id && g.index == index) return g;
      slot = (slot + 1) & (slots_.size() - 1);
    }
    if (used_ == pool_.size()) pool_.emplace_back();
    GlobalWord& g = pool_[used_];
    g.word.reset(0);
    g.summary.clear();
    g.candidates.clear();
    g.allocation = &a;
    g.index = index;
    slots_[slot] = static_cast<std::uint32_t>(used_++);
    used_slots_.push_back(static_cast<std::uint32_t>(slot));
    return g;
  }
  // The words of this block, in the order they were first touched.
  auto begin() const { return pool_.begin(); }
  auto end() const { return pool_.begin() + static_cast<std::ptrdiff_t>(used_); }

 private:
  static constexpr std::uint32_t kEmpty = ~std::uint32_t{0};
  static std::size_t hash(std::uint64_t key) {
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;  // MurmurHash3's 64-bit finaliser
    key ^= key >> 33;
    return static_cast<std::size_t>(key);
  }
  void grow() {
    // Twice the slots, and every word of the block placed again (pool entries do not move).
    std::vector<std::uint32_t> old_used;
    old_used.swap(used_slots_);
    const std::vector<std::uint32_t> old_slots = slots_;
    slots_.assign(std::max<std::size_t>(1024, 2 * slots_.size()), kEmpty);
    for (std::uint32_t slot : old_used) {
      const std::uint32_t i = old_slots[slot];
      const GlobalWord& g = pool_[i];
      std::size_t s = hash((g.allocation->id << 40) ^ g.index) & (slots_.size() - 1);
      while (slots_[s] != kEmpty) s = (s + 1) & (slots_.size() - 1);
      slots_[s] = i;
      used_slots_.push_back(static_cast<std::uint32_t>(s));
    }
  }

  std::vector<std::uint32_t> slots_;       // pool index, or kEmpty
  std::vector<std::uint32_t> used_slots_;  // the slots in use, to clear them
  std::deque<GlobalWord> pool_;            // a deque: words keep their address as the pool grows
  std::size_t used_ = 0;
};

// ---- The launch: global words between blocks (step 6) ------------------------------------------

struct LaunchEntry {
  std::uintptr_t site;
  std::uint64_t block[2];    // the two smallest blocks (kNoBlock: none)
  std::uint16_t thread[2];   // the smallest thread of each
  std::uint16_t thread_max;  // the largest thread of block[0]
  std::uint32_t position;
  Operation op;
  std::uint8_t mask, bytes;
  SiteOp site_op() const { return {site, op, bytes}; }
  // A thread other than `thread` of `block` made this access.
  bool other_than(std::uint64_t b, std::uint16_t t) const {
    return block[0] != b || block[1] != kNoBlock || thread[0] != t || thread_max != t;
  }
};

struct LaunchWord {
  LaunchEntry first{};
  bool used = false;
  std::uint32_t more = 0;  // 1 + index into AllocationShadow::more, or 0
  std::vector<Candidate> candidates;
};

struct AllocationShadow {
  std::uint64_t id = 0, bytes = 0, element_bytes = 1;
  std::shared_ptr<memory::WrittenBits> written;
  std::vector<LaunchWord> words;
  std::vector<std::vector<LaunchEntry>> more;  // the entries after the first, for the few words with several
};

// The kernel argument that points into each buffer of a launch (the first, where several do).
using Arguments = std::vector<std::pair<std::uint64_t, int>>;  // (allocation id, argument)

int argument_of(const Arguments& arguments, std::uint64_t id) {
  for (const auto& [buffer, argument] : arguments) {
    if (buffer == id) return argument;
  }
  return -1;
}

struct Launch {
  std::mutex mutex;
  std::string kernel;
  bool checked = false;
  observer::BlockPlace grid{1, 1, 1};
  Arguments arguments;
  std::unordered_map<std::uint64_t, AllocationShadow> allocations;  // by id
};

Launch& launch() {
  static Launch l;
  return l;
}

void add_block(LaunchEntry& e, std::uint64_t block, std::uint16_t thread, std::uint16_t thread_max,
               std::uint32_t position) {
  e.position = std::min(e.position, position);
  if (block == e.block[0]) {
    e.thread[0] = std::min(e.thread[0], thread);
    e.thread_max = std::max(e.thread_max, thread_max);
  } else if (block == e.block[1]) {
    e.thread[1] = std::min(e.thread[1], thread);
  } else if (block < e.block[0]) {
    e.block[1] = e.block[0];
    e.thread[1] = e.thread[0];
    e.block[0] = block;
    e.thread[0] = thread;
    e.thread_max = thread_max;
  } else if (block < e.block[1]) {
    e.block[1] = block;
    e.thread[1] = thread;
  }
}

AllocationShadow& shadow_of(Launch& l, const memory::Allocation& a) {
  AllocationShadow& shadow = l.allocations[a.id];
  if (shadow.words.empty()) {
    shadow.id = a.id;
    shadow.bytes = a.bytes();
    shadow.element_bytes = a.element_bytes;
    shadow.written = a.written;
    shadow.words.resize((a.bytes() + kWordBytes - 1) / kWordBytes);
  }
  return shadow;
}

// Under the launch's mutex: what block `block` did to word `index` of `a`.
void merge_summary(Launch& l, const memory::Allocation& a, std::uint64_t index, const Summary& s, std::uint64_t block) {
  AllocationShadow& shadow = shadow_of(l, a);
  LaunchWord& w = shadow.words[index];
  const LaunchEntry fresh{s.site, {block, kNoBlock}, {s.thread, kNone}, s.thread_max, s.position, s.op, s.mask,
                          s.bytes};
  if (!w.used) {
    w.first = fresh;
    w.used = true;
    return;
  }
  const auto same = [&](const LaunchEntry& e) { return e.site == s.site && e.op == s.op && e.mask == s.mask; };
  if (same(w.first)) return add_block(w.first, block, s.thread, s.thread_max, s.position);
  if (w.more == 0) {
    shadow.more.emplace_back();
    w.more = static_cast<std::uint32_t>(shadow.more.size());
  }
  std::vector<LaunchEntry>& more = shadow.more[w.more - 1];
  for (LaunchEntry& e : more) {
    if (same(e)) return add_block(e, block, s.thread, s.thread_max, s.position);
  }
  more.push_back(fresh);
}

// Step 6, at the end of the launch: the races between blocks.
void check_between_blocks(Launch& l, Records& out) {
  std::vector<const LaunchEntry*> entries;
  for (const auto& [id, shadow] : l.allocations) {
    for (std::size_t index = 0; index < shadow.words.size(); ++index) {
      const LaunchWord& w = shadow.words[index];
      if (!w.used) continue;
      entries.clear();
      entries.push_back(&w.first);
      if (w.more != 0) {
        for (const LaunchEntry& e : shadow.more[w.more - 1]) entries.push_back(&e);
      }
      for (std::size_t i = 0; i < entries.size(); ++i) {
        for (std::size_t j = i; j < entries.size(); ++j) {
          const LaunchEntry& a = *entries[i];
          const LaunchEntry& b = *entries[j];
          const std::uint8_t shared_bytes = a.mask & b.mask;
          if (!can_race(a.op, b.op) || shared_bytes == 0) continue;
          // The smallest pair of different blocks, one from each entry.
          // The smallest pair of different blocks, one from each entry (block_a from a, block_b from b).
          bool found = false;
          std::uint64_t lowest[2] = {0, 0}, block_a = 0, block_b = 0;
          std::uint16_t thread_a = 0, thread_b = 0;
          for (int x = 0; x < 2; ++x) {
            for (int y = 0; y < 2; ++y) {
              if (i == j && x >= y) continue;
              const std::uint64_t ba = a.block[x], bb = b.block[y];
              if (ba == kNoBlock || bb == kNoBlock || ba == bb) continue;
              const std::uint64_t lo = std::min(ba, bb), hi = std::max(ba, bb);
              if (!found || std::tie(lo, hi) < std::tie(lowest[0], lowest[1])) {
                found = true;
                lowest[0] = lo;
                lowest[1] = hi;
                block_a = ba;
                block_b = bb;
                thread_a = a.thread[x];
                thread_b = b.thread[y];
              }
            }
          }
          if (!found) continue;
          const HazardKey key = hazard_key(Space::global, false, a.site_op(), a.position, b.site_op(), b.position);
          if (!(key.first == a.site_op()) || (i == j && block_b < block_a)) {  // the first access's block first
            std::swap(block_a, block_b);
            std::swap(thread_a, thread_b);
          }
          Example e;
          e.who = Who::blocks;
          e.block = block_a;
          e.other_block = block_b;
          e.offset = index * kWordBytes + static_cast<unsigned>(__builtin_ctz(shared_bytes));
          e.thread_a = thread_a;
          e.thread_b = thread_b;
          e.argument = argument_of(l.arguments, shadow.id);
          e.buffer_bytes = shadow.bytes;
          e.element_bytes = shadow.element_bytes;
          e.grid = l.grid;
          out[key].add(1, e);
        }
      }
      // Step 7: a read of a byte unwritten when the launch began stays uninitialised unless another
      // thread of the launch writes the byte with a plain store (then the race rules speak).
      for (const Candidate& c : w.candidates) {
        const bool written = std::any_of(entries.begin(), entries.end(), [&](const LaunchEntry* e) {
          return e->op == Operation::write && (e->mask & c.mask) != 0 && e->other_than(c.block, c.thread);
        });
        if (written) continue;
        Example e;
        e.who = Who::uninitialised;
        e.block = c.block;
        e.offset = index * kWordBytes + static_cast<unsigned>(__builtin_ctz(c.mask));
        e.thread_a = e.thread_b = c.thread;
        e.argument = argument_of(l.arguments, shadow.id);
        e.buffer_bytes = shadow.bytes;
        e.element_bytes = shadow.element_bytes;
        e.grid = l.grid;
        out[HazardKey{Kind::uninitialised_read, Space::global, false, c.site_op(), SiteOp{}}].add(1, e);
      }
      // The launch is over: what its atomics wrote is written now.
      if (shadow.written) {
        for (const LaunchEntry* e : entries) {
          if (e->op != Operation::atomic) continue;
          for (unsigned b = 0; b < kWordBytes; ++b) {
            if ((e->mask >> b) & 1u) shadow.written->mark(index * kWordBytes + b, 1, true);
          }
        }
      }
    }
  }
}

// ---- The block being checked on this host thread -----------------------------------------------

// Where an access lands.
struct Target {
  Space space = Space::shared;
  bool static_shared = false;
  std::uint64_t offset = 0;  // in the block's dynamic shared memory, in the thread-local block, or in the buffer
  const memory::Allocation* allocation = nullptr;
};

// One access, as step 1 sees it.
struct Actor {
  std::uint16_t thread;
  std::uint16_t warp;
  std::uint32_t epoch;
  std::uint32_t position;
  Operation op;
  std::uintptr_t site;
  std::uint8_t bytes;
  SiteOp site_op() const { return {site, op, bytes}; }
};

std::uint32_t next_stamp() {
  thread_local std::uint32_t serial = 0;
  return ++serial;
}

class BlockChecker {
 public:
  void begin(std::string_view kernel, observer::BlockPlace grid, std::uint64_t block_linear, const std::byte* shared,
             std::size_t shared_bytes, unsigned threads) {
    kernel_ = display_name(kernel);
    grid_ = grid;
    block_ = block_linear;
    threads_ = threads;
    shared_begin_ = reinterpret_cast<std::uintptr_t>(shared);
    shared_end_ = shared_begin_ + shared_bytes;
    tls_ = memory::program_thread_local_storage();
    allocations_ = memory::allocations();
    last_allocation_ = nullptr;
    free_page_ = kNoPage;
    {
      Launch& l = launch();
      std::scoped_lock lock(l.mutex);
      arguments_ = l.arguments;
    }
    interval_ = 0;
    block_stamp_ = next_stamp();
    stamp_ = next_stamp();
    positions_.assign(threads, 0);
    epochs_.assign((threads + kWarpLanes - 1) / kWarpLanes, 0);
    if (dynamic_.size() < (shared_bytes + kWordBytes - 1) / kWordBytes) {
      dynamic_.resize((shared_bytes + kWordBytes - 1) / kWordBytes);
    }
    global_.clear();
    touched_.clear();
    records_.clear();
    async_used_ = false;
    Example base;
    base.block = block_;
    base.grid = grid_;
    async_order_.begin(threads, shared_bytes, base);
  }

  void warp_sync(unsigned warp) {
    if (warp < epochs_.size()) ++epochs_[warp];
  }

  void block_sync() {
    async_order_.block_sync();
    end_interval();
    ++interval_;
    stamp_ = next_stamp();
    std::fill(positions_.begin(), positions_.end(), 0);
  }

  void end() {
    end_interval();
    {
      Launch& l = launch();
      std::scoped_lock lock(l.mutex);
      for (const GlobalWord& g : global_) {
        for (const Summary& s : g.summary) merge_summary(l, *g.allocation, g.index, s, block_);
        if (!g.candidates.empty()) {
          LaunchWord& w = shadow_of(l, *g.allocation).words[g.index];
          for (const Candidate& c : g.candidates) add_candidate(w.candidates, c);
        }
      }
    }
    merge_into_results(kernel_, records_);
    records_.clear();
    global_.clear();
  }

  void access(unsigned thread, std::uintptr_t site, std::uintptr_t a, std::uint32_t bytes, Operation op) {
    if (thread >= threads_ || bytes == 0) return;
    Target target;
    if (!classify(a, bytes, target)) return;
    const auto warp = static_cast<std::uint16_t>(thread / kWarpLanes);
    const Actor x{static_cast<std::uint16_t>(thread),
                  warp,
                  epochs_[warp],
                  positions_[thread]++,
                  op,
                  site,
                  static_cast<std::uint8_t>(std::min<std::uint32_t>(bytes, 255))};
    const std::uint64_t first = target.offset / kWordBytes;
    const std::uint64_t last = (target.offset + bytes - 1) / kWordBytes;
    const bool reads_memory = is_read(op) || op == Operation::atomic;
    if (target.space == Space::shared) {
      if (!target.static_shared) async_order_.generic(thread, site, target.offset, bytes, is_write(op), records_);
      for (std::uint64_t w = first; w <= last; ++w) {
        const std::uint8_t mask = word_mask(target.offset, bytes, w);
        Word& word = shared_word(target.static_shared, w);
        if (word.block_stamp != block_stamp_) {
          word.block_stamp = block_stamp_;
          word.written = 0;
        }
        if (async_used_) check_async_slot(async_slot(target.static_shared, w), x, mask, target, w);
        add_to_interval(word, x, mask, Location{&word, nullptr, target.static_shared, w});
        if (reads_memory) {
          // Step 7: bytes neither an earlier interval nor a store of this one (so far) wrote.
          std::uint8_t covered = word.written;
          for (std::size_t i = 0; i < word.size() && (mask & ~covered) != 0; ++i) {
            const Entry& e = word.entry(i);
            if (e.op == Operation::write || e.op == Operation::cp_async_write) covered |= e.mask;
          }
          const std::uint8_t unwritten = mask & static_cast<std::uint8_t>(~covered);
          if (unwritten != 0) {
            add_candidate(word.more().candidates, {x.site, block_, x.position, x.thread, op, unwritten, x.bytes});
            word.extras = true;
          }
        }
      }
      return;
    }
    // Global memory: the written bits (step 7), then the block's interval and summary.
    const std::shared_ptr<memory::WrittenBits>& bits = target.allocation->written;
    const bool unwritten_bytes = bits && reads_memory && !bits->all_written(target.offset, bytes);
    for (std::uint64_t w = first; w <= last; ++w) {
      const std::uint8_t mask = word_mask(target.offset, bytes, w);
      GlobalWord& g = global_word(*target.allocation, w);
      if (unwritten_bytes) {
        std::uint8_t unwritten = 0;
        for (unsigned b = 0; b < kWordBytes; ++b) {
          if (((mask >> b) & 1u) != 0 && !bits->all_written(w * kWordBytes + b, 1)) {
            unwritten = static_cast<std::uint8_t>(unwritten | (1u << b));
          }
        }
        if (unwritten != 0) add_candidate(g.candidates, {x.site, block_, x.position, x.thread, op, unwritten, x.bytes});
      }
      add_to_interval(g.word, x, mask, Location{&g.word, &g, false, w});
      add_to_summary(g, x, mask);
    }
    // A plain store writes at once; an atomic's write counts when its launch is over.
    if (bits && op == Operation::write) bits->mark(target.offset, bytes, true);
  }

  void async_issued(unsigned thread, std::uintptr_t site, const void* shared_dst, const void* global_src, bool valid) {
    if (thread >= threads_) return;
    async_used_ = true;
    if (valid) access(thread, site, reinterpret_cast<std::uintptr_t>(global_src), 16, Operation::cp_async_read);
    const auto dst = reinterpret_cast<std::uintptr_t>(shared_dst);
    access(thread, site, dst, 16, Operation::cp_async_write);
    Target target;
    if (!classify(dst, 16, target) || target.space != Space::shared) return;
    const auto warp = thread / kWarpLanes;
    for (std::uint64_t w = target.offset / kWordBytes; w <= (target.offset + 15) / kWordBytes; ++w) {
      AsyncSlot& slot = async_slot(target.static_shared, w);
      slot = AsyncSlot{};
      slot.block_stamp = block_stamp_;
      slot.issuer = static_cast<std::uint16_t>(thread);
      slot.site = site;
      slot.issue_interval = interval_;
      slot.issue_epoch = epochs_[warp];
      slot.issue_position = positions_[thread] - 1;
    }
  }

  // Hopper's asynchronous instructions (racecheck_async.h), on dynamic shared memory.
  AsyncOrder& async_order() { return async_order_; }
  Records& records() { return records_; }

  // A TMA copy into these chunks of dynamic shared memory: for step 7, its bytes count as written
  // from now on (its order with the reads is racecheck_async.cpp's).
  void tma_wrote(const std::vector<std::uint32_t>& chunks) {
    for (const std::uint32_t c : chunks) {
      for (std::uint64_t w = std::uint64_t{c} * 16 / kWordBytes; w < (std::uint64_t{c} + 1) * 16 / kWordBytes; ++w) {
        if (w >= dynamic_.size()) break;
        Word& word = dynamic_[w];
        if (word.block_stamp != block_stamp_) word.block_stamp = block_stamp_;
        word.written = 0xf;
      }
    }
  }

  void async_landed(unsigned thread, const void* shared_dst) {
    if (!async_used_) return;
    Target target;
    const auto dst = reinterpret_cast<std::uintptr_t>(shared_dst);
    if (thread >= threads_ || !classify(dst, 16, target) || target.space != Space::shared) return;
    for (std::uint64_t w = target.offset / kWordBytes; w <= (target.offset + 15) / kWordBytes; ++w) {
      AsyncSlot& slot = async_slot(target.static_shared, w);
      if (slot.block_stamp != block_stamp_ || slot.issuer != thread || slot.landed) continue;
      slot.landed = true;
      slot.land_interval = interval_;
      slot.land_epoch = epochs_[thread / kWarpLanes];
    }
  }

 private:
  // A word touched in this interval, for end_interval().
  struct Location {
    Word* word;
    GlobalWord* global;  // null for shared memory
    bool static_shared;
    std::uint64_t index;  // the word's index (in shared memory, or in its allocation)
  };

  static std::uint8_t word_mask(std::uint64_t offset, std::uint32_t bytes, std::uint64_t w) {
    const std::uint64_t lo = std::max(offset, w * kWordBytes);
    const std::uint64_t hi = std::min(offset + bytes, (w + 1) * kWordBytes);
    std::uint8_t mask = 0;
    for (std::uint64_t b = lo; b < hi; ++b) mask = static_cast<std::uint8_t>(mask | (1u << (b - w * kWordBytes)));
    return mask;
  }

  bool classify(std::uintptr_t a, std::uint32_t bytes, Target& t) const {
    if (a >= shared_begin_ && a + bytes <= shared_end_) {
      t.space = Space::shared;
      t.offset = a - shared_begin_;
      return true;
    }
    // Most of the rest is a thread's own stack (a local array whose address was taken): the last
    // page found to hold no buffer and no thread-local block answers without a search.
    const std::uintptr_t page = a / kPageBytes;
    if (page == free_page_ && (a + bytes - 1) / kPageBytes == page) return false;
    const memory::Allocation* buffer = last_allocation_;  // most accesses are to the buffer of the one before
    if (buffer == nullptr || a < buffer->begin || a >= buffer->end) buffer = memory::find(*allocations_, a);
    if (buffer != nullptr) {
      last_allocation_ = buffer;
      if (a + bytes > buffer->end) return false;
      t.space = Space::global;
      t.allocation = buffer;
      t.offset = a - buffer->begin;
      return true;
    }
    if (tls_.contains(a) && a + bytes <= tls_.end && !memory::simt_variable(a)) {
      t.space = Space::shared;
      t.static_shared = true;
      t.offset = a - tls_.begin;
      return true;
    }
    if (page_is_free(page)) free_page_ = page;
    return false;
  }

  // Whether no buffer, no thread-local block and no shared memory has a byte in the page.
  bool page_is_free(std::uintptr_t page) const {
    const std::uintptr_t begin = page * kPageBytes;
    const std::uintptr_t end = begin + kPageBytes;
    const auto overlaps = [&](std::uintptr_t b, std::uintptr_t e) { return b < end && begin < e; };
    if (overlaps(shared_begin_, shared_end_) || overlaps(tls_.begin, tls_.end)) return false;
    // The first buffer that ends past the page's start, if any, must begin at or after its end.
    const auto it = std::upper_bound(allocations_->begin(), allocations_->end(), begin,
                                     [](std::uintptr_t x, const memory::Allocation& r) { return x < r.begin; });
    if (it != allocations_->begin() && std::prev(it)->end > begin) return false;
    return it == allocations_->end() || it->begin >= end;
  }

  Word& shared_word(bool static_shared, std::uint64_t w) {
    if (!static_shared) return dynamic_[w];
    if (static_.empty()) static_.resize((tls_.end - tls_.begin + kWordBytes - 1) / kWordBytes);
    return static_[w];
  }

  // The cp.async slots, kept apart from the words: most kernels never issue one.
  AsyncSlot& async_slot(bool static_shared, std::uint64_t w) {
    std::vector<AsyncSlot>& slots = static_shared ? static_async_ : dynamic_async_;
    const std::size_t words = static_shared ? (tls_.end - tls_.begin + kWordBytes - 1) / kWordBytes : dynamic_.size();
    if (slots.size() < words) slots.resize(words);
    return slots[w];
  }

  GlobalWord& global_word(const memory::Allocation& a, std::uint64_t w) { return global_.get(a, w); }

  void add_to_summary(GlobalWord& g, const Actor& x, std::uint8_t mask) {
    for (Summary& s : g.summary) {
      if (s.site == x.site && s.op == x.op && s.mask == mask) {
        s.thread = std::min(s.thread, x.thread);
        s.thread_max = std::max(s.thread_max, x.thread);
        s.position = std::min(s.position, x.position);
        return;
      }
    }
    g.summary.push_back({x.site, x.position, x.thread, x.thread, x.op, mask, x.bytes});
  }

  // Steps 2 and 3.
  void add_to_interval(Word& word, const Actor& x, std::uint8_t mask, const Location& where) {
    if (word.stamp != stamp_) {
      word.reset(stamp_);
      touched_.push_back(where);
    }
    // Lanes of x's warp in x's epoch that made an access of an entry that races with x: found
    // before x joins its entry.
    struct Near {
      std::uint16_t entry, other;
    };
    Near candidates[8];
    unsigned found = 0;
    int own = -1;
    for (std::size_t i = 0; i < word.size(); ++i) {
      const Entry& e = word.entry(i);
      if (e.site == x.site && e.op == x.op && e.mask == mask) own = static_cast<int>(i);
      if (!can_race(e.op, x.op) || (e.mask & mask) == 0) continue;
      if (e.warp[1] != kNone || e.warp[0] != x.warp || e.epoch != x.epoch) continue;
      const std::uint16_t other = e.lane[0] != x.thread ? e.lane[0] : e.lane[1];
      if (other == kNone || found == std::size(candidates)) continue;
      candidates[found++] = {static_cast<std::uint16_t>(i), other};
    }
    if (own < 0) {
      Entry e;
      e.site = x.site;
      e.position = x.position;
      e.epoch = x.epoch;
      e.warp[0] = x.warp;
      e.thread[0] = x.thread;
      e.lane[0] = x.thread;
      e.thread_max = x.thread;
      e.op = x.op;
      e.mask = mask;
      e.bytes = x.bytes;
      word.push(e);
      own = static_cast<int>(word.size() - 1);
    } else {
      join(word.entry(static_cast<std::size_t>(own)), x);
    }
    for (unsigned c = 0; c < found; ++c) {
      add_intra(word, static_cast<std::uint16_t>(own), candidates[c].entry, x.thread, candidates[c].other);
    }
  }

  static void join(Entry& e, const Actor& x) {
    e.position = std::min(e.position, x.position);
    e.thread_max = std::max(e.thread_max, x.thread);
    if (x.warp == e.warp[0]) {
      e.thread[0] = std::min(e.thread[0], x.thread);
    } else if (x.warp == e.warp[1]) {
      e.thread[1] = std::min(e.thread[1], x.thread);
    } else if (x.warp < e.warp[0]) {
      e.warp[1] = e.warp[0];
      e.thread[1] = e.thread[0];
      e.warp[0] = x.warp;
      e.thread[0] = x.thread;
    } else if (e.warp[1] == kNone || x.warp < e.warp[1]) {
      e.warp[1] = x.warp;
      e.thread[1] = x.thread;
    }
    if (e.warp[1] != kNone) return;  // two warps: the lanes are no longer needed (step 4 decides)
    if (x.epoch != e.epoch) {        // a later epoch of the warp: the earlier one is over
      e.epoch = x.epoch;
      e.lane[0] = x.thread;
      e.lane[1] = kNone;
    } else if (x.thread < e.lane[0]) {
      e.lane[1] = e.lane[0];
      e.lane[0] = x.thread;
    } else if (x.thread != e.lane[0] && x.thread < e.lane[1]) {
      e.lane[1] = x.thread;
    }
  }

  // t1 is the thread of entry a's access, t2 of entry b's.
  static void add_intra(Word& word, std::uint16_t a, std::uint16_t b, std::uint16_t t1, std::uint16_t t2) {
    if (a > b || (a == b && t1 > t2)) {
      std::swap(a, b);
      std::swap(t1, t2);
    }
    const auto sorted = [](std::uint16_t x, std::uint16_t y) { return std::pair(std::min(x, y), std::max(x, y)); };
    for (IntraPair& p : word.more().intra) {
      if (p.a == a && p.b == b) {
        if (sorted(t1, t2) < sorted(p.t1, p.t2)) {
          p.t1 = t1;
          p.t2 = t2;
        }
        return;
      }
    }
    word.extra->intra.push_back({a, b, t1, t2});
    word.extras = true;
  }

  // Step 5: x against the open cp.async on its word, if any.
  void check_async_slot(AsyncSlot& s, const Actor& x, std::uint8_t mask, const Target& target, std::uint64_t w) {
    if (s.block_stamp != block_stamp_ || s.issuer == kNone) return;
    const auto issuer_warp = static_cast<std::uint16_t>(s.issuer / kWarpLanes);  // issuer < 1024
    if (s.landed) {
      if (interval_ > s.land_interval) {  // a barrier after the wait: ordered for every thread
        s.issuer = kNone;
        return;
      }
      if (x.thread == s.issuer) return;                             // after its own wait
      if (x.warp == issuer_warp && x.epoch > s.land_epoch) return;  // a warp synchronisation after the wait
    }
    // Accesses by other threads in the interval where the copy was issued are step 4's (the copy is an entry there).
    if (interval_ == s.issue_interval && x.thread != s.issuer && (x.warp != issuer_warp || x.epoch == s.issue_epoch)) {
      return;
    }
    Example e = example(target, w, mask);
    e.who = x.thread == s.issuer ? Who::one_thread : x.warp == issuer_warp ? Who::lanes : Who::warps;
    const SiteOp copy{s.site, Operation::cp_async_write, 16};
    const HazardKey key = is_write(x.op) ? HazardKey{Kind::write_after_write, Space::shared, false,
                                                     std::min(copy, x.site_op()), std::max(copy, x.site_op())}
                                         : HazardKey{Kind::read_after_write, Space::shared, false, copy, x.site_op()};
    const bool copy_first = key.first == copy;
    e.thread_a = copy_first ? s.issuer : x.thread;  // the threads in the order of the two accesses
    e.thread_b = copy_first ? x.thread : s.issuer;
    records_[key].add(1, e);
  }

  Example example(const Target& target, std::uint64_t w, std::uint8_t mask) const {
    Example e;
    e.block = block_;
    e.interval = interval_;
    e.offset = w * kWordBytes + static_cast<unsigned>(__builtin_ctz(mask));
    e.static_shared = target.static_shared;
    e.grid = grid_;
    if (target.space == Space::global) {
      e.argument = argument_of(arguments_, target.allocation->id);
      e.buffer_bytes = target.allocation->bytes();
      e.element_bytes = target.allocation->element_bytes;
    }
    return e;
  }

  // Step 4, for every word touched in the interval that ends.
  void end_interval() {
    for (const Location& where : touched_) {
      Word& word = *where.word;
      const Space space = where.global != nullptr ? Space::global : Space::shared;
      Target target;
      target.space = space;
      target.static_shared = where.static_shared;
      if (where.global != nullptr) target.allocation = where.global->allocation;
      const std::size_t n = word.size();
      for (std::size_t i = 0; i < n; ++i) {
        for (std::size_t j = i; j < n; ++j) {
          const Entry& a = word.entry(i);
          const Entry& b = word.entry(j);
          const std::uint8_t both = a.mask & b.mask;
          if (!can_race(a.op, b.op) || both == 0) continue;
          Example e = example(target, where.index, both);
          // The smallest pair of threads of different warps, one from each entry (thread_a from a).
          bool found = false;
          std::uint32_t lowest[2] = {0, 0};
          for (int p = 0; p < 2; ++p) {
            for (int q = 0; q < 2; ++q) {
              if (i == j && p >= q) continue;
              const std::uint16_t wa = a.warp[p], wb = b.warp[q];
              if (wa == kNone || wb == kNone || wa == wb) continue;
              const std::uint32_t ta = a.thread[p], tb = b.thread[q];
              const std::uint32_t lo = std::min(ta, tb), hi = std::max(ta, tb);
              if (!found || std::tie(lo, hi) < std::tie(lowest[0], lowest[1])) {
                found = true;
                lowest[0] = lo;
                lowest[1] = hi;
                e.thread_a = ta;
                e.thread_b = tb;
              }
            }
          }
          bool warning = false;
          if (found) {
            e.who = Who::warps;
          } else {
            if (!word.extras) continue;
            const std::vector<IntraPair>& intra = word.extra->intra;
            const auto pair =
                std::find_if(intra.begin(), intra.end(), [&](const IntraPair& ip) { return ip.a == i && ip.b == j; });
            if (pair == intra.end()) continue;
            e.who = Who::lanes;
            e.thread_a = pair->t1;
            e.thread_b = pair->t2;
            warning = true;
          }
          const HazardKey key = hazard_key(space, warning, a.site_op(), a.position, b.site_op(), b.position);
          // The threads in the order of the two accesses (for one entry with itself, the smaller first).
          if (!(key.first == a.site_op()) || (i == j && e.thread_b < e.thread_a)) std::swap(e.thread_a, e.thread_b);
          records_[key].add(1, e);
        }
      }
      if (space == Space::global) continue;  // global reads are decided at the end of the launch
      // Step 7 for shared memory: a candidate read stays uninitialised unless another thread writes
      // its bytes in this interval (then the race rules speak), or its own thread did before it.
      static const std::vector<Candidate> none;
      for (const Candidate& c : word.extras ? word.extra->candidates : none) {
        bool written = false;
        for (std::size_t i = 0; i < word.size() && !written; ++i) {
          const Entry& e = word.entry(i);
          written = (e.op == Operation::write || e.op == Operation::cp_async_write) && (e.mask & c.mask) != 0 &&
                    (!e.only_thread(c.thread) || e.position < c.position);
        }
        if (written) continue;
        Example e = example(target, where.index, c.mask);
        e.who = Who::uninitialised;
        e.thread_a = e.thread_b = c.thread;
        records_[HazardKey{Kind::uninitialised_read, Space::shared, false, c.site_op(), SiteOp{}}].add(1, e);
      }
      for (std::size_t i = 0; i < word.size(); ++i) {
        if (is_write(word.entry(i).op)) word.written |= word.entry(i).mask;  // for the intervals after this one
      }
    }
    touched_.clear();
  }

  std::string kernel_;
  observer::BlockPlace grid_{1, 1, 1};
  std::uint64_t block_ = 0;
  unsigned threads_ = 0;
  std::uintptr_t shared_begin_ = 0, shared_end_ = 0;
  memory::Range tls_;
  memory::Allocations allocations_;
  mutable const memory::Allocation* last_allocation_ = nullptr;
  static constexpr std::uintptr_t kPageBytes = 4096;
  static constexpr std::uintptr_t kNoPage = ~std::uintptr_t{0};
  mutable std::uintptr_t free_page_ = kNoPage;
  Arguments arguments_;
  std::uint32_t interval_ = 0;
  std::uint32_t block_stamp_ = 0, stamp_ = 0;
  std::vector<std::uint32_t> positions_;                 // per thread: accesses since the last barrier
  std::vector<std::uint32_t> epochs_;                    // per warp: warp-collective operations completed
  std::vector<Word> dynamic_;                            // per word of dynamic shared memory (kept between blocks)
  std::vector<Word> static_;                             // per word of the thread-local block (static __shared__)
  std::vector<AsyncSlot> dynamic_async_, static_async_;  // the same words' cp.async slots
  bool async_used_ = false;                              // this block has issued a cp.async
  GlobalWords global_;
  std::vector<Location> touched_;
  Records records_;
  AsyncOrder async_order_;
};

thread_local BlockChecker this_thread_checker;
thread_local bool checking = false;  // a block is being checked on this host thread

// ---- On and off ------------------------------------------------------------------------------

// 0: SIMT_RACECHECK not read yet; 1: off; 2: on.
std::atomic<int> state{0};
void clear_findings() {
  Results& r = results();
  std::scoped_lock lock(r.mutex);
  r.order.clear();
  r.kernels.clear();
  r.launches = 0;
  r.unchecked_launches = 0;
  r.unchecked_kernels.clear();
}

void print_report_at_exit() {
  const Findings f = racecheck::findings();
  // No launch, nothing found: a program that ran no kernel (one that refused its input before any
  // work) ends as it would without the checker.
  if (f.launches == 0 && f.unchecked_launches == 0 && f.clean()) return;
  std::cout.flush();
  std::fputs(format_report(f).c_str(), stdout);
  std::fflush(stdout);
  if (!f.clean()) {
    std::fflush(stderr);
    std::_Exit(1);  // whatever status the program was going to end with
  }
}

void turn_on(bool with_report) {
  (void)results();  // constructed before the handler is registered, so destroyed after it runs
  (void)launch();
  sites::make_table();
  if (with_report) {
    static std::once_flag once;
    std::call_once(once, [] { std::atexit(&print_report_at_exit); });
  }
  state.store(2, std::memory_order_relaxed);
}

int read_environment() {
  static std::mutex mutex;
  std::scoped_lock lock(mutex);
  int s = state.load(std::memory_order_relaxed);
  if (s != 0) return s;
  const char* value = std::getenv("SIMT_RACECHECK");
  const std::string text = value == nullptr ? "" : value;
  if (text.empty() || text == "0") {
    state.store(1, std::memory_order_relaxed);
    return 1;
  }
  if (text != "1") {
    throw std::invalid_argument("SIMT_RACECHECK=" + text + ": accepted values are 0 (off) and 1 (on)");
  }
  if (!observer::hooks_available()) {
    throw std::invalid_argument("SIMT_RACECHECK=1: simt's race checker is " + observer::unavailable_reason());
  }
  turn_on(true);
  return 2;
}

}  // namespace

bool is_enabled() {
  int s = state.load(std::memory_order_relaxed);
  if (s == 0) s = read_environment();
  return s == 2;
}

void launch_begin(std::string_view kernel, bool profiled_copy, const void* const* arguments, std::size_t count) {
  Launch& l = launch();
  const std::string name = display_name(kernel);
  {
    std::scoped_lock lock(l.mutex);
    l.kernel = name;
    l.checked = profiled_copy;
    l.allocations.clear();
    l.arguments.clear();
    const memory::Allocations all = memory::allocations();
    for (std::size_t i = 0; i < count; ++i) {
      const memory::Allocation* a =
          arguments[i] == nullptr ? nullptr : memory::find(*all, reinterpret_cast<std::uintptr_t>(arguments[i]));
      if (a != nullptr && argument_of(l.arguments, a->id) < 0) l.arguments.emplace_back(a->id, static_cast<int>(i));
    }
  }
  Results& r = results();
  std::scoped_lock lock(r.mutex);
  if (profiled_copy) {
    ++r.launches;
    if (std::find(r.order.begin(), r.order.end(), name) == r.order.end()) r.order.push_back(name);
    return;
  }
  ++r.unchecked_launches;
  if (std::find(r.unchecked_kernels.begin(), r.unchecked_kernels.end(), name) == r.unchecked_kernels.end()) {
    r.unchecked_kernels.push_back(name);
  }
  // Its writes are not seen: from now on every buffer counts as written.
  memory::mark_all_written();
}

void launch_end() {
  Launch& l = launch();
  Records records;
  std::string kernel;
  {
    std::scoped_lock lock(l.mutex);
    if (l.checked) check_between_blocks(l, records);
    kernel = l.kernel;
    l.allocations.clear();
  }
  merge_into_results(kernel, records);
}

void block_begin(std::string_view kernel, observer::BlockPlace grid, std::uint64_t block_linear,
                 const std::byte* shared, std::size_t shared_bytes, unsigned threads) {
  {
    // Only a profiled copy's accesses are all seen: the blocks of any other kernel are not checked
    // (simt's own instructions would report theirs, and nothing else).
    Launch& l = launch();
    std::scoped_lock lock(l.mutex);
    if (!l.checked) return;
    l.grid = grid;
  }
  this_thread_checker.begin(kernel, grid, block_linear, shared, shared_bytes, threads);
  checking = true;
}

void warp_sync(unsigned warp) {
  if (checking) this_thread_checker.warp_sync(warp);
}

void block_sync() {
  if (checking) this_thread_checker.block_sync();
}

void block_end() {
  if (!checking) return;
  this_thread_checker.end();
  checking = false;
}

void access(unsigned thread, std::uintptr_t site, std::uintptr_t address, std::uint32_t bytes, Operation op) {
  if (checking) this_thread_checker.access(thread, site, address, bytes, op);
}

void async_copy_issued(unsigned thread, std::uintptr_t site, const void* shared_dst, const void* global_src,
                       bool valid) {
  if (checking) this_thread_checker.async_issued(thread, site, shared_dst, global_src, valid);
}

void async_copy_landed(unsigned thread, const void* shared_dst) {
  if (checking) this_thread_checker.async_landed(thread, shared_dst);
}

AsyncOrder* async_order() { return checking ? &this_thread_checker.async_order() : nullptr; }

std::uint32_t tma_write(unsigned thread, std::uintptr_t site, const std::vector<std::uint32_t>& chunks) {
  if (!checking) return 0;
  this_thread_checker.tma_wrote(chunks);
  return this_thread_checker.async_order().tma_write(thread, site, chunks, this_thread_checker.records());
}

std::uint32_t async_read(Operation op, unsigned thread, std::uintptr_t site, const std::vector<std::uint32_t>& chunks) {
  if (!checking) return 0;
  return this_thread_checker.async_order().async_read(op, thread, site, chunks, this_thread_checker.records());
}

}  // namespace detail

// ---- The public API --------------------------------------------------------------------------

bool available() { return observer::hooks_available(); }

std::string unavailable_reason() { return observer::unavailable_reason(); }

void enable() {
  if (!available()) throw std::logic_error("simt racecheck: " + unavailable_reason());
  detail::turn_on(true);
}

bool enabled() { return detail::is_enabled(); }

void start() {
  if (!available()) throw std::logic_error("simt racecheck: " + unavailable_reason());
  detail::clear_findings();
  detail::turn_on(false);
}

void stop() { detail::state.store(1, std::memory_order_relaxed); }

std::uint64_t Findings::errors() const {
  return static_cast<std::uint64_t>(
      std::count_if(hazards.begin(), hazards.end(), [](const Hazard& h) { return !h.warning && !h.uninitialised; }));
}
std::uint64_t Findings::warnings() const {
  return static_cast<std::uint64_t>(
      std::count_if(hazards.begin(), hazards.end(), [](const Hazard& h) { return h.warning; }));
}
std::uint64_t Findings::uninitialised() const {
  return static_cast<std::uint64_t>(
      std::count_if(hazards.begin(), hazards.end(), [](const Hazard& h) { return h.uninitialised; }));
}

namespace {

const char* kind_name(detail::Kind k) {
  switch (k) {
    case detail::Kind::read_after_write:
      return "read-after-write";
    case detail::Kind::write_after_read:
      return "write-after-read";
    case detail::Kind::write_after_write:
      return "write-after-write";
    case detail::Kind::uninitialised_read:
      return "read";
    case detail::Kind::unfenced_write:
      return "write without fence.proxy.async";
  }
  return "?";
}

std::string operation_name(const detail::SiteOp& s) {
  using detail::Operation;
  if (s.op == Operation::read || s.op == Operation::write) {
    return fmt::format("{} ({} bytes)", s.op == Operation::read ? "read" : "write", s.bytes);
  }
  // In the order of detail::Operation (racecheck_recorder.h).
  static constexpr const char* names[] = {"read",      "write",     "ldmatrix read",  "cp.async read", "cp.async write",
                                          "atomicAdd", "TMA write", "TMA store read", "wgmma read"};
  const auto i = static_cast<std::size_t>(s.op);
  return i < std::size(names) ? names[i] : "?";
}

Access describe(const detail::SiteOp& s) {
  const sites::SourceLine line = sites::source_line(s.site);
  return {operation_name(s), line.file, line.line, sites::where(s.site, line)};
}

std::string block_name(std::uint64_t linear, observer::BlockPlace grid) {
  const std::uint64_t x = linear % grid.x, y = (linear / grid.x) % grid.y,
                      z = linear / (std::uint64_t{grid.x} * grid.y);
  return fmt::format("({}, {}, {})", x, y, z);
}

std::string who(const detail::Example& e) {
  using detail::Who;
  const std::string block = block_name(e.block, e.grid);
  switch (e.who) {
    case Who::warps:
      return fmt::format("thread {} (warp {}) and thread {} (warp {}) of block {}", e.thread_a, e.thread_a / 32,
                         e.thread_b, e.thread_b / 32, block);
    case Who::lanes:
      return fmt::format("thread {} (lane {}) and thread {} (lane {}) of warp {} of block {}", e.thread_a,
                         e.thread_a % 32, e.thread_b, e.thread_b % 32, e.thread_a / 32, block);
    case Who::blocks:
      return fmt::format("thread {} of block {} and thread {} of block {}", e.thread_a, block, e.thread_b,
                         block_name(e.other_block, e.grid));
    case Who::one_thread:
      return fmt::format("thread {} of block {}, before its own cp_async_wait_group", e.thread_a, block);
    case Who::uninitialised:
      return fmt::format("thread {} of block {}", e.thread_a, block);
  }
  return "?";
}

std::string where(detail::Space space, const detail::Example& e) {
  if (space == detail::Space::shared) {
    if (!e.static_shared) return fmt::format("dynamic shared memory, byte {}", e.offset);
    std::uint64_t into = 0;
    const std::string array = sites::display_name(sites::thread_local_variable(e.offset, into));
    return array.empty() ? fmt::format("a static __shared__ array (byte {} of the thread-local storage)", e.offset)
                         : fmt::format("__shared__ {}, byte {}", array, into);
  }
  const std::uint64_t element = e.offset / e.element_bytes, byte = e.offset % e.element_bytes;
  return fmt::format(
      "{} ({} elements of {} bytes), {}element {}",
      e.argument >= 0 ? fmt::format("the buffer of argument {}", e.argument + 1) : std::string("a DeviceBuffer"),
      e.buffer_bytes / e.element_bytes, e.element_bytes, byte == 0 ? std::string() : fmt::format("byte {} of ", byte),
      element);
}

}  // namespace

Findings findings() {
  Findings out;
  detail::Results& r = detail::results();
  std::scoped_lock lock(r.mutex);
  out.launches = r.launches;
  out.kernels = r.order.size();
  out.unchecked_launches = r.unchecked_launches;
  out.unchecked_kernels = r.unchecked_kernels;
  // Sites are code addresses: one source line can hold several (an unrolled loop, an inlined
  // helper). Hazards are reported per line, so records of one line are joined first.
  struct Line {
    bool uninitialised, warning;
    std::string kind;
    Access first, second;
    detail::Space space;
    auto key() const {
      return std::tie(uninitialised, warning, kind, first.file, first.line, first.operation, second.file, second.line,
                      second.operation, first.where, second.where, space);
    }
    bool operator<(const Line& o) const { return key() < o.key(); }
  };
  for (const std::string& kernel : r.order) {
    const auto it = r.kernels.find(kernel);
    if (it == r.kernels.end()) continue;
    std::map<Line, detail::Record> lines;
    for (const auto& [key, record] : it->second) {
      Line line;
      line.uninitialised = key.kind == detail::Kind::uninitialised_read;
      line.warning = key.warning;
      const char* space = key.space == detail::Space::shared ? "shared" : "global";
      line.kind = line.uninitialised ? fmt::format("uninitialised {} read", space)
                                     : fmt::format("{} {}", space, kind_name(key.kind));
      line.first = describe(key.first);
      if (!line.uninitialised) line.second = describe(key.second);
      line.space = key.space;
      lines[line].add(record);
    }
    for (const auto& [line, record] : lines) {
      Hazard h;
      h.kernel = kernel;
      h.kind = line.kind;
      h.warning = line.warning;
      h.uninitialised = line.uninitialised;
      h.first = line.first;
      h.second = line.second;
      h.who = who(record.example);
      h.where = where(line.space, record.example);
      h.count = record.count;
      out.hazards.push_back(std::move(h));
    }
  }
  return out;
}

const Hazard* find(const Findings& f, const std::string& kind, const std::string& kernel) {
  for (const Hazard& h : f.hazards) {
    if (h.kind == kind && h.kernel.find(kernel) != std::string::npos) return &h;
  }
  return nullptr;
}

std::string summary_line(const Findings& f) {
  const std::uint64_t races = f.errors() + f.warnings();
  std::string line = fmt::format(
      "RACECHECK SUMMARY: {} hazard{} displayed ({} error{}, {} warning{}), {} uninitialised read{}; {} launch{} of {} "
      "kernel{} checked",
      races, races == 1 ? "" : "s", f.errors(), f.errors() == 1 ? "" : "s", f.warnings(), f.warnings() == 1 ? "" : "s",
      f.uninitialised(), f.uninitialised() == 1 ? "" : "s", f.launches, f.launches == 1 ? "" : "es", f.kernels,
      f.kernels == 1 ? "" : "s");
  if (f.unchecked_launches > 0) {
    std::string names;
    for (const std::string& k : f.unchecked_kernels) names += (names.empty() ? "" : ", ") + k;
    line += fmt::format("; {} launch{} not checked (no profiled copy: {})", f.unchecked_launches,
                        f.unchecked_launches == 1 ? "" : "es", names);
  }
  return line + "\n";
}

std::string format_report(const Findings& f) {
  std::string out;
  for (const Hazard& h : f.hazards) {
    if (h.uninitialised) {
      out += fmt::format("RACECHECK: {} (error) in {}\n    {} at {}\n    by {}, {}; {} read{}\n", h.kind, h.kernel,
                         h.first.operation, h.first.where, h.who, h.where, h.count, h.count == 1 ? "" : "s");
      continue;
    }
    const std::size_t width = std::max(h.first.operation.size(), h.second.operation.size());
    out +=
        fmt::format("RACECHECK: {} hazard ({}) in {}\n    {:<{}} at {}\n    {:<{}} at {}\n    {}, {}; in {} place{}\n",
                    h.kind, h.warning ? "warning" : "error", h.kernel, h.first.operation, width, h.first.where,
                    h.second.operation, width, h.second.where, h.who, h.where, h.count, h.count == 1 ? "" : "s");
  }
  return out + summary_line(f);
}

}  // namespace simt::racecheck
