// A chapter's program: the front door every demo passes through, functions main() calls in order
// (the host compiler only).
//   Program                           parse; check (with a Plan); start (the Banner); finish
//   Plan, Banner, Output              what the checks collect, what the demo is about, a file to write
//   Check, error_field(), within()    the verdict line, and the rule that a bound must be finite
//   cli::add_integer() ...            flags that refuse a bad value with one line
//   AttentionFlags                    the inputs of the attention demos (chapters 04 and later)
// The guards against a careless or hostile world (closed standard streams, an output that is an
// input, empty flag values, NaN in a file) are in front_door.h and run inside Program's calls.
// Nothing here calls back into a chapter: a chapter calls what it needs, and the road from main()
// to a kernel runs through the chapter's own files (docs/conventions.md, "One run").
#pragma once

#if defined(__CUDACC__)
#error "common/program.h is the demo side, for the host compiler; a .cuh includes common/kernel_problem.h"
#endif

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <initializer_list>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "common/compare.h"
#include "common/kernel_problem.h"
#include "common/memory.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace fa {

// ---- The verdict ---------------------------------------------------------------------------------

// One check of a chapter against the stage before it: the demo's last line, and one row of the
// tour's table (common/demo.h prints both).
struct Check {
  std::string chapter;  // "01" ... "11"
  std::string checked;  // what was compared with what, e.g. "FlashAttention-2 (cpu) vs ch04"
  std::string error;    // the measured error(s), e.g. "O rel L2 4.1e-07"
  std::string bound;    // the bound(s) they must stay under, e.g. "1e-06"
  bool pass = false;    // every error within its bound
};

// The error field of a check for one compared tensor: "O rel L2 4.1e-07", and where either side
// holds NaN or an infinity, their counts: "O rel L2 2.7e-07, 6400 NaN, all where the reference has
// them too" (compare.h, nonfinite_report). A verdict can then never say PASS over NaN silently.
std::string error_field(std::string_view name, const ErrorStats& s);

// What a banner says of a tile that is not the default (fa::tile_for_device on a GPU that cannot
// hold the default): "; <what> 64x32: the default 64x64 needs ..."; empty for the default. Never
// throws (but for memory).
std::string tile_note(std::string_view what, const TileChoice& choice);

// The rule of every verdict: an error passes only a finite bound. A bound that is infinite or NaN
// (a float32 evaluation that overflowed on this input, common/tolerance.h) bounds nothing, so the
// check fails, whatever the error. Never throws.
inline bool within(double error, double bound) { return std::isfinite(bound) && error <= bound; }

// A relative error is a fraction of the reference: a relative bound of 1 or more lets through an
// output that is all wrong (0 is 100% off), so it checks nothing, and the check fails, whatever the
// error. Never throws.
inline bool within_relative(double error, double bound) { return within(error, bound) && bound < 1.0; }

// within_relative() for a comparison (its relative L2 error): the same positions of NaN and
// infinities on both sides too (compare.h, agrees).
inline bool within(const ErrorStats& s, double bound) { return within_relative(0.0, bound) && agrees(s, bound); }

// A bound as a verdict prints it, with `format` ("{:.2g}"), or "inf (no bound)" / "nan (no bound)".
std::string bound_text(double bound, std::string_view format = "{:.2g}");
// The same for a relative bound, which says too when it is 1 or more: "1.9 (1 or more: checks
// nothing)" (within_relative).
std::string relative_bound_text(double bound, std::string_view format = "{:.2g}");

// True when every value is finite. With finite inputs, attention's O is a weighted mean of V's rows
// and every gradient is finite too: a NaN or an infinity there is an overflow of the float32
// computation, a FAIL of every chapter on that input whatever the bound says (the demos count them
// in the error field; report_nonfinite says what is known of it). Never throws.
bool all_finite(std::span<const float> values);

// What the inputs allow a score to reach: |scale| times the largest |q|_2 of Q's rows times the largest
// |k|_2 of K's (rows of head_dim values), and at least that product without the scale. By
// Cauchy-Schwarz no score, and no partial sum of its dot product before or after the scale, is
// larger in exact arithmetic. Computed in double, so it does not overflow itself. Never throws.
double score_magnitude_bound(const Tensor4<float>& Q, const Tensor4<float>& K, double scale);

