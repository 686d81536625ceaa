// Tests of common/npy: round trips, files as NumPy writes them (versions 1.0, 2.0, 3.0), headers
// written by hand in other legal ways, every kind of bad file (each refused with a message that
// names the file and the problem), and random damage to a good file (refused or read, never a
// crash: run under the asan preset this checks that no input reaches undefined behaviour).
//
// The bytes of each file are made here, in the test; nothing is read from fixtures.
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "catch.h"
#include "common/npy.h"
#include "common/random.h"
#include "common/temporary_file.h"
#include "common/tensor.h"

namespace {

// A .npy file laid out as NumPy lays it out: magic, version, HEADER_LEN (2 bytes in 1.0, 4 after),
// then the header padded with spaces and ended by '\n' so that the data starts at a multiple of 64.
std::string npy_file(int major, const std::string& dict, const std::string& data) {
  const std::size_t len_size = major == 1 ? 2 : 4;
  std::string header = dict;
  const std::size_t unpadded = 8 + len_size + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::string file("\x93NUMPY", 6);
  file += static_cast<char>(major);
  file += '\0';
  for (std::size_t k = 0; k < len_size; ++k) file += static_cast<char>((header.size() >> (8 * k)) & 0xff);
  return file + header + data;
}

// n float32 values 0.5, 1.5, 2.5, ... as little-endian bytes (this test runs on little-endian hosts;
// the reader itself also handles big-endian ones).
std::string float_bytes(std::size_t n) {
  std::string out(4 * n, '\0');
  for (std::size_t k = 0; k < n; ++k) {
    const float x = static_cast<float>(k) + 0.5f;
    std::memcpy(&out[4 * k], &x, 4);
  }
  return out;
}

const std::string kNumpyDict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 4, 5), }";

fa::Tensor4<float> read_bytes(const std::string& bytes) {
  std::istringstream in(bytes);
  return fa::read_npy_f32_4d(in, "q.npy");
}

// The message of the std::runtime_error that reading these bytes as "q.npy" throws, or "" if none.
std::string error_reading(const std::string& bytes) {
  try {
    read_bytes(bytes);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

// Checks that reading fails with a message naming the file and containing `problem`.
void check_refused(const std::string& bytes, const std::string& problem) {
  const std::string message = error_reading(bytes);
  INFO("message: " << message << "\nexpected to contain: " << problem);
  CHECK(message.rfind("q.npy: ", 0) == 0);
  CHECK(message.find(problem) != std::string::npos);
}

// A folder of its own under the system's temporary folder, removed at the end of the test.
struct TempDir {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / fmt::format("fa_npy_test_{}", std::random_device{}());
  TempDir() { std::filesystem::create_directories(path); }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  // memcmp may not be given the null data() of an empty vector, even with a size of 0.
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), 4 * a.size()) == 0);
}

}  // namespace

TEST_CASE("a tensor written to .npy reads back bit for bit, special values included", "[common]") {
  TempDir dir;
  const fa::Shape4 shape = GENERATE(fa::Shape4{1, 1, 1, 1}, fa::Shape4{2, 3, 17, 64}, fa::Shape4{1, 2, 0, 8});
  fa::Tensor4<float> t(shape, fa::normal<float>(shape.size(), 41 + shape.seq_len));
  if (t.values.size() >= 4) {
    t.values[0] = -0.0f;
    t.values[1] = std::numeric_limits<float>::infinity();
    t.values[2] = std::numeric_limits<float>::quiet_NaN();
    t.values[3] = std::numeric_limits<float>::denorm_min();
  }
  const std::string path = dir.file("o.npy");
  fa::write_npy_f32(path, t);
  const fa::Tensor4<float> back = fa::read_npy_f32_4d(path);
  INFO("shape " << shape.str());
  CHECK(back.shape == shape);
  CHECK(same_bits(back.values, t.values));
}

