// The vectorised safe and online softmax of softmax_simd.h, written once with Google Highway and
// compiled by Highway for every instruction set of the CPU family (SSE4, AVX2, AVX-512, ...; this
// file is included once per set by hwy/foreach_target.h); the first call picks the best set the
// CPU has.
//
// Why Highway's exp rather than the compiler's vector math library (glibc's libmvec, reached
// through `#pragma omp simd`): glibc declares its vector expf to the compiler only under
// -ffast-math (bits/math-vector.h tests __FAST_MATH__), whose -ffinite-math-only lets the compiler
// assume that no score is -inf or NaN, and those are exactly the cases the book's softmax
// defines (a masked score, a fully masked row, a NaN that must reach the output). Highway's Exp is an ordinary function
// of a vector, needs no fast-math, is within 1 ulp of exp, runs on any CPU (x86, Arm, RISC-V, with a scalar fallback),
// is packaged by Debian and Ubuntu (libhwy-dev), and the choice of instruction set is made at run time, so one binary
// is fast on both an old and a new CPU.
//
// Loads and the tail: a row is read in whole vectors of N lanes (N = 8 floats with AVX2); the last
// n mod N scores are loaded into a vector whose unused lanes are -inf, which is the book's masked
// score: weight 0, so the tail needs no code of its own. Four vectors are in flight per step so
// that a pass is limited by memory or by the arithmetic, not by the latency of one max or add.
//
// Source: chapter 01 (safe_softmax.h) and chapter 02 (online_softmax.h), lines as numbered there;
// M. Milakov and N. Gimelshein, "Online normalizer calculation for softmax", arXiv:1805.02867
// (2018), sections 2-3 (the passes over memory counted there are the ones this file saves).
#include "chapters/02_online_softmax/lab/softmax_simd.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "chapters/02_online_softmax/lab/softmax_simd.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep  (re-includes this file per instruction set)

#include <hwy/cache_control.h>
#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace ch02::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;

// Scores x[i .. i + N) as a vector; lanes past the end of the row (i + lane >= n) are -inf.
HWY_INLINE V load_scores(D d, const float* HWY_RESTRICT x, std::size_t i, std::size_t n) {
  const std::size_t N = hn::Lanes(d);
  if (i + N <= n) return hn::LoadU(d, x + i);
  const auto in_row = hn::FirstN(d, n - i);
  return hn::IfThenElse(in_row, hn::MaskedLoad(in_row, d, x + i), hn::Set(d, -std::numeric_limits<float>::infinity()));
}

// term(x_j, m) of online_softmax.h: exp(x_j - m). Highway's Exp returns 0 for every argument below
// -104 (its last step keeps a lane only where x >= -104), and that comparison is false for -inf
// and for NaN, so a -inf score, and a -inf score against a max that is still -inf (argument NaN),
// both get term 0 as the chapter's guard gives them, with no instruction of our own. A NaN score
// would get 0 too, so the NaN is caught where the max is taken instead (range_max) and turned into
// l = NaN. softmax_bench.cpp checks all three cases against chapter 01 before timing.
HWY_INLINE V term(D d, V x, V m) { return hn::Exp(d, hn::Sub(x, m)); }

// max_{i0 <= j < i1} x_j, broadcast to every lane; -inf for an empty range. A NaN is never the max
// (x86's max returns its second operand when the first is NaN); it is recorded in `nan` instead.
HWY_INLINE V range_max(D d, const float* HWY_RESTRICT x, std::size_t i0, std::size_t i1, hn::Mask<D>& nan) {
  const std::size_t N = hn::Lanes(d);
  const V neg_inf = hn::Set(d, -std::numeric_limits<float>::infinity());
  V m0 = neg_inf, m1 = neg_inf, m2 = neg_inf, m3 = neg_inf;
  std::size_t i = i0;
  for (; i + 4 * N <= i1; i += 4 * N) {
    const V x0 = hn::LoadU(d, x + i), x1 = hn::LoadU(d, x + i + N);
    const V x2 = hn::LoadU(d, x + i + 2 * N), x3 = hn::LoadU(d, x + i + 3 * N);
    m0 = hn::Max(x0, m0);
    m1 = hn::Max(x1, m1);
    m2 = hn::Max(x2, m2);
    m3 = hn::Max(x3, m3);
    nan = hn::Or(nan, hn::Or(hn::Or(hn::IsNaN(x0), hn::IsNaN(x1)), hn::Or(hn::IsNaN(x2), hn::IsNaN(x3))));
  }
  for (; i < i1; i += N) {
    const V x0 = load_scores(d, x, i, i1);
    m0 = hn::Max(x0, m0);
    nan = hn::Or(nan, hn::IsNaN(x0));
  }
  return hn::MaxOfLanes(d, hn::Max(hn::Max(m0, m1), hn::Max(m2, m3)));
}

