// ch09_ring_attention: ring attention across P processes. Each rank holds a shard of Q, K and V;
// the K/V shards travel around the ring of ranks (MPI_Isend / MPI_Irecv, started before each step's
// compute) while each rank folds its queries' partial (O_i, L_i) against the shard it holds into its
// running (O, L) with chapter 08's merge. Rank 0 gathers O and L and checks them against chapter 05
// run in one process on the same inputs.
//
//   mpirun --quiet -np 4 ch09_ring_attention                                 4 ranks, non-causal
//   mpirun --quiet -np 4 ch09_ring_attention --causal --layout zigzag --seq 1000
//   mpirun --quiet -np 2 ch09_ring_attention --dtype bf16 --out o.npy
//   ch09_ring_attention                                                      one rank: the ring of one
//   ch09_ring_attention --cluster --tflops 400                               the ring on 8 H200, on paper
//   mpirun --quiet -np 4 ch09_ring_attention --backward --causal --layout zigzag --dq dq.npy
//                                      the forward ring, then the backward ring: dK, dV travel with K, V
//
// (--quiet keeps Open MPI's own notices out when a run fails: the program's one line says why.)
// The demo prints each rank's shard, its compute time and the layout's imbalance; the bytes each
// rank sent beside the model, (P - 1) K/V shards; and per step, compute beside the time the rank
// waited for the transfer.
//
// Every rank parses the flags. Rank 0 alone opens the --q/--k/--v files and checks them (headers,
// shapes, dtypes, sizes) with the rest of the problem before any work, and tells every rank its
// verdict and the shape in one MPI_Bcast; a refusal is printed by rank 0 only, and every rank exits
// with it. Rank 0 then draws the inputs from --seed (or reads the files) and scatters each rank its
// rows (MPI_Scatterv). Any error during the work ends every rank at once (MPI_Abort) with the one
// line of the rank that failed, never a hang.
//
// --backward: after the forward ring, each rank holds its rows' O and L; with its rows of dO (from
// --do, or drawn from the seed as chapter 07's demo draws it) the backward ring (ring.h) computes
// dQ in place while dK and dV travel with K and V and come home. Rank 0 gathers dQ, dK, dV, checks
// them against chapter 07 in one process (lab/vs_chapter_07.h) and the bytes each rank sent against
// the model (backward_sends), and writes --dq --dk --dv.
#include <mpi.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <exception>
#include <functional>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "chapters/03_online_weighted_sum/attention.h"
#include "chapters/04_naive_attention/lab/vs_chapter_03.h"
#include "chapters/05_flash_attention_2/flash_attention_2.h"
#include "chapters/05_flash_attention_2/lab/vs_chapter_04.h"
#include "chapters/06_tensor_cores/lab/error_budget.h"
#include "chapters/06_tensor_cores/tensor_cores.h"
#include "chapters/07_backward/backward.h"
#include "chapters/08_decoding/lab/vs_dense.h"
#include "chapters/09_ring_attention/lab/cluster_model.h"
#include "chapters/09_ring_attention/lab/vs_chapter_07.h"
#include "chapters/09_ring_attention/ring.h"
#include "chapters/09_ring_attention/shards.h"
#include "common/front_door.h"
#include "common/npy.h"
#include "common/program.h"
#include "common/random.h"
#include "common/simt/runtime/progress.h"

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// A rough cost of this demo on the CPU path, for the notice of a long run only: the ring's kernels
// (all ranks together, on the cores they share), chapter 05's reference on rank 0 and chapter 04's
// plain evaluation for its bound, 4 x head_dim operations a score each, at a rate measured once on
// a 2-core laptop (2 ranks, --seq 1024, 2 heads, head_dim 64: 1.6 GFLOP so counted in 2.9 s, MPI's
// start included).
constexpr double kFlopsPerScore = 3 * 4;  // x head_dim
constexpr double kFlopsPerSecond = 0.6e9;
// With --backward, also chapter 07's kernels twice (the ring's, and chapter 07's in one process for
// the check; 16 x head_dim with the deterministic dQ kernel) and the float64 gradient and the float32
// evaluation beside them (14 x head_dim each), at the same rate: a rough count.
constexpr double kBackwardFlopsPerScore = kFlopsPerScore + 2 * 16 + 2 * 14;

// MPI for the life of main(): MPI_Init first, MPI_Finalize last.
struct Mpi {
  int rank = 0, ranks = 1;
  Mpi(int* argc, char*** argv) {
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  }
  ~Mpi() { MPI_Finalize(); }
  Mpi(const Mpi&) = delete;
  Mpi& operator=(const Mpi&) = delete;
};