TEST_CASE("the writer lays the file out as NumPy does", "[common]") {
  fa::Tensor4<float> t(fa::Shape4{2, 3, 4, 5});
  for (std::size_t k = 0; k < t.values.size(); ++k) t.values[k] = static_cast<float>(k) + 0.5f;
  std::ostringstream out;
  fa::write_npy_f32(out, t, "o.npy");
  // The same header NumPy writes for np.arange(120, dtype=np.float32).reshape(2, 3, 4, 5) + 0.5,
  // version 1.0, padded to 64 bytes (NumPy 2 pads a little more; both are legal).
  CHECK(out.str() == npy_file(1, kNumpyDict, float_bytes(120)));
}

TEST_CASE("files as NumPy writes them read in versions 1.0, 2.0 and 3.0", "[common]") {
  const int major = GENERATE(1, 2, 3);
  INFO("version " << major << ".0");
  const fa::Tensor4<float> t = read_bytes(npy_file(major, kNumpyDict, float_bytes(120)));
  CHECK(t.shape == fa::Shape4{2, 3, 4, 5});
  REQUIRE(t.values.size() == 120);
  CHECK(t.values[0] == 0.5f);
  CHECK(t.view()(1, 2, 3, 4) == 119.5f);  // C order: the last index moves fastest
  CHECK(t.view()(0, 1, 0, 0) == 20.5f);
}

TEST_CASE("float16 files read as float32, exactly, where a reader asks for them", "[common]") {
  // np.array([1.0, -2.5, 65504.0, 2**-24, 1/3, np.inf], dtype=np.float16): the bit patterns NumPy stores,
  // 1/3 being its nearest float16 (0x3555 = 0.333251953125), 2^-24 the smallest subnormal.
  const std::uint16_t bits[6] = {0x3c00, 0xc100, 0x7bff, 0x0001, 0x3555, 0x7c00};
  std::string data(12, '\0');
  std::memcpy(data.data(), bits, 12);  // little-endian host, as float_bytes assumes
  const std::string file = npy_file(1, "{'descr': '<f2', 'fortran_order': False, 'shape': (1, 1, 2, 3), }", data);
  std::istringstream in(file);
  const fa::Tensor4<float> t = fa::read_npy_f32_or_f16_4d(in, "q.npy");
  CHECK(t.shape == fa::Shape4{1, 1, 2, 3});
  CHECK(t.values ==
        std::vector<float>{1.0f, -2.5f, 65504.0f, 0x1p-24f, 0.333251953125f, std::numeric_limits<float>::infinity()});
  // The float32 reader refuses the same file, and the float16 one still reads float32 files.
  CHECK(error_reading(file).find("q.npy: dtype '<f2' is not supported: expected '<f4'") == 0);
  std::istringstream f4(npy_file(1, kNumpyDict, float_bytes(120)));
  CHECK(fa::read_npy_f32_or_f16_4d(f4, "q.npy").values[119] == 119.5f);
  // A short float16 file names its type and sizes; another dtype names both accepted ones.
  std::istringstream short_file(npy_file(1, "{'descr': '<f2', 'fortran_order': False, 'shape': (1, 1, 2, 4), }", data));
  CHECK(fa_test::message_of<std::runtime_error>([&] {
          fa::read_npy_f32_or_f16_4d(short_file, "q.npy");
        }).find("needs 16 bytes of float16 values but the file holds only 12") != std::string::npos);
  std::istringstream f8(
      npy_file(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 1, 1, 1), }", std::string(8, '\0')));
  CHECK(fa_test::message_of<std::runtime_error>([&] {
          fa::read_npy_f32_or_f16_4d(f8, "q.npy");
        }).find("or '<f2' (float16") != std::string::npos);
}

TEST_CASE("the header may order its keys, space and quote in any legal way", "[common]") {
  const std::string dict =
      GENERATE(std::string("{'shape': (2, 3, 4, 5), 'fortran_order': False, 'descr': '<f4'}"),
               std::string("{\"descr\":\"<f4\",\"fortran_order\":False,\"shape\":(2,3,4,5)}"),
               std::string("{ 'descr' : '<f4' ,\t'fortran_order' : False ,\n 'shape' : ( 2 , 3 , 4 , 5 , ) , }"),
               std::string("{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L, 4L, 5L), }"),
               std::string("  {'fortran_order': False, 'shape': (2, 3, 4, 5,), 'descr': '<f4',}  "));
  INFO(dict);
  const fa::Tensor4<float> t = read_bytes(npy_file(1, dict, float_bytes(120)));
  CHECK(t.shape == fa::Shape4{2, 3, 4, 5});
  CHECK(t.values[119] == 119.5f);
}

