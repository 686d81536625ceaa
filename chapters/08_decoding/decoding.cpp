// Chapter 08's host code that is not a kernel: the split count, the checks before a launch, and the
// two entry points of decoding.h (decode_attention, combine_partials), which check their problem and
// call the build of decoding.cuh that runs on the device (fa::build_for).
#include "chapters/08_decoding/decoding.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "chapters/06_tensor_cores/tensor_cores.h"
#include "common/memory.h"

namespace ch08 {

namespace {

constexpr std::string_view kWho = "decode_attention";
constexpr std::uint64_t kIntMax = std::numeric_limits<int>::max();

// The most thread blocks of one dimension of the split kernel's grid that CUDA allows (y and z).
constexpr std::uint64_t kMaxGridYZ = 65535;

std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }

}  // namespace

CacheType parse_cache_type(std::string_view name) {
  for (CacheType t : {CacheType::float32, CacheType::bf16, CacheType::fp16}) {
    if (name == to_string(t)) return t;
  }
  throw std::invalid_argument(fmt::format("cache type '{}' is not supported; choose float32, bf16 or fp16", name));
}

double SplitChoice::efficiency() const {
  const double w = waves();
  return w <= 0 ? 0.0 : w / std::ceil(w);
}

SplitChoice choose_splits(std::int64_t blocks, int sms, int key_tiles, int max_splits) {
  SplitChoice choice{1, true, blocks, sms, key_tiles};
  if (static_cast<double>(blocks) >= 0.8 * sms)
    return choice;  // (nearly) a wave already: splitting only adds the merge
  const int most = std::min({max_splits, sms, key_tiles});
  // A count that gives each split as many tiles as one split fewer does is that count again, with an
  // empty split: not eligible.
  const auto eligible = [&](int s) {
    return s == 1 ||
           ceil_div(static_cast<std::uint64_t>(key_tiles), s) != ceil_div(static_cast<std::uint64_t>(key_tiles), s - 1);
  };
  std::vector<double> efficiency(static_cast<std::size_t>(std::max(most, 0)) + 1, 0.0);
  double best = 0.0;
  for (int s = 1; s <= most; ++s) {
    if (!eligible(s)) continue;
    choice.splits = s;
    efficiency[s] = choice.efficiency();
    best = std::max(best, efficiency[s]);
  }
  for (int s = 1; s <= most; ++s) {
    if (eligible(s) && efficiency[s] >= 0.85 * best) {
      choice.splits = s;
      return choice;
    }
  }
  choice.splits = 1;
  return choice;
}

std::string explain(const SplitChoice& c) {
  const auto percent = [](double x) { return fmt::format("{:.0f}%", 100.0 * x); };
  const std::string one_split = fmt::format("{} block{} on {} SMs: ", c.blocks, c.blocks == 1 ? "" : "s", c.sms);
  SplitChoice unsplit = c;
  unsplit.splits = 1;
  const std::string before =
      unsplit.waves() < 1.0 ? percent(unsplit.waves()) + " of one wave" : fmt::format("{:.2f} waves", unsplit.waves());
  const std::string after =
      fmt::format("{} blocks, {:.2f} waves, {} efficiency", c.blocks * c.splits, c.waves(), percent(c.efficiency()));
  if (!c.automatic) return fmt::format("{} split{} (given): {}", c.splits, c.splits == 1 ? "" : "s", after);
  if (c.splits > 1) return fmt::format("{}{} -> {} splits: {}", one_split, before, c.splits, after);
  if (static_cast<double>(c.blocks) >= 0.8 * c.sms)
    return fmt::format("{}{}, at least 80% of one -> 1 split", one_split, before);
  if (c.key_tiles <= 1) {
    return fmt::format("{}{}, but the longest sequence is {} tile of keys -> 1 split", one_split, before,
                       c.key_tiles == 0 ? "not one" : "one");
  }
  return fmt::format("{}{}; no split count does better -> 1 split", one_split, before);
}

