#include "common/attention_cli.h"

#include <stdexcept>

#include <fmt/format.h>

#include "common/cli.h"
#include "common/npy.h"
#include "common/random.h"

namespace fa {

void add_attention_flags(CLI::App& app, AttentionCli& cli) {
  auto* inputs = app.add_option_group(
      "inputs", cli.accept_f16_files
                    ? "tensors from .npy files (float32 or float16, C order, [batch, heads, seq_len, head_dim])"
                    : "tensors from .npy files (float32, C order, [batch, heads, seq_len, head_dim])");
  inputs->add_option("--q", cli.q_path, "Q as a .npy file")->default_str("none");
  inputs->add_option("--k", cli.k_path, "K as a .npy file")->default_str("none");
  inputs->add_option("--v", cli.v_path, "V as a .npy file")->default_str("none");
  app.add_option("--out", cli.out_path, "write O to this .npy file (replaced whole or not at all)")
      ->default_str("none");
  cli::add_size(app, "--batch", cli.batch, "batch size of the random inputs");
  cli::add_size(app, "--heads", cli.heads, "heads of the random inputs");
  cli::add_size(app, "--seq-q", cli.seq_len_q, "query rows of the random inputs");
  cli::add_size(app, "--seq-k", cli.seq_len_k, "key rows of the random inputs");
  cli::add_size(app, "--head-dim", cli.head_dim, "head_dim of the random inputs");
  cli::add_integer(app, "--seed", cli.seed, "seed of the random inputs", 0);
  app.add_flag("--causal", cli.causal, "causal mask: query i sees keys j <= i + seq_len_k - seq_len_q");
  cli::add_scale(app, "--scale", cli.scale, "softmax scale");
  app.add_option("--device", cli.device, "cpu or gpu")
      ->check(CLI::IsMember({"cpu", "gpu"}))
      ->default_str("gpu if there is one, else cpu");
}

namespace {

// 0, or 3 when all of --q --k --v are given. Throws std::invalid_argument for some but not all.
int given_files(const AttentionCli& cli) {
  const int given = !cli.q_path.empty() + !cli.k_path.empty() + !cli.v_path.empty();
  if (given != 0 && given != 3) {
    throw std::invalid_argument("give all three of --q, --k and --v, or none of them (random inputs)");
  }
  return given;
}

std::string file_origin(const AttentionCli& cli) {
  return fmt::format("{}, {}, {}", cli.q_path, cli.k_path, cli.v_path);
}

AttentionShape checked_shapes(const Shape4& q, const Shape4& k, const Shape4& v, const std::string& origin) {
  try {
    return check_attention_shapes(q, k, v);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("{}: {}", origin, e.what()));
  }
}

}  // namespace

AttentionShape plan_inputs(const AttentionCli& cli) {
  if (!cli.out_path.empty()) check_output_path(cli.out_path);
  if (given_files(cli) == 3) {
    const bool f16 = cli.accept_f16_files;
    return checked_shapes(read_npy_shape(cli.q_path, f16), read_npy_shape(cli.k_path, f16),
                          read_npy_shape(cli.v_path, f16), file_origin(cli));
  }
  return {cli.batch, cli.heads, cli.seq_len_q, cli.seq_len_k, cli.head_dim};
}

void add_inputs(MemoryPlan& plan, const AttentionShape& s) {
  const std::uint64_t q = saturating_mul(saturating_mul(s.batch, s.heads), saturating_mul(s.seq_len_q, s.head_dim));
  const std::uint64_t k = saturating_mul(saturating_mul(s.batch, s.heads), saturating_mul(s.seq_len_k, s.head_dim));
  plan.add("Q, K, V (float32)", saturating_mul(sizeof(float), saturating_add(q, saturating_mul(2, k))));
}

AttentionProblem load_or_draw(const AttentionCli& cli) {
  if (given_files(cli) == 3) {
    auto read = [&](const std::string& path) {
      return cli.accept_f16_files ? read_npy_f32_or_f16_4d(path) : read_npy_f32_4d(path);
    };
    AttentionProblem p{read(cli.q_path), read(cli.k_path), read(cli.v_path), file_origin(cli)};
    checked_shapes(p.Q.shape, p.K.shape, p.V.shape, p.origin);
    return p;
  }
  const Shape4 q{cli.batch, cli.heads, cli.seq_len_q, cli.head_dim};
  const Shape4 k{cli.batch, cli.heads, cli.seq_len_k, cli.head_dim};
  return {Tensor4<float>(q, normal<float>(q.size(), cli.seed)),
          Tensor4<float>(k, normal<float>(k.size(), cli.seed + 1)),
          Tensor4<float>(k, normal<float>(k.size(), cli.seed + 2)), fmt::format("normal(0, 1), seed {}", cli.seed)};
}

Device chosen_device(const AttentionCli& cli) {
  const Device d = cli.device.empty() ? default_device() : parse_device(cli.device);
  require_device(d);
  return d;
}

}  // namespace fa
