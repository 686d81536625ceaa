// The command-line inputs of the attention demos (chapters 04 and later): either three .npy files
// (--q --k --v), or random tensors drawn from a seed (--batch --heads --seq-q --seq-k --head-dim
// --seed); plus --causal, --scale, --device and --out. Every value is checked when the flags are
// parsed (common/cli.h), and the files' headers and --out before any tensor is allocated.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "common/attention_shapes.h"
#include "common/device.h"
#include "common/memory.h"
#include "common/tensor.h"

namespace fa {

struct AttentionCli {
  std::string q_path, k_path, v_path;  // all three, or none
  std::string out_path;                // where to write O as .npy; empty: don't
  std::size_t batch = 1, heads = 2, seq_len_q = 256, seq_len_k = 256, head_dim = 64;
  std::uint64_t seed = 1;
  bool causal = false;
  std::optional<double> scale;
  std::string device;             // "cpu", "gpu" or empty (the GPU when there is one)
  bool accept_f16_files = false;  // set by a demo (chapter 06) whose kernel takes fp16: '<f2' files too
};

// Registers the flags above on app, writing into cli; --help shows each one's default.
void add_attention_flags(CLI::App& app, AttentionCli& cli);

// The problem this run will solve, before anything is allocated: the shapes from the .npy headers
// (read_npy_shape: the data is not read) or from the size flags. Also checks that --out can be
// written. Throws std::runtime_error for a file that cannot be read or written (the message names
// it) and std::invalid_argument when only some of --q --k --v are given or the shapes do not fit
// together (the message names the files).
AttentionShape plan_inputs(const AttentionCli& cli);

// Adds the inputs Q, K, V (float32, as loaded or drawn) to a memory plan.
void add_inputs(MemoryPlan& plan, const AttentionShape& shape);

struct AttentionProblem {
  Tensor4<float> Q, K, V;
  std::string origin;  // "q.npy, k.npy, v.npy" or "normal(0, 1), seed 1"
};

// Loads Q, K, V from the .npy files, or draws them normal(0, 1) from --seed. Throws as
// plan_inputs.
AttentionProblem load_or_draw(const AttentionCli& cli);

// The device from --device, or the default (fa::default_device()). Throws std::invalid_argument
// for an unknown name and std::runtime_error for gpu where none can be used.
Device chosen_device(const AttentionCli& cli);

}  // namespace fa
