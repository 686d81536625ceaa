// The CPU emulation of hopper.h: wgmma with its matrix descriptors, mbarrier, named barriers,
// setmaxnreg, and TMA's cp.async.bulk.tensor.
//
// Where the state lives. An mbarrier's state is its own 64-bit word in shared memory, in simt's
// encoding (below), so a kernel's mbarrier arrays work as they are. Everything else that a block
// accumulates (the wgmma results in flight per thread, the named barriers, the TMA copies not yet
// landed) is in BlockState, one per host thread, begun afresh with each block (block.cpp's
// current_block_serial()).
//
// When things happen. wgmma computes its product at the rendezvous of the warpgroup's 128 threads,
// from the operands as they are then, but each thread's d receives the result only at the
// wgmma_wait_group that covers its group; in between d holds wgmma_pending_bits. A TMA copy lands
// when some thread waits on its mbarrier, and then completes its bytes there. A thread that waits
// for an mbarrier phase or a named barrier is suspended (block.cpp's wait_until) until it completes.
//
// ThreadSanitizer sees each CUDA thread (fiber) and the scheduler's host context as threads of their
// own. Two kinds of annotation keep it to the kernel's races:
//   - simt's own bookkeeping (BlockState) is touched only inside a Bookkeeping scope, which
//     acquires and releases one token: the bookkeeping of different CUDA threads is ordered. (This
//     orders the kernel's accesses on either side of any of these calls too, so TSan can miss a race
//     around them; simt's race checker, racecheck.h, does not depend on it.)
//   - what CUDA orders: every arrival on an mbarrier releases it and a wait that returns acquires
//     it; a TMA copy is released on its mbarrier when it is started and acquired by whoever lands
//     it, whose landing completes (releases) the phase; named barriers alike. The mbarrier word is
//     read and written with relaxed atomics.
#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/simt/instructions/fp8.h"
#include "common/simt/instructions/half_precision.h"
#include "common/simt/instructions/hopper.h"
#include "common/simt/runtime/detail/tsan_annotations.h"
#include "common/simt/runtime/detail/warp_collective.h"
#include "common/simt/runtime/device_code.h"
#include "common/simt/tools/detail/observer.h"
#include "common/simt/tools/trace.h"

