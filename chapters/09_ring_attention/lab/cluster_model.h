// Chapter 09, part 3: the ring on paper, on GPUs. At each step a GPU computes its n query rows
// against n keys while the next K/V shard travels to it; the step takes the longer of the two.
//
//   compute   4 n^2 d heads FLOP (Q K^T and P V, 2 FLOP per multiply-add), at F FLOP/s; with the
//             causal mask and the zigzag layout every step does exactly half of that (of the four
//             pairs of chunks a rank's queries and a shard's keys make, two are seen whole, or
//             the two diagonal halves and one whole at step 0)
//   transfer  one K/V shard, 2 n d heads e bytes (e bytes per element: 2 for bf16), at B bytes/s
//             one way (each GPU sends to one neighbour while it receives from the other)
//
// The transfer hides behind the compute when compute >= transfer, that is from
//   n >= e F / (2 B)   without the mask,       n >= e F / B   causal (zigzag),
// rows per GPU on: heads and head_dim cancel. Source: Liu, Zaharia and Abbeel 2023, Ring Attention,
// section 3 (the same condition, block size >= FLOPs / bandwidth); the link speeds are NVIDIA's
// H200 (NVLink 4: 900 GB/s per GPU, both directions together) and ConnectX-7 (400 Gb/s) data.
#pragma once

#include <string_view>

namespace ch09 {

// One direction of one GPU's link to its neighbour in the ring.
struct Link {
  std::string_view name;
  double bytes_per_second = 0;
};
inline constexpr Link kNvlink{"NVLink, 8 H200 in a node (900 GB/s per GPU both ways: 450 GB/s each way)", 450e9};
inline constexpr Link kAcrossNodes{"across nodes (400 Gb/s per GPU: 50 GB/s each way)", 50e9};

struct StepModel {
  double compute_s = 0;   // one step's attention on one GPU
  double transfer_s = 0;  // one K/V shard over the link
};

// One step of the ring for n rows per GPU. flops_per_second, element_bytes, link > 0. Never throws.
constexpr StepModel step_model(double n, double heads, double head_dim, double element_bytes, double flops_per_second,
                               bool causal, const Link& link) {
  const double flops = (causal ? 2.0 : 4.0) * n * n * head_dim * heads;
  const double bytes = 2.0 * n * head_dim * heads * element_bytes;
  return {flops / flops_per_second, bytes / link.bytes_per_second};
}

// The fewest rows per GPU at which a step's compute covers its transfer (see above). Never throws.
constexpr double shortest_hiding_rows(double element_bytes, double flops_per_second, bool causal, const Link& link) {
  return (causal ? 1.0 : 0.5) * element_bytes * flops_per_second / link.bytes_per_second;
}

// The backward's step (ring.h, the backward's lines 4-7) for n rows per GPU:
//
//   compute   10 n^2 d heads FLOP: chapter 07's five products per pair of chunks (S = Q K^T
//             recomputed, dV += P^T dO, dP = dO V^T, dQ += dS K, dK += dS^T Q), half of it causal
//             (zigzag), as in the forward
//   transfer  the next K/V shard in the element type and the travelling dK, dV in float32 (they sum
//             P parts; in bf16 each addition would round to 8 bits): 2 n d heads (e + 4) bytes a
//             step. K, V move during the step they are sent in, dK, dV during the next one: one of
//             each per step on the link, and one more dK, dV after the last step (their trip home,
//             not hidden: the length of one transfer of 2 n d heads 4 bytes)
//
// The transfer hides from n >= (e + 4) F / (5 B) rows per GPU without the mask, 2 (e + 4) F / (5 B)
// causal: for bf16 1.2 F / B, 6/5 of the forward's length without the mask (twice the compute, 3
// times the bytes). Source: Liu, Zaharia and Abbeel 2023, Ring Attention, section 3; Dao 2023,
// FlashAttention-2, section 3.2 (the backward's five matrix products). Never throws.
constexpr StepModel backward_step_model(double n, double heads, double head_dim, double element_bytes,
                                        double flops_per_second, bool causal, const Link& link) {
  const double flops = (causal ? 5.0 : 10.0) * n * n * head_dim * heads;
  const double bytes = 2.0 * n * head_dim * heads * (element_bytes + 4.0);
  return {flops / flops_per_second, bytes / link.bytes_per_second};
}

// The fewest rows per GPU at which a backward step's compute covers its transfer (see above).
// Never throws.
constexpr double shortest_backward_hiding_rows(double element_bytes, double flops_per_second, bool causal,
                                               const Link& link) {
  return (causal ? 2.0 : 1.0) * (element_bytes + 4.0) * flops_per_second / (5.0 * link.bytes_per_second);
}

}  // namespace ch09
