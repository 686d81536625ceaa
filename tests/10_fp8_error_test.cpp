// Chapter 10's FP8 lab (chapters/10_hopper/lab/fp8_error.h): the pieces are what they claim (the
// Hadamard transform is orthogonal and leaves Q K^T alone, e4m3 rounding is exact on values it
// holds), and the claim the chapter makes holds: on inputs with outliers, one e4m3 scale per 64-row
// block with the Hadamard transform has a clearly lower RMSE than one scale per tensor.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "catch.h"
#include "chapters/10_hopper/lab/fp8_error.h"
#include "common/random.h"

namespace {

using namespace ch10::fp8;

double dot(const float* a, const float* b, std::size_t d) {
  double sum = 0.0;
  for (std::size_t c = 0; c < d; ++c) sum += static_cast<double>(a[c]) * b[c];
  return sum;
}

}  // namespace

TEST_CASE("the Hadamard transform and its inverse give the input back", "[ch10][fp8]") {
  const std::size_t d = GENERATE(16, 64, 128, 256);
  const std::uint64_t seed = 3;
  const std::vector<float> x = draw_inputs(8 * d, seed, Inputs::outliers);
  const std::vector<float> signs = random_signs(d, seed + 1);
  std::vector<float> y = x;
  hadamard_rows(y, d, signs);
  inverse_hadamard_rows(y, d, signs);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float* row = &x[i / d * d];
    // Each pass of either transform rounds every entry once (relative 2^-24), and the scaled
    // transform keeps the row's norm, so the error of the round trip is at most about
    // (2 log2(d) + 4) 2^-24 of the row's norm: 1.2e-6 for d = 256. 1e-5 of the norm is above it.
    const double bound = 1e-5 * std::sqrt(dot(row, row, d));
    INFO("d " << d << ", seed " << seed << ", index " << i << ": " << y[i] << " vs " << x[i]);
    REQUIRE(std::fabs(y[i] - x[i]) <= bound);
  }
}

TEST_CASE("the Hadamard transform leaves every score q . k unchanged", "[ch10][fp8]") {
  const std::size_t d = GENERATE(64, 128);
  const std::size_t seq = 32;
  const std::uint64_t seed = 5;
  const Head h = draw_head(seq, d, seed, Inputs::outliers);
  Head t = h;
  const std::vector<float> signs = random_signs(d, seed + 1);
  hadamard_rows(t.Q, d, signs);
  hadamard_rows(t.K, d, signs);
  for (std::size_t i = 0; i < seq; ++i) {
    for (std::size_t j = 0; j < seq; ++j) {
      const double before = dot(&h.Q[i * d], &h.K[j * d], d), after = dot(&t.Q[i * d], &t.K[j * d], d);
      // The transformed entries carry float32 rounding of relative size ~(log2(d) + 2) 2^-24 of
      // their row's norm; a dot product of two such rows then errs by about that times |q| |k|
      // (Cauchy-Schwarz). 1e-5 |q| |k| is above it for d <= 128.
      const double bound = 1e-5 * std::sqrt(dot(&h.Q[i * d], &h.Q[i * d], d) * dot(&h.K[j * d], &h.K[j * d], d));
      INFO("d " << d << ", seed " << seed << ", q " << i << ", k " << j << ": " << after << " vs " << before);
      REQUIRE(std::fabs(after - before) <= bound);
    }
  }
}

TEST_CASE("the Hadamard transform spreads an outlier over the whole row", "[ch10][fp8]") {
  const std::size_t d = 128;
  std::vector<float> x(d, 0.0f);
  x[17] = 100.0f;
  hadamard_rows(x, d, random_signs(d, 9));
  for (float v : x) {
    // One nonzero entry becomes d entries of magnitude 100 / sqrt(d) = 8.84: the transform's
    // additions meet only zeros (exact), and three float32 roundings remain (the square root, the
    // division, the product), 2^-24 relative each: about 1.6e-6 here, below the 1e-5 allowed.
    REQUIRE(std::fabs(std::fabs(v) - 100.0 / std::sqrt(128.0)) <= 1e-5);
  }
}

