// Chapter 02: online softmax, the max and the sum in one pass.
//
// What this chapter adds to chapter 01: the safe softmax reads x three times (max, sum, normalise).
// Here the max and the sum come out of ONE pass: keep the largest score seen so far, m, and the sum
// of exp(x_j - m) over the scores seen so far, l. When a later score raises the max from m to m_new,
// every term already in l was computed against the old max and is too large by the same factor
// exp(m_new - m), so one multiplication by rescale = exp(m - m_new) corrects all of them at once. The
// scores may arrive one at a time or in blocks of any size; FlashAttention sees them a tile at a time.
//
// The algorithm (blocks of `block` scores; block = 1 is the element-by-element form of the paper):
//   1. m = -inf, l = 0                                    the empty state
//      for each block B of x, in order:                   pass 1 over x
//   2.   m_new   = max(m, max_{j in B} x_j)               the max so far, this block included
//   3.   rescale = exp(m - m_new)                         1 if the max did not rise
//   4.   l       = l * rescale + sum_{j in B} exp(x_j - m_new)   rescale what is there, add the block
//        (line 5 is chapter 03's: acc, the weighted sum of values, rescaled the same way)
//   6.   m       = m_new
//   7. p_i = exp(x_i - m) / l                             pass 2: normalise
// After every block, l = sum over the scores seen so far of exp(x_j - m) (the induction is in
// docs/02-online-softmax.md), so after the last block m and l are exactly chapter 01's max and sum,
// and line 7 is chapter 01's line 3. Chapter 03 keeps these numbers and adds line 5.
// The same lines in FlashAttention-2's Algorithm 1 (Dao 2023), which chapters 05 and 06 quote with the
// paper's numbers: line 1 is its line 5 (the state, on chip); the loop over blocks its line 6 (over
// the tiles of K and V); lines 2-4 its line 9 (m, the weights P and l); line 5 its line 10 (the
// output, which chapter 03 adds); line 6 the step from one tile to the next; line 7 its line 12
// (divide by l once, at the end).
//
// Conventions: those of ch01::safe_softmax (docs/conventions.md, "Numbers"). A -inf score
// gets weight 0; a row of only -inf gives all zeros; a NaN makes every weight NaN; an empty row or
// block == 0 throws std::invalid_argument. One guard that the maths does not need: while every score
// so far is -inf, m_new is -inf, and exp(m - m_new) and exp(x_j - m_new) would be exp(-inf - -inf),
// that is exp(NaN). Lines 3 and 4 measure against m_safe = safe_max(m_new) instead: 0 in that case,
// so every term is exp(-inf) = 0 and l stays 0. Chapters 03 to 06, 08 and 09 write the same guard.
//
// Source: M. Milakov and N. Gimelshein, "Online normalizer calculation for softmax",
// arXiv:1805.02867 (2018), section 3 (the online normalizer, one element at a time); the blocked
// update as FlashAttention uses it (Dao 2023, FlashAttention-2, section 3.1); the worked example
// 1, 3, 5, 2 in blocks of two (docs/02-online-softmax.md).
// Run the demo: build/default/bin/ch02_online_softmax   (or with --trace --scores 1,3,5,2 --block 2)
#pragma once

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace ch02 {

// The max that lines 3 and 4 measure against: m_new, or 0 while no score so far is above -inf
// (m_new = -inf), where exp(m - m_new) and exp(x_j - m_new) would be exp(-inf - -inf) = exp(NaN).
// Against 0, every one of those terms is exp(-inf) = 0. Never throws.
template <std::floating_point T>
T safe_max(T m_new) {
  return m_new == -std::numeric_limits<T>::infinity() ? T(0) : m_new;
}

// One term exp(x_j - m_safe) of the sum l (lines 4 and 7): the weight of score x_j before dividing,
// against the max m_safe = safe_max(m) (x_j <= m, so the term is in [0, 1]; a -inf score has term
// 0). NaN in, NaN out. Never throws.
template <std::floating_point T>
T term(T x_j, T m_safe) {
  return std::exp(x_j - m_safe);
}

// The largest score of a block (line 2), -inf for an empty block. A NaN never compares greater,
// so it is never the max; it reaches the output through l instead (as in chapter 01).
template <std::floating_point T>
T block_max(std::span<const T> block) {
  T max = -std::numeric_limits<T>::infinity();
  for (T x_j : block) max = x_j > max ? x_j : max;
  return max;
}

// The block's own contribution to l (line 4): sum over j in the block of exp(x_j - m_safe), added
// left to right. m_safe = safe_max(m_new), with m_new at least every score of the block.
template <std::floating_point T>
T block_sum(std::span<const T> block, T m_safe) {
  T sum = 0;
  for (T x_j : block) sum += term(x_j, m_safe);
  return sum;
}

// The running state of the online softmax: the max m and the sum l of the scores seen so far.
// Invariant (exact arithmetic): l = sum_{j seen} exp(x_j - m). Chapter 03 carries the same two
// numbers, plus the weighted sum; chapter 05's kernel keeps one pair per query row.
template <std::floating_point T>
struct OnlineState {
  T m = -std::numeric_limits<T>::infinity();  // line 1: the largest score seen so far
  T l = 0;                                    // line 1: sum of exp(x_j - m) over the scores seen

  // Folds one block of scores into the state (lines 2-6) and returns the factor `rescale` that was
  // applied to the old l (1 if the max did not rise, 0 while nothing was there). Any block size
  // works, 1 included; an empty block changes nothing and returns 1. Never throws.
  T update(std::span<const T> block) {
    // graded 02a: lines 2-4 and 6, the online update: the new max, the factor rescale (mind the guard), l, m
    const T block_m = block_max(block);
    const T m_new = block_m > m ? block_m : m;   // line 2: the max so far, this block included
    const T m_safe = safe_max(m_new);            // the guard (see safe_max)
    const T rescale = std::exp(m - m_safe);      // line 3: how much the old terms must shrink
    l = l * rescale + block_sum(block, m_safe);  // line 4: rescale what is already there, add the block
    m = m_new;                                   // line 6
    // end graded
    return rescale;
  }
};

// Throws the std::invalid_argument that online_softmax and its trace give for bad input.
inline void check_online_softmax_arguments(std::size_t n, std::size_t block, const char* who) {
  if (n == 0) {
    throw std::invalid_argument(std::string(who) + " of an empty row: give at least one score");
  }
  if (block == 0) {
    throw std::invalid_argument(std::string(who) +
                                ": block size 0; give a block size of at least 1 (1 = one score at a "
                                "time; a block as long as the row = all scores at once)");
  }
}

// The online softmax of one row of scores (lines 1-7): pass 1 reads x once, in blocks of `block`
// scores, to get m and l; pass 2 normalises.
// x: the scores, length n >= 1. block: scores per update, >= 1; any block size works, n need not
// be a multiple of it (the last block is the shorter tail) and block > n means one block.
// Returns n weights in [0, 1] that sum to 1; all zeros for an all -inf row, all NaN if any score is
// NaN. Equals ch01::safe_softmax(x) up to the rounding of the sum l, which adds the same terms in
// another order: about sqrt(n) * eps relative (tests/02_online_softmax_test.cpp, order_tolerance).
// Throws std::invalid_argument if x is empty or block == 0.
// Source: Milakov and Gimelshein (2018), section 3; FlashAttention's blocked form (Dao 2023, section 3.1).
template <std::floating_point T>
std::vector<T> online_softmax(std::span<const T> x, std::size_t block = 1) {
  check_online_softmax_arguments(x.size(), block, "online_softmax");

  OnlineState<T> state;  // line 1
  for (std::size_t first = 0; first < x.size(); first += std::min(block, x.size() - first)) {
    // lines 2-6; the last block is x.size() - first long when block does not divide n (the tail).
    state.update(x.subspan(first, std::min(block, x.size() - first)));
  }

  std::vector<T> p(x.size());
  // graded 02b: line 7, each weight from m and l; a row where no score is above -inf gives zeros
  // l == 0 only when no score was above -inf: a fully masked row, defined as all zeros. (Were any
  // score finite, its term against the max would be 1, and a NaN makes l NaN, not 0.)
  if (state.l == 0) return p;
  for (std::size_t i = 0; i < x.size(); ++i) p[i] = term(x[i], state.m) / state.l;  // line 7 (m is finite)
  // end graded
  return p;
}

// How far online_softmax(x, block) may be from ch01::safe_softmax(x), relative to each weight, for
// n scores in type T: 16 sqrt(n + 1) eps. m is the same in both; l is the same n positive terms
// added in another order and at other scales (rescaled each time the max rises, summed block by
// block), so each l differs from the exact sum by its own summation error. That error is at most
// n eps but, with roundings that do not all lean the same way, grows like sqrt(n) eps: the worst
// measured over 30 random inputs at n = 100000 was 32 eps (double) and 88 eps (float) for blocks of
// 1, 127 eps and 902 eps for blocks of 2 to 64; all below 3 sqrt(n) eps. 16 sqrt(n + 1) eps leaves
// 5x room; a wrong recurrence is off by O(1). (In float most terms fall below half an ulp of l and
// are rounded away, a bias that grows like n rather than sqrt(n): this bound holds to n of a few
// million.) The demo and the tests both use it. Never throws.
template <std::floating_point T>
double order_bound(std::size_t n) {
  return 16.0 * std::sqrt(static_cast<double>(n) + 1.0) * std::numeric_limits<T>::epsilon();
}

// Convenience overload for a std::vector argument.
template <std::floating_point T>
std::vector<T> online_softmax(const std::vector<T>& x, std::size_t block = 1) {
  return online_softmax(std::span<const T>(x), block);
}

}  // namespace ch02
