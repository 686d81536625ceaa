// The CPU emulation of tensor_core.h: mma.sync m16n8k16, ldmatrix, cp.async, __syncwarp.
//
// Each warp-collective instruction is a rendezvous (warp_collective.h): every lane hands over its
// operands, and the last lane to arrive runs the instruction for the whole warp. The fragment
// formulas below are the PTX ISA's, each with the sentence it implements. The memory accesses of
// the emulated instructions happen in exactly two functions, one per kind, so that a memory-access
// profiler can count them there:
//   read_ldmatrix_rows   the shared-memory reads of one ldmatrix (one call per warp instruction)
//   land_async_copy      the global read and shared write of one cp.async (one call per copy)
// mma touches no memory: its operands are registers.
//
// This file is compiled with the sanitizers (block.cpp is not under ThreadSanitizer): the reads
// and writes above are seen as those of the lane that runs them, ldmatrix's by the last lane of
// the warp to arrive, a cp.async's by the thread that waits for it.

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/platform.h"
#include "common/simt/instructions/detail/tensor_core_cpu.h"
#include "common/simt/instructions/half_precision.h"
#include "common/simt/runtime/detail/warp_collective.h"
#include "common/simt/runtime/device_code.h"
#include "common/simt/tools/detail/observer.h"

namespace simt {
inline namespace cpu {
namespace detail {
namespace {

constexpr unsigned lanes = 32;
constexpr std::size_t row_bytes = 16;  // one ldmatrix row and one cp.async: 8 b16 elements

std::string hex(const void* address) {
  char text[2 + 16 + 1];
  std::snprintf(text, sizeof text, "%#llx", static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(address)));
  return text;
}

// ---- Shared memory: where a block's __shared__ data can be --------------------------------------

// The ranges of this host thread's thread-local storage, one per loaded module that has a TLS
// segment (common/platform.h). Static __shared__ arrays are `static thread_local` (device_code.h),
// so they lie in one of these; so do the program's other thread_local variables, which this check
// cannot tell apart from __shared__ ones.
struct Range {
  const std::byte* begin;
  const std::byte* end;
};

std::vector<Range> find_thread_local_ranges() {
  std::vector<Range> ranges;
  for (const fa::platform::AddressRange& r : fa::platform::thread_local_storage()) {
    ranges.push_back({reinterpret_cast<const std::byte*>(r.begin), reinterpret_cast<const std::byte*>(r.end)});
  }
  return ranges;
}

const std::vector<Range>& thread_local_ranges() {
  // Computed once per host thread: a block never leaves its host thread, nor does its storage move.
  thread_local const std::vector<Range> ranges = find_thread_local_ranges();
  return ranges;
}

bool inside(const Range& r, const std::byte* p, std::size_t bytes) {
  return p >= r.begin && p <= r.end && static_cast<std::size_t>(r.end - p) >= bytes;
}

// True when [p, p + bytes) lies in this block's dynamic shared memory, or in this host thread's
// thread-local storage (static __shared__ arrays).
bool in_shared_memory(const void* address, std::size_t bytes) {
  const auto* p = static_cast<const std::byte*>(address);
  if (dynamic_shared_memory != nullptr &&
      inside({dynamic_shared_memory, dynamic_shared_memory + dynamic_shared_size}, p, bytes)) {
    return true;
  }
  for (const Range& r : thread_local_ranges()) {
    if (inside(r, p, bytes)) return true;
  }
  return false;
}

std::string shared_memory_description() {
  return "this block's dynamic shared memory is " + hex(dynamic_shared_memory) + " + " +
         std::to_string(dynamic_shared_size) +
         " bytes; static __shared__ arrays lie in this host thread's thread-local storage";
}

// Throws std::invalid_argument unless [address, address + 16) is 16-byte aligned shared memory.
void check_shared_row(const char* instruction, const char* operand, const void* address,
                      const std::source_location& site) {
  const std::string lane = "lane " + std::to_string(current_lane()) + " of warp " + std::to_string(current_warp());
  if (!in_shared_memory(address, row_bytes)) {
    throw std::invalid_argument(std::string(instruction) + " (" + where(site) + "): " + lane + " gives " + operand +
                                " " + hex(address) +
                                ", which is not 16 bytes of this block's "
                                "shared memory (" +
                                shared_memory_description() + ")");
  }
  if (reinterpret_cast<std::uintptr_t>(address) % row_bytes != 0) {
    throw std::invalid_argument(std::string(instruction) + " (" + where(site) + "): " + lane + " gives " + operand +
                                " " + hex(address) + ", which is not 16-byte aligned");
  }
}

// ---- The memory accesses (one function per kind; see the top of the file) ----------------------

// ldmatrix: reads `count` rows of 16 bytes, row k from row_address[k], into rows[k].
void read_ldmatrix_rows(const std::byte* const* row_address, unsigned count, std::uint16_t (*rows)[8]) {
  for (unsigned k = 0; k < count; ++k) std::memcpy(rows[k], row_address[k], row_bytes);
}

// cp.async: reads 16 bytes of global memory and writes them to shared memory (or writes zeros).
void land_async_copy(const AsyncCopy& copy) {
  if (copy.valid) {
    std::memcpy(copy.destination, copy.source, row_bytes);
  } else {
    std::memset(copy.destination, 0, row_bytes);
  }
}

// ---- mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32 ----------------------------

struct MmaOperands {
  float* d;
  const std::uint32_t* a;
  const std::uint32_t* b;
  const float* c;
};

// Element i of a register pair (.bf16x2 / .f16x2): the lower index in bits 0-15.
std::uint16_t half_of(std::uint32_t reg, unsigned i) {
  return static_cast<std::uint16_t>((i & 1u) != 0 ? reg >> 16 : reg & 0xffffu);
}

template <MmaInput input>
float to_float(std::uint16_t bits) {
  if constexpr (input == MmaInput::bf16) return bf16_bits_to_float(bits);
  return f16_bits_to_float(bits);
}

// D = A B + C for the whole warp. The indices are the PTX ISA's, "Matrix Fragments for
// mma.m16n8k16 with floating point type", with
//   groupID = %laneid >> 2, threadID_in_group = %laneid % 4.
// Sums: every product of two bf16 or two f16 values is exact in float32 (8 + 8 or 11 + 11
// significant bits fit in 24), and D[i][j] = (...((C[i][j] + A[i][0] B[0][j]) + A[i][1] B[1][j]) +
// ...) + A[i][15] B[15][j], in float32, k in order, each addition rounded to nearest even. A
// tensor core adds in an order of its own, and may round differently: a GPU's D can differ from
// this one in the last bits (never for small integers, whose sums are exact either way).
template <MmaInput input>
void complete_mma(void* const* lane_operands) {
  float A[16][16], B[16][8], C[16][8];
  for (unsigned lane = 0; lane < lanes; ++lane) {
    const auto& o = *static_cast<const MmaOperands*>(lane_operands[lane]);
    const unsigned groupID = lane >> 2, threadID_in_group = lane % 4;
    // A: "a0, a1, ..., a7" in four .f16x2/.bf16x2 registers, ai in register i / 2. (The loops over
    // i are unrolled, so that the conditions below fold into constants.)
#pragma GCC unroll 8
    for (unsigned i = 0; i < 8; ++i) {
      // "row = groupID for ai where 0 <= i < 2 || 4 <= i < 6; groupID + 8 otherwise"
      const unsigned row = (i < 2 || (4 <= i && i < 6)) ? groupID : groupID + 8;
      // "col = (threadID_in_group * 2) + (i & 0x1) for ai where i < 4;
      //        (threadID_in_group * 2) + (i & 0x1) + 8 for ai where i >= 4"
      const unsigned col = threadID_in_group * 2 + (i & 0x1) + (i < 4 ? 0 : 8);
      A[row][col] = to_float<input>(half_of(o.a[i / 2], i));
    }
    // B: "b0, b1, b2, b3" in two registers.
#pragma GCC unroll 4
    for (unsigned i = 0; i < 4; ++i) {
      // "row = (threadID_in_group * 2) + (i & 0x1) for bi where i < 2;
      //        (threadID_in_group * 2) + (i & 0x1) + 8 for bi where i >= 2"
      const unsigned row = threadID_in_group * 2 + (i & 0x1) + (i < 2 ? 0 : 8);
      const unsigned col = groupID;  // "col = groupID"
      B[row][col] = to_float<input>(half_of(o.b[i / 2], i));
    }
    // C (and D): "c0, c1, c2, c3", one float each.
#pragma GCC unroll 4
    for (unsigned i = 0; i < 4; ++i) {
      // "row = groupID for ci where i < 2; groupID + 8 for ci where i >= 2"
      const unsigned row = i < 2 ? groupID : groupID + 8;
      const unsigned col = threadID_in_group * 2 + (i & 0x1);  // "col = (threadID_in_group * 2) + (i & 0x1)"
      C[row][col] = o.c[i];
    }
  }
  // Four rows of D at a time, each row in two vectors of four floats (a GCC/Clang vector extension:
  // the eight accumulators stay in registers while k runs, and are eight independent chains of
  // additions). Element by element this is the scalar sum above, in the same order.
  using float4 = float __attribute__((vector_size(16)));
  float D[16][8];
  for (unsigned i = 0; i < 16; i += 4) {
    float4 acc[4][2];  // acc[r][h] = D[i + r][4h .. 4h + 3]
    for (unsigned r = 0; r < 4; ++r) {
      std::memcpy(&acc[r][0], &C[i + r][0], sizeof(float4));
      std::memcpy(&acc[r][1], &C[i + r][4], sizeof(float4));
    }
    for (unsigned k = 0; k < 16; ++k) {
      float4 b[2];
      std::memcpy(&b[0], &B[k][0], sizeof(float4));
      std::memcpy(&b[1], &B[k][4], sizeof(float4));
#pragma GCC unroll 4
      for (unsigned r = 0; r < 4; ++r) {
        const float a = A[i + r][k];
        acc[r][0] += a * b[0];
        acc[r][1] += a * b[1];
      }
    }
    for (unsigned r = 0; r < 4; ++r) {
      std::memcpy(&D[i + r][0], &acc[r][0], sizeof(float4));
      std::memcpy(&D[i + r][4], &acc[r][1], sizeof(float4));
    }
  }
  // Every lane's c was read above, so d may be the same array as c.
  for (unsigned lane = 0; lane < lanes; ++lane) {
    const auto& o = *static_cast<const MmaOperands*>(lane_operands[lane]);
    const unsigned groupID = lane >> 2, threadID_in_group = lane % 4;
#pragma GCC unroll 4
    for (unsigned i = 0; i < 4; ++i) {
      o.d[i] = D[i < 2 ? groupID : groupID + 8][threadID_in_group * 2 + (i & 0x1)];
    }
  }
}

// ---- ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{,.trans}.shared.b16 ---------------------------------

struct LdmatrixOperands {
  const std::byte* row_address;
  std::uint32_t* r;
};

// PTX ISA, "ldmatrix":
//   "Each address corresponds to the start of a matrix row. Addresses addr0-addr7 correspond to
//    the rows of the first matrix, addresses addr8-addr15 correspond to the rows of the second
//    matrix, and so on." (.x1: threads 0-7 give addr0-addr7; .x2: threads 0-15; .x4: threads
//    0-31.) So matrix i, row j comes from the address of lane 8i + j.
//   "Each thread in a warp loads fragments of a row, with thread 0 receiving the first fragment in
//    its register r, and so on. A group of four threads loads an entire row of the matrix": lane
//    l receives, in register r[i], elements 2 (l % 4) and 2 (l % 4) + 1 of row l / 4 of matrix i,
//    the first in bits 0-15 (the figure "ldmatrix fragment layout": row 0 is T0 {a0, a1}, T1
//    {a2, a3}, T2, T3; row 1 is T4 ... T7; row 7 ends with T31).
//   ".trans indicates that the matrix is loaded in column-major format": the same, with the roles
//    of rows and columns swapped: lane l receives rows 2 (l % 4) and 2 (l % 4) + 1 of column l / 4.
template <unsigned matrices, bool trans>
void complete_ldmatrix(void* const* lane_operands) {
  const std::byte* row_address[8 * matrices];
  for (unsigned k = 0; k < 8 * matrices; ++k) {
    row_address[k] = static_cast<const LdmatrixOperands*>(lane_operands[k])->row_address;
  }
  std::uint16_t rows[8 * matrices][8];  // rows[8i + j]: row j of matrix i
  read_ldmatrix_rows(row_address, 8 * matrices, rows);
  for (unsigned lane = 0; lane < lanes; ++lane) {
    std::uint32_t* r = static_cast<const LdmatrixOperands*>(lane_operands[lane])->r;
    const unsigned group = lane / 4, pair = 2 * (lane % 4);
    for (unsigned i = 0; i < matrices; ++i) {
      const std::uint16_t(*m)[8] = rows + 8 * i;
      const std::uint16_t lo = trans ? m[pair][group] : m[group][pair];
      const std::uint16_t hi = trans ? m[pair + 1][group] : m[group][pair + 1];
      r[i] = static_cast<std::uint32_t>(lo) | (static_cast<std::uint32_t>(hi) << 16);
    }
  }
}

constexpr const char* ldmatrix_names[2][3] = {{"ldmatrix_x1", "ldmatrix_x2", "ldmatrix_x4"},
                                              {"ldmatrix_x1_trans", "ldmatrix_x2_trans", "ldmatrix_x4_trans"}};

}  // namespace

void find_static_shared_memory() { (void)thread_local_ranges(); }

bool address_in_shared_memory(const void* address, std::size_t bytes) { return in_shared_memory(address, bytes); }
std::string hex_address(const void* address) { return hex(address); }

void mma_m16n8k16(MmaInput input, float* d, const std::uint32_t* a, const std::uint32_t* b, const float* c,
                  const std::source_location& site) {
  MmaOperands operands{d, a, b, c};
  WarpCollective op;
  op.name = input == MmaInput::bf16 ? "mma_m16n8k16_bf16" : "mma_m16n8k16_f16";
  op.complete = input == MmaInput::bf16 ? &complete_mma<MmaInput::bf16> : &complete_mma<MmaInput::f16>;
  op.operands = &operands;
  warp_collective(op, site);
}

void ldmatrix(int matrices, bool trans, std::uint32_t* r, const void* row_address, const std::source_location& site) {
  const int which = matrices == 1 ? 0 : matrices == 2 ? 1 : 2;
  const char* name = ldmatrix_names[trans][which];
  // Only the lanes that give a row address are checked (the others' operands are not used).
  if (current_lane() < 8u * static_cast<unsigned>(matrices)) {
    check_shared_row(name, "row address", row_address, site);
    // simt's memory profile and race checker: one 16-byte shared read per row, one warp instruction.
    observer::ldmatrix_read(site, current_warp() * lanes + current_lane(), row_address);
  }
  LdmatrixOperands operands{static_cast<const std::byte*>(row_address), r};
  WarpCollective op;
  op.name = name;
  static constexpr void (*complete[2][3])(void* const*) = {
      {&complete_ldmatrix<1, false>, &complete_ldmatrix<2, false>, &complete_ldmatrix<4, false>},
      {&complete_ldmatrix<1, true>, &complete_ldmatrix<2, true>, &complete_ldmatrix<4, true>}};
  op.complete = complete[trans][which];
  op.operands = &operands;
  warp_collective(op, site);
}

void syncwarp(unsigned mask, const std::source_location& site) {
  if (mask != 0xffffffffu) {
    throw std::invalid_argument("__syncwarp (" + where(site) + "): mask " +
                                hex(reinterpret_cast<void*>(std::uintptr_t{mask})) +
                                " is not supported on the CPU; use the full mask 0xffffffff");
  }
  WarpCollective op;
  op.name = "__syncwarp";
  warp_collective(op, site);
}

// ---- cp.async -----------------------------------------------------------------------------------

// PTX ISA, "cp.async": the copy is "performed asynchronously"; "cp.async.wait_group instruction
// will cause executing thread to wait till only N or fewer of the most recent cp.async-groups are
// pending and all the prior cp.async-groups committed by the executing threads are complete."
// Here cp_async_16 only records the copy; it lands when a wait covers its group.
void cp_async_16(void* shared_dst, const void* global_src, bool valid, const std::source_location& site) {
  AsyncCopies& copies = current_async_copies("cp_async_16");
  check_shared_row("cp_async_16", "shared destination", shared_dst, site);
  if (valid) {
    // "cp-size": 16 bytes here; the source must be aligned to it (PTX ISA, "cp.async": the
    // addresses must be aligned to cp-size).
    if (global_src == nullptr || reinterpret_cast<std::uintptr_t>(global_src) % row_bytes != 0) {
      throw std::invalid_argument("cp_async_16 (" + where(site) + "): lane " + std::to_string(current_lane()) +
                                  " of warp " + std::to_string(current_warp()) + " gives global source " +
                                  hex(global_src) +
                                  ", which is not 16-byte aligned (cp.async copies 16 "
                                  "bytes from a 16-byte aligned address)");
    }
    if (in_shared_memory(global_src, 1)) {
      throw std::invalid_argument("cp_async_16 (" + where(site) + "): lane " + std::to_string(current_lane()) +
                                  " of warp " + std::to_string(current_warp()) + " gives global source " +
                                  hex(global_src) +
                                  ", which is in shared memory; cp.async copies from "
                                  "global to shared memory");
    }
  }
  // simt's memory profile and race checker: the instruction reads 16 bytes of global memory (none
  // when !valid) and writes 16 bytes of shared memory, at any moment until a wait retires it.
  observer::async_copy_issued(site, current_warp() * lanes + current_lane(), shared_dst, global_src, valid);
  copies.in_flight.push_back(
      {static_cast<std::byte*>(shared_dst), static_cast<const std::byte*>(global_src), valid, copies.committed});
}

void cp_async_commit_group(const std::source_location&) { ++current_async_copies("cp_async_commit_group").committed; }

void cp_async_wait_group(int n, const std::source_location&) {
  AsyncCopies& copies = current_async_copies("cp_async_wait_group");
  // Complete every copy in a group older than the n most recent committed ones; copies not yet
  // committed to a group stay in flight (wait_group waits only for committed groups).
  const std::uint64_t keep_from = copies.committed > static_cast<std::uint64_t>(n) ? copies.committed - n : 0;
  auto& in_flight = copies.in_flight;
  std::size_t kept = 0;
  const unsigned thread = current_warp() * lanes + current_lane();
  for (std::size_t i = 0; i < in_flight.size(); ++i) {
    if (in_flight[i].group < keep_from) {
      land_async_copy(in_flight[i]);
      observer::async_copy_landed(thread, in_flight[i].destination);  // for the race checker
    } else {
      in_flight[kept++] = in_flight[i];
    }
  }
  in_flight.resize(kept);
}

void land_async_copies(AsyncCopies& copies) {
  for (const AsyncCopy& copy : copies.in_flight) land_async_copy(copy);
  copies.in_flight.clear();
}

}  // namespace detail
}  // namespace cpu
}  // namespace simt
