// Chapter 08's kernels measured: the global bytes that simt's memory profile counted
// (common/simt/tools/profile.h, --profile) beside the traffic model's walk (traffic_model.h), kernel by
// kernel: the split kernel's loads (Q, the lengths, the block table, the cache) and stores (the
// partials, or O and L with one split), and the combine's.
#pragma once

#include <string>
#include <vector>

#include "chapters/08_decoding/lab/traffic_model.h"
#include "common/simt/tools/profile.h"

namespace ch08 {

// The comparison as the demo prints it; an empty string when the split kernel is not among
// `kernels` (as when no profile was recorded). Ends with "-> the kernels move exactly the bytes the
// model counts" when every figure agrees.
std::string format_profile_beside_model(const std::vector<simt::profile::KernelProfile>& kernels,
                                        const DecodeTraffic& model);

}  // namespace ch08
