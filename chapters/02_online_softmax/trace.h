// Chapter 02: the online softmax, step by step, as data.
//
// online_softmax_trace() runs the same update as online_softmax() (OnlineState::update, lines 2-5
// of online_softmax.h) and records, after every block, the state and every term exp(x_j - m) seen
// so far. A reader sees in it what the one-pass algorithm hides: when the max rises, all earlier
// terms shrink together, by the same factor, rescale. The demo's --trace prints it with a bar per term;
// a figure can be drawn from it as well (one frame per step).
//
// Memory: step k holds every term seen so far, so a trace of n scores in blocks of b holds about
// n * n / (2 b) numbers. It is meant for small inputs (tens of scores).
//
// Source: the worked example (1, 3, 5, 2 in blocks of 2, docs/02-online-softmax.md); Milakov and
// Gimelshein (2018), section 3.
// Run the demo: build/default/bin/ch02_online_softmax --trace --scores 1,3,5,2 --block 2
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "chapters/02_online_softmax/online_softmax.h"

namespace ch02 {

// What one block did to the state (one pass through lines 2-5).
template <std::floating_point T>
struct TraceStep {
  std::size_t first = 0;  // the block that arrived: scores x[first] .. x[first + count - 1]
  std::size_t count = 0;  // its length: the block size, or less for the tail
  T m_before = 0;         // m before the block (-inf before the first one)
  T m_after = 0;          // m after it (line 2)
  T rescale = 0;          // exp(m_before - m_after) (line 3): 1 if the max did not rise
  T l_before = 0;         // l before the block
  T block_sum = 0;        // the block's own terms against m_after, summed (line 4)
  T l_after = 0;          // l_before * rescale + block_sum (line 4)
  std::vector<T> terms;   // exp(x_j - m_after) for j = 0 .. first + count - 1: the terms whose
                          // sum l_after is (up to rounding); the earlier ones are the previous
                          // step's terms times rescale
};

// A whole run: the input, one step per block, and the weights of line 7.
template <std::floating_point T>
struct Trace {
  std::vector<T> x;                 // the scores, as given
  std::size_t block = 1;            // scores per block
  std::vector<TraceStep<T>> steps;  // ceil(n / block) steps, in order
  std::vector<T> p;                 // the result: online_softmax(x, block), bit for bit
};

// Runs the online softmax of x in blocks of `block` scores and records every step.
// x: the scores, length n >= 1; block >= 1 (the last block is the shorter tail when block does not
// divide n). Returns the trace; its p is exactly online_softmax(x, block).
// Throws std::invalid_argument if x is empty or block == 0.
template <std::floating_point T>
Trace<T> online_softmax_trace(std::span<const T> x, std::size_t block = 1) {
  check_online_softmax_arguments(x.size(), block, "online_softmax_trace");
  Trace<T> trace;
  trace.x.assign(x.begin(), x.end());
  trace.block = block;

  OnlineState<T> state;  // line 1
  for (std::size_t first = 0; first < x.size(); first += std::min(block, x.size() - first)) {
    const auto arrived = x.subspan(first, std::min(block, x.size() - first));
    TraceStep<T> step;
    step.first = first;
    step.count = arrived.size();
    step.m_before = state.m;
    step.l_before = state.l;
    step.rescale = state.update(arrived);  // lines 2-5, exactly as online_softmax runs them
    step.m_after = state.m;
    step.l_after = state.l;
    const T m_safe = safe_max(state.m);
    step.block_sum = block_sum(arrived, m_safe);  // the same sum, in the same order, as line 4 took
    for (std::size_t j = 0; j < first + arrived.size(); ++j) step.terms.push_back(term(x[j], m_safe));
    trace.steps.push_back(std::move(step));
  }
  trace.p = online_softmax(x, block);  // line 7
  return trace;
}

template <std::floating_point T>
Trace<T> online_softmax_trace(const std::vector<T>& x, std::size_t block = 1) {
  return online_softmax_trace(std::span<const T>(x), block);
}

}  // namespace ch02
