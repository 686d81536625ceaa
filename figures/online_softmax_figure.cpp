// figures/online_softmax_figure.cpp: figure 1, online-softmax.svg, the online softmax as it runs.
//
// Everything drawn comes from ch02::online_softmax_trace (chapters/02_online_softmax/trace.h): the
// scores, m before and after each block, the factor c, l before and after, every term
// exp(x_j - m) after every block, and the weights p. Two panels play one after the other: a) the
// worked example 1, 3, 5, 2 in blocks of 2; b) a seeded random row of 32 scores in blocks of 4.
// The line numbers here, in the code and in the figure's captions are those of the algorithm at
// the top of chapters/02_online_softmax/online_softmax.h. For each step of the trace (one block):
//      the block's scores appear (top plot): its "for each block B"
//   2. the running max m, the dashed line, moves to the step's m_after
//   3. every earlier term exp(x_j - m) shrinks by the same factor c (when the max rose); the stack
//      on the right, l as a pile of the terms, shrinks with them
//   4. the block's own terms grow in, on the bars and on top of the stack
// and after the last block:
//   6. p_j = exp(x_j - m) / l (dark bars): every term divided by the same l; the stack of the p_j
//      ends at 1
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join

#include "chapters/02_online_softmax/trace.h"
#include "common/random.h"
#include "figures/figures.h"
#include "figures/svg.h"

namespace figures {
namespace {

using Trace = ch02::Trace<double>;

constexpr double width = 960;
constexpr double panel_height = 392;

// When things happen in one panel: block k occupies [start + k step, start + (k+1) step); the
// fractions of a step below are the moments of the steps at the top; line 6 follows the last block.
struct Clock {
  double start = 0;                            // seconds: the first block arrives
  double step = 3;                             // seconds per block
  std::size_t steps = 0;                       // blocks in the trace
  static constexpr double final_length = 4.0;  // seconds for line 6 and a pause

