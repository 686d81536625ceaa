// How one warp instruction's memory accesses are counted, by Nsight Compute's definitions.
//
// A warp instruction is what the 32 lanes of a warp execute together; each active lane names one
// address and a size (inactive lanes, as in divergent code, name nothing). From those:
//
//   global memory   sectors: the distinct 32-byte sectors the active lanes touch
//                   (l1tex__t_sectors_pipe_lsu_mem_global_op_{ld,st}.sum counts them per instruction)
//   shared memory   32 banks of 4-byte words, word w in bank w % 32. Lanes that name the same word
//                   are served by one read (a broadcast). An access of 8 bytes per lane is served
//                   a half-warp at a time (lanes 0-15, then 16-31), one of 16 bytes a quarter-warp
//                   at a time; each such phase costs as many wavefronts as the most distinct words
//                   any one bank must deliver in it (at least 1 when a lane of it is active).
//                   So a full warp needs at least 1, 2 or 4 wavefronts for 4-, 8- or 16-byte
//                   accesses, and the bank conflicts are the wavefronts beyond that minimum
//                   (l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{ld,st}.sum and
//                   l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{ld,st}.sum).
//
// Source: Nsight Compute, "Kernel Profiling Guide", metrics of the L1TEX unit (sectors, wavefronts,
// bank conflicts); CUDA C++ Programming Guide, "Shared Memory" under compute capability 5.x and
// later (32 banks of 4 bytes, broadcast of one word, 64-bit accesses by half-warp).
// docs/profiling.md works the examples of tests/simt_profile_test.cpp by hand.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

namespace simt::profile {

inline constexpr unsigned kWarpLanes = 32;
inline constexpr unsigned kBanks = 32;
inline constexpr unsigned kBankBytes = 4;
inline constexpr unsigned kSectorBytes = 32;

// One warp instruction: for each lane, whether it is active, its address and its size in bytes.
// Addresses are byte addresses; what they are relative to does not change the counts as long as
// sectors (global) start at multiples of 32 and words (shared) at multiples of 4.
struct WarpAccess {
  std::uint32_t active = 0;  // bit l set: lane l made the access
  std::array<std::uint64_t, kWarpLanes> address{};
  std::array<std::uint32_t, kWarpLanes> bytes{};

  void set(unsigned lane, std::uint64_t addr, std::uint32_t size) {
    active |= 1u << lane;
    address[lane] = addr;
    bytes[lane] = size;
  }
  bool is_active(unsigned lane) const { return ((active >> lane) & 1u) != 0; }
  std::uint64_t requested_bytes() const {
    std::uint64_t sum = 0;
    for (unsigned l = 0; l < kWarpLanes; ++l) sum += is_active(l) ? bytes[l] : 0;
    return sum;
  }
};

// The distinct 32-byte sectors the active lanes touch (an access that straddles a sector boundary
// touches both). 0 for an instruction with no active lane.
inline std::uint64_t global_sectors(const WarpAccess& a) {
  // At most 32 lanes of at most a few sectors each: a small sorted list is enough.
  std::array<std::uint64_t, 4 * kWarpLanes> seen{};
  unsigned n = 0;
  std::uint64_t extra = 0;  // sectors of unusually wide accesses (more than 4 per lane), not deduplicated
  for (unsigned l = 0; l < kWarpLanes; ++l) {
    if (!a.is_active(l) || a.bytes[l] == 0) continue;
    const std::uint64_t first = a.address[l] / kSectorBytes;
    const std::uint64_t last = (a.address[l] + a.bytes[l] - 1) / kSectorBytes;
    if (last - first >= 4) {
      extra += last - first + 1;
      continue;
    }
    for (std::uint64_t s = first; s <= last; ++s) seen[n++] = s;
  }
  std::sort(seen.begin(), seen.begin() + n);
  return static_cast<std::uint64_t>(std::unique(seen.begin(), seen.begin() + n) - seen.begin()) + extra;
}

struct SharedCost {
  std::uint64_t wavefronts = 0;
  std::uint64_t bank_conflicts = 0;  // wavefronts beyond the least this access pattern needs
};

// Wavefronts and bank conflicts of one shared-memory warp instruction (the rule at the top).
// The phases follow the widest access of the instruction: 4 bytes or less, the whole warp at once;
// 8 bytes, half-warps; more, quarter-warps.
inline SharedCost shared_cost(const WarpAccess& a) {
  std::uint32_t widest = 0;
  for (unsigned l = 0; l < kWarpLanes; ++l) widest = std::max(widest, a.is_active(l) ? a.bytes[l] : 0u);
  if (widest == 0) return {};
  const unsigned phase_lanes = widest <= 4 ? 32 : widest <= 8 ? 16 : 8;
  SharedCost cost;
  for (unsigned first = 0; first < kWarpLanes; first += phase_lanes) {
    // The distinct words of this phase, then the most that fall into one bank.
    std::array<std::uint64_t, 4 * kWarpLanes> words{};
    unsigned n = 0;
    for (unsigned l = first; l < first + phase_lanes; ++l) {
      if (!a.is_active(l) || a.bytes[l] == 0) continue;
      const std::uint64_t w0 = a.address[l] / kBankBytes;
      const std::uint64_t w1 = (a.address[l] + a.bytes[l] - 1) / kBankBytes;
      for (std::uint64_t w = w0; w <= w1 && n < words.size(); ++w) words[n++] = w;
    }
    if (n == 0) continue;  // no active lane in this phase: it costs nothing
    std::sort(words.begin(), words.begin() + n);
    const unsigned distinct = static_cast<unsigned>(std::unique(words.begin(), words.begin() + n) - words.begin());
    std::array<unsigned, kBanks> per_bank{};
    unsigned most = 0;
    for (unsigned i = 0; i < distinct; ++i) most = std::max(most, ++per_bank[words[i] % kBanks]);
    cost.wavefronts += most;
    cost.bank_conflicts += most - 1;
  }
  return cost;
}

}  // namespace simt::profile
