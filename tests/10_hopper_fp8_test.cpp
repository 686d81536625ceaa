// Chapter 10's FP8 kernel (chapters/10_hopper/hopper_fp8.cuh) against the lab's model of the same
// recipe (chapters/10_hopper/lab/fp8_error.h, model_of_kernel): the rotation and the quantisation
// kernels give the lab's values bit for bit, and the attention kernel agrees with the model within
// O's bf16 rounding (ch10::kFp8ModelBound, whose reason hopper.h gives), on odd shapes, both head
// dims, per tensor and per block, with and without the Hadamard transform; the V-scale algebra
// holds across tiles whose scales differ by 10^6; the bound would catch a wrong order of the keys;
// bad options are refused before any work.
//
// On the CPU, common/simt carries out FP8 wgmma, TMA and the mbarriers lane by lane; every run
// starts from outputs filled with NaN, so an element the kernel forgets to write cannot pass.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "attention_inputs.h"
#include "catch.h"
#include "chapters/10_hopper/hopper_fp8.h"
#include "chapters/10_hopper/lab/fp8_error.h"
#include "common/compare.h"
#include "common/random.h"
#include "common/simt/instructions/fp8.h"
#include "common/simt/instructions/half_precision.h"
#include "common/simt/simt.h"

namespace {

using fa_test::kDevice;
namespace fp8 = ch10::fp8;

fp8::Quant lab_quant(ch10::Quant quant) { return quant == ch10::Quant::block ? fp8::Quant::block : fp8::Quant::tensor; }

// The lab's problem of one head for these inputs and options.
fp8::Problem head_of(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const ch10::Fp8Options& options) {
  const double scale = options.scale.value_or(fa::default_scale(Q.shape.head_dim));
  return {Q.shape.seq_len, K.shape.seq_len,           Q.shape.head_dim,
          options.causal,  static_cast<float>(scale), options.p_scale};
}

fp8::KernelModel model_of(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                          const ch10::Fp8Options& options) {
  return fp8::model_of_kernel(Q.values, K.values, V.values, Q.shape.batch * Q.shape.heads, head_of(Q, K, options),
                              lab_quant(options.quant), options.hadamard, options.seed);
}

// Runs the kernel and the model on the same inputs and checks O and L (the bounds: hopper.h).
void check_against_model(const fa::Tensor4<float>& Q, const fa::Tensor4<float>& K, const fa::Tensor4<float>& V,
                         const ch10::Fp8Options& options) {
  const ch10::Fp8Result r = ch10::fp8_attention(Q, K, V, options, kDevice);
  const fp8::KernelModel model = model_of(Q, K, V, options);
  const fa::ErrorStats err = fa::compare(r.run.O.values, model.O);
  INFO("O against the model: " << fa::describe(err));
  CHECK(err.out_nan == 0);
  CHECK(err.rel_l2 <= ch10::kFp8ModelBound);
  // Sharper: against the model's O rounded to bf16 as the kernel rounds it, the two are the same
  // value but where float32 noise decides a bf16 rounding (one ulp) or flips a P code at a rounding
  // tie (that row's values move by a fraction of a P step). Measured on 203 x 300, both head dims,
  // every recipe: at most 0.3% of the values differ, rel L2 at most 3.8e-4; the bounds leave room,
  // 1% and 1e-3, while a wrong fragment or scale moves nearly every value.
  std::vector<float> rounded(model.O.size());
  std::size_t differ = 0;
  for (std::size_t i = 0; i < rounded.size(); ++i) {
    rounded[i] = static_cast<float>(simt::bf16(model.O[i]));
    differ += rounded[i] != r.run.O.values[i] ? 1 : 0;
  }
  const fa::ErrorStats err_bf16 = fa::compare(r.run.O.values, rounded);
  INFO("against the model's O in bf16: " << fa::describe(err_bf16) << "; " << differ << " values differ");
  CHECK(err_bf16.rel_l2 <= 1e-3);
  CHECK(static_cast<double>(differ) <= 0.01 * static_cast<double>(rounded.size()));
  for (std::size_t i = 0; i < model.L.size(); ++i) {
    INFO("L of row " << i << ": " << r.run.L[i] << ", the model's " << model.L[i]);
    if (std::isinf(model.L[i])) {
      REQUIRE(r.run.L[i] == model.L[i]);  // a row that sees no key: -inf, and O = 0
      for (std::size_t c = 0; c < Q.shape.head_dim; ++c) REQUIRE(r.run.O.values[i * Q.shape.head_dim + c] == 0.0f);
    } else {
      REQUIRE(std::fabs(r.run.L[i] - model.L[i]) <= ch10::kFp8ModelLBound);
    }
  }
}

}  // namespace

