// figures/svg.h: the little of SVG that the figures need, written by hand with fmt.
//
// Every number is printed by fmt with a fixed precision (coordinates to 0.1 px, animation values
// to 0.01, key times to 1e-4), so the same inputs give the same bytes on every run:
// tests/figures_test.cpp regenerates the figures and compares them with the committed ones.
//
// Animation is SVG's own (SMIL <animate>), so a figure plays in a browser and in a Markdown page
// that shows it as an image, with no script. An animated figure runs one loop of `duration`
// seconds, then starts over. Each animated attribute gets one <animate> that spans the whole loop:
// a Track holds its value at key times, linear in between, with a jump where two keys share a
// time. An element's attributes hold the value at the END of the loop, so a viewer without
// animation (or a printout) shows the finished picture. The loop also opens on that picture: it
// first holds the end values for finished_hold seconds, then plays from the start, so a renderer
// that takes the first frame (a browser's print or PDF, a thumbnail) shows the finished picture
// too, never the empty axes of the animation's start.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace figures {

// Colours: three steps of lightness that stay apart when printed in grey (grey levels 45, 121
// and 218 of 255 by the usual 0.299 R + 0.587 G + 0.114 B), plus ink, hairlines and a background
// band. A figure never tells two things apart by hue alone.
inline constexpr std::string_view dark = "#1b2a6b";
inline constexpr std::string_view mid = "#d95f02";
inline constexpr std::string_view light = "#fdd49e";
inline constexpr std::string_view ink = "#1a1a1a";
inline constexpr std::string_view hairline = "#9a9a9a";
inline constexpr std::string_view band = "#efefef";

// A coordinate or length in pixels, to 0.1 px ("-0.0" printed as "0.0").
inline std::string px(double v) {
  if (std::fabs(v) < 0.05) v = 0.0;
  return fmt::format("{:.1f}", v);
}

// A number for a label: "−∞" and "∞" for infinities, a whole number without decimals (the
// worked example's scores and maxima), anything else to 4 places as the worked example gives it; a
// negative number with a minus sign (U+2212), not a hyphen.
inline std::string number(double v) {
  if (std::isinf(v)) return v < 0 ? "\u2212\u221e" : "\u221e";
  if (std::isnan(v)) return "NaN";
  const std::string s =
      v == std::round(v) && std::fabs(v) < 1e6 ? fmt::format("{:.0f}", v + 0.0) : fmt::format("{:.4f}", v);
  return s[0] == '-' ? "\u2212" + s.substr(1) : s;
}

// A whole number >= 0 in subscript digits (U+2080 ...), for Q₀, K₃, x₁₆.
inline std::string subscript(std::size_t n) {
  std::string out;
  for (char d : std::to_string(n)) {
    out += "\xE2\x82";  // U+2080 + d in UTF-8 is E2 82 (80 + d)
    out += static_cast<char>(0x80 + (d - '0'));
  }
  return out;
}

// Text made safe for XML: &, <, > and " escaped.
inline std::string escape(std::string_view text) {
  std::string out;
  for (char ch : text) {
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += ch;
    }
  }
  return out;
}

// <rect>. attributes: further attributes as written (fill, stroke, class, ...); children: the
// <animate> elements of the rectangle, if any.
inline std::string rect(double x, double y, double w, double h, std::string_view attributes,
                        std::string_view children = {}) {
  const std::string head = fmt::format(R"(<rect x="{}" y="{}" width="{}" height="{}" {})", px(x), px(y),
                                       px(std::max(w, 0.0)), px(std::max(h, 0.0)), attributes);
  if (children.empty()) return head + "/>\n";
  return fmt::format("{}>\n{}</rect>\n", head, children);
}

