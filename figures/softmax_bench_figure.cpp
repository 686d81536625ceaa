// figures/softmax_bench_figure.cpp: figure 5, softmax-bench.svg, what the online softmax saves on
// a CPU: chapter 02's benchmark, time of the safe form over time of the online form, per size.
//
// Everything drawn comes from docs/benchmarks-cpu.md (softmax_bench_data.h):
//   a. one point per row size n and store kind: safe us / online us, ordinary stores (filled) and
//      streaming stores (open), on a log axis of n
//   b. the limits when every pass is bound by memory: 5/4 (3 reads + 1 write against 2 + 1, the
//      write costing a read too, write-allocate) and 4/3 (streaming stores), and 1 (no saving)
//   c. a dashed line at each cache level where the row's x and p together (8 bytes per score)
//      fill one core's share of the cache: to the right of it each pass streams from the next level
// With no measurements in the file, a note says how to make them.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join

#include "figures/figures.h"
#include "figures/svg.h"

namespace figures {
namespace {

constexpr double width = 1000, height = 600;
constexpr double plot_left = 100, plot_right = 740, plot_top = 150, plot_bottom = 440;

// "32 KiB", "512 KiB", "32 MiB"; bytes as a whole number of KiB or MiB where it is one.
std::string binary_size(std::uint64_t bytes) {
  if (bytes % (1024 * 1024) == 0) return fmt::format("{} MiB", bytes / (1024 * 1024));
  if (bytes % 1024 == 0) return fmt::format("{} KiB", bytes / 1024);
  return fmt::format("{} bytes", bytes);
}

// "4 kB", "40 MB": a row of n float32 scores, in powers of 1000.
std::string row_size(double bytes) {
  const char* units[] = {"bytes", "kB", "MB", "GB"};
  int u = 0;
  while (bytes >= 1000 && u < 3) {
    bytes /= 1000;
    ++u;
  }
  return fmt::format("{:.0f} {}", bytes, units[u]);
}

struct Axes {
  double lo_n = 3, hi_n = 8;      // log10 of n
  double lo_r = 0.9, hi_r = 1.4;  // ratio
  double x(double n) const { return plot_left + (std::log10(n) - lo_n) / (hi_n - lo_n) * (plot_right - plot_left); }
  double y(double r) const { return plot_bottom - (r - lo_r) / (hi_r - lo_r) * (plot_bottom - plot_top); }
};

std::string no_measurements() {
  std::string out = rect(plot_left, plot_top, plot_right - plot_left, 150,
                         fmt::format(R"(fill="{}" stroke="{}" stroke-width="1")", band, hairline));
  double y = plot_top + 30;
  for (std::string_view sentence :
       {"No measurements yet: docs/benchmarks-cpu.md has no section \u201cSafe against online softmax\u201d.",
        "Run build/default/bin/ch02_softmax_bench --benchmark_repetitions=3 --benchmark_out=run.json,",
        "then scripts/softmax_bench_table.py run.json > docs/benchmarks-cpu.md, and build the target figures."}) {
    out += text(plot_left + 16, y, sentence, R"(class="small")");
    y += 24;
  }
  return out;
}

std::string plot(const SoftmaxBench& b) {
  Axes a;
  a.lo_n = std::log10(static_cast<double>(b.rows.front().n)) - 0.25;
  a.hi_n = std::log10(static_cast<double>(b.rows.back().n)) + 0.25;
  double lo = 1.0, hi = 4.0 / 3.0;
  for (const SoftmaxBenchRow& r : b.rows) {
    lo = std::min({lo, r.ratio(), r.streaming_ratio()});
    hi = std::max({hi, r.ratio(), r.streaming_ratio()});
  }
  a.lo_r = std::floor((lo - 0.04) * 20) / 20;  // to 0.05, with room for the labels below the points
  a.hi_r = std::ceil((hi + 0.02) * 20) / 20;

  std::string out;
  // The ratio axis, every 0.05, with the three reference lines (b).
  for (double r = a.lo_r; r <= a.hi_r + 1e-9; r += 0.05) {
    out += line(plot_left - 5, a.y(r), plot_right, a.y(r), fmt::format(R"(stroke="{}" stroke-width="0.5")", band));
    out += text(plot_left - 9, a.y(r) + 5, fmt::format("{:.2f}", r), R"(class="small" text-anchor="end")");
  }
  const std::vector<std::pair<double, std::string>> limits{
      {1.0, "1: nothing saved"}, {1.25, "5/4: memory-bound limit"}, {4.0 / 3.0, "4/3: the same, streaming stores"}};
  for (const auto& [r, label] : limits) {
    out += line(plot_left, a.y(r), plot_right, a.y(r),
                fmt::format(R"(stroke="{}" stroke-width="1"{})", ink, r == 1.0 ? "" : R"( stroke-dasharray="6 4")"));
    out += text(plot_right + 8, a.y(r) + 5, label, R"(class="small")");
  }
  out += line(plot_left, plot_top - 10, plot_left, plot_bottom, fmt::format(R"(stroke="{}" stroke-width="1")", ink));
  out += line(plot_left, plot_bottom, plot_right, plot_bottom, fmt::format(R"(stroke="{}" stroke-width="1")", ink));
  out += vertical_text(plot_left - 58, (plot_top + plot_bottom) / 2, "safe time / online time", R"(class="small")");

  // The caches (c).
  for (const CacheLevel& c : b.caches) {
    const double n = static_cast<double>(c.bytes) / 8.0;
    if (std::log10(n) < a.lo_n || std::log10(n) > a.hi_n) continue;
    out += line(a.x(n), plot_top - 10, a.x(n), plot_bottom,
                fmt::format(R"(stroke="{}" stroke-width="1" stroke-dasharray="2 3")", mid));
    out += text(a.x(n), plot_top - 16, fmt::format("{} {}", c.name, binary_size(c.bytes)),
                R"(class="small" text-anchor="middle")");
  }

  // The n axis.
  for (const SoftmaxBenchRow& r : b.rows) {
    const double n = static_cast<double>(r.n);
    out += line(a.x(n), plot_bottom, a.x(n), plot_bottom + 5, fmt::format(R"(stroke="{}" stroke-width="1")", ink));
    const double e = std::log10(n);
    out += text(a.x(n), plot_bottom + 22, e == std::round(e) ? fmt::format("1e{:.0f}", e) : fmt::format("{}", r.n),
                R"(text-anchor="middle")");
    out += text(a.x(n), plot_bottom + 40, row_size(4.0 * n), R"(class="small" text-anchor="middle")");
  }
  out += text((plot_left + plot_right) / 2, plot_bottom + 62,
              "scores per row n (log scale); below: the row x in float32", R"(class="small" text-anchor="middle")");

  // The points (a): ordinary stores filled, streaming stores open; each value above its point
  // when it is the larger of the size's two, below when it is the smaller.
  for (int streaming = 0; streaming <= 1; ++streaming) {
    std::vector<std::string> path;
    std::string marks;
    for (const SoftmaxBenchRow& r : b.rows) {
      const double ratio = streaming ? r.streaming_ratio() : r.ratio();
      const double other = streaming ? r.ratio() : r.streaming_ratio();
      const bool above = ratio > other || (ratio == other && !streaming);
      const double x = a.x(static_cast<double>(r.n)), y = a.y(ratio);
      path.push_back(fmt::format("{},{}", px(x), px(y)));
      marks += rect(x - 5, y - 5, 10, 10,
                    fmt::format(R"(fill="{}" stroke="{}" stroke-width="1.5")", streaming ? "#ffffff" : dark,
                                streaming ? mid : dark));
      marks += text(x, above ? y - 10 : y + 22, fmt::format("{:.2f}", ratio), R"(class="small" text-anchor="middle")");
    }
    out += fmt::format(R"(<polyline points="{}" fill="none" stroke="{}" stroke-width="1.5"/>)"
                       "\n",
                       fmt::join(path, " "), streaming ? mid : dark);
    out += marks;
  }

  // Legend.
  double ly = plot_bottom + 92;
  out += rect(plot_left, ly - 11, 10, 10, fmt::format(R"(fill="{}" stroke="{}" stroke-width="1.5")", dark, dark));
  out +=
      text(plot_left + 18, ly, "ordinary stores (p is read into the cache before it is written)", R"(class="small")");
  ly += 20;
  out += rect(plot_left, ly - 11, 10, 10, fmt::format(R"(fill="#ffffff" stroke="{}" stroke-width="1.5")", mid));
  out += text(plot_left + 18, ly, "streaming stores (p goes to memory without that read)", R"(class="small")");
  ly += 20;
  out += line(plot_left, ly - 5, plot_left + 10, ly - 5,
              fmt::format(R"(stroke="{}" stroke-width="1" stroke-dasharray="2 3")", mid));
  out += text(plot_left + 18, ly, "where x and p together (8 bytes per score) fill one core's share of the cache",
              R"(class="small")");
  return out;
}

}  // namespace

std::string softmax_bench_figure(const std::optional<SoftmaxBench>& measured) {
  std::string body;
  body +=
      text(24, 34, "What the online softmax saves on a CPU: safe time / online time, per row size", R"(class="title")");
  body += text(24, 58,
               "chapter 02's ch02_softmax_bench: chapter 01's three passes against chapter 02's two, float32, "
               "one thread, vectorised exp",
               R"(class="small")");
  if (measured) {
    // The machine, in lines of at most about 120 characters, broken after a "; ".
    std::vector<std::string> lines{""};
    std::string_view rest = measured->machine;
    while (!rest.empty()) {
      const std::size_t cut = rest.find("; ");
      const std::string_view part = rest.substr(0, cut == std::string_view::npos ? rest.size() : cut + 2);
      if (!lines.back().empty() && lines.back().size() + part.size() > 120) lines.emplace_back();
      lines.back() += std::string(part);
      rest.remove_prefix(part.size());
    }
    for (std::size_t k = 0; k < lines.size() && k < 2; ++k) {
      body += text(24, 78 + 18 * static_cast<double>(k), lines[k], R"(class="small")");
    }
    body += plot(*measured);
  } else {
    body += no_measurements();
  }
  std::vector<std::string> rows;
  if (measured) {
    for (const SoftmaxBenchRow& r : measured->rows) {
      rows.push_back(fmt::format("n = {}: {:.2f} (streaming stores {:.2f})", r.n, r.ratio(), r.streaming_ratio()));
    }
  }
  const std::string description =
      measured ? fmt::format(
                     "Time of chapter 01's safe softmax over time of chapter 02's online softmax, median of the "
                     "runs in docs/benchmarks-cpu.md, per row size, with the cache sizes marked and the "
                     "memory-bound limits 5/4 and 4/3: {}. Machine: {}.",
                     fmt::join(rows, "; "), measured->machine)
               : std::string("No measurements: docs/benchmarks-cpu.md has no section for chapter 02's benchmark.");
  return document(width, measured ? height : 330.0, "Safe against online softmax on a CPU", description, body);
}

}  // namespace figures