TEST_CASE("e4m3 quantisation is exact on values that e4m3 holds", "[ch10][fp8]") {
  // The scale is amax / 448 = 1 when the block's largest value is 448, so every value of the block
  // is its own e4m3 code's value; these are (codes of) e4m3 values, so no rounding may happen: the
  // comparison is exact, no tolerance.
  std::vector<float> x = {448.0f, -448.0f, 1.0f, -1.125f, 0.015625f, 0.001953125f, 0.0f, 240.0f, -3.5f, 26.0f};
  const std::vector<float> before = x;
  quantise_e4m3(x, 2, 5);  // one block of 5 rows of 2
  REQUIRE(x == before);
  // Scaled by a power of two, the same values stay exact: scale = amax / 448 = 2^-5 is a power of two.
  for (float& v : x) v = std::ldexp(v, -5);
  std::vector<float> scaled = x;
  quantise_e4m3(scaled, 2, 64);
  REQUIRE(scaled == x);
}

TEST_CASE("smooth K changes no weight of softmax", "[ch10][fp8]") {
  const std::size_t seq = 64, d = 64;
  const Head h = draw_head(seq, d, 11, Inputs::outliers);
  Head smooth = h;
  subtract_token_mean(smooth.K, d);
  const std::vector<double> O = attention_reference(h), O_smooth = attention_reference(smooth);
  for (std::size_t i = 0; i < O.size(); ++i) {
    // Only the float32 rounding of K - mean(K) differs (2^-24 relative of entries up to ~50, times
    // |q| ~ 8 and 1/sqrt(d) into each score): each score moves by < 1e-5, so O by < 1e-5 of max|V|.
    INFO("index " << i << ": " << O_smooth[i] << " vs " << O[i]);
    REQUIRE(std::fabs(O_smooth[i] - O[i]) <= 1e-5 * 60.0);
  }
}

TEST_CASE("on outlier inputs, e4m3 per block + Hadamard has a third less RMSE than e4m3 per tensor", "[ch10][fp8]") {
  const std::size_t seq = 1024, d = 128;
  const std::uint64_t seed = 1;
  const Head h = draw_head(seq, d, seed, Inputs::outliers);
  const std::vector<double> reference = attention_reference(h);
  const std::vector<Recipe> all = recipes();
  auto rmse = [&](const std::string& name) {
    for (const Recipe& r : all) {
      if (r.name == name) return error_of(h, reference, r, seed + 7, Accumulate::f32).rmse;
    }
    FAIL("no recipe " << name);
    return 0.0;
  };
  const double tensor = rmse("e4m3 per tensor"), block_hadamard = rmse("e4m3 per block + Hadamard"),
               bf16 = rmse("bf16");
  INFO("seq " << seq << ", d " << d << ", seed " << seed << ": per tensor " << tensor << ", per block + Hadamard "
              << block_hadamard << ", bf16 " << bf16);
  // Measured 1.70x here (libstdc++'s normal_distribution; 1.4x to 2.0x over the shapes and seeds
  // of docs/10-hopper.md). Not the 2.6x of FlashAttention-3's numerical-error experiment (Shah et al. 2024): here the
  // Hadamard removes only the error of products of two outliers, q_c k_c (docs/10-hopper.md, "FP8, on the CPU"). 1.5x
  // keeps the claim the chapter makes and leaves room for another library's draws.
  CHECK(tensor >= 1.5 * block_hadamard);
  // bf16 keeps 8 significant bits to e4m3's 4 and needs no scale: about 10x below either FP8
  // recipe here (measured 8.5e-4 against 8.5e-3); 5x leaves room for another draw.
  CHECK(5.0 * bf16 <= block_hadamard);
}

TEST_CASE("truncating the accumulator to 14 fraction bits keeps them and drops the rest", "[ch10][fp8]") {
  // 1 + 2^-14 keeps its bit; 2^-15 below it is dropped (toward zero, both signs): exact comparisons.
  REQUIRE(truncate_fraction(1.0f + 0x1p-14f + 0x1p-15f, 14) == 1.0f + 0x1p-14f);
  REQUIRE(truncate_fraction(-(1.0f + 0x1p-15f), 14) == -1.0f);
}