TEST_CASE("a shape with a zero dimension reads as an empty tensor", "[common]") {
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 0, 4), }";
  const fa::Tensor4<float> t = read_bytes(npy_file(1, dict, ""));
  CHECK(t.shape == fa::Shape4{1, 1, 0, 4});
  CHECK(t.values.empty());
}

TEST_CASE("files that are not .npy files are refused, naming the file", "[common]") {
  const std::string good = npy_file(1, kNumpyDict, float_bytes(120));
  check_refused("", "not a .npy file: it is 0 bytes long");
  check_refused("\x93NUMP", "not a .npy file: it is 5 bytes long");
  check_refused("PK\x03\x04 this is a zip file, not an array", "not a .npy file: it starts with \"PK\\x03\\x04");
  std::string v4 = good;
  v4[6] = 4;
  check_refused(v4, "format version 4.0 is not supported: expected 1.0, 2.0 or 3.0");
  std::string v1_1 = good;
  v1_1[7] = 1;
  check_refused(v1_1, "format version 1.1 is not supported");
}

TEST_CASE("a truncated header is refused", "[common]") {
  const std::string good = npy_file(1, kNumpyDict, float_bytes(120));
  check_refused(good.substr(0, 9), "truncated header: the file ends before its 2-byte header length");
  check_refused(npy_file(2, kNumpyDict, "").substr(0, 11), "before its 4-byte header length");
  check_refused(good.substr(0, 60), "truncated header: it should be 118 bytes long but the file holds only 50");
  // A version 2.0 length field of 4 GiB - 1 in a small file: refused before anything is allocated.
  std::string huge = npy_file(2, kNumpyDict, float_bytes(120));
  huge[8] = huge[9] = huge[10] = huge[11] = '\xff';
  check_refused(huge, "it should be 4294967295 bytes long");
}

TEST_CASE("a malformed header dict is refused without crashing", "[common]") {
  struct Case {
    std::string dict, problem;
  };
  const Case cases[] = {
      {"", "expected '{' but the header ends"},
      {"['descr', '<f4']", "expected '{' but found '['"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 4, 5)", "expected '}' but the header ends"},
      {"{'descr': '<f4' 'fortran_order': False, 'shape': (2, 3, 4, 5)}", "expected '}' but found '''"},
      {"{'descr': '<f4', 'fortran_order': False}", "no 'shape' key"},
      {"{'shape': (2, 3, 4, 5), 'fortran_order': False}", "no 'descr' key"},
      {"{'descr': '<f4', 'shape': (2, 3, 4, 5)}", "no 'fortran_order' key"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 4, 5), 'extra': 1}", "unexpected key 'extra'"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 4, 5)}", "'descr' appears twice"},
      {"{'descr': '<f4', 'fortran_order': false, 'shape': (2, 3, 4, 5)}", "fortran_order must be True or False"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3, 4, 5]}", "shape must be a tuple of integers"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2.0, 3, 4, 5)}", "expected ')' but found '.'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, , 4, 5)}", "a shape holds integers only"},
      {"{'descr': [('x', '<f4')], 'fortran_order': False, 'shape': (2, 3, 4, 5)}",
       "structured dtypes are not supported"},
      {"{'descr': '<f4, 'fortran_order': False, 'shape': (2, 3, 4, 5)}", "expected '}' but found 'f'"},
      {"{'descr': '<f4\\x00', 'fortran_order': False, 'shape': (2, 3, 4, 5)}", "escapes in strings are not supported"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 4, 5)}}", "text after the closing '}'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999, 3, 4, 5)}", "larger than 2^63"},
      {std::string("{'descr': '<f4") + '\0' + "', 'fortran_order': False, 'shape': (2, 3, 4, 5)}", "dtype '<f4\\x00'"},
      {"{'descr: '<f4'}", "expected ':' but found '<'"},
      {"{'descr': '<f4", "a string is not closed"},
  };
  for (const Case& c : cases) {
    INFO("header: " << c.dict);
    check_refused(npy_file(1, c.dict, float_bytes(120)), c.problem);
  }
  const std::string message = error_reading(npy_file(1, "{'descr': <f4}", float_bytes(120)));
  CHECK(message.find("q.npy: malformed header") == 0);
  CHECK(message.find("(at byte 10 of the header \"{'descr': <f4}") != std::string::npos);
}

