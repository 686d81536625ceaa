// Tests of common/: views, generators and error measures.
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "catch.h"
#include "common/attention_shapes.h"
#include "common/compare.h"
#include "common/device.h"
#include "common/memory.h"
#include "common/program.h"
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
  CHECK_THROWS_AS(fa::Tensor4View<float>(std::span<float>(data), fa::Shape4{1, 1, 2, 4}), std::invalid_argument);
  CHECK_THROWS_AS(fa::Tensor4<float>(fa::Shape4{1, 1, 2, 4}, std::vector<float>(7)), std::invalid_argument);
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
  CHECK(fa::ulp_distance(1.0, std::numeric_limits<double>::quiet_NaN()) == std::numeric_limits<std::uint64_t>::max());
}

TEST_CASE("device names parse, and an unknown one is refused", "[common]") {
  CHECK(fa::parse_device("cpu") == fa::Device::cpu);
  CHECK(fa::parse_device("gpu") == fa::Device::gpu);
  CHECK_THROWS_AS(fa::parse_device("tpu"), std::invalid_argument);
  CHECK(fa::to_string(fa::Device::gpu) == "gpu");
}

TEST_CASE("compare counts NaN and infinities on both sides and says where they differ", "[common]") {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const std::vector<double> ref{1.0, nan, nan, -inf, 2.0};
  const auto same = fa::compare(std::vector<double>{1.0, nan, nan, -inf, 2.0}, ref);
  CHECK(same.out_nan == 2);
  CHECK(same.ref_nan == 2);
  CHECK(same.out_inf == 1);
  CHECK(same.nonfinite_mismatch == 0);
  CHECK(fa::agrees(same, 0.0));
  CHECK(fa::nonfinite_report(same) == "2 NaN and 1 inf, all where the reference has them too");
  // A NaN where the reference has a number, and a number where it has NaN: never agreement.
  const auto moved = fa::compare(std::vector<double>{nan, 1.0, nan, -inf, 2.0}, ref);
  CHECK(moved.nonfinite_mismatch == 2);
  CHECK(moved.first_mismatch == 0);
  CHECK_FALSE(fa::agrees(moved, 1e300));
  CHECK(fa::nonfinite_report(moved).find("2 non-finite values where the reference differs (first at index 0)") == 0);
  CHECK(fa::describe(moved).find("; 2 non-finite values") != std::string::npos);
  // Nothing non-finite: nothing said.
  CHECK(fa::nonfinite_report(fa::compare(std::vector<double>{1.0}, std::vector<double>{1.0})).empty());
}

TEST_CASE("size flags accept whole integers in range and nothing else", "[common]") {
  CHECK(fa::cli::parse_integer("64", 1, 100) == 64u);
  CHECK(fa::cli::parse_integer("1", 1, 100) == 1u);
  CHECK_FALSE(fa::cli::parse_integer("0", 1, 100));
  CHECK_FALSE(fa::cli::parse_integer("-1", 1, 100));  // never wraps around
  CHECK_FALSE(fa::cli::parse_integer("+3", 1, 100));
  CHECK_FALSE(fa::cli::parse_integer("3.0", 1, 100));
  CHECK_FALSE(fa::cli::parse_integer("1e3", 1, 10000));
  CHECK_FALSE(fa::cli::parse_integer("", 1, 100));
  CHECK_FALSE(fa::cli::parse_integer("101", 1, 100));
  CHECK_FALSE(fa::cli::parse_integer("99999999999999999999999", 1, UINT64_MAX));
  CHECK(fa::cli::integer_error("0", 1, 2147483647) == "0 is not accepted; give an integer from 1 to 2147483647");
}

TEST_CASE("number lists refuse empty lists and empty items, and keep inf and nan", "[common]") {
  CHECK(fa::cli::parse_number_list("--scores", "1,3, 5 ,2") == std::vector<double>{1, 3, 5, 2});
  const auto special = fa::cli::parse_number_list("--scores", "-inf,nan,1e3");
  CHECK(std::isinf(special[0]));
  CHECK(std::isnan(special[1]));
  CHECK(special[2] == 1000.0);
  auto message = [](const char* text) -> std::string {
    try {
      (void)fa::cli::parse_number_list("--scores", text);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  CHECK(message("").find("--scores '': the list is empty") == 0);
  CHECK(message("1,,2").find("--scores 1,,2: item 2 is empty") == 0);
  CHECK(message("1,").find("item 2 is empty") != std::string::npos);
  CHECK(message("1,x").find("item 2 ('x') is not a number") != std::string::npos);
}

TEST_CASE("a scale is accepted only where float32 holds it", "[common]") {
  const fa::AttentionShape shape{1, 1, 4, 4, 8};
  CHECK_NOTHROW(fa::device_problem("test", shape, 0.125, false));
  CHECK_NOTHROW(fa::device_problem("test", shape, 0.0, false));
  CHECK_NOTHROW(fa::device_problem("test", shape, -3e38, false));
  CHECK_THROWS_AS(fa::device_problem("test", shape, 1e39, false), std::invalid_argument);
  CHECK_THROWS_AS(fa::device_problem("test", shape, std::nan(""), false), std::invalid_argument);
}

TEST_CASE("a memory plan adds without wrapping and refuses what does not fit, with the figures", "[common]") {
  CHECK(fa::saturating_mul(UINT64_MAX / 2, 3) == UINT64_MAX);
  CHECK(fa::saturating_add(UINT64_MAX, 1) == UINT64_MAX);
  CHECK(fa::format_bytes(8390000000ULL) == "8.39 GB");
  CHECK(fa::available_memory_bytes() > 0);
  fa::MemoryPlan small;
  small.add("a little", 1024);
  CHECK_NOTHROW(small.check("test"));
  fa::MemoryPlan huge;
  huge.add("Q, K, V", 1000);
  huge.add("S and P", fa::saturating_mul(UINT64_MAX, 2));
  try {
    huge.check("ch04_naive_attention");
    FAIL("a plan of 2^64 bytes was accepted");
  } catch (const std::runtime_error& e) {
    const std::string message = e.what();
    CHECK(message.find("ch04_naive_attention: this run needs more than 18 EB") == 0);
    CHECK(message.find("S and P: more than 18 EB") != std::string::npos);
  }
}

TEST_CASE("sample_rows spreads its rows evenly and keeps the first and the last", "[common]") {
  CHECK(fa::sample_rows(5, 512) == std::vector<std::size_t>{0, 1, 2, 3, 4});
  const auto rows = fa::sample_rows(1000, 5);
  CHECK(rows == std::vector<std::size_t>{0, 249, 499, 749, 999});
  CHECK(fa::sample_rows(0, 5).empty());
}
