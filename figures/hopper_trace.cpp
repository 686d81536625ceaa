// figures/hopper_trace.cpp: hopper_trace() (figures.h), what one block of chapter 10's kernel did, in
// the order common/simt ran it, for figures 12 and 13.
//
// How it is read. A Recorder (a simt::observer::TraceListener) is installed by a TraceScope around
// one call of ch10::hopper_attention on the CPU; it keeps, in order, the events simt hands it
// (mbarrier arrivals, completions and waits; TMA copies issued; wgmma issued and waited for). Then
// the events are read as the kernel's pipeline, from what they do, not from the kernel's source:
//   - the producer is the thread that issues the TMA copies; its first copy's mbarrier is q_full,
//     the others' are the full barriers, numbered as stages in the order it first loads into them;
//   - the empty barrier of a stage is the one the producer waited on last before it announced
//     that stage's bytes (expect_tx on full[s]);
//   - a copy's key tile is its box's row coordinate / Bc (ch10::kTileShapes), and phase k of
//     full[s] is the k-th tile the producer loaded into s (its waits, completions and releases
//     refer to that tile);
//   - the consumers are the warpgroups that issue wgmma; each is drawn by its first thread. A wgmma
//     with A from shared memory is part of S = Q_i K_j^T for the tile of its last full wait, one with
//     A from registers of O += P V_j for the oldest tile without its P V yet; the wgmma_wait_group that
//     lets an S group land is where its softmax begins.
// Steps are the places in that order, not times.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <fmt/format.h>

#include "chapters/10_hopper/hopper.h"
#include "common/simt/tools/trace.h"
#include "figures/figures.h"

namespace figures {

namespace {

using simt::observer::AsyncEvent;
using simt::observer::AsyncKind;
using simt::observer::TraceTma;
using simt::observer::TraceWgmma;
using simt::observer::TraceWgmmaWait;
using Raw = std::variant<AsyncEvent, TraceTma, TraceWgmma, TraceWgmmaWait>;

// Keeps every event, in order.
class Recorder final : public simt::observer::TraceListener {
 public:
  std::vector<Raw> events;
  void on(const AsyncEvent& e) override { events.emplace_back(e); }
  void on(const TraceTma& e) override { events.emplace_back(e); }
  void on(const TraceWgmma& e) override { events.emplace_back(e); }
  void on(const TraceWgmmaWait& e) override { events.emplace_back(e); }
};

[[noreturn]] void unexpected(const std::string& what) {
  throw std::runtime_error("hopper_trace: chapter 10's trace does not read as its pipeline: " + what);
}

// What is known of the mbarriers once the producer's events are read.
struct Barriers {
  unsigned producer = 0;
  const void* q_full = nullptr;
  std::vector<const void*> full, empty;           // by stage
  std::map<const void*, std::vector<int>> tiles;  // full[s]: the tile of each phase, in order

  int stage_of_full(const void* bar) const {
    const auto it = std::find(full.begin(), full.end(), bar);
    return it == full.end() ? -1 : static_cast<int>(it - full.begin());
  }
  int stage_of_empty(const void* bar) const {
    const auto it = std::find(empty.begin(), empty.end(), bar);
    return it == empty.end() ? -1 : static_cast<int>(it - empty.begin());
  }
  // The tile of phase `phase` of stage s.
  int tile(int s, std::size_t phase) const {
    const std::vector<int>& t = tiles.at(full[static_cast<std::size_t>(s)]);
    if (phase >= t.size()) unexpected(fmt::format("stage {} has no phase {}", s, phase));
    return t[phase];
  }
};

// The producer's events: q_full, the full and empty barrier of each stage, the tiles of each phase.
Barriers read_barriers(const std::vector<Raw>& events, int Bc) {
  Barriers b;
  bool found = false;
  const void* last_wait = nullptr;
  const void* announced = nullptr;  // the barrier of the producer's last expect_tx
  for (const Raw& raw : events) {
    if (const auto* tma = std::get_if<TraceTma>(&raw)) {
      if (!found) {
        found = true;
        b.producer = tma->thread;
        b.q_full = tma->mbarrier;
        continue;
      }
      if (tma->mbarrier == b.q_full) continue;
      if (b.stage_of_full(tma->mbarrier) < 0) {
        if (last_wait == nullptr || announced != tma->mbarrier) unexpected("a K/V copy without a wait on empty first");
        b.full.push_back(tma->mbarrier);
        b.empty.push_back(last_wait);
      }
      if (announced == tma->mbarrier) b.tiles[tma->mbarrier].push_back(tma->coordinates[1] / Bc);  // a phase's first
      announced = nullptr;
    } else if (const auto* e = std::get_if<AsyncEvent>(&raw); e != nullptr && found && e->thread == b.producer) {
      if (e->kind == AsyncKind::mbarrier_waited) last_wait = e->object;
      if (e->kind == AsyncKind::mbarrier_arrive) announced = e->object;
    }
  }
  if (!found || b.full.empty()) unexpected("no TMA copy of K or V");
  return b;
}

// Reads the events as the pipeline's steps (the list at the top of the file).
class Reader {
 public:
  Reader(const Barriers& b, std::vector<unsigned> consumers, int Bc, HopperTrace& out)
      : b_(b), consumers_(std::move(consumers)), bc_(Bc), out_(out) {}

