// figures/figures.cpp: all thirteen figures, and writing them to a folder (line 7 of figures.h).
#include "figures/figures.h"

#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include <fmt/format.h>

namespace figures {

namespace {
// The text of a file, or nullopt when there is none.
std::optional<std::string> read_if_there(const std::filesystem::path& path) {
  std::error_code error;
  if (!std::filesystem::exists(path, error)) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) throw std::runtime_error(fmt::format("cannot read {}", path.string()));
  return text.str();
}
}  // namespace

std::vector<Figure> make_figures(const std::filesystem::path& benchmarks, const std::filesystem::path& cpu_benchmarks) {
  std::optional<MeasuredTraffic> measured;
  if (const auto text = read_if_there(benchmarks)) measured = read_measured_traffic(*text);
  std::optional<SoftmaxBench> softmax_bench;
  if (const auto text = read_if_there(cpu_benchmarks)) softmax_bench = read_softmax_bench(*text);
  return {{"online-softmax.svg", online_softmax_figure()},
          {"flash-attention-2-tiles.svg", tiles_figure()},
          {"hbm-traffic.svg", traffic_figure(measured)},
          {"worked-example.svg", worked_example_figure()},
          {"softmax-bench.svg", softmax_bench_figure(softmax_bench)},
          {"mma-fragments.svg", mma_fragments_figure()},
          {"bank-conflicts.svg", bank_conflicts_figure()},
          {"backward-tiles.svg", backward_tiles_figure()},
          {"decoding-merge.svg", decoding_merge_figure()},
          {"decoding-waves.svg", decoding_waves_figure()},
          {"ring-steps.svg", ring_steps_figure()},
          {"hopper-descriptor.svg", hopper_descriptor_figure()},
          {"hopper-pipeline.svg", hopper_pipeline_figure()}};
}

void write_figures(const std::filesystem::path& folder, const std::filesystem::path& benchmarks,
                   const std::filesystem::path& cpu_benchmarks) {
  const std::vector<Figure> figures = make_figures(benchmarks, cpu_benchmarks);
  std::filesystem::create_directories(folder);
  for (const Figure& f : figures) {
    const std::filesystem::path path = folder / f.name;
    std::ofstream out(path, std::ios::binary);
    out << f.svg;
    out.close();
    if (!out) throw std::runtime_error(fmt::format("cannot write {}", path.string()));
  }
}

}  // namespace figures