// Before the flags are parsed: every rank must have been started with the same arguments, or the
// ranks would disagree on the problem (an MPMD launch, `mpirun -np 1 prog --seq 16 --bogus : -np 2
// prog --seq 16`, refused by rank 0 while the others wait in the next collective for ever). One
// collective: the smallest and the largest hash of argv[1..] (FNV-1a, 64 bits) over the ranks, as
// the minimum of (h, ~h). Where they differ, rank 0 says so in one line and every rank exits with
// the refusal's status; returns true where all ranks agree.
bool same_arguments_on_every_rank(const Mpi& mpi, int argc, char** argv) {
  std::uint64_t hash = 14695981039346656037ull;
  for (int a = 1; a < argc; ++a) {
    for (const char* c = argv[a];; ++c) {  // each argument with its '\0', so that "ab" "c" != "a" "bc"
      hash = (hash ^ static_cast<unsigned char>(*c)) * 1099511628211ull;
      if (*c == '\0') break;
    }
  }
  std::uint64_t mine[2] = {hash, ~hash}, least[2] = {};
  MPI_Allreduce(mine, least, 2, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  if (least[0] == ~least[1]) return true;
  if (mpi.rank == 0) {
    fa::say(stderr,
            "error: the {} ranks were not all started with the same arguments (an MPMD launch with ':'?); give every "
            "rank the same flags\n",
            mpi.ranks);
  }
  return false;
}

// The one collective before any work: true on every rank when every rank passed its checks. A rank
// that refused (and printed why, if it is rank 0) calls it with false after the front door returns.
bool every_rank_ready(bool ready) {
  int mine = ready ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

// The checks of the problem, made by rank 0 alone (it alone opens the input files): `check` returns
// the shape [batch, heads, seq_len, head_dim] or throws to refuse. Its verdict and the shape reach
// every rank in one MPI_Bcast, which every rank joins before any other check can refuse, so that a
// refusal of rank 0 (a malformed file, a wrong shape) ends every rank at once: rank 0 rethrows its
// own, which it prints; the others throw one that the front door does not print (only rank 0 does).
fa::Shape4 rank_0_checks(const Mpi& mpi, const std::function<fa::Shape4()>& check) {
  std::array<std::uint64_t, 5> verdict{};  // refused (0 or 1), batch, heads, seq_len, head_dim
  std::exception_ptr refusal;
  if (mpi.rank == 0) {
    try {
      const fa::Shape4 s = check();
      verdict = {0, s.batch, s.heads, s.seq_len, s.head_dim};
    } catch (const std::exception&) {
      refusal = std::current_exception();
      verdict[0] = 1;
    }
  }
  MPI_Bcast(verdict.data(), static_cast<int>(verdict.size()), MPI_UINT64_T, 0, MPI_COMM_WORLD);
  if (refusal) std::rethrow_exception(refusal);
  if (verdict[0] != 0) throw std::runtime_error("rank 0 refused the problem");
  return {verdict[1], verdict[2], verdict[3], verdict[4]};
}

// An error during the ring, on any rank: its one line, then every rank ends (mpirun exits non-zero).
[[noreturn]] void abort_ring(const std::exception& e) {
  std::fflush(stdout);
  fa::say(stderr, "error: {}\n", e.what());  // (a closed stderr loses the line, not the abort)
  MPI_Abort(MPI_COMM_WORLD, fa::kExitFail);
  std::abort();  // (MPI_Abort does not return)
}

// A K/V shard on the wire: K's values, then V's, float32 (and the same for a shard's dK, dV in the
// backward). (A GPU ring would send K and V in the kernel's element type, 2 bytes for bf16.)
std::size_t wire_floats(const fa::Shape4& s, std::size_t rows) { return 2 * s.batch * s.heads * rows * s.head_dim; }

std::vector<float> pack(const fa::Tensor4<float>& first, const fa::Tensor4<float>& second) {
  std::vector<float> wire(first.values);
  wire.insert(wire.end(), second.values.begin(), second.values.end());
  return wire;
}

ch09::KVShard unpack(const std::vector<float>& wire, std::size_t owner, std::vector<ch09::Chunk> chunks,
                     const fa::Shape4& full) {
  const fa::Shape4 s{full.batch, full.heads, ch09::shard_rows(chunks), full.head_dim};
  const auto half = static_cast<std::ptrdiff_t>(s.size());
  return {owner, std::move(chunks), fa::Tensor4<float>(s, std::vector<float>(wire.begin(), wire.begin() + half)),
          fa::Tensor4<float>(s, std::vector<float>(wire.begin() + half, wire.end()))};
}

// Every rank's count of values and its offset in a buffer that lays the shards end to end in rank
// order, for a tensor of `per_row` values a row (head_dim for Q, K, V and O; 1 for L): the counts
// and displacements of MPI_Scatterv and MPI_Gatherv. Rank 0 checked that the whole fits in int.
struct ShardCounts {
  std::vector<int> counts, offsets;
};

ShardCounts shard_counts(const fa::Shape4& full, std::size_t P, ch09::Layout layout, std::size_t per_row) {
  ShardCounts c{std::vector<int>(P), std::vector<int>(P)};
  for (std::size_t r = 0, offset = 0; r < P; ++r) {
    const std::size_t n =
        full.batch * full.heads * ch09::shard_rows(ch09::chunks_of_rank(full.seq_len, P, r, layout)) * per_row;
    c.counts[r] = static_cast<int>(n);
    c.offsets[r] = static_cast<int>(offset);
    offset += n;
  }
  return c;
}

// Rank 0 sends every rank its rows of x [batch, heads, seq_len, head_dim] (chunks_of_rank), in one
// MPI_Scatterv; x is read on rank 0 only. Returns this rank's shard [batch, heads, shard rows,
// head_dim].
fa::Tensor4<float> scatter_rows(const fa::Tensor4<float>& x, const fa::Shape4& full, const Mpi& mpi,
                                ch09::Layout layout) {
  const auto P = static_cast<std::size_t>(mpi.ranks), rank = static_cast<std::size_t>(mpi.rank);
  const ShardCounts c = shard_counts(full, P, layout, full.head_dim);
  std::vector<float> sending;  // rank 0: every rank's rows, end to end
  if (mpi.rank == 0) {
    sending.reserve(full.size());
    for (std::size_t r = 0; r < P; ++r) {
      const fa::Tensor4<float> shard = ch09::take_rows(x, ch09::chunks_of_rank(full.seq_len, P, r, layout));
      sending.insert(sending.end(), shard.values.begin(), shard.values.end());
    }
  }
  const std::vector<ch09::Chunk> mine = ch09::chunks_of_rank(full.seq_len, P, rank, layout);
  fa::Tensor4<float> shard(fa::Shape4{full.batch, full.heads, ch09::shard_rows(mine), full.head_dim});
  MPI_Scatterv(sending.data(), c.counts.data(), c.offsets.data(), MPI_FLOAT, shard.values.data(), c.counts[rank],
               MPI_FLOAT, 0, MPI_COMM_WORLD);
  return shard;
}

// What one rank measured.
struct RankTimes {
  std::vector<double> compute_ms;      // [step]: the kernels and the merges of that step
  std::vector<double> wait_ms;         // [step]: blocked in MPI_Wait(all) after the compute (the transfer not hidden)
  std::vector<double> bytes_per_step;  // [step]: sent by MPI_Isend at that step
  double transfer_alone_ms = 0;        // one K/V shard sent and one received, nothing else running
  double bytes_sent = 0;               // by MPI_Isend over the ring
  double partials = 0;                 // kernel launches (pairs of chunks that see each other)
};

struct RankResult {
  fa::Tensor4<float> O;  // [batch, heads, shard rows, head_dim]
  std::vector<float> L;  // [batch, heads, shard rows]
  RankTimes times;
};

// The ring of ring.h, lines 1-7, with MPI moving the shards: at step s this rank holds the K/V
// shard of rank (rank - s) mod P, sends it to rank + 1 and receives the next from rank - 1, both
// started before the step's compute so that the transfer runs beside it. Q, K, V: this rank's
// shards (scatter_rows) of the whole problem's `full` shape.
RankResult run_ring(fa::Tensor4<float> Q, fa::Tensor4<float> K, fa::Tensor4<float> V, const fa::Shape4& full,
                    const Mpi& mpi, ch09::Layout layout, const ch09::Options& options, fa::Device device) {
  const auto P = static_cast<std::size_t>(mpi.ranks), rank = static_cast<std::size_t>(mpi.rank);
  const int next = (mpi.rank + 1) % mpi.ranks, previous = (mpi.rank + mpi.ranks - 1) % mpi.ranks;
  const std::vector<ch09::Chunk> mine = ch09::chunks_of_rank(full.seq_len, P, rank, layout);
  ch09::RankState state(std::move(Q), mine, options, device);  // line 1
  ch09::KVShard held{rank, mine, std::move(K), std::move(V)};
  std::vector<float> sending = pack(held.K, held.V), arriving;
  RankTimes times;
  times.bytes_per_step.assign(P, 0.0);

  // The transfer alone, for the table: this shard to the next rank, the previous rank's from it.
  if (P > 1) {
    arriving.resize(wire_floats(
        full, ch09::shard_rows(ch09::chunks_of_rank(full.seq_len, P, ch09::owner_at_step(rank, 1, P), layout))));
    MPI_Barrier(MPI_COMM_WORLD);
    const Clock::time_point start = Clock::now();
    MPI_Sendrecv(sending.data(), static_cast<int>(sending.size()), MPI_FLOAT, next, 0, arriving.data(),
                 static_cast<int>(arriving.size()), MPI_FLOAT, previous, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    times.transfer_alone_ms = ms_since(start);
    MPI_Barrier(MPI_COMM_WORLD);
  }

  for (std::size_t step = 0; step < P; ++step) {  // line 2
    // Line 4, started first: the shard this rank holds goes on, the one it holds next comes in.
    std::vector<MPI_Request> requests;
    const std::size_t arriving_owner = ch09::owner_at_step(rank, step + 1, P);
    std::vector<ch09::Chunk> arriving_chunks;
    if (step + 1 < P) {
      arriving_chunks = ch09::chunks_of_rank(full.seq_len, P, arriving_owner, layout);
      arriving.assign(wire_floats(full, ch09::shard_rows(arriving_chunks)), 0.0f);
      requests.resize(2);
      const int tag = static_cast<int>(step) + 1;
      MPI_Irecv(arriving.data(), static_cast<int>(arriving.size()), MPI_FLOAT, previous, tag, MPI_COMM_WORLD,
                &requests[0]);
      MPI_Isend(sending.data(), static_cast<int>(sending.size()), MPI_FLOAT, next, tag, MPI_COMM_WORLD, &requests[1]);
      times.bytes_per_step[step] = static_cast<double>(sending.size() * sizeof(float));
      times.bytes_sent += times.bytes_per_step[step];
    }
    // Line 5: the partials against the held shard, merged into the running (O, L).
    Clock::time_point start = Clock::now();
    times.partials += state.fold(held);
    times.compute_ms.push_back(ms_since(start));
    // Line 6: wait for the transfer; what it did not hide is the time spent here.
    start = Clock::now();
    if (!requests.empty()) MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
    times.wait_ms.push_back(ms_since(start));
    if (step + 1 < P) {  // line 3 of the next step
      std::swap(sending, arriving);
      held = unpack(sending, arriving_owner, std::move(arriving_chunks), full);
    }
  }
  return {state.O(), state.L(), std::move(times)};  // line 7
}

// The backward ring of ring.h, lines 1-9, with MPI moving the shards: K, V sent to rank + 1 before
// the step's compute (as the forward); the dK, dV of the shard held, once this rank's part is added,
// sent after it, so that they travel during the next step; after the last step they go home. Q, O, L,
// dO: this rank's rows (O and L from run_ring); K, V: its K/V shard, of the whole problem's `full`
// shape. Returns its rows' dQ, dK, dV.
struct BackwardResult {
  fa::Tensor4<float> dQ, dK, dV;  // [batch, heads, shard rows, head_dim]
  RankTimes times;
};

BackwardResult run_ring_backward(const fa::Tensor4<float>& Q, fa::Tensor4<float> K, fa::Tensor4<float> V,
                                 const fa::Tensor4<float>& O, const std::vector<float>& L, const fa::Tensor4<float>& dO,
                                 const fa::Shape4& full, const Mpi& mpi, ch09::Layout layout,
                                 const ch09::Options& options, fa::Device device) {
  const auto P = static_cast<std::size_t>(mpi.ranks), rank = static_cast<std::size_t>(mpi.rank);
  const int next = (mpi.rank + 1) % mpi.ranks, previous = (mpi.rank + mpi.ranks - 1) % mpi.ranks;
  const std::vector<ch09::Chunk> mine = ch09::chunks_of_rank(full.seq_len, P, rank, layout);
  ch09::RankBackward state(Q, O, L, dO, mine, options, device);  // line 1
  ch09::KVShard held{rank, mine, std::move(K), std::move(V)};
  std::vector<float> sending = pack(held.K, held.V), arriving, gradients_sending, gradients_arriving;
  MPI_Request gradients_sent = MPI_REQUEST_NULL, gradients_received = MPI_REQUEST_NULL;
  ch09::KVGradients travelling;
  RankTimes times;
  times.bytes_per_step.assign(P, 0.0);
  const auto count = [](const std::vector<float>& wire) { return static_cast<int>(wire.size()); };
  for (std::size_t step = 0; step < P; ++step) {  // line 2
    // Line 4, started first: the K/V shard this rank holds goes on, the one it holds next comes in.
    std::vector<MPI_Request> requests;
    const std::size_t arriving_owner = ch09::owner_at_step(rank, step + 1, P);
    std::vector<ch09::Chunk> arriving_chunks = ch09::chunks_of_rank(full.seq_len, P, arriving_owner, layout);
    if (step + 1 < P) {
      arriving.assign(wire_floats(full, ch09::shard_rows(arriving_chunks)), 0.0f);
      requests.resize(2);
      const int tag = static_cast<int>(step) + 1;
      MPI_Irecv(arriving.data(), count(arriving), MPI_FLOAT, previous, tag, MPI_COMM_WORLD, &requests[0]);
      MPI_Isend(sending.data(), count(sending), MPI_FLOAT, next, tag, MPI_COMM_WORLD, &requests[1]);
      times.bytes_per_step[step] += static_cast<double>(sending.size() * sizeof(float));
    }
    // Line 5: chapter 07 on every pair of chunks that see each other; dQ kept, this step's dK, dV part.
    Clock::time_point start = Clock::now();
    ch09::KVGradients part = state.step(held);
    times.compute_ms.push_back(ms_since(start));
    // Line 6: the held shard's dK, dV so far, from rank - 1 (sent at its previous step), plus the part.
    start = Clock::now();
    if (step == 0) {
      travelling = std::move(part);
    } else {
      MPI_Wait(&gradients_received, MPI_STATUS_IGNORE);
      ch09::KVShard so_far = unpack(gradients_arriving, held.owner, held.chunks, full);
      travelling = {held.owner, std::move(so_far.K), std::move(so_far.V)};
      ch09::accumulate(travelling, part);
    }
    // Line 7: on to rank + 1 (at the last step, home to their owner), not waited for: they travel
    // during the next step's compute. And the next shard's dK, dV come in from rank - 1 (after the
    // last step, this rank's own).
    if (P > 1) {
      MPI_Wait(&gradients_sent, MPI_STATUS_IGNORE);  // (the previous step's send, whose buffer is reused)
      gradients_sending = pack(travelling.dK, travelling.dV);
      const int tag = static_cast<int>(P + step) + 1;
      MPI_Isend(gradients_sending.data(), count(gradients_sending), MPI_FLOAT, next, tag, MPI_COMM_WORLD,
                &gradients_sent);
      times.bytes_per_step[step] += static_cast<double>(gradients_sending.size() * sizeof(float));
      const std::size_t coming = step + 1 < P ? arriving_owner : rank;
      gradients_arriving.assign(
          wire_floats(full, ch09::shard_rows(ch09::chunks_of_rank(full.seq_len, P, coming, layout))), 0.0f);
      MPI_Irecv(gradients_arriving.data(), count(gradients_arriving), MPI_FLOAT, previous, tag, MPI_COMM_WORLD,
                &gradients_received);
    }
    // Line 8: wait for line 4.
    if (!requests.empty()) MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
    times.wait_ms.push_back(ms_since(start));
    if (step + 1 < P) {  // line 3 of the next step
      std::swap(sending, arriving);
      held = unpack(sending, arriving_owner, std::move(arriving_chunks), full);
    }
  }
  // Line 9: this rank's own dK, dV, home from rank - 1 (with one rank, they never left).
  if (P > 1) {
    const Clock::time_point start = Clock::now();
    MPI_Wait(&gradients_received, MPI_STATUS_IGNORE);
    MPI_Wait(&gradients_sent, MPI_STATUS_IGNORE);
    ch09::KVShard home = unpack(gradients_arriving, rank, mine, full);
    travelling = {rank, std::move(home.K), std::move(home.V)};
    times.wait_ms.back() += ms_since(start);
  }
  for (const double b : times.bytes_per_step) times.bytes_sent += b;
  times.partials = state.pairs();
  return {state.dQ(), std::move(travelling.dK), std::move(travelling.dV), std::move(times)};
}

// Rank 0 gathers every rank's rows of a [batch, heads, seq_len, per_row] tensor (`mine`: this rank's
// shard, its values end to end) and puts them back in the sequence's order; the other ranks get an
// empty tensor. per_row: head_dim for O, dQ, dK, dV; 1 for L.
fa::Tensor4<float> gather_rows(const std::vector<float>& mine, const Mpi& mpi, const fa::Shape4& full,
                               ch09::Layout layout, std::size_t per_row) {
  const auto P = static_cast<std::size_t>(mpi.ranks);
  const fa::Shape4 whole{full.batch, full.heads, full.seq_len, per_row};
  const ShardCounts c = shard_counts(full, P, layout, per_row);
  std::vector<float> all(mpi.rank == 0 ? whole.size() : 0);
  MPI_Gatherv(mine.data(), static_cast<int>(mine.size()), MPI_FLOAT, all.data(), c.counts.data(), c.offsets.data(),
              MPI_FLOAT, 0, MPI_COMM_WORLD);
  if (mpi.rank != 0) return {};
  fa::Tensor4<float> x(whole);
  for (std::size_t r = 0; r < P; ++r) {
    const std::vector<ch09::Chunk> chunks = ch09::chunks_of_rank(full.seq_len, P, r, layout);
    const auto begin = all.begin() + c.offsets[r];
    ch09::put_rows(x,
                   fa::Tensor4<float>(fa::Shape4{full.batch, full.heads, ch09::shard_rows(chunks), per_row},
                                      std::vector<float>(begin, begin + c.counts[r])),
                   chunks);
  }
  return x;
}

// Rank 0 gathers every rank's times: [rank].
std::vector<RankTimes> gather_times(const RankTimes& mine, const Mpi& mpi) {
  const auto P = static_cast<std::size_t>(mpi.ranks);
  // 3P + 3 doubles per rank.
  std::vector<double> row(mine.compute_ms);
  row.insert(row.end(), mine.wait_ms.begin(), mine.wait_ms.end());
  row.insert(row.end(), mine.bytes_per_step.begin(), mine.bytes_per_step.end());
  row.insert(row.end(), {mine.transfer_alone_ms, mine.bytes_sent, mine.partials});
  std::vector<double> rows(mpi.rank == 0 ? row.size() * P : 0);
  MPI_Gather(row.data(), static_cast<int>(row.size()), MPI_DOUBLE, rows.data(), static_cast<int>(row.size()),
             MPI_DOUBLE, 0, MPI_COMM_WORLD);
  std::vector<RankTimes> all;
  for (std::size_t r = 0; mpi.rank == 0 && r < P; ++r) {
    const auto at = [&](std::size_t n) { return rows.begin() + static_cast<std::ptrdiff_t>(r * row.size() + n); };
    RankTimes t;
    t.compute_ms.assign(at(0), at(P));
    t.wait_ms.assign(at(P), at(2 * P));
    t.bytes_per_step.assign(at(2 * P), at(3 * P));
    t.transfer_alone_ms = *at(3 * P);
    t.bytes_sent = *at(3 * P + 1);
    t.partials = *at(3 * P + 2);
    all.push_back(std::move(t));
  }
  return all;
}

// Rank 0 gathers every rank's O, L and times: O and L put back in the sequence's order.
struct Gathered {
  fa::Tensor4<float> O;
  std::vector<float> L;
  std::vector<RankTimes> times;  // [rank]
};

Gathered gather(const RankResult& mine, const Mpi& mpi, const fa::Shape4& full, ch09::Layout layout) {
  std::vector<RankTimes> times = gather_times(mine.times, mpi);
  fa::Tensor4<float> O = gather_rows(mine.O.values, mpi, full, layout, full.head_dim);
  fa::Tensor4<float> L = gather_rows(mine.L, mpi, full, layout, 1);
  return {std::move(O), std::move(L.values), std::move(times)};
}

double sum(const std::vector<double>& x) {
  double s = 0;
  for (double v : x) s += v;
  return s;
}

// The tables of the run (rank 0): each rank's shard and time, the imbalance of both layouts, the
// bytes each rank sent beside the model, and per step compute beside the wait for the transfer.
void print_ring(const Gathered& g, const fa::Shape4& full, ch09::Layout layout, bool causal) {
  const std::size_t P = g.times.size();
  const std::vector<double> pairs = ch09::pairs_per_rank(full.seq_len, P, layout, causal);
  std::vector<double> compute(P);
  fmt::print("rank  rows of the sequence       query rows  (q, k) pairs seen  partials  compute ms\n");
  for (std::size_t r = 0; r < P; ++r) {
    std::string rows;
    for (const ch09::Chunk& c : ch09::chunks_of_rank(full.seq_len, P, r, layout)) {
      rows += c.size() == 0 ? "(none) " : fmt::format("{}..{} ", c.begin, c.end - 1);
    }
    compute[r] = sum(g.times[r].compute_ms);
    fmt::print("{:>4}  {:<26} {:>10}  {:>17.0f}  {:>8.0f}  {:>10.3f}\n", r, rows,
               ch09::shard_rows(ch09::chunks_of_rank(full.seq_len, P, r, layout)), pairs[r], g.times[r].partials,
               compute[r]);
  }
  fmt::print("imbalance (slowest / mean): {:.2f} measured; modelled from the pairs: {:.2f} {}, ",
             ch09::imbalance(compute), ch09::imbalance(pairs), ch09::to_string(layout));
  const ch09::Layout other = layout == ch09::Layout::zigzag ? ch09::Layout::contiguous : ch09::Layout::zigzag;
  fmt::print("{:.2f} {}\n\n", ch09::imbalance(ch09::pairs_per_rank(full.seq_len, P, other, causal)),
             ch09::to_string(other));

  if (P == 1) {
    fmt::print("One rank: nothing travels.\n\n");
    return;
  }
  const double shard_model = 2.0 * static_cast<double>(full.batch * full.heads * full.head_dim * sizeof(float)) *
                             static_cast<double>(full.seq_len) / static_cast<double>(P);
  fmt::print(
      "bytes sent per rank: the model, (P - 1) K/V shards of 2 x batch x heads x seq/P x head_dim x 4 B = {:.0f}\n",
      static_cast<double>(P - 1) * shard_model);
  for (std::size_t r = 0; r < P; ++r) {
    fmt::print("  rank {}: {:.0f} bytes sent, transfer of one shard alone {:.3f} ms\n", r, g.times[r].bytes_sent,
               g.times[r].transfer_alone_ms);
  }
  fmt::print("\nstep  compute ms (slowest rank)  wait ms for the transfer (longest)\n");
  for (std::size_t s = 0; s < P; ++s) {
    double compute_max = 0, wait_max = 0;
    for (const RankTimes& t : g.times) {
      compute_max = std::max(compute_max, t.compute_ms[s]);
      wait_max = std::max(wait_max, t.wait_ms[s]);
    }
    fmt::print("{:>4}  {:>25.3f}  {:>34.3f}{}\n", s, compute_max, wait_max, s + 1 == P ? "  (nothing travels)" : "");
  }
  fmt::print("(wall clock of one run, not a benchmark; the ranks share this machine's cores)\n\n");
}

// The tables of the backward run (rank 0): each rank's pairs and compute, the bytes it sent at each
// step beside the model (ch09::backward_sends), and per step compute beside the wait. Returns whether
// every rank sent exactly the model's bytes at every step.
bool print_backward(const std::vector<RankTimes>& times, const fa::Shape4& full, ch09::Layout layout) {
  const std::size_t P = times.size();
  fmt::print("rank  rows of the sequence       pairs run by chapter 07  compute ms\n");
  for (std::size_t r = 0; r < P; ++r) {
    std::string rows;
    for (const ch09::Chunk& c : ch09::chunks_of_rank(full.seq_len, P, r, layout)) {
      rows += c.size() == 0 ? "(none) " : fmt::format("{}..{} ", c.begin, c.end - 1);
    }
    fmt::print("{:>4}  {:<26} {:>23.0f}  {:>10.3f}\n", r, rows, times[r].partials, sum(times[r].compute_ms));
  }
  bool equal = true;
  fmt::print(
      "\nbytes sent per rank and step (K, V and the dK, dV of the shard held; at the last step dK, dV home): "
      "counted, and the model's\n");
  for (std::size_t r = 0; r < P; ++r) {
    const std::vector<double> model = ch09::backward_sends(full, P, r, layout);
    std::string counted, modelled;
    for (std::size_t s = 0; s < P; ++s) {
      counted += fmt::format(" {:.0f}", times[r].bytes_per_step[s]);
      modelled += fmt::format(" {:.0f}", model[s]);
    }
    equal = equal && times[r].bytes_per_step == model;
    fmt::print("  rank {}:{} ({:.0f} in all); model:{}\n", r, counted, times[r].bytes_sent, modelled);
  }
  fmt::print("{}\n", equal ? "every rank sent exactly the model's bytes at every step"
                           : "the bytes sent differ from the model");
  fmt::print("\nstep  compute ms (slowest rank)  wait ms for dK, dV and the transfer (longest)\n");
  for (std::size_t s = 0; s < P; ++s) {
    double compute_max = 0, wait_max = 0;
    for (const RankTimes& t : times) {
      compute_max = std::max(compute_max, t.compute_ms[s]);
      wait_max = std::max(wait_max, t.wait_ms[s]);
    }
    fmt::print("{:>4}  {:>25.3f}  {:>46.3f}{}\n", s, compute_max, wait_max, s + 1 == P ? "  (dK, dV home)" : "");
  }
  fmt::print("(wall clock of one run, not a benchmark; the ranks share this machine's cores)\n\n");
  return equal;
}

// The check of the backward (rank 0): the gathered dQ, dK, dV against chapter 07 run in one process
// on the whole problem, with the same O and L (the forward ring's, gathered), each within chapter
// 07's bound (lab/vs_chapter_07.h: twice a plain float32 evaluation's error against the float64
// gradient, plus u); and every rank's bytes equal to the model.
fa::Check check_backward(const fa::Tensor4<float>& dQ, const fa::Tensor4<float>& dK, const fa::Tensor4<float>& dV,
                         const Gathered& forward, const fa::AttentionFlags::Inputs& in, const fa::Tensor4<float>& dO,
                         const ch09::Options& options, std::size_t P, ch09::Layout layout, bool bytes_equal,
                         fa::Device device) {
  const ch09::BackwardAgreement a =
      ch09::vs_chapter_07(dQ, dK, dV, in.Q, in.K, in.V, forward.O, forward.L, dO, options, device);
  fmt::print(
      "agreement with chapter 07 in one process (the same O and L), rel L2; bound: chapter 07's, 2 x a float32 "
      "evaluation's error + {:.1g}:\n",
      fa::kFloat32UnitRoundoff);
  for (const auto& [name, g] : {std::pair{"dQ", a.dQ}, std::pair{"dK", a.dK}, std::pair{"dV", a.dV}}) {
    fmt::print("  {}: rel L2 {:.2g}, max abs {:.2g}, bound {:.2g}{}\n", name, g.error.rel_l2, g.error.max_abs, g.bound,
               g.not_finite > 0 ? fmt::format(", {} NaN or inf", g.not_finite) : "");
  }
  const std::initializer_list<std::span<const float>> inputs{in.Q.values, in.K.values, in.V.values, dO.values};
  const double scale = options.scale.value_or(fa::default_scale(in.Q.shape.head_dim));
  const bool overflowed = fa::report_nonfinite("dQ", dQ, in.Q, in.K, scale, inputs) ||
                          fa::report_nonfinite("dK", dK, in.Q, in.K, scale, inputs) ||
                          fa::report_nonfinite("dV", dV, in.Q, in.K, scale, inputs);
  return fa::Check{
      "09",
      fmt::format("ring backward ({} rank{}, {}, float32, {}) vs ch07", P, P == 1 ? "" : "s", ch09::to_string(layout),
                  fa::to_string(device)),
      fmt::format("dQ {:.2g}, dK {:.2g}, dV {:.2g} (rel L2){}", a.dQ.error.rel_l2, a.dK.error.rel_l2, a.dV.error.rel_l2,
                  bytes_equal ? ", bytes = model" : ", bytes != model"),
      fmt::format("{}, {}, {}", fa::relative_bound_text(a.dQ.bound, "{:.1e}"),
                  fa::relative_bound_text(a.dK.bound, "{:.1e}"), fa::relative_bound_text(a.dV.bound, "{:.1e}")),
      a.pass() && bytes_equal && !overflowed};
}

// The check of rank 0: the gathered O and L against chapter 05 run in one process on the whole
// problem (on the inputs rounded to bf16 or fp16 when those are the ring's type).
//   O  float32: ch04::agreement_bound, chapter 05's own bound against chapter 04: both are float32
//      evaluations, each within about that of the exact result. bf16, fp16: chapter 06's error
//      budget, the bound of chapter 06's kernel against chapter 05; the ring's partials are chapter
//      06's, each O_i rounded to the element type, and the merge is a weighted mean of them.
//   L  per row, chapter 08's bound for a merge of partials (ch08::L_bound: 3u (|L|max + n + 1) +
//      u partials, |L|max from the inputs: ch05::L_magnitudes) with no score term: the ring runs chapter 05's kernel
//      too, whose scores do not depend on the tile a key falls in; for bf16 and fp16, plus chapter 06's own L bound
//      against chapter 05 (ch06::L_bounds), which holds the difference in the scores.
fa::Check check_against_chapter_05(const Gathered& g, const fa::AttentionFlags::Inputs& in,
                                   const ch09::Options& options, std::size_t P, ch09::Layout layout,
                                   fa::Device device) {
  const bool wide = options.element == ch08::CacheType::float32;
  const auto element = options.element == ch08::CacheType::bf16 ? ch06::ElementType::bf16 : ch06::ElementType::fp16;
  const fa::Tensor4<float> Q = wide ? in.Q : ch06::round_to(in.Q, element, "Q");
  const fa::Tensor4<float> K = wide ? in.K : ch06::round_to(in.K, element, "K");
  const fa::Tensor4<float> V = wide ? in.V : ch06::round_to(in.V, element, "V");
  const ch05::Result reference = ch05::flash_attention_2(Q, K, V, {options.scale, options.causal}, device);
  const fa::AttentionShape shape = fa::check_attention_shapes(Q.shape, K.shape, V.shape);
  const double scale = ch05::check_problem(shape, {options.scale, options.causal}).scale;
  const double O_bound = wide ? ch04::agreement_bound(Q, K, V, {.scale = options.scale, .causal = options.causal}).bound
                              : ch06::error_budget(Q, K, V, scale, options.causal, element).bound;
  const std::vector<double> low_precision_L = wide ? std::vector<double>() : ch06::L_bounds(Q, K, scale, reference.L);
  const std::vector<double> magnitudes = ch05::L_magnitudes(Q, K, scale);
  const int partials = layout == ch09::Layout::zigzag ? static_cast<int>(2 * P) : static_cast<int>(P);
  double L_error = 0, L_bound = 0, worst_ratio = -1;
  bool L_pass = true;
  for (std::size_t row = 0; row < g.L.size(); ++row) {
    const auto i = static_cast<int>(row % shape.seq_len_q);
    const auto keys = static_cast<std::size_t>(
        fa::visible_keys(i, static_cast<int>(shape.seq_len_q), static_cast<int>(shape.seq_len_k), options.causal));
    const double bound =
        ch08::L_bound(reference.L[row], magnitudes[row], keys, partials, 0.0) + (wide ? 0.0 : low_precision_L[row]);
    const double error = fa::abs_difference(g.L[row], reference.L[row]);
    const bool row_pass = fa::within(error, bound);
    // The row printed: the first that fails, where one does (a bound that is not finite fails
    // whatever its ratio, which is then no guide); else the one closest to its bound.
    const double ratio = !row_pass ? INFINITY : error == 0.0 ? 0.0 : bound > 0.0 ? error / bound : INFINITY;
    if (ratio > worst_ratio) std::tie(worst_ratio, L_error, L_bound) = std::tuple(ratio, error, bound);
    L_pass = L_pass && row_pass;
  }
  const fa::ErrorStats err_O = fa::compare(g.O.values, reference.O.values);
  fmt::print("agreement with chapter 05 in one process, O: {}\n", fa::describe(err_O));
  fmt::print("  bound on O: {} ({})\n", fa::bound_text(O_bound),
             wide ? "chapter 05's own bound against chapter 04" : "chapter 06's error budget");
  fmt::print("  L, {}: |L - L_05| = {:.3g}, bound {}\n",
             L_pass ? "the row closest to its bound" : "the first row outside its bound", L_error,
             fa::bound_text(L_bound, "{:.3g}"));
  const bool overflowed = fa::report_nonfinite("O", g.O, in.Q, in.K, scale, {in.Q.values, in.K.values, in.V.values});
  return fa::Check{"09",
                   fmt::format("ring attention ({} rank{}, {}, {}, {}) vs ch05", P, P == 1 ? "" : "s",
                               ch09::to_string(layout), ch08::to_string(options.element), fa::to_string(device)),
                   fmt::format("{}, L {:.2g}", fa::error_field("O", err_O), L_error),
                   fmt::format("{}, {}", fa::relative_bound_text(O_bound), fa::bound_text(L_bound, "{:.1e}")),
                   fa::within(err_O, O_bound) && L_pass && !overflowed};
}

// --cluster: one step of the ring on GPUs (cluster_model.h), bf16, for a layer of 32 heads of
// head_dim 128 (heads and head_dim cancel in the shortest hiding length), at `tflops` per GPU.
void print_cluster_model(double tflops) {
  constexpr double kHeads = 32, kHeadDim = 128, kBf16 = 2;
  const double F = tflops * 1e12;
  fmt::print("One step of the ring per GPU: bf16, 32 heads of head_dim 128, attention at {:.0f} TFLOP/s per GPU\n\n",
             tflops);
  fmt::print(
      "rows per GPU  compute ms, causal (zigzag)  compute ms, full  K/V shard ms, NVLink  K/V shard ms, across "
      "nodes\n");
  for (const double n : {256.0, 1024.0, 4096.0, 16384.0, 131072.0}) {
    const ch09::StepModel causal = ch09::step_model(n, kHeads, kHeadDim, kBf16, F, true, ch09::kNvlink);
    const ch09::StepModel full = ch09::step_model(n, kHeads, kHeadDim, kBf16, F, false, ch09::kNvlink);
    const ch09::StepModel nodes = ch09::step_model(n, kHeads, kHeadDim, kBf16, F, false, ch09::kAcrossNodes);
    fmt::print("{:>12.0f}  {:>27.3f}  {:>16.3f}  {:>19.3f}  {:>25.3f}\n", n, causal.compute_s * 1e3,
               full.compute_s * 1e3, full.transfer_s * 1e3, nodes.transfer_s * 1e3);
  }
  fmt::print("\nThe transfer hides behind the compute from this many rows per GPU on:\n");
  for (const ch09::Link& link : {ch09::kNvlink, ch09::kAcrossNodes}) {
    fmt::print("  {}: {:.0f} without the mask, {:.0f} causal\n", link.name,
               std::ceil(ch09::shortest_hiding_rows(kBf16, F, false, link)),
               std::ceil(ch09::shortest_hiding_rows(kBf16, F, true, link)));
  }
  fmt::print("The backward (K, V in bf16 with dK, dV in float32 on the link, 10 n^2 d FLOP a head a step) from:\n");
  for (const ch09::Link& link : {ch09::kNvlink, ch09::kAcrossNodes}) {
    fmt::print("  {}: backward {:.0f} without the mask, {:.0f} causal\n", link.name,
               std::ceil(ch09::shortest_backward_hiding_rows(kBf16, F, false, link)),
               std::ceil(ch09::shortest_backward_hiding_rows(kBf16, F, true, link)));
  }
}

// The device of this run: flags.chosen_device(), except that with bf16 or fp16 (chapter 06's kernel)
// and no device named, a GPU that cannot run that kernel (older than sm_80, a T4) leaves the run on
// the CPU, as chapter 06's program does. Throws std::runtime_error, in one line, as
// fa::require_device and ch06::check_device do (--device gpu on such a GPU).
fa::Device ring_device(const fa::AttentionFlags& flags, const ch09::Options& options) {
  if (options.element == ch08::CacheType::float32) return flags.chosen_device();
  return flags.chosen_device(ch06::check_device);
}

}  // namespace

int main(int argc, char** argv) {
  const Mpi mpi(&argc, &argv);
  if (!same_arguments_on_every_rank(mpi, argc, argv)) return fa::kExitRefused;
  fa::Program program(9,
                      "Chapter 09: ring attention across processes (MPI): K/V shards travel around a ring of ranks, "
                      "each merging its partials with chapter 08's combine; checked against chapter 05.");
  program.set_does_io(mpi.rank == 0);
  CLI::App& app = program.app();
  fa::AttentionFlags flags;
  flags.add_to(app);
  std::uint64_t seq = 0;
  fa::cli::add_size(app, "--seq", seq, "sequence length of the random inputs: sets --seq-q and --seq-k")
      ->excludes("--seq-q")
      ->excludes("--seq-k")
      ->default_str("256");
  std::string layout_text = "contiguous", dtype_text = "float32";
  app.add_option("--layout", layout_text, "the rows each rank holds: contiguous, or zigzag (chunks r and 2P-1-r)")
      ->check(CLI::IsMember({"contiguous", "zigzag"}))
      ->capture_default_str();
  app.add_option("--dtype", dtype_text, "Q, K, V inside the kernels: float32 (chapter 05), bf16 or fp16 (chapter 06)")
      ->check(CLI::IsMember({"float32", "bf16", "fp16"}))
      ->capture_default_str();
  fa::Output& out = program.add_output("--out", "O");
  bool backward = false;
  std::string do_path;
  auto* backward_flag = app.add_flag(
      "--backward", backward,
      "after the forward ring, the backward ring: dQ, dK, dV by chapter 07's kernels, dK and dV travelling with K, V");
  app.add_option("--do", do_path,
                 "with --backward: dO, the gradient of the loss with respect to O, as a .npy file (float32, Q's "
                 "shape; default: normal(0, 1) from the seed, as chapter 07)")
      ->check(CLI::Validator([](std::string& text) { return text.empty() ? std::string("the path is empty") : ""; }, "",
                             "file"))
      ->needs(backward_flag);
  fa::Output& out_dQ = program.add_output("--dq", "dQ");
  fa::Output& out_dK = program.add_output("--dk", "dK");
  fa::Output& out_dV = program.add_output("--dv", "dV");
  for (const fa::Output* o : {&out_dQ, &out_dK, &out_dV}) o->option()->needs(backward_flag);
  bool cluster = false;
  std::uint64_t tflops = 400;
  auto* cluster_flag =
      app.add_flag("--cluster", cluster, "print the ring on 8 H200 (NVLink, and across nodes) instead");
  fa::cli::add_integer(app, "--tflops", tflops, "with --cluster: attention's TFLOP/s per GPU", 1, 100000)
      ->needs(cluster_flag);
  out.option()->excludes(cluster_flag);
  backward_flag->excludes(cluster_flag);
  program.summary_option()->excludes(cluster_flag);

  const auto P = static_cast<std::size_t>(mpi.ranks);
  bool joined = false;  // this rank joined every_rank_ready's collective, which every rank joins once
  try {
    program.parse(argc, argv);
    if (cluster) {
      program.check(fa::Plan{});
      program.start(
          fa::Banner{"the ring on a cluster, on paper",
                     R"(Per step, a GPU's attention over its shard against the transfer of the next K/V shard, from
the model in cluster_model.h: the transfer hides behind the compute once each GPU holds enough rows.)"});
      joined = true;
      if (!every_rank_ready(true)) {
        if (mpi.rank == 0) throw std::runtime_error("another rank refused its checks before any work");
        return program.finish(std::nullopt);
      }
      if (mpi.rank == 0) print_cluster_model(static_cast<double>(tflops));
      return program.finish(std::nullopt);
    }

    if (seq > 0) flags.seq_len_q = flags.seq_len_k = seq;
    const ch09::Layout layout = ch09::parse_layout(layout_text);
    const ch09::Options options{flags.scale, flags.causal, ch08::parse_cache_type(dtype_text)};
    flags.accept_f16_files = options.element == ch08::CacheType::fp16;
    // Rank 0: every check of the inputs (the files' headers, shapes, dtypes and sizes, or the size
    // flags) and of the problem, before any work; every rank learns the verdict.
    fa::Device device{};
    fa::Plan plan;
    // The whole problem's [batch, heads, seq_len, head_dim], as rank 0 checked it.
    const fa::Shape4 full = rank_0_checks(mpi, [&] {
      device = ring_device(flags, options);
      const fa::AttentionShape shape = flags.plan(plan);  // Q, K, V whole: rank 0 draws or reads them
      if (backward) {
        ch09::check_backward_problem(shape, P, options);
        if (!do_path.empty()) {
          const fa::Shape4 do_shape = fa::read_npy_shape(do_path);
          const fa::Shape4 q_shape{shape.batch, shape.heads, shape.seq_len_q, shape.head_dim};
          if (do_shape != q_shape) {
            throw std::invalid_argument(fmt::format("--do {}: shape {}, but dO must have Q's shape {}", do_path,
                                                    do_shape.str(), q_shape.str()));
          }
          plan.add_input("--do", do_path);
        }
      } else {
        ch09::check_problem(shape, P, options);
      }
      // MPI counts floats in int: the whole O that rank 0 gathers must stay within it.
      const std::uint64_t values =
          fa::saturating_mul(shape.batch * shape.heads, fa::saturating_mul(shape.seq_len_q, shape.head_dim));
      if (values > static_cast<std::uint64_t>(INT_MAX)) {
        throw std::invalid_argument(fmt::format(
            "Q has {} values; MPI's counts (int) take at most {}: give a smaller problem", values, INT_MAX));
      }
      plan.memory.add(
          "rank 0: one input laid out by rank for the scatter, the gathered O and chapter 05's "
          "reference",
          fa::saturating_add(fa::saturating_mul(sizeof(float), values),
                             fa::saturating_mul(3, ch05::memory_needed(shape))));
      if (backward) {
        plan.memory.add(
            "rank 0, the backward: dO, the gathered dQ, dK, dV, and chapter 07 with its float64 check",
            fa::saturating_add(fa::saturating_mul(4 * sizeof(float), values),
                               fa::saturating_add(ch07::memory_needed(shape), ch07::reference_memory(shape))));
      }
      return fa::Shape4{shape.batch, shape.heads, shape.seq_len_q, shape.head_dim};
    });
    if (mpi.rank != 0) {
      // The other ranks' own checks: the device, and on the CPU simt's variables (AttentionFlags::plan
      // for inputs of that shape drawn from the seed: it opens no file). They hold shards only, so
      // its memory for the whole Q, K, V is not theirs.
      device = ring_device(flags, options);
      fa::AttentionFlags shaped = flags;
      shaped.q_path = shaped.k_path = shaped.v_path = "";
      shaped.batch = full.batch;
      shaped.heads = full.heads;
      shaped.seq_len_q = shaped.seq_len_k = full.seq_len;
      shaped.head_dim = full.head_dim;
      fa::Plan scratch;
      (void)shaped.plan(scratch);
    }
    const std::uint64_t shard = fa::saturating_mul(
        sizeof(float), full.size() / P + full.batch * full.heads * 2 * full.head_dim);  // (a row longer, twice)
    plan.memory.add("this rank's shards: Q, K and V, two K/V shards on the wire, O", fa::saturating_mul(8, shard));
    if (backward) {
      plan.memory.add("the backward: dO, dQ, the travelling dK, dV and their part, four dK/dV shards on the wire",
                      fa::saturating_mul(14, shard));
    }
    program.check(plan);
    // Rank 0: the whole Q, K, V, to scatter and to check against; for bf16 and fp16 (chapter 06's
    // kernel, whose exponent has a limit on the scores: error_budget.h) their scores checked before
    // any work. A refusal here ends every rank as one of rank 0's checks does (the others learn it in
    // every_rank_ready, below).
    fa::AttentionFlags::Inputs in;
    fa::Tensor4<float> dO;  // rank 0, with --backward: the whole dO
    if (mpi.rank == 0) {
      in = flags.load();
      if (backward) {
        // As chapter 07's demo: from --do, or normal(0, 1) drawn after Q's, K's and V's seeds.
        dO = do_path.empty() ? fa::Tensor4<float>(full, fa::normal<float>(full.size(), flags.seed + 3))
                             : fa::read_npy_f32_4d(do_path);
        if (dO.shape != full) {
          throw std::runtime_error(
              fmt::format("--do {}: the file changed since it was checked ({})", do_path, dO.shape.str()));
        }
      }
      if (in.Q.shape != full || in.K.shape != full || in.V.shape != full) {
        throw std::runtime_error(fmt::format("{}: the files changed since they were checked (Q {}, K {}, V {})",
                                             in.origin, in.Q.shape.str(), in.K.shape.str(), in.V.shape.str()));
      }
      if (options.element != ch08::CacheType::float32) {
        const auto element =
            options.element == ch08::CacheType::bf16 ? ch06::ElementType::bf16 : ch06::ElementType::fp16;
        ch06::check_score_range(ch06::round_to(in.Q, element, "Q"), ch06::round_to(in.K, element, "K"),
                                options.scale.value_or(fa::default_scale(full.head_dim)), element);
      }
    }

    // A float32 ring runs chapters 05 and 07: on a GPU, tiles its shared memory per block holds.
    std::string tiles;
    if (options.element == ch08::CacheType::float32) {
      const int head_dim = static_cast<int>(full.head_dim);
      tiles = fa::tile_note("chapter 05's tile", ch05::choose_tile(head_dim, {options.scale, options.causal}, device));
      if (backward) {
        tiles +=
            fa::tile_note("chapter 07's tile", ch07::choose_tile(head_dim, {options.scale, options.causal}, device));
      }
    }
    const std::string title =
        fmt::format("ring attention{}, {} rank{}, {} layout{}{}", backward ? " backward" : "", P, P == 1 ? "" : "s",
                    ch09::to_string(layout), flags.causal ? ", causal" : "", tiles);
    program.start(
        backward
            ? fa::Banner{title,
                         R"(Rank 0 draws (or reads) Q, K, V and dO and scatters each rank its shard of the sequence's rows.
The forward ring leaves each rank its rows' O and L. Then the backward ring: at each of P steps a
rank runs chapter 07's backward on its queries against the K/V shard it holds, keeps the dQ part,
and adds the dK, dV part to that shard's dK, dV, which travel the ring with K and V (K, V sent
before the compute, dK, dV after it) and come home after the last step. Rank 0 gathers dQ, dK, dV
and compares them with chapter 07 run in one process on the same inputs.)"}
            : fa::Banner{
                  title,
                  R"(Rank 0 draws (or reads) Q, K and V and scatters each rank its shard of the sequence's rows. At
each of P steps a rank computes its queries against the K/V shard it holds (chapter 05's kernel,
chapter 06's for bf16/fp16), which returns a partial (O_i, L_i), folds it into its running (O, L)
with chapter 08's merge, and passes the shard to the next rank; the send and the receive start
before the compute. Rank 0 gathers O and L and compares them with chapter 05 run in one process on
the same inputs.)"});
    joined = true;
    if (!every_rank_ready(true)) {
      // Another rank refused (rank 0 has said why; a refusal of another rank alone, e.g. its memory,
      // is named here).
      if (mpi.rank == 0) throw std::runtime_error("another rank refused its checks before any work");
      return program.finish(std::nullopt);
    }
    // Rank 0 says when the run will be long, and shows its kernels' progress (on the CPU path).
    std::optional<simt::ShowProgress> progress;
    if (mpi.rank == 0 && device == fa::Device::cpu &&
        fa::announce_long_run((backward ? kBackwardFlopsPerScore : kFlopsPerScore) *
                                  static_cast<double>(full.batch * full.heads) * static_cast<double>(full.seq_len) *
                                  static_cast<double>(full.seq_len) * static_cast<double>(full.head_dim),
                              kFlopsPerSecond)) {
      progress.emplace(backward ? "rank 0's part of the rings, then chapter 07"
                                : "rank 0's part of the ring, then chapter 05");
    }
    RankResult mine;
    BackwardResult gradients;
    try {
      fa::Tensor4<float> Q = scatter_rows(in.Q, full, mpi, layout);
      fa::Tensor4<float> K = scatter_rows(in.K, full, mpi, layout);
      fa::Tensor4<float> V = scatter_rows(in.V, full, mpi, layout);
      if (backward) {
        const fa::Tensor4<float> dO_rows = scatter_rows(dO, full, mpi, layout);
        mine = run_ring(Q, K, V, full, mpi, layout, options, device);  // O and L of this rank's rows
        gradients = run_ring_backward(Q, std::move(K), std::move(V), mine.O, mine.L, dO_rows, full, mpi, layout,
                                      options, device);
      } else {
        mine = run_ring(std::move(Q), std::move(K), std::move(V), full, mpi, layout, options, device);
      }
    } catch (const std::exception& e) {
      abort_ring(e);
    }
    Gathered all = gather(mine, mpi, full, layout);
    std::vector<RankTimes> backward_times;
    fa::Tensor4<float> dQ, dK, dV;
    if (backward) {
      backward_times = gather_times(gradients.times, mpi);
      dQ = gather_rows(gradients.dQ.values, mpi, full, layout, full.head_dim);
      dK = gather_rows(gradients.dK.values, mpi, full, layout, full.head_dim);
      dV = gather_rows(gradients.dV.values, mpi, full, layout, full.head_dim);
    }
    if (mpi.rank != 0) return program.finish(std::nullopt);
    fmt::print("Q, K and V {}{}; inputs: {} (rank 0 scattered each rank its rows); {}; device: {}\n", full.str(),
               flags.causal ? ", causal" : "", in.origin, ch08::to_string(options.element), fa::to_string(device));
    if (backward) {
      fmt::print("dO: {}; O and L: the forward ring's, on each rank for its rows\n\n",
                 do_path.empty() ? fmt::format("normal(0, 1), seed {}", flags.seed + 3) : do_path);
      const bool bytes_equal = print_backward(backward_times, full, layout);
      fa::Check check = check_backward(dQ, dK, dV, all, in, dO, options, P, layout, bytes_equal, device);
      out.write(std::move(all.O));
      out_dQ.write(std::move(dQ));
      out_dK.write(std::move(dK));
      out_dV.write(std::move(dV));
      return program.finish(check);
    }
    fmt::print("\n");
    print_ring(all, full, layout, flags.causal);
    fa::Check check = check_against_chapter_05(all, in, options, P, layout, device);
    out.write(std::move(all.O));
    return program.finish(check);
  } catch (...) {
    const int status = program.exit_on_error();
    if (!joined) (void)every_rank_ready(false);
    return status;
  }
}
