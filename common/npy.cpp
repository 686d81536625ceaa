// NumPy .npy reading and writing (see npy.h for the format and what is accepted).
//
// The reader works in this order, so that a malformed file fails early and cheaply:
//   1. the magic string and the version                    (8 bytes)
//   2. HEADER_LEN, checked against what the file still holds, before the header is allocated
//   3. the header dict, parsed by a small hand-written parser for the one Python literal a .npy
//      header is: no recursion, no numbers but non-negative integers, no escapes in strings
//   4. descr, fortran_order and the shape, checked one by one
//   5. the data size, 4 * product(shape) computed with overflow checks, compared with the bytes
//      after the header, before the tensor is allocated
//   6. the data, read straight into the tensor (byte-swapped on a big-endian host)
#include "common/npy.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "common/memory.h"
#include "common/simt/instructions/half_precision.h"  // simt::f16: float16 files, widened exactly
#include "common/temporary_file.h"

namespace fa {
namespace {

constexpr std::string_view kMagic{"\x93NUMPY", 6};
// NumPy refuses headers over 10000 bytes unless told otherwise; a float32 array's header is about
// 128. Anything longer than this is not a file this reader wants, and is refused before allocation.
constexpr std::uint64_t kMaxHeaderLen = 1 << 16;

[[noreturn]] void fail(const std::string& name, const std::string& what) {
  throw std::runtime_error(fmt::format("{}: {}", name, what));
}

// Untrusted text for an error message: at most 160 characters, anything unprintable as \xNN.
std::string printable(std::string_view text) {
  std::string out;
  for (std::size_t k = 0; k < text.size() && k < 160; ++k) {
    const auto c = static_cast<unsigned char>(text[k]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  if (text.size() > 160) out += "...";
  return out;
}

std::uint64_t little_endian(const unsigned char* bytes, std::size_t count) {
  std::uint64_t value = 0;
  for (std::size_t k = count; k-- > 0;) value = (value << 8) | bytes[k];
  return value;
}

// The three entries of a header dict. Dimensions are kept signed, so that a negative one can be
// reported as such.
struct HeaderFields {
  std::optional<std::string> descr;
  std::optional<bool> fortran_order;
  std::optional<std::vector<std::int64_t>> shape;
};

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "(";
  for (std::size_t k = 0; k < shape.size(); ++k) s += (k == 0 ? "" : ", ") + std::to_string(shape[k]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

// Step 3: a parser for the header dict, e.g.
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 8, 1024, 64), }
// Grammar (Python's, restricted to what a .npy header holds):
//   dict  = '{' [entry (',' entry)* [',']] '}'       entry = string ':' value
//   value = string | 'True' | 'False' | tuple         tuple = '(' [int (',' int)* [',']] ')'
//   int   = ['-'] digits ['L']                        string = '...' or "..." without backslashes
// with whitespace allowed between any two tokens. Each loop advances pos or stops, so it ends.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& name) : text_(text), name_(name) {}

  HeaderFields parse() {
    HeaderFields fields;
    expect('{');
    while (!eat('}')) {
      const std::string key = parse_string();
      expect(':');
      if (key == "descr") {
        if (fields.descr) error("the key 'descr' appears twice");
        if (peek() != '\'' && peek() != '"') {
          error("descr must be a string such as '<f4' (structured dtypes are not supported)");
        }
        fields.descr = parse_string();
      } else if (key == "fortran_order") {
        if (fields.fortran_order) error("the key 'fortran_order' appears twice");
        fields.fortran_order = parse_bool();
      } else if (key == "shape") {
        if (fields.shape) error("the key 'shape' appears twice");
        fields.shape = parse_tuple();
      } else {
        error(
            fmt::format("unexpected key '{}': a .npy header holds exactly 'descr', "
                        "'fortran_order' and 'shape'",
                        printable(key)));
      }
      if (!eat(',')) {
        expect('}');
        break;
      }
    }
    skip_space();
    if (pos_ != text_.size()) error("text after the closing '}'");
    if (!fields.descr) error("no 'descr' key");
    if (!fields.fortran_order) error("no 'fortran_order' key");
    if (!fields.shape) error("no 'shape' key");
    return fields;
  }

 private:
  [[noreturn]] void error(const std::string& what) const {
    fail(name_, fmt::format("malformed header: {} (at byte {} of the header \"{}\")", what, pos_, printable(text_)));
  }

  void skip_space() {
    while (pos_ < text_.size() && std::string_view(" \t\n\r\f\v").find(text_[pos_]) != std::string_view::npos) {
      ++pos_;
    }
  }
  // The next character after any whitespace, or '\0' at the end.
  char peek() {
    skip_space();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }
  bool eat(char c) {
    if (peek() == c) {  // c is never '\0', the end
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) {
      error(pos_ < text_.size() ? fmt::format("expected '{}' but found '{}'", c, printable(text_.substr(pos_, 1)))
                                : fmt::format("expected '{}' but the header ends", c));
    }
  }

  std::string parse_string() {
    const char quote = peek();
    if (quote != '\'' && quote != '"') error("expected a quoted string");
    const std::size_t start = ++pos_;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      if (text_[pos_] == '\\') error("escapes in strings are not supported");
      ++pos_;
    }
    if (pos_ == text_.size()) error("a string is not closed");
    return std::string(text_.substr(start, pos_++ - start));
  }

