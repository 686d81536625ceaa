// Chapter 04's kernels measured: the global bytes of S and P that simt's memory profile counted
// (common/simt/tools/profile.h, --profile), beside the 4 N^2 term of the standard-attention traffic
// model (chapter 05's traffic_model.h: S written and read back, P written and read back, e bytes
// per value, here with N^2 = seq_len_q * seq_len_k per head).
//
// The model counts each of the four passes once. The kernels, as written, make more requests:
// softmax_kernel reads its row of S three times (max, sum, then P), and pv_kernel's threads of one
// row each read the whole row of P (head_dim times in all). On a GPU the repeats hit the L1 and L2
// caches; "sectors x 32" shows how many bytes the memory system had to deliver per instruction.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/simt/tools/profile.h"

namespace ch04 {

// The comparison as the demo prints it (pv_kernel's loads are of P and V together: the model's V
// term, N d e, is added to its P pass there); empty when chapter 04's kernels are not among `kernels`.
std::string format_profile_beside_model(const std::vector<simt::profile::KernelProfile>& kernels,
                                        std::uint64_t batch_heads, std::uint64_t seq_len_q, std::uint64_t seq_len_k,
                                        std::uint64_t head_dim);

}  // namespace ch04
