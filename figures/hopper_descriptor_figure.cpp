// figures/hopper_descriptor_figure.cpp: figure 12, hopper-descriptor.svg (figures.h), static: the
// wgmma shared-memory descriptor of K_j that chapter 10's kernel built, and where the 128-byte
// swizzle puts each 16-byte chunk of K_j's rows.
//
// Nothing in it is typed in:
//   a. the descriptor is the B operand of the first wgmma of S = Q_i K_j^T by consumer 0 for tile
//      HopperTrace::descriptor_tile, as the kernel passed it to simt (hopper_trace); the bit
//      positions of its fields are found by encoding all ones into each field alone with
//      simt::wgmma_descriptor, and their values read back by simt::decode_wgmma_descriptor
//   b. the kernel's other three descriptors of that S (one per 16 columns of the head dim)
//   c. the first 8 rows of K_j's box at the descriptor's start address: chunk c of row r (elements
//      8c .. 8c+7) lies at simt::swizzled_address(start + 128 r + 16 c, Swizzle::b128), the function
//      by which simt's TMA writes the box and simt's wgmma reads its operand
#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "chapters/10_hopper/hopper.h"
#include "common/simt/instructions/hopper.h"
#include "figures/figures.h"
#include "figures/svg.h"

namespace figures {

namespace {

// One field of the descriptor: its name, the bits it holds (a mask), how it is read back.
struct Field {
  std::string_view name;
  std::uint64_t mask;
  std::string_view fill;
};

unsigned lowest_bit(std::uint64_t mask) { return static_cast<unsigned>(__builtin_ctzll(mask)); }
unsigned highest_bit(std::uint64_t mask) { return 63u - static_cast<unsigned>(__builtin_clzll(mask)); }

// The fields, each found by encoding all ones into it and zeros elsewhere (a swizzle's code: the
// union of the three modes' codes).
std::vector<Field> descriptor_fields() {
  using simt::Swizzle;
  const std::uint64_t swizzle = simt::wgmma_descriptor(0, Swizzle::b128, 0, 0) |
                                simt::wgmma_descriptor(0, Swizzle::b64, 0, 0) |
                                simt::wgmma_descriptor(0, Swizzle::b32, 0, 0);
  return {{"start address", simt::wgmma_descriptor(~0u, Swizzle::none, 0, 0), "#c6dbef"},
          {"leading byte offset (LBO)", simt::wgmma_descriptor(0, Swizzle::none, ~0u, 0), light},
          {"stride byte offset (SBO)", simt::wgmma_descriptor(0, Swizzle::none, 0, ~0u), "#c7e9c0"},
          {"base offset", simt::wgmma_descriptor(0, Swizzle::none, 0, 0, ~0u), "#dadaeb"},
          {"swizzle mode", swizzle, "#fcbba1"}};
}

std::string_view swizzle_name(simt::Swizzle s) {
  constexpr std::array<std::string_view, 4> names{"none", "32B", "64B", "128B"};
  return names[static_cast<unsigned>(s)];
}

// The value of each field as decode_wgmma_descriptor gives it, in words.
std::string decoded(std::size_t field, const simt::WgmmaDescriptorFields& f) {
  switch (field) {
    case 0:
      return fmt::format("{} (0x{:x}): byte offset in shared memory", f.start_address, f.start_address);
    case 1:
      return fmt::format("{} bytes (unused: K-major with a swizzle)", f.leading_byte_offset);
    case 2:
      return fmt::format("{} bytes: from 8 rows to the next 8", f.stride_byte_offset);
    case 3:
      return fmt::format("{}: the pattern starts at its {}-byte repeat", f.base_offset,
                         8 * simt::swizzle_span(f.swizzle));
    default:
      return fmt::format("{}", swizzle_name(f.swizzle));
  }
}

// Eight chunk fills, dark to light (ColorBrewer Blues), so the permutation reads in grey too; the
// first four carry white text. Every cell also names its chunk.
constexpr std::array<std::string_view, 8> kChunkFills{"#08306b", "#08519c", "#2171b5", "#4292c6",
                                                      "#6baed6", "#9ecae1", "#c6dbef", "#deebf7"};
std::string_view on_chunk(unsigned c) { return c < 4 ? R"(class="small bold white")" : R"(class="small bold")"; }

}  // namespace

std::string hopper_descriptor_figure() {
  const HopperTrace trace = hopper_trace();
  const std::uint64_t desc = trace.k_descriptors.front();
  const simt::WgmmaDescriptorFields f = simt::decode_wgmma_descriptor(desc);
  const std::vector<Field> fields = descriptor_fields();
  const int Bc = ch10::kTileShapes[0].Bc;
  const int tile = trace.descriptor_tile, stage = trace.descriptor_stage;
  const std::string Kj = "K" + subscript(static_cast<std::size_t>(tile));

  const double margin = 24, bit_w = 15, strip_x = margin + 8, strip_y = 150, strip_h = 30;
  std::string body =
      text(margin, 34, "The wgmma descriptor of " + Kj + " and the 128-byte swizzle", R"(class="title")");
  body += small_lines(
      margin, 58, 18,
      {fmt::format("From chapter 10's kernel as common/simt ran it (head dim {}, {} keys): the descriptor of B in the "
                   "first wgmma of S = Q\u1d62 {}\u1d40 (tile {}, stage {} of the ring),",
                   hopper_head_dim, hopper_rows_k, Kj, tile, stage),
       "as the kernel built it (make_wgmma_descriptor); its fields found with simt::wgmma_descriptor, read back "
       "with simt::decode_wgmma_descriptor."});

  // a. The 64 bits, bit 63 on the left.
  body += text(margin, 112, fmt::format("a. The 64-bit descriptor 0x{:016x}", desc), R"(class="heading")");
  const auto bit_x = [&](unsigned bit) { return strip_x + bit_w * static_cast<double>(63 - bit); };
  for (unsigned bit = 0; bit < 64; ++bit) {
    std::string_view fill = "#ffffff";
    for (const Field& field : fields) {
      if ((field.mask >> bit) & 1u) fill = field.fill;
    }
    body += rect(bit_x(bit), strip_y, bit_w, strip_h,
                 fmt::format(R"(fill="{}" stroke="{}" stroke-width="0.5")", fill, hairline));
    body += text(bit_x(bit) + bit_w / 2, strip_y + 20, fmt::format("{}", (desc >> bit) & 1u),
                 R"(class="small" text-anchor="middle")");
  }
  body +=
      rect(strip_x, strip_y, 64 * bit_w, strip_h, fmt::format(R"(fill="none" stroke="{}" stroke-width="1.5")", ink));
  // Each field's first and last bit above the strip (both over the middle of a narrow field), and a
  // bracket under it.
  for (const Field& field : fields) {
    const unsigned lo = lowest_bit(field.mask), hi = highest_bit(field.mask);
    if (hi - lo < 4) {
      body += text((bit_x(hi) + bit_x(lo) + bit_w) / 2, strip_y - 6, fmt::format("{}\u2013{}", hi, lo),
                   R"(class="small" text-anchor="middle")");
    } else {
      body += text(bit_x(hi) + 1, strip_y - 6, fmt::format("{}", hi), R"(class="small")");
      body += text(bit_x(lo) + bit_w - 1, strip_y - 6, fmt::format("{}", lo), R"(class="small" text-anchor="end")");
    }
    body += line(bit_x(hi) + 1, strip_y + strip_h + 6, bit_x(lo) + bit_w - 1, strip_y + strip_h + 6,
                 fmt::format(R"(stroke="{}" stroke-width="3")", field.fill == light ? mid : field.fill));
  }
  // The table of fields.
  const double table_y = strip_y + strip_h + 40;
  const std::array<double, 4> columns{margin + 30, margin + 250, margin + 390, margin + 540};
  body += text(columns[0], table_y, "field", R"(class="small bold")");
  body += text(columns[1], table_y, "bits", R"(class="small bold")");
  body += text(columns[2], table_y, "stored", R"(class="small bold")");
  body += text(columns[3], table_y, "decode_wgmma_descriptor", R"(class="small bold")");
  for (std::size_t i = 0; i < fields.size(); ++i) {
    const Field& field = fields[i];
    const double y = table_y + 22 * static_cast<double>(i + 1);
    const unsigned lo = lowest_bit(field.mask), hi = highest_bit(field.mask);
    body += rect(margin, y - 13, 18, 16, fmt::format(R"(fill="{}" stroke="{}" stroke-width="1")", field.fill, ink));
    body += text(columns[0], y, field.name, R"(class="small")");
    body += text(columns[1], y, fmt::format("{}\u2013{}", lo, hi), R"(class="small")");
    body += text(columns[2], y, fmt::format("0x{:x}", (desc & field.mask) >> lo), R"(class="small mono")");
    body += text(columns[3], y, decoded(i, f), R"(class="small")");
  }

  // b. The other descriptors of the same S.
  const double list_y = table_y + 22 * static_cast<double>(fields.size() + 1) + 30;
  body += text(margin, list_y,
               fmt::format("b. The kernel's {} B descriptors of this S = Q\u1d62 {}\u1d40, one per 16 columns of the "
                           "head dim",
                           trace.k_descriptors.size(), Kj),
               R"(class="heading")");
  std::string starts;
  for (std::size_t kd = 0; kd < trace.k_descriptors.size(); ++kd) {
    const std::uint64_t d = trace.k_descriptors[kd];
    const double x = margin + 250 * static_cast<double>(kd);
    body += text(x, list_y + 24, fmt::format("0x{:016x}", d), R"(class="mono")");
    body += text(x, list_y + 42,
                 fmt::format("start {} (0x{:x})", simt::decode_wgmma_descriptor(d).start_address,
                             simt::decode_wgmma_descriptor(d).start_address),
                 R"(class="small")");
    starts += fmt::format("{}{}", kd ? ", " : "", simt::decode_wgmma_descriptor(d).start_address);
  }
  body += text(margin, list_y + 64,
               "Each starts 32 bytes (16 elements) further along the row; the swizzle is applied to the address, so "
               "a start need not be a chunk's home.",
               R"(class="small")");

  // c. Where the swizzle puts each 16-byte chunk of the box's first 8 rows.
  const double cell_w = 42, cell_h = 30, grid_y = list_y + 140, left_x = margin + 96;
  const double right_x = left_x + 8 * cell_w + 170;
  body += text(margin, grid_y - 50,
               fmt::format("c. {}'s first 8 rows (keys {}\u2013{}), 128 bytes each: 16-byte chunk c holds elements "
                           "8c \u2026 8c+7",
                           Kj, tile * Bc, tile * Bc + 7),
               R"(class="heading")");
  body += text(left_x, grid_y - 24, "as TMA reads the box from K (chunk c at slot c)", R"(class="small")");
  body +=
      text(right_x, grid_y - 24, fmt::format("in shared memory from 0x{:x}: the chunk in each slot", f.start_address),
           R"(class="small")");
  bool all_xor = true;
  for (unsigned r = 0; r < 8; ++r) {
    const double y = grid_y + cell_h * r;
    body += text(left_x - 8, y + 20, fmt::format("row {}", r), R"(class="small" text-anchor="end")");
    body += text(right_x - 8, y + 20, fmt::format("+{}", 128 * r), R"(class="small" text-anchor="end")");
    for (unsigned c = 0; c < 8; ++c) {
      const std::uint32_t at = simt::swizzled_address(f.start_address + 128 * r + 16 * c, simt::Swizzle::b128);
      const std::uint32_t offset = at - f.start_address;
      if (offset / 128 != r) throw std::logic_error("hopper_descriptor_figure: the swizzle left its row");
      const unsigned slot = (offset % 128) / 16;
      all_xor = all_xor && slot == (c ^ r);
      for (const auto& [x, column] : {std::pair{left_x, c}, std::pair{right_x, slot}}) {
        const double cx = x + cell_w * column;
        body +=
            rect(cx, y, cell_w, cell_h, fmt::format(R"(fill="{}" stroke="#ffffff" stroke-width="1")", kChunkFills[c]));
        body += text(cx + cell_w / 2, y + 20, fmt::format("c{}", c),
                     fmt::format(R"({} text-anchor="middle")", on_chunk(c)));
      }
    }
  }
  for (unsigned slot = 0; slot < 8; ++slot) {
    for (const double x : {left_x, right_x}) {
      body +=
          text(x + cell_w * (slot + 0.5), grid_y - 6, fmt::format("{}", slot), R"(class="small" text-anchor="middle")");
    }
  }
  for (const double x : {left_x, right_x}) {
    body += rect(x, grid_y, 8 * cell_w, 8 * cell_h, fmt::format(R"(fill="none" stroke="{}" stroke-width="1.5")", ink));
  }
  body += text(left_x + 8 * cell_w + 85, grid_y + 4 * cell_h + 5, "\u2192 swizzle \u2192",
               R"(class="bold" text-anchor="middle")");
  if (!all_xor) throw std::logic_error("hopper_descriptor_figure: the 128-byte swizzle is not chunk XOR row");
  const double foot = grid_y + 8 * cell_h + 30;
  body += small_lines(
      margin, foot, 18,
      {"Slot = (simt::swizzled_address(start + 128 r + 16 c, Swizzle::b128) \u2212 start) / 16 mod 8 = c XOR r for "
       "every cell: rows 8\u201363 repeat the pattern.",
       "simt's TMA writes each element of a box at that address, and its wgmma reads each element of an operand "
       "from it: what one wrote, the other reads."});

  const std::string description = fmt::format(
      "Chapter 10's wgmma descriptor of {0} as common/simt ran the kernel, 0x{1:016x}, as a strip of 64 bits with its "
      "fields coloured: start address {2} (bits {3}-{4}), leading byte offset {5}, stride byte offset {6}, base offset "
      "{7}, swizzle {8}; the four descriptors of that S start at {9}. Below, two 8 x 8 grids of 16-byte chunks: the "
      "first 8 rows of {0} as TMA reads them, chunk c at slot c, and in shared memory after the 128-byte swizzle, "
      "where chunk c of row r sits in slot c XOR r.",
      Kj, desc, f.start_address, lowest_bit(fields[0].mask), highest_bit(fields[0].mask), f.leading_byte_offset,
      f.stride_byte_offset, f.base_offset, swizzle_name(f.swizzle), starts);
  return document(strip_x + 64 * bit_w + margin + 8, foot + 32,
                  "The wgmma descriptor of " + Kj + " and the 128-byte swizzle", description, body);
}

}  // namespace figures
