// The front door of every demo (common/program.h): Program, Plan, Output, and the verdict's
// helpers.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <limits>
#include <system_error>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "common/demo.h"
#include "common/front_door.h"
#include "common/npy.h"
#include "common/program.h"

namespace fa {

std::string error_field(std::string_view name, const ErrorStats& s) {
  std::string text = fmt::format("{} rel L2 {:.2g}", name, s.rel_l2);
  if (const std::string nonfinite = nonfinite_report(s); !nonfinite.empty()) text += ", " + nonfinite;
  return text;
}

std::string bound_text(double bound, std::string_view format) {
  if (!std::isfinite(bound)) return fmt::format("{} (no bound)", bound);
  return fmt::vformat(format, fmt::make_format_args(bound));
}

std::string relative_bound_text(double bound, std::string_view format) {
  const std::string text = bound_text(bound, format);
  return std::isfinite(bound) && bound >= 1.0 ? text + " (1 or more: checks nothing)" : text;
}

bool all_finite(std::span<const float> values) {
  for (float x : values) {
    if (!std::isfinite(x)) return false;
  }
  return true;
}

double score_magnitude_bound(const Tensor4<float>& Q, const Tensor4<float>& K, double scale) {
  const auto largest_norm = [](const Tensor4<float>& t) {
    const std::size_t d = t.shape.head_dim;
    double largest = 0.0;
    for (std::size_t row = 0; d > 0 && row < t.values.size() / d; ++row) {
      double sum = 0.0;
      for (std::size_t c = 0; c < d; ++c) {
        const double x = t.values[row * d + c];
        sum += x * x;
      }
      largest = std::max(largest, std::sqrt(sum));
    }
    return largest;
  };
  return std::max(1.0, std::fabs(scale)) * largest_norm(Q) * largest_norm(K);
}

bool report_nonfinite(std::string_view name, const Tensor4<float>& out, const Tensor4<float>& Q,
                      const Tensor4<float>& K, double scale, std::initializer_list<std::span<const float>> inputs,
                      std::FILE* stream) {
  for (std::span<const float> in : inputs) {
    if (!all_finite(in)) return false;  // NaN in, NaN out: that is propagation, the front door's matter
  }
  std::size_t nans = 0, infs = 0, first = out.values.size();
  for (std::size_t k = 0; k < out.values.size(); ++k) {
    if (std::isfinite(out.values[k])) continue;
    ++(std::isnan(out.values[k]) ? nans : infs);
    first = std::min(first, k);
  }
  if (nans + infs == 0) return false;
  const Shape4& s = out.shape;
  const std::size_t d = s.head_dim, seq = s.seq_len * d, head = s.heads * seq;
  say(stream,
      "{} holds {} NaN and {} inf although every input is finite, a FAIL whatever the bound; the first at "
      "[{}, {}, {}, {}] (value {} of {})\n",
      name, nans, infs, first / head, first % head / seq, first % seq / d, first % d, first, out.values.size());
  // Half of float32's largest value: a dot product of finite terms whose exact partial sums stay below
  // it cannot round past 3.4e38 (rounding grows a sum of head_dim terms by a factor (1 + 2^-24)^head_dim,
  // far below 2), and neither can s - m for two such scores in the softmax.
  const double limit = 0.5 * static_cast<double>(std::numeric_limits<float>::max());
  const double bound = score_magnitude_bound(Q, K, scale);
  if (bound < limit) {
    say(stream,
        "  no score can reach 3.4e38 on this input (|scale| x largest |q| x largest |k| = {:.3g}, below half of "
        "it): the scores did not overflow; the first non-finite value was made after them\n",
        bound);
  } else {
    say(stream,
        "  a score can reach 3.4e38 on this input (|scale| x largest |q| x largest |k| = {:.3g}): the float32 "
        "scores may have overflowed\n",
        bound);
  }
  return true;
}

bool announce_long_run(double flops, double flops_per_second) {
  const double seconds = flops / flops_per_second;
  if (!(seconds > 3.0)) return false;
  say(stdout, "This run does about {:.3g} GFLOP; on the CPU path that takes about {:.0f} s.\n", flops / 1e9, seconds);
  return true;
}

void Plan::add_input(std::string flag, std::string path) { inputs.emplace_back(std::move(flag), std::move(path)); }
void Plan::add_output(std::string flag, std::string path) { outputs.emplace_back(std::move(flag), std::move(path)); }
void Plan::add_input_values(std::string flag, std::span<const double> values, bool minus_inf_masks) {
  input_values.push_back({std::move(flag), std::vector<double>(values.begin(), values.end()), minus_inf_masks});
}

bool Output::wanted() const { return option_ != nullptr && option_->count() > 0; }

Program::Program(int chapter, std::string description)
    : chapter_(chapter), app_(std::make_unique<CLI::App>(std::move(description))) {
  app_->option_defaults()->always_capture_default();
  summary_option_ = app_->add_option("--summary", summary_path_,
                                     "append this run's check, one tab-separated line, to FILE (the tour does)");
  summary_option_->default_str("none")->check(CLI::Validator(
      [](std::string& path) {
        return path.empty() ? std::string("the path is empty: give a file name such as tour.tsv") : "";
      },
      "", ""));
  add_nonfinite_flag(*app_);
}

Program::~Program() = default;

Output& Program::add_output(const std::string& flag, const std::string& what) {
  Output& out = outputs_.emplace_back(flag, what);
  // A function option, so that an empty value (--out=) reaches the check and is refused there with
  // a reason, rather than by CLI11 as a missing value.
  out.option_ = app_->add_option_function<std::string>(
      flag, [&out](const std::string& path) { out.path_ = path; },
      fmt::format("write {} to this .npy file (float32; replaced whole or not at all)", what));
  out.option_->type_name("FILE")->default_str("none");
  return out;
}

namespace {

// Two paths name the same file: the same path once made absolute (against the working folder:
// weakly_canonical leaves a bare name that does not exist yet relative, so `a.npy` and `./a.npy`
// would differ) and normalised, symbolic links resolved (the file need not exist), or, for files
// that exist, the same file (a hard link).
bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec_a, ec_b, ec;
  const auto canonical_a = std::filesystem::weakly_canonical(std::filesystem::absolute(a, ec_a), ec_a);
  const auto canonical_b = std::filesystem::weakly_canonical(std::filesystem::absolute(b, ec_b), ec_b);
  if (!ec_a && !ec_b && canonical_a == canonical_b) return true;
  return std::filesystem::equivalent(a, b, ec) && !ec;
}

// --summary FILE: appended to, so it may exist (as a regular file); its folder must exist and be
// writable. Throws std::runtime_error naming the file otherwise.
void check_summary_path(const std::string& path) {
  if (path.empty()) throw std::runtime_error("--summary: the path is empty: give a file name such as tour.tsv");
  std::error_code ec;
  const std::filesystem::path file(path);
  const auto status = std::filesystem::status(file, ec);
  if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
    throw std::runtime_error(fmt::format("--summary {}: exists and is not a regular file; give a file name", path));
  }
  const std::filesystem::path folder = file.has_parent_path() ? file.parent_path() : ".";
  if (!std::filesystem::is_directory(folder, ec)) {
    throw std::runtime_error(fmt::format("--summary {}: the folder {} does not exist", path, folder.string()));
  }
  if (access(folder.c_str(), W_OK | X_OK) != 0) {
    throw std::runtime_error(fmt::format("--summary {}: cannot write into the folder {}: {}", path, folder.string(),
                                         std::generic_category().message(errno)));
  }
  // access() does not know every refusal (/sys says yes to root): open the file for appending, as
  // the verdict will, without writing; or, where it does not exist yet, create a temporary file
  // beside it (check_output_path), so that nothing is left behind.
  if (std::filesystem::exists(status)) {
    const int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0) {
      throw std::runtime_error(
          fmt::format("--summary {}: cannot open it for appending: {}", path, std::generic_category().message(errno)));
    }
    close(fd);
  } else {
    try {
      check_output_path(path);
    } catch (const std::exception& e) {
      throw std::runtime_error(fmt::format("--summary {}", e.what()));
    }
  }
}

}  // namespace