CacheLayout cache_layout(const fa::Shape4& kv, std::size_t page_size, std::vector<int> cache_seqlens,
                         std::size_t spare_pages) {
  if (cache_seqlens.empty())
    cache_seqlens.assign(kv.batch, static_cast<int>(std::min<std::uint64_t>(kv.seq_len, kIntMax)));
  if (page_size == 0) return {kv, 1, std::move(cache_seqlens)};
  const std::size_t pages_per_seq = (kv.seq_len + page_size - 1) / page_size;
  return {
      {fa::saturating_add(fa::saturating_mul(kv.batch, pages_per_seq), spare_pages), kv.heads, page_size, kv.head_dim},
      pages_per_seq,
      std::move(cache_seqlens)};
}

void check_cache(const KVCache& cache) {
  const fa::Shape4& k = cache.K.shape;
  if (cache.V.shape != k) {
    throw std::invalid_argument(fmt::format("{}: the V pool {} and the K pool {} differ in shape; they must be equal",
                                            kWho, cache.V.shape.str(), k.str()));
  }
  if (cache.block_table.size() != cache.batch() * cache.pages_per_seq) {
    throw std::invalid_argument(
        fmt::format("{}: the block table holds {} entries; it must be [batch, pages_per_seq] = {} x {}", kWho,
                    cache.block_table.size(), cache.batch(), cache.pages_per_seq));
  }
  for (std::size_t b = 0; b < cache.batch(); ++b) {
    // The pages in use (a length past the pages is check_problem's to refuse).
    const auto len = static_cast<std::uint64_t>(std::max(cache.cache_seqlens[b], 0));
    const std::uint64_t in_use =
        std::min<std::uint64_t>(ceil_div(len, std::max<std::size_t>(k.seq_len, 1)), cache.pages_per_seq);
    for (std::size_t n = 0; n < in_use; ++n) {
      const int page = cache.block_table[b * cache.pages_per_seq + n];
      if (page < 0 || static_cast<std::size_t>(page) >= k.batch) {
        throw std::invalid_argument(fmt::format(
            "{}: block_table[{}][{}] = {}, a page sequence {} uses, is not a page of the pool: give 0 .. {}", kWho, b,
            n, page, b, k.batch == 0 ? 0 : k.batch - 1));
      }
    }
  }
}