TEST_CASE("the rotation kernel gives the lab's hadamard_rows bit for bit", "[ch10][fp8]") {
  if (const std::string why = fa_test::device_refusal(ch10::check_device); !why.empty()) FA_SKIP(why);
  // Both are the same float32 operations in the same order (signs, log2(d) passes of butterflies,
  // one multiply by 1/sqrt(d), correctly rounded on both), so nothing may differ.
  const int d = GENERATE(64, 128);
  const std::uint64_t seed = 5;
  const std::vector<float> x = fp8::draw_inputs(static_cast<std::size_t>(37 * d), 11, fp8::Inputs::outliers);
  std::vector<float> lab = x;
  fp8::hadamard_rows(lab, static_cast<std::size_t>(d), fp8::random_signs(static_cast<std::size_t>(d), seed));
  const std::vector<float> kernel = ch10::rotate_rows(x, d, seed, kDevice);
  REQUIRE(kernel.size() == lab.size());
  for (std::size_t i = 0; i < lab.size(); ++i) {
    INFO("element " << i);
    REQUIRE(kernel[i] == lab[i]);
  }
}

TEST_CASE("the quantisation kernels give the lab's scales and codes bit for bit", "[ch10][fp8]") {
  if (const std::string why = fa_test::device_refusal(ch10::check_device); !why.empty()) FA_SKIP(why);
  // Each scale is amax / 448 in float32 and each code cvt.rn.satfinite of x / scale on both sides:
  // the kernels must reproduce quantise_e4m3 exactly, per block of 64 rows (the tail shorter) and
  // per head, after the same rotation.
  const ch10::Quant quant = GENERATE(ch10::Quant::tensor, ch10::Quant::block);
  const bool hadamard = GENERATE(false, true);
  constexpr std::size_t d = 64, seq_q = 100, seq_k = 150;
  const auto in = fa_test::make_inputs(1, 2, seq_q, seq_k, d, fa::default_scale(d), fa_test::Scores::normal, 21);
  const ch10::Fp8Options options{.quant = quant, .hadamard = hadamard, .seed = 9};
  const ch10::Fp8Result r = ch10::fp8_attention(in.Q, in.K, in.V, options, kDevice);
  const fp8::KernelModel model = model_of(in.Q, in.K, in.V, options);
  // value = its tile's scale x its code, the values the model multiplies (scale e4m3(x / scale)).
  const auto check = [](const std::vector<std::uint8_t>& codes, const std::vector<float>& scales, std::size_t seq,
                        const std::vector<float>& lab, const char* name) {
    const std::size_t tiles = (seq + 63) / 64;
    REQUIRE(scales.size() == 2 * tiles);
    for (std::size_t i = 0; i < lab.size(); ++i) {
      const std::size_t bh = i / (seq * d), tile = (i % (seq * d)) / (64 * d);
      INFO(name << " element " << i << ", code " << int{codes[i]} << ", scale " << scales[bh * tiles + tile]);
      REQUIRE(scales[bh * tiles + tile] * simt::e4m3_bits_to_float(codes[i]) == lab[i]);
    }
  };
  check(r.inputs.Q, r.inputs.q_scales, seq_q, model.Q, "Q");
  check(r.inputs.K, r.inputs.k_scales, seq_k, model.K, "K");
  check(r.inputs.V, r.inputs.v_scales, seq_k, model.V, "V");
  if (quant == ch10::Quant::tensor) {  // one scale for every tile of a head
    CHECK(r.inputs.v_scales[0] == r.inputs.v_scales[2]);
    CHECK(r.inputs.v_scales[0] == fp8::e4m3_scale(std::span<const float>(in.V.values).subspan(0, seq_k * d)));
  } else {  // the tail tile's own amax
    CHECK(r.inputs.v_scales[2] == fp8::e4m3_scale(std::span<const float>(in.V.values).subspan(128 * d, 22 * d)));
  }
}

