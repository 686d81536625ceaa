// ch08_decoding: attention at inference time, checked against chapter 05 (float32 cache) or chapter
// 06 (bf16, fp16) on the dense problem each sequence is equivalent to.
//
//   ch08_decoding                                     3 sequences, GQA 4:1, a paged cache, the GPU if there is one
//   ch08_decoding --device cpu --cache-seqlens 5,700,33 --page-size 16 --splits 7
//   ch08_decoding --heads 8 --kv-heads 1 --seq-q 4 --causal --dtype bf16      MQA, 4 new tokens each
//   ch08_decoding --steps 16                          the decode loop against chapter 05's causal forward
//   ch08_decoding --q q.npy --k k.npy --v v.npy --out o.npy    Q [b, h, s_q, d]; K, V [b, kv_h, s_k, d]
//   ch08_decoding --device cpu --batch 1 --seq-k 300 --profile      the bytes, measured beside the model
//
// What the run shows: the cache (its pages, shuffled in the pool, and the block table), the split
// count and why, the time, and each sequence's agreement with the chapter before.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include "chapters/05_flash_attention_2/flash_attention_2.h"
#include "chapters/06_tensor_cores/lab/error_budget.h"
#include "chapters/06_tensor_cores/tensor_cores.h"
#include "chapters/08_decoding/decoding.h"
#include "chapters/08_decoding/lab/profile_report.h"
#include "chapters/08_decoding/lab/traffic_model.h"
#include "chapters/08_decoding/lab/vs_dense.h"
#include "common/npy.h"
#include "common/profile_cli.h"
#include "common/program.h"
#include "common/random.h"
#include "common/simt/runtime/progress.h"
#include "common/simt/runtime/schedule.h"

