// Test inputs for the attention chapters (04, 05): Q, K, V drawn from common/random.h so that the
// scores land where a case wants them. Each tensor of a case gets its own seed.
#pragma once

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "catch.h"
#include "common/device.h"
#include "common/program.h"
#include "common/random.h"
#include "common/tensor.h"

namespace fa_test {

// Where the chapter 04 and 05 tests run their kernels: each test source is built twice, plain (the
// CPU, through common/simt) and with FA_TEST_ON_GPU (the GPU; SKIPPED where there is none).
#if FA_TEST_ON_GPU
inline constexpr fa::Device kDevice = fa::Device::gpu;
#else
inline constexpr fa::Device kDevice = fa::Device::cpu;
#endif

// Why this machine's GPU cannot run a chapter's kernel, in the GPU build of its tests: what `check`
// (the chapter's check_device, e.g. ch10::check_device: a Hopper only) throws for Device::gpu; ""
// where it can, and always in the CPU build. A test case then skips, naming the reason:
//   if (const std::string why = fa_test::device_refusal(ch10::check_device); !why.empty()) FA_SKIP(why);
template <class Check>
std::string device_refusal(Check check) {
  if (kDevice == fa::Device::cpu) return "";
  try {
    check(kDevice);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

// cudaDevAttrMaxSharedMemoryPerBlockOptin of three GPUs, bytes (CUDA C++ Programming Guide,
// technical specifications per compute capability): a T4 (7.5: 64 KiB), an A100 (8.0: 163 KiB) and
// an H100 (9.0: 227 KiB); what the tests of a chapter's choice of tile (fa::fit_tile) give it.
inline constexpr std::size_t kT4SharedBytes = 65536, kA100SharedBytes = 166912, kH100SharedBytes = 232448;

// The tiles of `tiles` that the device of these tests can hold: every one on the CPU (no limit of
// shared memory there: common/simt/runtime/launch_cpu.h); on a GPU those whose shared memory per block
// (`bytes`, the chapter's formula) fits what it gives a block (fa::gpu_shared_bytes_per_block:
// 64 KiB on a T4). Each one left out is named in a warning with its bytes and the GPU's limit, so a
// T4 runs the tiles it holds and says which it cannot, instead of failing at their launch.
inline std::vector<fa::Tile> tiles_that_fit(const std::vector<fa::Tile>& tiles, const fa::SharedBytes& bytes) {
  if (kDevice == fa::Device::cpu) return tiles;
  const std::size_t limit = fa::gpu_shared_bytes_per_block();
  std::vector<fa::Tile> fit;
  for (const fa::Tile& tile : tiles) {
    if (bytes(tile) <= limit) {
      fit.push_back(tile);
    } else {
      WARN("tile " << fa::tile_name(tile) << " left out: it needs " << bytes(tile)
                   << " bytes of shared memory per block, and this GPU gives a block " << limit);
    }
  }
  return fit;
}

enum class Scores {
  normal,    // Q, K, V ~ normal(0, 1): scores of order 1 with the default scale
  large,     // scores of spread ~50 (Q, K scaled up): exp() of the raw scores would overflow float
  very_low,  // every score below -100: exp() of the raw scores underflows to 0 in float
};

inline std::string to_string(Scores s) {
  constexpr const char* kNames[] = {"normal", "large", "very_low"};  // in the order of Scores
  return kNames[static_cast<int>(s)];
}

// The (seq_len_q, seq_len_k) pairs the attention chapters' tests run (the shape list; 1000
// has test cases of its own). Under a sanitizer (FA_SANITIZER_BUILD), where every memory access is
// checked and a run takes 10 to 50 times longer, a subset that still holds a single query, a
// decoding query against a ragged key tile, partial tiles, and rows on both sides of a bottom-right
// causal diagonal (including rows that see no key).
// The short list: what the sanitizer builds run, and what simt's race checker runs in every build
// (tests/racecheck_support.h).
inline std::vector<std::pair<std::size_t, std::size_t>> short_sequence_lengths() {
  return {{1, 1}, {1, 257}, {33, 33}, {113, 203}, {203, 113}};
}

inline std::vector<std::pair<std::size_t, std::size_t>> sequence_lengths() {
#if FA_SANITIZER_BUILD
  return short_sequence_lengths();
#else
  return {{1, 1}, {1, 257}, {2, 2}, {31, 31}, {32, 32}, {33, 33}, {64, 64}, {113, 203}, {203, 113}, {256, 256}};
#endif
}

// The batch and heads of the chapters' agreement cases: 2 x 3, so that a wrong batch or head index
// shows in the numbers. Under a sanitizer 1 x 2: what a sanitizer looks for (a read out of bounds,
// a race) does not depend on which batch or head a block works on, and chapter 04's naive kernels,
// which chapter 05's tests run as their reference, start a thread per score, each a fiber that
// ThreadSanitizer follows: chapter 05's test took 17 minutes under it with 2 x 3.
inline constexpr std::size_t kCaseBatch = FA_SANITIZER_BUILD ? 1 : 2;
inline constexpr std::size_t kCaseHeads = FA_SANITIZER_BUILD ? 2 : 3;

struct AttentionInputs {
  fa::Tensor4<float> Q, K, V;
};

// Q: [batch, heads, seq_len_q, head_dim]; K, V: [batch, heads, seq_len_k, head_dim].
inline AttentionInputs make_inputs(std::size_t batch, std::size_t heads, std::size_t seq_len_q, std::size_t seq_len_k,
                                   std::size_t head_dim, double scale, Scores kind, std::uint64_t seed) {
  const fa::Shape4 q_shape{batch, heads, seq_len_q, head_dim};
  const fa::Shape4 k_shape{batch, heads, seq_len_k, head_dim};
  AttentionInputs in{fa::Tensor4<float>(q_shape, fa::normal<float>(q_shape.size(), seed)),
                     fa::Tensor4<float>(k_shape, fa::normal<float>(k_shape.size(), seed + 1)),
                     fa::Tensor4<float>(k_shape, fa::normal<float>(k_shape.size(), seed + 2))};
  // A score is scale * sum_d q_d k_d; with q, k ~ normal(0, a^2) its spread is a^2 sqrt(d) scale.
  const double spread_per_unit = std::sqrt(static_cast<double>(head_dim)) * std::fabs(scale);
  if (kind == Scores::large) {
    const auto a = static_cast<float>(std::sqrt(50.0 / spread_per_unit));
    for (float& x : in.Q.values) x *= a;
    for (float& x : in.K.values) x *= a;
  } else if (kind == Scores::very_low) {
    // q = c + noise, k = -c + noise: every score is about -c^2 d scale = -150, give or take a few.
    const auto c = static_cast<float>(std::sqrt(150.0 / (static_cast<double>(head_dim) * std::fabs(scale))));
    for (float& x : in.Q.values) x = c + 0.25f * x;
    for (float& x : in.K.values) x = -c + 0.25f * x;
  }
  return in;
}

// f() must throw std::invalid_argument with a message that holds every one of `parts` (e.g. the
// value refused and the values accepted).
template <class F>
void check_refused(F&& f, std::initializer_list<std::string_view> parts) {
  const std::string message = message_of<std::invalid_argument>(f);
  INFO(message);
  CHECK(!message.empty());
  for (std::string_view part : parts) CHECK(message.find(part) != std::string::npos);
}

// The rows that see no key under the bottom-right causal mask, where seq_len_q > seq_len_k: rows
// i < seq_len_q - seq_len_k give O = 0 and L = -inf; every other row's L is finite; nothing is NaN.
// O: [batch, heads, seq_len_q, head_dim]; L: [batch, heads, seq_len_q]. `what` names the run.
inline void check_rows_that_see_no_key(const fa::Tensor4<float>& O, std::span<const float> L, std::size_t seq_len_k,
                                       const std::string& what) {
  const fa::Shape4 s = O.shape;
  const auto view = O.view();
  for (std::size_t b = 0; b < s.batch; ++b) {
    for (std::size_t h = 0; h < s.heads; ++h) {
      for (std::size_t i = 0; i < s.seq_len; ++i) {
        const float L_row = L[(b * s.heads + h) * s.seq_len + i];
        const bool sees_none = i + seq_len_k < s.seq_len;
        INFO(what << ", batch " << b << " head " << h << " row " << i << ": L = " << L_row);
        REQUIRE(!std::isnan(L_row));
        REQUIRE((sees_none ? L_row == -std::numeric_limits<float>::infinity() : std::isfinite(L_row)));
        for (std::size_t d = 0; d < s.head_dim; ++d) {
          REQUIRE(!std::isnan(view(b, h, i, d)));
          if (sees_none) REQUIRE(view(b, h, i, d) == 0.0f);
        }
      }
    }
  }
}

}  // namespace fa_test
