#include "common/program.h"

#include <cstdio>
#include <exception>

#include <fmt/format.h>

namespace fa::demo {

Program::Program(std::string description) : app_(std::move(description)) {
  app_.option_defaults()->always_capture_default();
  summary_option_ = app_.add_option("--summary", summary_path_,
                                    "append this run's check, one tab-separated line, to FILE (the tour does)");
  summary_option_->default_str("none");
}

bool announce_long_run(double flops, double flops_per_second) {
  const double seconds = flops / flops_per_second;
  if (!(seconds > 3.0)) return false;
  fmt::print("This run does about {:.3g} GFLOP; on the CPU path that takes about {:.0f} s.\n", flops / 1e9, seconds);
  std::fflush(stdout);
  return true;
}

int Program::run(int argc, char** argv, const std::function<std::optional<Check>()>& body) {
  try {  // line 1
    app_.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app_.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app_.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fflush(stdout);
    fmt::print(stderr, "error: {} (see --help)\n", e.what());
    return kExitBadFlags;
  } catch (const std::exception& e) {  // a flag's own parser (e.g. a list) that threw
    std::fflush(stdout);
    fmt::print(stderr, "error: {} (see --help)\n", e.what());
    return kExitBadFlags;
  }
  try {
    const std::optional<Check> check = body();  // line 2
    if (!check) return 0;
    print_verdict(*check);  // line 3
    if (!summary_path_.empty()) append_summary(summary_path_, *check);
    return check->pass ? 0 : kExitFail;  // line 4
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "error: {}\n", e.what());
    return kExitFail;
  }
}

}  // namespace fa::demo
