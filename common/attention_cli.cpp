#include "common/attention_cli.h"

#include <stdexcept>

#include <fmt/format.h>

#include "common/attention_shapes.h"
#include "common/npy.h"
#include "common/random.h"

namespace fa {

void add_attention_flags(CLI::App& app, AttentionCli& cli) {
  auto* inputs = app.add_option_group(
      "inputs", cli.accept_f16_files ? "tensors from .npy files (float32 or float16, C order, [batch, heads, seq_len, head_dim])"
                                     : "tensors from .npy files (float32, C order, [batch, heads, seq_len, head_dim])");
  inputs->add_option("--q", cli.q_path, "Q as a .npy file");
  inputs->add_option("--k", cli.k_path, "K as a .npy file");
  inputs->add_option("--v", cli.v_path, "V as a .npy file");
  app.add_option("--out", cli.out_path, "write O to this .npy file");
  app.add_option("--batch", cli.batch, "batch size of the random inputs")->check(CLI::PositiveNumber);
  app.add_option("--heads", cli.heads, "heads of the random inputs")->check(CLI::PositiveNumber);
  app.add_option("--seq-q", cli.seq_len_q, "query rows of the random inputs")->check(CLI::PositiveNumber);
  app.add_option("--seq-k", cli.seq_len_k, "key rows of the random inputs")->check(CLI::PositiveNumber);
  app.add_option("--head-dim", cli.head_dim, "head_dim of the random inputs")->check(CLI::PositiveNumber);
  app.add_option("--seed", cli.seed, "seed of the random inputs");
  app.add_flag("--causal", cli.causal, "causal mask: query i sees keys j <= i + seq_len_k - seq_len_q");
  app.add_option("--scale", cli.scale, "softmax scale (default 1/sqrt(head_dim))");
  app.add_option("--device", cli.device, "cpu or gpu (default: gpu if present, else cpu)")
      ->check(CLI::IsMember({"cpu", "gpu"}));
}

AttentionProblem load_or_draw(const AttentionCli& cli) {
  const int given = !cli.q_path.empty() + !cli.k_path.empty() + !cli.v_path.empty();
  if (given == 3) {
    auto read = [&](const std::string& path) {
      return cli.accept_f16_files ? read_npy_f32_or_f16_4d(path) : read_npy_f32_4d(path);
    };
    AttentionProblem p{read(cli.q_path), read(cli.k_path), read(cli.v_path),
                       fmt::format("{}, {}, {}", cli.q_path, cli.k_path, cli.v_path)};
    try {
      check_attention_shapes(p.Q.shape, p.K.shape, p.V.shape);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(fmt::format("{}: {}", p.origin, e.what()));
    }
    return p;
  }
  if (given != 0) {
    throw std::invalid_argument("give all three of --q, --k and --v, or none of them (random inputs)");
  }
  const Shape4 q{cli.batch, cli.heads, cli.seq_len_q, cli.head_dim};
  const Shape4 k{cli.batch, cli.heads, cli.seq_len_k, cli.head_dim};
  return {Tensor4<float>(q, normal<float>(q.size(), cli.seed)),
          Tensor4<float>(k, normal<float>(k.size(), cli.seed + 1)),
          Tensor4<float>(k, normal<float>(k.size(), cli.seed + 2)),
          fmt::format("normal(0, 1), seed {}", cli.seed)};
}

Device chosen_device(const AttentionCli& cli) {
  const Device d = cli.device.empty() ? default_device() : parse_device(cli.device);
  require_device(d);
  return d;
}

}  // namespace fa