  void operator()(const TraceTma& tma) {
    const bool q = tma.mbarrier == b_.q_full;
    const int stage = q ? -1 : b_.stage_of_full(tma.mbarrier);
    const int tile = q ? -1 : tma.coordinates[1] / bc_;
    add_or_count(HopperLane::producer, q ? HopperWhat::tma_q : HopperWhat::tma_kv, tile, stage);
  }

  void operator()(const AsyncEvent& e) {
    const int full = b_.stage_of_full(e.object), empty = b_.stage_of_empty(e.object);
    if (e.kind == AsyncKind::mbarrier_completed) {
      if (e.object == b_.q_full) add(HopperLane::barriers, HopperWhat::q_full_done, -1, -1);
      if (full >= 0) add(HopperLane::barriers, HopperWhat::full_done, b_.tile(full, completed_[e.object]++), full);
      if (empty >= 0) add(HopperLane::barriers, HopperWhat::empty_done, b_.tile(empty, completed_[e.object]++), empty);
      return;
    }
    if (e.thread == b_.producer && e.kind == AsyncKind::mbarrier_waited && empty >= 0) {
      // The wait before a refill: the tile that comes next into the stage (the first round's
      // waits pass at once, on the phase before phase 0).
      const std::size_t phase = waited_[{e.thread, e.object}]++;
      add(HopperLane::producer, HopperWhat::wait_empty, b_.tile(empty, phase), empty);
      return;
    }
    const int lane = consumer(e.thread);
    if (lane < 0) return;
    const HopperLane l = lane == 0 ? HopperLane::consumer0 : HopperLane::consumer1;
    if (e.kind == AsyncKind::mbarrier_waited && e.object == b_.q_full) add(l, HopperWhat::wait_q, -1, -1);
    if (e.kind == AsyncKind::mbarrier_waited && full >= 0) {
      const int tile = b_.tile(full, waited_[{e.thread, e.object}]++);
      seen_[e.thread].push_back(tile);
      add(l, HopperWhat::wait_full, tile, full);
    }
    if (e.kind == AsyncKind::mbarrier_arrive && empty >= 0) {
      add(l, HopperWhat::release, b_.tile(empty, arrived_[{e.thread, e.object}]++), empty);
    }
  }

  void operator()(const TraceWgmma& w) {
    const HopperLane l = consumer(w.thread) == 0 ? HopperLane::consumer0 : HopperLane::consumer1;
    std::vector<int>& seen = seen_[w.thread];
    if (seen.empty()) unexpected("a wgmma before any wait on a full barrier");
    int tile = seen.back();
    if (w.a_in_registers) {
      if (pv_group_.count({w.thread, w.group}) == 0) pv_group_[{w.thread, w.group}] = pv_done_[w.thread]++;
      tile = seen.at(static_cast<std::size_t>(pv_group_[{w.thread, w.group}]));
    } else {
      s_groups_[w.thread][w.group] = tile;
    }
    if (l == HopperLane::consumer0 && !w.a_in_registers && tile == out_.descriptor_tile) {
      out_.k_descriptors.push_back(w.desc_b);
    }
    add_or_count(l, w.a_in_registers ? HopperWhat::pv : HopperWhat::scores, tile, stage_of_tile(tile));
  }