  bool parse_bool() {
    skip_space();
    for (const auto& [word, value] :
         {std::pair{std::string_view("True"), true}, std::pair{std::string_view("False"), false}}) {
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return value;
      }
    }
    error("fortran_order must be True or False");
  }

  std::int64_t parse_int() {
    skip_space();
    const bool negative = pos_ < text_.size() && text_[pos_] == '-';
    if (negative) ++pos_;
    if (pos_ >= text_.size() || text_[pos_] < '0' || text_[pos_] > '9') {
      error("a shape holds integers only");
    }
    std::int64_t magnitude = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      const int digit = text_[pos_] - '0';
      if (magnitude > (std::numeric_limits<std::int64_t>::max() - digit) / 10) {
        error("a dimension of the shape is larger than 2^63");
      }
      magnitude = magnitude * 10 + digit;
      ++pos_;
    }
    if (pos_ < text_.size() && (text_[pos_] == 'L' || text_[pos_] == 'l')) ++pos_;  // Python 2 long
    return negative ? -magnitude : magnitude;
  }

  std::vector<std::int64_t> parse_tuple() {
    if (peek() != '(') error("shape must be a tuple of integers such as (2, 8, 1024, 64)");
    ++pos_;
    std::vector<std::int64_t> dims;
    while (!eat(')')) {
      if (dims.size() == 32) error("a shape has at most 32 dimensions");  // NumPy's own limit
      dims.push_back(parse_int());
      if (!eat(',')) {
        expect(')');
        break;
      }
    }
    return dims;
  }

  std::string_view text_;
  const std::string& name_;
  std::size_t pos_ = 0;
};

// Step 4: descr, fortran_order and the shape, each with what to do about it.
// With accept_f16, descr '<f2' (IEEE binary16, little-endian) is accepted as well as '<f4'.
Shape4 check_fields(const HeaderFields& f, const std::string& name, bool accept_f16) {
  if (*f.descr != "<f4" && !(accept_f16 && *f.descr == "<f2")) {
    std::string hint = "save float32 values, e.g. np.save(path, a.astype(np.float32))";
    if (f.descr->size() >= 2 && (*f.descr)[0] == '>') {
      hint = "the file is big-endian: save a.astype('<f4')";
    }
    fail(name, fmt::format("dtype '{}' is not supported: expected '<f4' (float32, little-endian){}; {}",
                           printable(*f.descr), accept_f16 ? " or '<f2' (float16, little-endian)" : "", hint));
  }
  if (*f.fortran_order) {
    fail(name,
         "fortran_order is True (column-major data) but this reader needs C order: save "
         "np.ascontiguousarray(a)");
  }
  const std::vector<std::int64_t>& dims = *f.shape;
  if (dims.size() != 4) {
    fail(name, fmt::format("shape {} has {} dimensions: expected 4, [batch, heads, seq_len, head_dim]",
                           shape_text(dims), dims.size()));
  }
  for (std::int64_t d : dims) {
    if (d < 0) fail(name, fmt::format("shape {} has a negative dimension", shape_text(dims)));
  }
  return Shape4{static_cast<std::size_t>(dims[0]), static_cast<std::size_t>(dims[1]), static_cast<std::size_t>(dims[2]),
                static_cast<std::size_t>(dims[3])};
}