// Asks for the cache lines of x[i + kAhead .. i + kAhead + count) (clamped to the row of n scores)
// to be brought into the cache: the loads of a pass that is busy with exps run kAhead scores
// ahead of it, so that memory and arithmetic overlap. This matters most for the online form: it
// reads a block from memory for the block's max, and without the request the block's reads would
// wait for memory while the exps of the previous block wait for nothing (measured on the machine of
// docs/benchmarks-cpu.md: pass 1 of the online form took as long as the safe form's first two
// passes together). Every pass with exps asks the same way, in both forms.
// count: the scores the caller is about to read from x[i]; one request per 64-byte line (16 floats).
inline constexpr std::size_t kAhead = kBlock;
HWY_INLINE void fetch_ahead(const float* HWY_RESTRICT x, std::size_t i, std::size_t count, std::size_t n) {
  for (std::size_t k = 0; k < count; k += 16) hwy::Prefetch(x + std::min(i + kAhead + k, n - 1));
}

// sum_{i0 <= j < i1} term(x_j, m), broadcast to every lane; n: the row's length, for fetch_ahead.
HWY_INLINE V range_sum(D d, const float* HWY_RESTRICT x, std::size_t i0, std::size_t i1, V m, std::size_t n) {
  const std::size_t N = hn::Lanes(d);
  V s0 = hn::Zero(d), s1 = hn::Zero(d), s2 = hn::Zero(d), s3 = hn::Zero(d);
  std::size_t i = i0;
  for (; i + 4 * N <= i1; i += 4 * N) {
    fetch_ahead(x, i, 4 * N, n);
    s0 = hn::Add(s0, term(d, hn::LoadU(d, x + i), m));
    s1 = hn::Add(s1, term(d, hn::LoadU(d, x + i + N), m));
    s2 = hn::Add(s2, term(d, hn::LoadU(d, x + i + 2 * N), m));
    s3 = hn::Add(s3, term(d, hn::LoadU(d, x + i + 3 * N), m));
  }
  for (; i < i1; i += N) s0 = hn::Add(s0, term(d, load_scores(d, x, i, i1), m));
  return hn::SumOfLanes(d, hn::Add(hn::Add(s0, s1), hn::Add(s2, s3)));
}

// p_i = term(x_i, m) / l for every i: chapter 01's line 3, chapter 02's line 7 (the same line).
// l == 0 only for a row of only -inf scores: all zeros, as in the scalar forms. l = NaN (a NaN
// score) makes every p_i NaN.
void normalise(D d, const float* HWY_RESTRICT x, float* HWY_RESTRICT p, std::size_t n, V m, V l, bool streaming) {
  const std::size_t N = hn::Lanes(d);
  if (hn::GetLane(l) == 0.0f) {
    for (std::size_t i = 0; i < n; ++i) p[i] = 0.0f;
    return;
  }
  std::size_t i = 0;
  if (streaming) {
    for (; i + N <= n; i += N) {
      if (i % 16 == 0) fetch_ahead(x, i, N < 16 ? 16 : N, n);  // a line per 16 floats
      hn::Stream(hn::Div(term(d, hn::LoadU(d, x + i), m), l), d, p + i);
    }
  } else {
    for (; i + N <= n; i += N) {
      if (i % 16 == 0) fetch_ahead(x, i, N < 16 ? 16 : N, n);
      hn::StoreU(hn::Div(term(d, hn::LoadU(d, x + i), m), l), d, p + i);
    }
  }
  if (i < n) {
    const V p_i = hn::Div(term(d, load_scores(d, x, i, n), m), l);
    hn::BlendedStore(p_i, hn::FirstN(d, n - i), d, p + i);
  }
  if (streaming) hwy::FlushStream();  // the streamed stores are visible before we return
}

