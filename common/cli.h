// Command-line flags that every demo checks the same way, before any work: counts, lists of
// numbers and the softmax scale. Each refuses a bad value with one line that names the flag, the
// value and what is accepted, e.g.
//   --head-dim 0: not accepted; give an integer from 1 to 2147483647
//   --block -1: not accepted; give an integer from 1 to 18446744073709551615
//   --scores 1,,2: item 2 is empty; give numbers separated by commas, e.g. 1,3,5,2
//   --scale 1e39: not accepted; give a number that float32 can hold (|scale| <= 3.4e38)
// (CLI11's own range check prints a 300-digit range and lets "-1" wrap around in an unsigned
// flag: these helpers parse the text themselves.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

namespace fa::cli {

// The largest size of one tensor dimension a demo accepts from the command line. Larger problems
// are refused by each chapter's own limits and by the memory check (common/memory.h) anyway; this
// keeps the product of a few dimensions from overflowing 64 bits before those checks run.
inline constexpr std::uint64_t kMaxDimension = std::numeric_limits<std::int32_t>::max();

// Parses `text` as a whole decimal integer from `min` to `max` (no sign, no exponent, no spaces).
// Returns the value, or nothing. Never throws.
std::optional<std::uint64_t> parse_integer(std::string_view text, std::uint64_t min, std::uint64_t max);

// The error text for a value outside [min, max] (what CLI11 prints after "--flag: "). Never throws.
std::string integer_error(std::string_view text, std::uint64_t min, std::uint64_t max);

// Adds `name` (e.g. "--head-dim") writing an integer from min to max into value. The default
// shown by --help is value's current value. Returns the option, for ->needs() and the like.
template <class Unsigned>
CLI::Option* add_integer(CLI::App& app, const std::string& name, Unsigned& value, const std::string& help,
                         std::uint64_t min = 1, std::uint64_t max = std::numeric_limits<Unsigned>::max()) {
  static_assert(std::is_unsigned_v<Unsigned>, "add_integer writes an unsigned value");
  auto* option = app.add_option_function<std::string>(
      name, [&value](const std::string& text) { value = static_cast<Unsigned>(std::stoull(text)); }, help);
  option->check(CLI::Validator(
      [min, max](std::string& text) {
        return parse_integer(text, min, max) ? std::string() : integer_error(text, min, max);
      },
      "", "integer"));
  option->default_str(std::to_string(value));
  option->type_name("INT");
  return option;
}

// A size of the problem: an integer from 1 to kMaxDimension.
template <class Unsigned>
CLI::Option* add_size(CLI::App& app, const std::string& name, Unsigned& value, const std::string& help) {
  return add_integer(app, name, value, help, 1,
                     std::min<std::uint64_t>(kMaxDimension, std::numeric_limits<Unsigned>::max()));
}

// Parses "1,3,5,2" (commas, optional spaces around each number) into numbers; inf, -inf and nan are
// numbers too (softmax has rules for them). Throws std::invalid_argument naming `flag`, the item
// and what is accepted for an empty list, an empty item ("1,,2") or text that is not a number.
std::vector<double> parse_number_list(std::string_view flag, std::string_view text);

// Adds `name` writing a comma-separated list of numbers (at least one) into values; the
// default shown by --help is the values' current contents.
CLI::Option* add_number_list(CLI::App& app, const std::string& name, std::vector<double>& values,
                             const std::string& help);

// Adds `name` for the softmax scale: a number whose float32 value is finite (the kernels compute
// in float32, so 1e39 would become inf). Unset means 1/sqrt(head_dim).
CLI::Option* add_scale(CLI::App& app, const std::string& name, std::optional<double>& scale, const std::string& help);

// Throws std::invalid_argument naming `who` unless float(scale) is finite: what add_scale checks,
// for callers that get a scale from code rather than from a flag.
void check_float32_scale(std::string_view who, double scale);

}  // namespace fa::cli