// <line> from (x1, y1) to (x2, y2).
inline std::string line(double x1, double y1, double x2, double y2, std::string_view attributes,
                        std::string_view children = {}) {
  const std::string head =
      fmt::format(R"(<line x1="{}" y1="{}" x2="{}" y2="{}" {})", px(x1), px(y1), px(x2), px(y2), attributes);
  if (children.empty()) return head + "/>\n";
  return fmt::format("{}>\n{}</line>\n", head, children);
}

// <text> at (x, y) (the baseline), its content escaped.
inline std::string text(double x, double y, std::string_view content, std::string_view attributes = {},
                        std::string_view children = {}) {
  return fmt::format(R"(<text x="{}" y="{}"{}{}>{}{}</text>)"
                     "\n",
                     px(x), px(y), attributes.empty() ? "" : " ", attributes, escape(content),
                     children.empty() ? "" : "\n" + std::string(children));
}

// Lines of small text one under the other, the first's baseline at y, `leading` pixels apart: a
// caption too long for one line.
inline std::string small_lines(double x, double y, double leading, const std::vector<std::string>& lines) {
  std::string out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    out += text(x, y + leading * static_cast<double>(i), lines[i], R"(class="small")");
  }
  return out;
}

// <text> turned a quarter to the left around (x, y), for a vertical axis title.
inline std::string vertical_text(double x, double y, std::string_view content, std::string_view attributes = {}) {
  return text(x, y, content,
              fmt::format(R"a(transform="rotate(-90 {} {})" text-anchor="middle"{}{})a", px(x), px(y),
                          attributes.empty() ? "" : " ", attributes));
}

// The text classes every figure uses, sized to read at 100% zoom.
inline constexpr std::string_view style_sheet =
    "<style>\n"
    "  text { font-family: 'DejaVu Sans', 'Liberation Sans', Arial, Helvetica, sans-serif; font-size: 14px; "
    "fill: #1a1a1a; }\n"
    "  .title { font-size: 20px; font-weight: bold; }\n"
    "  .heading { font-size: 16px; font-weight: bold; }\n"
    "  .small { font-size: 13px; }\n"
    "  .mono { font-family: 'DejaVu Sans Mono', 'Liberation Mono', Menlo, Consolas, monospace; font-size: 14px; "
    "white-space: pre; }\n"
    "  .bold { font-weight: bold; }\n"
    "  .white { fill: #ffffff; }\n"
    "</style>\n";

// The whole file: an SVG of width x height pixels with a <title> (what a browser shows as its
// name), a <desc> (what the figure shows, for a reader who cannot see it), a white background
// and the body.
inline std::string document(double width, double height, std::string_view title, std::string_view description,
                            std::string_view body) {
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\">\n"
      "<title>{2}</title>\n<desc>{3}</desc>\n{4}"
      "<rect x=\"0\" y=\"0\" width=\"{0}\" height=\"{1}\" fill=\"#ffffff\"/>\n{5}</svg>\n",
      px(width), px(height), escape(title), escape(description), style_sheet, body);
}

// Seconds at the start of every loop that show the finished picture (the end values), before the
// animation plays from its own start; a figure's loop is loop_length(duration) long.
inline constexpr double finished_hold = 4.0;
inline double loop_length(double duration) { return finished_hold + duration; }

// The value of one numeric attribute over an animation loop: key times in seconds from the start
// of the loop, never decreasing; linear between keys; a jump where two keys share a time.
class Track {
 public:
  explicit Track(double start) : keys_{{0.0, start}} {}

  // The value stays as it is until t.
  Track& hold(double t) { return key(t, value()); }
  // From its value at t0, linear to v at t1.
  Track& move(double t0, double t1, double v) {
    hold(t0);
    return key(t1, v);
  }
  // Becomes v at t.
  Track& jump(double t, double v) { return move(t, t, v); }

  double value() const { return keys_.back().second; }

