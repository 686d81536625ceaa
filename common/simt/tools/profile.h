// simt's memory profile: every global and shared access of a kernel, counted per warp instruction
// by Nsight Compute's definitions (profile_count.h), without a GPU.
//
//   simt::profile::start();                    // clears the counters and begins recording
//   ch05::cpu_profiled::run_flash_attention_2(...);   // any launch of a profiled kernel copy
//   simt::profile::stop();
//   const auto kernels = simt::profile::results();    // per kernel, summed over its launches
//   fmt::print("{}", simt::profile::format_table(kernels));
//   simt::profile::write_json("profile.json", kernels);
//
// What is recorded: only kernels compiled as a profiled copy (cmake/SimtProfile.cmake,
// simt_add_profiled_kernels), whose every load and store calls simt's hooks; the ordinary copy of
// the same kernel calls nothing and runs as fast as ever. Of those calls, only the accesses a CUDA
// thread makes inside a kernel to a DeviceBuffer (global memory) or to its block's shared memory
// (dynamic, and static __shared__ arrays) count; accesses to the CUDA thread's stack, simt's own
// variables and anything else are dropped. docs/profiling.md explains how, and where a GPU's
// counts differ.
//
// The k-th execution of one access site (one load or store in the machine code) by each lane of a
// warp, between two synchronisation points of that warp (__syncthreads(), a shuffle, any other
// warp-collective operation), is one warp instruction; lanes that do not execute it are inactive.
//
// Available in builds with GCC or Clang 15+ and without a sanitizer (the hooks are the functions
// their -fsanitize=thread instrumentation calls, which the tsan preset's runtime defines itself, and
// which does not combine with the asan preset's AddressSanitizer); available() says so, and
// start() throws where it is not.
// Source: Nsight Compute, "Kernel Profiling Guide" (the metrics named in profile_count.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace simt::profile {

// Global loads or stores of one kernel: warp instructions, bytes requested by their active lanes,
// and 32-byte sectors (distinct per instruction, summed).
struct GlobalCounts {
  std::uint64_t instructions = 0;
  std::uint64_t bytes = 0;
  std::uint64_t sectors = 0;
  bool operator==(const GlobalCounts&) const = default;
};

// Shared loads or stores of one kernel: warp instructions, bytes, wavefronts, bank conflicts.
struct SharedCounts {
  std::uint64_t instructions = 0;
  std::uint64_t bytes = 0;
  std::uint64_t wavefronts = 0;
  std::uint64_t bank_conflicts = 0;
  bool operator==(const SharedCounts&) const = default;
};

// Hopper's asynchronous instructions, counted where they are issued, whole.
// TMA copies (cp.async.bulk.tensor) of one kernel, one way (global -> shared, or back). A box is
// counted whole, as an mbarrier's expect_tx must count a load's bytes, the zeros that fill its
// elements past the tensor's edge included; global memory gives a load, or takes from a store,
// only the elements inside the tensor. Source: PTX ISA, "cp.async.bulk.tensor", "Tensor Copy
// Restrictions" (out-of-bound elements).
struct TmaCounts {
  std::uint64_t copies = 0;        // instructions, each issued by one thread
  std::uint64_t box_bytes = 0;     // bytes of their whole boxes
  std::uint64_t tensor_bytes = 0;  // bytes of those inside the tensor
};
// wgmma's reads of its operands in shared memory, of one kernel. No bank conflicts are counted:
// wgmma reads whole 8-row core matrices through its descriptors, and the hardware serves a
// swizzled layout (the one TMA writes) without conflicts by design; simt does not model the banks
// of these reads. Source: PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate
// Instructions" (the matrix descriptor, shared memory matrix layout, swizzling modes).
struct WgmmaCounts {
  std::uint64_t instructions = 0;  // one per warpgroup: its 128 threads issue it together
  std::uint64_t bytes = 0;         // A's 64 x 16 elements where A is in shared memory, and B's N x 16
};

enum class Space { global, shared };
enum class Op { load, store };

// One access site (a load or store in the profiled machine code) and what it cost.
struct Site {
  std::uintptr_t address = 0;  // the return address of the hook call, in the program
  std::string file;            // source file and line (empty, 0 where the debug info has none)
  int line = 0;
  Space space = Space::global;
  Op op = Op::load;
  std::uint64_t instructions = 0;
  std::uint64_t bytes = 0;
  std::uint64_t sectors = 0;         // global
  std::uint64_t wavefronts = 0;      // shared
  std::uint64_t bank_conflicts = 0;  // shared
};

// One kernel (by the name simt::launch gives it, without the profiled copy's namespace), summed
// over its launches.
struct KernelProfile {
  std::string kernel;
  std::uint64_t launches = 0;
  GlobalCounts global_load, global_store;
  SharedCounts shared_load, shared_store;
  TmaCounts tma_load, tma_store;  // Hopper's TMA (global -> shared, shared -> global); zero elsewhere
  WgmmaCounts wgmma_read;         // Hopper's wgmma, its operands in shared memory; zero elsewhere
  std::vector<Site> sites;        // every site, the costliest first (sectors, then conflicts)
};

// The first kernel of `kernels` whose name contains `name`, or nullptr.
const KernelProfile* find_kernel(const std::vector<KernelProfile>& kernels, std::string_view name);

// True where this build has the hooks (GCC or Clang, no sanitizer).
bool available();
// A sentence saying why profiling is not available in this build ("" where it is).
std::string unavailable_reason();

// Clears every counter and begins recording; a block that is already running when it is called is
// not recorded (call it between launches). Throws std::logic_error (with unavailable_reason())
// where profiling is not available.
void start();
// Ends recording; the counters stay until the next start().
void stop();
// True between start() and stop().
bool recording();

// Per kernel, in the order of their first launch since start(). File and line of each site are
// looked up in the program's debug information (elfutils' libdw where it was found at build time).
std::vector<KernelProfile> results();

// A table: one block of rows per kernel (global load/store, shared load/store, and where the
// kernel has any, TMA load/store and wgmma read), then its worst sites with file:line and their
// share of the kernel's sectors or bank conflicts.
std::string format_table(const std::vector<KernelProfile>& kernels, std::size_t worst_sites = 3);

// {"kernels": [{"kernel": ..., "launches": ..., "global_load": {...}, "global_store": {...},
//   "shared_load": {...}, "shared_store": {...}, "tma_load": {...}, "tma_store": {...},
//   "wgmma_read": {...}, "worst_sites": [...]}]}; docs/profiling.md gives
// every key. The worst sites: up to `worst_sites` by global sectors and up to as many by bank
// conflicts, each with "file", "line", "space", "op", its counts and "share".
std::string to_json(const std::vector<KernelProfile>& kernels, std::size_t worst_sites = 5);

// Writes to_json(kernels) to `path`, replacing the file whole or not at all. Throws
// std::runtime_error naming the path when it cannot be written.
void write_json(const std::string& path, const std::vector<KernelProfile>& kernels);

}  // namespace simt::profile
