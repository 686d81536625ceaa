// make_npy: the input files that the demo tests of tests/CMakeLists.txt feed the programs, made once
// before them (a CTest fixture).
//
//   make_npy sparse FILE B H N D     a float32 [B, H, N, D] file whose data is a hole: the header
//                                    and then the file's size set (ftruncate), so that a file of
//                                    any size costs no disk space; a program that reads it whole
//                                    before checking its shape would read gigabytes of zeros
//   make_npy value FILE B H N D X    a float32 [B, H, N, D] file of normal(0, 1) values (seed 1)
//                                    with the first value replaced by X
//   make_npy fifo FILE               a FIFO (mkfifo): opening it for reading would wait forever
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/npy.h"
#include "common/random.h"

namespace {

int usage() {
  std::fputs("usage: make_npy sparse FILE B H N D | value FILE B H N D X | fifo FILE\n", stderr);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return usage();
  const std::string kind = argv[1], path = argv[2];
  std::remove(path.c_str());
  if (kind == "fifo") return mkfifo(path.c_str(), 0600) == 0 ? 0 : 1;
  if (argc < 7) return usage();
  const fa::Shape4 shape{std::stoull(argv[3]), std::stoull(argv[4]), std::stoull(argv[5]), std::stoull(argv[6])};
  if (kind == "value" && argc == 8) {
    fa::Tensor4<float> t(shape, fa::normal<float>(shape.size(), 1));
    t.values[0] = std::stof(argv[7]);
    fa::write_npy_f32(path, t);
    return 0;
  }
  if (kind == "sparse") {
    // The header of an empty tensor of the same rank, with the shape written in: write a [1, 1, 1, 1]
    // file, whose header has the same length as long as the numbers fit its padding, then fix it up.
    fa::write_npy_f32(path, fa::Tensor4<float>(fa::Shape4{1, 1, 1, 1}));
    std::string bytes;
    {
      std::FILE* f = std::fopen(path.c_str(), "rb");
      char buffer[128];
      const std::size_t n = std::fread(buffer, 1, sizeof buffer, f);
      std::fclose(f);
      bytes.assign(buffer, n);
    }
    const std::size_t header_end = bytes.find('\n') + 1;
    std::string header = bytes.substr(0, header_end);
    const std::string old_shape = "(1, 1, 1, 1)";
    const std::string new_shape = "(" + std::string(argv[3]) + ", " + argv[4] + ", " + argv[5] + ", " + argv[6] + ")";
    const std::size_t at = header.find(old_shape);
    header.replace(at, old_shape.size(), new_shape);
    header.erase(header.size() - 1 - (new_shape.size() - old_shape.size()), new_shape.size() - old_shape.size());
    const int fd = open(path.c_str(), O_WRONLY | O_TRUNC);
    if (fd < 0 || write(fd, header.data(), header.size()) != static_cast<ssize_t>(header.size())) return 1;
    const auto size = static_cast<off_t>(header.size() + 4 * shape.size());
    const int status = ftruncate(fd, size);
    close(fd);
    return status == 0 ? 0 : 1;
  }
  return usage();
}
