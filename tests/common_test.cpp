// Tests of common/: views, generators and error measures.
#include <cmath>
#include <limits>
#include <vector>

#include "catch.h"
#include "common/compare.h"
#include "common/device.h"
#include "common/random.h"
#include "common/tensor.h"

TEST_CASE("Tensor4View indexes row-major [batch, heads, seq_len, head_dim]", "[common]") {
  fa::Tensor4<int> t(fa::Shape4{2, 3, 4, 5});
  for (std::size_t i = 0; i < t.values.size(); ++i) t.values[i] = static_cast<int>(i);
  auto v = t.view();
  CHECK(v(1, 2, 3, 4) == 119);
  CHECK(v(1, 0, 0, 0) == 60);
  CHECK(v(0, 1, 0, 0) == 20);
  CHECK(v.head(1, 2)(3, 4) == 119);
  CHECK(v.head(0, 1).row(2)[1] == 31);
}

TEST_CASE("views reject a size that does not match the shape", "[common]") {
  std::vector<float> data(10);
  CHECK_THROWS_AS(fa::MatrixView<float>(std::span<float>(data), 3, 4), std::invalid_argument);
  CHECK_THROWS_AS(fa::Tensor4View<float>(std::span<float>(data), fa::Shape4{1, 1, 2, 4}),
                  std::invalid_argument);
  CHECK_THROWS_AS(fa::Tensor4<float>(fa::Shape4{1, 1, 2, 4}, std::vector<float>(7)),
                  std::invalid_argument);
}

TEST_CASE("generators are deterministic for a seed and differ between seeds", "[common]") {
  CHECK(fa::normal(100, 7) == fa::normal(100, 7));
  CHECK(fa::normal(100, 7) != fa::normal(100, 8));
  CHECK(fa::uniform(100, 7) == fa::uniform(100, 7));
  const auto u = fa::uniform(10000, 3, -2.0, 5.0);
  for (double x : u) REQUIRE((x >= -2.0 && x < 5.0));
  // The sample mean of 10000 normal(3, 2) draws is within 5 standard errors (5 * 2/100) of 3.
  const auto n = fa::normal(10000, 5, 3.0, 2.0);
  double mean = 0;
  for (double x : n) mean += x / static_cast<double>(n.size());
  CHECK(std::fabs(mean - 3.0) < 0.1);
}

TEST_CASE("peaked scores have a few outliers far above the rest", "[common]") {
  const auto base = fa::normal(1000, 11);
  const auto p = fa::peaked(1000, 11, 5, 12.0);
  int raised = 0;
  for (std::size_t i = 0; i < p.size(); ++i) raised += p[i] != base[i];
  CHECK(raised >= 1);
  CHECK(raised <= 5);
  double max = -1e300;
  for (double x : p) max = std::max(max, x);
  CHECK(max > 8.0);  // normal(0,1) alone exceeds 8 with probability ~1e-15 per draw
}

TEST_CASE("compare finds the worst element and the relative L2 error", "[common]") {
  const std::vector<double> ref{1.0, -2.0, 3.0, 0.0};
  const std::vector<double> out{1.0, -2.5, 3.0, 0.25};
  const auto s = fa::compare(out, ref);
  CHECK(s.max_abs == 0.5);
  CHECK(s.worst_index == 1);
  CHECK(s.worst_out == -2.5);
  CHECK(s.worst_ref == -2.0);
  CHECK(s.max_rel == 0.25);  // 0.5 / 2; the zero reference is left out of max_rel
  CHECK(std::fabs(s.rel_l2 - std::sqrt(0.25 + 0.0625) / std::sqrt(14.0)) < 1e-15);
  CHECK(fa::describe(s).find("index 1") != std::string::npos);
  CHECK_THROWS_AS(fa::compare(std::vector<double>(3), ref), std::invalid_argument);
}

TEST_CASE("compare never lets a NaN or an infinity pass as close", "[common]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(std::isinf(fa::compare(std::vector<double>{1.0, nan}, std::vector<double>{1.0, 2.0}).max_abs));
  CHECK(std::isinf(fa::compare(std::vector<double>{inf}, std::vector<double>{2.0}).rel_l2));
  CHECK(fa::compare(std::vector<double>{nan, -inf}, std::vector<double>{nan, -inf}).max_abs == 0.0);
}

TEST_CASE("ulp distance counts representable numbers", "[common]") {
  CHECK(fa::ulp_distance(1.0, 1.0) == 0);
  CHECK(fa::ulp_distance(1.0, std::nextafter(1.0, 2.0)) == 1);
  CHECK(fa::ulp_distance(1.0f, std::nextafter(std::nextafter(1.0f, 0.0f), 0.0f)) == 2);
  CHECK(fa::ulp_distance(0.0, -0.0) == 0);
  const double tiny = std::numeric_limits<double>::denorm_min();
  CHECK(fa::ulp_distance(-tiny, tiny) == 2);
  CHECK(fa::ulp_distance(1.0, std::numeric_limits<double>::quiet_NaN()) ==
        std::numeric_limits<std::uint64_t>::max());
}

TEST_CASE("device names parse, and an unknown one is refused", "[common]") {
  CHECK(fa::parse_device("cpu") == fa::Device::cpu);
  CHECK(fa::parse_device("gpu") == fa::Device::gpu);
  CHECK_THROWS_AS(fa::parse_device("tpu"), std::invalid_argument);
  CHECK(fa::to_string(fa::Device::gpu) == "gpu");
}
