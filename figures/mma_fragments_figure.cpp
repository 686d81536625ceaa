// figures/mma_fragments_figure.cpp: figure 6, mma-fragments.svg, which lane holds which element of
// the A, B and C/D fragments of mma.m16n8k16, and which lane gives which row address to ldmatrix .x4.
//
// The map is not typed in: mma_fragment_map() runs one warp through common/simt's CPU emulation and
// reads it off the registers. The warp loads an A (16x16) and a B (16x8, [k][n]) whose entries
// name their own row and column, with ldmatrix_x4 and ldmatrix_x2_trans from shared memory, as a
// FlashAttention-2 kernel does; then mma_m16n8k16_bf16 with A = the identity and B[k][n] = 8k + n
// gives D = B, so each lane's d[i] names the element of D it holds. Its parts:
//   a. A: a 16x16 grid, each cell coloured by the register (a[0]..a[3]) that holds it, labelled
//      with the lane ("T5") and the element's PTX name (a0..a7: register e / 2, bits 0-15 for even e)
//   b. B: 16x8 (k down, n across), b0..b3 in b[0], b[1]
//   c. C/D: 16x8, c0..c3, one float register each
//   d. ldmatrix .x4 on A: lane 8i + j gives the address of row j of 8x8 matrix i; matrix i is the
//      block of A that register a[i] holds
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "common/simt/simt.h"
#include "figures/figures.h"
#include "figures/svg.h"