TEST_CASE("the FP8 kernel agrees with the lab's model, every odd shape, head dim, recipe", "[ch10][fp8]") {
  if (const std::string why = fa_test::device_refusal(ch10::check_device); !why.empty()) FA_SKIP(why);
  // The decode shape, a single key, a tile and a bit (65: the second key tile one key, the second
  // consumer one row), seq_len_q != seq_len_k both ways (causal 203 x 113: the first 90 rows see no
  // key), and three key tiles (the ring wraps). The recipe (tensor or block, Hadamard or not)
  // alternates with the shape and head dim, so that each meets every recipe at a quarter of the time.
  std::vector<std::pair<std::size_t, std::size_t>> shapes{{1, 1},     {1, 257},   {65, 65},
                                                          {113, 203}, {203, 113}, {64, 192}};
  // Under a sanitizer (10 to 50 times slower): the decode shape, a tail in both, and causal with
  // rows that see no key.
  if (FA_SANITIZER_BUILD) shapes = {{1, 257}, {65, 65}, {203, 113}};
  const std::size_t k = GENERATE_COPY(range(std::size_t{0}, shapes.size()));
  const std::size_t head_dim = GENERATE(64u, 128u);
  const bool causal = GENERATE(false, true);
  const auto [seq_q, seq_k] = shapes[k];
  const std::size_t recipe = (k + (head_dim == 128 ? 1 : 0) + (causal ? 2 : 0)) % 4;
  const ch10::Fp8Options options{.causal = causal,
                                 .quant = recipe % 2 == 0 ? ch10::Quant::block : ch10::Quant::tensor,
                                 .hadamard = recipe >= 2,
                                 .seed = 3 + k};
  INFO("seq_len_q " << seq_q << ", seq_len_k " << seq_k << ", head_dim " << head_dim << (causal ? ", causal" : "")
                    << ", recipe " << recipe);
  const auto in = fa_test::make_inputs(1, 2, seq_q, seq_k, head_dim, fa::default_scale(head_dim),
                                       fa_test::Scores::normal, 700 + 13 * k + head_dim);
  check_against_model(in.Q, in.K, in.V, options);
}

TEST_CASE("the FP8 kernel keeps acc in the current tile's V units, across scales 10^6 apart", "[ch10][fp8]") {
  if (const std::string why = fa_test::device_refusal(ch10::check_device); !why.empty()) FA_SKIP(why);
  // V's three key tiles scaled by 1, 1000 and 1/1000: per block their scales differ by ~10^6, so
  // the kernel's acc *= rescale v_scale(j-1) / v_scale(j) before each tile and the final
  // v_scale(last) / (l p_scale) must be right to agree with the model (which multiplies the
  // dequantised values): a missing ratio puts tiles off by 10^3 to 10^6 against each other.
  const bool causal = GENERATE(false, true);
  const std::size_t d = 64, seq_k = 192;
  auto in = fa_test::make_inputs(1, 1, 70, seq_k, d, fa::default_scale(d), fa_test::Scores::normal, 42);
  const float factor[3] = {1.0f, 1000.0f, 1e-3f};
  for (std::size_t i = 0; i < in.V.values.size(); ++i) in.V.values[i] *= factor[i / (64 * d)];
  check_against_model(in.Q, in.K, in.V, {.causal = causal, .quant = ch10::Quant::block});
  // and P's scale is a parameter: a smaller one rounds P more coarsely, in the model and the kernel alike
  check_against_model(in.Q, in.K, in.V, {.causal = causal, .quant = ch10::Quant::block, .p_scale = 16.0f});
}

TEST_CASE("FP8: blocks whose rows see no key load no tile, and write zeros and -inf", "[ch10][fp8]") {
  if (const std::string why = fa_test::device_refusal(ch10::check_device); !why.empty()) FA_SKIP(why);
  // 300 x 30 causal: rows 0-269 see no key, so the first two blocks (rows 0-255) have no key tile
  // at all (the producer copies only Q_i, the transposers and the consumers' loop do nothing), and
  // the third one's first rows none either.
  const auto in = fa_test::make_inputs(1, 2, 300, 30, 64, fa::default_scale(64), fa_test::Scores::normal, 31);
  check_against_model(in.Q, in.K, in.V, {.causal = true, .quant = ch10::Quant::tensor, .hadamard = true});
}

