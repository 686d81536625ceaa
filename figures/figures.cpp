// figures/figures.cpp: all five figures, and writing them to a folder (line 5 of figures.h).
#include "figures/figures.h"

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include <fmt/format.h>


namespace figures {

std::vector<Figure> make_figures(const std::filesystem::path& benchmarks) {
  std::optional<MeasuredTraffic> measured;
  std::error_code error;
  if (std::filesystem::exists(benchmarks, error)) {
    std::ifstream in(benchmarks, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    if (!in) throw std::runtime_error(fmt::format("cannot read {}", benchmarks.string()));
    measured = read_measured_traffic(text.str());
  }
  return {{"online-softmax.svg", online_softmax_figure()},
          {"flash-attention-2-tiles.svg", tiles_figure()},
          {"hbm-traffic.svg", traffic_figure(measured)},
          {"worked-example.svg", worked_example_figure()},
          {"backward-tiles.svg", backward_tiles_figure()}};
}

void write_figures(const std::filesystem::path& folder, const std::filesystem::path& benchmarks) {
  const std::vector<Figure> figures = make_figures(benchmarks);
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