  double at(std::size_t k, double fraction) const { return start + (static_cast<double>(k) + fraction) * step; }
  double final_start() const { return at(steps, 0.0); }
  double divide_start() const { return final_start() + 0.3; }  // line 6 runs from here ...
  double divide_end() const { return final_start() + 1.3; }    // ... to here
  double end() const { return final_start() + final_length; }
};
// The block's scores fade in; line 2: the max line moves; line 3: the earlier terms shrink;
// line 4: the new terms grow. Fractions of a step.
constexpr double arrive_from = 0.0, arrive_to = 0.15;
constexpr double max_from = 0.2, max_to = 0.33;
constexpr double shrink_from = 0.4, shrink_to = 0.6;
constexpr double grow_from = 0.67, grow_to = 0.83;

// Where one panel is drawn: the score plot on top, the term plot below it (same x for score j),
// the stack of terms (the running sum l) on the right.
struct Layout {
  double top = 0;
  std::size_t n = 0;  // scores in the row
  double x0 = 100, x1 = 650;
  double score_top() const { return top + 44; }
  double score_bottom() const { return top + 164; }
  double term_top() const { return top + 196; }
  double term_bottom() const { return top + 306; }
  double stack_x = 800, stack_w = 44;
  double slot() const { return (x1 - x0) / static_cast<double>(n); }
  double slot_x(std::size_t j) const { return x0 + slot() * static_cast<double>(j); }
  double bar_w() const { return slot() * 0.6; }
  double bar_x(std::size_t j) const { return slot_x(j) + (slot() - bar_w()) / 2; }
  double term_y(double v) const { return term_bottom() - v * (term_bottom() - term_top()); }
};

// The block (step) in which score j arrives.
std::size_t arrival_step(const Trace& t, std::size_t j) { return j / t.block; }

// Caption lines for step k (what lines 2-4 did, in the trace's numbers).
std::vector<std::string> step_caption(const Trace& t, std::size_t k) {
  const ch02::TraceStep<double>& s = t.steps[k];
  std::string first = fmt::format("Block {} of {} arrives (x{} \u2026 x{}). ", k + 1, t.steps.size(),
                                  subscript(s.first), subscript(s.first + s.count - 1));
  if (s.m_after > s.m_before) {
    first += fmt::format("Line 2: the max rises, m: {} \u2192 {}.", number(s.m_before), number(s.m_after));
  } else {
    first += fmt::format("Line 2: the max stays at m = {}.", number(s.m_after));
  }
  std::string second;
  if (s.l_before == 0) {
    second = fmt::format("Nothing to rescale yet. Line 4: l = {} (the block's terms against m = {}).",
                         number(s.block_sum), number(s.m_after));
  } else if (s.rescale == 1) {
    second = fmt::format("Line 3: c = 1, earlier terms stay. Line 4: l = {} + {} = {}.", number(s.l_before),
                         number(s.block_sum), number(s.l_after));
  } else {
    second =
        fmt::format("Line 3: every earlier term \u00d7 c = exp({} \u2212 {}) = {}. Line 4: l = {} \u00d7 {} + {} = {}.",
                    number(s.m_before), number(s.m_after), number(s.rescale), number(s.l_before), number(s.rescale),
                    number(s.block_sum), number(s.l_after));
  }
  return {first, second};
}

// Score axis: whole numbers from below the smallest score (or 0) to above the largest.
struct ScoreAxis {
  double lo = 0, hi = 1;
  double step = 1;
};

ScoreAxis score_axis(const std::vector<double>& x) {
  ScoreAxis a;
  a.lo = std::min(0.0, std::floor(*std::min_element(x.begin(), x.end())));
  a.hi = std::max(1.0, std::ceil(*std::max_element(x.begin(), x.end())));
  if (a.hi - a.lo > 6) {  // about 7 labels at most, so that they stay apart; 0 stays a tick
    a.step = 2;
    a.lo = 2 * std::floor(a.lo / 2);
    a.hi = 2 * std::ceil(a.hi / 2);
  }
  return a;
}

// One panel: heading, axes, and lines 2-6 for every step of the trace.
std::string panel(const Trace& t, const Layout& L, const Clock& clock, double duration, const std::string& heading,
                  const std::string& intro, bool value_labels) {
  std::string out;
  const std::size_t n = t.x.size();
  const ScoreAxis axis = score_axis(t.x);
  auto score_y = [&](double v) {
    return L.score_bottom() - (v - axis.lo) / (axis.hi - axis.lo) * (L.score_bottom() - L.score_top());
  };
  out += text(30, L.top + 22, heading, R"(class="heading")");

  // The blocks, as alternate background bands under both plots, and their names.
  for (std::size_t k = 0; k < t.steps.size(); ++k) {
    const double bx = L.slot_x(t.steps[k].first), bw = L.slot() * static_cast<double>(t.steps[k].count);
    if (k % 2 == 0) {
      out += rect(bx, L.score_top() - 6, bw, L.term_bottom() - L.score_top() + 6, fmt::format(R"(fill="{}")", band));
    }
    out += text(bx + bw / 2, L.term_bottom() + 18, fmt::format("block {}", k + 1),
                R"(class="small" text-anchor="middle")");
  }

  // Score axis, with its zero line.
  for (double v = axis.lo; v <= axis.hi + 1e-9; v += axis.step) {
    out += line(L.x0 - 4, score_y(v), L.x1, score_y(v),
                fmt::format(R"(stroke="{}" stroke-width="{}")", hairline, v == 0 ? 1.2 : 0.4));
    out += text(L.x0 - 8, score_y(v) + 5, number(v), R"(class="small" text-anchor="end")");
  }
  out += vertical_text(48, (L.score_top() + L.score_bottom()) / 2, "score x_j");
  // Term axis, 0 to 1.
  for (double v : {0.0, 0.5, 1.0}) {
    out += line(L.x0 - 4, L.term_y(v), L.x1, L.term_y(v),
                fmt::format(R"(stroke="{}" stroke-width="{}")", hairline, v == 0 ? 1.2 : 0.4));
    out += text(L.x0 - 8, L.term_y(v) + 5, fmt::format("{:.1f}", v), R"(class="small" text-anchor="end")");
  }
  out += vertical_text(48, (L.term_top() + L.term_bottom()) / 2, "exp(x_j \u2212 m), p_j");

  // The scores, each fading in with its block.
  for (std::size_t j = 0; j < n; ++j) {
    const std::size_t k = arrival_step(t, j);
    Track opacity(0.0);
    opacity.move(clock.at(k, arrive_from), clock.at(k, arrive_to), 1.0);
    const std::string fade = opacity.animate("opacity", duration);
    const double y0 = score_y(0), y = score_y(t.x[j]);
    out += rect(L.bar_x(j), std::min(y, y0), L.bar_w(), std::fabs(y0 - y),
                fmt::format(R"(fill="{}" stroke="{}" stroke-width="1")", light, ink), fade);
    if (value_labels) {  // inside the top of the bar, clear of the max line
      out += text(L.bar_x(j) + L.bar_w() / 2, std::min(y, y0) + 18, number(t.x[j]), R"(text-anchor="middle")", fade);
    }
  }

  // line 2: the running max, a dashed line that moves with every step, and its value.
  {
    Track y(score_y(t.steps[0].m_after)), opacity(0.0);
    for (std::size_t k = 0; k < t.steps.size(); ++k) {
      if (k == 0) {
        opacity.move(clock.at(0, max_from), clock.at(0, max_to), 1.0);
      } else {
        y.move(clock.at(k, max_from), clock.at(k, max_to), score_y(t.steps[k].m_after));
      }
    }
    const std::string moves =
        y.animate("y1", duration) + y.animate("y2", duration) + opacity.animate("opacity", duration);
    out += line(L.x0, y.value(), L.x1, y.value(),
                fmt::format(R"(stroke="{}" stroke-width="3" stroke-dasharray="9 5")", dark), moves);
    for (std::size_t k = 0; k < t.steps.size(); ++k) {
      const double until = k + 1 < t.steps.size() ? clock.at(k + 1, max_to) : duration;
      const Track shown = shown_between(clock.at(k, max_to), until);
      out += text(L.x1 + 8, score_y(t.steps[k].m_after) + 5, "m = " + number(t.steps[k].m_after),
                  fmt::format(R"(class="bold" opacity="{}")", until == duration ? 1 : 0),
                  shown.animate("opacity", duration));
    }
  }

  // The stack on the right: l drawn as a pile of its terms, on a scale up to the largest l.
  double l_max = 1.0;
  for (const auto& s : t.steps) l_max = std::max(l_max, s.l_after);
  l_max = std::ceil(l_max);
  const double stack_h = L.term_bottom() - L.score_top();
  auto stack_y = [&](double v) { return L.term_bottom() - v / l_max * stack_h; };
  // The stack's scale mark at 1, where the p_j end.
  out += line(L.stack_x - 6, stack_y(1), L.stack_x + L.stack_w + 6, stack_y(1),
              fmt::format(R"(stroke="{}" stroke-width="1.5" stroke-dasharray="4 3")", ink));
  for (double v = 0; v <= l_max + 1e-9; v += 1) {
    out += text(L.stack_x - 10, stack_y(v) + 5, number(v), R"(class="small" text-anchor="end")");
  }
  out += text(L.stack_x + L.stack_w / 2, L.score_top() - 12, "sum l", R"(class="bold" text-anchor="middle")");

  // Lines 3 and 4: each term's bar, and its piece of the stack. term(j, k): score j's term after
  // step k (0 before it arrives); below(j, k): the sum of the terms before score j after step k,
  // where score j's piece of the stack starts.
  auto term = [&](std::size_t j, std::size_t k) { return j < t.steps[k].terms.size() ? t.steps[k].terms[j] : 0.0; };
  auto below = [&](std::size_t j, std::size_t k) {
    double sum = 0;
    for (std::size_t i = 0; i < j; ++i) sum += term(i, k);
    return sum;
  };
  const std::size_t last = t.steps.size() - 1;
  // The weights' stack: what lies below p_j.
  auto p_below = [&](std::size_t j) {
    double sum = 0;
    for (std::size_t i = 0; i < j; ++i) sum += t.p[i];
    return sum;
  };
  const double term_h = L.term_bottom() - L.term_top();
  for (std::size_t j = 0; j < n; ++j) {
    const std::size_t first = arrival_step(t, j);
    BarTrack bar(L.term_bottom(), 0.0);             // the term on its own axis
    BarTrack piece(stack_y(below(j, first)), 0.0);  // the term in the stack
    for (std::size_t k = first; k < t.steps.size(); ++k) {
      const double h = term(j, k);
      if (k == first) {  // line 4: the new term grows in, on top of the earlier ones after line 3
        // The block's pieces grow together, each on top of the one before it as it grows.
        bar.move(clock.at(k, grow_from), clock.at(k, grow_to), L.term_bottom(), h * term_h);
        piece.jump(clock.at(k, grow_from), stack_y(below(t.steps[k].first, k)), 0.0);
        piece.move(clock.at(k, grow_from), clock.at(k, grow_to), stack_y(below(j, k)), h / l_max * stack_h);
      } else {  // line 3: every earlier term by the same factor, at the same moment
        bar.move(clock.at(k, shrink_from), clock.at(k, shrink_to), L.term_bottom(), h * term_h);
        piece.move(clock.at(k, shrink_from), clock.at(k, shrink_to), stack_y(below(j, k)), h / l_max * stack_h);
      }
    }
    out += rect(L.bar_x(j), bar.y(), L.bar_w(), bar.height(),
                fmt::format(R"(fill="{}" stroke="{}" stroke-width="0.8")", mid, ink), bar.animate(duration));
    out += rect(L.stack_x, piece.y(), L.stack_w, piece.height(),
                fmt::format(R"(fill="{}" stroke="#ffffff" stroke-width="0.8")", mid), piece.animate(duration));

    // line 6: p_j, a narrower dark bar that starts as the term and shrinks by 1/l; the same in
    // the stack, which ends at 1.
    const double last_term = term(j, last);
    BarTrack p_bar(L.term_bottom(), last_term * term_h);
    p_bar.move(clock.divide_start(), clock.divide_end(), L.term_bottom(), t.p[j] * term_h);
    BarTrack p_piece(stack_y(below(j, last)), last_term / l_max * stack_h);
    p_piece.move(clock.divide_start(), clock.divide_end(), stack_y(p_below(j)), t.p[j] / l_max * stack_h);
    Track shown(0.0);
    shown.jump(clock.divide_start(), 1.0);
    const std::string appear = shown.animate("opacity", duration);
    const double p_w = L.bar_w() * 0.5;
    out +=
        rect(L.bar_x(j) + (L.bar_w() - p_w) / 2, p_bar.y(), p_w, p_bar.height(),
             fmt::format(R"(fill="{}" stroke="#ffffff" stroke-width="0.6")", dark), p_bar.animate(duration) + appear);
    out +=
        rect(L.stack_x + L.stack_w / 4, p_piece.y(), L.stack_w / 2, p_piece.height(),
             fmt::format(R"(fill="{}" stroke="#ffffff" stroke-width="0.6")", dark), p_piece.animate(duration) + appear);
  }

  // The values over the bars (worked example only): each term while it holds, then p_j.
  if (value_labels) {
    for (std::size_t j = 0; j < n; ++j) {
      const std::size_t first = arrival_step(t, j);
      const double cx = L.bar_x(j) + L.bar_w() / 2;
      // (from, value): the term's value from that moment on, a new entry each time it changes
      std::vector<std::pair<double, double>> held{{clock.at(first, grow_to), term(j, first)}};
      for (std::size_t k = first + 1; k < t.steps.size(); ++k) {
        if (term(j, k) != held.back().second) held.emplace_back(clock.at(k, shrink_to), term(j, k));
      }
      for (std::size_t h = 0; h < held.size(); ++h) {
        const double until =
            h + 1 < held.size() ? held[h + 1].first - (shrink_to - shrink_from) * clock.step : clock.divide_start();
        out += text(cx, L.term_y(held[h].second) - 6, number(held[h].second),
                    R"(class="small" text-anchor="middle" opacity="0")",
                    shown_between(held[h].first, until).animate("opacity", duration));
      }
      Track shown(0.0);
      shown.jump(clock.divide_end(), 1.0);
      out += text(cx, L.term_y(term(j, last)) - 6, number(t.p[j]), R"(class="small bold" text-anchor="middle")",
                  shown.animate("opacity", duration));
    }
  }

  // "x c" over the earlier terms while line 3 shrinks them.
  for (std::size_t k = 1; k < t.steps.size(); ++k) {
    const ch02::TraceStep<double>& s = t.steps[k];
    if (s.rescale == 1) continue;
    const double cx = (L.x0 + L.slot_x(s.first)) / 2;
    out += text(cx, L.term_top() - 8, fmt::format("\u00d7 c = {}", number(s.rescale)),
                R"(class="bold" text-anchor="middle" opacity="0")",
                shown_between(clock.at(k, shrink_from), clock.at(k, grow_to)).animate("opacity", duration));
  }

  // l under the stack: its value after each step, then the weights' sum.
  for (std::size_t k = 0; k < t.steps.size(); ++k) {
    const double from = clock.at(k, grow_to);
    const double until = k + 1 < t.steps.size() ? clock.at(k + 1, shrink_from) : duration;
    out += text(L.stack_x, L.term_bottom() + 18, "l = " + number(t.steps[k].l_after),
                fmt::format(R"(class="small" opacity="{}")", until == duration ? 1 : 0),
                shown_between(from, until).animate("opacity", duration));
  }

  // The captions: what is coming, then each step's numbers, then line 6 (kept to the loop's end).
  const double line1 = L.term_bottom() + 46, line2 = L.term_bottom() + 68;
  out += text(30, line1, intro, R"(opacity="0")", shown_between(0, clock.start).animate("opacity", duration));
  for (std::size_t k = 0; k < t.steps.size(); ++k) {
    const std::vector<std::string> lines = step_caption(t, k);
    const std::string shown = shown_between(clock.at(k, 0), clock.at(k + 1, 0)).animate("opacity", duration);
    out += text(30, line1, lines[0], R"(opacity="0")", shown);
    out += text(30, line2, lines[1], R"(class="small" opacity="0")", shown);
  }
  Track final_shown(0.0);
  final_shown.jump(clock.final_start(), 1.0);
  const std::string final_animation = final_shown.animate("opacity", duration);
  const ch02::TraceStep<double>& end = t.steps[last];
  out += text(30, line1,
              fmt::format("Line 6 of online_softmax.h, after the last block: p_j = exp(x_j \u2212 m) / l, "
                          "with m = {} and l = {}.",
                          number(end.m_after), number(end.l_after)),
              "", final_animation);
  out += text(30, line2, "Every term is divided by the same l (dark bars); the stack of the p_j adds up to 1.",
              R"(class="small")", final_animation);
  return out;
}

// The title, and a legend of what the marks are.
std::string title_and_legend() {
  std::string out =
      text(30, 30, "Online softmax: the max and the sum in one pass, a block at a time", R"(class="title")");
  out += text(30, 52,
              "\u201cLine n\u201d: the algorithm at the top of chapters/02_online_softmax/online_softmax.h, "
              "whose trace (trace.h) this draws",
              R"(class="small")");
  double x = 30;
  const double y = 78;
  auto swatch = [&](std::string_view fill, std::string_view label) {
    out += rect(x, y - 12, 16, 14, fmt::format(R"(fill="{}" stroke="{}" stroke-width="0.8")", fill, ink));
    out += text(x + 22, y, label, R"(class="small")");
    x += 30 + 7.4 * static_cast<double>(label.size());
  };
  swatch(light, "score x_j");
  swatch(mid, "term exp(x_j \u2212 m)");
  swatch(dark, "weight p_j = exp(x_j \u2212 m) / l");
  out += line(x, y - 5, x + 26, y - 5, fmt::format(R"(stroke="{}" stroke-width="3" stroke-dasharray="9 5")", dark));
  out += text(x + 32, y, "running max m", R"(class="small")");
  return out;
}

}  // namespace

std::vector<double> random_row() { return fa::normal(random_row_length, random_row_seed, 0.0, random_row_stddev); }

std::string online_softmax_figure() {
  const Trace worked = ch02::online_softmax_trace(worked_scores, worked_block);
  const std::vector<double> row = random_row();
  const Trace random = ch02::online_softmax_trace(row, random_row_block);

  // Panel a plays first, then panel b; the loop ends after a pause.
  const Clock clock_a{1.0, 3.2, worked.steps.size()};
  const Clock clock_b{clock_a.end() + 0.5, 2.4, random.steps.size()};
  const double duration = clock_b.end() + 2.0;

  const double top_a = 92, top_b = top_a + panel_height;
  std::string body = title_and_legend();
  body +=
      panel(worked, Layout{top_a, worked.x.size()}, clock_a, duration,
            fmt::format("a) The worked example: scores {} in blocks of {}", fmt::join(worked.x, ", "), worked.block),
            "The blocks arrive one at a time, left to right.", true);
  body += panel(random, Layout{top_b, random.x.size()}, clock_b, duration,
                fmt::format("b) A random row: {} scores, fa::normal(seed {}, mean 0, sd {}), in blocks of {}",
                            random.x.size(), random_row_seed, random_row_stddev, random.block),
                "This row plays after panel a.", false);

  std::vector<std::string> scores;
  for (double x : row) scores.push_back(fmt::format("{:.4f}", x));
  const std::string description = fmt::format(
      "Animated ({:.1f} s loop, which opens on the finished picture). The online softmax of chapter 02 "
      "(ch02::online_softmax_trace), block by "
      "block: scores arrive, the running max m rises, every earlier term exp(x_j - m) shrinks by the "
      "same factor c, the running sum l is the stack of the terms, and at the end p_j = exp(x_j - m) / l. "
      "Panel a: the worked example 1, 3, 5, 2 in blocks of 2. Panel b, random row: {}.",
      loop_length(duration), fmt::join(scores, ", "));
  return document(width, top_b + panel_height, "Online softmax, block by block", description, body);
}

}  // namespace figures
