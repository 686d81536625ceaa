// The inputs of the attention demos (common/program.h: fa::AttentionFlags).
#include <stdexcept>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "common/npy.h"
#include "common/profile_cli.h"
#include "common/program.h"
#include "common/random.h"
#include "common/simt/runtime/schedule.h"

namespace fa {

namespace {

// A file flag given an empty value ("--q ''") is refused rather than taken as absent.
CLI::Validator non_empty_path() {
  return CLI::Validator([](std::string& text) { return text.empty() ? std::string("the path is empty") : ""; }, "",
                        "file");
}

}  // namespace

void AttentionFlags::add_to(CLI::App& app) {
  auto* inputs = app.add_option_group(
      "inputs", accept_f16_files
                    ? "tensors from .npy files (float32 or float16, C order, [batch, heads, seq_len, head_dim])"
                    : "tensors from .npy files (float32, C order, [batch, heads, seq_len, head_dim])");
  inputs->add_option("--q", q_path, "Q as a .npy file")->check(non_empty_path())->default_str("none");
  inputs->add_option("--k", k_path, "K as a .npy file")->check(non_empty_path())->default_str("none");
  inputs->add_option("--v", v_path, "V as a .npy file")->check(non_empty_path())->default_str("none");
  cli::add_size(app, "--batch", batch, "batch size of the random inputs");
  cli::add_size(app, "--heads", heads, "heads of the random inputs");
  cli::add_size(app, "--seq-q", seq_len_q, "query rows of the random inputs");
  cli::add_size(app, "--seq-k", seq_len_k, "key rows of the random inputs");
  cli::add_size(app, "--head-dim", head_dim, "head_dim of the random inputs");
  cli::add_integer(app, "--seed", seed, "seed of the random inputs", 0);
  app.add_flag("--causal", causal, "causal mask: query i sees keys j <= i + seq_len_k - seq_len_q");
  cli::add_scale(app, "--scale", scale, "softmax scale");
  app.add_option("--device", device, "cpu or gpu")
      ->check(CLI::IsMember({"cpu", "gpu"}))
      ->default_str("gpu if there is one, else cpu");
  add_profile_flags(app, device);  // --profile, --profile-json and --racecheck (common/profile_cli.h)
}

namespace {

// 0, or 3 when all of --q --k --v are given. Throws std::invalid_argument for some but not all.
int given_files(const AttentionFlags& f) {
  const int given = !f.q_path.empty() + !f.k_path.empty() + !f.v_path.empty();
  if (given != 0 && given != 3) {
    throw std::invalid_argument("give all three of --q, --k and --v, or none of them (random inputs)");
  }
  return given;
}

std::string file_origin(const AttentionFlags& f) { return fmt::format("{}, {}, {}", f.q_path, f.k_path, f.v_path); }

AttentionShape checked_shapes(const Shape4& q, const Shape4& k, const Shape4& v, const std::string& origin) {
  try {
    return check_attention_shapes(q, k, v);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("{}: {}", origin, e.what()));
  }
}

}  // namespace

Device AttentionFlags::chosen_device() const {
  const Device d = device.empty() ? default_device() : parse_device(device);
  require_device(d);
  return d;
}

AttentionShape AttentionFlags::plan(Plan& plan) const {
  if (chosen_device() == Device::cpu) {
    // simt reads these at the first launch; a malformed one is refused now, before any work.
    (void)simt::current_schedule_choice();
    (void)simt::host_threads();
  }
  AttentionShape shape{batch, heads, seq_len_q, seq_len_k, head_dim};
  if (given_files(*this) == 3) {
    shape = checked_shapes(read_npy_shape(q_path, accept_f16_files), read_npy_shape(k_path, accept_f16_files),
                           read_npy_shape(v_path, accept_f16_files), file_origin(*this));
    plan.add_input("--q", q_path);
    plan.add_input("--k", k_path);
    plan.add_input("--v", v_path);
  }
  if (!profile_json_path().empty()) plan.add_output("--profile-json", profile_json_path());
  const AttentionCounts n = attention_counts(shape);
  plan.memory.add("Q, K, V (float32)", bytes_of(sizeof(float) * (n.q + 2 * n.k)));
  return shape;
}

AttentionFlags::Inputs AttentionFlags::load() const {
  if (given_files(*this) == 3) {
    auto read = [&](const std::string& path) {
      return accept_f16_files ? read_npy_f32_or_f16_4d(path) : read_npy_f32_4d(path);
    };
    Inputs in{read(q_path), read(k_path), read(v_path), file_origin(*this)};
    checked_shapes(in.Q.shape, in.K.shape, in.V.shape, in.origin);
    return in;
  }
  const Shape4 q{batch, heads, seq_len_q, head_dim};
  const Shape4 k{batch, heads, seq_len_k, head_dim};
  return {Tensor4<float>(q, normal<float>(q.size(), seed)), Tensor4<float>(k, normal<float>(k.size(), seed + 1)),
          Tensor4<float>(k, normal<float>(k.size(), seed + 2)), fmt::format("normal(0, 1), seed {}", seed)};
}

std::string AttentionFlags::describe(const Inputs& in, Device run_on) const {
  return fmt::format("Q {}, K and V with seq_len {}{}; inputs: {}; device: {}", in.Q.shape.str(), in.K.shape.seq_len,
                     causal ? ", causal" : "", in.origin, to_string(run_on));
}

}  // namespace fa