// A NaN seen anywhere in the row makes l NaN, as exp(NaN - m) does in the scalar forms.
HWY_INLINE V with_nan(D d, V l, hn::Mask<D> nan) {
  return hn::AllFalse(d, nan) ? l : hn::Set(d, std::numeric_limits<float>::quiet_NaN());
}

// Chapter 01: three passes over x.
void SafeSoftmax(const float* HWY_RESTRICT x, float* HWY_RESTRICT p, std::size_t n, bool streaming) {
  const D d;
  hn::Mask<D> nan = hn::FirstN(d, 0);
  const V m = range_max(d, x, 0, n, nan);                     // line 1 (pass 1)
  const V l = with_nan(d, range_sum(d, x, 0, n, m, n), nan);  // line 2 (pass 2)
  normalise(d, x, p, n, m, l, streaming);                     // line 3 (pass 3)
}

// Chapter 02: two passes over x; pass 1 takes the row a block of kBlock scores at a time, and
// reads each block twice from the L1 cache (its max, then its sum), once from memory.
void OnlineSoftmax(const float* HWY_RESTRICT x, float* HWY_RESTRICT p, std::size_t n, bool streaming) {
  const D d;
  const V neg_inf = hn::Set(d, -std::numeric_limits<float>::infinity());
  hn::Mask<D> nan = hn::FirstN(d, 0);
  V m = neg_inf;  // line 1
  V l = hn::Zero(d);
  for (std::size_t first = 0; first < n; first += kBlock) {
    const std::size_t last = first + kBlock < n ? first + kBlock : n;
    const V m_new = hn::Max(range_max(d, x, first, last, nan), m);  // line 2
    // the chapter's guard, safe_max(m_new): measure against 0 while every score so far is -inf
    const V m_safe = hn::IfThenElse(hn::Eq(m_new, neg_inf), hn::Zero(d), m_new);
    const V rescale = hn::Exp(d, hn::Sub(m, m_safe));  // line 3
    // line 4; the sum reads the block from the L1 cache and asks for the next block meanwhile.
    l = hn::MulAdd(l, rescale, range_sum(d, x, first, last, m_safe, n));
    m = m_new;  // line 6
  }
  normalise(d, x, p, n, m, with_nan(d, l, nan), streaming);  // line 7 (pass 2)
}

// Chapter 01's line 1 alone: the pass that the online form saves.
float MaxPass(const float* HWY_RESTRICT x, std::size_t n) {
  const D d;
  hn::Mask<D> nan = hn::FirstN(d, 0);
  return hn::GetLane(range_max(d, x, 0, n, nan));
}

const char* TargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace ch02::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ch02::simd {

HWY_EXPORT(SafeSoftmax);
HWY_EXPORT(OnlineSoftmax);
HWY_EXPORT(MaxPass);
HWY_EXPORT(TargetName);

namespace {
void check(std::span<const float> x, std::span<float> p, Store store, const char* who) {
  const std::string name(who);
  if (x.empty()) throw std::invalid_argument(name + " of an empty row: give at least one score");
  if (p.size() != x.size()) {
    throw std::invalid_argument(name + ": " + std::to_string(x.size()) + " scores but room for " +
                                std::to_string(p.size()) + " outputs; give p as many as x");
  }
  if (store == Store::streaming && reinterpret_cast<std::uintptr_t>(p.data()) % 64 != 0) {
    throw std::invalid_argument(name +
                                ": streaming stores need p aligned to 64 bytes; allocate it "
                                "with hwy::AllocateAligned or use Store::cached");
  }
}
}  // namespace

void safe_softmax(std::span<const float> x, std::span<float> p, Store store) {
  check(x, p, store, "simd::safe_softmax");
  HWY_DYNAMIC_DISPATCH(SafeSoftmax)(x.data(), p.data(), x.size(), store == Store::streaming);
}

void online_softmax(std::span<const float> x, std::span<float> p, Store store) {
  check(x, p, store, "simd::online_softmax");
  HWY_DYNAMIC_DISPATCH(OnlineSoftmax)(x.data(), p.data(), x.size(), store == Store::streaming);
}

float max_pass(std::span<const float> x) {
  if (x.empty()) throw std::invalid_argument("simd::max_pass of an empty row: give at least one score");
  return HWY_DYNAMIC_DISPATCH(MaxPass)(x.data(), x.size());
}

std::string target_name() { return HWY_DYNAMIC_DISPATCH(TargetName)(); }

}  // namespace ch02::simd
#endif  // HWY_ONCE
