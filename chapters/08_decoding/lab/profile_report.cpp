#include "chapters/08_decoding/lab/profile_report.h"

#include <fmt/format.h>

namespace ch08 {

std::string format_profile_beside_model(const std::vector<simt::profile::KernelProfile>& kernels,
                                        const DecodeTraffic& model) {
  const simt::profile::KernelProfile* split = simt::profile::find_kernel(kernels, "split_kv_kernel");
  if (split == nullptr) return "";
  const simt::profile::KernelProfile* combine = simt::profile::find_kernel(kernels, "combine_kernel");
  const KernelBytes measured_combine =
      combine == nullptr ? KernelBytes{} : KernelBytes{combine->global_load.bytes, combine->global_store.bytes};
  std::string out =
      "\nGlobal memory of the kernels, measured by simt's profile beside the traffic model (traffic_model.h):\n"
      "                                    measured bytes   sectors x 32    model bytes\n";
  out += fmt::format("  split kernel loads (Q, cache)   {:>16} {:>14} {:>14}\n", split->global_load.bytes,
                     32 * split->global_load.sectors, model.split.loads);
  out += fmt::format("    of which the cache's K and V  {:>16} {:>14} {:>14}\n", "", "", model.cache);
  out += fmt::format("    of which the block table      {:>16} {:>14} {:>14}\n", "", "", model.table);
  out += fmt::format("  split kernel stores (partials)  {:>16} {:>14} {:>14}\n", split->global_store.bytes,
                     32 * split->global_store.sectors, model.split.stores);
  out += fmt::format("  combine loads (partials)        {:>16} {:>14} {:>14}\n", measured_combine.loads,
                     combine == nullptr ? 0 : 32 * combine->global_load.sectors, model.combine.loads);
  out += fmt::format("  combine stores (O, L)           {:>16} {:>14} {:>14}\n", measured_combine.stores,
                     combine == nullptr ? 0 : 32 * combine->global_store.sectors, model.combine.stores);
  const bool same = split->global_load.bytes == model.split.loads && split->global_store.bytes == model.split.stores &&
                    measured_combine.loads == model.combine.loads && measured_combine.stores == model.combine.stores;
  out +=
      same ? "  -> the kernels move exactly the bytes the model counts\n" : "  -> the kernels and the model DIFFER\n";
  return out;
}

}  // namespace ch08
