#include "chapters/05_flash_attention_2/lab/profile_report.h"

#include <fmt/format.h>

namespace ch05 {

std::string format_profile_beside_model(const std::vector<simt::profile::KernelProfile>& kernels, const KernelCase& c) {
  const simt::profile::KernelProfile* fa2 = simt::profile::find_kernel(kernels, "flash_attention_2_kernel");
  if (fa2 == nullptr) return "";
  const bool walkable = c.seq_len_q == c.seq_len_k && !c.causal;
  std::uint64_t model_loads = 0, model_o = 0;
  std::string source;
  const HbmBytes exact = fa2_kernel_bytes(c);
  if (walkable) {
    const Traffic walk = walk_fa2({c.seq_len_q, c.head_dim, c.Br, c.Bc, 4, 4});
    const std::uint64_t heads = c.batch_heads;
    model_loads = heads * (walk.moved.q_read + walk.moved.k_read + walk.moved.v_read);
    model_o = heads * walk.moved.o_write;
    source = fmt::format("the traffic model's \"no L2 reuse\" walk (walk_fa2), {} head{} x {} bytes", c.batch_heads,
                         c.batch_heads == 1 ? "" : "s",
                         walk.moved.q_read + walk.moved.k_read + walk.moved.v_read + walk.moved.o_write);
  } else {
    model_loads = exact.q_read + exact.k_read + exact.v_read;
    model_o = exact.o_write;
    source = "the kernel's own walk (fa2_kernel_bytes: unequal lengths or the causal mask's skipped tiles)";
  }
  const std::uint64_t loads = fa2->global_load.bytes, stores = fa2->global_store.bytes;
  const std::uint64_t o_measured = stores - exact.stats_write;
  std::string out = fmt::format(
      "\nGlobal memory of the FlashAttention-2 kernel, measured by simt's profile beside {} (float32):\n"
      "                       measured bytes   sectors x 32    model bytes\n",
      source);
  out += fmt::format("  loads (Q, K, V)    {:>16} {:>14} {:>14}\n", loads, 32 * fa2->global_load.sectors, model_loads);
  out += fmt::format("  stores (O)         {:>16} {:>14} {:>14}\n", o_measured, "", model_o);
  out += fmt::format("  stores (L)         {:>16} {:>14} {:>14}\n", exact.stats_write, "", "not modelled");
  out += fmt::format("  stores (O and L)   {:>16} {:>14}\n", stores, 32 * fa2->global_store.sectors);
  const bool same = loads == model_loads && o_measured == model_o;
  out += same ? "  -> the kernel moves exactly the bytes the model counts\n" : "  -> the kernel and the model DIFFER\n";
  return out;
}

std::string format_profile_beside_model(const std::vector<simt::profile::KernelProfile>& kernels, const fa::Shape4& q,
                                        std::size_t seq_len_k, fa::Tile tile, bool causal) {
  return format_profile_beside_model(
      kernels, KernelCase{static_cast<std::int64_t>(q.batch * q.heads), static_cast<std::int64_t>(q.seq_len),
                          static_cast<std::int64_t>(seq_len_k), static_cast<std::int64_t>(q.head_dim), tile.Br, tile.Bc,
                          causal});
}

}  // namespace ch05