// Step 5: value_bytes * product(dims), or nothing when that exceeds 2^64 - 1.
std::optional<std::uint64_t> data_bytes(const std::vector<std::int64_t>& dims, std::uint64_t value_bytes) {
  std::uint64_t bytes = value_bytes;
  if (std::find(dims.begin(), dims.end(), 0) != dims.end()) return 0;
  for (std::int64_t d : dims) {
    const auto u = static_cast<std::uint64_t>(d);
    if (bytes > std::numeric_limits<std::uint64_t>::max() / u) return std::nullopt;
    bytes *= u;
  }
  return bytes;
}

// Steps 1-5: everything before the data. Leaves `in` at the first data byte; returns the shape and
// the number of data bytes (which the file holds exactly).
struct Header {
  Shape4 shape;
  std::uint64_t data_bytes = 0;
  bool f16 = false;  // descr '<f2' (only with accept_f16)
};

Header read_header(std::istream& in, const std::string& name, bool accept_f16 = false) {
  // The size of what follows, from the current position.
  const std::streampos start = in.tellg();
  in.seekg(0, std::ios::end);
  const std::streampos end = in.tellg();
  in.seekg(start);
  if (start == std::streampos(-1) || end == std::streampos(-1) || !in) {
    fail(name, "cannot tell the size of the file (it must be a regular, seekable file)");
  }
  const auto file_size = static_cast<std::uint64_t>(end - start);
  auto read_exactly = [&](void* to, std::uint64_t count) {
    if (count == 0) return;  // to may be the null data() of an empty tensor
    in.read(static_cast<char*>(to), static_cast<std::streamsize>(count));
    if (static_cast<std::uint64_t>(in.gcount()) != count) fail(name, "read error");
  };

  // Step 1: the magic string and the version.
  constexpr std::uint64_t kPrefix = 8;
  if (file_size < kPrefix) {
    fail(name, fmt::format("not a .npy file: it is {} bytes long, and a .npy file starts with 8 "
                           "bytes of magic string and version",
                           file_size));
  }
  unsigned char prefix[kPrefix];
  read_exactly(prefix, kPrefix);
  const std::string_view magic(reinterpret_cast<const char*>(prefix), 6);
  if (magic != kMagic) {
    fail(name, fmt::format("not a .npy file: it starts with \"{}\" instead of \"\\x93NUMPY\"", printable(magic)));
  }
  const unsigned major = prefix[6], minor = prefix[7];
  if (minor != 0 || major < 1 || major > 3) {
    fail(name, fmt::format("format version {}.{} is not supported: expected 1.0, 2.0 or 3.0", major, minor));
  }

  // Step 2: HEADER_LEN, 2 bytes in version 1.0, 4 in 2.0 and 3.0.
  const std::uint64_t len_size = major == 1 ? 2 : 4;
  if (file_size < kPrefix + len_size) {
    fail(name, fmt::format("truncated header: the file ends before its {}-byte header length", len_size));
  }
  unsigned char len_bytes[4] = {};
  read_exactly(len_bytes, len_size);
  const std::uint64_t header_len = little_endian(len_bytes, len_size);
  const std::uint64_t header_start = kPrefix + len_size;
  if (header_len > file_size - header_start) {
    fail(name, fmt::format("truncated header: it should be {} bytes long but the file holds only {} "
                           "more",
                           header_len, file_size - header_start));
  }
  if (header_len > kMaxHeaderLen) {
    fail(name, fmt::format("the header is {} bytes long; this reader accepts at most {} (a float32 "
                           "array's header is about 128)",
                           header_len, kMaxHeaderLen));
  }
  std::string header(header_len, '\0');
  read_exactly(header.data(), header_len);

  // Steps 3 and 4.
  const HeaderFields fields = HeaderParser(header, name).parse();
  const Shape4 shape = check_fields(fields, name, accept_f16);
  const bool f16 = *fields.descr == "<f2";
  const std::string_view type_name = f16 ? "float16" : "float32";

  // Step 5: the data must fill the rest of the file exactly.
  const std::uint64_t available = file_size - header_start - header_len;
  const std::optional<std::uint64_t> needed = data_bytes(*fields.shape, f16 ? 2 : 4);
  if (!needed) {
    fail(name, fmt::format("shape {} needs more than 2^64 bytes of data; the file holds {}", shape_text(*fields.shape),
                           available));
  }
  if (*needed > available) {
    fail(name, fmt::format("truncated data: shape {} needs {} bytes of {} values but the file "
                           "holds only {} after the header",
                           shape_text(*fields.shape), *needed, type_name, available));
  }
  if (*needed < available) {
    fail(name, fmt::format("shape {} needs {} bytes of {} values but the file holds {} after "
                           "the header ({} too many)",
                           shape_text(*fields.shape), *needed, type_name, available, available - *needed));
  }
  return {shape, *needed, f16};
}

