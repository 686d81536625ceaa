// The front door's guards (common/front_door.h).
#include "common/front_door.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <system_error>

#include <CLI/CLI.hpp>

#include "common/npy.h"
#include "common/program.h"

namespace fa {

void say_text(std::FILE* stream, std::string_view text) noexcept {
  // (fwrite and fflush report a failure by their result, which is ignored: there is nowhere left
  // to report it.)
  if (!text.empty()) (void)std::fwrite(text.data(), 1, text.size(), stream);
  (void)std::fflush(stream);
}

namespace {

bool g_stdout_was_closed = false;

// --allow-nonfinite, and what check_finite_inputs let through under it (empty: nothing).
bool g_allow_nonfinite = false;
std::string g_nonfinite_found;

}  // namespace

void guard_standard_streams() noexcept {
  for (int fd = 0; fd <= 2; ++fd) {
    if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    if (fd == 1) g_stdout_was_closed = true;
    // open() returns the lowest free number, which is fd: the others below it are open.
    (void)open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
  }
}

bool stdout_delivered() noexcept {
  const bool flushed = std::fflush(stdout) == 0;
  const int error = errno;
  if (g_stdout_was_closed) {
    say(stderr, "error: standard output is closed: the verdict could not be written\n");
    return false;
  }
  if (!flushed || std::ferror(stdout) != 0) {
    say(stderr, "error: the verdict could not be written to standard output: {}\n",
        flushed ? std::string("a write failed") : std::generic_category().message(error));
    return false;
  }
  return true;
}

void refuse_empty_values(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    if (!option->nonpositional() || option->get_type_size_max() <= 0) continue;  // a flag, or --help
    const bool file = option->get_type_name() == "FILE";
    option->check(CLI::Validator(
        [file](std::string& text) {
          if (!text.empty()) return std::string();
          return std::string(file ? "the path is empty: give a file name such as o.npy"
                                  : "an empty value is not accepted");
        },
        "", ""));
  }
  for (CLI::App* group : app.get_subcommands({})) refuse_empty_values(*group);
}

void add_nonfinite_flag(CLI::App& app) {
  app.add_flag("--allow-nonfinite", g_allow_nonfinite,
               "let NaN and infinities in the inputs through, to study how they propagate (the verdict is then FAIL)");
}

namespace {

// "NaN", "inf" or "-inf".
std::string nonfinite_name(double value) { return std::isnan(value) ? "NaN" : value > 0 ? "inf" : "-inf"; }

// What to do with what was found: refuse it, or (--allow-nonfinite) remember the first.
void found(const std::string& what) {
  if (!g_allow_nonfinite) {
    throw std::runtime_error(fmt::format(
        "{}; an input must be finite (--allow-nonfinite lets NaN and infinities through, to study how they propagate, "
        "and the verdict is then FAIL)",
        what));
  }
  if (g_nonfinite_found.empty()) g_nonfinite_found = what;
}

}  // namespace

void check_finite_inputs(const Plan& plan) {
  for (const auto& [flag, path] : plan.inputs) {
    // float16 files too: a chapter that reads them (06, 08) has checked their header already, and
    // one that does not has refused them.
    const std::optional<NonFiniteValue> v = first_nonfinite(path, true);
    if (!v) continue;
    const Shape4& s = v->shape;
    const std::uint64_t d = s.head_dim, seq = s.seq_len * d, head = s.heads * seq;
    const std::uint64_t i = v->index;
    found(fmt::format("{} {}: the value at [{}, {}, {}, {}] (value {} of {}) is {}", flag, path, i / head,
                      i % head / seq, i % seq / d, i % d, i, s.size(), nonfinite_name(v->value)));
  }
  for (const Plan::InputValues& list : plan.input_values) {
    for (std::size_t k = 0; k < list.values.size(); ++k) {
      const double x = list.values[k];
      if (std::isfinite(x) || (list.minus_inf_masks && x == -INFINITY)) continue;
      found(fmt::format("{}: item {} is {}{}", list.flag, k + 1, nonfinite_name(x),
                        list.minus_inf_masks ? " (-inf is accepted: a masked score)" : ""));
      break;
    }
  }
}

void nonfinite_verdict(Check& check) {
  if (g_nonfinite_found.empty()) return;
  check.pass = false;
  check.error += fmt::format("; inputs not finite (--allow-nonfinite: {}), never a PASS", g_nonfinite_found);
}

}  // namespace fa
