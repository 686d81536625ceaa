// The flags that refuse a bad value with one line (common/program.h, namespace fa::cli).
#include <charconv>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include "common/program.h"

namespace fa::cli {

namespace {

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

}  // namespace

std::optional<std::uint64_t> parse_integer(std::string_view text, std::uint64_t min, std::uint64_t max) {
  if (text.empty() || text.front() < '0' || text.front() > '9') return std::nullopt;  // no sign
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  if (value < min || value > max) return std::nullopt;
  return value;
}

std::string integer_error(std::string_view text, std::uint64_t min, std::uint64_t max) {
  return fmt::format("{} is not accepted; give an integer from {} to {}", text.empty() ? "''" : text, min, max);
}

CLI::Option* add_integer(CLI::App& app, const std::string& name, std::uint64_t& value, const std::string& help,
                         std::uint64_t min, std::uint64_t max) {
  auto* option = app.add_option_function<std::string>(
      name, [&value](const std::string& text) { value = std::stoull(text); }, help);
  option->check(CLI::Validator(
      [min, max](std::string& text) {
        return parse_integer(text, min, max) ? std::string() : integer_error(text, min, max);
      },
      "", "integer"));
  option->default_str(std::to_string(value));
  option->type_name("INT");
  return option;
}

CLI::Option* add_size(CLI::App& app, const std::string& name, std::uint64_t& value, const std::string& help) {
  return add_integer(app, name, value, help, 1, kMaxDimension);
}

std::vector<double> parse_number_list(std::string_view flag, std::string_view text) {
  const auto fail = [&](const std::string& what) {
    throw std::invalid_argument(fmt::format("{} {}: {}; give numbers separated by commas, e.g. 1,3,5,2", flag,
                                            text.empty() ? "''" : text, what));
  };
  if (trim(text).empty()) fail("the list is empty");
  std::vector<double> values;
  std::size_t item = 1;
  for (std::size_t start = 0;; ++item) {
    const std::size_t comma = text.find(',', start);
    const std::string_view word = trim(text.substr(start, comma == std::string_view::npos ? text.npos : comma - start));
    if (word.empty()) fail(fmt::format("item {} is empty", item));
    double value = 0.0;
    const auto [end, error] = std::from_chars(word.data(), word.data() + word.size(), value);
    if (error != std::errc() || end != word.data() + word.size()) {
      fail(fmt::format("item {} ('{}') is not a number", item, word));
    }
    values.push_back(value);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return values;
}

CLI::Option* add_number_list(CLI::App& app, const std::string& name, std::vector<double>& values,
                             const std::string& help) {
  auto* option = app.add_option_function<std::string>(
      name, [&values, name](const std::string& text) { values = parse_number_list(name, text); }, help);
  option->check(CLI::Validator(
      [name](std::string& text) {
        try {
          (void)parse_number_list(name, text);
        } catch (const std::invalid_argument& e) {
          // CLI11 prefixes the flag's name; give the rest of the sentence.
          const std::string message = e.what();
          return message.substr(message.find(": ") + 2);
        }
        return std::string();
      },
      "", "numbers"));
  option->default_str(fmt::format("{}", fmt::join(values, ",")));
  option->type_name("LIST");
  return option;
}

CLI::Option* add_choice(CLI::App& app, const std::string& name, std::string& value, const std::string& help,
                        const std::vector<std::string>& accepted) {
  return app.add_option(name, value, help)->check(CLI::IsMember(accepted))->capture_default_str();
}

CLI::Option* add_scale(CLI::App& app, const std::string& name, std::optional<double>& scale, const std::string& help) {
  auto* option = app.add_option_function<std::string>(
      name, [&scale](const std::string& text) { scale = std::stod(text); }, help);
  option->check(CLI::Validator(
      [](std::string& text) {
        double value = 0.0;
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
        const bool number = !text.empty() && error == std::errc() && end == text.data() + text.size();
        if (number && std::isfinite(static_cast<float>(value))) return std::string();
        return fmt::format("{} is not accepted; give a number that float32 can hold (|scale| <= 3.4e38)",
                           text.empty() ? "''" : text);
      },
      "", "scale"));
  option->default_str("1/sqrt(head_dim)");
  option->type_name("FLOAT");
  return option;
}

CLI::Option* add_tile(CLI::App& app, Tile& tile, std::span<const KernelShape> compiled) {
  auto* option = app.add_option_function<std::string>(
      "--tile", [&tile, compiled](const std::string& text) { tile = parse_tile(text, compiled); },
      "Br x Bc tile shape of the kernel: " + tile_list(compiled));
  option->check(CLI::Validator(
      [compiled](std::string& text) {
        try {
          (void)parse_tile(text, compiled);
        } catch (const std::invalid_argument& e) {
          const std::string message = e.what();  // "--tile 16x16: ...": CLI11 names the flag itself
          return message.substr(std::string("--tile ").size());
        }
        return std::string();
      },
      "", "tile"));
  option->default_str(tile_name(tile));
  option->type_name("BrxBc");
  return option;
}

}  // namespace fa::cli
