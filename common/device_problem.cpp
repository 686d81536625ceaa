#include "common/device_problem.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "common/attention_shapes.h"

namespace fa {

DeviceProblem device_problem(std::string_view who, const AttentionShape& shape, std::optional<double> scale,
                             bool causal) {
  const double s = scale.value_or(default_scale(shape.head_dim));
  if (!std::isfinite(static_cast<float>(s))) {
    throw std::invalid_argument(
        fmt::format("{}: scale {} is not accepted; give a number that float32 can hold (|scale| <= 3.4e38)", who, s));
  }
  const std::uint64_t batch_heads = std::uint64_t{shape.batch} * shape.heads;
  if (shape.batch > kMaxBatchHeads || batch_heads > kMaxBatchHeads) {
    throw std::invalid_argument(fmt::format("{}: batch * heads = {} x {} is more than the {} the kernels' grid allows",
                                            who, shape.batch, shape.heads, kMaxBatchHeads));
  }
  constexpr std::uint64_t int_max = std::numeric_limits<int>::max();
  const std::uint64_t longest = std::max(shape.seq_len_q, shape.seq_len_k);
  if (longest > int_max || shape.head_dim > int_max || longest * shape.head_dim > int_max) {
    throw std::invalid_argument(fmt::format(
        "{}: one head's Q, K or V holds {} x {} values, more than the 2^31 - 1 of the kernels' int indexing", who,
        longest, shape.head_dim));
  }
  return {static_cast<int>(batch_heads),
          static_cast<int>(shape.seq_len_q),
          static_cast<int>(shape.seq_len_k),
          static_cast<int>(shape.head_dim),
          static_cast<float>(s),
          causal};
}

}  // namespace fa
