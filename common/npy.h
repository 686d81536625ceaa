// NumPy .npy files of attention tensors: float32, C order, 4-D [batch, heads, seq_len, head_dim].
//
// The demos of chapters 04 and 05 take --q q.npy --k k.npy --v v.npy --out o.npy, so that a reader
// can run them on tensors made in NumPy or PyTorch (np.save("q.npy", q.numpy())) and compare the
// output with torch.nn.functional.scaled_dot_product_attention.
//
// The file (NumPy's format, versions 1.0, 2.0 and 3.0):
//   1. magic        6 bytes, "\x93NUMPY"
//   2. version      2 bytes, major and minor: 1.0, 2.0 or 3.0
//   3. HEADER_LEN   little-endian unsigned: 2 bytes in 1.0, 4 bytes in 2.0 and 3.0
//   4. header       HEADER_LEN bytes of a Python dict literal, padded with spaces and ended by '\n':
//                   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 8, 1024, 64), }
//                   (latin-1 in 1.0 and 2.0, UTF-8 in 3.0; this reader needs only its ASCII)
//   5. data         the values, C order, little-endian float32: 4 * product(shape) bytes, to the end
//
// This reader accepts exactly descr '<f4', fortran_order False and a 4-D shape; the keys may come
// in any order, with any whitespace and a trailing comma; an integer may carry Python 2's 'L'
// suffix (files written by NumPy under Python 2). Anything else is refused with a message that
// names the file and what is wrong; no input, however malformed, makes it crash, hang or allocate
// more than the file's size (the data size is checked against the file before anything is read).
//
// Source: NumPy's format description, numpy.lib.format ("Format Version 1.0", "2.0", "3.0").
#pragma once

#include <cstdint>
#include <istream>
#include <optional>
#include <ostream>
#include <span>
#include <string>

#include "common/tensor.h"

namespace fa {

// Reads a .npy file holding a float32, C-order, 4-D array. Returns it as a Tensor4 whose shape is
// the file's [batch, heads, seq_len, head_dim] (dimensions of 0 are allowed: the caller checks
// what it needs). Throws std::runtime_error, the message starting with the path, when the file
// cannot be opened, is not a regular file (a FIFO would make the read wait forever), is not a
// .npy file, holds more data than the machine has memory for, has another dtype ("q.npy: dtype '<f8' is not supported:
// expected '<f4' (float32, little-endian) ..."), Fortran order, a shape that is not 4-D or has a
// negative dimension, or fewer or more data bytes than its shape needs.
Tensor4<float> read_npy_f32_4d(const std::string& path);

// The same, from a stream positioned at the start of the file (it must be seekable: the size of
// what follows is checked before the data is read). `name` starts every error message.
Tensor4<float> read_npy_f32_4d(std::istream& in, const std::string& name);

// The shape a .npy file holds, after every check of read_npy_f32_4d except the memory check, without
// reading the data: what a demo plans its memory from before it loads anything. Throws as
// read_npy_f32_4d.
// With accept_f16, a float16 file's shape too (read_npy_f32_or_f16_4d).
Shape4 read_npy_shape(const std::string& path, bool accept_f16 = false);

// The first value of a .npy file (read_npy_f32_4d's files; with accept_f16, float16 ones too) that
// is NaN or an infinity: its index in C order and the value, with the file's shape; nothing when
// every value is finite. Reads the data in chunks, without holding it (the front door checks the
// inputs with it before any work: common/front_door.h). Throws as read_npy_f32_4d.
struct NonFiniteValue {
  Shape4 shape;
  std::uint64_t index = 0;
  float value = 0.0f;
};
std::optional<NonFiniteValue> first_nonfinite(const std::string& path, bool accept_f16 = false);

// Throws std::runtime_error naming the path unless a file can be written there: the path is not
// empty, not a directory or another non-regular file, not an existing file this user may not write
// (as cp refuses it: the write is a rename, which would replace even a read-only file), and its
// folder exists and takes a new file: a temporary file is created there and removed, so that a
// file system that refuses it (/sys, a read-only mount) or a name too long is found now. A demo
// calls it before its computation, so that a typo in --out does not cost the whole run.
void check_output_path(const std::string& path);

// The same, but a file may also hold descr '<f2' (IEEE binary16, little-endian, as
// np.save(path, a.astype(np.float16)) writes it): its values are widened to float32, exactly. The
// dtype error then names both accepted types. (Chapter 06, whose kernel takes fp16 inputs.)
Tensor4<float> read_npy_f32_or_f16_4d(const std::string& path);
Tensor4<float> read_npy_f32_or_f16_4d(std::istream& in, const std::string& name);

// One file to write: its path and the tensor.
struct NpyFile {
  std::string path;
  const Tensor4<float>* tensor = nullptr;
};

// Writes every file as .npy (format version 1.0, descr '<f4', fortran_order False, shape (batch,
// heads, seq_len, head_dim), the header padded so that the data starts at a multiple of 64 bytes,
// as NumPy does), all of them or none: each goes to a temporary file beside its path first
// (common/temporary_file.h), and only once every one is complete is each renamed over its path. A
// write that fails part way (a full disk, the file-size limit of ulimit -f), an exception or a
// signal that ends the process (SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGQUIT: temporary_file.h) leaves
// every path as it was and removes the temporary files. Throws
// std::runtime_error naming the path and the cause (check_output_path's reasons, "the file-size
// limit of this process stops the write (...)", "the disk is full (...)").
void write_npy_f32_files(std::span<const NpyFile> files);

// The same for one file.
void write_npy_f32(const std::string& path, const Tensor4<float>& t);

// The same, to a stream. `name` starts every error message.
void write_npy_f32(std::ostream& out, const Tensor4<float>& t, const std::string& name);

}  // namespace fa