void Program::parse(int argc, char** argv) {
  guard_standard_streams();
  name_ = argc > 0 ? std::filesystem::path(argv[0]).filename().string() : "demo";
  refuse_empty_values(*app_);
  app_->parse(argc, argv);
  parsed_ = true;
}

void Program::check(const Plan& plan) const {
  if (does_io_) {  // the files are the I/O process's alone
    // Every file the run writes, with its flag: the Outputs given, the plan's others, --summary.
    std::vector<std::pair<std::string, std::string>> written = plan.outputs;
    for (const Output& out : outputs_) {
      if (out.wanted()) written.emplace_back(out.flag_, out.path_);
    }
    for (const auto& [flag, path] : written) {
      try {
        check_output_path(path);
      } catch (const std::exception& e) {
        throw std::runtime_error(fmt::format("{}: {}", flag, e.what()));
      }
    }
    if (summary_option_->count() > 0) {
      check_summary_path(summary_path_);
      written.emplace_back("--summary", summary_path_);
    }
    for (std::size_t a = 0; a < written.size(); ++a) {
      for (std::size_t b = a + 1; b < written.size(); ++b) {
        if (same_file(written[a].second, written[b].second)) {
          throw std::runtime_error(fmt::format("{} {} and {} {} name the same file; give each output its own file",
                                               written[a].first, written[a].second, written[b].first,
                                               written[b].second));
        }
      }
      for (const auto& [flag, path] : plan.inputs) {
        if (same_file(written[a].second, path)) {
          throw std::runtime_error(fmt::format("{} {} is the input {} {}; write the output to another file",
                                               written[a].first, written[a].second, flag, path));
        }
      }
    }
    check_finite_inputs(plan);  // every value of every input (the I/O process reads the files)
  }
  plan.memory.check(name_);
}