Plan check_problem(const fa::Shape4& q, const CacheLayout& cache, const Options& options, fa::Device device) {
  const fa::Shape4& k = cache.pool;
  if (q.size() == 0) {
    throw std::invalid_argument(fmt::format("{}: Q {} is empty; every size must be at least 1", kWho, q.str()));
  }
  if (k.size() == 0) {
    throw std::invalid_argument(
        fmt::format("{}: the K/V pool {} is empty; it is [pages, kv_heads, page_size, head_dim], every size at least 1",
                    kWho, k.str()));
  }
  if (k.head_dim != q.head_dim) {
    throw std::invalid_argument(
        fmt::format("{}: Q has head_dim {} and the cache {}; they must be equal", kWho, q.head_dim, k.head_dim));
  }
  if (q.heads % k.heads != 0) {
    throw std::invalid_argument(fmt::format(
        "{}: heads {} is not a multiple of kv_heads {} (query head h reads K/V head h / (heads / kv_heads)); give "
        "kv_heads that divides heads",
        kWho, q.heads, k.heads));
  }
  if (cache.cache_seqlens.size() != q.batch) {
    throw std::invalid_argument(fmt::format("{}: {} cache length{} for a batch of {}; give one per sequence", kWho,
                                            cache.cache_seqlens.size(), cache.cache_seqlens.size() == 1 ? "" : "s",
                                            q.batch));
  }
  if (cache.pages_per_seq == 0 || k.batch > kIntMax || cache.pages_per_seq > kIntMax) {
    throw std::invalid_argument(fmt::format("{}: {} pages in the pool and {} per sequence; give 1 .. {} of each", kWho,
                                            k.batch, cache.pages_per_seq, kIntMax));
  }
  const std::uint64_t capacity = fa::saturating_mul(cache.pages_per_seq, k.seq_len);
  int longest = 0;
  for (std::size_t b = 0; b < q.batch; ++b) {
    const int len = cache.cache_seqlens[b];
    if (len < 0 || static_cast<std::uint64_t>(len) > capacity) {
      throw std::invalid_argument(
          fmt::format("{}: cache_seqlens[{}] = {} is not accepted; give 0 .. {} (pages_per_seq x page_size = {} x {})",
                      kWho, b, len, capacity, cache.pages_per_seq, k.seq_len));
    }
    longest = std::max(longest, len);
  }
  if (options.splits && (*options.splits < 1 || *options.splits > kMaxSplits)) {
    throw std::invalid_argument(
        fmt::format("{}: splits {} is not accepted; give 1 .. {}", kWho, *options.splits, kMaxSplits));
  }
  if (options.sms < 1) {
    throw std::invalid_argument(
        fmt::format("{}: sms {} is not accepted; give the GPU's SM count, at least 1", kWho, options.sms));
  }

  // The tile: the smaller one when it holds every packed row of a K/V head (the group's heads x the
  // new tokens), else the larger, with as many row blocks as it takes.
  const std::uint64_t rows = static_cast<std::uint64_t>(q.heads / k.heads) * q.seq_len;
  // On a GPU, where the user names no tile, one that its shared memory per block holds.
  const fa::Tile by_rows = rows <= static_cast<std::uint64_t>(kTileShapes[0].Br) ? kTileShapes[0] : kTileShapes[1];
  const std::span<const fa::KernelShape> shapes = compiled(options.cache_type);
  const fa::AttentionShape shape{q.batch, q.heads, q.seq_len, static_cast<std::size_t>(capacity), q.head_dim};
  DecodeProblem problem{
      fa::device_problem(kWho, shape, options.scale, options.causal, options.tile.value_or(by_rows), shapes)};
  const auto bytes = [&](fa::Tile t) { return shared_bytes(options.cache_type, problem.head_dim, t); };
  const fa::TileChoice choice =
      fa::tile_for_device(kWho, device, options.tile, by_rows, problem.head_dim, shapes, bytes);
  const fa::Tile tile = choice.tile;
  problem.tile = tile;
  if (ceil_div(rows, static_cast<std::uint64_t>(tile.Br)) > kMaxGridYZ) {
    throw std::invalid_argument(fmt::format(
        "{}: {} query rows per K/V head (heads / kv_heads x seq_len_q) need {} blocks of {} rows, more than the {} "
        "the grid allows",
        kWho, rows, ceil_div(rows, static_cast<std::uint64_t>(tile.Br)), tile.Br, kMaxGridYZ));
  }
  problem.batch = static_cast<int>(q.batch);
  problem.heads = static_cast<int>(q.heads);
  problem.kv_heads = static_cast<int>(k.heads);
  problem.pages = static_cast<int>(k.batch);
  problem.page_size = static_cast<int>(k.seq_len);
  problem.pages_per_seq = static_cast<int>(cache.pages_per_seq);
  problem.cache_type = options.cache_type;

  const std::int64_t blocks = std::int64_t{problem.batch} * problem.kv_heads * problem.row_blocks();
  const int key_tiles = static_cast<int>(ceil_div(static_cast<std::uint64_t>(longest), tile.Bc));
  SplitChoice split = options.splits ? SplitChoice{*options.splits, false, blocks, options.sms, key_tiles}
                                     : choose_splits(blocks, options.sms, key_tiles);
  problem.splits = split.splits;
  return {problem, split, choice};
}

