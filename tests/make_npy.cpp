// make_npy: the input files that the demo tests of tests/CMakeLists.txt feed the programs, made once
// before them (a CTest fixture).
//
//   make_npy sparse FILE B H N D     a float32 [B, H, N, D] file whose data is a hole: the header
//                                    and then the file's size set (ftruncate), so that a file of
//                                    any size costs no disk space; a program that reads it whole
//                                    before checking its shape would read gigabytes of zeros
//   make_npy value FILE B H N D X [I]
//                                    a float32 [B, H, N, D] file of normal(0, 1) values (seed 1)
//                                    with value I (C order; default 0, the first) replaced by X
//                                    (a number, or nan, inf, -inf)
//   make_npy fifo FILE               a FIFO (mkfifo): opening it for reading would wait forever
//   make_npy header FILE TEXT        NumPy's magic and version 1.0, then TEXT as the header (a
//                                    malformed one, for the refusals), then no data
//   make_npy inputs DIR B H N D SEED DIR/q.npy, k.npy and v.npy: the Q, K, V [B, H, N, D] that an
//                                    attention demo draws from --seed SEED (AttentionFlags::load),
//                                    so that a run from the files can be held to the run from the seed;
//                                    and DIR/do.npy, the dO that chapters 07 and 09 (--backward)
//                                    draw from it (normal(0, 1), seed SEED + 3)
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "common/npy.h"
#include "common/program.h"
#include "common/random.h"

namespace {

int usage() {
  std::fputs(
      "usage: make_npy sparse FILE B H N D | value FILE B H N D X [I] | fifo FILE | header FILE TEXT | inputs DIR B H "
      "N D "
      "SEED\n",
      stderr);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return usage();
  const std::string kind = argv[1], path = argv[2];
  if (kind == "inputs" && argc == 8) {
    fa::AttentionFlags flags;
    flags.batch = std::stoull(argv[3]);
    flags.heads = std::stoull(argv[4]);
    flags.seq_len_q = flags.seq_len_k = std::stoull(argv[5]);
    flags.head_dim = std::stoull(argv[6]);
    flags.seed = std::stoull(argv[7]);
    const fa::AttentionFlags::Inputs in = flags.load();
    std::filesystem::create_directories(path);
    fa::write_npy_f32(path + "/q.npy", in.Q);
    fa::write_npy_f32(path + "/k.npy", in.K);
    fa::write_npy_f32(path + "/v.npy", in.V);
    fa::write_npy_f32(path + "/do.npy",
                      fa::Tensor4<float>(in.Q.shape, fa::normal<float>(in.Q.shape.size(), flags.seed + 3)));
    return 0;
  }
  std::remove(path.c_str());
  if (kind == "fifo") return mkfifo(path.c_str(), 0600) == 0 ? 0 : 1;
  if (kind == "header" && argc == 4) {
    const std::string header = argv[3];
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) return 1;
    const unsigned char lead[] = {0x93,
                                  'N',
                                  'U',
                                  'M',
                                  'P',
                                  'Y',
                                  1,
                                  0,
                                  static_cast<unsigned char>(header.size() & 0xff),
                                  static_cast<unsigned char>(header.size() >> 8)};
    const bool written = std::fwrite(lead, 1, sizeof lead, f) == sizeof lead &&
                         std::fwrite(header.data(), 1, header.size(), f) == header.size();
    return std::fclose(f) == 0 && written ? 0 : 1;
  }
  if (argc < 7) return usage();
  const fa::Shape4 shape{std::stoull(argv[3]), std::stoull(argv[4]), std::stoull(argv[5]), std::stoull(argv[6])};
  if (kind == "value" && (argc == 8 || argc == 9)) {
    fa::Tensor4<float> t(shape, fa::normal<float>(shape.size(), 1));
    const std::size_t index = argc == 9 ? std::stoull(argv[8]) : 0;
    if (index >= t.values.size()) return usage();
    t.values[index] = std::stof(argv[7]);
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
