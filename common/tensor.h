// Row-major array views with shapes, and an owning 4-D tensor for attention inputs.
//
// Attention tensors in this project are row-major [batch, heads, seq_len, head_dim], the layout of
// torch.nn.functional.scaled_dot_product_attention: the last index moves fastest, so one head of
// one batch entry is a contiguous [seq_len, head_dim] matrix. The views below do no allocation and
// own nothing; Tensor4 owns its values in a std::vector.
//
// (No fmt here: a chapter's kernel source, which nvcc compiles, reaches this header through its host
// header, and nvcc cannot compile fmt. The messages are made in tensor.cpp.)
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace fa {

struct Shape4;

namespace detail {
// Throw std::invalid_argument saying that `count` values cannot fill the shape (tensor.cpp).
[[noreturn]] void throw_size_mismatch(const char* who, std::size_t count, std::size_t rows, std::size_t cols);
[[noreturn]] void throw_size_mismatch(const char* who, std::size_t count, const Shape4& shape);
}  // namespace detail

// A row-major [rows, cols] matrix over memory owned elsewhere. Element (i, j) is data[i*cols + j].
template <class T>
class MatrixView {
 public:
  MatrixView() = default;
  // Throws std::invalid_argument when data.size() != rows * cols.
  MatrixView(std::span<T> data, std::size_t rows, std::size_t cols) : data_(data.data()), rows_(rows), cols_(cols) {
    if (data.size() != rows * cols) detail::throw_size_mismatch("MatrixView", data.size(), rows, cols);
  }
  MatrixView(T* data, std::size_t rows, std::size_t cols) : data_(data), rows_(rows), cols_(cols) {}
  // A view of T is also a view of const T.
  operator MatrixView<const T>() const { return {data_, rows_, cols_}; }

  std::size_t rows() const { return rows_; }
  std::size_t cols() const { return cols_; }
  std::size_t size() const { return rows_ * cols_; }
  T* data() const { return data_; }
  T& operator()(std::size_t i, std::size_t j) const { return data_[i * cols_ + j]; }
  std::span<T> row(std::size_t i) const { return {data_ + i * cols_, cols_}; }
  std::span<T> flat() const { return {data_, size()}; }

 private:
  T* data_ = nullptr;
  std::size_t rows_ = 0;
  std::size_t cols_ = 0;
};

// The shape of an attention tensor: [batch, heads, seq_len, head_dim].
struct Shape4 {
  std::size_t batch = 0;
  std::size_t heads = 0;
  std::size_t seq_len = 0;
  std::size_t head_dim = 0;

  std::size_t size() const { return batch * heads * seq_len * head_dim; }
  bool operator==(const Shape4&) const = default;
  // "[batch 1, heads 2, seq_len 256, head_dim 64]".
  std::string str() const;
};

// A row-major [batch, heads, seq_len, head_dim] tensor over memory owned elsewhere.
template <class T>
class Tensor4View {
 public:
  Tensor4View() = default;
  // Throws std::invalid_argument when data.size() != shape.size().
  Tensor4View(std::span<T> data, Shape4 shape) : data_(data.data()), shape_(shape) {
    if (data.size() != shape.size()) detail::throw_size_mismatch("Tensor4View", data.size(), shape);
  }
  operator Tensor4View<const T>() const { return {std::span<const T>(data_, size()), shape_}; }

  const Shape4& shape() const { return shape_; }
  std::size_t size() const { return shape_.size(); }
  T* data() const { return data_; }
  std::span<T> flat() const { return {data_, size()}; }
  T& operator()(std::size_t b, std::size_t h, std::size_t s, std::size_t d) const {
    return data_[((b * shape_.heads + h) * shape_.seq_len + s) * shape_.head_dim + d];
  }
  // The [seq_len, head_dim] matrix of batch entry b, head h.
  MatrixView<T> head(std::size_t b, std::size_t h) const {
    return {data_ + (b * shape_.heads + h) * shape_.seq_len * shape_.head_dim, shape_.seq_len, shape_.head_dim};
  }

 private:
  T* data_ = nullptr;
  Shape4 shape_{};
};

// An owning [batch, heads, seq_len, head_dim] tensor, values row-major in a std::vector.
template <class T>
struct Tensor4 {
  Shape4 shape{};
  std::vector<T> values;

  Tensor4() = default;
  explicit Tensor4(Shape4 s, T fill = T{}) : shape(s), values(s.size(), fill) {}
  // Throws std::invalid_argument when v.size() != s.size().
  Tensor4(Shape4 s, std::vector<T> v) : shape(s), values(std::move(v)) {
    if (values.size() != shape.size()) detail::throw_size_mismatch("Tensor4", values.size(), shape);
  }

  Tensor4View<T> view() { return {std::span<T>(values), shape}; }
  Tensor4View<const T> view() const { return {std::span<const T>(values), shape}; }
};

}  // namespace fa
