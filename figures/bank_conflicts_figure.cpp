// figures/bank_conflicts_figure.cpp: figure 7, bank-conflicts.svg, the 32 banks of shared memory
// as one warp reads shared[lane * stride] (4-byte floats) for strides 1, 2, 33 and 32.
//
// For each stride, a row of 32 columns, one per bank (word w is in bank w % 32). Each lane is a
// square in the column of its bank; lanes that need another word of the same bank stack up, and
// the highest stack is the number of wavefronts, which the caption takes from simt's own rule
// (simt::profile::shared_cost, common/simt/tools/detail/profile_counting.h), so the figure cannot disagree with
// the counts of --profile. Stacks above 8 are cut, with the count written on top.
#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/simt/tools/detail/profile_counting.h"
#include "figures/figures.h"
#include "figures/svg.h"

namespace figures {
namespace {

constexpr double width = 960;
constexpr double left = 96;
constexpr double cell_w = 26, cell_h = 18;
constexpr unsigned max_shown = 8;

// One stride's row; moves y below it.
std::string bank_row(unsigned stride, double& y) {
  simt::profile::WarpAccess access;
  for (unsigned lane = 0; lane < 32; ++lane) access.set(lane, std::uint64_t{lane} * stride * 4, 4);
  const simt::profile::SharedCost cost = simt::profile::shared_cost(access);
  // Per bank, its lanes in the order of their words (a lane on an already listed word shares it).
  std::array<std::vector<unsigned>, 32> lanes;
  std::array<std::vector<unsigned>, 32> words;
  for (unsigned lane = 0; lane < 32; ++lane) {
    const unsigned word = lane * stride;
    lanes[word % 32].push_back(lane);
    if (std::find(words[word % 32].begin(), words[word % 32].end(), word) == words[word % 32].end()) {
      words[word % 32].push_back(word);
    }
  }
  unsigned tallest = 0;
  for (const auto& w : words) tallest = std::max(tallest, static_cast<unsigned>(w.size()));
  const unsigned shown = std::min(tallest, max_shown);
  std::string out;
  out += text(24, y + 18,
              fmt::format("stride {}: {} wavefront{}, {} bank conflict{}", stride, cost.wavefronts,
                          cost.wavefronts == 1 ? "" : "s", cost.bank_conflicts, cost.bank_conflicts == 1 ? "" : "s"),
              R"(class="heading")");
  const double base = y + 40 + cell_h * shown;  // the bottom of the stacks
  for (unsigned bank = 0; bank < 32; ++bank) {
    const double x = left + cell_w * bank;
    out += line(x, base, x + cell_w - 2, base, fmt::format(R"(stroke="{}" stroke-width="1")", hairline));
    for (unsigned level = 0; level < std::min<std::size_t>(words[bank].size(), max_shown); ++level) {
      // The lanes on this word: the first one's number, "+n" if others share it.
      unsigned first = 32, sharing = 0;
      for (unsigned lane : lanes[bank]) {
        if (lane * stride == words[bank][level]) {
          first = std::min(first, lane);
          ++sharing;
        }
      }
      const double cy = base - cell_h * (level + 1);
      const std::string_view fill = level == 0 ? light : mid;
      out += rect(x, cy, cell_w - 2, cell_h - 2, fmt::format(R"(fill="{}" stroke="{}" stroke-width="0.5")", fill, ink));
      out += text(x + (cell_w - 2) / 2, cy + 13, sharing > 1 ? "all" : fmt::format("{}", first),
                  R"(class="small" text-anchor="middle")");
    }
    if (words[bank].size() > max_shown) {
      out += text(x + (cell_w - 2) / 2, base - cell_h * max_shown - 4, fmt::format("{}", words[bank].size()),
                  R"(class="small bold" text-anchor="middle")");
    }
  }
  y = base + 8;
  return out;
}

}  // namespace

std::string bank_conflicts_figure() {
  std::string body;
  double y = 16;
  body += text(24, y + 20, "One warp reads shared[lane * stride]: which bank serves each lane", R"(class="title")");
  body += text(24, y + 44,
               "32 banks of 4-byte words (word w in bank w % 32); each square is a lane, labelled with its number; "
               "a stack is one bank",
               R"(class="small")");
  body += text(24, y + 62,
               "delivering several words, one per wavefront (orange: the extra ones, the bank conflicts); "
               "\"all\": every lane reads that one word",
               R"(class="small")");
  y += 76;
  for (unsigned bank = 0; bank < 32; bank += 4) {
    body += text(left + cell_w * bank + (cell_w - 2) / 2, y + 12, fmt::format("{}", bank),
                 R"(class="small" text-anchor="middle")");
  }
  body += text(24, y + 12, "bank", R"(class="small")");
  y += 16;
  for (const unsigned stride : {1u, 2u, 33u, 32u, 0u}) body += bank_row(stride, y);
  body += text(
      24, y + 24,
      "Counts from simt::profile::shared_cost (common/simt/tools/detail/profile_counting.h), the rule of --profile; "
      "a stack of more than 8 is cut,",
      R"(class="small")");
  body +=
      text(24, y + 42, "its height written on top. Try it: build/default/bin/simt_bank_conflicts --stride S --profile",
           R"(class="small")");
  return document(width, y + 58, "Shared-memory banks for strides 1, 2, 33, 32 and 0",
                  "One warp of 32 lanes reads 4-byte words at lane * stride. Stride 1 and 33 put every lane in its own "
                  "bank (1 wavefront); stride 2 puts two lanes in each even bank (2 wavefronts, 1 conflict); stride "
                  "32 puts all 32 lanes in bank 0 (32 wavefronts, 31 conflicts); stride 0 is one word broadcast to "
                  "every lane (1 wavefront).",
                  body);
}

}  // namespace figures
