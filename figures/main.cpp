// make_figures: writes the figures of docs/ from the chapters' own functions (figures/figures.h).
//
//   make_figures <folder>                                  the SVG files, into <folder>
//   make_figures <folder> --benchmarks docs/benchmarks.md  with the measured bytes of figure 3
//                         --cpu-benchmarks docs/benchmarks-cpu.md   and the times of figure 5
//
// The build target `figures` runs it with docs/figures/, docs/benchmarks.md and
// docs/benchmarks-cpu.md:
//   cmake --build build/default --target figures
#include <exception>
#include <filesystem>
#include <string>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "figures/figures.h"

int main(int argc, char** argv) {
  CLI::App app{"Writes the figures of docs/figures/ (SVG) from the chapters' own functions."};
  std::string folder;
  std::string benchmarks;
  std::string cpu_benchmarks;
  app.add_option("folder", folder, "the folder to write the figures into (created if missing)")->required();
  app.add_option("--benchmarks", benchmarks,
                 "docs/benchmarks.md, for the measured bytes of hbm-traffic.svg (a missing file: none)");
  app.add_option("--cpu-benchmarks", cpu_benchmarks,
                 "docs/benchmarks-cpu.md, for the times of softmax-bench.svg (a missing file: none)");
  CLI11_PARSE(app, argc, argv);
  try {
    figures::write_figures(folder, benchmarks, cpu_benchmarks);
    for (const char* name :
         {"online-softmax.svg", "flash-attention-2-tiles.svg", "hbm-traffic.svg", "worked-example.svg",
          "softmax-bench.svg", "mma-fragments.svg", "bank-conflicts.svg", "backward-tiles.svg", "decoding-merge.svg",
          "decoding-waves.svg", "ring-steps.svg", "hopper-descriptor.svg", "hopper-pipeline.svg"}) {
      fmt::print("wrote {}\n", (std::filesystem::path(folder) / name).string());
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "make_figures: {}\n", e.what());
    return 1;
  }
  return 0;
}
