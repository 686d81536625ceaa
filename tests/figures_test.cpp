// Figures tests: the committed docs/figures/*.svg are exactly what the chapters' code draws today,
// the SVG is well formed and its animations valid (and open on the finished picture), figure 3
// reads docs/benchmarks.md's measured table and figure 5 docs/benchmarks-cpu.md's (or each says
// there is none).
//
// Every comparison here is exact (bytes, strings, counts): the figures print every number with a
// fixed precision, so no tolerance is needed.
//
// Stable where: on this project's toolchain (libstdc++). Figure 1's random row comes from
// std::normal_distribution, which each standard library implements its own way; with another one
// (libc++, MSVC's) online-softmax.svg differs from the committed file, and the first test says
// that this is the reason.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "catch.h"
#include "chapters/03_online_weighted_sum/online_weighted_sum.h"
#include "chapters/05_flash_attention_2/lab/traffic_table.h"
#include "chapters/10_hopper/hopper.h"
#include "common/simt/instructions/hopper.h"
#include "figures/figures.h"

#ifndef FA_SOURCE_DIR
#error "FA_SOURCE_DIR (the repository root) must be defined by tests/CMakeLists.txt"
#endif

namespace {

const std::filesystem::path source_dir = FA_SOURCE_DIR;

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A fresh folder under the system's temporary folder, removed with the object.
struct TemporaryFolder {
  std::filesystem::path path;
  TemporaryFolder() {
    const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
    path = std::filesystem::temp_directory_path() / fmt::format("fa_figures_test_{}", now);
    std::filesystem::create_directories(path);
  }
  ~TemporaryFolder() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

// Where two texts first differ: the line, the column, and both lines around that column.
std::string first_difference(const std::string& committed, const std::string& drawn) {
  std::istringstream a(committed), b(drawn);
  std::string la, lb;
  for (std::size_t n = 1;; ++n) {
    const bool more_a = static_cast<bool>(std::getline(a, la));
    const bool more_b = static_cast<bool>(std::getline(b, lb));
    if (!more_a && !more_b) return "no difference";
    if (more_a && more_b && la == lb) continue;
    if (!more_a) la = "(end of file)";
    if (!more_b) lb = "(end of file)";
    std::size_t column = 0;
    while (column < la.size() && column < lb.size() && la[column] == lb[column]) ++column;
    const std::size_t from = column > 60 ? column - 60 : 0;
    return fmt::format("first difference at line {}, column {}:\n  committed: ...{}...\n  drawn now: ...{}...", n,
                       column + 1, la.substr(from, 120), lb.substr(from, 120));
  }
}

// The random row of figure 1 as its <desc> lists it.
std::string random_row_text() {
  std::vector<std::string> scores;
  for (double x : figures::random_row()) scores.push_back(fmt::format("{:.4f}", x));
  return fmt::format("{}", fmt::join(scores, ", "));
}

// Tags opened and closed in order; returns "" or what is wrong. Not a full XML parser: enough
// for what svg.h writes (no CDATA, no comments, attributes quoted with ").
std::string tag_balance(const std::string& svg) {
  std::vector<std::string> open;
  for (std::size_t at = svg.find('<'); at != std::string::npos; at = svg.find('<', at + 1)) {
    const std::size_t end = svg.find('>', at);
    if (end == std::string::npos) return fmt::format("a '<' at {} is never closed by '>'", at);
    const std::string tag = svg.substr(at + 1, end - at - 1);
    if (std::count(tag.begin(), tag.end(), '"') % 2 != 0) return "an unbalanced quote in <" + tag + ">";
    if (tag.empty()) return fmt::format("an empty tag at {}", at);
    if (tag.front() == '/') {
      const std::string name = tag.substr(1);
      if (open.empty() || open.back() != name) {
        return fmt::format("</{}> closes <{}>", name, open.empty() ? "nothing" : open.back());
      }
      open.pop_back();
    } else if (tag.back() != '/') {
      open.push_back(tag.substr(0, tag.find_first_of(" \n")));
    }
  }
  return open.empty() ? "" : "<" + open.back() + "> is never closed";
}

// One tag as svg.h writes it: its name, its attributes in order, and the text after it up to the
// next tag. Read by hand rather than by std::regex: libstdc++'s regex recurses once per character
// matched, and the pipeline figure's values lists are long enough to overflow the stack under
// AddressSanitizer (CI's asan stage did).
struct Tag {
  std::string name;  // "rect", "/text", "animate"
  std::vector<std::pair<std::string, std::string>> attributes;
  bool self_closing = false;
  std::string text_after;

