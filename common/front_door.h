// The front door's guards (common/program.h, Program): what keeps a demo's messages, its verdict
// and its files true when the world around the program is careless or hostile. Program calls
// each at its step; a chapter's main.cpp needs only say() (chapter 09, whose ranks end themselves).
//
//   say(stderr, "error: {}\n", what)     a message that is lost, not thrown, when stderr is closed
//                                        or full (a demo run as `prog 2>&-` ends with its status)
//   guard_standard_streams()             step 0: a closed stdin, stdout or stderr is opened on
//                                        /dev/null, so that no file the run opens takes its number
//                                        (and the verdict cannot land in an output file)
//   stdout_delivered()                   after step 6: false when the verdict never reached stdout
//                                        (`prog >/dev/full`, `prog >&-`): the run then exits 1
//   refuse_empty_values(app)             step 1: every flag that takes a value refuses ''
//   add_nonfinite_flag(app)              --allow-nonfinite, for a reader who studies NaN
//   check_finite_inputs(plan)            step 2: NaN or an infinity in an input refused, naming
//                                        the file (or the flag) and the first index
//   nonfinite_verdict(check)             step 6: with --allow-nonfinite, never a PASS over them
#pragma once

#include <cstdio>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

namespace CLI {
class App;
}  // namespace CLI

namespace fa {

struct Check;
struct Plan;

// Writes `text` on `stream` (stderr or stdout) and flushes it, if it can: on a closed or full
// stream the text is lost and nothing else happens. Never throws.
void say_text(std::FILE* stream, std::string_view text) noexcept;

// say(stderr, "error: {}\n", what): say_text of the formatted text (fmt's syntax). Never throws
// (a format error or a lack of memory loses the text, as a closed stream does).
template <class... Args>
void say(std::FILE* stream, fmt::format_string<Args...> format, Args&&... args) noexcept {
  try {
    say_text(stream, fmt::format(format, std::forward<Args>(args)...));
  } catch (...) {  // (nothing to say it with)
  }
}

// Opens /dev/null on each of file descriptors 0, 1 and 2 that is closed, and remembers whether 1
// (stdout) was: a file opened later (an input, an output's temporary file) would otherwise get the
// lowest free number, 1, and the demo's printing would go into it. Call first. Never throws.
void guard_standard_streams() noexcept;

// Flushes stdout and returns whether everything printed on it reached it: false when stdout was
// closed at the start (guard_standard_streams) or a write to it failed (a full disk, /dev/full, a
// closed pipe), after saying so on stderr. Never throws.
bool stdout_delivered() noexcept;

// Adds to every flag of `app` (and of its option groups) that takes a value a check that refuses
// an empty one ("--tile ''"), with the flag's name; a flag's own check, added earlier, speaks
// first. Call once, after every flag is added and before parsing.
void refuse_empty_values(CLI::App& app);

// Adds --allow-nonfinite to `app`: NaN and infinities in the inputs are let through (to study how
// they propagate) instead of refused, and the verdict is then FAIL (nonfinite_verdict). Once.
void add_nonfinite_flag(CLI::App& app);

// Step 2 of the front door, for the values of the inputs: every input file of the plan (read in
// chunks, without keeping it) and every list of input values must be finite. Throws
// std::runtime_error, one line naming the flag, the file and the first index, e.g.
//   --k k.npy: K[0, 1, 7, 3] (value 453 of 4096) is inf; an input must be finite ...
// unless --allow-nonfinite was given; then it remembers what it found, for nonfinite_verdict.
void check_finite_inputs(const Plan& plan);

// Step 6: where --allow-nonfinite let a NaN or an infinity in, the check fails, and its error field
// says why ("inputs not finite: ..."), whatever the comparison found. Otherwise `check` is left
// as it is.
void nonfinite_verdict(Check& check);

}  // namespace fa