  // The <animate> element for `attribute` over an animation of `duration` seconds, played after
  // finished_hold seconds of the end value (a loop of loop_length(duration)); "" when the value
  // never changes. Throws std::logic_error when a key lies past the end of the animation (a
  // figure's own mistake, never the reader's).
  std::string animate(std::string_view attribute, double duration) const {
    bool changes = false;
    for (const auto& [t, v] : keys_) changes = changes || v != keys_.front().second;
    if (!changes) return "";
    if (keys_.back().first > duration + 1e-9) {
      throw std::logic_error(
          fmt::format("Track::animate: a key at {} s lies past the loop's end, {} s", keys_.back().first, duration));
    }
    // The keys over the whole loop: the end value held from 0 to finished_hold, then the track's
    // own keys, shifted by finished_hold, up to the value it reaches at `duration` (a jump made at
    // that very moment, such as a label shown "until the end" going back to 0, is left out: the
    // loop goes on into the hold, which shows that end value). Without those that change nothing:
    // a repeat of the key before it, or the middle of three equal values (the line through it is
    // flat anyway).
    std::vector<std::pair<double, double>> own;
    for (const auto& [t, v] : keys_) {
      own.emplace_back(t, v);
      if (t >= duration - 1e-9) break;
    }
    const double end = own.back().second;
    std::vector<std::pair<double, double>> keys{{0.0, end}, {finished_hold, end}};
    for (const auto& [t, v] : own) keys.emplace_back(finished_hold + t, v);
    if (own.back().first < duration) keys.emplace_back(loop_length(duration), end);
    const double loop = loop_length(duration);
    std::vector<std::pair<double, double>> kept;
    for (std::size_t k = 0; k < keys.size(); ++k) {
      const bool repeat = !kept.empty() && kept.back() == keys[k];
      const bool flat = !kept.empty() && k + 1 < keys.size() && kept.back().second == keys[k].second &&
                        keys[k + 1].second == keys[k].second;
      if (!repeat && !flat) kept.push_back(keys[k]);
    }
    std::string times, values;
    for (const auto& [t, v] : kept) {
      if (!times.empty()) {
        times += ';';
        values += ';';
      }
      times += fmt::format("{:.4f}", t / loop);
      values += fmt::format("{:.2f}", std::fabs(v) < 0.005 ? 0.0 : v);
    }
    return fmt::format(R"(<animate attributeName="{}" dur="{:.2f}s" repeatCount="indefinite" calcMode="linear" )"
                       R"(keyTimes="{}" values="{}"/>)"
                       "\n",
                       attribute, loop, times, values);
  }

 private:
  Track& key(double t, double v) {
    if (t < keys_.back().first) {
      throw std::logic_error(
          fmt::format("Track: key at {} s comes before the last one, at {} s", t, keys_.back().first));
    }
    keys_.emplace_back(t, v);
    return *this;
  }

  std::vector<std::pair<double, double>> keys_;
};

// A vertical bar whose bottom edge and height move over the loop. SVG wants y (the top edge) and
// height, so the two Tracks move at the same key times.
class BarTrack {
 public:
  BarTrack(double bottom, double height) : y_(bottom - height), height_(height) {}

  // From where it is at t0, linear to (bottom, height) at t1.
  BarTrack& move(double t0, double t1, double bottom, double height) {
    y_.move(t0, t1, bottom - height);
    height_.move(t0, t1, height);
    return *this;
  }
  BarTrack& jump(double t, double bottom, double height) { return move(t, t, bottom, height); }

  double y() const { return y_.value(); }
  double height() const { return height_.value(); }
  double bottom() const { return y() + height(); }
  // The <animate> elements for y and height ("" for one that never changes).
  std::string animate(double duration) const { return y_.animate("y", duration) + height_.animate("height", duration); }

 private:
  Track y_, height_;
};

// Opacity 1 from `from` until `until` (seconds), 0 outside: a label that belongs to one moment.
inline Track shown_between(double from, double until) {
  Track t(0.0);
  t.jump(from, 1.0);
  t.jump(until, 0.0);
  return t;
}

}  // namespace figures
