// Seeded random inputs. The same seed gives the same numbers on every run of the same build, so
// a failing test can print its seed and be replayed.
//
//   normal(n, seed, mean, stddev)  independent normal draws
//   uniform(n, seed, lo, hi)       independent uniform draws in [lo, hi)
//   peaked(n, seed, ...)           attention-like scores: normal(0, 1) with a few large outliers,
//                                  so that a handful of keys take most of the softmax weight
//
// std::mt19937_64 is specified exactly by the standard; the distributions are not, so another
// standard library may draw other numbers from the same seed (still deterministic on it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace fa {

// n values of `distribution`, drawn in order from std::mt19937_64 seeded with `seed`, as T.
template <class T, class Distribution>
std::vector<T> draw(std::size_t n, std::uint64_t seed, Distribution distribution) {
  std::mt19937_64 engine(seed);
  std::vector<T> out(n);
  for (auto& x : out) x = static_cast<T>(distribution(engine));
  return out;
}

template <class T = double>
std::vector<T> normal(std::size_t n, std::uint64_t seed, double mean = 0.0, double stddev = 1.0) {
  return draw<T>(n, seed, std::normal_distribution<double>(mean, stddev));
}

template <class T = double>
std::vector<T> uniform(std::size_t n, std::uint64_t seed, double lo = 0.0, double hi = 1.0) {
  return draw<T>(n, seed, std::uniform_real_distribution<double>(lo, hi));
}

// normal(0, 1) scores, then `outliers` of them (chosen at random; at least one when n > 0) raised
// by `height`. Real attention rows look like this: most keys get almost no weight, a few get most.
template <class T = double>
std::vector<T> peaked(std::size_t n, std::uint64_t seed, std::size_t outliers = 0, double height = 12.0) {
  std::vector<T> out = normal<T>(n, seed);
  if (n == 0) return out;
  if (outliers == 0) outliers = 1 + n / 100;
  std::mt19937_64 engine(seed ^ 0x9e3779b97f4a7c15ULL);
  std::uniform_int_distribution<std::size_t> pick(0, n - 1);
  for (std::size_t k = 0; k < outliers; ++k) out[pick(engine)] += static_cast<T>(height);
  return out;
}

}  // namespace fa
