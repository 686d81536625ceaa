// The frame of every demo's main(): its flags, --summary, errors, the verdict and the exit status,
// written once so that no chapter can get them wrong.
//
//   int main(int argc, char** argv) {
//     fa::demo::Program program("Chapter 04: naive attention ...");
//     fa::AttentionCli cli;
//     fa::add_attention_flags(program.app(), cli);
//     return program.run(argc, argv, [&]() -> std::optional<fa::demo::Check> {
//       ... print the chapter's content ...
//       return check;            // or std::nullopt when this run checks nothing
//     });
//   }
//
// run() does, in order:
//   1. parse the flags; --help prints every flag with its default; a refused flag prints one line
//      "error: --head-dim: 0 is not accepted; ... (see --help)" on stderr and exits with status 2
//   2. run the body; an exception prints one line "error: <what>" on stderr and exits with 1
//   3. print the check's verdict line (common/demo.h) and, with --summary FILE, append it to FILE
//   4. exit with 0 for PASS (or no check), 1 for FAIL
#pragma once

#include <functional>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "common/demo.h"

namespace fa::demo {

inline constexpr int kExitFail = 1;      // the check failed, or the run stopped with an error
inline constexpr int kExitBadFlags = 2;  // a flag was refused before any work

// A rough estimate of a run's time on the CPU path: `flops` floating-point operations at
// `flops_per_second`, a rate measured once for the chapter on a 2-core laptop (so a slower machine
// takes longer: the figure is "about"). When the estimate exceeds 3 seconds, prints one line
//   "This run does about 17 GFLOP; on the CPU path that is about 20 s (--device gpu is faster)."
// and returns true, so that the demo shows a progress line (common/simt/progress.h). Never throws.
bool announce_long_run(double flops, double flops_per_second);

class Program {
 public:
  // `description` heads --help. Registers --summary FILE.
  explicit Program(std::string description);

  CLI::App& app() { return app_; }
  // The --summary option, e.g. for ->excludes("--traffic").
  CLI::Option* summary_option() { return summary_option_; }

  // Steps 1-4 above. Returns the exit status for main() to return. Never throws.
  int run(int argc, char** argv, const std::function<std::optional<Check>()>& body);

 private:
  CLI::App app_;
  std::string summary_path_;
  CLI::Option* summary_option_ = nullptr;
};

}  // namespace fa::demo