std::uint64_t memory_needed(const DecodeProblem& p) {
  using fa::saturating_add, fa::saturating_mul;
  const std::uint64_t element = element_bytes(p.cache_type);
  const std::uint64_t rows = p.output_rows();
  const std::uint64_t q = saturating_mul(rows, p.head_dim);
  const std::uint64_t pool =
      saturating_mul(saturating_mul(p.pages, p.kv_heads), saturating_mul(p.page_size, p.head_dim));
  const std::uint64_t parts = p.splits == 1 ? 0 : saturating_mul(p.splits, saturating_mul(rows, p.head_dim + 1));
  // On the device: Q and the pools as elements, the table and the lengths, the partials, O and L.
  // On the host: the elements once more on their way (16-bit types), and O and L coming back.
  std::uint64_t bytes = saturating_mul(element, saturating_add(q, saturating_mul(2, pool)));
  if (element != 4) bytes = saturating_mul(2, bytes);
  bytes = saturating_add(bytes, saturating_mul(4, saturating_add(p.batch, saturating_mul(p.batch, p.pages_per_seq))));
  bytes = saturating_add(bytes, saturating_mul(4, parts));
  return saturating_add(bytes, saturating_mul(2 * 4, saturating_mul(rows, p.head_dim + 1)));
}

Result decode_attention(const fa::Tensor4<float>& Q, const KVCache& cache, const Options& options, fa::Device device) {
  const Plan plan = check_problem(Q.shape, cache.layout(), options, device);
  check_cache(cache);
  if (options.cache_type != CacheType::float32) {
    const ch06::ElementType element =
        options.cache_type == CacheType::bf16 ? ch06::ElementType::bf16 : ch06::ElementType::fp16;
    ch06::check_fits(Q, element, "Q");
    ch06::check_fits(cache.K, element, "K");
    ch06::check_fits(cache.V, element, "V");
  }
  return {fa::build_for(device, FA_BUILDS(ch08, run_decoding))(Q, cache, plan.problem), plan};
}

Merged combine_partials(const Partials& partials, const Merged* running, fa::Device device) {
  constexpr std::string_view who = "combine_partials";
  if (std::find(kHeadDims.begin(), kHeadDims.end(), partials.head_dim) == kHeadDims.end()) {
    throw std::invalid_argument(fmt::format("{}: head_dim {} is not supported; the kernel is compiled for head_dim {}",
                                            who, partials.head_dim, fmt::format("{}, {}", kHeadDims[0], kHeadDims[1])));
  }
  if (partials.splits < 1 || partials.splits > kMaxSplits || partials.rows < 1) {
    throw std::invalid_argument(fmt::format("{}: {} partials of {} rows; give 1 .. {} partials of at least 1 row", who,
                                            partials.splits, partials.rows, kMaxSplits));
  }
  const std::uint64_t rows = static_cast<std::uint64_t>(partials.rows);
  const std::uint64_t O_size = static_cast<std::uint64_t>(partials.splits) * rows * partials.head_dim;
  if (partials.O.size() != O_size || partials.L.size() != static_cast<std::uint64_t>(partials.splits) * rows) {
    throw std::invalid_argument(fmt::format(
        "{}: O holds {} values and L {}; for {} partials of {} rows of head_dim {} they must hold {} and {}", who,
        partials.O.size(), partials.L.size(), partials.splits, rows, partials.head_dim, O_size,
        static_cast<std::uint64_t>(partials.splits) * rows));
  }
  if (running != nullptr && (running->O.size() != rows * partials.head_dim || running->L.size() != rows)) {
    throw std::invalid_argument(fmt::format(
        "{}: the running result holds {} values of O and {} of L; for {} rows of head_dim {} they must hold {} and {}",
        who, running->O.size(), running->L.size(), rows, partials.head_dim, rows * partials.head_dim, rows));
  }
  return fa::build_for(device, FA_BUILDS(ch08, run_combine))(partials, running);
}

}  // namespace ch08
