// figures/worked_example_figure.cpp: figure 4, worked-example.svg, the worked example in two
// blocks with every number that the chapter 03 recurrence computes and carries.
//
// Everything printed comes from ch03::trace_online_weighted_sum (chapters/03_online_weighted_sum/
// online_weighted_sum.h), one BlockStep per block, and ch03::weighted_sum_all_at_once. Its parts
// are lettered, since "line n" here always means line n of the recurrence in online_weighted_sum.h:
//   a. a box per block: its keys (score s, value v), then lines 2-6 of the recurrence with the
//      block's numbers, and what line 7 would give if the keys ended there
//   b. between the boxes, the three numbers carried to the next block: m, l, acc
//   c. at the bottom, line 7 after the last block, beside the all-at-once reference
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join

#include "chapters/03_online_weighted_sum/online_weighted_sum.h"
#include "figures/figures.h"
#include "figures/svg.h"

namespace figures {
namespace {

// Wide enough for the longest line, block 2's line 5: about 110 characters of 14 px DejaVu Sans Mono
// (8.4 px each), from left + 14.
constexpr double width = 1000;
constexpr double left = 24, right = 976;
constexpr double line_height = 22;

// "a, b, c" of numbers.
std::string list(const std::vector<double>& v) {
  std::vector<std::string> parts;
  for (double x : v) parts.push_back(number(x));
  return fmt::format("{}", fmt::join(parts, ", "));
}

// (a) A box per block. l_old, acc_old: what the block found (the previous block's state, or
// the empty state); last: the last block, whose line 7 is drawn below the boxes instead. Returns
// the box and moves y below it.
std::string block_box(const ch03::BlockStep& s, std::size_t index, const std::vector<double>& scores,
                      const std::vector<double>& values, double l_old, double acc_old, bool last, double& y) {
  std::string out;
  const std::size_t lines = last ? 6 : 8;  // the last block's line 7 is the result below the boxes
  const double box_h = 56 + line_height * static_cast<double>(lines);
  out += rect(left, y, right - left, box_h, fmt::format(R"(fill="#ffffff" stroke="{}" stroke-width="1.5")", ink));
  out += text(left + 14, y + 26, fmt::format("Block {}: keys j = {} and {}", index + 1, s.first, s.first + s.count - 1),
              R"(class="heading")");
  // the block's keys, as cards, right of the heading (about 270 px of 16 px bold text)
  double card_x = left + 310;
  for (std::size_t j = s.first; j < s.first + s.count; ++j) {
    out += rect(card_x, y + 8, 150, 26, fmt::format(R"(fill="{}" stroke="{}" stroke-width="1")", light, ink));
    out += text(card_x + 75, y + 26, fmt::format("s = {},  v = {}", number(scores[j]), number(values[j])),
                R"(text-anchor="middle")");
    card_x += 164;
  }

  std::vector<std::string> ps, pv, exps;
  for (std::size_t k = 0; k < s.count; ++k) {
    ps.push_back(number(s.p[k]));
    exps.push_back(fmt::format("exp({} \u2212 {})", number(scores[s.first + k]), number(s.m_new)));
    pv.push_back(fmt::format("{} \u00d7 {}", number(s.p[k]), number(values[s.first + k])));
  }
  std::vector<double> block_scores(scores.begin() + static_cast<std::ptrdiff_t>(s.first),
                                   scores.begin() + static_cast<std::ptrdiff_t>(s.first + s.count));
  const bool first = s.m_old == ch03::minus_infinity;
  const std::vector<std::string> rows{
      fmt::format("line 2  m_new = max(m, max s) = max({}, max({})) = {}", number(s.m_old), list(block_scores),
                  number(s.m_new)),
      fmt::format("line 3  rescale = exp(m \u2212 m_new) = exp({} \u2212 {}) = {}{}", number(s.m_old), number(s.m_new),
                  number(s.rescale), first ? ": nothing is carried yet" : ": rescales what is carried"),
      fmt::format("line 4  p = exp(s \u2212 m_new) = {} = {}", fmt::join(exps, ", "), fmt::join(ps, ", ")),
      fmt::format("line 4  l = rescale \u00d7 l + \u03a3 p = {} \u00d7 {} + ({}) = {} + {} = {}", number(s.rescale),
                  number(l_old), fmt::join(ps, " + "), number(s.l_carried), number(s.l_block), number(s.l)),
      fmt::format("line 5  acc = rescale \u00d7 acc + \u03a3 p v = {} \u00d7 {} + ({}) = {} + {} = {}",
                  number(s.rescale), number(acc_old), fmt::join(pv, " + "), number(s.acc_carried[0]),
                  number(s.acc_block[0]), number(s.acc[0])),
      fmt::format("line 6  m = m_new = {}", number(s.m_new)),
      "",
      fmt::format("        if the keys ended here, line 7: o = acc / l = {} / {} = {}", number(s.acc[0]), number(s.l),
                  number(s.output[0]))};
  double ty = y + 62;
  for (const std::string& r : std::span(rows).first(lines)) {
    out += text(left + 14, ty, r, R"(class="mono")");
    ty += line_height;
  }
  y += box_h;
  return out;
}

// (b) The three carried numbers, between the boxes.
std::string carried(const ch03::BlockStep& s, double& y) {
  std::string out;
  const double arrow_x = left + 60;
  out += line(arrow_x, y, arrow_x, y + 52, fmt::format(R"(stroke="{}" stroke-width="3")", ink));
  out += fmt::format(R"(<path d="M {} {} l -9 -14 l 18 0 z" fill="{}"/>)"
                     "\n",
                     px(arrow_x), px(y + 62), ink);
  out += text(arrow_x + 20, y + 36, "carried to the next block:", R"(class="bold")");
  double x = arrow_x + 232;
  for (const std::string& item : {fmt::format("m = {}", number(s.m_new)), fmt::format("l = {}", number(s.l)),
                                  fmt::format("acc = {}", number(s.acc[0]))}) {
    const double w = 26 + 8.6 * static_cast<double>(item.size());
    out += rect(x, y + 14, w, 32, fmt::format(R"(fill="{}" stroke="{}" stroke-width="1.5")", light, ink));
    out += text(x + w / 2, y + 36, item, R"(class="mono bold" text-anchor="middle")");
    x += w + 16;
  }
  y += 66;
  return out;
}

}  // namespace

std::string worked_example_figure() {
  const fa::MatrixView<const double> values(worked_values.data(), worked_values.size(), 1);
  const std::vector<ch03::BlockStep> steps = ch03::trace_online_weighted_sum(worked_scores, values, worked_block);
  const std::vector<double> at_once = ch03::weighted_sum_all_at_once(worked_scores, values);

  std::string body;
  body += text(left, 34, "The worked example in two blocks: every number the recurrence carries", R"(class="title")");
  body += text(left, 58,
               fmt::format("scores s = {} with values v = {} (head_dim 1), keys in blocks of {}: "
                           "chapter 03, online_weighted_sum.h, lines 1-7",
                           list(worked_scores), list(worked_values), worked_block),
               R"(class="small")");
  double y = 76;
  double l_old = 0, acc_old = 0;  // line 1: the empty state
  for (std::size_t k = 0; k < steps.size(); ++k) {
    body += block_box(steps[k], k, worked_scores, worked_values, l_old, acc_old, k + 1 == steps.size(), y);
    if (k + 1 < steps.size()) {
      body += carried(steps[k], y);
    }
    l_old = steps[k].l;
    acc_old = steps[k].acc[0];
  }

  // (c) The result, beside the reference.
  const ch03::BlockStep& last = steps.back();
  y += 16;
  const std::string result =
      fmt::format("line 7: o = acc / l = {} / {} = {}", number(last.acc[0]), number(last.l), number(last.output[0]));
  const double w = 28 + 8.6 * static_cast<double>(result.size() - 2);
  body += rect(left, y, w, 36, fmt::format(R"(fill="{}" stroke="{}" stroke-width="1.5")", dark, ink));
  body += text(left + 14, y + 24, result, R"(class="mono bold white")");
  body +=
      text(left + w + 16, y + 24, fmt::format("all four at once (weighted_sum_all_at_once): {}", number(at_once[0])));
  const double height = y + 60;

  const std::string description = fmt::format(
      "The worked example (scores {}, values {}, blocks of {}) as chapter 03's recurrence runs it: "
      "for each block m, c, p, l and acc, the numbers carried between the blocks, and the output {}, "
      "the same as all four at once, {}.",
      list(worked_scores), list(worked_values), worked_block, number(last.output[0]), number(at_once[0]));
  return document(width, height, "The worked example in two blocks", description, body);
}

}  // namespace figures
