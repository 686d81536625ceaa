#include "chapters/10_hopper/lab/tma_traffic.h"

#include <fmt/format.h>

namespace ch10 {

std::string format_tma_beside_model(const std::vector<simt::profile::KernelProfile>& kernels, const TmaTraffic& model) {
  const simt::profile::KernelProfile* k = simt::profile::find_kernel(kernels, "hopper_kernel");
  if (k == nullptr) return "";
  struct Line {
    const char* what;
    std::uint64_t counted, modelled;
  };
  const Line lines[] = {
      {"TMA loads (Q_i, K_j, V_j): copies", k->tma_load.copies, model.load_copies},
      {"  bytes of their boxes", k->tma_load.box_bytes, model.load_box_bytes},
      {"  of which inside Q, K, V", k->tma_load.tensor_bytes, model.load_tensor_bytes},
      {"TMA stores (O_i): copies", k->tma_store.copies, model.store_copies},
      {"  bytes of their boxes", k->tma_store.box_bytes, model.store_box_bytes},
      {"  of which written to O", k->tma_store.tensor_bytes, model.store_tensor_bytes},
      {"wgmma (per warpgroup)", k->wgmma_read.instructions, model.wgmma},
      {"  bytes read from shared memory", k->wgmma_read.bytes, model.wgmma_bytes},
  };
  std::string out =
      "\nTMA and wgmma traffic of the Hopper kernel, counted by simt's profile beside the kernel's walk\n"
      "(chapters/10_hopper/lab/tma_traffic.h):\n"
      "                                          profile          model\n";
  bool same = true;
  for (const Line& line : lines) {
    out += fmt::format("  {:<34} {:>14} {:>14}\n", line.what, line.counted, line.modelled);
    same = same && line.counted == line.modelled;
  }
  out += same ? "  -> the kernel moves exactly the bytes the model counts\n" : "  -> the kernel and the model DIFFER\n";
  return out;
}

}  // namespace ch10
