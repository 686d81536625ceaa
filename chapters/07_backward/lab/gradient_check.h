// How close the kernels' gradients must be to the float64 reference: the one definition that the
// tests (tests/07_backward_test.cpp) and the demo (main.cpp) both use.
//
// The project's rule (common/tolerance.h): the bound of each gradient is set by a measurement on
// the same inputs. A plain float32 evaluation of the same formulas (reference.h,
// attention_backward_float32) shows what rounding in float alone costs there, and the kernel may
// be at most twice that, plus the unit roundoff u = 2^-24:
//
//   rel L2 (kernel, reference)  <=  2 * rel L2 (float32 evaluation, reference) + u
//
// Why a measured bound and not one number: the error is not the same for the three gradients, nor
// for all inputs. dV = P^T dO carries only the error of P (exp of a rounded score; ~3e-7 for
// normal inputs, up to 4e-6 for peaked ones). dK and dQ are built on dS = P (dP - D), a
// difference of two nearly equal sums where one key takes most of the weight, so their relative
// error grows as the weights peak (3e-7 to 1.2e-6 measured for normal inputs; for peaked ones up
// to 1.3e-3 on the shortest shapes, where dS is tiny). dQ also carries the order of the atomic
// additions. A float32 evaluation sees the same effects on the same inputs, so the factor stays
// small whatever they are: the same error sources dominate both (the float32 O and L of the
// forward, the rounded scores in exp), and the kernels' error measured at most 1.06 times the
// float32 evaluation's over every case of the tests, both dQ methods (docs/07-backward.md). For
// normal inputs, where the bounds are about 1e-6, a missing D, a wrong mask, a lost tile or a lost
// atomic add gives errors of 1e-3 to 1, far outside. u keeps the bound above zero where the float32
// evaluation is exact (one key: dS = 0 in both).
//
// compare()'s rel L2 is the absolute L2 norm where the reference is all zeros (fa::compare).
#pragma once

#include <cmath>
#include <cstddef>
#include <span>
#include <string>

#include <fmt/format.h>

#include "chapters/07_backward/backward.h"
#include "chapters/07_backward/lab/reference.h"
#include "common/compare.h"
#include "common/program.h"
#include "common/tolerance.h"

namespace ch07 {

// The bound for one gradient, from the float32 evaluation's relative L2 error on the same inputs.
inline double gradient_bound(double float32_rel_l2) { return fa::bound_from_plain(float32_rel_l2); }

// How many values are NaN or infinite.
inline std::size_t count_not_finite(std::span<const float> values) {
  std::size_t n = 0;
  for (float x : values) n += std::isfinite(x) ? 0 : 1;
  return n;
}

// One gradient against the reference.
struct GradientCheck {
  fa::ErrorStats error;        // kernel against the float64 reference
  double float32_rel_l2 = 0;   // the float32 evaluation against the same reference
  double bound = 0;            // gradient_bound(float32_rel_l2)
  std::size_t not_finite = 0;  // NaN or infinite values in the kernel's gradient
  bool pass() const { return not_finite == 0 && fa::within_relative(error.rel_l2, bound); }  // finite, under 1
};

inline GradientCheck check_gradient(std::span<const float> kernel, std::span<const double> reference,
                                    std::span<const float> float32) {
  GradientCheck c;
  c.error = fa::compare(kernel, reference);
  c.float32_rel_l2 = fa::compare(float32, reference).rel_l2;
  c.bound = gradient_bound(c.float32_rel_l2);
  c.not_finite = count_not_finite(kernel);
  return c;
}

struct GradientChecks {
  GradientCheck dQ, dK, dV;
  bool pass() const { return dQ.pass() && dK.pass() && dV.pass(); }
};

// The kernel's three gradients against the reference, each with its bound from the float32
// evaluation. Throws std::invalid_argument when sizes differ (fa::compare).
inline GradientChecks check_gradients(const Gradients& kernel, const GradientsOf<double>& reference,
                                      const GradientsOf<float>& float32) {
  return {check_gradient(kernel.dQ.values, reference.dQ.values, float32.dQ.values),
          check_gradient(kernel.dK.values, reference.dK.values, float32.dK.values),
          check_gradient(kernel.dV.values, reference.dV.values, float32.dV.values)};
}

// "rel L2 3.1e-07 (float32 evaluation 1.2e-07, bound 1.5e-06)"; with the NaN/inf count when any.
inline std::string describe(const GradientCheck& c) {
  std::string s =
      fmt::format("rel L2 {:.2g} (float32 evaluation {:.2g}, bound {:.2g})", c.error.rel_l2, c.float32_rel_l2, c.bound);
  if (c.not_finite > 0) s += fmt::format(", {} NaN or inf", c.not_finite);
  return s;
}

}  // namespace ch07