TEST_CASE("the prepared FP8 launch (the GPU benchmark's) gives a run's O and L bit for bit", "[ch10][fp8]") {
  // ch10_gpu_bench --dtype e4m3 quantises once (prepare_hopper_fp8) and then times launches of the
  // attention kernel alone: the same kernels on the same values as a run, so the same bits, launch
  // after launch (the codes are kept; Q and K are not rotated again). On the CPU, in every build.
  const auto in = fa_test::make_inputs(1, 1, 70, 130, 64, fa::default_scale(64), fa_test::Scores::normal, 77);
  const ch10::Fp8Problem problem =
      ch10::check_fp8_problem(fa::check_attention_shapes(in.Q.shape, in.K.shape, in.V.shape),
                              {.causal = true, .quant = ch10::Quant::block, .hadamard = true});
  const ch10::Fp8Result run = ch10::cpu::run_hopper_fp8(in.Q, in.K, in.V, problem);
  simt::DeviceBuffer<float> q{std::span<const float>(in.Q.values)}, k{std::span<const float>(in.K.values)},
      v{std::span<const float>(in.V.values)};
  auto o = simt::poisoned<simt::bf16>(in.Q.values.size());
  auto l = simt::poisoned<float>(70);
  const ch10::Prepared launch =
      ch10::cpu::prepare_hopper_fp8(q.data(), k.data(), v.data(), o.data(), l.data(), problem);
  for (int time = 1; time <= 2; ++time) {
    INFO("launch " << time);
    launch(simt::LaunchMode::synchronous);
    CHECK(simt::to_host_float(o) == run.run.O.values);
    CHECK(l.to_host() == run.run.L);
    o.poison();
    l.poison();
  }
}

TEST_CASE("the bound catches a wrong order of the keys in P V", "[ch10][fp8]") {
  if (const std::string why = fa_test::device_refusal(ch10::check_device); !why.empty()) FA_SKIP(why);
  // The kernel pairs P's column k' (key pi(k')) with Vt's column k', into which the transpose
  // writes V_j's key pi(k') (hopper_fp8.cuh). Had it written the keys in their own order, column k'
  // would hold key k', and O would be sum_k' P[pi(k')] V[k']: the model's O on V whose key pi(k')
  // holds V's key k'. That O lies far outside the bound from the right one, so the kernel's check
  // against the model would fail.
  const std::size_t d = 64, seq_k = 128;
  const auto in = fa_test::make_inputs(1, 1, 64, seq_k, d, fa::default_scale(d), fa_test::Scores::normal, 77);
  const ch10::Fp8Options options{.quant = ch10::Quant::block};
  auto permuted = in.V;
  for (std::size_t key = 0; key < seq_k; ++key) {
    const std::size_t column = key % 16, t = column / 4, b = column % 4;
    const std::size_t pi = key - column + 2 * t + b % 2 + 8 * (b / 2);
    for (std::size_t c = 0; c < d; ++c) permuted.values[pi * d + c] = in.V.values[key * d + c];
  }
  const fp8::KernelModel right = model_of(in.Q, in.K, in.V, options);
  const fp8::KernelModel wrong = model_of(in.Q, in.K, permuted, options);
  const fa::ErrorStats err = fa::compare(wrong.O, right.O);
  INFO("O with the keys in the wrong order against the right one: " << fa::describe(err));
  CHECK(err.rel_l2 > 10 * ch10::kFp8ModelBound);
}

TEST_CASE("the FP8 front door refuses bad options and inputs before any work", "[ch10][fp8]") {
  if (const std::string why = fa_test::device_refusal(ch10::check_device); !why.empty()) FA_SKIP(why);
  const auto in = fa_test::make_inputs(1, 1, 8, 8, 64, 0.125, fa_test::Scores::normal, 1);
  fa_test::check_refused([&] { (void)ch10::fp8_attention(in.Q, in.K, in.V, {.p_scale = 512.0f}, kDevice); },
                         {"--p-scale 512", "power of two", "448"});
  fa_test::check_refused([&] { (void)ch10::fp8_attention(in.Q, in.K, in.V, {.p_scale = 3.0f}, kDevice); },
                         {"--p-scale 3", "power of two"});
  auto bad = in.K;
  bad.values[5] = std::numeric_limits<float>::infinity();
  fa_test::check_refused([&] { (void)ch10::fp8_attention(in.Q, bad, in.V, {}, kDevice); }, {"K[5]", "not finite"});
  const auto odd = fa_test::make_inputs(1, 1, 8, 8, 32, 0.125, fa_test::Scores::normal, 1);
  fa_test::check_refused([&] { (void)ch10::fp8_attention(odd.Q, odd.K, odd.V, {}, kDevice); }, {"head_dim 32"});
}
