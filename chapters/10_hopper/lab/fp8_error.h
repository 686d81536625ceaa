// FP8 attention's error, on the CPU: where it comes from, and what each of FlashAttention-3's two
// remedies removes. A model of the numerics, not of the kernel: the attention is computed from
// values rounded the way an FP8 kernel would round them, in float32, and compared with float64 on
// the inputs before any rounding.
//
// What an FP8 forward does to the numbers (Shah et al. 2024, FlashAttention-3, section 3.3), and
// the function here that does each step:
//   1. draw Q, K, V: N(0, 1), or N(0, 1) plus N(0, 10^2) on 0.1% of the entries      draw_inputs
//   2. (incoherent processing) Q M and K M, M = D H / sqrt(d): random signs D, then   hadamard_rows
//      the Walsh-Hadamard matrix H along head_dim; Q M (K M)^T = Q K^T since M M^T = I
//   3. (smooth K, SageAttention) K minus its mean over the tokens: every score of a    subtract_token_mean
//      row moves by the same q . mean(K), which softmax ignores
//   4. Q, K, V to e4m3 with a scale that maps the block's amax to 448 (one scale for   quantise_e4m3
//      the whole tensor, or one per 64 rows: the tile that the kernel loads)
//   5. S = Q K^T / sqrt(d) in float32; the online softmax over tiles of 64 keys;       attention_lowp
//      P = exp(S - m) * 256 to e4m3 (FA3's static scale), l summed before the
//      rounding; O += P V in float32 (or truncated to 14 fraction bits every 32 terms)
//   6. O's RMSE and max |error| against float64 on the unrounded inputs               compare_outputs
// A Recipe names which steps run; error_of() runs one recipe on one head and reports its error.
//
// Run it: build/default/bin/ch10_fp8_error (the table of docs/10-hopper.md, "FP8, on the CPU").
// Source: J. Shah et al., "FlashAttention-3", 2024, arXiv:2407.08608, section 3.3 (block
// quantisation, incoherent processing) and its numerical-error experiment; FA3's code,
// hopper/softmax.h (P scaled by 2^8 before the cast); J. Zhang et al., "SageAttention", 2024,
// arXiv:2410.02367 (smooth K); DeepSeek-AI, "DeepSeek-V3 Technical Report", 2024,
// arXiv:2412.19437, section 3.3.2 (about 14 bits kept by FP8 accumulation on H800).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace ch10::fp8 {

inline constexpr float kE4m3Max = 448.0f;      // e4m3's largest finite value (common/simt/instructions/fp8.h)
inline constexpr float kPScale = 256.0f;       // P = exp(S - m) * 2^8: FA3's Max_offset = 8
inline constexpr std::size_t kBlockRows = 64;  // rows of Q, K or V under one scale (the tile)
inline constexpr std::size_t kKeyTile = 64;    // keys per step of the online softmax (Bc)
inline constexpr std::size_t kMmaK = 32;       // the reduction depth of one FP8 wgmma (k32)
inline constexpr int kTruncatedBits = 14;      // fraction bits kept by --accumulate trunc14

enum class Inputs { normal, outliers };
enum class Element { f32, f16, bf16, e4m3 };
enum class Quant { tensor, block };
enum class Accumulate { f32, trunc14 };

// One head of attention: seq rows of head_dim values each, row-major, for each of Q, K, V.
struct Head {
  std::size_t seq = 0, head_dim = 0;
  std::vector<float> Q, K, V;
};

// Which of the steps above run: the element type of Q, K, V (and P), and for e4m3 its scales and
// the two remedies.
struct Recipe {
  std::string name;
  Element element = Element::e4m3;
  Quant quant = Quant::tensor;
  bool hadamard = false;
  bool smooth_k = false;
  // Which tensors are rounded (all, in the table; one at a time, for --parts: where the error
  // comes from). P not rounded stays float32.
  bool round_qk = true, round_v = true, round_p = true;
};

struct Error {
  double rmse = 0.0;     // sqrt(mean((O - O_ref)^2)) over every entry of O
  double max_abs = 0.0;  // max |O - O_ref|
};

// Step 1: n values N(0, 1); with Inputs::outliers, each value has, with probability 1/1000, an
// independent N(0, 10^2) added (the paper's N(0, 1) + N(0, 100) * Bernoulli(0.001)).
std::vector<float> draw_inputs(std::size_t n, std::uint64_t seed, Inputs inputs);
// Q, K and V of one head from three seeds derived from `seed`.
Head draw_head(std::size_t seq, std::size_t head_dim, std::uint64_t seed, Inputs inputs);