// The rule above as a demo applies it: true, after printing what is known, when `out` (named
// `name`) holds a NaN or an infinity although every one of `inputs` is finite. It says how many NaN
// and how many infinities, where the first one is ([batch, head, row, column] of `out`), and whether
// a score could reach float32's largest value on this input (score_magnitude_bound of Q and K with
// `scale`): if not, the scores did not overflow, and the non-finite values were made later. It
// prints to `stream`. Never throws.
bool report_nonfinite(std::string_view name, const Tensor4<float>& out, const Tensor4<float>& Q,
                      const Tensor4<float>& K, double scale, std::initializer_list<std::span<const float>> inputs,
                      std::FILE* stream = stdout);

// ---- Flags that refuse a bad value with one line -------------------------------------------------
// Each refuses a bad value when the flags are parsed, with one line that names the flag, the value
// and what is accepted, e.g.
//   --head-dim: 0 is not accepted; give an integer from 1 to 2147483647
//   --scores: 1,,2: item 2 is empty; give numbers separated by commas, e.g. 1,3,5,2
//   --scale: 1e39 is not accepted; give a number that float32 can hold (|scale| <= 3.4e38)
// (CLI11's own range check prints a 300-digit range and lets "-1" wrap around in an unsigned
// flag: these parse the text themselves; cli.cpp.) --help shows each one's current value.
namespace cli {

// The largest size of one tensor dimension a demo accepts from the command line. Larger problems
// are refused by each chapter's own limits and by the memory plan anyway; this keeps the product
// of a few dimensions from overflowing 64 bits before those checks run.
inline constexpr std::uint64_t kMaxDimension = 2147483647;  // 2^31 - 1

// Parses `text` as a whole decimal integer from `min` to `max` (no sign, no exponent, no spaces).
// Returns the value, or nothing. Never throws.
std::optional<std::uint64_t> parse_integer(std::string_view text, std::uint64_t min, std::uint64_t max);
// The error text for a value outside [min, max] (what follows "--flag: "). Never throws.
std::string integer_error(std::string_view text, std::uint64_t min, std::uint64_t max);

// Adds `name` (e.g. "--head-dim") writing an integer from min to max into value. Returns the
// option, for ->needs() and the like.
CLI::Option* add_integer(CLI::App& app, const std::string& name, std::uint64_t& value, const std::string& help,
                         std::uint64_t min = 1, std::uint64_t max = std::numeric_limits<std::uint64_t>::max());
// A size of the problem: an integer from 1 to kMaxDimension.
CLI::Option* add_size(CLI::App& app, const std::string& name, std::uint64_t& value, const std::string& help);

// Parses "1,3,5,2" (commas, optional spaces around each number) into numbers; inf, -inf and nan are
// numbers too (softmax has rules for them). Throws std::invalid_argument naming `flag`, the item
// and what is accepted for an empty list, an empty item ("1,,2") or text that is not a number.
std::vector<double> parse_number_list(std::string_view flag, std::string_view text);
// Adds `name` writing a comma-separated list of numbers (at least one) into values.
CLI::Option* add_number_list(CLI::App& app, const std::string& name, std::vector<double>& values,
                             const std::string& help);

// Adds `name` for the softmax scale: a number whose float32 value is finite (the kernels compute
// in float32, so 1e39 would become inf). Unset means 1/sqrt(head_dim).
CLI::Option* add_scale(CLI::App& app, const std::string& name, std::optional<double>& scale, const std::string& help);

// Adds --tile BrxBc, one of the tiles of `compiled` (fa::parse_tile).
CLI::Option* add_tile(CLI::App& app, Tile& tile, std::span<const KernelShape> compiled);

// Adds `name` (e.g. "--dtype") writing one of the words `accepted` into value; its help shows
// value's default. Anything else is refused by the parse, naming the accepted words.
CLI::Option* add_choice(CLI::App& app, const std::string& name, std::string& value, const std::string& help,
                        const std::vector<std::string>& accepted);

}  // namespace cli

// ---- The front door ------------------------------------------------------------------------------

inline constexpr int kExitFail = 1;     // the check failed, or the work stopped with an error
inline constexpr int kExitRefused = 2;  // refused before any work: a flag, a file, a size, the memory

// What a demo is about: the heading "Chapter 05 - <title>" and a paragraph (lines broken with '\n').
struct Banner {
  std::string title;
  std::string shows;
};

// What the checks before any work collect, beyond what they refuse at once: the memory the run
// will allocate, and the files it reads and writes. Program::check checks them all together, after
// the chapter's own checks and before the banner.
struct Plan {
  MemoryPlan memory;  // every allocation of the run, added with memory.add(what, bytes)

