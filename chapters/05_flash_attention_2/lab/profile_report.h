// Chapter 05's kernel measured: the global bytes that simt's memory profile counted
// (common/simt/tools/profile.h, --profile) beside the traffic model's (traffic_model.h).
//
// For self-attention without a mask the model's "no L2 reuse" walk, walk_fa2, counts per head
// what the kernel loads (Q once, K and V once per query block) and stores (O); times the heads
// they agree to the byte for float32. For other shapes (seq_len_q != seq_len_k, the causal mask,
// which skips tiles) the comparison is with fa2_kernel_bytes, the kernel's own walk. L (4 bytes
// per query row) is stored by the kernel and left out of the model; it is shown on its own line.
#pragma once

#include <string>
#include <vector>

#include "chapters/05_flash_attention_2/lab/traffic_model.h"
#include "common/kernel_problem.h"
#include "common/simt/tools/profile.h"
#include "common/tensor.h"

namespace ch05 {

// The comparison as printed by the demo, for the FlashAttention-2 kernel among `kernels` (an empty
// string when it is not among them, as when no profile was recorded).
std::string format_profile_beside_model(const std::vector<simt::profile::KernelProfile>& kernels,
                                        const KernelCase& shape);
// The same for the demo's problem: Q's shape [batch, heads, seq_len_q, head_dim], the keys'
// seq_len_k, the tile and the mask.
std::string format_profile_beside_model(const std::vector<simt::profile::KernelProfile>& kernels, const fa::Shape4& q,
                                        std::size_t seq_len_k, fa::Tile tile, bool causal);

}  // namespace ch05