  void operator()(const TraceWgmmaWait& w) {
    const int lane = consumer(w.thread);
    if (lane < 0) return;
    // Every S group below committed - pending has landed: its softmax can run.
    std::map<std::uint64_t, int>& groups = s_groups_[w.thread];
    const std::uint64_t landed_below = w.committed - static_cast<std::uint64_t>(w.pending);
    for (auto it = groups.begin(); it != groups.end() && it->first < landed_below;) {
      add(lane == 0 ? HopperLane::consumer0 : HopperLane::consumer1, HopperWhat::softmax, it->second,
          stage_of_tile(it->second));
      it = groups.erase(it);
    }
  }

 private:
  int consumer(unsigned thread) const {
    const auto it = std::find(consumers_.begin(), consumers_.end(), thread);
    return it == consumers_.end() ? -1 : static_cast<int>(it - consumers_.begin());
  }
  int stage_of_tile(int tile) const {
    for (std::size_t s = 0; s < b_.full.size(); ++s) {
      const std::vector<int>& t = b_.tiles.at(b_.full[s]);
      if (std::find(t.begin(), t.end(), tile) != t.end()) return static_cast<int>(s);
    }
    unexpected(fmt::format("tile {} went through no stage", tile));
  }
  void add(HopperLane lane, HopperWhat what, int tile, int stage) { out_.events.push_back({lane, what, tile, stage}); }
  // A second TMA box or wgmma of the same step, on the same lane, is counted in the step.
  void add_or_count(HopperLane lane, HopperWhat what, int tile, int stage) {
    for (auto it = out_.events.rbegin(); it != out_.events.rend(); ++it) {
      if (it->lane != lane) continue;
      if (it->what == what && it->tile == tile) {
        ++it->count;
        return;
      }
      break;
    }
    add(lane, what, tile, stage);
  }

  const Barriers& b_;
  const std::vector<unsigned> consumers_;  // the first threads of the consumer warpgroups
  const int bc_;
  HopperTrace& out_;
  std::map<const void*, std::size_t> completed_;
  std::map<std::pair<unsigned, const void*>, std::size_t> waited_, arrived_;
  std::map<unsigned, std::vector<int>> seen_;                   // per consumer: the tiles of its full waits, in order
  std::map<unsigned, std::map<std::uint64_t, int>> s_groups_;   // per consumer: S groups in flight, their tile
  std::map<std::pair<unsigned, std::uint64_t>, int> pv_group_;  // (consumer, group): which of its P V
  std::map<unsigned, int> pv_done_;
};

}  // namespace

HopperTrace hopper_trace() {
  const fa::Shape4 q_shape{1, 1, hopper_rows_q, hopper_head_dim}, kv_shape{1, 1, hopper_rows_k, hopper_head_dim};
  const fa::Tensor4<float> Q(q_shape, 1.0f), K(kv_shape, 1.0f), V(kv_shape, 1.0f);
  Recorder recorder;
  {
    const simt::observer::TraceScope scope(recorder);
    (void)ch10::hopper_attention(Q, K, V, ch10::Options{}, fa::Device::cpu);
  }
  const int Bc = ch10::kTileShapes[0].Bc;
  HopperTrace out;
  const Barriers barriers = read_barriers(recorder.events, Bc);
  out.stages = static_cast<int>(barriers.full.size());
  for (const auto& [bar, tiles] : barriers.tiles) out.tiles += static_cast<int>(tiles.size());
  std::vector<unsigned> consumers;  // the warpgroups that issue wgmma, by their first thread
  for (const Raw& raw : recorder.events) {
    if (const auto* w = std::get_if<TraceWgmma>(&raw)) consumers.push_back(w->thread);
  }
  std::sort(consumers.begin(), consumers.end());
  consumers.erase(std::unique(consumers.begin(), consumers.end()), consumers.end());
  if (consumers.size() != 2) unexpected(fmt::format("{} warpgroups issue wgmma, not 2", consumers.size()));
  out.producer_thread = barriers.producer;
  out.consumer_threads = {consumers[0], consumers[1]};
  Reader reader(barriers, consumers, Bc, out);
  for (const Raw& raw : recorder.events) std::visit(reader, raw);
  for (const HopperEvent& e : out.events) {
    if (e.what == HopperWhat::scores && e.tile == out.descriptor_tile) out.descriptor_stage = e.stage;
  }
  if (out.k_descriptors.empty() || out.descriptor_stage < 0) {
    unexpected(fmt::format("no S = Q K^T of tile {} by the first consumer", out.descriptor_tile));
  }
  return out;
}

}  // namespace figures