namespace simt {
inline namespace cpu {
namespace detail {
namespace {

constexpr unsigned lanes = 32;
constexpr unsigned warpgroup_threads = 128;

std::string hex32(std::uint64_t x) {
  char text[2 + 16 + 1];
  std::snprintf(text, sizeof text, "%#llx", static_cast<unsigned long long>(x));
  return text;
}

unsigned this_thread() { return current_warp() * lanes + current_lane(); }

std::string who(unsigned thread) {
  return "thread " + std::to_string(thread) + " (warp " + std::to_string(thread / lanes) + ", warpgroup " +
         std::to_string(thread / warpgroup_threads) + ")";
}

// A wait_group N of a thread that has committed `committed` groups: every item (a pending wgmma, a
// bulk store) of the groups older than the N newest is retired, in order, by retire(item), and
// leaves `items`; the others stay, in order.
template <class Item, class Retire>
void retire_older_groups(std::vector<Item>& items, std::uint64_t committed, int n, Retire&& retire) {
  const std::uint64_t keep_from = committed > static_cast<std::uint64_t>(n) ? committed - n : 0;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (items[i].group >= keep_from) {
      if (kept != i) items[kept] = items[i];
      ++kept;
    } else {
      retire(items[i]);
    }
  }
  items.resize(kept);
}

// ---- The state of one block ---------------------------------------------------------------------

// One accumulator of one thread whose wgmma result is in flight.
struct PendingAccumulator {
  float* d = nullptr;       // the thread's registers
  int count = 0;            // N / 2 of them
  std::uint64_t group = 0;  // the newest wgmma group that writes it
  std::source_location site;
  std::array<float, 128> values;  // what d receives at the wait (written before it is read)
};

// A TMA store in flight: the box of `map` at `coordinates` from shared memory at `src`.
struct PendingStore {
  std::uint32_t src = 0;  // shared address
  TensorMap map;
  std::array<int, 5> coordinates{};
  std::uint64_t group = 0;  // the bulk group of its thread
  std::source_location site;
  std::uint32_t read = 0;  // the race checker's number for its read (observer.h)
};

// A wgmma's read of shared memory, as the race checker numbered it, until a wait covers its group.
struct PendingRead {
  std::uint64_t group = 0;
  std::uint32_t read = 0;
};

struct ThreadState {
  bool fenced = false;          // wgmma_fence since the start, the last commit or the last wait
  std::uint64_t committed = 0;  // wgmma groups committed
  std::vector<PendingAccumulator> pending;
  std::uint64_t bulk_committed = 0;  // cp.async.bulk groups committed
  std::vector<PendingStore> stores;
  std::vector<PendingRead> reads;  // the race checker's wgmma reads in flight (observer.h)
};

struct NamedBarrier {
  unsigned arrived = 0;
  unsigned expected = 0;  // 0: no thread has arrived in this use
  std::uint64_t generation = 0;
};

struct PendingCopy {
  std::uint32_t dst = 0;  // shared address
  TensorMap map;
  std::array<int, 5> coordinates{};
  std::uint64_t* bar = nullptr;
  std::uint32_t bytes = 0;
  unsigned thread = 0;
  std::source_location site;
  std::uint32_t race_copy = 0;  // the race checker's number for it (observer.h)
};

struct BlockState {
  std::uint64_t serial = ~std::uint64_t{0};
  std::vector<ThreadState> threads;
  std::array<NamedBarrier, 16> named{};
  std::vector<PendingCopy> copies;
};

thread_local BlockState block_state;
thread_local char bookkeeping_token = 0;
thread_local char named_tokens[16] = {};  // TSan: each named barrier's release/acquire address

// The scope of a function that reads or writes BlockState (see the top of the file).
struct Bookkeeping {
  Bookkeeping() { SIMT_TSAN_ACQUIRE(&bookkeeping_token); }
  ~Bookkeeping() { SIMT_TSAN_RELEASE(&bookkeeping_token); }
  Bookkeeping(const Bookkeeping&) = delete;
  Bookkeeping& operator=(const Bookkeeping&) = delete;
};

BlockState& state() {
  BlockState& s = block_state;
  const std::uint64_t serial = current_block_serial();
  if (s.serial != serial) {
    s.serial = serial;
    s.threads.assign(current_block_threads(), ThreadState{});
    s.named.fill(NamedBarrier{});
    s.copies.clear();
  }
  return s;
}

// ---- Shared memory addresses on the CPU ---------------------------------------------------------

std::uint32_t shared_offset(const void* pointer, std::size_t bytes, const char* instruction, const char* operand,
                            const std::source_location& site) {
  const auto* p = static_cast<const std::byte*>(pointer);
  if (dynamic_shared_memory == nullptr || p < dynamic_shared_memory ||
      static_cast<std::size_t>(p - dynamic_shared_memory) + bytes > dynamic_shared_size) {
    throw std::invalid_argument(std::string(instruction) + " (" + where(site) + "): " + who(this_thread()) + " gives " +
                                operand + " " + hex_address(pointer) + ", which is not " +
                                (bytes == 0 ? std::string("in") : std::to_string(bytes) + " bytes of") +
                                " this block's dynamic shared memory (" + hex_address(dynamic_shared_memory) + " + " +
                                std::to_string(dynamic_shared_size) +
                                " bytes). On the CPU the operands of wgmma and TMA must lie in dynamic shared "
                                "memory, whose offsets are the CPU's shared-memory addresses");
  }
  return static_cast<std::uint32_t>(p - dynamic_shared_memory);
}

// ---- wgmma --------------------------------------------------------------------------------------

struct WgmmaOperands {
  const WgmmaShape* shape;
  float* d;
  const std::uint32_t* a;
  std::uint64_t desc_a, desc_b;
  bool scale_d;
  unsigned thread;
  const std::source_location* site;
};

bool is_fp8(WgmmaInput input) { return input == WgmmaInput::e4m3 || input == WgmmaInput::e5m2; }

const char* wgmma_name(const WgmmaShape& s) {
  using enum WgmmaInput;
  if (s.input_a == bf16) return "wgmma_m64nNk16_bf16";
  if (s.input_a == f16) return "wgmma_m64nNk16_f16";
  if (s.input_a == s.input_b) return s.input_a == e4m3 ? "wgmma_m64nNk32_e4m3" : "wgmma_m64nNk32_e5m2";
  return s.input_a == e4m3 ? "wgmma_m64nNk32_e4m3_e5m2" : "wgmma_m64nNk32_e5m2_e4m3";
}

// The bytes of one element, and the k of one wgmma: 2 and 16 (bf16, f16), 1 and 32 (FP8).
unsigned element_bytes(WgmmaInput input) { return is_fp8(input) ? 1u : 2u; }
unsigned wgmma_k(const WgmmaShape& s) { return 32u / element_bytes(s.input_a); }

float element_to_float(WgmmaInput input, std::uint16_t bits) {
  switch (input) {
    case WgmmaInput::bf16:
      return bf16_bits_to_float(bits);
    case WgmmaInput::f16:
      return f16_bits_to_float(bits);
    case WgmmaInput::e4m3:
      return e4m3_bits_to_float(static_cast<std::uint8_t>(bits));
    case WgmmaInput::e5m2:
      break;
  }
  return e5m2_bits_to_float(static_cast<std::uint8_t>(bits));
}

// The byte offset of element (mn, k) of an operand of `bytes`-byte elements from the descriptor's
// start, before the swizzle: the tables of hopper.h, from the PTX ISA's "Shared Memory Matrix
// Layout" and "Strides". K-major, an element's place along k is its byte offset k * bytes (a row
// of k is 32 bytes for every type); M/N-major exists for 2-byte elements only.
std::uint32_t operand_offset(const WgmmaDescriptorFields& f, Major major, unsigned mn, unsigned k, unsigned bytes) {
  const std::uint32_t span = swizzle_span(f.swizzle);
  if (major == Major::k) {
    const std::uint32_t k_byte = k * bytes;
    if (f.swizzle == Swizzle::none) {
      return (mn / 8) * f.stride_byte_offset + (k_byte / 16) * f.leading_byte_offset + (mn % 8) * 16 + k_byte % 16;
    }
    return (mn / 8) * f.stride_byte_offset + (mn % 8) * span + k_byte;
  }
  if (f.swizzle == Swizzle::none) {
    return (mn / 8) * f.stride_byte_offset + (k / 8) * f.leading_byte_offset + (k % 8) * 16 + (mn % 8) * 2;
  }
  const unsigned row_elements = span / 2;  // one S-byte row of an atom holds S / 2 elements of M or N
  return (mn / row_elements) * f.leading_byte_offset + (k / 8) * f.stride_byte_offset + (k % 8) * span +
         (mn % row_elements) * 2;
}

std::string describe_descriptor(const WgmmaDescriptorFields& f) {
  const char* names[] = {"none", "32B", "64B", "128B"};
  return "start address " + hex32(f.start_address) + ", leading byte offset " + std::to_string(f.leading_byte_offset) +
         ", stride byte offset " + std::to_string(f.stride_byte_offset) + ", base offset " +
         std::to_string(f.base_offset) + ", swizzle " + names[static_cast<unsigned>(f.swizzle)];
}

// Reads the rows x K operand of `desc` (K = 16 for 2-byte elements, 32 for FP8) into
// out[mn * K + k] (A, and B of FP8: its products run along k), or out[k * rows + mn] when k_outer
// (B of bf16 and f16: the product then runs along contiguous n).
// The 16-byte chunks it reads join *chunks, where given (for the race checker).
void read_operand(const char* name, const char* which, std::uint64_t desc, Major major, unsigned rows, WgmmaInput input,
                  bool k_outer, float* out, const std::source_location& site,
                  std::vector<std::uint32_t>* chunks = nullptr) {
  const WgmmaDescriptorFields f = decode_wgmma_descriptor(desc);
  const auto fail = [&](const std::string& what) {
    throw std::invalid_argument(std::string(name) + " (" + where(site) + "): the descriptor of " + which + " (" +
                                hex32(desc) + ": " + describe_descriptor(f) + ") " + what);
  };
  if (f.swizzle != Swizzle::none) {
    if (f.base_offset != 0) {
      fail(
          "has a base offset; simt emulates swizzled operands whose pattern starts at its repeat boundary "
          "(base offset 0) only");
    }
    const std::uint32_t span = swizzle_span(f.swizzle);
    if ((f.start_address / 128) % (span / 16) != 0) {
      fail("is not aligned for its swizzle: the pattern repeats every " + std::to_string(8 * span) +
           " bytes, and with base offset 0 the start address must lie in the first 128 bytes of a repeat "
           "(start % " +
           std::to_string(8 * span) + " < 128)");
    }
  }
  const unsigned bytes = element_bytes(input), k_count = 32 / bytes;
  for (unsigned mn = 0; mn < rows; ++mn) {
    for (unsigned k = 0; k < k_count; ++k) {
      const std::uint32_t address =
          swizzled_address(f.start_address + operand_offset(f, major, mn, k, bytes), f.swizzle);
      if (std::size_t{address} + bytes > dynamic_shared_size) {
        fail("reaches element (" + std::to_string(mn) + ", " + std::to_string(k) + ") at shared address " +
             hex32(address) + ", past the end of this block's dynamic shared memory (" +
             std::to_string(dynamic_shared_size) + " bytes)");
      }
      if (chunks != nullptr && (chunks->empty() || chunks->back() != address / 16)) {
        chunks->push_back(address / 16);
      }
      std::uint16_t bits = std::to_integer<std::uint8_t>(dynamic_shared_memory[address]);
      if (bytes == 2) std::memcpy(&bits, dynamic_shared_memory + address, 2);
      out[k_outer ? k * rows + mn : mn * k_count + k] = element_to_float(input, bits);
    }
  }
}

// Scratch space for one wgmma (the fibers' stacks are small): A, B, and C then D.
thread_local std::vector<float> scratch_a(64 * 32), scratch_b(256 * 32), scratch_d(64 * 256);

// ---- FP8: the 32 products of one k32 step, added to D as hopper.h's "Accumulation" says ---------

std::atomic<Fp8Accumulation> fp8_mode{Fp8Accumulation::exact};

__extension__ typedef __int128 Int128;
__extension__ typedef unsigned __int128 UInt128;

// Every FP8 value is an integer multiple of 2^-16 (e5m2's smallest subnormal; e4m3's is 2^-9), and
// below 2^16 in magnitude (57344), so a product is a multiple of 2^-32 below 2^64, exactly an
// integer in units of 2^-32; the sum of 32 of them fits 70 bits.
constexpr int fp8_unit_exponent = -16;

// A signed number in units of 2^-160, 320 bits of two's complement (limb 0 lowest): every float (a
// multiple of 2^-149 below 2^128) plus a sum of 32 FP8 products (a multiple of 2^-32 below 2^70)
// fits exactly, so the sum D + (the products) is rounded once, at to_float.
class Fixed320 {
 public:
  static constexpr int lsb = -160;

  // Adds m 2^e; e >= lsb and |m| 2^e below 2^158.
  void add(Int128 m, int e) {
    const bool negative = m < 0;
    const UInt128 magnitude = negative ? -static_cast<UInt128>(m) : static_cast<UInt128>(m);
    const auto shift = static_cast<unsigned>(e - lsb);
    const unsigned q = shift / 64, r = shift % 64;
    const auto lo = static_cast<std::uint64_t>(magnitude), hi = static_cast<std::uint64_t>(magnitude >> 64);
    const std::uint64_t parts[3] = {lo << r, r == 0 ? hi : (hi << r) | (lo >> (64 - r)), r == 0 ? 0 : hi >> (64 - r)};
    std::array<std::uint64_t, 5> term{};
    for (unsigned i = 0; i < 3 && q + i < 5; ++i) term[q + i] = parts[i];
    if (negative) negate(term);
    std::uint64_t carry = 0;
    for (unsigned i = 0; i < 5; ++i) {
      const UInt128 sum = static_cast<UInt128>(limb_[i]) + term[i] + carry;
      limb_[i] = static_cast<std::uint64_t>(sum);
      carry = static_cast<std::uint64_t>(sum >> 64);
    }
  }

  // The value rounded to the nearest float, ties to even (subnormals kept, past FLT_MAX inf).
  float to_float() const {
    std::array<std::uint64_t, 5> x = limb_;
    const bool negative = (x[4] >> 63) != 0;
    if (negative) negate(x);
    int top = -1;  // the index of the highest set bit
    for (int i = 4; i >= 0 && top < 0; --i) {
      if (x[i] != 0) top = 64 * i + 63 - std::countl_zero(x[i]);
    }
    if (top < 0) return 0.0f;
    // The lowest bit the float keeps: 24 bits from the top, but not below 2^-149 (bit 11). Every
    // value here is a multiple of 2^-149, so the guard bit below it exists.
    const int first = std::max(top - 23, -149 - lsb);
    const auto bit = [&x](int i) { return (x[static_cast<unsigned>(i) / 64] >> (i % 64)) & 1u; };
    std::uint32_t kept = 0;
    for (int i = top; i >= first; --i) kept = (kept << 1) | static_cast<std::uint32_t>(bit(i));
    const int guard = first - 1;
    bool sticky = (x[static_cast<unsigned>(guard) / 64] & ((std::uint64_t{1} << (guard % 64)) - 1)) != 0;
    for (int i = 0; i < guard / 64 && !sticky; ++i) sticky = x[static_cast<unsigned>(i)] != 0;
    if (bit(guard) != 0 && (sticky || (kept & 1u) != 0)) ++kept;
    const float magnitude = std::ldexp(static_cast<float>(kept), first + lsb);
    return negative ? -magnitude : magnitude;
  }

 private:
  static void negate(std::array<std::uint64_t, 5>& x) {
    bool carry = true;
    for (std::uint64_t& w : x) {
      w = ~w + (carry ? 1u : 0u);
      carry = carry && w == 0;
    }
  }
  std::array<std::uint64_t, 5> limb_{};
};

// c + sum 2^-32, rounded once to float (c finite).
float add_rounded_once(float c, Int128 sum) {
  if (sum == 0) return c + 0.0f;  // nothing to add: D is C (and -0 + +0 is +0, as in float)
  Fixed320 x;
  x.add(sum, 2 * fp8_unit_exponent);
  if (c != 0.0f) {
    // c = m 2^e with m an integer of at most 24 bits and e >= -149 (subnormals included).
    const int e = std::max(std::ilogb(c) - 23, -149);
    x.add(static_cast<Int128>(std::ldexp(c, -e)), e);
  }
  return x.to_float();
}

// One element of D = A B + C for FP8: a and b are the 32 codes' values in units of 2^-16 (so a
// product is in units of 2^-32), c the accumulator, or (any of them not finite) the values
// themselves in double, where IEEE arithmetic gives the NaN or infinity.
float fp8_dot(const float* a, const float* b, float c, Fp8Accumulation mode) {
  bool finite = std::isfinite(c);
  for (unsigned k = 0; k < 32; ++k) finite = finite && std::isfinite(a[k]) && std::isfinite(b[k]);
  if (!finite) {
    double sum = c;
    for (unsigned k = 0; k < 32; ++k) sum += static_cast<double>(a[k]) * b[k];
    return static_cast<float>(sum);
  }
  std::array<Int128, 32> products;
  std::uint64_t largest = 0;
  for (unsigned k = 0; k < 32; ++k) {
    const auto ak = static_cast<std::int64_t>(std::ldexp(a[k], -fp8_unit_exponent));
    const auto bk = static_cast<std::int64_t>(std::ldexp(b[k], -fp8_unit_exponent));
    products[k] = static_cast<Int128>(ak) * bk;
    const auto magnitude = static_cast<std::uint64_t>(products[k] < 0 ? -products[k] : products[k]);
    largest = std::max(largest, magnitude);
  }
  if (mode == Fp8Accumulation::truncated14 && largest != 0) {
    // Keep the bits of weight 2^(E - 13) and above, E the largest product's leading bit.
    const int drop = 63 - std::countl_zero(largest) - 13;
    if (drop > 0) {
      for (Int128& p : products) {
        const Int128 magnitude = p < 0 ? -p : p;
        const Int128 cut = (magnitude >> drop) << drop;
        p = p < 0 ? -cut : cut;
      }
    }
  }
  Int128 sum = 0;
  for (const Int128& p : products) sum += p;
  return add_rounded_once(c, sum);
}

// D = A B + C for the warpgroup. Fragment indices: PTX ISA, "Register Fragments and Shared Memory
// Matrix Layouts" for wgmma .m64nNk16 and .m64nNk32, with the warp w of the warpgroup, the lane's
// groupID = lane / 4 and threadID_in_group = lane % 4:
//   A, e elements per register (2: .f16x2 / .bf16x2, elements a0..a7; 4: FP8, a0..a15), element
//   ai in register i / e, the lowest i in the lowest bits:
//     row = 16 w + groupID + 8 ((i / e) % 2), col = 4 e (i / 2 e) + e threadID_in_group + i % e
//   D (f32 d0 .. d(N/2 - 1)):
//     row = 16 w + groupID + 8 ((i / 2) % 2), col = 8 (i / 4) + 2 threadID_in_group + i % 2 for di
// Sums: bf16 and f16 as in mma's emulation (tensor_core.cpp), each product exact in float32, added
// with k in order; FP8 by fp8_dot, as set_fp8_accumulation says.
void complete_wgmma(void* const* lane_operands) {
  const Bookkeeping scope;
  const auto& first = *static_cast<const WgmmaOperands*>(lane_operands[0]);
  const WgmmaShape& shape = *first.shape;
  const char* name = wgmma_name(shape);
  const std::source_location& site = *first.site;
  const unsigned n = static_cast<unsigned>(shape.n);
  const unsigned group0 = first.thread / warpgroup_threads * warpgroup_threads;
  BlockState& s = state();

  // All 128 threads: the same operands, fenced, and the same number of groups committed.
  for (unsigned q = 0; q < warpgroup_threads; ++q) {
    const auto& o = *static_cast<const WgmmaOperands*>(lane_operands[q]);
    const ThreadState& ts = s.threads[o.thread];
    const auto differ = [&](const std::string& what) {
      throw std::invalid_argument(std::string(name) + " (" + where(site) + "): " + who(o.thread) + " gives " + what +
                                  " than " + who(first.thread) +
                                  "; every thread of a warpgroup must give the same descriptors and scale-d");
    };
    if (!shape.a_in_registers && o.desc_a != first.desc_a) differ("another descriptor of A");
    if (o.desc_b != first.desc_b) differ("another descriptor of B");
    if (o.scale_d != first.scale_d) differ("another scale-d");
    if (!ts.fenced) {
      throw std::invalid_argument(
          std::string(name) + " (" + where(site) + "): " + who(o.thread) + " has not executed wgmma_fence since " +
          (ts.committed == 0 ? std::string("the kernel began") : "its last wgmma_commit_group or wgmma_wait_group") +
          ". The PTX ISA asks for wgmma.fence before the first wgmma of a warpgroup and between any write of the "
          "registers a wgmma reads (its accumulators, its A fragment) and that wgmma; simt cannot see register "
          "writes, so it asks for the fence before the first wgmma after the start, each commit and each wait");
    }
    if (ts.committed != s.threads[first.thread].committed) {
      throw std::invalid_argument(std::string(name) + " (" + where(site) + "): " + who(o.thread) + " has committed " +
                                  std::to_string(ts.committed) + " wgmma groups, " + who(first.thread) + " " +
                                  std::to_string(s.threads[first.thread].committed) +
                                  "; wgmma_commit_group is warpgroup-collective too");
    }
  }

  const bool fp8 = is_fp8(shape.input_a);
  for (const auto& [major, which] : {std::pair{shape.major_a, "A"}, std::pair{shape.major_b, "B"}}) {
    if (fp8 && major == Major::mn) {
      throw std::invalid_argument(
          std::string(name) + " (" + where(site) + "): operand " + which + " is " + (which[0] == 'A' ? "M" : "N") +
          "-major (Major::mn), and FP8 wgmma reads K-major operands only: the PTX ISA has no "
          "transpose (imm-trans) for 8-bit types. Write the operand K-major into shared memory");
    }
  }
  const unsigned k_count = wgmma_k(shape);
  float* A = scratch_a.data();  // A[m * k_count + k]
  float* B = scratch_b.data();  // B[k * n + nn] (bf16, f16), B[nn * 32 + k] (FP8)
  float* D = scratch_d.data();  // D[m * n + nn]
  if (shape.a_in_registers) {
    const unsigned bytes = element_bytes(shape.input_a), e = 4 / bytes;  // elements per register
    for (unsigned q = 0; q < warpgroup_threads; ++q) {
      const auto& o = *static_cast<const WgmmaOperands*>(lane_operands[q]);
      const unsigned w = q / lanes, lane = q % lanes, groupID = lane / 4, threadID_in_group = lane % 4;
      for (unsigned i = 0; i < 4 * e; ++i) {
        const unsigned row = 16 * w + groupID + 8 * ((i / e) % 2);
        const unsigned col = 4 * e * (i / (2 * e)) + e * threadID_in_group + i % e;
        const std::uint32_t element = o.a[i / e] >> (8 * bytes * (i % e));
        A[row * k_count + col] =
            element_to_float(shape.input_a, static_cast<std::uint16_t>(element & ((1u << (8 * bytes)) - 1u)));
      }
    }
  }
  // What the operands in shared memory cost: their bytes for the profile (A: 64 x 16 elements of 2
  // bytes where it is in shared memory, B: n x 16), and for the race checker, only while it checks
  // the block, every 16-byte chunk of them.
  std::vector<std::uint32_t> chunks;
  std::vector<std::uint32_t>* footprint = observer::async_watched() ? &chunks : nullptr;
  const std::uint64_t operand_bytes = 16 * 2 * (std::uint64_t{shape.a_in_registers ? 0u : 64u} + n);
  if (!shape.a_in_registers)
    read_operand(name, "A", first.desc_a, shape.major_a, 64, shape.input_a, false, A, site, footprint);
  read_operand(name, "B", first.desc_b, shape.major_b, n, shape.input_b, !fp8, B, site, footprint);
  std::sort(chunks.begin(), chunks.end());
  chunks.erase(std::unique(chunks.begin(), chunks.end()), chunks.end());
  const std::uint32_t read = observer::wgmma_read(site, group0, operand_bytes, chunks);
  observer::trace(observer::TraceWgmma{group0, n, shape.a_in_registers, first.desc_a, first.desc_b,
                                       s.threads[first.thread].committed});
  if (footprint != nullptr) {
    for (unsigned q = 0; q < warpgroup_threads; ++q) {
      const auto& o = *static_cast<const WgmmaOperands*>(lane_operands[q]);
      s.threads[o.thread].reads.push_back({s.threads[o.thread].committed, read});
    }
  }

  // C: each thread's accumulators as they are now (or as the wgmma in flight on them leaves them).
  for (unsigned q = 0; q < warpgroup_threads; ++q) {
    const auto& o = *static_cast<const WgmmaOperands*>(lane_operands[q]);
    const unsigned w = q / lanes, lane = q % lanes, groupID = lane / 4, threadID_in_group = lane % 4;
    const PendingAccumulator* in_flight = nullptr;
    for (const PendingAccumulator& p : s.threads[o.thread].pending) {
      if (p.d == o.d) in_flight = &p;
    }
    for (unsigned i = 0; i < n / 2; ++i) {
      const unsigned row = 16 * w + groupID + 8 * ((i / 2) % 2);
      const unsigned col = 8 * (i / 4) + 2 * threadID_in_group + i % 2;
      D[row * n + col] = !first.scale_d ? 0.0f : in_flight != nullptr ? in_flight->values[i] : o.d[i];
    }
  }
  if (fp8) {
    const Fp8Accumulation mode = fp8_mode.load(std::memory_order_relaxed);
    for (unsigned m = 0; m < 64; ++m) {
      for (unsigned j = 0; j < n; ++j) D[m * n + j] = fp8_dot(A + m * 32, B + j * 32, D[m * n + j], mode);
    }
  }
  // D += A B: a row at a time, k in order, 8 columns at once in two vectors of four floats (a
  // GCC/Clang vector extension, as mma's emulation does; n is a multiple of 8). Element by element
  // this is D[m][j] = (...(C[m][j] + A[m][0] B[0][j]) + ...) + A[m][15] B[15][j].
  using float4 = float __attribute__((vector_size(16)));
  for (unsigned m = 0; m < 64 && !fp8; ++m) {
    float* row = D + m * n;
    for (unsigned j = 0; j < n; j += 8) {
      float4 acc[2];
      std::memcpy(acc, row + j, sizeof acc);
#pragma GCC unroll 16
      for (unsigned k = 0; k < 16; ++k) {
        float4 b[2];
        std::memcpy(b, B + k * n + j, sizeof b);
        const float a = A[m * 16 + k];
        acc[0] += a * b[0];
        acc[1] += a * b[1];
      }
      std::memcpy(row + j, acc, sizeof acc);
    }
  }
  // Each thread's share waits in its pending accumulator; its registers hold the pending NaN.
  float pending_value;
  std::memcpy(&pending_value, &wgmma_pending_bits, sizeof pending_value);
  for (unsigned q = 0; q < warpgroup_threads; ++q) {
    const auto& o = *static_cast<const WgmmaOperands*>(lane_operands[q]);
    const unsigned w = q / lanes, lane = q % lanes, groupID = lane / 4, threadID_in_group = lane % 4;
    ThreadState& ts = s.threads[o.thread];
    PendingAccumulator* p = nullptr;
    for (PendingAccumulator& candidate : ts.pending) {
      if (candidate.d == o.d) p = &candidate;
    }
    if (p == nullptr) p = &ts.pending.emplace_back();
    p->d = o.d;
    p->count = static_cast<int>(n / 2);
    p->group = ts.committed;
    p->site = site;
    for (unsigned i = 0; i < n / 2; ++i) {
      const unsigned row = 16 * w + groupID + 8 * ((i / 2) % 2);
      const unsigned col = 8 * (i / 4) + 2 * threadID_in_group + i % 2;
      p->values[i] = D[row * n + col];
      o.d[i] = pending_value;
    }
  }
}

// ---- mbarrier: simt's encoding of the 64-bit object ---------------------------------------------
//   bits  0-19  arrivals still pending in the current phase
//   bits 20-39  the arrival count given to init (each phase starts with it)
//   bits 40-60  the transaction count, signed (21 bits: the PTX range is -(2^20 - 1) .. 2^20 - 1)
//   bit  61     the parity of the current phase
//   bits 62-63  0b10: initialised by mbarrier_init (0xff poison and zeros are not)
struct Mbarrier {
  unsigned pending = 0, expected = 0, parity = 0;
  std::int64_t tx = 0;
};

constexpr std::uint64_t mbarrier_tag = std::uint64_t{2} << 62;
constexpr std::int64_t tx_limit = (std::int64_t{1} << 20) - 1;

std::uint64_t encode(const Mbarrier& m) {
  return std::uint64_t{m.pending} | std::uint64_t{m.expected} << 20 |
         (static_cast<std::uint64_t>(m.tx) & ((std::uint64_t{1} << 21) - 1)) << 40 | std::uint64_t{m.parity} << 61 |
         mbarrier_tag;
}

Mbarrier decode(std::uint64_t word) {
  Mbarrier m;
  m.pending = static_cast<unsigned>(word & 0xfffffu);
  m.expected = static_cast<unsigned>((word >> 20) & 0xfffffu);
  std::int64_t tx = static_cast<std::int64_t>((word >> 40) & ((std::uint64_t{1} << 21) - 1));
  if (tx >= (std::int64_t{1} << 20)) tx -= std::int64_t{1} << 21;
  m.tx = tx;
  m.parity = static_cast<unsigned>((word >> 61) & 1u);
  return m;
}

std::uint64_t load(std::uint64_t* bar) { return std::atomic_ref<std::uint64_t>(*bar).load(std::memory_order_relaxed); }
void store(std::uint64_t* bar, const Mbarrier& m) {
  std::atomic_ref<std::uint64_t>(*bar).store(encode(m), std::memory_order_relaxed);
}

void check_bar_address(std::uint64_t* bar, const char* instruction, const std::source_location& site) {
  if (!address_in_shared_memory(bar, 8) || reinterpret_cast<std::uintptr_t>(bar) % 8 != 0) {
    throw std::invalid_argument(std::string(instruction) + " (" + where(site) + "): " + who(this_thread()) +
                                " gives mbarrier " + hex_address(bar) +
                                ", which is not an 8-byte aligned std::uint64_t of this block's shared memory");
  }
}

Mbarrier read_bar(std::uint64_t* bar, const char* instruction, const std::source_location& site) {
  check_bar_address(bar, instruction, site);
  const std::uint64_t word = load(bar);
  if ((word >> 62) != 2u) {
    throw std::invalid_argument(std::string(instruction) + " (" + where(site) + "): " + who(this_thread()) +
                                " uses mbarrier " + hex_address(bar) + " (holding " + hex32(word) +
                                "), which mbarrier_init has not initialised in this block");
  }
  return decode(word);
}

void complete_phase_if_done(Mbarrier& m, std::uint64_t* bar) {
  if (m.pending == 0 && m.tx == 0) {
    SIMT_TSAN_RELEASE(bar);
    observer::async_event({observer::AsyncKind::mbarrier_completed, 0, bar, m.parity});
    m.parity ^= 1u;
    m.pending = m.expected;
  }
}

// complete_tx on `bar` for `bytes` (TMA): PTX ISA, "mbarrier: Tx-count", the complete-tx operation.
void complete_tx(std::uint64_t* bar, std::uint32_t bytes) {
  Mbarrier m = decode(load(bar));
  m.tx -= bytes;
  complete_phase_if_done(m, bar);
  store(bar, m);
}

// ---- TMA ----------------------------------------------------------------------------------------

// The number of elements the box holds along dimension i.
std::uint32_t box_elements(const TensorMapShape& s, unsigned i) {
  return (s.box[i] + s.element_strides[i] - 1) / s.element_strides[i];
}

std::uint32_t box_bytes(const TensorMapShape& s) {
  std::uint32_t bytes = s.element_bytes;
  for (unsigned i = 0; i < s.rank; ++i) bytes *= box_elements(s, i);
  return bytes;
}

// The bytes of one copy of the box of `map` at `coordinates`, as the profile counts them: the whole
// box, and the part inside the tensor. The box is a product of ranges, one a dimension, so the part
// inside is the product of each range's elements that fall in 0 .. dims - 1 (the rule of
// for_each_box_element below).
observer::TmaBytes tma_bytes(const TensorMap& map, const std::array<int, 5>& coordinates) {
  const TensorMapShape& s = map.shape;
  std::uint64_t inside = s.element_bytes;
  for (unsigned i = 0; i < s.rank; ++i) {
    std::uint64_t elements = 0;
    for (std::uint32_t e = 0; e < box_elements(s, i); ++e) {
      const std::int64_t coordinate = std::int64_t{coordinates[i]} + std::int64_t{e} * s.element_strides[i];
      if (coordinate >= 0 && static_cast<std::uint64_t>(coordinate) < s.dims[i]) ++elements;
    }
    inside *= elements;
  }
  return {box_bytes(s), inside};
}

// Visits the box of `map` at `coordinates` element by element, dense in shared memory with
// dimension 0 fastest: visit(shared address (swizzled), global byte offset, inside the tensor).
template <class Visit>
void for_each_box_element(const TensorMap& map, const std::array<int, 5>& coordinates, std::uint32_t base,
                          Visit&& visit) {
  const TensorMapShape& s = map.shape;
  std::array<std::uint32_t, 5> index{};  // the element's position in the box
  const std::uint32_t total = box_bytes(s) / s.element_bytes;
  for (std::uint32_t e = 0; e < total; ++e) {
    bool inside = true;
    std::uint64_t offset = 0;
    for (unsigned i = 0; i < s.rank; ++i) {
      const std::int64_t coordinate = std::int64_t{coordinates[i]} + std::int64_t{index[i]} * s.element_strides[i];
      if (coordinate < 0 || static_cast<std::uint64_t>(coordinate) >= s.dims[i]) inside = false;
      offset += static_cast<std::uint64_t>(coordinate) * s.strides[i];
    }
    visit(swizzled_address(base + e * s.element_bytes, map.swizzle), offset, inside);
    for (unsigned i = 0; i < s.rank && ++index[i] == box_elements(s, i); ++i) index[i] = 0;
  }
}

// The footprint given to the observer where the race checker does not watch the block.
const std::vector<std::uint32_t> no_chunks;

// The 16-byte chunks of shared memory a box at `base` covers (for the race checker), in order.
std::vector<std::uint32_t> box_chunks(const TensorMap& map, const std::array<int, 5>& coordinates, std::uint32_t base) {
  std::vector<std::uint32_t> chunks;
  for_each_box_element(map, coordinates, base, [&](std::uint32_t address, std::uint64_t, bool) {
    if (chunks.empty() || chunks.back() != address / 16) chunks.push_back(address / 16);
  });
  std::sort(chunks.begin(), chunks.end());
  chunks.erase(std::unique(chunks.begin(), chunks.end()), chunks.end());
  return chunks;
}

// A copy lands: each element of the box goes to its (swizzled) shared address; elements outside
// the tensor are zeros. Then its bytes complete on its mbarrier.
void land_copy(const PendingCopy& c) {
  SIMT_TSAN_ACQUIRE(c.bar);  // after whatever the thread that started the copy had done
  const std::uint32_t bytes = c.map.shape.element_bytes;
  for_each_box_element(c.map, c.coordinates, c.dst, [&](std::uint32_t address, std::uint64_t source, bool inside) {
    if (inside) {
      std::memcpy(dynamic_shared_memory + address, c.map.global + source, bytes);
    } else {
      std::memset(dynamic_shared_memory + address, 0, bytes);
    }
  });
  observer::async_event({observer::AsyncKind::tma_landed, c.thread, c.bar, c.race_copy});
  complete_tx(c.bar, c.bytes);
}

// A store lands: each element of the box inside the tensor is read from its (swizzled) shared
// address and written to global memory; the others are not written (PTX ISA, "Tensor Copy
// Restrictions": out-of-bound elements are not stored).
void land_store(const PendingStore& st) {
  const std::uint32_t bytes = st.map.shape.element_bytes;
  auto* global = const_cast<std::byte*>(st.map.global);  // made from the kernel's own pointer
  for_each_box_element(st.map, st.coordinates, st.src, [&](std::uint32_t address, std::uint64_t target, bool inside) {
    if (inside) std::memcpy(global + target, dynamic_shared_memory + address, bytes);
  });
  observer::async_event({observer::AsyncKind::read_retired, this_thread(), nullptr, st.read});
}

// Lands every copy in flight that completes on bar.
void land_copies_for(std::uint64_t* bar) {
  BlockState& s = state();
  std::size_t kept = 0;
  for (std::size_t i = 0; i < s.copies.size(); ++i) {
    if (s.copies[i].bar == bar) {
      land_copy(s.copies[i]);
    } else {
      s.copies[kept++] = s.copies[i];
    }
  }
  s.copies.resize(kept);
}

// What a TMA copy (either way) asks of its tensor map and of its box in shared memory at `box`
// (`operand`: "shared destination" or "shared source"): a map of simt::make_tensor_map with the
// copy's rank, and a box inside dynamic shared memory, 128-byte aligned, or aligned to its
// swizzle's repeat. Returns the box's shared address.
std::uint32_t check_tma(const char* name, const TensorMap* map, int rank, const void* box, const char* operand,
                        const std::source_location& site) {
  check_in_kernel(name);
  if (map == nullptr || map->global == nullptr) {
    throw std::invalid_argument(std::string(name) + " (" + where(site) +
                                "): the tensor map was not made by simt::make_tensor_map");
  }
  if (static_cast<int>(map->shape.rank) != rank) {
    throw std::invalid_argument(std::string(name) + " (" + where(site) + "): the tensor map has rank " +
                                std::to_string(map->shape.rank) + ", the copy " + std::to_string(rank));
  }
  const std::uint32_t offset = shared_offset(box, box_bytes(map->shape), name, operand, site);
  const std::uint32_t alignment = map->swizzle == Swizzle::none ? 128u : 8u * swizzle_span(map->swizzle);
  if (offset % alignment != 0) {
    throw std::invalid_argument(
        std::string(name) + " (" + where(site) + "): " + who(this_thread()) + " gives " + operand + " " +
        hex32(offset) + ", which is not " + std::to_string(alignment) + "-byte aligned (" +
        (map->swizzle == Swizzle::none
             ? std::string("a TMA box in shared memory")
             : "a box swizzled in spans of " + std::to_string(swizzle_span(map->swizzle)) + " bytes") +
        " must be)");
  }
  return offset;
}

// ---- Waits ----------------------------------------------------------------------------------------

struct ParityWait {
  std::uint64_t* bar;
  unsigned parity;
};

bool parity_done(const void* context) {
  const Bookkeeping scope;
  const auto& w = *static_cast<const ParityWait*>(context);
  land_copies_for(w.bar);
  return decode(load(w.bar)).parity != w.parity;
}

std::string parity_describe(const void* context) {
  const Bookkeeping scope;
  const auto& w = *static_cast<const ParityWait*>(context);
  const Mbarrier m = decode(load(w.bar));
  return "the phase of parity " + std::to_string(w.parity) + " of mbarrier " + hex_address(w.bar) +
         " is the current one, and it still waits for " + std::to_string(m.pending) + " of " +
         std::to_string(m.expected) + " arrivals and " + std::to_string(m.tx) +
         " transaction bytes (a wait on the other parity would pass at once; bytes expected with expect_tx must "
         "all be brought by copies that complete on this mbarrier)";
}

struct NamedWait {
  unsigned id;
  std::uint64_t generation;
};

bool named_done(const void* context) {
  const Bookkeeping scope;
  const auto& w = *static_cast<const NamedWait*>(context);
  return state().named[w.id].generation != w.generation;
}

std::string named_describe(const void* context) {
  const Bookkeeping scope;
  const auto& w = *static_cast<const NamedWait*>(context);
  const NamedBarrier& b = state().named[w.id];
  return "named barrier " + std::to_string(w.id) + " has " + std::to_string(b.arrived) + " of the " +
         std::to_string(b.expected) + " threads it waits for";
}

}  // namespace

// ---- The functions of hopper_cpu.h ----------------------------------------------------------------

void check_in_kernel(const char* what) { (void)current_async_copies(what); }

void fence_proxy_async_shared_cta() {
  check_in_kernel("fence_proxy_async_shared_cta");
  observer::async_event({observer::AsyncKind::proxy_fence, this_thread()});
}

std::uint32_t shared_address(const void* pointer, const std::source_location& site) {
  check_in_kernel("shared_address");
  return shared_offset(pointer, 0, "shared_address", "pointer", site);
}

void wgmma(const WgmmaShape& shape, float* d, const std::uint32_t* a, std::uint64_t desc_a, std::uint64_t desc_b,
           bool scale_d, const std::source_location& site) {
  check_in_kernel(wgmma_name(shape));
  {
    const Bookkeeping scope;  // not across the rendezvous: complete_wgmma takes its own
    (void)state();
  }
  WgmmaOperands operands{&shape, d, a, desc_a, desc_b, scale_d, this_thread(), &site};
  WarpCollective op;
  op.name = wgmma_name(shape);
  op.complete = &complete_wgmma;
  op.operands = &operands;
  warpgroup_collective(op, site);
}

}  // namespace detail

void set_fp8_accumulation(Fp8Accumulation mode) { detail::fp8_mode.store(mode, std::memory_order_relaxed); }
Fp8Accumulation fp8_accumulation() { return detail::fp8_mode.load(std::memory_order_relaxed); }

namespace detail {

void wgmma_fence(const std::source_location&) {
  const Bookkeeping scope;
  check_in_kernel("wgmma_fence");
  state().threads[this_thread()].fenced = true;
}

void wgmma_commit_group(const std::source_location&) {
  const Bookkeeping scope;
  check_in_kernel("wgmma_commit_group");
  ThreadState& ts = state().threads[this_thread()];
  ++ts.committed;
  ts.fenced = false;
}

// PTX ISA, "wgmma.wait_group": "wait for the completion of the required wgmma-groups"; "Accessing
// the accumulator register or the input register containing the fragments of matrix A of a
// wgmma.mma_async instruction without first performing a wgmma.wait_group instruction that waits
// on a wgmma-group including that wgmma.mma_async instruction is an undefined behavior."
void wgmma_wait_group(int n, const std::source_location& site) {
  const Bookkeeping scope;
  check_in_kernel("wgmma_wait_group");
  ThreadState& ts = state().threads[this_thread()];
  retire_older_groups(ts.reads, ts.committed, n, [&](const PendingRead& r) {
    observer::async_event({observer::AsyncKind::read_retired, this_thread(), nullptr, r.read});
  });
  retire_older_groups(ts.pending, ts.committed, n, [&](PendingAccumulator& p) {
    for (int r = 0; r < p.count; ++r) {
      std::uint32_t bits;
      std::memcpy(&bits, &p.d[r], sizeof bits);
      if (bits != wgmma_pending_bits) {
        throw std::invalid_argument("wgmma_wait_group<" + std::to_string(n) + "> (" + where(site) +
                                    "): " + who(this_thread()) + " finds d[" + std::to_string(r) +
                                    "] of the wgmma at " + where(p.site) + " overwritten (" + hex32(bits) +
                                    ") before this wait: the accumulators of a wgmma may be read or written only "
                                    "after the wgmma_wait_group that covers its group");
      }
    }
    std::memcpy(p.d, p.values.data(), sizeof(float) * static_cast<std::size_t>(p.count));
  });
  ts.fenced = false;
  observer::trace(observer::TraceWgmmaWait{this_thread(), ts.committed, n});
}

void mbarrier_init(std::uint64_t* bar, unsigned count, const std::source_location& site) {
  const Bookkeeping scope;
  check_in_kernel("mbarrier_init");
  check_bar_address(bar, "mbarrier_init", site);
  if (count < 1 || count > tx_limit) {
    throw std::invalid_argument("mbarrier_init (" + where(site) + "): count " + std::to_string(count) +
                                "; the PTX ISA allows 1 .. 2^20 - 1 expected arrivals");
  }
  Mbarrier m;
  m.pending = m.expected = count;
  store(bar, m);
  observer::async_event({observer::AsyncKind::mbarrier_init, this_thread(), bar});
}

void mbarrier_arrive(std::uint64_t* bar, unsigned tx_bytes, bool arrive, const std::source_location& site) {
  const Bookkeeping scope;
  const char* name = !arrive ? "mbarrier_expect_tx" : tx_bytes > 0 ? "mbarrier_arrive_expect_tx" : "mbarrier_arrive";
  check_in_kernel(name);
  SIMT_TSAN_RELEASE(bar);  // what this thread did before arriving, for the threads that wait
  Mbarrier m = read_bar(bar, name, site);
  if (arrive && m.pending == 0) {
    // Every arrival of the phase is in and it waits for bytes only: one more would be counted
    // against a phase that expects none (the PTX ISA leaves it undefined).
    throw std::invalid_argument(std::string(name) + " (" + where(site) + "): " + who(this_thread()) +
                                " arrives on mbarrier " + hex_address(bar) + ", whose current phase already has all " +
                                std::to_string(m.expected) + " of its arrivals and waits for " + std::to_string(m.tx) +
                                " transaction bytes only; an arrival for the next phase must wait until this one "
                                "completes (a producer that refills a stage without waiting on its \"empty\" "
                                "mbarrier does this)");
  }
  m.tx += tx_bytes;
  if (m.tx > tx_limit) {
    throw std::invalid_argument(std::string(name) + " (" + where(site) + "): the transaction count of mbarrier " +
                                hex_address(bar) + " would reach " + std::to_string(m.tx) +
                                ", past the PTX ISA's limit of 2^20 - 1 bytes in one phase");
  }
  if (arrive) {
    observer::async_event({observer::AsyncKind::mbarrier_arrive, this_thread(), bar});
    --m.pending;
    complete_phase_if_done(m, bar);
  }
  store(bar, m);
}

bool mbarrier_try_wait_parity(std::uint64_t* bar, unsigned parity, const std::source_location& site) {
  check_in_kernel("mbarrier_try_wait_parity");
  (void)read_bar(bar, "mbarrier_try_wait_parity", site);
  if (parity > 1) {
    throw std::invalid_argument("mbarrier_try_wait_parity (" + where(site) + "): parity " + std::to_string(parity) +
                                " is not 0 or 1");
  }
  const ParityWait w{bar, parity};
  BlockingWait condition;
  condition.name = "mbarrier_try_wait_parity";
  condition.done = &parity_done;
  condition.describe = &parity_describe;
  condition.context = &w;
  wait_until(condition, site);
  SIMT_TSAN_ACQUIRE(bar);
  observer::async_event({observer::AsyncKind::mbarrier_waited, this_thread(), bar, parity});
  return true;
}

void named_barrier(unsigned id, unsigned count, bool wait, const std::source_location& site) {
  const char* name = wait ? "named_barrier_sync" : "named_barrier_arrive";
  check_in_kernel(name);
  const unsigned threads = current_block_threads();
  if (id < 1 || id > 15) {
    throw std::invalid_argument(std::string(name) + " (" + where(site) + "): barrier id " + std::to_string(id) +
                                "; named barriers are 1 .. 15 (0 is __syncthreads()'s)");
  }
  if (count == 0 || count % 32 != 0 || count > threads) {
    throw std::invalid_argument(std::string(name) + " (" + where(site) + "): thread count " + std::to_string(count) +
                                " must be a multiple of 32 (whole warps) from 32 to the block's " +
                                std::to_string(threads));
  }
  NamedWait w{id, 0};
  {
    const Bookkeeping scope;  // closed before the wait: named_done takes its own
    NamedBarrier& b = state().named[id];
    if (b.expected == 0) {
      b.expected = count;
    } else if (b.expected != count) {
      throw std::invalid_argument(std::string(name) + " (" + where(site) + "): " + who(this_thread()) +
                                  " gives named barrier " + std::to_string(id) + " the count " + std::to_string(count) +
                                  ", but the " + std::to_string(b.arrived) + " threads already there gave " +
                                  std::to_string(b.expected) +
                                  "; every thread of one use of a barrier must give the same count");
    }
    SIMT_TSAN_RELEASE(&named_tokens[id]);
    observer::async_event({observer::AsyncKind::named_arrive, this_thread(), nullptr, id});
    w.generation = b.generation;
    if (++b.arrived == b.expected) {
      observer::async_event({observer::AsyncKind::named_completed, 0, nullptr, id, b.generation});
      b.arrived = 0;
      b.expected = 0;
      ++b.generation;
    }
  }
  if (!wait) return;
  BlockingWait condition;
  condition.name = name;
  condition.done = &named_done;
  condition.describe = &named_describe;
  condition.context = &w;
  wait_until(condition, site);
  SIMT_TSAN_ACQUIRE(&named_tokens[id]);
  observer::async_event({observer::AsyncKind::named_passed, this_thread(), nullptr, id, w.generation});
}

void setmaxnreg(bool increase, int, const std::source_location& site) {
  static constexpr const char* names[2] = {"setmaxnreg_dec", "setmaxnreg_inc"};
  check_in_kernel(names[increase]);
  WarpCollective op;
  op.name = names[increase];
  warpgroup_collective(op, site);
}

void cp_async_bulk_tensor_to_shared(void* dst, const TensorMap* map, int rank, const int* coordinates,
                                    std::uint64_t* bar, const std::source_location& site) {
  const Bookkeeping scope;
  const char* name =
      rank == 2 ? "cp_async_bulk_tensor_2d_global_to_shared" : "cp_async_bulk_tensor_3d_global_to_shared";
  const std::uint32_t offset = check_tma(name, map, rank, dst, "shared destination", site);
  (void)read_bar(bar, name, site);
  PendingCopy c;
  c.dst = offset;
  c.map = *map;
  for (int i = 0; i < rank; ++i) c.coordinates[static_cast<std::size_t>(i)] = coordinates[i];
  c.bar = bar;
  c.bytes = box_bytes(map->shape);
  c.thread = this_thread();
  c.site = site;
  c.race_copy =
      observer::tma_load_issued(site, c.thread, tma_bytes(c.map, c.coordinates),
                                observer::async_watched() ? box_chunks(c.map, c.coordinates, c.dst) : no_chunks);
  state().copies.push_back(c);
  observer::trace(observer::TraceTma{c.thread, bar, c.coordinates, c.dst, c.bytes});
  SIMT_TSAN_RELEASE(bar);  // for whoever lands the copy
}

void cp_async_bulk_tensor_to_global(const TensorMap* map, int rank, const int* coordinates, const void* src,
                                    const std::source_location& site) {
  const Bookkeeping scope;
  const char* name =
      rank == 2 ? "cp_async_bulk_tensor_2d_shared_to_global" : "cp_async_bulk_tensor_3d_shared_to_global";
  const std::uint32_t offset = check_tma(name, map, rank, src, "shared source", site);
  ThreadState& ts = state().threads[this_thread()];
  PendingStore st;
  st.src = offset;
  st.map = *map;
  for (int i = 0; i < rank; ++i) st.coordinates[static_cast<std::size_t>(i)] = coordinates[i];
  st.group = ts.bulk_committed;
  st.site = site;
  st.read =
      observer::tma_store_issued(site, this_thread(), tma_bytes(st.map, st.coordinates),
                                 observer::async_watched() ? box_chunks(st.map, st.coordinates, st.src) : no_chunks);
  ts.stores.push_back(st);
}

void cp_async_bulk_commit_group(const std::source_location&) {
  const Bookkeeping scope;
  check_in_kernel("cp_async_bulk_commit_group");
  ++state().threads[this_thread()].bulk_committed;
}

// PTX ISA, "cp.async.bulk.wait_group": waits until at most n of the newest bulk groups of this
// thread are pending; with .read, until their reads of the source are done. On the CPU both land
// the older groups' stores whole.
void cp_async_bulk_wait_group(int n, const std::source_location&) {
  const Bookkeeping scope;
  check_in_kernel("cp_async_bulk_wait_group");
  ThreadState& ts = state().threads[this_thread()];
  retire_older_groups(ts.stores, ts.bulk_committed, n, [](auto& store) { land_store(store); });
}

std::optional<std::string> block_finished() {
  const Bookkeeping scope;
  BlockState& s = block_state;
  if (s.serial != current_block_serial()) return std::nullopt;  // the block used nothing of this file
  std::optional<std::string> report;
  if (!s.copies.empty()) {
    const PendingCopy& c = s.copies.front();
    report = std::to_string(s.copies.size()) +
             " TMA copies were still in flight when the block finished: " + who(c.thread) + " started one at " +
             where(c.site) +
             " and no thread waited on its mbarrier afterwards (on a GPU the block's shared memory may be "
             "gone before they land)";
  }
  for (unsigned t = 0; t < s.threads.size() && !report; ++t) {
    if (s.threads[t].stores.empty()) continue;
    report = who(t) + " finished the kernel with the TMA store at " + where(s.threads[t].stores.front().site) +
             " still in flight: no cp_async_bulk_wait_group covered its group (commit it, then wait; on a GPU "
             "the block's shared memory may be gone before the store has read it)";
  }
  for (unsigned t = 0; t < s.threads.size() && !report; ++t) {
    if (s.threads[t].pending.empty()) continue;
    report = who(t) + " finished the kernel with the result of the wgmma at " +
             where(s.threads[t].pending.front().site) +
             " still in flight: no wgmma_wait_group covered its group (commit it, then wait)";
  }
  s.serial = ~std::uint64_t{0};
  s.copies.clear();
  return report;
}

}  // namespace detail
}  // namespace cpu
}  // namespace simt