  std::optional<std::string> attribute(const std::string& key) const {
    for (const auto& [k, v] : attributes) {
      if (k == key) return v;
    }
    return std::nullopt;
  }
};

// Every tag of svg in order. Assumes what tag_balance checks (each '<' closed, quotes balanced).
std::vector<Tag> tags_of(const std::string& svg) {
  std::vector<Tag> tags;
  for (std::size_t at = svg.find('<'); at != std::string::npos;) {
    const std::size_t end = svg.find('>', at);
    REQUIRE(end != std::string::npos);
    Tag tag;
    std::size_t i = at + 1;
    const std::size_t name_end = svg.find_first_of(" \n/>", i + 1);
    tag.name = svg.substr(i, name_end - i);
    i = name_end;
    while (i < end) {
      const std::size_t key_begin = svg.find_first_not_of(" \n", i);
      if (key_begin >= end || svg[key_begin] == '/') break;
      const std::size_t equals = svg.find("=\"", key_begin);
      const std::size_t close = svg.find('"', equals + 2);
      REQUIRE(close < end);
      tag.attributes.emplace_back(svg.substr(key_begin, equals - key_begin),
                                  svg.substr(equals + 2, close - equals - 2));
      i = close + 1;
    }
    tag.self_closing = svg[end - 1] == '/';
    const std::size_t next = svg.find('<', end);
    tag.text_after = svg.substr(end + 1, (next == std::string::npos ? svg.size() : next) - end - 1);
    tags.push_back(std::move(tag));
    at = next;
  }
  return tags;
}

// Each element's <animate> children, with the element: what the tests below walk.
struct Animated {
  const Tag* element;
  std::vector<const Tag*> animations;
};

std::vector<Animated> animated_elements(const std::vector<Tag>& tags) {
  std::vector<Animated> out;
  std::vector<const Tag*> open;
  for (const Tag& t : tags) {
    if (t.name == "animate") {
      REQUIRE(!open.empty());
      if (out.empty() || out.back().element != open.back()) out.push_back({open.back(), {}});
      out.back().animations.push_back(&t);
    } else if (t.name.starts_with("/")) {
      if (!open.empty()) open.pop_back();
    } else if (!t.self_closing) {
      open.push_back(&t);
    }
  }
  return out;
}

std::vector<double> numbers_in(const std::string& list) {
  std::vector<double> out;
  std::istringstream in(list);
  for (std::string item; std::getline(in, item, ';');) out.push_back(std::stod(item));
  return out;
}

// The message with which read refuses markdown, or "" when it reads it.
template <class Reader>
std::string refusal(Reader read, const std::string& markdown) {
  try {
    read(markdown);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

constexpr const char* measured_markdown = R"(# Benchmarks

## Measured DRAM traffic (Nsight Compute) beside the traffic model, N = 4096, batch 4, heads 16

| kernel | seq_len | head_dim | causal | DRAM MB (ncu) | model MB |
|---|---|---|---|---|---|
| naive (ch04: scores + softmax + pv) | 4096 | 64 | no | 17480 | 1.745e+04 |
| flash-attention-2 (ch05) | 4096 | 64 | no | 611.2 | 8724 |
| naive (ch04: scores + softmax + pv) | 4096 | 64 | yes | 9100 | - |
| flash-attention-2 (ch05) | 4096 | 64 | yes | 333.3 | - |
| naive (ch04: scores + softmax + pv) | 4096 | 128 | no | 18950 | 1.78e+04 |
| flash-attention-2 (ch05) | 4096 | 128 | no | 1234 | 1.745e+04 |

## The check
)";

}  // namespace

TEST_CASE("the committed figures are what the chapters' code draws now", "[figures]") {
  TemporaryFolder folder;
  figures::write_figures(folder.path, source_dir / "docs" / "benchmarks.md", source_dir / "docs" / "benchmarks-cpu.md");
  for (const char* name :
       {"online-softmax.svg", "flash-attention-2-tiles.svg", "hbm-traffic.svg", "worked-example.svg",
        "softmax-bench.svg", "mma-fragments.svg", "bank-conflicts.svg", "backward-tiles.svg", "decoding-merge.svg",
        "decoding-waves.svg", "ring-steps.svg", "hopper-descriptor.svg", "hopper-pipeline.svg"}) {
    const std::filesystem::path committed_path = source_dir / "docs" / "figures" / name;
    INFO("figure " << name);
    REQUIRE(std::filesystem::exists(committed_path));
    const std::string committed = read_file(committed_path);
    const std::string drawn = read_file(folder.path / name);
    std::string why = first_difference(committed, drawn) +
                      "\nThe code that draws it changed (or docs/benchmarks.md did): run\n"
                      "  cmake --build build/default --target figures\n"
                      "and commit docs/figures/.";
    if (std::string(name) == "online-softmax.svg" && committed.find(random_row_text()) == std::string::npos) {
      why +=
          "\nThis build draws another random row than the committed figure lists in its <desc>: "
          "std::normal_distribution is implemented differently by each standard library (the committed "
          "figure was drawn with libstdc++), so on this standard library the difference is expected.";
    }
    if (std::string(name) == "decoding-merge.svg") {
      why += "\n(Its query and keys come from std::normal_distribution too: drawn with libstdc++, as figure 1.)";
    }
    INFO(why);
    const bool same_bytes = committed == drawn;  // not CHECK(a == b): that would print both files
    CHECK(same_bytes);
  }
}

TEST_CASE("every figure is well formed, titled and described", "[figures]") {
  for (const figures::Figure& f :
       figures::make_figures(source_dir / "no-such-benchmarks.md", source_dir / "no-such-benchmarks-cpu.md")) {
    INFO("figure " << f.name);
    CHECK(tag_balance(f.svg) == "");
    CHECK(f.svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    CHECK(f.svg.find("<title>") != std::string::npos);
    CHECK(f.svg.find("<desc>") != std::string::npos);
    CHECK(f.svg.find("nan") == std::string::npos);  // no NaN coordinate or label slipped through
    CHECK(f.svg.find("inf\"") == std::string::npos);
  }
}

TEST_CASE("every animation runs over the whole loop: key times from 0 to 1, in order, one per value", "[figures]") {
  std::size_t animations = 0;
  for (const figures::Figure& f :
       figures::make_figures(source_dir / "no-such-benchmarks.md", source_dir / "no-such-benchmarks-cpu.md")) {
    std::string loop;  // every animation of a figure shares one loop
    for (const Tag& t : tags_of(f.svg)) {
      if (t.name != "animate") continue;
      const std::string name = t.attribute("attributeName").value_or("");
      INFO("figure " << f.name << ": <animate attributeName=\"" << name << "\">");
      const std::optional<std::string> dur = t.attribute("dur");
      const std::optional<std::string> key_times = t.attribute("keyTimes");
      const std::optional<std::string> values_text = t.attribute("values");
      REQUIRE(dur.has_value());
      REQUIRE(key_times.has_value());
      REQUIRE(values_text.has_value());
      CHECK(dur->ends_with("s"));
      if (loop.empty()) loop = *dur;
      CHECK(*dur == loop);
      const std::vector<double> times = numbers_in(*key_times);
      const std::vector<double> values = numbers_in(*values_text);
      REQUIRE(times.size() >= 2);
      CHECK(times.size() == values.size());
      CHECK(times.front() == 0.0);
      CHECK(times.back() == 1.0);
      CHECK(std::is_sorted(times.begin(), times.end()));
      if (name == "opacity") {
        CHECK(*std::min_element(values.begin(), values.end()) >= 0.0);
        CHECK(*std::max_element(values.begin(), values.end()) <= 1.0);
      }
      if (name == "height" || name == "width") CHECK(*std::min_element(values.begin(), values.end()) >= 0.0);
      ++animations;
    }
  }
  CHECK(animations > 100);  // figures 1 and 2 animate hundreds of attributes; none at all would be a bug
}

TEST_CASE(
    "an animated figure opens on its finished picture: each animation starts and ends at the "
    "element's own value",
    "[figures]") {
  // A renderer without animation (or a print, or a PDF) shows the elements' own attributes; one
  // that takes the first frame shows the animations' first values. Both must be the finished
  // picture, so every animation's first and last value is its element's attribute (to the 0.1 px
  // and 0.01 that svg.h prints them with: the two roundings together are at most 0.06 apart).
  std::size_t checked = 0;
  for (const figures::Figure& f :
       figures::make_figures(source_dir / "no-such-benchmarks.md", source_dir / "no-such-benchmarks-cpu.md")) {
    const std::vector<Tag> tags = tags_of(f.svg);
    for (const Animated& a : animated_elements(tags)) {
      for (const Tag* animate : a.animations) {
        const std::string name = animate->attribute("attributeName").value_or("");
        const std::vector<double> values = numbers_in(animate->attribute("values").value_or(""));
        const std::optional<std::string> own = a.element->attribute(name);
        INFO("figure " << f.name << ": <" << a.element->name << "> animates " << name);
        REQUIRE(!values.empty());
        REQUIRE((own.has_value() || name == "opacity"));  // SVG's default opacity is 1; no other default is used
        const double value = own ? std::stod(*own) : 1.0;
        CHECK(std::abs(values.front() - value) <= 0.06);
        CHECK(std::abs(values.back() - value) <= 0.06);
        ++checked;
      }
    }
  }
  CHECK(checked > 100);  // figures 1 and 2 animate hundreds of attributes
}

TEST_CASE("figure 3 labels the traffic table as chapter 05 prints it", "[figures]") {
  const std::string svg = figures::traffic_figure(std::nullopt);
  for (const ch05::TrafficCase& c : ch05::traffic_table_cases()) {
    const ch05::TrafficRow r = ch05::traffic_row(c);
    for (std::uint64_t bytes : {r.standard, r.fa2, r.floor}) {
      const std::string label = ">" + ch05::format_megabytes(bytes) + " MB</text>";
      INFO("seq_len " << c.seq_len << ", head_dim " << c.head_dim << ": label " << label);
      CHECK(svg.find(label) != std::string::npos);
    }
  }
  // The first size's three figures, as the traffic table prints them.
  for (const char* label : {">136 MB</text>", ">34.6 MB</text>", ">2.1 MB</text>"}) {
    INFO(label);
    CHECK(svg.find(label) != std::string::npos);
  }
  CHECK(svg.find("No measured bytes yet") != std::string::npos);
}

TEST_CASE("figure 3 draws the measured bytes of docs/benchmarks.md beside the model", "[figures]") {
  const std::optional<figures::MeasuredTraffic> measured = figures::read_measured_traffic(measured_markdown);
  REQUIRE(measured.has_value());
  CHECK(measured->heading ==
        "Measured DRAM traffic (Nsight Compute) beside the traffic model, N = 4096, batch 4, heads 16");
  REQUIRE(measured->sizes.size() == 2);  // the causal rows are left out
  CHECK(measured->sizes[0].head_dim == 64);
  CHECK(measured->sizes[0].naive_measured_mb == 17480.0);
  CHECK(measured->sizes[0].flash_measured_mb == 611.2);
  CHECK(measured->sizes[0].flash_model_mb == 8724.0);
  CHECK(measured->sizes[1].head_dim == 128);
  CHECK(measured->sizes[1].flash_measured_mb == 1234.0);

  const std::string svg = figures::traffic_figure(measured);
  CHECK(svg.find("No measured bytes yet") == std::string::npos);
  CHECK(svg.find(R"a(fill="url(#hatch-mid)")a") != std::string::npos);
  for (const char* label : {">611 MB</text>", ">1230 MB</text>", ">17500 MB</text>", ">8720 MB</text>"}) {
    INFO(label);
    CHECK(svg.find(label) != std::string::npos);
  }
  CHECK_FALSE(figures::read_measured_traffic("# Benchmarks\n\nno table here\n").has_value());
}

TEST_CASE("a measured table that cannot be read is refused with its line and the expected form", "[figures]") {
  const std::string head =
      "## Measured DRAM traffic (Nsight Compute), N = 4096\n\n"
      "| kernel | seq_len | head_dim | causal | DRAM MB (ncu) | model MB |\n|---|---|---|---|---|---|\n";
  auto message = [](const std::string& markdown) { return refusal(figures::read_measured_traffic, markdown); };
  const std::string not_a_number = message(head + "| naive | 4096 | 64 | no | lots | 1 |\n");
  CHECK(not_a_number.find("line 5") != std::string::npos);
  CHECK(not_a_number.find("| kernel | seq_len |") != std::string::npos);
  CHECK(message(head + "| naive | 4096 | 64 | no | 12 |\n").find("5 cells instead of 6") != std::string::npos);
  CHECK(message(head + "| naive | 4096 | 64 | no | 12 | 13 |\n").find("no flash-attention-2 row") != std::string::npos);
  CHECK(message(head).find("no row with causal \"no\"") != std::string::npos);
}

constexpr const char* softmax_bench_markdown =
    R"(# CPU benchmarks

## Safe against online softmax (ch02_softmax_bench), median of 3

Machine: a test machine; one run

| cache | bytes per core |
|---|---|
| L1d | 32768 |
| L2 | 524288 |
| L3 | 33554432 |

)"
    "| n | safe us | online us | safe / online | safe us, streaming | online us, streaming | "
    "safe / online, streaming | max pass us |\n"
    R"(|---|---|---|---|---|---|---|---|
| 1000 | 1.55 | 1.52 | 1.02 | 1.63 | 1.65 | 0.99 | 0.03 |
| 1000000 | 1800 | 1600 | 1.13 | 1700 | 1500 | 1.13 | 100 |
| 100000000 | 190000 | 160000 | 1.19 | 180000 | 150000 | 1.20 | 25000 |

## Another section
)";

TEST_CASE("figure 5 draws the ratios of docs/benchmarks-cpu.md with the caches marked", "[figures]") {
  const std::optional<figures::SoftmaxBench> bench = figures::read_softmax_bench(softmax_bench_markdown);
  REQUIRE(bench.has_value());
  CHECK(bench->machine == "a test machine; one run");
  REQUIRE(bench->caches.size() == 3);
  CHECK(bench->caches[1].name == "L2");
  CHECK(bench->caches[1].bytes == 524288);
  REQUIRE(bench->rows.size() == 3);
  CHECK(bench->rows[2].n == 100000000);
  CHECK(bench->rows[2].safe_us == 190000.0);
  CHECK(bench->rows[2].online_streaming_us == 150000.0);
  CHECK(bench->rows[2].max_pass_us == 25000.0);

  const std::string svg = figures::softmax_bench_figure(bench);
  CHECK(tag_balance(svg) == "");
  for (const char* label : {">1.02</text>", ">0.99</text>", ">1.13</text>", ">1.19</text>", ">1.20</text>",
                            ">L1d 32 KiB</text>", ">L2 512 KiB</text>", ">L3 32 MiB</text>", ">1e8</text>",
                            ">400 MB</text>", "5/4: memory-bound limit", "4/3: the same, streaming"}) {
    INFO(label);
    CHECK(svg.find(label) != std::string::npos);
  }
  CHECK(svg.find("No measurements yet") == std::string::npos);
  CHECK(figures::softmax_bench_figure(std::nullopt).find("No measurements yet") != std::string::npos);
  CHECK_FALSE(figures::read_softmax_bench("# CPU benchmarks\n\nnothing here\n").has_value());
}

TEST_CASE("a benchmark table whose ratio disagrees with its times, or that cannot be read, is refused", "[figures]") {
  const std::string head =
      "## Safe against online softmax\n\n| cache | bytes per core |\n|---|---|\n| L2 | 524288 |\n\n"
      "| n | safe us | online us | safe / online | safe us, streaming | online us, streaming | "
      "safe / online, streaming | max pass us |\n|---|---|---|---|---|---|---|---|\n";
  auto message = [](const std::string& markdown) { return refusal(figures::read_softmax_bench, markdown); };
  CHECK(message(head + "| 1000 | 2 | 1 | 2.00 | 2 | 1 | 2.00 | 1 |\n") == "");
  const std::string wrong_ratio = message(head + "| 1000 | 2 | 1 | 1.50 | 2 | 1 | 2.00 | 1 |\n");
  CHECK(wrong_ratio.find("line 9") != std::string::npos);
  CHECK(wrong_ratio.find("not safe us / online us") != std::string::npos);
  CHECK(message(head + "| 1000 | 2 | 1 | 2.00 | 2 | 1 | 2.00 |\n").find("7 cells") != std::string::npos);
  CHECK(message(head + "| 1000 | 2 | x | 2.00 | 2 | 1 | 2.00 | 1 |\n").find("cell 3") != std::string::npos);
  CHECK(message(head + "| 1000 | 2 | 1 | 2.00 | 2 | 1 | 2.00 | 1 |\n| 100 | 2 | 1 | 2.00 | 2 | 1 | 2.00 | 1 |\n")
            .find("does not increase") != std::string::npos);
  CHECK(message(head).find("lacks its times table") != std::string::npos);
}

TEST_CASE("figures 1 and 4 carry the worked example's numbers", "[figures]") {
  // The worked example prints these to four places; chapter 03's recurrence must give them.
  const std::string worked = figures::worked_example_figure();
  for (const char* figure :
       {"0.1353", "1.1353", "21.3534", "0.1537", "2.8899", "1.0498", "31.9915", "1.2034", "34.8813", "28.9847"}) {
    INFO(figure);
    CHECK(worked.find(figure) != std::string::npos);
  }
  const std::string online = figures::online_softmax_figure();
  for (const char* figure : {"0.1353", "1.1353", "1.2034"}) {
    INFO(figure);
    CHECK(online.find(figure) != std::string::npos);
  }
}

TEST_CASE("figure 6's fragment map, read off the emulation, is the PTX ISA's", "[figures]") {
  // PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type", with groupID = lane / 4
  // and threadID_in_group = lane % 4; element e of a lane in register e / 2.
  const figures::MmaFragmentMap map = figures::mma_fragment_map();
  for (unsigned lane = 0; lane < 32; ++lane) {
    const unsigned group = lane / 4, t = lane % 4;
    for (unsigned e = 0; e < 8; ++e) {
      const unsigned row = (e < 2 || (e >= 4 && e < 6)) ? group : group + 8;
      const unsigned col = t * 2 + (e & 1) + (e >= 4 ? 8 : 0);
      INFO("lane " << lane << ", a" << e);
      CHECK((map.A[row][col].lane == lane && map.A[row][col].element == e));
    }
    for (unsigned e = 0; e < 4; ++e) {
      const unsigned k = t * 2 + (e & 1) + (e >= 2 ? 8 : 0);
      INFO("lane " << lane << ", b" << e << ", c" << e);
      CHECK((map.B[k][group].lane == lane && map.B[k][group].element == e));
      const unsigned row = e < 2 ? group : group + 8;
      CHECK((map.C[row][t * 2 + (e & 1)].lane == lane && map.C[row][t * 2 + (e & 1)].element == e));
    }
  }
  const std::string svg = figures::mma_fragments_figure();
  CHECK(svg.find("Lane 0 holds a0..a7 = A[0][0], A[0][1], A[8][0], A[8][1], A[0][8], A[0][9], A[8][8], A[8][9].") !=
        std::string::npos);
}

TEST_CASE("the bank figure's captions are simt's counts for strides 1, 2, 33, 32 and 0", "[figures]") {
  const std::string bank = figures::bank_conflicts_figure();
  for (const char* caption : {"stride 1: 1 wavefront, 0 bank conflicts", "stride 2: 2 wavefronts, 1 bank conflict<",
                              "stride 33: 1 wavefront, 0 bank conflicts", "stride 32: 32 wavefronts, 31 bank conflicts",
                              "stride 0: 1 wavefront, 0 bank conflicts"}) {
    INFO(caption);
    CHECK(bank.find(caption) != std::string::npos);
  }
}

TEST_CASE("figure 11 plays the ring: at step s rank r holds rank (r - s) mod P's shard, slid in from rank r - 1",
          "[figures]") {
  const std::string svg = figures::ring_steps_figure();
  CHECK(svg.find("<desc>Animated") != std::string::npos);
  const std::size_t P = figures::ring_ranks;
  // Each cell's first line, rank by rank and step by step: a <text> naming the shard, its place in
  // the finished picture (y), and its animations.
  struct Cell {
    double y;
    unsigned long shard;
    std::optional<std::vector<double>> y_values;  // the y animation's values, where the cell moves
  };
  const std::string label = "K/V shard of rank ";
  const std::vector<Tag> tags = tags_of(svg);
  std::vector<Cell> cells;
  for (std::size_t i = 0; i < tags.size(); ++i) {
    const Tag& t = tags[i];
    if (t.name != "text" || !t.text_after.starts_with(label)) continue;
    Cell c{std::stod(t.attribute("y").value()), std::stoul(t.text_after.substr(label.size())), std::nullopt};
    for (std::size_t j = i + 1; j < tags.size() && tags[j].name == "animate"; ++j) {
      if (tags[j].attribute("attributeName") == "y") c.y_values = numbers_in(tags[j].attribute("values").value());
    }
    cells.push_back(c);
  }
  REQUIRE(cells.size() == P * P);
  for (std::size_t r = 0; r < P; ++r) {
    for (std::size_t s = 0; s < P; ++s) {
      INFO("rank " << r << ", step " << s);
      const Cell& c = cells[r * P + s];
      CHECK(c.shard == (r + P - s) % P);  // ring.h, line 3
      const bool moves = c.y_values.has_value();
      if (s == 0 || P == 1) {
        CHECK_FALSE(moves);  // step 0: every rank's own shard, nothing travelled
        continue;
      }
      // Line 4: the shard comes from the rank before, whose row it passes through at the step's start.
      REQUIRE(moves);
      const double from = cells[((r + P - 1) % P) * P + s - 1].y;
      const std::vector<double>& values = *c.y_values;
      CHECK(std::ranges::any_of(values, [&](double v) { return std::abs(v - from) <= 0.06; }));
    }
  }
}

TEST_CASE("figure 13's trace, read off the emulation, is chapter 10's ring of stages", "[figures]") {
  const figures::HopperTrace trace = figures::hopper_trace();
  const int Bc = ch10::kTileShapes[0].Bc;
  REQUIRE(trace.stages == 2);
  REQUIRE(trace.tiles == static_cast<int>(figures::hopper_rows_k) / Bc);
  using figures::HopperLane;
  using figures::HopperWhat;
  // The step of the first event of `what` about tile j on `lane` (-1 when there is none).
  const auto step = [&](HopperLane lane, HopperWhat what, int j) {
    for (std::size_t k = 0; k < trace.events.size(); ++k) {
      const figures::HopperEvent& e = trace.events[k];
      if (e.lane == lane && e.what == what && e.tile == j) return static_cast<int>(k);
    }
    return -1;
  };
  for (int j = 0; j < trace.tiles; ++j) {
    INFO("tile " << j);
    for (const figures::HopperEvent& e : trace.events) {
      if (e.tile == j) CHECK(e.stage == j % trace.stages);  // tile j through stage j % kStages
    }
    const int copy = step(HopperLane::producer, HopperWhat::tma_kv, j);
    REQUIRE(copy >= 0);
    CHECK(step(HopperLane::producer, HopperWhat::wait_empty, j) == copy - 1);
    if (j >= trace.stages) {  // a refill only once both consumers have released the stage
      CHECK(step(HopperLane::barriers, HopperWhat::empty_done, j - trace.stages) < copy);
    }
    CHECK(copy < step(HopperLane::barriers, HopperWhat::full_done, j));
    for (const HopperLane c : {HopperLane::consumer0, HopperLane::consumer1}) {
      const int full = step(c, HopperWhat::wait_full, j), scores = step(c, HopperWhat::scores, j);
      const int pv = step(c, HopperWhat::pv, j), release = step(c, HopperWhat::release, j);
      CHECK(step(HopperLane::barriers, HopperWhat::full_done, j) < full);
      CHECK(full < scores);
      CHECK(scores < step(c, HopperWhat::softmax, j));
      CHECK(step(c, HopperWhat::softmax, j) < pv);
      CHECK(pv < release);
      CHECK(release <= step(HopperLane::barriers, HopperWhat::empty_done, j));
      if (j + 1 < trace.tiles) {  // the next tile's S is issued before this tile's P V (FA3 Algorithm 2)
        CHECK(step(c, HopperWhat::scores, j + 1) < pv);
        CHECK(step(c, HopperWhat::softmax, j + 1) < release);
      }
    }
  }
}

TEST_CASE("figure 12's descriptor is the kernel's K-major, 128B-swizzled B operand of S = Q K^T", "[figures]") {
  const figures::HopperTrace trace = figures::hopper_trace();
  REQUIRE(trace.k_descriptors.size() == figures::hopper_head_dim / 16);  // one wgmma per 16 columns
  const simt::WgmmaDescriptorFields first = simt::decode_wgmma_descriptor(trace.k_descriptors[0]);
  CHECK(first.swizzle == simt::Swizzle::b128);
  CHECK(first.stride_byte_offset == 8 * 128);  // 8 rows of 128 bytes
  CHECK(first.base_offset == 0);
  CHECK(first.start_address % 1024 == 0);  // the stage's box starts at the pattern's repeat
  for (std::size_t kd = 1; kd < trace.k_descriptors.size(); ++kd) {
    CHECK(simt::decode_wgmma_descriptor(trace.k_descriptors[kd]).start_address == first.start_address + 32 * kd);
  }
  const std::string svg = figures::hopper_descriptor_figure();
  CHECK(svg.find(fmt::format("0x{:016x}", trace.k_descriptors[0])) != std::string::npos);
}