  // An input file (e.g. --q q.npy), which no output may be.
  void add_input(std::string flag, std::string path);
  // An output file written by other means than an Output (e.g. --profile-json): checked like one.
  void add_output(std::string flag, std::string path);
  // Input values given on the command line (e.g. --scores 1,3,5,2), which must be finite as an
  // input file's must; with `minus_inf_masks`, -inf is accepted too (a masked score, weight 0).
  void add_input_values(std::string flag, std::span<const double> values, bool minus_inf_masks = false);

  std::vector<std::pair<std::string, std::string>> inputs, outputs;  // (flag, path)
  struct InputValues {
    std::string flag;
    std::vector<double> values;
    bool minus_inf_masks = false;
  };
  std::vector<InputValues> input_values;
};

// One output file of a demo, a tensor as .npy (common/npy.h), given by a flag such as --out. Its
// path is checked before any work with every other file of the run (writable, a file name, not an
// input, not another output); the tensor the work hands over is written after the work, with every
// other output, whole or not at all.
class Output {
 public:
  Output(std::string flag, std::string what) : flag_(std::move(flag)), what_(std::move(what)) {}
  // Whether the flag was given: the work then must call write().
  bool wanted() const;
  // Hands over the tensor to write (what the flag's help names, e.g. O).
  void write(Tensor4<float> tensor) { tensor_ = std::move(tensor); }
  // The flag, e.g. for ->excludes("--traffic").
  CLI::Option* option() const { return option_; }

 private:
  friend class Program;
  std::string flag_, what_, path_;
  CLI::Option* option_ = nullptr;
  std::optional<Tensor4<float>> tensor_;
};

// The front door of every demo: functions its main() calls in order, so that main() reads top to
// bottom as the run goes.
//
//   int main(int argc, char** argv) {
//     fa::Program program(4, "Chapter 04: naive attention ...");   // the chapter, and --help's head
//     fa::AttentionFlags in;                                         // the flags
//     in.add_to(program.app());
//     fa::Output& out = program.add_output("--out", "O");
//     try {
//       program.parse(argc, argv);                  // 1. the flags
//       fa::Plan plan;                              // 2. every check before any work: the chapter's
//       const fa::AttentionShape shape = in.plan(plan);   (shapes, limits, files: whatever can be
//       ...                                               refused without doing the work), then
//       program.check(plan);                              the front door's
//       program.start(banner);                      // 3. the banner
//       ...the work...; out.write(O);               // 4. the chapter's content
//       return program.finish(check);               // 5. the outputs, 6. the verdict
//     } catch (...) {
//       return program.exit_on_error();
//     }
//   }
//
// The guards of common/front_door.h stand at these steps: the standard streams first and an empty
// value refused in parse(), every value of every input checked in check(), stdout's delivery
// checked in finish(). An exception before start() is a refusal: one line "error: ..." on stderr,
// before anything else, and status 2. After start() it is an error of the work: "error: ...",
// status 1. FAIL exits with 1, and so does a run whose output did not reach stdout (a full disk, a
// closed stdout); PASS (or no check) with 0; --help prints every flag with its default and exits
// with 0. A closed or full stderr loses the line, never the status.
class Program {
 public:
  // `chapter` (1 ... 10) heads the banner; `description` heads --help. Registers --summary FILE.
  Program(int chapter, std::string description);
  ~Program();

  CLI::App& app() { return *app_; }
  // The --summary option, e.g. for ->excludes("--traffic").
  CLI::Option* summary_option() { return summary_option_; }
  // Adds an output flag: "--out" writing "O", with the help "write O to this .npy file (...)".
  Output& add_output(const std::string& flag, const std::string& what);

  // For a program that runs as several processes (under mpirun): only the one that does the I/O
  // (rank 0) prints the refusals, the banner and the verdict and writes the outputs and --summary;
  // the others check and work alike, silently but for an error of their own work. Every process
  // does the I/O unless told otherwise; call before parse().
  void set_does_io(bool does_io) { does_io_ = does_io; }

