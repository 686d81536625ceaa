// The recorder of simt's memory profile (profile.h, profile_recorder.h).
//
// This file is never instrumented itself. How an access finds its way into the counts:
//   1. a profiled translation unit calls __asan_load4_noabort(addr) (and its siblings) before
//      every load and store it makes, host code and kernel code alike (the hooks: observer.cpp)
//   2. the hook keeps it only while a block is being recorded on this host thread and a CUDA
//      thread of it is running (not the scheduler, not host code between launches)
//   3. it keeps the address only if it lies in the block's dynamic shared memory, in a static
//      __shared__ array (this host thread's block of thread_local storage of the program, minus
//      simt's own thread_local variables), or in a registered DeviceBuffer (memory_map.h);
//      everything else (the CUDA thread's stack, simt's variables, the heap) is dropped
//   4. the lane's running count of this site since the warp's last synchronisation point, k,
//      makes (site, k) the key of a warp instruction; the lane's address joins it
//   5. at the warp's next synchronisation point (a shuffle, __syncthreads(), the end of the
//      block) every pending instruction of the warp is complete: it is counted (profile_count.h)
//      into its kernel's totals and its site's
// Global addresses are taken relative to the start of their DeviceBuffer, as though every buffer
// began on a 256-byte boundary as cudaMalloc's do, so that the sectors do not depend on where the
// host allocator put it.
#include "common/simt/tools/profile.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "common/simt/tools/detail/memory_map.h"
#include "common/simt/tools/detail/observer.h"
#include "common/simt/tools/detail/profile_counting.h"
#include "common/simt/tools/detail/profile_recorder.h"
#include "common/simt/tools/detail/sites.h"

namespace simt::profile {
namespace detail {

std::atomic<bool> recording_flag{false};

namespace {

// ---- Per-kernel totals -----------------------------------------------------------------------

// The hash of a key with a hash() of its own, for std::unordered_map.
struct KeyHash {
  template <class Key>
  std::size_t operator()(const Key& key) const {
    return key.hash();
  }
};

struct SiteKey {
  std::uintptr_t site;
  Space space;
  Op op;
  bool operator==(const SiteKey&) const = default;
  std::size_t hash() const {
    return std::hash<std::uintptr_t>{}(site) ^ (static_cast<std::size_t>(space) << 1) ^ static_cast<std::size_t>(op);
  }
};

struct Totals {
  std::uint64_t launches = 0;
  GlobalCounts global_load, global_store;
  SharedCounts shared_load, shared_store;
  TmaCounts tma_load, tma_store;
  WgmmaCounts wgmma_read;
  std::unordered_map<SiteKey, Site, KeyHash> sites;

