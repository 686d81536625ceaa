// figures/traffic_figure.cpp: figure 3, hbm-traffic.svg, bytes to and from HBM on a log scale.
//
//   a. left: for each of the traffic table's sizes (ch05::traffic_table_cases), the three columns of
//      ch05::traffic_row: standard attention, FlashAttention-2 without L2 reuse (the tile walk),
//      and the floor (every value once), labelled as ch05::format_megabytes prints them
//   b. right: where docs/benchmarks.md has the Nsight Compute table (measured_traffic.h), the
//      measured DRAM bytes of chapter 04's and chapter 05's kernels beside the model's figures for
//      the same run; where it has none, a note that says so and how to get them
// The two panels have their own axes: the measured run is a whole batch in float32, not the
// traffic table's single BF16 head.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join

#include "chapters/05_flash_attention_2/lab/traffic_table.h"
#include "figures/figures.h"
#include "figures/svg.h"

namespace figures {
namespace {

constexpr double width = 960, height = 610;
constexpr double plot_top = 150, plot_bottom = 440;

// Hatching for measured bars: the model's colour crossed by white diagonals, so that a measured
// bar differs from its model bar in greyscale too.
std::string hatch_patterns() {
  std::string out = "<defs>\n";
  for (const auto& [id, colour] : {std::pair{"hatch-dark", dark}, std::pair{"hatch-mid", mid}}) {
    out += fmt::format(
        R"a(<pattern id="{}" width="7" height="7" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">)a"
        "\n"
        R"(<rect width="7" height="7" fill="{}"/><line x1="0" y1="0" x2="0" y2="7" stroke="#ffffff" stroke-width="3"/>)"
        "\n</pattern>\n",
        id, colour);
  }
  return out + "</defs>\n";
}

// A log-scale axis in MB from 10^lo to 10^hi, drawn at the left of [x0, x1].
struct LogAxis {
  int lo = 0, hi = 1;
  double x0 = 0, x1 = 0;
  double y(double mb) const { return plot_bottom - (std::log10(mb) - lo) / (hi - lo) * (plot_bottom - plot_top); }
};

// headroom: decades to keep free above the largest bar (for labels turned upright).
LogAxis log_axis(const std::vector<double>& mb, double x0, double x1, double headroom = 0) {
  LogAxis a;
  a.lo = static_cast<int>(std::floor(std::log10(*std::min_element(mb.begin(), mb.end()))));
  a.hi = static_cast<int>(std::ceil(std::log10(*std::max_element(mb.begin(), mb.end())) + headroom));
  if (a.hi == a.lo) ++a.hi;
  a.x0 = x0;
  a.x1 = x1;
  return a;
}

std::string draw_axis(const LogAxis& a, std::string_view title) {
  std::string out;
  for (int e = a.lo; e <= a.hi; ++e) {
    const double decade = std::pow(10.0, e);
    out += line(a.x0 - 5, a.y(decade), a.x1, a.y(decade), fmt::format(R"(stroke="{}" stroke-width="0.8")", hairline));
    out += text(a.x0 - 9, a.y(decade) + 5, fmt::format("{:.0f}", decade), R"(class="small" text-anchor="end")");
    for (int k = 2; k <= 9 && e < a.hi; ++k) {  // minor ticks: 2, 3, ... 9 times the decade
      out += line(a.x0 - 3, a.y(k * decade), a.x0, a.y(k * decade),
                  fmt::format(R"(stroke="{}" stroke-width="0.8")", hairline));
    }
  }
  out += line(a.x0, plot_top - 6, a.x0, plot_bottom, fmt::format(R"(stroke="{}" stroke-width="1")", ink));
  out += line(a.x0, plot_bottom, a.x1, plot_bottom, fmt::format(R"(stroke="{}" stroke-width="1")", ink));
  out += vertical_text(a.x0 - 56, (plot_top + plot_bottom) / 2, title, R"(class="small")");
  return out;
}

// A bar from the axis up to mb, its label above it (turned upright when the bar is narrow).
std::string bar(const LogAxis& a, double x, double w, double mb, std::string_view fill, bool upright_label) {
  const double y = a.y(mb);
  std::string out =
      rect(x, y, w, plot_bottom - y, fmt::format(R"(fill="{}" stroke="{}" stroke-width="0.8")", fill, ink));
  const std::string label = ch05::format_megabytes(static_cast<std::uint64_t>(std::llround(mb * 1e6))) + " MB";
  if (upright_label) {  // read from below, going up from the bar's top
    const double lx = x + w / 2 + 5, ly = y - 6;
    return out + text(lx, ly, label, fmt::format(R"a(class="small" transform="rotate(-90 {} {})")a", px(lx), px(ly)));
  }
  return out + text(x + w / 2, y - 6, label, R"(class="small" text-anchor="middle")");
}

std::string legend(double x, double y, const std::vector<std::pair<std::string, std::string>>& items) {
  std::string out;
  for (const auto& [fill, label] : items) {
    out += rect(x, y - 12, 16, 14, fmt::format(R"(fill="{}" stroke="{}" stroke-width="0.8")", fill, ink));
    out += text(x + 22, y, label, R"(class="small")");
    y += 20;
  }
  return out;
}

// (a) The model at the traffic table's sizes.
std::string model_panel() {
  const std::vector<ch05::TrafficCase> cases = ch05::traffic_table_cases();
  std::vector<ch05::TrafficRow> rows;
  std::vector<double> all_mb;
  for (const ch05::TrafficCase& c : cases) {
    rows.push_back(ch05::traffic_row(c));
    for (std::uint64_t b : {rows.back().standard, rows.back().fa2, rows.back().floor}) {
      all_mb.push_back(static_cast<double>(b) / 1e6);
    }
  }
  const LogAxis axis = log_axis(all_mb, 100, 580);
  std::string out;
  out += text(24, 78, "The model: chapter 05's traffic_row at the traffic table's sizes", R"(class="heading")");
  const ch05::TrafficCase& c0 = cases.front();
  const bool same_setup = std::all_of(cases.begin(), cases.end(), [&](const ch05::TrafficCase& c) {
    return c.bytes == c0.bytes && c.Br == c0.Br && c.Bc == c0.Bc;
  });
  out += text(24, 100,
              same_setup ? fmt::format("one head, forward pass, {} bytes per value, tiles of Br = {} \u00d7 Bc = {}",
                                       c0.bytes, c0.Br, c0.Bc)
                         : std::string("one head, forward pass; bytes per value and tiles under each size"),
              R"(class="small")");
  out += draw_axis(axis, "bytes to and from HBM, MB (10\u2076 bytes), log scale");

  const double group = (axis.x1 - axis.x0) / static_cast<double>(rows.size());
  const double w = 40, gap = 10;
  for (std::size_t g = 0; g < rows.size(); ++g) {
    const ch05::TrafficRow& r = rows[g];
    const double left = axis.x0 + group * static_cast<double>(g) + (group - 3 * w - 2 * gap) / 2;
    out += bar(axis, left, w, static_cast<double>(r.standard) / 1e6, dark, false);
    out += bar(axis, left + w + gap, w, static_cast<double>(r.fa2) / 1e6, mid, false);
    out += bar(axis, left + 2 * (w + gap), w, static_cast<double>(r.floor) / 1e6, light, false);
    const double cx = axis.x0 + group * (static_cast<double>(g) + 0.5);
    out +=
        text(cx, plot_bottom + 22, fmt::format("{} \u00d7 {}", r.c.seq_len, r.c.head_dim), R"(text-anchor="middle")");
    if (!same_setup) {
      out += text(cx, plot_bottom + 40, fmt::format("{} B, Br {}, Bc {}", r.c.bytes, r.c.Br, r.c.Bc),
                  R"(class="small" text-anchor="middle")");
    }
  }
  out += text((axis.x0 + axis.x1) / 2, plot_bottom + 50, "seq_len N \u00d7 head_dim d",
              R"(class="small" text-anchor="middle")");
  out += legend(axis.x0, plot_bottom + 80,
                {{std::string(dark), "standard attention (chapter 04: S and P through HBM)"},
                 {std::string(mid), "FlashAttention-2, no L2 reuse (the tile walk)"},
                 {std::string(light), "the floor: every value once (K, V re-reads from L2)"}});
  return out;
}

// (b) The measured bytes, or a note that there are none.
std::string measured_panel(const std::optional<MeasuredTraffic>& measured) {
  const double x = 620;
  std::string out;
  out += text(x, 78, "Measured (Nsight Compute)", R"(class="heading")");
  if (!measured) {
    out += rect(x, plot_top - 10, 316, 190, fmt::format(R"(fill="{}" stroke="{}" stroke-width="1")", band, hairline));
    double y = plot_top + 18;
    for (std::string_view sentence : {"No measured bytes yet:", "docs/benchmarks.md has no table",
                                      "\u201cMeasured DRAM traffic (Nsight Compute)\u201d.", "",
                                      "scripts/gpu_check.sh writes it on a", "machine with an NVIDIA GPU and Nsight",
                                      "Compute; build the target figures", "again to draw the measured bars here."}) {
      out += text(x + 14, y, sentence, R"(class="small")");
      y += 20;
    }
    return out;
  }

  std::vector<double> all_mb;
  for (const MeasuredSize& s : measured->sizes) {
    for (double mb : {s.naive_measured_mb, s.naive_model_mb, s.flash_measured_mb, s.flash_model_mb}) {
      if (std::isfinite(mb) && mb > 0) all_mb.push_back(mb);
    }
  }
  const LogAxis axis = log_axis(all_mb, x + 72, 940, 0.4);
  const std::string& heading = measured->heading;
  const std::size_t cut = heading.find(", ");
  out += text(x, 100, cut == std::string::npos ? heading : heading.substr(cut + 2), R"(class="small")");
  out += text(x, 118, "whole call; model MB from the same table", R"(class="small")");
  out += draw_axis(axis, "DRAM bytes, MB (10\u2076 bytes), log scale");
  const double group = (axis.x1 - axis.x0) / static_cast<double>(measured->sizes.size());
  const double w = std::min(22.0, (group - 16) / 4);
  for (std::size_t g = 0; g < measured->sizes.size(); ++g) {
    const MeasuredSize& s = measured->sizes[g];
    const double left = axis.x0 + group * static_cast<double>(g) + (group - 4 * w) / 2;
    const std::vector<std::pair<double, std::string>> bars{{s.naive_model_mb, std::string(dark)},
                                                           {s.naive_measured_mb, "url(#hatch-dark)"},
                                                           {s.flash_model_mb, std::string(mid)},
                                                           {s.flash_measured_mb, "url(#hatch-mid)"}};
    for (std::size_t b = 0; b < bars.size(); ++b) {
      if (std::isfinite(bars[b].first) && bars[b].first > 0) {
        out += bar(axis, left + w * static_cast<double>(b), w, bars[b].first, bars[b].second, true);
      }
    }
    out += text(axis.x0 + group * (static_cast<double>(g) + 0.5), plot_bottom + 22,
                fmt::format("{} \u00d7 {}", s.seq_len, s.head_dim), R"(text-anchor="middle")");
  }
  out += legend(x, plot_bottom + 80,
                {{std::string(dark), "naive (ch04), model"},
                 {"url(#hatch-dark)", "naive (ch04), measured"},
                 {std::string(mid), "FlashAttention-2 (ch05), model"},
                 {"url(#hatch-mid)", "FlashAttention-2 (ch05), measured"}});
  return out;
}

}  // namespace