TEST_CASE("another dtype, Fortran order or a shape that is not 4-D is refused, saying what to do", "[common]") {
  auto with = [](const std::string& descr, const std::string& fortran, const std::string& shape) {
    return npy_file(1, fmt::format("{{'descr': '{}', 'fortran_order': {}, 'shape': {}, }}", descr, fortran, shape),
                    float_bytes(120));
  };
  check_refused(with("<f8", "False", "(2, 3, 4, 5)"),
                "dtype '<f8' is not supported: expected '<f4' (float32, little-endian); save float32");
  check_refused(with(">f4", "False", "(2, 3, 4, 5)"),
                "dtype '>f4' is not supported: expected '<f4' "
                "(float32, little-endian); the file is big-endian");
  for (const char* other : {"|f4", "=f4", "<f2", "<i4", "float32", "<f4 ", ""}) {
    check_refused(with(other, "False", "(2, 3, 4, 5)"), fmt::format("dtype '{}' is not supported", other));
  }
  check_refused(with("<f4", "True", "(2, 3, 4, 5)"), "fortran_order is True (column-major data)");
  check_refused(with("<f4", "False", "(6, 4, 5)"), "shape (6, 4, 5) has 3 dimensions: expected 4");
  check_refused(with("<f4", "False", "(120,)"), "shape (120,) has 1 dimension");
  check_refused(with("<f4", "False", "()"), "shape () has 0 dimensions");
  check_refused(with("<f4", "False", "(1, 2, 3, 4, 5)"), "has 5 dimensions");
  check_refused(with("<f4", "False", "(-2, -3, 4, 5)"), "shape (-2, -3, 4, 5) has a negative dimension");
}

TEST_CASE("data that does not match the shape is refused with both sizes", "[common]") {
  auto file = [](const std::string& shape, std::size_t values) {
    return npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }", float_bytes(values));
  };
  check_refused(file("(2, 3, 4, 5)", 119),
                "truncated data: shape (2, 3, 4, 5) needs 480 bytes of float32 values but the file holds only 476");
  check_refused(file("(2, 3, 4, 5)", 121),
                "needs 480 bytes of float32 values but the file holds 484 after the header (4 too many)");
  std::string odd = file("(2, 3, 4, 5)", 120);
  odd.pop_back();
  check_refused(odd, "holds only 479");
  // Huge dimensions: the product is checked before anything is allocated.
  check_refused(file("(1073741824, 1073741824, 1, 1)", 120), "needs 4611686018427387904 bytes");
  check_refused(file("(1099511627776, 1099511627776, 1099511627776, 1099511627776)", 120),
                "needs more than 2^64 bytes of data");
  check_refused(file("(9223372036854775807, 9223372036854775807, 0, 1)", 1), "(4 too many)");
}

