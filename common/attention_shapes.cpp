#include "common/attention_shapes.h"

#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace fa {

AttentionShape check_attention_shapes(const Shape4& q, const Shape4& k, const Shape4& v) {
  auto fail = [&](const std::string& what) {
    throw std::invalid_argument(
        fmt::format("attention shapes: {} (Q {}, K {}, V {})", what, q.str(), k.str(), v.str()));
  };
  if (q.size() == 0 || k.size() == 0) {
    fail("every dimension must be at least 1");
  }
  if (k != v) fail("K and V must have the same shape");
  if (q.batch != k.batch || q.heads != k.heads) fail("Q, K and V must have the same batch and heads");
  if (q.head_dim != k.head_dim) fail("Q and K must have the same head_dim");
  return {q.batch, q.heads, q.seq_len, k.seq_len, q.head_dim};
}

}  // namespace fa