namespace {

// The shapes of this run, before anything is read or drawn: Q [batch, heads, seq_len_q, head_dim]
// and the dense K, V [batch, kv_heads, seq_len_k, head_dim].
struct Shapes {
  fa::Shape4 q, kv;
};

// From the .npy headers (--q --k --v: all three or none; the data is not read) or from the size
// flags; with --steps the queries are one per token (seq_len_q = seq_len_k). The files go into the
// plan as inputs (no output may be one of them). Throws std::invalid_argument (naming the flags or
// the files) for shapes that do not fit together, std::runtime_error for a file that cannot be read.
// (fa::AttentionFlags::plan takes K and V with Q's heads; here they have kv_heads.)
Shapes plan_shapes(const fa::AttentionFlags& flags, std::uint64_t kv_heads, std::uint64_t steps, fa::Plan& plan) {
  const int files = !flags.q_path.empty() + !flags.k_path.empty() + !flags.v_path.empty();
  if (files == 0) {
    // (before anything the size of the batch is made: the grid's y is batch x kv_heads)
    if (flags.batch * kv_heads > fa::kMaxBatchHeads) {
      throw std::invalid_argument(
          fmt::format("--batch {} x --kv-heads {} is more than the {} blocks of one K/V head each that the grid allows",
                      flags.batch, kv_heads, fa::kMaxBatchHeads));
    }
    if (flags.heads % kv_heads != 0) {
      throw std::invalid_argument(fmt::format(
          "--kv-heads {}: --heads {} is not a multiple of it; query head h reads K/V head h / (heads / kv_heads), so "
          "give kv_heads that divides heads",
          kv_heads, flags.heads));
    }
    return {{flags.batch, flags.heads, steps > 0 ? flags.seq_len_k : flags.seq_len_q, flags.head_dim},
            {flags.batch, kv_heads, flags.seq_len_k, flags.head_dim}};
  }
  if (files != 3) throw std::invalid_argument("give all three of --q, --k and --v, or none of them (random inputs)");
  const Shapes s{fa::read_npy_shape(flags.q_path, true), fa::read_npy_shape(flags.k_path, true)};
  const fa::Shape4 v = fa::read_npy_shape(flags.v_path, true);
  const std::string names = fmt::format("{}, {}, {}", flags.q_path, flags.k_path, flags.v_path);
  if (s.kv != v || s.q.size() == 0 || s.kv.size() == 0) {
    throw std::invalid_argument(
        fmt::format("{}: K {} and V {} must have one shape, [batch, kv_heads, seq_len_k, "
                    "head_dim], and Q {} [batch, heads, seq_len_q, head_dim]; none of it 0",
                    names, s.kv.str(), v.str(), s.q.str()));
  }
  if (s.q.batch != s.kv.batch || s.q.head_dim != s.kv.head_dim || s.q.heads % s.kv.heads != 0) {
    throw std::invalid_argument(
        fmt::format("{}: Q {} and K {}: batch and head_dim must be equal, and heads a multiple of kv_heads", names,
                    s.q.str(), s.kv.str()));
  }
  if (s.q.batch * s.kv.heads > fa::kMaxBatchHeads) {
    throw std::invalid_argument(fmt::format("{}: batch {} x kv_heads {} is more than the {} the grid allows", names,
                                            s.q.batch, s.kv.heads, fa::kMaxBatchHeads));
  }
  if (steps > 0 && s.q.seq_len != s.kv.seq_len) {
    throw std::invalid_argument(fmt::format("--steps with {}: Q needs a query per token, seq_len {} as K, not {}",
                                            names, s.kv.seq_len, s.q.seq_len));
  }
  plan.add_input("--q", flags.q_path);
  plan.add_input("--k", flags.k_path);
  plan.add_input("--v", flags.v_path);
  return s;
}

// --cache-seqlens "5,700,33": one length per sequence, each 0 .. seq_len_k; empty: seq_len_k each.
std::vector<int> parse_lengths(const std::string& text, const fa::Shape4& kv) {
  if (text.empty()) return std::vector<int>(kv.batch, static_cast<int>(kv.seq_len));
  std::vector<int> lengths;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const std::optional<std::uint64_t> value = fa::cli::parse_integer(item, 0, kv.seq_len);
    if (!value) {
      throw std::invalid_argument(fmt::format(
          "--cache-seqlens {}: item {} ('{}') is not accepted; give one length per sequence, each 0 .. seq_k = {}",
          text, lengths.size() + 1, item, kv.seq_len));
    }
    lengths.push_back(static_cast<int>(*value));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (lengths.size() != kv.batch) {
    throw std::invalid_argument(fmt::format("--cache-seqlens {}: {} length{} for a batch of {}; give one per sequence",
                                            text, lengths.size(), lengths.size() == 1 ? "" : "s", kv.batch));
  }
  return lengths;
}

// The inputs, from the files or drawn normal(0, 1) from --seed (Q, K and V each their own seed).
fa::AttentionFlags::Inputs load_or_draw(const fa::AttentionFlags& flags, const Shapes& s) {
  if (!flags.q_path.empty()) {
    return {fa::read_npy_f32_or_f16_4d(flags.q_path), fa::read_npy_f32_or_f16_4d(flags.k_path),
            fa::read_npy_f32_or_f16_4d(flags.v_path),
            fmt::format("{}, {}, {}", flags.q_path, flags.k_path, flags.v_path)};
  }
  return {fa::Tensor4<float>(s.q, fa::normal<float>(s.q.size(), flags.seed)),
          fa::Tensor4<float>(s.kv, fa::normal<float>(s.kv.size(), flags.seed + 1)),
          fa::Tensor4<float>(s.kv, fa::normal<float>(s.kv.size(), flags.seed + 2)),
          fmt::format("normal(0, 1), seed {}", flags.seed)};
}

// A rough rate of the CPU path, for the estimate of a long run only: chapter 05's kernel through
// common/simt on a 2-core laptop (ch05_flash_attention_2's figure), which the check runs on every
// sequence and which does most of the work.
constexpr double kFlopsPerSecond = 1e9;

// The floating-point operations of a run, roughly: the decoding kernel's two products over each
// sequence's keys, and chapter 05's (or 06's) on its dense equivalent, whose blocks compute 64 query
// rows however few of them are real; with --steps, the steps and chapter 05's causal forward over
// the whole sequences. Never throws.
double run_flops(const Shapes& s, const std::vector<int>& lengths, std::uint64_t steps) {
  const double per_key_and_row = 4.0 * static_cast<double>(s.q.heads) * static_cast<double>(s.q.head_dim);
  const double n = static_cast<double>(s.kv.seq_len);
  if (steps > 0) {
    return per_key_and_row * static_cast<double>(s.q.batch) * (static_cast<double>(steps) * n + n * n / 2);
  }
  const double rows = static_cast<double>(s.q.seq_len) + 64.0 * std::ceil(static_cast<double>(s.q.seq_len) / 64.0);
  double keys = 0;
  for (int len : lengths) keys += len;
  return per_key_and_row * rows * keys;
}

// One line per sequence of the agreement, then the summary's fields.
void print_agreement(const ch08::Agreement& a) {
  fmt::print("\n  sequence   keys   O rel L2 vs {:<11}  bound      |L - L_ref|, worst row  bound      result\n",
             a.against);
  for (const ch08::SequenceCheck& s : a.sequences) {
    const std::string nonfinite = fa::nonfinite_report(s.O);
    fmt::print("  {:>8} {:>6}   {:<23.2g}  {:<9.2g}  {:<22.2g}  {:<9.2g}  {}{}\n", s.sequence, s.length, s.O.rel_l2,
               s.O_bound, s.L_error, s.L_bound,
               s.pass                        ? "ok"
               : !fa::within(s.O, s.O_bound) ? "OUTSIDE (O)"  // the check that failed: O, else L
                                             : "OUTSIDE (L)",
               nonfinite.empty() ? "" : " (" + nonfinite + ")");
  }
}

// The verdict of a run that `agreement` checked, with the figures of its worst sequence (named when
// `name_sequence`, for a batch of sequences); `checked` says what was compared with what. FAIL
// where any sequence is outside its bounds or the output holds NaN or inf from finite inputs (fa::report_nonfinite).
fa::Check verdict(std::string checked, const ch08::Agreement& agreement, bool name_sequence, bool overflowed) {
  const ch08::SequenceCheck& w = agreement.worst();
  return {"08", std::move(checked),
          fmt::format("{}, L {:.2g}{}", fa::error_field("O", w.O), w.L_error,
                      name_sequence ? fmt::format(" (sequence {})", w.sequence) : ""),
          fmt::format("{}, {}", fa::bound_text(w.O_bound), fa::bound_text(w.L_bound, "{:.1e}")),
          agreement.pass() && !overflowed};
}

}  // namespace