std::string traffic_figure(const std::optional<MeasuredTraffic>& measured) {
  std::string body = hatch_patterns();
  // The title promises a measurement only where docs/benchmarks.md holds one.
  body += text(24, 34,
               measured ? "HBM traffic of attention's forward pass: the model, and what a GPU measured"
                        : "HBM traffic of attention's forward pass: the model (no GPU measurement yet)",
               R"(class="title")");
  body += model_panel();
  body += line(600, 60, 600, height - 20, fmt::format(R"(stroke="{}" stroke-width="1")", hairline));
  body += measured_panel(measured);

  std::vector<std::string> rows;
  for (const ch05::TrafficCase& c : ch05::traffic_table_cases()) {
    const ch05::TrafficRow r = ch05::traffic_row(c);
    rows.push_back(fmt::format("{} x {}: standard {} MB, FlashAttention-2 {} MB, floor {} MB", c.seq_len, c.head_dim,
                               ch05::format_megabytes(r.standard), ch05::format_megabytes(r.fa2),
                               ch05::format_megabytes(r.floor)));
  }
  const std::string description = fmt::format(
      "Bars on a log scale: bytes one head's forward pass moves to and from HBM by chapter 05's traffic model "
      "({}). {}",
      fmt::join(rows, "; "),
      measured ? "Beside them, the DRAM bytes Nsight Compute measured, from docs/benchmarks.md."
               : "No measured bytes: docs/benchmarks.md has no Nsight Compute table.");
  return document(width, height, measured ? "HBM traffic: model and measurement" : "HBM traffic: the model",
                  description, body);
}

}  // namespace figures