// Regular files only: opening a FIFO would wait for a writer, and a device has no size to check.
void require_regular_file(const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) {
    fail(path, fmt::format("cannot open for reading: {}", ec ? ec.message() : "no such file"));
  }
  if (std::filesystem::is_directory(status)) fail(path, "is a directory, not a .npy file");
  if (!std::filesystem::is_regular_file(status)) {
    fail(path, "is not a regular file (a FIFO, a socket or a device): give a .npy file");
  }
}

// The reader of read_npy_f32_4d and read_npy_f32_or_f16_4d.
Tensor4<float> read_npy_4d(std::istream& in, const std::string& name, bool accept_f16) {
  const Header header = read_header(in, name, accept_f16);
  // The tensor is allocated whole: refuse a shape that the machine cannot hold (a sparse file can
  // claim terabytes of data in a few bytes of disk), before allocating.
  MemoryPlan plan;
  // (float16: the float32 tensor is twice the data, and the bytes read are held once as well.)
  plan.add(fmt::format("the values of {}", name), header.data_bytes * (header.f16 ? 3 : 1));
  plan.check(name);

  // Step 6 for float16: little-endian bits, each widened to float32 (exactly).
  if (header.f16) {
    Tensor4<float> t(header.shape);
    std::vector<unsigned char> bytes(header.data_bytes);
    if (header.data_bytes > 0) {
      in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(header.data_bytes));
      if (static_cast<std::uint64_t>(in.gcount()) != header.data_bytes) fail(name, "read error");
    }
    for (std::size_t k = 0; k < t.values.size(); ++k) {
      const auto bits = static_cast<std::uint16_t>(little_endian(&bytes[2 * k], 2));
      t.values[k] = static_cast<float>(std::bit_cast<simt::f16>(bits));
    }
    return t;
  }

  // Step 6: the values, little-endian float32.
  Tensor4<float> t(header.shape);
  if (header.data_bytes > 0) {
    in.read(reinterpret_cast<char*>(t.values.data()), static_cast<std::streamsize>(header.data_bytes));
    if (static_cast<std::uint64_t>(in.gcount()) != header.data_bytes) fail(name, "read error");
  }
  if constexpr (std::endian::native == std::endian::big) {
    for (float& x : t.values) {
      unsigned char b[4];
      std::memcpy(b, &x, 4);
      const auto bits = static_cast<std::uint32_t>(little_endian(b, 4));
      x = std::bit_cast<float>(bits);
    }
  }
  return t;
}

Tensor4<float> read_npy_file(const std::string& path, bool accept_f16) {
  require_regular_file(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, fmt::format("cannot open for reading: {}", std::generic_category().message(errno)));
  return read_npy_4d(in, path, accept_f16);
}

}  // namespace