TEST_CASE("missing, unreadable and unwritable paths are refused with the path", "[common]") {
  TempDir dir;
  const std::string missing = dir.file("missing.npy");
  CHECK(fa_test::message_of<std::runtime_error>([&] {
          fa::read_npy_f32_4d(missing);
        }).find(missing + ": cannot open for reading") == 0);
  CHECK(fa_test::message_of<std::runtime_error>([&] {
          fa::read_npy_f32_4d(dir.path.string());
        }).find("is a directory") != std::string::npos);
  const std::string nowhere = dir.file("no/such/folder/o.npy");
  CHECK(fa_test::message_of<std::runtime_error>([&] {
          fa::write_npy_f32(nowhere, fa::Tensor4<float>(fa::Shape4{1, 1, 1, 1}));
        }).find(nowhere + ": the folder") == 0);
  CHECK(fa_test::message_of<std::runtime_error>([&] { fa::check_output_path(nowhere); }).find("does not exist") !=
        std::string::npos);
  CHECK(fa_test::message_of<std::runtime_error>([&] {
          fa::check_output_path(dir.path.string());
        }).find("is a directory") != std::string::npos);
  CHECK(fa_test::message_of<std::runtime_error>([&] { fa::check_output_path(dir.file("fine.npy")); }).empty());
  // Files on disk go through the same checks as streams.
  const std::string f8 = dir.file("k.npy");
  std::ofstream(f8, std::ios::binary) << npy_file(
      1, "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 1, 1, 1), }", std::string(8, '\0'));
  CHECK(fa_test::message_of<std::runtime_error>([&] {
          fa::read_npy_f32_4d(f8);
        }).find(f8 + ": dtype '<f8' is not supported") == 0);
}

TEST_CASE("a FIFO or a device is refused by name instead of waiting for a writer", "[common]") {
  TempDir dir;
  const std::string fifo = dir.file("q.npy");
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  auto message_of = [](const std::string& path) -> std::string {
    try {
      (void)fa::read_npy_f32_4d(path);
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "";
  };
  CHECK(message_of(fifo).find(fifo + ": is not a regular file") == 0);
  CHECK(message_of("/dev/zero").find("/dev/zero: is not a regular file") == 0);
  CHECK_THROWS_AS(fa::read_npy_shape(fifo), std::runtime_error);
}

TEST_CASE("a file whose shape needs more memory than the machine has is refused before allocating", "[common]") {
  TempDir dir;
  // A sparse file: a header that asks for 2^37 floats (512 GiB) and that many bytes of holes.
  const std::string sparse = dir.file("huge.npy");
  {
    std::ofstream out(sparse, std::ios::binary);
    out << npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 134217728, 1024), }", "");
  }
  const std::uintmax_t header_bytes = std::filesystem::file_size(sparse);
  std::filesystem::resize_file(sparse, header_bytes + (std::uintmax_t{1} << 39));
  CHECK(fa::read_npy_shape(sparse) == fa::Shape4{1, 1, 134217728, 1024});  // the shape alone is fine
  try {
    (void)fa::read_npy_f32_4d(sparse);
    FAIL("a 512 GiB tensor was accepted");
  } catch (const std::runtime_error& e) {
    INFO(e.what());
    CHECK(std::string(e.what()).find(sparse + ": this run needs 550 GB") == 0);
    CHECK(std::string(e.what()).find("of memory are available") != std::string::npos);
  }
}

TEST_CASE("a write that fails part way leaves the earlier file whole and no partial file", "[common]") {
  TempDir dir;
  const std::string path = dir.file("o.npy");
  const fa::Tensor4<float> small(fa::Shape4{1, 1, 2, 2}, fa::normal<float>(4, 1));
  fa::write_npy_f32(path, small);
  const auto before = std::filesystem::file_size(path);
  // `ulimit -f` of 64 kB: a 1 MB tensor cannot be written whole.
  rlimit old{};
  REQUIRE(getrlimit(RLIMIT_FSIZE, &old) == 0);
  rlimit limit = old;
  limit.rlim_cur = 64 * 1024;
  REQUIRE(setrlimit(RLIMIT_FSIZE, &limit) == 0);
  const fa::Tensor4<float> big(fa::Shape4{1, 1, 512, 512}, 1.0f);
  std::string message;
  try {
    fa::write_npy_f32(path, big);
  } catch (const std::runtime_error& e) {
    message = e.what();
  }
  REQUIRE(setrlimit(RLIMIT_FSIZE, &old) == 0);
  INFO(message);
  // The cause named as what it is: the file-size limit (EFBIG), not a full disk.
  CHECK(message.find(path + ": the file-size limit of this process stops the write") == 0);
  CHECK(std::filesystem::file_size(path) == before);
  CHECK(fa::read_npy_f32_4d(path).values == small.values);
  std::size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path)) files += entry.is_regular_file();
  CHECK(files == 1);  // the temporary file was removed
}

