// figures/decoding_figure.cpp: figures 9 and 10, chapter 08's split-KV decoding.
//
// Figure 9, decoding-merge.svg (animated): one query row against a cache of merge_keys keys,
// split into three chunks. The partials come from chapter 08's own split kernel
// (ch08::cpu::launch_decoding, whose partials (O_s, L_s) are read back from its scratch buffers)
// and the merged L from its combine kernel; the scores s_j are q . k_j * scale of the same inputs.
//   Step 1 (lines 6-15 of decoding.cuh, the three blocks at once, on three SMs): each chunk's own
//     weights exp(s_j - L_s), which add up to 1 within the chunk.
//   Steps 2-4 (lines 17-22, the combine, one partial at a time): the running max m = max L_s so
//     far; the earlier chunks' terms shrink by rescale = exp(m - m_new) when it rises; the new
//     chunk's terms become exp(s_j - m_new) (its weight exp(L_s - m_new) times its own); the stack
//     on the right is l, the sum of every term so far.
//   Step 5 (lines 23-24): every term divided by l, p_j = exp(s_j - L): the stack ends at 1.
// Figure 10, decoding-waves.svg (static): the thread blocks of one decoding step on 132 SMs over
// time, without splits and with the split count of ch08::choose_splits, for batch 1, 8 K/V heads
// and a 32k cache (waves_context), from the traffic model's bytes per block.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "chapters/08_decoding/decoding.h"
#include "chapters/08_decoding/lab/traffic_model.h"
#include "common/random.h"
#include "common/simt/simt.h"
#include "figures/figures.h"
#include "figures/svg.h"

