#include "common/tensor.h"

#include <stdexcept>

#include <fmt/format.h>

namespace fa {

std::string Shape4::str() const {
  return fmt::format("[batch {}, heads {}, seq_len {}, head_dim {}]", batch, heads, seq_len, head_dim);
}

namespace detail {

void throw_size_mismatch(const char* who, std::size_t count, std::size_t rows, std::size_t cols) {
  throw std::invalid_argument(fmt::format("{}: {} values cannot be viewed as a [{}, {}] matrix (needs {})", who, count,
                                          rows, cols, rows * cols));
}

void throw_size_mismatch(const char* who, std::size_t count, const Shape4& shape) {
  throw std::invalid_argument(
      fmt::format("{}: {} values do not fill {} (needs {})", who, count, shape.str(), shape.size()));
}

}  // namespace detail

}  // namespace fa