  void add(const Totals& other) {
    launches += other.launches;
    auto add_global = [](GlobalCounts& a, const GlobalCounts& b) {
      a.instructions += b.instructions;
      a.bytes += b.bytes;
      a.sectors += b.sectors;
    };
    auto add_shared = [](SharedCounts& a, const SharedCounts& b) {
      a.instructions += b.instructions;
      a.bytes += b.bytes;
      a.wavefronts += b.wavefronts;
      a.bank_conflicts += b.bank_conflicts;
    };
    add_global(global_load, other.global_load);
    add_global(global_store, other.global_store);
    add_shared(shared_load, other.shared_load);
    add_shared(shared_store, other.shared_store);
    for (auto [mine, theirs] : {std::pair{&tma_load, &other.tma_load}, std::pair{&tma_store, &other.tma_store}}) {
      mine->copies += theirs->copies;
      mine->box_bytes += theirs->box_bytes;
      mine->tensor_bytes += theirs->tensor_bytes;
    }
    wgmma_read.instructions += other.wgmma_read.instructions;
    wgmma_read.bytes += other.wgmma_read.bytes;
    for (const auto& [key, s] : other.sites) {
      Site& mine = sites[key];
      mine.address = s.address;
      mine.space = s.space;
      mine.op = s.op;
      mine.instructions += s.instructions;
      mine.bytes += s.bytes;
      mine.sectors += s.sectors;
      mine.wavefronts += s.wavefronts;
      mine.bank_conflicts += s.bank_conflicts;
    }
  }
};

struct Results {
  std::mutex mutex;
  std::vector<std::string> order;  // kernels in the order of their first recorded block
  std::unordered_map<std::string, Totals> kernels;
};

Results& results_store() {
  static Results r;
  return r;
}

using sites::display_name;

// ---- One block being recorded ----------------------------------------------------------------

struct InstructionKey {
  std::uintptr_t site;
  std::uint32_t k;
  Space space;
  Op op;
  bool operator==(const InstructionKey&) const = default;
  std::size_t hash() const {
    return std::hash<std::uintptr_t>{}(site)*31 + k * 7 + static_cast<std::size_t>(space) * 3 +
           static_cast<std::size_t>(op);
  }
};

struct Instruction {
  InstructionKey key;
  WarpAccess access;
};

struct PendingWarp {
  std::unordered_map<InstructionKey, std::uint32_t, KeyHash> index;
  std::vector<Instruction> instructions;
};

class BlockRecorder {
 public:
  void begin(std::string_view kernel, bool first_block, const std::byte* shared, std::size_t shared_bytes,
             unsigned threads) {
    kernel_ = kernel;
    totals_ = Totals{};
    totals_.launches = first_block ? 1 : 0;
    shared_begin_ = reinterpret_cast<std::uintptr_t>(shared);
    shared_end_ = shared_begin_ + shared_bytes;
    tls_ = memory::program_thread_local_storage();
    buffers_ = memory::allocations();
    threads_ = threads;
    const unsigned warps = (threads + kWarpLanes - 1) / kWarpLanes;
    if (lane_counts_.size() < threads) lane_counts_.resize(threads);
    for (unsigned t = 0; t < threads; ++t) lane_counts_[t].clear();
    if (warps_.size() < warps) warps_.resize(warps);
    for (unsigned w = 0; w < warps; ++w) {
      warps_[w].index.clear();
      warps_[w].instructions.clear();
    }
    warps_in_block_ = warps;
    active_ = true;
  }

  bool active() const { return active_; }

  // Step 3: global (with the address made relative to its buffer), shared, or neither.
  bool classify(std::uintptr_t a, Space& space, std::uint64_t& address) const {
    if (a >= shared_begin_ && a < shared_end_) {
      space = Space::shared;
      address = a;
      return true;
    }
    if (const memory::Allocation* buffer = memory::find(*buffers_, a)) {
      space = Space::global;
      address = (buffer->id << 40) + (a - buffer->begin);
      return true;
    }
    if (tls_.contains(a) && !memory::simt_variable(a)) {
      space = Space::shared;
      address = a;
      return true;
    }
    return false;
  }

  // Step 4.
  void record(unsigned thread, std::uintptr_t site, std::uintptr_t a, std::uint32_t bytes, Op op) {
    if (thread >= threads_) return;
    Space space;
    std::uint64_t address;
    if (!classify(a, space, address)) return;
    const std::uint32_t k = lane_counts_[thread][site]++;
    PendingWarp& warp = warps_[thread / kWarpLanes];
    const InstructionKey key{site, k, space, op};
    auto [it, added] = warp.index.try_emplace(key, static_cast<std::uint32_t>(warp.instructions.size()));
    if (added) warp.instructions.push_back(Instruction{key, WarpAccess{}});
    warp.instructions[it->second].access.set(thread % kWarpLanes, address, bytes);
  }

  // Step 5.
  void flush(unsigned w) {
    if (w >= warps_in_block_) return;
    PendingWarp& warp = warps_[w];
    for (const Instruction& in : warp.instructions) count(in);
    warp.instructions.clear();
    warp.index.clear();
    const unsigned first = w * kWarpLanes;
    for (unsigned t = first; t < std::min(threads_, first + kWarpLanes); ++t) lane_counts_[t].clear();
  }

  void flush_all() {
    for (unsigned w = 0; w < warps_in_block_; ++w) flush(w);
  }

  // Hopper's asynchronous copies and wgmma: counted whole where they are issued, no warp
  // instruction to gather.
  void tma_copy(Op op, std::uint64_t box_bytes, std::uint64_t tensor_bytes) {
    TmaCounts& c = op == Op::load ? totals_.tma_load : totals_.tma_store;
    ++c.copies;
    c.box_bytes += box_bytes;
    c.tensor_bytes += tensor_bytes;
  }
  void wgmma_read(std::uint64_t bytes) {
    ++totals_.wgmma_read.instructions;
    totals_.wgmma_read.bytes += bytes;
  }