namespace figures_kernels::SIMT_BACKEND {

// Per lane: a[4] (8 element codes row << 8 | col), b[2] (4 codes k << 8 | n), d[4] (8 row + col).
__global__ void fragment_probe_kernel(std::uint32_t* a_out, std::uint32_t* b_out, float* d_out) {
  __shared__ __align__(16) std::uint16_t a_codes[16 * 16];
  __shared__ __align__(16) std::uint16_t b_codes[16 * 8];
  __shared__ __align__(16) std::uint16_t identity[16 * 16];
  __shared__ __align__(16) std::uint16_t b_values[16 * 8];
  const unsigned lane = threadIdx.x;
  for (unsigned e = lane; e < 16 * 16; e += 32) {
    a_codes[e] = static_cast<std::uint16_t>((e / 16) << 8 | (e % 16));
    identity[e] = static_cast<std::uint16_t>(simt::pack_bf16x2(e / 16 == e % 16 ? 1.0f : 0.0f, 0.0f));
  }
  for (unsigned e = lane; e < 16 * 8; e += 32) {
    b_codes[e] = static_cast<std::uint16_t>((e / 8) << 8 | (e % 8));
    b_values[e] = static_cast<std::uint16_t>(simt::pack_bf16x2(static_cast<float>(e), 0.0f));  // 8k + n
  }
  __syncwarp();
  // Part d: lane l gives row l % 16, column 8 (l / 16) of A; lanes 0..15 give row l of B.
  const unsigned a_row = lane % 16, a_col = 8 * (lane / 16), b_row = lane % 16;
  std::uint32_t a[4], b[2], one[4], bv[2];
  simt::ldmatrix_x4(a, a_codes + a_row * 16 + a_col);
  simt::ldmatrix_x2_trans(b, b_codes + b_row * 8);
  simt::ldmatrix_x4(one, identity + a_row * 16 + a_col);
  simt::ldmatrix_x2_trans(bv, b_values + b_row * 8);
  float d[4];
  const float zero[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  simt::mma_m16n8k16_bf16(d, one, bv, zero);
  for (unsigned i = 0; i < 4; ++i) a_out[4 * lane + i] = a[i];
  for (unsigned i = 0; i < 2; ++i) b_out[2 * lane + i] = b[i];
  for (unsigned i = 0; i < 4; ++i) d_out[4 * lane + i] = d[i];
}

}  // namespace figures_kernels::SIMT_BACKEND

namespace figures {

MmaFragmentMap mma_fragment_map() {
  simt::DeviceBuffer<std::uint32_t> a(32 * 4), b(32 * 2);
  simt::DeviceBuffer<float> d(32 * 4);
  simt::launch<figures_kernels::cpu::fragment_probe_kernel>(dim3(1), dim3(32), 0, a.data(), b.data(), d.data());
  const auto ha = a.to_host(), hb = b.to_host();
  const auto hd = d.to_host();
  MmaFragmentMap map{};
  for (unsigned lane = 0; lane < 32; ++lane) {
    for (unsigned e = 0; e < 8; ++e) {  // element e: register e / 2, bits 0-15 for even e
      const unsigned code = (ha[4 * lane + e / 2] >> (16 * (e % 2))) & 0xffffu;
      map.A[code >> 8][code & 0xff] = {lane, e};
    }
    for (unsigned e = 0; e < 4; ++e) {
      const unsigned code = (hb[2 * lane + e / 2] >> (16 * (e % 2))) & 0xffffu;
      map.B[code >> 8][code & 0xff] = {lane, e};
    }
    for (unsigned e = 0; e < 4; ++e) {
      const auto code = static_cast<unsigned>(hd[4 * lane + e]);  // 8 row + col, exact
      map.C[code / 8][code % 8] = {lane, e};
    }
  }
  return map;
}

namespace {

constexpr double cell_w = 40, cell_h = 30;
constexpr double margin = 24;

// Fill and text class for register r (0..3): four steps of lightness, as svg.h's palette.
std::string_view register_fill(unsigned r) {
  constexpr std::array<std::string_view, 4> fills{dark, mid, light, band};
  return fills[r % 4];
}
std::string_view on_fill(unsigned r) { return r < 2 ? R"(class="small bold white")" : R"(class="small bold")"; }
std::string_view on_fill_plain(unsigned r) { return r < 2 ? R"(class="small white")" : R"(class="small")"; }

// One grid of rows x cols cells at (x, y); cell (i, j) shows holder[i][j]. name: "a", "b" or "c";
// per_register: elements per register (2 for a, b; 1 for c).
template <std::size_t Rows, std::size_t Cols>
std::string fragment_grid(double x, double y, const std::array<std::array<MmaFragmentMap::Holder, Cols>, Rows>& holder,
                          std::string_view name, unsigned per_register, std::string_view row_name,
                          std::string_view col_name) {
  std::string out;
  for (std::size_t i = 0; i < Rows; ++i) {
    out += text(x - 6, y + cell_h * static_cast<double>(i) + 20, fmt::format("{}", i),
                R"(class="small" text-anchor="end")");
  }
  for (std::size_t j = 0; j < Cols; ++j) {
    out += text(x + cell_w * (static_cast<double>(j) + 0.5), y - 6, fmt::format("{}", j),
                R"(class="small" text-anchor="middle")");
  }
  out += text(x - 30, y - 26, fmt::format("{} \u2193, {} \u2192", row_name, col_name), R"(class="small")");
  for (std::size_t i = 0; i < Rows; ++i) {
    for (std::size_t j = 0; j < Cols; ++j) {
      const MmaFragmentMap::Holder h = holder[i][j];
      const unsigned reg = h.element / per_register;
      const double cx = x + cell_w * static_cast<double>(j), cy = y + cell_h * static_cast<double>(i);
      out += rect(cx, cy, cell_w, cell_h,
                  fmt::format(R"(fill="{}" stroke="#ffffff" stroke-width="1")", register_fill(reg)));
      out += text(cx + cell_w / 2, cy + 13, fmt::format("T{}", h.lane),
                  fmt::format(R"({} text-anchor="middle")", on_fill(reg)));
      out += text(cx + cell_w / 2, cy + 26, fmt::format("{}{}", name, h.element),
                  fmt::format(R"({} text-anchor="middle")", on_fill_plain(reg)));
    }
  }
  out += rect(x, y, cell_w * static_cast<double>(Cols), cell_h * static_cast<double>(Rows),
              fmt::format(R"(fill="none" stroke="{}" stroke-width="1.5")", ink));
  return out;
}

// The legend of a grid: which fill is which register.
std::string legend(double x, double y, std::string_view name, unsigned registers, std::string_view what) {
  std::string out;
  for (unsigned r = 0; r < registers; ++r) {
    const double lx = x + 96 * static_cast<double>(r);
    out += rect(lx, y, 18, 18, fmt::format(R"(fill="{}" stroke="{}" stroke-width="1")", register_fill(r), ink));
    out += text(lx + 24, y + 14, fmt::format("{}[{}]", name, r), R"(class="small")");
  }
  out += text(x + 96 * static_cast<double>(registers), y + 14, what, R"(class="small")");
  return out;
}

// (d) The row addresses of ldmatrix .x4 for A: each 8-element half row of A is one 16-byte row of
// one of the four 8x8 matrices; lane 8i + j gives the address of row j of matrix i.
std::string ldmatrix_panel(double x, double y) {
  std::string out;
  const double half_w = cell_w * 8;  // 8 columns of A, as wide as in part a
  for (unsigned row = 0; row < 16; ++row) {
    for (unsigned half = 0; half < 2; ++half) {
      const unsigned matrix = (row / 8) + 2 * half;  // a[i]: rows 8 (i % 2).., columns 8 (i / 2)..
      const unsigned lane = 8 * matrix + row % 8;
      const double cx = x + half_w * half, cy = y + cell_h * row;
      out += rect(cx, cy, half_w, cell_h,
                  fmt::format(R"(fill="{}" stroke="#ffffff" stroke-width="1")", register_fill(matrix)));
      out += text(cx + half_w / 2, cy + 20,
                  fmt::format("T{}: &A[{}][{}]  (matrix {}, row {})", lane, row, 8 * half, matrix, row % 8),
                  fmt::format(R"({} text-anchor="middle")", on_fill_plain(matrix)));
    }
    out += text(x - 6, y + cell_h * row + 20, fmt::format("{}", row), R"(class="small" text-anchor="end")");
  }
  out += text(x + half_w / 2, y - 6, "columns 0-7", R"(class="small" text-anchor="middle")");
  out += text(x + half_w * 1.5, y - 6, "columns 8-15", R"(class="small" text-anchor="middle")");
  out += rect(x, y, 2 * half_w, cell_h * 16, fmt::format(R"(fill="none" stroke="{}" stroke-width="1.5")", ink));
  return out;
}

}  // namespace

std::string mma_fragments_figure() {
  const MmaFragmentMap map = mma_fragment_map();
  const double a_x = margin + 60, top = 170;
  const double b_x = a_x + 16 * cell_w + 110;
  const double grid_h = 16 * cell_h;
  const double second = top + grid_h + 130;
  const double width = b_x + 8 * cell_w + margin;

  std::string body;
  body += text(margin, 34, "mma.m16n8k16 fragments: which lane holds which element", R"(class="title")");
  body += text(margin, 58,
               "D (16x8, f32) = A (16x16, bf16 or f16, row-major) \u00d7 B (16x8, column-major) + C, held by the "
               "32 lanes T0..T31 of one warp, as common/simt runs it",
               R"(class="small")");
  body += text(margin, 78,
               "(PTX ISA, \"Matrix Fragments for mma.m16n8k16 with floating point type\"): groupID = lane / 4 "
               "picks the row (of B: the column), lane % 4 the pair of columns",
               R"(class="small")");
  body +=
      text(margin, 98, "(of B: of rows). Element e is in register e / 2, bits 0-15 for even e.", R"(class="small")");

  body += text(a_x, top - 52, "A: a[0..3], two elements each (a0..a7)", R"(class="heading")");
  body += fragment_grid(a_x, top, map.A, "a", 2, "row", "col");
  body += legend(a_x, top + grid_h + 12, "a", 4, "");

  body += text(b_x, top - 52, "B: b[0..1] (b0..b3)", R"(class="heading")");
  body += fragment_grid(b_x, top, map.B, "b", 2, "k", "n");
  body += legend(b_x, top + grid_h + 12, "b", 2, "");

  body += text(a_x, second - 52, "ldmatrix .x4 on A: lane 8i + j gives row j of matrix i = a[i]", R"(class="heading")");
  body += ldmatrix_panel(a_x, second);

  body += text(b_x, second - 52, "C, D: c[0..3] (c0..c3), floats", R"(class="heading")");
  body += fragment_grid(b_x, second, map.C, "c", 1, "row", "col");
  body += legend(b_x, second + grid_h + 12, "c", 4, "");

  const double height = second + grid_h + 60;
  std::string lane0;  // lane 0's elements of A, in element order, from the map
  for (unsigned e = 0; e < 8; ++e) {
    for (unsigned i = 0; i < 16; ++i) {
      for (unsigned j = 0; j < 16; ++j) {
        if (map.A[i][j].lane == 0 && map.A[i][j].element == e) lane0 += fmt::format("{}A[{}][{}]", e ? ", " : "", i, j);
      }
    }
  }
  const std::string description = fmt::format(
      "The fragments of mma.sync.aligned.m16n8k16 as common/simt's CPU emulation holds them: for each "
      "element of A (16x16), B (16x8) and C/D (16x8), the lane (T0..T31) and the PTX element name "
      "(a0..a7, b0..b3, c0..c3; element e in register e / 2), the cells coloured by register; and the "
      "row addresses of ldmatrix .x4 loading A: lane 8i + j gives row j of the 8x8 matrix i, which "
      "register a[i] receives. Lane 0 holds a0..a7 = {}.",
      lane0);
  return document(width, height, "mma.m16n8k16 fragments", description, body);
}

}  // namespace figures
