// Chapter 01's safe softmax and this chapter's online softmax, vectorised, for the benchmark
// (softmax_bench.cpp). Same lines as safe_softmax.h and online_softmax.h, on float32 scores, with
// the loops over a row (or a block) done by SIMD instructions through Google Highway and the
// exponential taken from Highway's contrib math (hwy/contrib/math/math-inl.h). Why Highway and not
// the compiler's vector math library: see softmax_simd.cpp.
//
//   safe_softmax    chapter 01, three passes over x:  1. m = max x   2. l = sum exp(x - m)
//                                                      3. p = exp(x - m) / l
//   online_softmax  chapter 02, two passes over x, in blocks of kBlock scores:
//                   1. m = -inf, l = 0;  for each block B:  2. m_new = max(m, max_B x)
//                   3. rescale = exp(m - m_new)  4. l = l * rescale + sum_B exp(x - m_new)
//                   5. m = m_new
//                   6. p = exp(x - m) / l
//
// Conventions: those of the scalar forms (docs/conventions.md): a -inf score gets weight 0, a row
// of only -inf gives zeros, a NaN score makes every weight NaN. Results agree with the scalar
// float32 forms to a few float32 rounding steps (Highway's exp is within 1 ulp of exp, and the sum
// adds the terms in another order); softmax_bench.cpp checks that before it times anything.
#pragma once

#include <cstddef>
#include <span>
#include <string>

namespace ch02::simd {

// How line 3 (safe) or line 7 (online) writes p.
enum class Store {
  cached,     // ordinary stores: each line of p is first read into the cache (write-allocate)
  streaming,  // non-temporal stores: p goes to memory without being read first
};

// The scores per block of online_softmax (line 2): 1024 floats, 4 KiB, which stay in the L1 cache
// between the block's max and its sum; large enough that the work once per block (two reductions
// across lanes, one exp for c) is small next to the block's 1024 exps.
inline constexpr std::size_t kBlock = 1024;

// x: n >= 1 scores; p: n outputs (may not overlap x). With Store::streaming, p.data() must be
// aligned to 64 bytes (hwy::AllocateAligned gives that). Throws std::invalid_argument on an empty
// row, on p.size() != x.size(), or on a misaligned p for streaming stores.
void safe_softmax(std::span<const float> x, std::span<float> p, Store store = Store::cached);
void online_softmax(std::span<const float> x, std::span<float> p, Store store = Store::cached);

// Chapter 01's line 1 alone, m = max x (NaN ignored): the pass over x that online_softmax saves,
// timed on its own by the benchmark. Throws std::invalid_argument on an empty row.
float max_pass(std::span<const float> x);

// The instruction set that Highway chose on this CPU at run time, e.g. "AVX2".
std::string target_name();

}  // namespace ch02::simd
