// The Hopper test kernels of common/simt (simt_hopper_kernels.cuh), each behind a host function that
// allocates device buffers, launches it and copies the result back. Declared for both backends as
// simt_tensor_core_runs.h does: simt_hopper_test::cpu:: (host compiler) and simt_hopper_test::gpu::
// (nvcc). Per-thread data is thread-major: thread t's k registers are at [t * k, t * k + k).
#pragma once

#include <cstdint>
#include <vector>

#include "common/simt/instructions/hopper.h"
#include "simt_runs_support.h"

namespace simt_hopper_test {

// Where an operand lies in the kernel's (1024-byte aligned) shared memory, and the descriptor's
// fields for it.
struct OperandLayout {
  std::uint32_t offset = 0;  // bytes from the aligned base
  simt::Swizzle swizzle = simt::Swizzle::none;
  std::uint32_t lbo = 0, sbo = 0;  // bytes
};

// The FP8 types of a wgmma .m64nNk32, A's then B's; none: a .m64nNk16 of bf16 or f16.
enum class Fp8Types { none, e4m3, e5m2, e4m3_e5m2, e5m2_e4m3 };

// One wgmma: the shared-memory image (words), A in registers instead when a_registers is not empty
// (4 per thread), C (n / 2 per thread), and the shape.
struct WgmmaProblemImage {
  int n = 64;
  bool bf16 = true;  // when fp8 is none
  Fp8Types fp8 = Fp8Types::none;
  simt::Major major_a = simt::Major::k, major_b = simt::Major::k;
  OperandLayout a, b;
  std::vector<std::uint32_t> image;
  std::vector<std::uint32_t> a_registers;
  std::vector<float> c;
  bool scale_d = true;
};

// The TMA boxes one operand needs: box i lands at dst[i] (bytes from the aligned base) from
// coordinates (c0[i], c1[i]) (column, row); `bytes` in all.
struct TmaPlan {
  int count = 0;
  unsigned bytes = 0;
  std::uint32_t dst[16] = {};
  int c0[16] = {}, c1[16] = {};
};

// A row-major global matrix of 2-byte elements and its tensor map's box.
struct TmaMatrix {
  std::uint64_t rows = 0, cols = 0;
  std::uint32_t box_rows = 0, box_cols = 0;
  simt::Swizzle swizzle = simt::Swizzle::none;
};

struct TmaProblem {
  int n = 64;
  bool bf16 = true;
  simt::Major major_b = simt::Major::k;
  std::vector<std::uint16_t> a, b;  // the global matrices
  TmaMatrix shape_a, shape_b;
  TmaPlan plan_a, plan_b;
  OperandLayout layout_a, layout_b;
  int k_steps = 1;
  unsigned k_step_bytes_a = 0, k_step_bytes_b = 0;
  unsigned shared_bytes = 0;
};

// A TMA load of one box, or a store of one: a row-major global tensor of 2-byte elements (rank 2
// or 3; dims innermost first), the box, its element strides, the swizzle, the coordinates.
struct TmaBox {
  unsigned rank = 2;
  std::uint64_t dims[3] = {1, 1, 1};
  std::uint32_t box[3] = {1, 1, 1};
  std::uint32_t element_strides[3] = {1, 1, 1};
  simt::Swizzle swizzle = simt::Swizzle::none;
  int coordinates[3] = {0, 0, 0};
  std::vector<std::uint16_t> global;  // dims[0] * dims[1] * dims[2] elements
  std::uint32_t bytes = 0;            // of the box in shared memory
};

struct MbarrierRun {
  std::vector<unsigned> passed_at_once;  // per thread: try_wait on parity 1 passed before any arrival
  std::vector<unsigned> seen;            // [phase][thread]: the neighbour's slot after the phase's wait
};

}  // namespace simt_hopper_test

#define SIMT_HOPPER_TEST_RUNNERS                                                                                   \
  /* One warpgroup, one wgmma (n: 16, 64, 128 or 256; FP8: every n of hopper.h for e4m3, 64 and 256 for the        \
     other types); returns D, n / 2 registers per thread. */                                                       \
  std::vector<float> wgmma(const simt_hopper_test::WgmmaProblemImage& p);                                          \
  /* TMA boxes into shared memory, then k_steps wgmma on them (n 64 or 128); returns D as above. */                \
  std::vector<float> tma_wgmma(const simt_hopper_test::TmaProblem& p);                                             \
  /* One TMA load of the box: the shared memory it wrote, p.bytes of it. */                                        \
  std::vector<std::uint8_t> tma_load(const simt_hopper_test::TmaBox& p);                                           \
  /* One TMA store of the box from shared memory holding `image` (p.bytes); the global tensor after. */            \
  std::vector<std::uint16_t> tma_store(const simt_hopper_test::TmaBox& p, const std::vector<std::uint8_t>& image); \
  /* O = (Q K^T) V through a TMA ring and two wgmma per tile (Q 64 x 64, K and V 64 tiles x 64, bf16 bits,         \
     row-major); O as the consumer warpgroup's registers, 32 per thread. */                                        \
  std::vector<float> gemm_pipeline(const std::vector<std::uint16_t>& q, const std::vector<std::uint16_t>& k,       \
                                   const std::vector<std::uint16_t>& v, int tiles, int stages);                    \
  /* 64 threads through two mbarrier phases. */                                                                    \
  simt_hopper_test::MbarrierRun mbarrier_phases();                                                                 \
  /* A producer warp and a consumer warpgroup on a ring of `stages` slots; the consumers' totals. */               \
  std::vector<float> producer_consumer(int items, int stages);                                                     \
  /* Two warpgroups taking `turns` turns each through named barriers; the order of the turns. */                   \
  std::vector<int> ping_pong(int turns);

SIMT_DECLARE_RUNNERS(simt_hopper_test, SIMT_HOPPER_TEST_RUNNERS)

#undef SIMT_HOPPER_TEST_RUNNERS