  void end() {
    if (!active_) return;
    flush_all();
    active_ = false;
    Results& r = results_store();
    const std::string name = display_name(kernel_);
    std::scoped_lock lock(r.mutex);
    auto [it, added] = r.kernels.try_emplace(name);
    if (added) r.order.push_back(name);
    it->second.add(totals_);
  }

 private:
  void count(const Instruction& in) {
    Site& site = totals_.sites[SiteKey{in.key.site, in.key.space, in.key.op}];
    site.address = in.key.site;
    site.space = in.key.space;
    site.op = in.key.op;
    const std::uint64_t bytes = in.access.requested_bytes();
    ++site.instructions;
    site.bytes += bytes;
    if (in.key.space == Space::global) {
      GlobalCounts& c = in.key.op == Op::load ? totals_.global_load : totals_.global_store;
      const std::uint64_t sectors = global_sectors(in.access);
      ++c.instructions;
      c.bytes += bytes;
      c.sectors += sectors;
      site.sectors += sectors;
    } else {
      SharedCounts& c = in.key.op == Op::load ? totals_.shared_load : totals_.shared_store;
      const SharedCost cost = shared_cost(in.access);
      ++c.instructions;
      c.bytes += bytes;
      c.wavefronts += cost.wavefronts;
      c.bank_conflicts += cost.bank_conflicts;
      site.wavefronts += cost.wavefronts;
      site.bank_conflicts += cost.bank_conflicts;
    }
  }

