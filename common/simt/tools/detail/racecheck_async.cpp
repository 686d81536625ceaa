// The race checker's rules for Hopper's asynchronous instructions (racecheck_async.h).
//
// This file is never instrumented itself. Each thread counts its releases (an arrival, the start of
// a TMA copy, a proxy fence, a barrier), from 1; an access takes its thread's count as its epoch,
// and a release publishes the count and then moves it on by one. The lanes of a warp are taken to
// run in lock-step (the consumer code of a Hopper kernel does): what lane t of warp w did before
// its n-th release is what every lane did before its n-th, so a warp's entry in a clock is the
// count its lanes published, and a warp's view (what it has acquired) is shared by its lanes. An
// access of epoch e by warp w is ordered before whatever has seen w's entry reach e.
#include "common/simt/tools/detail/racecheck_async.h"

#include <algorithm>

namespace simt::racecheck::detail {
namespace {

constexpr unsigned kLanes = 32;
constexpr std::uint32_t kChunkBytes = 16;
constexpr std::uint32_t kNotRetired = ~std::uint32_t{0};
constexpr std::size_t kNamedGenerations = 4;  // uses of one named barrier a waiter may lag behind

std::uint32_t next_block_stamp() {
  thread_local std::uint32_t serial = 0;
  return ++serial;
}

void join(std::vector<std::uint32_t>& into, const std::vector<std::uint32_t>& from) {
  if (into.size() < from.size()) into.resize(from.size(), 0);
  for (std::size_t i = 0; i < from.size(); ++i) into[i] = std::max(into[i], from[i]);
}

}  // namespace

void AsyncOrder::begin(unsigned threads, std::size_t shared_bytes, const Example& block) {
  block_ = block;
  warps_ = (threads + kLanes - 1) / kLanes;
  block_stamp_ = next_block_stamp();
  clocks_.assign(warps_, Clock(warps_, 0));
  for (unsigned w = 0; w < warps_; ++w) clocks_[w][w] = 1;
  counts_.assign(threads, 1);
  fences_.assign(threads, {});
  const std::size_t chunks = (shared_bytes + kChunkBytes - 1) / kChunkBytes;
  if (chunks_.size() < chunks) chunks_.resize(chunks);
  reads_.clear();
  copies_.clear();
  barriers_.clear();
  named_.clear();
}

AsyncOrder::Chunk& AsyncOrder::chunk(std::uint32_t index) {
  Chunk& c = chunks_[index];
  if (c.block_stamp != block_stamp_) {
    c.block_stamp = block_stamp_;
    c.tma = false;
    c.clear_accesses();
  }
  return c;
}

AsyncOrder::Access AsyncOrder::access_of(unsigned thread, std::uintptr_t site, std::uint32_t bytes) const {
  Access x;
  x.thread = static_cast<std::uint16_t>(thread);
  x.warp = static_cast<std::uint16_t>(thread / kLanes);
  x.epoch = thread < counts_.size() ? counts_[thread] : 0;
  x.site = site;
  x.bytes = static_cast<std::uint8_t>(std::min<std::uint32_t>(bytes, 255));
  return x;
}

// Every wgmma or TMA store read of chunk k that c has not seen retired races with x.
void AsyncOrder::report_open_reads(Records& out, const Chunk& k, const Clock& c, const Access& x, Operation op,
                                   std::uint32_t chunk) {
  for (const std::uint32_t id : k.async) {
    const AsyncRead& r = reads_[id];
    if (!retired_before(r, c))
      report(out, Kind::write_after_read, access_of(r.thread, r.site, kChunkBytes), r.op, x, op, chunk);
  }
}

void AsyncOrder::release_into(Clock& target, unsigned thread) {
  const unsigned warp = thread / kLanes;
  const std::uint32_t own = target.size() > warp ? target[warp] : 0;
  join(target, clocks_[warp]);
  target[warp] = std::max(own, counts_[thread]);
  tick(thread);
}

void AsyncOrder::tick(unsigned thread) {
  const unsigned warp = thread / kLanes;
  ++counts_[thread];
  clocks_[warp][warp] = std::max(clocks_[warp][warp], counts_[thread]);
}

// The first proxy fence of the writing thread at or after the write, seen by the clock c.
bool AsyncOrder::fenced(const Access& write, const Clock& c) const {
  const std::vector<std::uint32_t>& f = fences_[write.thread];
  const auto it = std::lower_bound(f.begin(), f.end(), write.epoch);
  return it != f.end() && c[write.warp] >= *it;
}

// Some warp of the reader had covered the read with its wait when it released what c has seen.
bool AsyncOrder::retired_before(const AsyncRead& r, const Clock& c) const {
  for (std::size_t i = 0; i < r.retired.size(); ++i) {
    if (r.retired[i] != kNotRetired && c[r.first_warp + i] >= r.retired[i]) return true;
  }
  return false;
}

void AsyncOrder::report(Records& out, Kind kind, const Access& first, Operation first_op, const Access& second,
                        Operation second_op, std::uint32_t chunk) {
  Example e = block_;
  e.offset = std::uint64_t{chunk} * kChunkBytes;
  e.who = Who::warps;
  e.thread_a = first.thread;
  e.thread_b = second.thread;
  const HazardKey key{kind, Space::shared, false, SiteOp{first.site, first_op, first.bytes},
                      SiteOp{second.site, second_op, second.bytes}};
  out[key].add(1, e);
}

void AsyncOrder::generic(unsigned thread, std::uintptr_t site, std::uint64_t offset, std::uint32_t bytes, bool write,
                         Records& out) {
  const unsigned warp = thread / kLanes;
  if (warp >= warps_ || bytes == 0) return;
  const Clock& c = clocks_[warp];
  Access x = access_of(thread, site, bytes);
  const Operation op = write ? Operation::write : Operation::read;
  const auto first = static_cast<std::uint32_t>(offset / kChunkBytes);
  const auto last = static_cast<std::uint32_t>((offset + bytes - 1) / kChunkBytes);
  for (std::uint32_t i = first; i <= last && i < chunks_.size(); ++i) {
    Chunk& k = chunk(i);
    if (k.tma && !ordered(k.tma_write, c)) {
      report(out, write ? Kind::write_after_write : Kind::read_after_write, k.tma_write, Operation::tma_write, x, op,
             i);
    }
    if (!write) {
      const auto mine = std::find_if(k.reads.begin(), k.reads.end(), [&](const Access& r) { return r.warp == warp; });
      if (mine == k.reads.end()) {
        k.reads.push_back(x);
      } else {
        *mine = x;
      }
      continue;
    }
    report_open_reads(out, k, c, x, op, i);
    k.async.clear();
    // The bytes of the chunk this write covers: older writes of those bytes no longer matter.
    const std::uint64_t lo = std::max<std::uint64_t>(offset, std::uint64_t{i} * kChunkBytes);
    const std::uint64_t hi = std::min<std::uint64_t>(offset + bytes, std::uint64_t{i + 1} * kChunkBytes);
    x.mask = 0;
    for (std::uint64_t b = lo; b < hi; ++b) x.mask = static_cast<std::uint16_t>(x.mask | (1u << (b % kChunkBytes)));
    for (Access& w : k.writes) w.mask = static_cast<std::uint16_t>(w.mask & ~x.mask);
    std::erase_if(k.writes, [](const Access& w) { return w.mask == 0; });
    k.writes.push_back(x);
  }
}

void AsyncOrder::block_sync() {
  Clock all(warps_, 0);
  for (const Clock& c : clocks_) join(all, c);
  for (unsigned w = 0; w < warps_; ++w) clocks_[w] = all;
  for (unsigned t = 0; t < counts_.size(); ++t) tick(t);
}

void AsyncOrder::acquire_if(unsigned thread, const Clock* from) {
  if (from != nullptr && thread / kLanes < warps_) join(clocks_[thread / kLanes], *from);
}

void AsyncOrder::on(const observer::AsyncEvent& e) {
  using observer::AsyncKind;
  const unsigned t = e.thread;
  if (t / kLanes >= warps_) return;
  const auto parity = static_cast<unsigned>(e.value & 1u);
  const auto id = static_cast<unsigned>(e.value);
  switch (e.kind) {
    case AsyncKind::proxy_fence:
      fences_[t].push_back(counts_[t]);
      tick(t);
      return;
    case AsyncKind::mbarrier_init:
      barriers_[e.object] = Barrier{};
      return;
    case AsyncKind::mbarrier_arrive:
      release_into(barriers_[e.object].phase, t);
      return;
    case AsyncKind::mbarrier_completed: {
      Barrier& b = barriers_[e.object];
      b.done[parity] = std::move(b.phase);
      b.completed[parity] = true;
      b.phase.clear();
      return;
    }
    case AsyncKind::mbarrier_waited: {
      const auto it = barriers_.find(e.object);
      if (it != barriers_.end() && it->second.completed[parity]) acquire_if(t, &it->second.done[parity]);
      return;
    }
    case AsyncKind::named_arrive:
      release_into(named_[id].use, t);
      return;
    case AsyncKind::named_completed: {
      Named& n = named_[id];
      n.done[e.generation] = std::move(n.use);
      n.use.clear();
      while (n.done.size() > kNamedGenerations) n.done.erase(n.done.begin());
      return;
    }
    case AsyncKind::named_passed: {
      const auto it = named_[id].done.find(e.generation);
      acquire_if(t, it != named_[id].done.end() ? &it->second : nullptr);
      return;
    }
    case AsyncKind::tma_landed:
      if (e.value < copies_.size()) join(barriers_[e.object].phase, copies_[e.value]);
      return;
    case AsyncKind::read_retired:
      retired(static_cast<std::uint32_t>(e.value), t);
      return;
  }
}

std::uint32_t AsyncOrder::tma_write(unsigned thread, std::uintptr_t site, const std::vector<std::uint32_t>& chunks,
                                    Records& out) {
  const unsigned warp = thread / kLanes;
  const auto copy = static_cast<std::uint32_t>(copies_.size());
  if (warp >= warps_) {
    copies_.emplace_back();
    return copy;
  }
  const Clock& c = clocks_[warp];
  const Access x = access_of(thread, site, kChunkBytes);
  for (const std::uint32_t i : chunks) {
    if (i >= chunks_.size()) continue;
    Chunk& k = chunk(i);
    for (const Access& w : k.writes) {
      if (!ordered(w, c)) report(out, Kind::write_after_write, w, Operation::write, x, Operation::tma_write, i);
    }
    for (const Access& r : k.reads) {
      if (!ordered(r, c)) report(out, Kind::write_after_read, r, Operation::read, x, Operation::tma_write, i);
    }
    report_open_reads(out, k, c, x, Operation::tma_write, i);
    k.tma = true;
    k.tma_write = x;
    k.clear_accesses();
  }
  Clock published;
  release_into(published, thread);
  copies_.push_back(std::move(published));
  return copy;
}

std::uint32_t AsyncOrder::async_read(Operation op, unsigned thread, std::uintptr_t site,
                                     const std::vector<std::uint32_t>& chunks, Records& out) {
  const unsigned first_warp = thread / kLanes;
  const unsigned warps = op == Operation::wgmma_read ? 4 : 1;
  const auto id = static_cast<std::uint32_t>(reads_.size());
  AsyncRead r{op, site, static_cast<std::uint16_t>(thread), static_cast<std::uint16_t>(first_warp),
              std::vector<std::uint32_t>(warps, kNotRetired)};
  reads_.push_back(std::move(r));
  if (first_warp + warps > warps_) return id;
  // What the read has seen: for wgmma, every warp of the warpgroup has reached it.
  Clock c(warps_, 0);
  for (unsigned w = first_warp; w < first_warp + warps; ++w) join(c, clocks_[w]);
  const Access x = access_of(thread, site, kChunkBytes);
  for (const std::uint32_t i : chunks) {
    if (i >= chunks_.size()) continue;
    Chunk& k = chunk(i);
    if (k.tma && !ordered(k.tma_write, c)) {
      report(out, Kind::read_after_write, k.tma_write, Operation::tma_write, x, op, i);
    }
    for (const Access& w : k.writes) {
      if (!ordered(w, c)) {
        report(out, Kind::read_after_write, w, Operation::write, x, op, i);
      } else if (!fenced(w, c)) {
        report(out, Kind::unfenced_write, w, Operation::write, x, op, i);
      }
    }
    const auto same = std::find_if(k.async.begin(), k.async.end(), [&](std::uint32_t other) {
      return reads_[other].op == op && reads_[other].first_warp == first_warp;
    });
    if (same == k.async.end()) {
      k.async.push_back(id);
    } else {
      *same = id;
    }
  }
  return id;
}

void AsyncOrder::retired(std::uint32_t read, unsigned thread) {
  if (read >= reads_.size()) return;
  AsyncRead& r = reads_[read];
  const unsigned warp = thread / kLanes;
  if (warp < r.first_warp || warp - r.first_warp >= r.retired.size() || warp >= warps_) return;
  std::uint32_t& mine = r.retired[warp - r.first_warp];
  if (mine == kNotRetired) mine = counts_[thread];
}

}  // namespace simt::racecheck::detail