Tensor4<float> read_npy_f32_4d(std::istream& in, const std::string& name) { return read_npy_4d(in, name, false); }
Tensor4<float> read_npy_f32_4d(const std::string& path) { return read_npy_file(path, false); }
Tensor4<float> read_npy_f32_or_f16_4d(std::istream& in, const std::string& name) { return read_npy_4d(in, name, true); }
Tensor4<float> read_npy_f32_or_f16_4d(const std::string& path) { return read_npy_file(path, true); }

Shape4 read_npy_shape(const std::string& path, bool accept_f16) {
  require_regular_file(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, fmt::format("cannot open for reading: {}", std::generic_category().message(errno)));
  return read_header(in, path, accept_f16).shape;
}

std::optional<NonFiniteValue> first_nonfinite(const std::string& path, bool accept_f16) {
  require_regular_file(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, fmt::format("cannot open for reading: {}", std::generic_category().message(errno)));
  const Header header = read_header(in, path, accept_f16);
  const std::uint64_t value_bytes = header.f16 ? 2 : 4;
  // A chunk at a time (1 MiB), so that the check holds no more than that of a file of any size.
  std::vector<unsigned char> chunk(std::size_t{1} << 20);
  std::uint64_t index = 0;
  for (std::uint64_t left = header.data_bytes; left > 0;) {
    const std::uint64_t count = std::min<std::uint64_t>(left, chunk.size());
    in.read(reinterpret_cast<char*>(chunk.data()), static_cast<std::streamsize>(count));
    if (static_cast<std::uint64_t>(in.gcount()) != count) fail(path, "read error");
    for (std::uint64_t at = 0; at < count; at += value_bytes, ++index) {
      const std::uint64_t bits = little_endian(&chunk[at], value_bytes);
      const float value = header.f16 ? static_cast<float>(std::bit_cast<simt::f16>(static_cast<std::uint16_t>(bits)))
                                     : std::bit_cast<float>(static_cast<std::uint32_t>(bits));
      if (!std::isfinite(value)) return NonFiniteValue{header.shape, index, value};
    }
    left -= count;
  }
  return std::nullopt;
}

namespace {

// The bytes of t's file: format version 1.0, descr '<f4', fortran_order False, shape (batch, heads,
// seq_len, head_dim), the header padded so that the data starts at a multiple of 64 bytes (as NumPy
// writes it), then the values, little-endian.
std::string npy_header(const Shape4& shape) {
  std::string header = fmt::format("{{'descr': '<f4', 'fortran_order': False, 'shape': ({}, {}, {}, {}), }}",
                                   shape.batch, shape.heads, shape.seq_len, shape.head_dim);
  // Pad with spaces, then '\n', so that magic (6) + version (2) + HEADER_LEN (2) + header is a
  // multiple of 64: the data starts aligned, as NumPy writes it.
  const std::size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  const auto header_len = static_cast<std::uint16_t>(header.size());  // < 200: fits 1.0's 2 bytes
  const char version_and_len[4] = {1, 0, static_cast<char>(header_len & 0xff), static_cast<char>(header_len >> 8)};
  return std::string(kMagic) + std::string(version_and_len, 4) + header;
}

// Calls `sink(bytes, count)` with the file's bytes in order: the header, then the values in chunks.
template <class Sink>
void npy_bytes(const Tensor4<float>& t, const std::string& name, Sink&& sink) {
  if (t.values.size() != t.shape.size()) {
    fail(name, fmt::format("cannot write: {} values do not fill {}", t.values.size(), t.shape.str()));
  }
  const std::string header = npy_header(t.shape);
  sink(header.data(), header.size());
  if constexpr (std::endian::native == std::endian::little) {
    const char* data = reinterpret_cast<const char*>(t.values.data());
    const std::size_t total = t.values.size() * sizeof(float);
    constexpr std::size_t kChunk = std::size_t{1} << 24;  // 16 MiB per write
    for (std::size_t at = 0; at < total; at += kChunk) sink(data + at, std::min(kChunk, total - at));
  } else {
    for (float x : t.values) {
      const auto bits = std::bit_cast<std::uint32_t>(x);
      const char b[4] = {static_cast<char>(bits), static_cast<char>(bits >> 8), static_cast<char>(bits >> 16),
                         static_cast<char>(bits >> 24)};
      sink(b, 4);
    }
  }
}

// Why a write failed, in words a reader can act on.
std::string write_error(int error, std::uint64_t written, std::uint64_t total) {
  const std::string where = fmt::format("{} of {} bytes written", written, total);
  if (error == EFBIG) {
    return fmt::format("the file-size limit of this process stops the write ({}; ulimit -f shows the limit)", where);
  }
  if (error == ENOSPC) return fmt::format("the disk is full ({})", where);
  if (error == EDQUOT) return fmt::format("the disk quota is used up ({})", where);
  return fmt::format("write error: {} ({})", std::generic_category().message(error), where);
}

}  // namespace