  std::string_view kernel_;
  Totals totals_;
  std::uintptr_t shared_begin_ = 0, shared_end_ = 0;
  memory::Range tls_;
  memory::Allocations buffers_;
  unsigned threads_ = 0;
  unsigned warps_in_block_ = 0;
  std::vector<std::unordered_map<std::uintptr_t, std::uint32_t>> lane_counts_;  // per thread: site -> k
  std::vector<PendingWarp> warps_;
  bool active_ = false;
};

thread_local BlockRecorder this_thread_recorder;
thread_local BlockRecorder* recording_block = nullptr;  // non-null while a block is recorded here

}  // namespace

void block_begin(std::string_view kernel, bool first_block, const std::byte* shared, std::size_t shared_bytes,
                 unsigned threads) {
  this_thread_recorder.begin(kernel, first_block, shared, shared_bytes, threads);
  recording_block = &this_thread_recorder;
}

void warp_sync(unsigned warp) {
  if (recording_block != nullptr) recording_block->flush(warp);
}

void block_sync() {
  if (recording_block != nullptr) recording_block->flush_all();
}

void block_end() {
  if (recording_block == nullptr) return;
  recording_block->end();
  recording_block = nullptr;
}

void record(unsigned thread, std::uintptr_t site, std::uintptr_t address, std::uint32_t bytes, Op op) {
  if (recording_block != nullptr) recording_block->record(thread, site, address, bytes, op);
}

void tma_copy(Op op, std::uint64_t box_bytes, std::uint64_t tensor_bytes) {
  if (recording_block != nullptr) recording_block->tma_copy(op, box_bytes, tensor_bytes);
}

void wgmma_read(std::uint64_t bytes) {
  if (recording_block != nullptr) recording_block->wgmma_read(bytes);
}

}  // namespace detail

// ---- The public API --------------------------------------------------------------------------

const KernelProfile* find_kernel(const std::vector<KernelProfile>& kernels, std::string_view name) {
  for (const KernelProfile& k : kernels) {
    if (k.kernel.find(name) != std::string::npos) return &k;
  }
  return nullptr;
}

bool available() { return observer::hooks_available(); }

std::string unavailable_reason() { return observer::unavailable_reason(); }

void start() {
  if (!available()) throw std::logic_error("simt profile: " + unavailable_reason());
  detail::Results& r = detail::results_store();
  {
    std::scoped_lock lock(r.mutex);
    r.order.clear();
    r.kernels.clear();
  }
  detail::recording_flag.store(true, std::memory_order_relaxed);
}

void stop() { detail::recording_flag.store(false, std::memory_order_relaxed); }

bool recording() { return detail::is_recording(); }

std::vector<KernelProfile> results() {
  detail::Results& r = detail::results_store();
  std::vector<KernelProfile> out;
  std::scoped_lock lock(r.mutex);
  for (const std::string& name : r.order) {
    const detail::Totals& t = r.kernels.at(name);
    KernelProfile k{name,           t.launches, t.global_load, t.global_store, t.shared_load,
                    t.shared_store, t.tma_load, t.tma_store,   t.wgmma_read,   {}};
    for (const auto& [key, site] : t.sites) {
      Site s = site;
      const sites::SourceLine where = sites::source_line(s.address);
      s.file = where.file;
      s.line = where.line;
      k.sites.push_back(std::move(s));
    }
    std::sort(k.sites.begin(), k.sites.end(), [](const Site& a, const Site& b) {
      if (a.sectors != b.sectors) return a.sectors > b.sectors;
      if (a.bank_conflicts != b.bank_conflicts) return a.bank_conflicts > b.bank_conflicts;
      if (a.wavefronts != b.wavefronts) return a.wavefronts > b.wavefronts;
      return a.address < b.address;
    });
    out.push_back(std::move(k));
  }
  return out;
}

namespace {

const char* space_name(Space s) { return s == Space::global ? "global" : "shared"; }
const char* op_name(Op o) { return o == Op::load ? "load" : "store"; }

std::string where(const Site& s) { return sites::where(s.address, {s.file, s.line}); }

// The worst sites: up to n by sectors (global), then up to n by bank conflicts (shared, only those
// with conflicts), each with its share of the kernel's total.
struct Worst {
  const Site* site;
  double share;
};

std::vector<Worst> worst_sites(const KernelProfile& k, std::size_t n) {
  std::vector<Worst> worst;
  const std::uint64_t sectors = k.global_load.sectors + k.global_store.sectors;
  const std::uint64_t conflicts = k.shared_load.bank_conflicts + k.shared_store.bank_conflicts;
  std::vector<const Site*> by_sectors, by_conflicts;
  for (const Site& s : k.sites) {
    if (s.space == Space::global && s.sectors > 0) by_sectors.push_back(&s);
    if (s.space == Space::shared && s.bank_conflicts > 0) by_conflicts.push_back(&s);
  }
  std::stable_sort(by_conflicts.begin(), by_conflicts.end(),
                   [](const Site* a, const Site* b) { return a->bank_conflicts > b->bank_conflicts; });
  for (std::size_t i = 0; i < std::min(n, by_sectors.size()); ++i) {
    worst.push_back({by_sectors[i], static_cast<double>(by_sectors[i]->sectors) / static_cast<double>(sectors)});
  }
  for (std::size_t i = 0; i < std::min(n, by_conflicts.size()); ++i) {
    worst.push_back(
        {by_conflicts[i], static_cast<double>(by_conflicts[i]->bank_conflicts) / static_cast<double>(conflicts)});
  }
  return worst;
}

std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string json_global(const GlobalCounts& c) {
  return fmt::format("{{\"instructions\": {}, \"bytes\": {}, \"sectors\": {}}}", c.instructions, c.bytes, c.sectors);
}
std::string json_shared(const SharedCounts& c) {
  return fmt::format("{{\"instructions\": {}, \"bytes\": {}, \"wavefronts\": {}, \"bank_conflicts\": {}}}",
                     c.instructions, c.bytes, c.wavefronts, c.bank_conflicts);
}
// Hopper's keys, for a kernel that issued a TMA copy or a wgmma (empty for the others).
std::string json_hopper(const KernelProfile& k) {
  if (k.tma_load.copies == 0 && k.tma_store.copies == 0 && k.wgmma_read.instructions == 0) return "";
  const auto tma = [](const TmaCounts& c) {
    return fmt::format("{{\"copies\": {}, \"box_bytes\": {}, \"tensor_bytes\": {}}}", c.copies, c.box_bytes,
                       c.tensor_bytes);
  };
  return fmt::format(
      "\n   \"tma_load\":   {},\n   \"tma_store\":  {},\n   \"wgmma_read\": {{\"instructions\": {}, \"bytes\": {}}},",
      tma(k.tma_load), tma(k.tma_store), k.wgmma_read.instructions, k.wgmma_read.bytes);
}

}  // namespace

std::string format_table(const std::vector<KernelProfile>& kernels, std::size_t n) {
  std::string out;
  for (const KernelProfile& k : kernels) {
    out += fmt::format("{} ({} launch{})\n", k.kernel, k.launches, k.launches == 1 ? "" : "es");
    out += fmt::format("  {:<13} {:>13} {:>15} {:>13} {:>13} {:>15}\n", "", "instructions", "bytes", "sectors",
                       "wavefronts", "bank conflicts");
    const auto g = [&](const char* name, const GlobalCounts& c) {
      out += fmt::format("  {:<13} {:>13} {:>15} {:>13} {:>13} {:>15}\n", name, c.instructions, c.bytes, c.sectors, "",
                         "");
    };
    const auto s = [&](const char* name, const SharedCounts& c) {
      out += fmt::format("  {:<13} {:>13} {:>15} {:>13} {:>13} {:>15}\n", name, c.instructions, c.bytes, "",
                         c.wavefronts, c.bank_conflicts);
    };
    g("global load", k.global_load);
    g("global store", k.global_store);
    s("shared load", k.shared_load);
    s("shared store", k.shared_store);
    // Hopper's rows, only where the kernel has any (every other table stays as it was): a TMA copy
    // is one instruction of one thread; its bytes are whole boxes, and the note gives those inside
    // the tensor. A wgmma is one instruction of a warpgroup; the hardware serves its swizzled reads
    // without bank conflicts (profile.h, WgmmaCounts), and the profile counts none.
    const auto tma = [&](const char* name, const TmaCounts& c, const char* global) {
      if (c.copies == 0) return;
      out += fmt::format("  {:<13} {:>13} {:>15} {:>13} {:>13} {:>15}  ({} {} global memory)\n", name, c.copies,
                         c.box_bytes, "", "", "", c.tensor_bytes, global);
    };
    tma("TMA load", k.tma_load, "read from");
    tma("TMA store", k.tma_store, "written to");
    if (k.wgmma_read.instructions > 0) {
      out += fmt::format("  {:<13} {:>13} {:>15} {:>13} {:>13} {:>15}  (per warpgroup, from shared memory)\n",
                         "wgmma read", k.wgmma_read.instructions, k.wgmma_read.bytes, "", "", 0);
    }
    for (const Worst& w : worst_sites(k, n)) {
      const bool global = w.site->space == Space::global;
      out +=
          fmt::format("    {:>5.1f}% of the {}: {} {} at {}\n", 100.0 * w.share, global ? "sectors" : "bank conflicts",
                      space_name(w.site->space), op_name(w.site->op), where(*w.site));
    }
  }
  return out;
}

std::string to_json(const std::vector<KernelProfile>& kernels, std::size_t n) {
  std::string out = "{\"kernels\": [";
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    const KernelProfile& k = kernels[i];
    out += i == 0 ? "\n" : ",\n";
    out += fmt::format(
        "  {{\"kernel\": {}, \"launches\": {},\n   \"global_load\":  {},\n   \"global_store\": {},\n"
        "   \"shared_load\":  {},\n   \"shared_store\": {},{}\n   \"worst_sites\": [",
        json_string(k.kernel), k.launches, json_global(k.global_load), json_global(k.global_store),
        json_shared(k.shared_load), json_shared(k.shared_store), json_hopper(k));
    const std::vector<Worst> worst = worst_sites(k, n);
    for (std::size_t j = 0; j < worst.size(); ++j) {
      const Site& s = *worst[j].site;
      out += j == 0 ? "\n" : ",\n";
      out += fmt::format(
          "     {{\"file\": {}, \"line\": {}, \"space\": \"{}\", \"op\": \"{}\", \"instructions\": {}, "
          "\"bytes\": {}, \"sectors\": {}, \"wavefronts\": {}, \"bank_conflicts\": {}, \"share\": {:.4f}}}",
          json_string(s.file), s.line, space_name(s.space), op_name(s.op), s.instructions, s.bytes, s.sectors,
          s.wavefronts, s.bank_conflicts, worst[j].share);
    }
    out += worst.empty() ? "]}" : "]}";
  }
  out += kernels.empty() ? "]}\n" : "\n]}\n";
  return out;
}

void write_json(const std::string& path, const std::vector<KernelProfile>& kernels) {
  const std::string text = to_json(kernels);
  const std::string temporary = path + ".partial";
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    file << text;
    file.close();
    if (!file) {
      std::error_code ignored;
      std::filesystem::remove(temporary, ignored);
      throw std::runtime_error("--profile-json: cannot write " + path);
    }
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) {
    std::filesystem::remove(temporary, error);
    throw std::runtime_error("--profile-json: cannot write " + path);
  }
}

}  // namespace simt::profile