namespace figures {
namespace {

constexpr double width = 960;

// ---------------------------------------------------------------------------------------------
// Figure 9.

// The row, its chunks' partials and the merge, as chapter 08's kernels compute them.
struct MergeData {
  std::vector<double> s;           // the scores s_j = scale q . k_j, j = 0 .. keys-1
  std::vector<std::size_t> begin;  // chunk c is keys begin[c] .. begin[c + 1] - 1
  std::vector<double> L_part;      // L_s of each chunk (the split kernel)
  double L = 0;                    // the merged L (the combine)
};

MergeData merge_data() {
  const int d = 64, keys = static_cast<int>(merge_keys), splits = 3;
  const fa::Shape4 q_shape{1, 1, 1, static_cast<std::size_t>(d)},
      kv_shape{1, 1, merge_keys, static_cast<std::size_t>(d)};
  const fa::Tensor4<float> Q(q_shape, fa::normal<float>(q_shape.size(), merge_seed));
  fa::Tensor4<float> K(kv_shape, fa::normal<float>(kv_shape.size(), merge_seed + 1));
  const fa::Tensor4<float> V(kv_shape, fa::normal<float>(kv_shape.size(), merge_seed + 2));
  // Chunk 1 holds the keys most like the query: the max rises when its partial is folded in.
  for (std::size_t j = 70; j < 80; ++j) {
    for (std::size_t c = 0; c < static_cast<std::size_t>(d); ++c) K.values[j * d + c] += 0.3f * Q.values[c];
  }
  const ch08::KVCache cache = ch08::paged_cache(K, V, {keys}, 48, merge_seed + 3);
  const ch08::Plan plan = ch08::check_problem(Q.shape, cache.layout(), {.scale = merge_scale, .splits = splits});

  // The split kernel and the combine on simt's device memory (the CPU's), the partials kept.
  const simt::DeviceBuffer<float> q{std::span<const float>(Q.values)}, k{std::span<const float>(cache.K.values)},
      v{std::span<const float>(cache.V.values)};
  const simt::DeviceBuffer<int> table{std::span<const int>(cache.block_table)},
      lengths{std::span<const int>(cache.cache_seqlens)};
  simt::DeviceBuffer<float> O_parts(static_cast<std::size_t>(splits) * d), L_parts(splits), O(d), L(1);
  ch08::cpu::launch_decoding(q.data(), k.data(), v.data(), table.data(), lengths.data(), O_parts.data(), L_parts.data(),
                             O.data(), L.data(), plan.problem, simt::LaunchMode::synchronous);

  MergeData m;
  for (std::size_t j = 0; j < merge_keys; ++j) {
    double dot = 0;
    for (int c = 0; c < d; ++c) dot += static_cast<double>(Q.values[c]) * K.values[j * d + c];
    m.s.push_back(merge_scale * dot);
  }
  const int tiles_per_split = (keys + 63) / 64 / splits + ((keys + 63) / 64 % splits != 0);
  for (int c = 0; c <= splits; ++c) m.begin.push_back(std::min<std::size_t>(c * tiles_per_split * 64, merge_keys));
  for (float x : L_parts.to_host()) m.L_part.push_back(x);
  m.L = L.to_host()[0];
  return m;
}

std::string merge_body(const MergeData& m, double top, double& bottom, double& duration) {
  const std::size_t n = m.s.size(), chunks = m.L_part.size();
  const double x0 = 100, x1 = 760, slot = (x1 - x0) / static_cast<double>(n);
  const double score_top = top + 30, score_bottom = top + 130, term_top = top + 170, term_bottom = top + 330;
  const double stack_x = 830, stack_w = 44;
  // Times: intro, step 1, one step per partial, the division, a pause.
  const double t_parallel = 1.0, step = 3.0, t_merge = t_parallel + step,
               t_divide = t_merge + step * static_cast<double>(chunks);
  duration = t_divide + 4.0;
  const auto chunk_of = [&](std::size_t j) {
    std::size_t c = 0;
    while (j >= m.begin[c + 1]) ++c;
    return c;
  };

  // The merge's states (lines 18-22): m and l after folding partial c, in double, as the kernel.
  std::vector<double> m_after, l_after;
  double run_m = -INFINITY, run_l = 0;
  for (std::size_t c = 0; c < chunks; ++c) {
    const double m_new = std::max(run_m, m.L_part[c]);
    const double rescale = std::exp(run_m - m_new);
    run_l = run_l * rescale + std::exp(m.L_part[c] - m_new);
    run_m = m_new;
    m_after.push_back(run_m);
    l_after.push_back(run_l);
  }
  const double l_max = std::ceil(run_l);

  std::string out;
  // The chunks: bands under both plots, each named with the SM that walks it.
  for (std::size_t c = 0; c < chunks; ++c) {
    const double bx = x0 + slot * static_cast<double>(m.begin[c]);
    const double bw = slot * static_cast<double>(m.begin[c + 1] - m.begin[c]);
    if (c % 2 == 0) out += rect(bx, score_top - 6, bw, term_bottom - score_top + 6, fmt::format(R"(fill="{}")", band));
    out += text(bx + bw / 2, term_bottom + 18, fmt::format("keys {}\u2013{}", m.begin[c], m.begin[c + 1] - 1),
                R"(class="small" text-anchor="middle")");
    out += text(bx + bw / 2, term_bottom + 34, fmt::format("block {}, SM {}", c, c),
                R"(class="small" text-anchor="middle")");
  }
  // The scores, and their axis.
  // (up to the largest L_s too: the running max m of the merge is drawn on this axis)
  double s_lo = 0, s_hi = std::ceil(m_after.back());
  for (double x : m.s) s_lo = std::min(s_lo, std::floor(x)), s_hi = std::max(s_hi, std::ceil(x));
  const auto score_y = [&](double v) { return score_bottom - (v - s_lo) / (s_hi - s_lo) * (score_bottom - score_top); };
  for (double v : {s_lo, 0.0, s_hi}) {
    out += line(x0 - 4, score_y(v), x1, score_y(v),
                fmt::format(R"(stroke="{}" stroke-width="{}")", hairline, v == 0 ? 1.2 : 0.4));
    out += text(x0 - 8, score_y(v) + 5, number(v), R"(class="small" text-anchor="end")");
  }
  out += vertical_text(48, (score_top + score_bottom) / 2, "score s_j");
  for (std::size_t j = 0; j < n; ++j) {
    const double y0 = score_y(0), y = score_y(m.s[j]);
    out += rect(x0 + slot * static_cast<double>(j), std::min(y, y0), slot * 0.8, std::fabs(y0 - y),
                fmt::format(R"(fill="{}")", light));
  }
  // The term axis, from 0 to the largest value a bar takes (each chunk's own terms at step 1 are the
  // largest: every later one is that times a factor <= 1), rounded up to a tenth.
  double term_max = 0.1;
  for (std::size_t j = 0; j < n; ++j) term_max = std::max(term_max, std::exp(m.s[j] - m.L_part[chunk_of(j)]));
  term_max = std::ceil(term_max * 10) / 10;
  const auto term_y = [&](double v) { return term_bottom - v / term_max * (term_bottom - term_top); };
  for (double v : {0.0, term_max / 2, term_max}) {
    out += line(x0 - 4, term_y(v), x1, term_y(v),
                fmt::format(R"(stroke="{}" stroke-width="{}")", hairline, v == 0 ? 1.2 : 0.4));
    out += text(x0 - 8, term_y(v) + 5, fmt::format("{:.2f}", v), R"(class="small" text-anchor="end")");
  }
  out += vertical_text(48, (term_top + term_bottom) / 2, "term, weight");
  // The stack: l as a pile of every chunk's terms.
  const double stack_h = term_bottom - score_top;
  const auto stack_y = [&](double v) { return term_bottom - v / l_max * stack_h; };
  for (double v = 0; v <= l_max + 1e-9; v += 1) {
    out += text(stack_x - 10, stack_y(v) + 5, number(v), R"(class="small" text-anchor="end")");
  }
  out += line(stack_x - 6, stack_y(1), stack_x + stack_w + 6, stack_y(1),
              fmt::format(R"(stroke="{}" stroke-width="1.5" stroke-dasharray="4 3")", ink));
  out += text(stack_x + stack_w / 2, score_top - 12, "sum l", R"(class="bold" text-anchor="middle")");

  // Each key's term: exp(s_j - L_c) after step 1, exp(s_j - m) once its chunk is folded (and
  // rescaled with every later rise of m), p_j = exp(s_j - L) after the division. Chunk c's pieces of
  // the stack appear when it is folded.
  const auto term_at = [&](std::size_t j, std::size_t folded) {  // after `folded` partials are folded
    const std::size_t c = chunk_of(j);
    if (c >= folded) return std::exp(m.s[j] - m.L_part[c]);
    return std::exp(m.s[j] - m_after[folded - 1]);
  };
  const auto below = [&](std::size_t j, std::size_t folded) {  // the stack under key j's piece
    double sum = 0;
    for (std::size_t i = 0; i < j; ++i) sum += chunk_of(i) < folded ? term_at(i, folded) : 0.0;
    return sum;
  };
  double p_below = 0;
  const double term_h = (term_bottom - term_top) / term_max;  // pixels per unit
  for (std::size_t j = 0; j < n; ++j) {
    const std::size_t c = chunk_of(j);
    BarTrack bar(term_bottom, 0.0);
    bar.move(t_parallel, t_parallel + 0.8, term_bottom, term_at(j, 0) * term_h);  // step 1, all chunks at once
    BarTrack piece(stack_y(0), 0.0);
    for (std::size_t f = 1; f <= chunks; ++f) {
      const double at = t_merge + step * static_cast<double>(f - 1);
      if (f - 1 == c) {  // its chunk is folded: the term becomes exp(s_j - m_new), and joins the stack
        bar.move(at + 1.2, at + 2.0, term_bottom, term_at(j, f) * term_h);
        piece.jump(at + 1.2, stack_y(below(j, f)), 0.0);
        piece.move(at + 1.2, at + 2.0, stack_y(below(j, f)), term_at(j, f) / l_max * stack_h);
      } else if (f - 1 > c) {  // an earlier chunk: rescaled when m rises
        bar.move(at + 0.4, at + 1.0, term_bottom, term_at(j, f) * term_h);
        piece.move(at + 0.4, at + 1.0, stack_y(below(j, f)), term_at(j, f) / l_max * stack_h);
      }
    }
    const double p = std::exp(m.s[j] - m.L);
    bar.move(t_divide + 0.3, t_divide + 1.3, term_bottom, p * term_h);
    piece.move(t_divide + 0.3, t_divide + 1.3, stack_y(p_below), p / l_max * stack_h);
    p_below += p;
    const std::string_view fill = c % 2 == 0 ? mid : dark;
    out += rect(x0 + slot * static_cast<double>(j), bar.y(), slot * 0.8, bar.height(),
                fmt::format(R"(fill="{}")", fill), bar.animate(duration));
    out +=
        rect(stack_x, piece.y(), stack_w, piece.height(), fmt::format(R"(fill="{}")", fill), piece.animate(duration));
  }

  // The running max over the scores (line 18), dashed, from the first fold on.
  {
    Track y(score_y(m_after[0])), opacity(0.0);
    opacity.jump(t_merge + 0.2, 1.0);
    for (std::size_t f = 1; f < chunks; ++f) {
      y.move(t_merge + step * static_cast<double>(f) + 0.1, t_merge + step * static_cast<double>(f) + 0.4,
             score_y(m_after[f]));
    }
    out += line(x0, y.value(), x1, y.value(),
                fmt::format(R"(stroke="{}" stroke-width="2.5" stroke-dasharray="9 5")", dark),
                y.animate("y1", duration) + y.animate("y2", duration) + opacity.animate("opacity", duration));
    Track label_y(score_y(m_after[0]) + 5);  // "m" at the line's right end, moving with it
    for (std::size_t f = 1; f < chunks; ++f) {
      label_y.move(t_merge + step * static_cast<double>(f) + 0.1, t_merge + step * static_cast<double>(f) + 0.4,
                   score_y(m_after[f]) + 5);
    }
    out += text(x1 + 8, score_y(m_after.back()) + 5, "m = max L\u209b", R"(class="small bold")",
                label_y.animate("y", duration) + opacity.animate("opacity", duration));
  }
  // Each chunk's L_s over its band, from step 1 on.
  for (std::size_t c = 0; c < chunks; ++c) {
    const double cx = x0 + slot * static_cast<double>(m.begin[c] + m.begin[c + 1]) / 2;
    Track shown(0.0);
    shown.jump(t_parallel + 0.8, 1.0);
    out += text(cx, term_top - 8, fmt::format("L{} = {}", subscript(c), number(m.L_part[c])),
                R"(class="bold" text-anchor="middle")", shown.animate("opacity", duration));
  }
  // The captions: a line for each step.
  const double line1 = term_bottom + 62, line2 = term_bottom + 84;
  const auto caption = [&](double from, double until, const std::string& first, const std::string& second) {
    const std::string shown = shown_between(from, until).animate("opacity", duration);
    const std::string attribute = until >= duration ? "" : R"(opacity="0")";
    out += text(30, line1, first, attribute, shown);
    out += text(30, line2, second, std::string(R"(class="small")") + (attribute.empty() ? "" : " " + attribute), shown);
  };
  caption(0, t_parallel, "One query row, its keys split into three chunks: one thread block (and one SM) each.",
          "The split kernel of chapter 08 runs the three blocks at the same time.");
  caption(
      t_parallel, t_merge,
      "Lines 6-15, each block alone: its chunk's terms exp(s_j \u2212 L\u209b), which add up to 1 (normalised).",
      "Each block writes its partial: O\u209b = its chunk's weighted sum of V, and L\u209b = m\u209b + log l\u209b.");
  for (std::size_t f = 0; f < chunks; ++f) {
    const double at = t_merge + step * static_cast<double>(f);
    const double m_before = f == 0 ? -INFINITY : m_after[f - 1], l_before = f == 0 ? 0.0 : l_after[f - 1];
    const double rescale = std::exp(m_before - m_after[f]);
    caption(at, at + step,
            fmt::format("The combine folds in partial {}: line 18, m = max({}, L{}) = {}; line 19, rescale = {}.", f,
                        number(m_before), subscript(f), number(m_after[f]), number(rescale)),
            fmt::format("Line 20: l = {} \u00d7 {} + exp(L{} \u2212 m) = {}; line 21: acc the same way (chunk {}'s "
                        "terms now exp(s_j \u2212 m)).",
                        number(l_before), number(rescale), subscript(f), number(l_after[f]), f));
  }
  caption(t_divide, duration,
          fmt::format("Lines 23-24: O = acc / l and L = m + log l = {}: every term divided by l is the weight p_j.",
                      number(m.L)),
          "The weights of all three chunks add up to 1: the softmax of the whole row, from three partials.");
  bottom = line2 + 16;
  return out;
}

// ---------------------------------------------------------------------------------------------
// Figure 10.

struct WavePanel {
  std::string heading;
  int splits = 1;
  std::int64_t blocks = 0;
  double block_time = 1.0;  // one block's time, the unsplit block's walk of the whole cache = 1
};

std::string wave_panel(const WavePanel& p, double top, double t_max) {
  const int sms = ch08::kDefaultSms;
  const double x0 = 110, x1 = 900, row_h = 2.4;
  const auto time_x = [&](double t) { return x0 + t / t_max * (x1 - x0); };
  std::string out = text(30, top + 18, p.heading, R"(class="heading")");
  const double grid_top = top + 34, grid_bottom = grid_top + row_h * sms;
  out += rect(x0, grid_top, x1 - x0, grid_bottom - grid_top, fmt::format(R"(fill="{}")", band));
  // Blocks fill the SMs in order, one per SM, a new wave when every SM has one.
  const std::int64_t total = p.blocks * p.splits;
  for (std::int64_t b = 0; b < total; ++b) {
    const double wave = static_cast<double>(b / sms);
    const double y = grid_top + row_h * static_cast<double>(b % sms);
    out += rect(time_x(wave * p.block_time), y, time_x((wave + 1) * p.block_time) - time_x(wave * p.block_time),
                row_h * 0.8, fmt::format(R"(fill="{}")", b % 2 == 0 ? mid : dark));
  }
  out += vertical_text(60, (grid_top + grid_bottom) / 2, fmt::format("{} SMs", sms));
  out += text(x0 - 8, grid_top + 10, "0", R"(class="small" text-anchor="end")");
  out += text(x0 - 8, grid_bottom, std::to_string(sms - 1), R"(class="small" text-anchor="end")");
  const double busy = std::ceil(static_cast<double>(total) / sms) * p.block_time;
  out += line(time_x(busy), grid_top - 4, time_x(busy), grid_bottom + 4,
              fmt::format(R"(stroke="{}" stroke-width="2" stroke-dasharray="6 4")", ink));
  // The label below the busy SMs, beside the line, inside the figure.
  const bool right = busy < 0.8 * t_max;
  const double label_y = grid_top + row_h * static_cast<double>(std::min<std::int64_t>(total, sms)) + 16;
  out += text(time_x(busy) + (right ? 6 : -6), std::min(label_y, grid_bottom - 4), fmt::format("done at {:.3f}", busy),
              right ? R"(class="small bold")" : R"(class="small bold" text-anchor="end")");
  return out;
}

}  // namespace

std::string decoding_merge_figure() {
  const MergeData m = merge_data();
  double bottom = 0, duration = 0;
  std::string body = text(30, 30, "Split-KV decoding: three partials merged by chapter 02's rule", R"(class="title")");
  body += text(30, 52,
               "\u201cLine n\u201d: the algorithm at the top of chapters/08_decoding/decoding.cuh, whose kernels "
               "computed these L\u209b and L",
               R"(class="small")");
  body += merge_body(m, 70, bottom, duration);
  std::string partials;
  for (double L : m.L_part) partials += (partials.empty() ? "" : ", ") + fmt::format("{:.4f}", L);
  const std::string description = fmt::format(
      "Animated ({:.1f} s loop, which opens on the finished picture). One query row against {} keys (head_dim 64, "
      "fa::normal seed {}, scale {}), in a paged cache split into three chunks. Each chunk's block computes its "
      "terms exp(s_j - L_s) on its own (partials L_s = {}), then the combine folds the partials in one at a time: "
      "the running max m rises, earlier terms shrink by exp(m - m_new), the stack of all terms is l; at the end "
      "every term divided by l is the softmax weight, L = {:.4f}.",
      loop_length(duration), m.s.size(), merge_seed, merge_scale, partials, m.L);
  return document(width, bottom + 10, "Split-KV decoding: partials and their merge", description, body);
}

std::string decoding_waves_figure() {
  // Batch 1, 8 K/V heads (64 query heads, 8 to a group), one new token, a 32k cache of bf16.
  ch08::DecodeProblem p;
  p.batch = 1;
  p.heads = 64;
  p.kv_heads = 8;
  p.seq_len_q = 1;
  p.head_dim = 128;
  p.tile = ch08::kTileShapes[0];
  p.cache_type = ch08::CacheType::bf16;
  const std::vector<int> lengths{static_cast<int>(waves_context)};
  const int key_tiles = static_cast<int>((waves_context + p.tile.Bc - 1) / p.tile.Bc);
  const std::int64_t blocks = std::int64_t{p.batch} * p.kv_heads * p.row_blocks();
  const ch08::SplitChoice choice = ch08::choose_splits(blocks, ch08::kDefaultSms, key_tiles);
  // One block's time is its share of the cache (every SM streaming at the same rate: the model).
  p.splits = 1;
  const double unsplit = static_cast<double>(ch08::decode_traffic(p, lengths).cache) / static_cast<double>(blocks);
  const int tiles_per_split = (key_tiles + choice.splits - 1) / choice.splits;
  const double split_time = static_cast<double>(tiles_per_split) / key_tiles;

  ch08::SplitChoice alone = choice;  // one split, as if given
  alone.splits = 1;
  alone.automatic = false;
  std::string body = text(30, 30, "One decoding step on 132 SMs, without and with splits", R"(class="title")");
  body += text(30, 52,
               fmt::format("Batch 1, 64 query heads on 8 K/V heads (a block each), one new token, {}k keys of bf16: "
                           "{:.0f} MB of cache",
                           waves_context / 1024, unsplit * static_cast<double>(blocks) / 1e6),
               R"(class="small")");
  const double panel = 34 + 2.4 * ch08::kDefaultSms + 30;
  const auto heading = [](const char* what, const ch08::SplitChoice& c) {
    return fmt::format("{}: {} blocks, {:.2f} waves, {:.0f}% efficiency", what, c.blocks * c.splits, c.waves(),
                       100 * c.efficiency());
  };
  body += wave_panel({heading("a) One split", alone), 1, blocks, 1.0}, 70, 1.0);
  body += wave_panel({heading(fmt::format("b) {} splits, FlashAttention-2's rule", choice.splits).c_str(), choice),
                      choice.splits, blocks, split_time},
                     70 + panel, 1.0);
  const double axis_y = 70 + 2 * panel + 6;
  for (double t : {0.0, 0.25, 0.5, 0.75, 1.0}) {
    const double x = 110 + t * (900 - 110);
    body += line(x, axis_y - 6, x, axis_y, fmt::format(R"(stroke="{}")", ink));
    body += text(x, axis_y + 16, fmt::format("{:.2f}", t), R"(class="small" text-anchor="middle")");
  }
  body += text(505, axis_y + 36, "time (one unsplit block's walk of its K/V head's cache = 1)",
               R"(class="small" text-anchor="middle")");
  body += text(30, axis_y + 62,
               "A model, not a measurement: every block streams its keys at the same rate. A lone block cannot pull "
               "the whole DRAM bandwidth,",
               R"(class="small")");
  body +=
      text(30, axis_y + 80,
           "which is why 8 busy SMs leave the step slow; the split count fills the SMs, and the combine (not drawn) "
           "merges the partials.",
           R"(class="small")");
  const std::string description = fmt::format(
      "Static. Thread blocks of one decoding step on 132 SMs over time. a) Without splits: {} blocks, one per K/V "
      "head, on {} SMs, each walking the whole {}k-key cache: {}. b) {}: each block walks 1/{} of the keys.",
      blocks, blocks, waves_context / 1024, ch08::explain(alone), ch08::explain(choice), choice.splits);
  return document(width, axis_y + 96, "One decoding step on 132 SMs, without and with splits", description, body);
}

}  // namespace figures