int main(int argc, char** argv) {
  fa::Program program(8,
                      "Chapter 08: attention at inference time: split-KV decoding (Flash-Decoding), grouped-query "
                      "heads, a paged KV cache, sequences of different lengths, checked against chapter 05 (float32) "
                      "or 06 (bf16, fp16).");
  CLI::App& app = program.app();
  // The default problem: 3 sequences of 700 keys, 8 query heads on 2 K/V heads, one new token.
  fa::AttentionFlags flags{
      .batch = 3, .heads = 8, .seq_len_q = 1, .seq_len_k = 700, .head_dim = 64, .accept_f16_files = true};
  flags.add_to(app);
  fa::Output& out = program.add_output("--out", "O");
  std::uint64_t kv_heads = 2;
  fa::cli::add_size(app, "--kv-heads", kv_heads, "K/V heads of the random inputs (heads must be a multiple of it)");
  std::string lengths_text;
  auto* lengths_option =
      app.add_option("--cache-seqlens", lengths_text, "keys each sequence holds, one per sequence, e.g. 5,700,33")
          ->default_str("seq-k each");
  std::uint64_t page_size = 48;
  fa::cli::add_integer(app, "--page-size", page_size,
                       "rows per page of the paged cache, any size from 1 (0: the dense cache, no table)", 0,
                       std::numeric_limits<int>::max());
  std::uint64_t splits = 0;
  fa::cli::add_integer(app, "--splits", splits, "chunks of each sequence's keys, one block each", 1, ch08::kMaxSplits)
      ->default_str("automatic (FlashAttention-2's rule, see --sms)");
  std::uint64_t sms = ch08::kDefaultSms;
  fa::cli::add_integer(app, "--sms", sms, "the GPU's SMs, which the automatic split count fills (132: an H200)", 1,
                       1u << 20);
  std::string dtype_text = "float32";
  app.add_option("--dtype", dtype_text, "the cache's element type (sums are float32 in every case)")
      ->check(CLI::IsMember({"float32", "bf16", "fp16"}))
      ->capture_default_str();
  std::string tile_text;
  app.add_option("--tile", tile_text,
                 "Br x Bc: query rows per block x keys per tile, " + fa::tile_list(ch08::kCompiledFloat32))
      ->default_str("the smallest Br that holds a K/V head's rows (on a GPU, one its shared memory holds)");
  std::uint64_t steps = 0;
  auto* steps_option = fa::cli::add_integer(
      app, "--steps", steps,
      "the decode loop: append the last T tokens to the cache one at a time, decode each, and compare with chapter "
      "05's causal forward",
      1, std::numeric_limits<int>::max());
  steps_option->default_str("none")->excludes(lengths_option)->excludes(app.get_option("--seq-q"));

  try {
    program.parse(argc, argv);

    // Everything this run needs, checked before anything is allocated or printed.
    const ch08::CacheType type = ch08::parse_cache_type(dtype_text);
    const std::optional<fa::Tile> tile =
        tile_text.empty() ? std::nullopt : std::optional<fa::Tile>(fa::parse_tile(tile_text, ch08::kCompiledFloat32));
    const fa::Device device = flags.chosen_device();
    fa::Plan checks;
    // What fa::AttentionFlags::plan checks beside the shapes (which here it cannot plan: K and V have
    // kv_heads heads, not Q's): simt's settings, read at the first launch, and the --profile-json file.
    if (device == fa::Device::cpu) {
      (void)simt::current_schedule_choice();
      (void)simt::host_threads();
    }
    if (!fa::profile_json_path().empty()) checks.add_output("--profile-json", fa::profile_json_path());
    const Shapes shapes = plan_shapes(flags, kv_heads, steps, checks);
    if (steps > shapes.kv.seq_len) {
      throw std::invalid_argument(fmt::format("--steps {}: the sequences hold {} tokens (--seq-k); give 1 .. {}", steps,
                                              shapes.kv.seq_len, shapes.kv.seq_len));
    }
    const std::vector<int> lengths =
        steps > 0 ? std::vector<int>(shapes.kv.batch, static_cast<int>(shapes.kv.seq_len - steps + 1))
                  : parse_lengths(lengths_text, shapes.kv);
    const ch08::Options options{flags.scale,
                                flags.causal,
                                type,
                                splits == 0 ? std::nullopt : std::optional<int>(static_cast<int>(splits)),
                                static_cast<int>(sms),
                                tile};
    // The queries of one launch: all of Q, or one token per sequence in the decode loop.
    const fa::Shape4 q_step = steps > 0 ? fa::Shape4{shapes.q.batch, shapes.q.heads, 1, shapes.q.head_dim} : shapes.q;
    const ch08::Plan plan =
        ch08::check_problem(q_step, ch08::cache_layout(shapes.kv, page_size, lengths), options, device);
    // The references must take the dense problems too (chapter 06: head_dim 64 and 128, as here). One
    // sequence's dense problem at a time (the decode loop: all of them at once), K and V repeated per head.
    const fa::AttentionShape dense{steps > 0 ? shapes.q.batch : 1, shapes.q.heads, shapes.q.seq_len, shapes.kv.seq_len,
                                   shapes.q.head_dim};
    const bool against_05 = type == ch08::CacheType::float32 || steps > 0;
    if (against_05) {
      (void)ch05::check_problem(dense, {flags.scale, flags.causal || steps > 0});
    } else {
      (void)ch06::check_problem(dense, {.scale = flags.scale, .causal = flags.causal});
    }
    using fa::saturating_mul;
    checks.memory.add("Q, K, V (float32)", saturating_mul(sizeof(float), shapes.q.size() + 2 * shapes.kv.size()));
    const fa::Shape4 pool = ch08::cache_layout(shapes.kv, page_size, lengths).pool;
    checks.memory.add("the cache's pools (float32)",
                      saturating_mul(2 * sizeof(float), saturating_mul(saturating_mul(pool.batch, pool.heads),
                                                                       saturating_mul(pool.seq_len, pool.head_dim))));
    checks.memory.add("the kernels (Q, the pools, the partials, O, L)", ch08::memory_needed(plan.problem));
    checks.memory.add("the dense reference", saturating_mul(2, ch05::memory_needed(dense)));
    program.check(checks);
    // The inputs; a value the cache's 16-bit type cannot hold is refused here, before the banner.
    const fa::AttentionFlags::Inputs in = load_or_draw(flags, shapes);
    if (type != ch08::CacheType::float32) {
      const ch06::ElementType element =
          type == ch08::CacheType::bf16 ? ch06::ElementType::bf16 : ch06::ElementType::fp16;
      ch06::check_fits(in.Q, element, "Q");
      ch06::check_fits(in.K, element, "K");
      ch06::check_fits(in.V, element, "V");
      // chapter 06, the reference, cannot be held to its budget past these scores (error_budget.h)
      ch06::check_score_range(in.Q, in.K, flags.scale.value_or(fa::default_scale(shapes.q.head_dim)), element);
    }

    const std::size_t group = shapes.q.heads / shapes.kv.heads;
    program.start(fa::Banner{
        fmt::format("decoding: split-KV, {} query heads per K/V head, a {} cache{}", group,
                    page_size == 0 ? std::string("dense") : fmt::format("paged ({} rows a page)", page_size),
                    fa::tile_note("tile", plan.tile)),
        fmt::format(
            R"(A few new tokens per sequence attend to a KV cache that is already there. The keys of each sequence
are split into chunks, one thread block each; each block writes the partial (O_i, L_i) of its chunk,
and a second kernel merges them with chapter 02's rule: L = max L_i + log sum exp(L_i - max L_i),
O = sum exp(L_i - L) O_i. A block packs the rows of all query heads that share a K/V head, so each
K/V tile is read once for the whole group; it finds the keys' rows through the block table of a
paged cache. O is compared with chapter {} on each sequence's dense equivalent.)",
            against_05 ? "05" : "06")});

    const bool long_run =
        device == fa::Device::cpu && fa::announce_long_run(run_flops(shapes, lengths, steps), kFlopsPerSecond);
    const simt::ShowProgress progress("chapter 08 and its check", long_run);
    fmt::print("Q {}, K and V {}; inputs: {}; cache {}; device: {}\n", in.Q.shape.str(), in.K.shape.str(), in.origin,
               ch08::to_string(type), fa::to_string(device));
    fmt::print(
        "query head h reads K/V head h / {}: a block holds the {} rows of a group ({} heads x {} new token{}), "
        "tile Br x Bc = {}\n",
        group, plan.problem.rows_per_kv_head(), group, q_step.seq_len, q_step.seq_len == 1 ? "" : "s",
        fa::tile_name(plan.problem.tile));
    if (page_size > 0) {
      fmt::print("the pool: {} pages of {} rows of every K/V head, in an order shuffled by --seed {}\n",
                 plan.problem.pages, page_size, flags.seed);
    }

    if (steps > 0) {  // the decode loop
      fmt::print(
          "the decode loop: the cache starts with {} tokens per sequence; {} steps each append one token's K "
          "and V and decode its query\n",
          shapes.kv.seq_len - steps, steps);
      fmt::print("splits: first step {}\n       last step  {}\n", ch08::explain(plan.split),
                 ch08::explain(
                     ch08::check_problem(q_step, ch08::cache_layout(shapes.kv, page_size, {}), options, device).split));
      ch08::LoopResult loop = ch08::decode_loop(in.Q, in.K, in.V, steps, page_size, flags.seed, options, device);
      fa::end_profile();
      int most = 1;
      for (const ch08::Plan& p : loop.plans) most = std::max(most, p.split.splits);
      fmt::print("time: {:.3f} ms for {} steps ({}; wall clock, the cache copied to the device each step)\n",
                 loop.elapsed_ms, steps, fa::to_string(device));
      const ch08::Agreement agreement = ch08::check_decode_loop(in.Q, in.K, in.V, steps, options, most, loop, device);
      print_agreement(agreement);
      const bool overflowed =
          fa::report_nonfinite("O", loop.O, in.Q, in.K, flags.scale.value_or(fa::default_scale(shapes.q.head_dim)),
                               {in.Q.values, in.K.values, in.V.values});
      out.write(std::move(loop.O));
      return program.finish(verdict(fmt::format("decode loop, {} steps ({}, {}) vs ch05 causal", steps,
                                                fa::to_string(device), ch08::to_string(type)),
                                    agreement, false, overflowed));
    }

    fmt::print("cache lengths: {}\nsplits: {}\n", fmt::join(lengths, ", "), ch08::explain(plan.split));
    const ch08::KVCache cache = page_size == 0 ? ch08::dense_cache(in.K, in.V, lengths)
                                               : ch08::paged_cache(in.K, in.V, lengths, page_size, flags.seed);
    if (page_size > 0) {
      const auto first = cache.block_table.begin();
      fmt::print("sequence 0's block table (its pages, in the pool): {}\n",
                 fmt::join(first, first + static_cast<std::ptrdiff_t>(cache.pages_per_seq), " "));
    }
    ch08::Result decoded = ch08::decode_attention(in.Q, cache, options, device);
    fmt::print("time: {:.3f} ms for the split kernel{} ({}; wall clock of one run, not a benchmark)\n",
               decoded.elapsed_ms, plan.problem.splits > 1 ? " and the combine" : "", fa::to_string(device));
    const ch08::DecodeTraffic traffic = ch08::decode_traffic(plan.problem, lengths);
    fmt::print("{}", ch08::format_profile_beside_model(fa::end_profile(), traffic));
    fmt::print("\nThe traffic model: {} bytes, of which the cache {} bytes: at least {:.3g} us at 4.8 TB/s (an H200)\n",
               traffic.total(), traffic.cache, traffic.floor_ms() * 1e3);

    const ch08::Agreement agreement =
        ch08::check_against_dense(in.Q, in.K, in.V, lengths, options, plan.problem.splits, decoded, device);
    print_agreement(agreement);
    const bool overflowed =
        fa::report_nonfinite("O", decoded.O, in.Q, in.K, flags.scale.value_or(fa::default_scale(shapes.q.head_dim)),
                             {in.Q.values, in.K.values, in.V.values});
    out.write(std::move(decoded.O));
    return program.finish(
        verdict(fmt::format("decoding ({}, {}, {} split{}) vs {}", fa::to_string(device), ch08::to_string(type),
                            plan.problem.splits, plan.problem.splits == 1 ? "" : "s", agreement.against),
                agreement, true, overflowed));
  } catch (...) {
    return program.exit_on_error();
  }
}