TEST_CASE("every truncation and random damage of a good file is refused or read, never a crash", "[common]") {
  const std::string good = npy_file(2, kNumpyDict, float_bytes(120));
  // Cutting the file anywhere must be refused: every byte of it is needed.
  for (std::size_t n = 0; n < good.size(); ++n) {
    INFO("first " << n << " bytes");
    CHECK(!error_reading(good.substr(0, n)).empty());
  }
  // Random bytes overwritten in the first 128 (magic, version, length, header): each result is
  // either a tensor or a std::runtime_error naming the file. Any other exception, or a crash, fails.
  std::mt19937_64 engine(20240607);
  std::uniform_int_distribution<std::size_t> where(0, 127);
  std::uniform_int_distribution<int> byte(0, 255), count(1, 4);
  int refused = 0, read = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    std::string damaged = good;
    for (int k = count(engine); k > 0; --k) damaged[where(engine)] = static_cast<char>(byte(engine));
    const std::string message = error_reading(damaged);
    if (message.empty()) {
      ++read;
    } else {
      ++refused;
      REQUIRE(message.rfind("q.npy: ", 0) == 0);
    }
  }
  // Most damage is caught, and damage to the padding spaces is harmless; both must occur.
  CHECK(refused > 0);
  CHECK(read > 0);
}

TEST_CASE("files are written together: when one cannot be, none is, and the earlier ones stay", "[common]") {
  TempDir dir;
  const std::string first = dir.file("dq.npy"), second = dir.file("dk.npy");
  const fa::Tensor4<float> old_values(fa::Shape4{1, 1, 2, 2}, fa::normal<float>(4, 1));
  fa::write_npy_f32(first, old_values);
  const fa::Tensor4<float> new_values(fa::Shape4{1, 1, 3, 2}, fa::normal<float>(6, 2));
  // The second path's folder does not exist: refused before anything is written.
  const fa::NpyFile refused[] = {{first, &new_values}, {dir.file("no-such-folder/dv.npy"), &new_values}};
  CHECK_THROWS_AS(fa::write_npy_f32_files(refused), std::runtime_error);
  CHECK(fa::read_npy_f32_4d(first).values == old_values.values);
  // Both can be written: both are, each whole.
  const fa::NpyFile both[] = {{first, &new_values}, {second, &old_values}};
  fa::write_npy_f32_files(both);
  CHECK(fa::read_npy_f32_4d(first).values == new_values.values);
  CHECK(fa::read_npy_f32_4d(second).values == old_values.values);
  std::size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path)) files += entry.is_regular_file();
  CHECK(files == 2);  // no temporary file left
}

// Not under ThreadSanitizer: the forked child inherits Catch2's own signal handler, which allocates,
// and TSan reports that (not this code) as a signal-unsafe call before the child can end.
#if !defined(__SANITIZE_THREAD__)
TEST_CASE("a temporary file is removed when SIGINT, SIGTERM, SIGHUP, SIGPIPE or SIGQUIT ends the process", "[common]") {
  for (const int signal_number : {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGQUIT}) {
    CAPTURE(signal_number);
    TempDir dir;
    const std::string path = dir.file("big.npy");
    int ready[2];
    REQUIRE(pipe(ready) == 0);
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {  // the child: a file half written, then it waits to be interrupted
      const rlimit no_core{0, 0};
      setrlimit(RLIMIT_CORE, &no_core);     // (SIGQUIT's default dumps core)
      std::signal(signal_number, SIG_DFL);  // not Catch2's handler, which the child inherits: the default
      fa::TemporaryFile temporary(path);
      const char byte = 'x';
      if (write(temporary.fd(), &byte, 1) != 1) _exit(3);
      if (write(ready[1], &byte, 1) != 1) _exit(4);  // "the temporary file exists"
      for (;;) pause();
    }
    char byte = 0;
    REQUIRE(read(ready[0], &byte, 1) == 1);
    close(ready[0]);
    close(ready[1]);
    std::size_t before = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir.path)) before += entry.is_regular_file();
    CHECK(before == 1);  // the temporary file, beside where big.npy will be
    REQUIRE(kill(child, signal_number) == 0);
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    // The process ended by the signal, as it would have without the handler, and left nothing.
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == signal_number);
    std::size_t after = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir.path)) after += entry.is_regular_file();
    CHECK(after == 0);
  }
}