  // 1. Parses the flags. Throws CLI11's exceptions (--help among them) and what a flag's own parser
  // throws; exit_on_error() turns each into its line and status.
  void parse(int argc, char** argv);
  // 2. The front door's checks of what the chapter's checks put in `plan`: every output path (and
  // --summary's) writable (a temporary file created beside each, and removed), distinct from each
  // other and from every input; every value of every input finite (or --allow-nonfinite); the memory
  // plan against the machine's memory. Throws std::runtime_error naming the flag and the file, or
  // the memory.
  void check(const Plan& plan) const;
  // 3. Prints the banner (nothing for a run that shows none). From here on an exception is an error
  // of the work, status 1, no longer a refusal.
  void start(const std::optional<Banner>& banner);
  // 5. Writes every Output the work handed a tensor, all together, whole or not at all (npy.h);
  // 6. prints the verdict line and, with --summary FILE, appends it to FILE (demo.h); with
  // --allow-nonfinite and a NaN or an infinity in the inputs, the verdict is FAIL. Returns the exit
  // status: 0 for PASS or no check, 1 for FAIL or a verdict that did not reach stdout. Throws
  // std::runtime_error for an output the work did not hand over, or one that cannot be written.
  int finish(const std::optional<Check>& check);
  // The exit status of the exception being handled, after printing its one line on stderr: 0 for
  // --help (which prints the flags), 2 before start() (a refusal: "... (see --help)" for a flag),
  // 1 after. Call it from a catch (...) around steps 1-6. Never throws.
  int exit_on_error() noexcept;

 private:
  int chapter_;
  std::string name_;  // the program's file name, for the messages
  std::unique_ptr<CLI::App> app_;
  std::string summary_path_;
  CLI::Option* summary_option_ = nullptr;
  std::deque<Output> outputs_;
  bool does_io_ = true;
  bool parsed_ = false;   // parse() returned: a refusal from here on is not a flag's
  bool started_ = false;  // start() returned: an exception is an error of the work
};

// A rough estimate of a run's time on the CPU path: `flops` floating-point operations at
// `flops_per_second`, a rate measured once for the chapter on a 2-core laptop (so a slower machine
// takes longer: the figure is "about"). When the estimate exceeds 3 seconds, prints one line
//   "This run does about 17 GFLOP; on the CPU path that takes about 20 s."
// and returns true, so that the demo shows a progress line (common/simt/runtime/progress.h). Never throws.
bool announce_long_run(double flops, double flops_per_second);

// ---- The inputs of the attention demos (chapters 04 and later) -----------------------------------
// Either three .npy files (--q --k --v), or random tensors drawn from a seed (--batch --heads
// --seq-q --seq-k --head-dim --seed); plus --causal, --scale and --device, and simt's --profile,
// --profile-json and --racecheck (common/profile_cli.h) for the kernels run on the CPU.
struct AttentionFlags {
  std::string q_path, k_path, v_path;  // all three, or none
  std::uint64_t batch = 1, heads = 2, seq_len_q = 256, seq_len_k = 256, head_dim = 64;
  std::uint64_t seed = 1;
  bool causal = false;
  std::optional<double> scale;
  std::string device;             // "cpu", "gpu" or empty (the GPU when there is one)
  bool accept_f16_files = false;  // set by a demo (chapter 06) whose kernel takes fp16: '<f2' files too

  // Registers the flags above, and --profile, --profile-json and --racecheck, on app; --help shows
  // each one's default. Once per program.
  void add_to(CLI::App& app);

  // Step 2 of the front door, for the inputs: the device (refused when --device gpu has none), and
  // for the CPU, simt's SIMT_SCHEDULE and SIMT_THREADS (refused when malformed); the problem's
  // shapes, from the .npy headers (the data is not read) or from the size flags; the input files,
  // the --profile-json file and Q, K, V's memory added to the plan. Throws std::invalid_argument or std::runtime_error
  // naming the flag or the file and what is accepted.
  AttentionShape plan(Plan& plan) const;
  Device chosen_device() const;
  // The same for a kernel that not every GPU runs (chapters 06 and 10): check(device) throws
  // std::runtime_error, in one line, for a GPU that cannot run it. When no --device is given and
  // the GPU is refused so, the CPU; then check(device), so that --device gpu there throws what
  // check throws.
  template <class Check>
  Device chosen_device(Check check) const {
    Device d = chosen_device();
    if (device.empty() && d == Device::gpu) {
      try {
        check(d);
      } catch (const std::runtime_error&) {
        d = Device::cpu;
      }
    }
    check(d);
    return d;
  }

  // Step 4: Q, K, V from the .npy files, or drawn normal(0, 1) from --seed. Throws as plan().
  struct Inputs {
    Tensor4<float> Q, K, V;
    std::string origin;  // "q.npy, k.npy, v.npy" or "normal(0, 1), seed 1"
  };
  Inputs load() const;
  // "Q [1, 2, 256, 64], K and V with seq_len 256, causal; inputs: normal(0, 1), seed 1; device: cpu",
  // the line a demo prints before its run. Never throws (but for memory).
  std::string describe(const Inputs& in, Device run_on) const;
};

}  // namespace fa