void Program::start(const std::optional<Banner>& banner) {
  if (banner && does_io_) demo::print_banner(chapter_, *banner);
  started_ = true;
}

int Program::finish(const std::optional<Check>& check) {
  if (!does_io_) return !check || check->pass ? 0 : kExitFail;
  // 5. The outputs, all together.
  std::vector<NpyFile> files;
  for (const Output& out : outputs_) {
    if (!out.wanted()) continue;
    if (!out.tensor_) throw std::runtime_error(fmt::format("{}: this run made no {} to write", out.flag_, out.what_));
    files.push_back({out.path_, &*out.tensor_});
  }
  write_npy_f32_files(files);
  for (const Output& out : outputs_) {
    if (out.wanted()) fmt::print("wrote {} to {}\n", out.what_, out.path_);
  }
  // 6. The verdict; one that never reached stdout is a failure of the run.
  if (!check) return stdout_delivered() ? 0 : kExitFail;
  Check verdict = *check;
  nonfinite_verdict(verdict);
  demo::print_verdict(verdict);
  if (summary_option_->count() > 0) demo::append_summary(summary_path_, verdict);
  if (!stdout_delivered()) return kExitFail;
  return verdict.pass ? 0 : kExitFail;
}

int Program::exit_on_error() noexcept {
  const int status = started_ ? kExitFail : kExitRefused;
  std::string what;
  try {
    throw;
  } catch (const CLI::CallForHelp& e) {
    return does_io_ ? app_->exit(e) : 0;
  } catch (const CLI::CallForAllHelp& e) {
    return does_io_ ? app_->exit(e) : 0;
  } catch (const std::exception& e) {
    try {  // a flag that CLI11 or the flag's own parser refused (e.g. a list) says where to look
      what = parsed_ ? e.what() : fmt::format("{} (see --help)", e.what());
    } catch (...) {  // (no memory for the message: the status still says it)
    }
  } catch (...) {
    what = "an unknown exception";
  }
  if (!does_io_ && !started_) return status;  // the process that does the I/O says it, once
  std::fflush(stdout);
  say(stderr, "error: {}\n", what);
  return status;
}

}  // namespace fa