TEST_CASE("a signal the process ignores stays ignored while a file is written, and the file is written", "[common]") {
  TempDir dir;
  const std::string path = dir.file("o.npy");
  int ready[2], go[2];
  REQUIRE(pipe(ready) == 0);
  REQUIRE(pipe(go) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {  // the child: SIGINT ignored (`trap '' INT`), a file half written, then committed
    std::signal(SIGINT, SIG_IGN);
    try {
      fa::TemporaryFile temporary(path);
      char byte = 'x';
      if (write(temporary.fd(), &byte, 1) != 1) _exit(3);
      if (write(ready[1], &byte, 1) != 1) _exit(4);  // "interrupt me now"
      if (read(go[0], &byte, 1) != 1) _exit(5);      // "it was sent"
      temporary.commit();
    } catch (const std::exception&) {
      _exit(6);  // "cannot replace the file": the handler removed the temporary file
    }
    _exit(0);
  }
  char byte = 0;
  REQUIRE(read(ready[0], &byte, 1) == 1);
  REQUIRE(kill(child, SIGINT) == 0);
  // (the signal is delivered, or ignored, before kill returns when the child is not blocking it;
  // waiting a little makes sure on any scheduler)
  usleep(100000);
  REQUIRE(write(go[1], &byte, 1) == 1);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  for (const int fd : {ready[0], ready[1], go[0], go[1]}) close(fd);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(std::filesystem::exists(path));
  std::size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path)) files += entry.is_regular_file();
  CHECK(files == 1);  // o.npy, no temporary file
}
#endif

TEST_CASE("the first NaN or infinity of a file is found with its index, in float32 and float16", "[common]") {
  TempDir dir;
  const fa::Shape4 shape{1, 2, 3, 4};
  fa::Tensor4<float> t(shape, fa::normal<float>(shape.size(), 7));
  const std::string path = dir.file("q.npy");
  fa::write_npy_f32(path, t);
  CHECK_FALSE(fa::first_nonfinite(path).has_value());
  for (const float bad : {NAN, INFINITY, -INFINITY}) {
    t.values[17] = bad;
    t.values[20] = NAN;  // a later one is not the first
    fa::write_npy_f32(path, t);
    const std::optional<fa::NonFiniteValue> found = fa::first_nonfinite(path);
    REQUIRE(found.has_value());
    CHECK(found->index == 17);
    CHECK(found->shape == shape);
    CHECK((std::isnan(bad) ? std::isnan(found->value) : found->value == bad));
  }
  // float16: the bits of a NaN (0x7e00) at value 5 of a [1, 1, 2, 4] file, where asked for.
  const std::string header = "{'descr': '<f2', 'fortran_order': False, 'shape': (1, 1, 2, 4), }";
  std::string half(16, '\0');
  half[10] = '\x00';
  half[11] = '\x7e';
  std::ofstream(dir.file("h.npy"), std::ios::binary) << npy_file(1, header, half);
  const std::optional<fa::NonFiniteValue> found = fa::first_nonfinite(dir.file("h.npy"), true);
  REQUIRE(found.has_value());
  CHECK(found->index == 5);
}

TEST_CASE("checking an output path leaves nothing behind, and refuses a name too long before any work", "[common]") {
  TempDir dir;
  fa::check_output_path(dir.file("o.npy"));
  CHECK(std::filesystem::is_empty(dir.path));                              // the probe's temporary file is gone
  const std::string long_name = dir.file(std::string(300, 'a') + ".npy");  // past NAME_MAX (255)
  try {
    fa::check_output_path(long_name);
    FAIL("a name of 304 bytes was accepted");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()).find("cannot create a temporary file beside it") != std::string::npos);
  }
}