void write_npy_f32(std::ostream& out, const Tensor4<float>& t, const std::string& name) {
  npy_bytes(t, name,
            [&](const char* bytes, std::size_t count) { out.write(bytes, static_cast<std::streamsize>(count)); });
  out.flush();
  if (!out) fail(name, "write error");
}

void check_output_path(const std::string& path) {
  if (path.empty()) throw std::runtime_error("the path is empty: give a file name such as o.npy");
  std::error_code ec;
  const std::filesystem::path target(path);
  if (std::filesystem::is_directory(target, ec)) fail(path, "is a directory: give a file name such as o.npy");
  const auto status = std::filesystem::status(target, ec);
  if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
    fail(path, "exists and is not a regular file (a FIFO, a socket or a device); give a file name");
  }
  const std::filesystem::path folder = target.has_parent_path() ? target.parent_path() : ".";
  if (!std::filesystem::is_directory(folder, ec)) {
    fail(path, fmt::format("the folder {} does not exist", folder.string()));
  }
  if (access(folder.c_str(), W_OK | X_OK) != 0) {
    fail(path,
         fmt::format("cannot write into the folder {}: {}", folder.string(), std::generic_category().message(errno)));
  }
  // The write is a rename over the file, which a read-only file does not stop: refuse it here, as
  // cp would. (access() asks for the real user: root may write anything, as with cp.)
  if (std::filesystem::exists(status) && access(path.c_str(), W_OK) != 0) {
    fail(path, fmt::format("exists and this user may not write it ({}); give another file, or change its mode",
                           std::generic_category().message(errno)));
  }
  // access() does not know every refusal (a read-only or pseudo file system such as /sys says yes
  // to root), nor a name too long: create the temporary file the write will use, and remove it.
  const TemporaryFile probe(path);
}

void write_npy_f32_files(std::span<const NpyFile> files) {
  for (const NpyFile& f : files) check_output_path(f.path);
  // A write past the file-size limit (ulimit -f) raises SIGXFSZ, which would end the process with
  // the temporary file half written; ignored, the write fails with EFBIG instead, reported below.
  std::signal(SIGXFSZ, SIG_IGN);
  std::vector<std::unique_ptr<TemporaryFile>> temporaries;
  for (const NpyFile& f : files) {
    temporaries.push_back(std::make_unique<TemporaryFile>(f.path));
    const int fd = temporaries.back()->fd();
    const std::uint64_t total = npy_header(f.tensor->shape).size() + f.tensor->values.size() * sizeof(float);
    std::uint64_t written = 0;
    npy_bytes(*f.tensor, f.path, [&](const char* bytes, std::size_t count) {
      while (count > 0) {
        const ssize_t n = ::write(fd, bytes, count);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) fail(f.path, write_error(n < 0 ? errno : ENOSPC, written, total));
        written += static_cast<std::uint64_t>(n);
        bytes += n;
        count -= static_cast<std::size_t>(n);
      }
    });
  }
  // Every file is complete: now replace the real paths, one rename each.
  for (const auto& temporary : temporaries) temporary->commit();
}

void write_npy_f32(const std::string& path, const Tensor4<float>& t) {
  const NpyFile file{path, &t};
  write_npy_f32_files(std::span<const NpyFile>(&file, 1));
}

}  // namespace fa
