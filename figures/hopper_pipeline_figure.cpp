// figures/hopper_pipeline_figure.cpp: figure 13, hopper-pipeline.svg (figures.h), animated: one block
// of chapter 10's kernel, event by event, in the order common/simt ran it (hopper_trace): a lane for
// the producer's thread, one for the phases of the mbarriers, one for each consumer warpgroup (its
// first thread). Event k of the trace is drawn at step k, a box coloured by the stage of the ring
// its tile went through: filled where work is issued (TMA, wgmma, the softmax), outlined where a
// wait returns, a thread arrives or a phase completes. The animation shows the boxes a step at a
// time; the finished picture (and the first frame) shows them all. Steps are order, not time.
#include <cstddef>
#include <iterator>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "figures/figures.h"
#include "figures/svg.h"

namespace figures {

namespace {

// Stage s's colour (white text on it); tiles without a stage (Q_i) are on `band`.
constexpr std::string_view kStageFills[] = {dark, mid, "#1b9e77"};
std::string_view stage_fill(int stage) { return stage < 0 ? band : kStageFills[static_cast<std::size_t>(stage) % 3]; }

bool is_work(HopperWhat w) {
  return w == HopperWhat::tma_q || w == HopperWhat::tma_kv || w == HopperWhat::scores || w == HopperWhat::softmax ||
         w == HopperWhat::pv;
}

// The two lines of an event's box.
std::pair<std::string, std::string> box_lines(const HopperEvent& e) {
  const std::string j = e.tile >= 0 ? subscript(static_cast<std::size_t>(e.tile)) : "";
  const std::string s = e.stage >= 0 ? subscript(static_cast<std::size_t>(e.stage)) : "";
  switch (e.what) {
    case HopperWhat::tma_q:
      return {"TMA", "Q\u1d62"};
    case HopperWhat::wait_empty:
      return {"wait", "empty" + s};
    case HopperWhat::tma_kv:
      return {"TMA", "K" + j + "V" + j};
    case HopperWhat::q_full_done:
      return {"q_full", "done"};
    case HopperWhat::full_done:
      return {"full" + s, "done"};
    case HopperWhat::empty_done:
      return {"empty" + s, "done"};
    case HopperWhat::wait_q:
      return {"wait", "q_full"};
    case HopperWhat::wait_full:
      return {"wait", "full" + s};
    case HopperWhat::scores:
      return {"wgmma", "S" + j};
    case HopperWhat::softmax:
      return {"softmax", "P" + j};
    case HopperWhat::pv:
      return {"wgmma", "P" + j + "V" + j};
    case HopperWhat::release:
      return {"arrive", "empty" + s};
  }
  return {"", ""};
}

// What each HopperWhat is, in words (in the enum's order), for the figure's description.
constexpr std::string_view kWhatWords[] = {"the TMA of Q_i",
                                           "the producer's wait on empty[s] returns",
                                           "expect_tx on full[s] and the TMA of K_j, V_j into stage s",
                                           "q_full completes",
                                           "full[s] completes",
                                           "empty[s] completes",
                                           "the wait on q_full returns",
                                           "the wait on full[s] returns",
                                           "the wgmma of S = Q_i K_j^T",
                                           "S_j lands (wgmma_wait_group) and its softmax begins",
                                           "the wgmma of O += P_j V_j",
                                           "the arrival on empty[s]"};
static_assert(std::size(kWhatWords) == static_cast<std::size_t>(HopperWhat::release) + 1);

}  // namespace

std::string hopper_pipeline_figure() {
  const HopperTrace trace = hopper_trace();
  const std::size_t steps = trace.events.size();
  constexpr std::size_t bands = 5;
  const std::size_t per_band = (steps + bands - 1) / bands;
  const double margin = 24, label_w = 210, pitch = 46, box_w = 44, lane_h = 36, box_h = 31;
  const double top = 150, band_h = 4 * lane_h + 40;
  const double left = margin + label_w;
  // When things happen: step k appears at first + k * dt; the loop holds the end a while.
  constexpr double first = 1.0, dt = 0.2, fade = 0.15;
  const double duration = first + dt * static_cast<double>(steps) + 3.0;

  const auto lane_name = [&](HopperLane lane) -> std::string {
    switch (lane) {
      case HopperLane::producer:
        return fmt::format("producer (thread {})", trace.producer_thread);
      case HopperLane::barriers:
        return "mbarriers (phases)";
      case HopperLane::consumer0:
        return fmt::format("consumer 0 (threads {}\u2013{})", trace.consumer_threads[0],
                           trace.consumer_threads[0] + 127);
      case HopperLane::consumer1:
        return fmt::format("consumer 1 (threads {}\u2013{})", trace.consumer_threads[1],
                           trace.consumer_threads[1] + 127);
    }
    return "";
  };

  std::string body = text(margin, 34, "Chapter 10's pipeline, event by event, as simt ran it", R"(class="title")");
  body += small_lines(
      margin, 58, 18,
      {fmt::format("One block of hopper_kernel (head dim {}, {} queries, {} keys: {} key tiles through a ring of {} "
                   "stages), traced by a simt TraceListener (common/simt/tools/trace.h).",
                   hopper_head_dim, hopper_rows_q, hopper_rows_k, trace.tiles, trace.stages),
       "Step k is the k-th event in the order simt's fibers ran them (schedule in_order, one host thread): order, "
       "not time. Each consumer is drawn by its first",
       "thread; its 128 threads do the same. On the CPU a TMA copy lands when a thread first waits on its mbarrier, "
       "so full[s] completes just before a wait on it returns."});
  // The legend.
  const double legend_y = 112;
  double lx = margin;
  for (int s = 0; s < trace.stages; ++s) {
    body += rect(lx, legend_y, 18, 18, fmt::format(R"(fill="{}")", stage_fill(s)));
    body += text(lx + 24, legend_y + 14, fmt::format("stage {}", s), R"(class="small")");
    lx += 90;
  }
  body += rect(lx, legend_y, 18, 18, fmt::format(R"(fill="{}" stroke="{}" stroke-width="1")", band, hairline));
  body += text(lx + 24, legend_y + 14, "Q\u1d62 (no stage)", R"(class="small")");
  lx += 130;
  body += rect(lx, legend_y, 18, 18, fmt::format(R"(fill="{}")", dark));
  body += text(lx + 24, legend_y + 14, "filled: work issued (TMA, wgmma, softmax)", R"(class="small")");
  lx += 320;
  body += rect(lx + 1, legend_y + 1, 16, 16, fmt::format(R"(fill="#ffffff" stroke="{}" stroke-width="2.5")", dark));
  body += text(lx + 24, legend_y + 14, "outlined: a wait returns, an arrival, a phase completes", R"(class="small")");

  const auto lane_index = [](HopperLane lane) { return static_cast<double>(static_cast<int>(lane)); };
  for (std::size_t b = 0; b < bands; ++b) {
    const double y0 = top + band_h * static_cast<double>(b);
    const std::size_t from = b * per_band, to = std::min(steps, from + per_band);
    if (from >= to) break;
    for (const HopperLane lane :
         {HopperLane::producer, HopperLane::barriers, HopperLane::consumer0, HopperLane::consumer1}) {
      const double y = y0 + 18 + lane_h * lane_index(lane);
      body += rect(left - 4, y, pitch * static_cast<double>(per_band) + 4, lane_h - 2,
                   fmt::format(R"(fill="{}")", static_cast<int>(lane) % 2 == 0 ? band : "#f8f8f8"));
      body += text(left - 10, y + 22, lane_name(lane), R"(class="small" text-anchor="end")");
    }
    for (std::size_t k = from; k < to; ++k) {
      const double x = left + pitch * static_cast<double>(k - from);
      body += text(x + box_w / 2, y0 + 12, fmt::format("{}", k), R"(class="small" text-anchor="middle")");
      const HopperEvent& e = trace.events[k];
      const double y = y0 + 18 + lane_h * lane_index(e.lane) + (lane_h - 2 - box_h) / 2;
      const bool work = is_work(e.what);
      const std::string_view fill = stage_fill(e.stage);
      const bool white = work && e.stage >= 0;
      const auto [line1, line2] = box_lines(e);
      Track shown(0.0);
      shown.move(first + dt * static_cast<double>(k), first + dt * static_cast<double>(k) + fade, 1.0);
      std::string box =
          work ? rect(x, y, box_w, box_h, fmt::format(R"(fill="{}")", fill))
               : rect(x + 1.25, y + 1.25, box_w - 2.5, box_h - 2.5,
                      fmt::format(R"(fill="#ffffff" stroke="{}" stroke-width="2.5")", e.stage < 0 ? hairline : fill));
      const std::string_view cls =
          white ? R"(class="small white" text-anchor="middle")" : R"(class="small" text-anchor="middle")";
      box += text(x + box_w / 2, y + 13, line1, fmt::format(R"({} style="font-size:10px")", cls));
      box += text(x + box_w / 2, y + 26, line2, fmt::format(R"({} style="font-size:10px")", cls));
      body += fmt::format("<g>\n{}{}</g>\n", shown.animate("opacity", duration), box);
    }
  }
  const double foot = top + band_h * static_cast<double>(bands) + 6;
  body += small_lines(
      margin, foot, 18,
      {"Read it for the ring: the producer issues the first stages' copies at once (their waits on empty pass on "
       "the phase before phase 0), then refills a stage",
       "only after empty[s] completes, when all 256 consumer threads have arrived; each consumer waits on full[s] "
       "before its S = Q K\u1d40, issues the next tile's S",
       "before this tile's P V, and arrives on empty[s] once both have landed; the named barriers of the ping-pong "
       "(not drawn) alternate the two consumers' S."});

  std::string sequence;
  for (std::size_t k = 0; k < steps; ++k) {
    const HopperEvent& e = trace.events[k];
    sequence += fmt::format("{}{}: {}", k ? "; " : "", k, lane_name(e.lane));
    sequence += fmt::format(", {}", kWhatWords[static_cast<std::size_t>(e.what)]);
    if (e.tile >= 0) sequence += fmt::format(" (j = {}, s = {})", e.tile, e.stage);
  }
  const std::string description = fmt::format(
      "Animated ({:.1f} s loop, which opens on the finished picture). Chapter 10's kernel run by common/simt on one "
      "block, {} key tiles through {} stages: its events in the order simt ran them (order, not time), one lane for "
      "the producer, one for the mbarriers' phases, one for each consumer warpgroup. The steps: {}.",
      loop_length(duration), trace.tiles, trace.stages, sequence);
  return document(left + pitch * static_cast<double>(per_band) + margin, foot + 50,
                  "Chapter 10's pipeline, event by event, as simt ran it", description, body);
}

}  // namespace figures