// d random signs, +1 or -1 with equal odds (the diagonal D of step 2).
std::vector<float> random_signs(std::size_t d, std::uint64_t seed);
// In place, x_i <- sum_j H_ij x_j along each row of d values (d a power of two): the fast
// Walsh-Hadamard transform, log2(d) passes of butterflies (a + b, a - b), unnormalised.
void walsh_hadamard_rows(std::span<float> x, std::size_t d);
// Step 2, each row x <- x D H / sqrt(d): orthogonal, so Q K^T is unchanged in exact arithmetic.
void hadamard_rows(std::span<float> x, std::size_t d, std::span<const float> signs);
// The inverse (the transpose), x <- x H D / sqrt(d): hadamard_rows then this gives x back.
void inverse_hadamard_rows(std::span<float> x, std::size_t d, std::span<const float> signs);

// Step 3: each column of the seq x d matrix minus its mean over the seq rows.
void subtract_token_mean(std::span<float> K, std::size_t d);

// The scale of step 4: amax / 448, so that x / scale reaches e4m3's largest value and no further
// (1 for a block of zeros).
float e4m3_scale(std::span<const float> x);
// x rounded to e4m3 with `scale` and back: scale * e4m3(x / scale), the value that the tensor core
// multiplies once the scale is applied to its result.
float through_e4m3(float x, float scale);
// Step 4 in place: every block of rows_per_block rows (of d values) through e4m3 with its own
// scale (the last block may be shorter). Quant::tensor is one block of all the rows.
void quantise_e4m3(std::span<float> x, std::size_t d, std::size_t rows_per_block);
// In place, every value rounded to bf16 or f16 (round to nearest even), as the kernels of chapters
// 06 and 10 take their inputs (Element::f32 leaves x as it is).
void round_to(std::span<float> x, Element element);

// x with all but the top `bits` fraction bits set to zero (toward zero; --accumulate trunc14).
float truncate_fraction(float x, int bits);

// One head's problem: Q [seq_q][head_dim], K and V [seq_k][head_dim]; the softmax scale; the
// bottom-right aligned causal mask (fa::visible_keys: row i sees keys below
// i - seq_q + 1 + seq_k); P's static scale before its cast to e4m3.
struct Problem {
  std::size_t seq_q = 0, seq_k = 0, head_dim = 0;
  bool causal = false;
  float scale = 0.0f;
  float p_scale = kPScale;
};
// O [seq_q][head_dim] and L [seq_q] (m + ln(l), natural log; -inf and O = 0 for a row that sees no key).
struct Attention {
  std::vector<float> O, L;
};

// Step 5: O from Q, K, V already rounded, in float32: tiles of kKeyTile keys, the running max m
// and sum l, P rounded to `p_element` (e4m3: e4m3(p p_scale) / p_scale), l summed before the
// rounding. The Head form: seq_q = seq_k = seq, scale 1/sqrt(d), no mask, p_scale kPScale.
Attention attention_lowp(std::span<const float> Q, std::span<const float> K, std::span<const float> V,
                         const Problem& problem, Element p_element, Accumulate accumulate);
std::vector<float> attention_lowp(const Head& rounded, Element p_element, Accumulate accumulate);
// O in float64 from the same inputs (the reference; two passes: max, then the weighted sum); the
// same mask; rows that see no key are zeros.
std::vector<double> attention_reference(std::span<const float> Q, std::span<const float> K, std::span<const float> V,
                                        const Problem& problem);
std::vector<double> attention_reference(const Head& head);

// The model of chapter 10's FP8 kernel (hopper_fp8.cuh) on batch_heads heads of Q, K, V
// ([batch_heads][seq][head_dim] float32, the unrounded inputs): per head, Q and K rotated with
// random_signs(head_dim, seed) (hadamard_rows) when `hadamard`, each of Q, K, V quantised per block
// of kBlockRows rows or per head (quantise_e4m3), then attention_lowp with P in e4m3, float32
// accumulation. Q, K, V: the values the kernel multiplies (scale x code); O, L of every head.
struct KernelModel {
  std::vector<float> Q, K, V, O, L;
};
KernelModel model_of_kernel(std::span<const float> Q, std::span<const float> K, std::span<const float> V,
                            std::size_t batch_heads, const Problem& head, Quant quant, bool hadamard,
                            std::uint64_t seed);
// attention_reference on every head: O in float64, [batch_heads][seq_q][head_dim].
std::vector<double> reference_of_heads(std::span<const float> Q, std::span<const float> K, std::span<const float> V,
                                       std::size_t batch_heads, const Problem& head);

// Step 6.
Error compare_outputs(std::span<const float> O, std::span<const double> reference);

// Steps 2-5 of `recipe` on one head (its copy), and step 6 against `reference`.
Error error_of(const Head& head, std::span<const double> reference, const Recipe& recipe, std::uint64_t seed,
               Accumulate accumulate);

// The table's rows, in order: fp16, bf16, then e4m3 per tensor, per block, each with Hadamard, and
// per block with smooth K, with and without Hadamard.
std::vector<Recipe> recipes();
// `recipe` with only Q and K, only V, or only P rounded (--parts), named so.
std::vector<Recipe> parts_of(const Recipe& recipe);

}  // namespace ch10::fp8
