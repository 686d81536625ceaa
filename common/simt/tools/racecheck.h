// simt's race checker: every shared- and global-memory race of a kernel, found on the CPU, the same
// under every schedule and number of host threads, with both source lines; and reads of memory that
// nothing wrote (compute-sanitizer's racecheck and initcheck, and more).
//
//   SIMT_RACECHECK=1 ./program            any program built with profiled kernel copies
//   ./chNN_program --device cpu --racecheck    the chapters' programs (common/profile_cli.h)
//   simt::racecheck::start(); ...launches...; simt::racecheck::stop();    a test
//   const simt::racecheck::Findings f = simt::racecheck::findings();
//
// What it checks: every launch of a kernel compiled as a profiled copy (cmake/SimtProfile.cmake),
// whose every load and store calls simt's hooks (observer.h), plus the accesses of simt's own
// instructions (ldmatrix, cp.async, atomicAdd). The ordinary copy of a kernel is not watched; a
// launch of one while the checker is on is counted as not checked, and named in the summary.
//
// The rules (docs/simt.md, "Racecheck", works examples of each). Two accesses to the same byte,
// at least one of them a write, not both atomic, by two different CUDA threads, are a hazard
// unless something orders them:
//   shared memory, and global memory within a block: a __syncthreads() between them; or, for two
//     lanes of one warp, a __syncwarp() or any warp-collective operation (a shuffle, mma, ldmatrix)
//     between them. A hazard between lanes of one warp is a warning (code that relies on the lanes
//     of a warp running in lock-step, which they do not since Volta); between warps, an error.
//   cp.async: its shared write happens at some moment between the issue and the
//     cp_async_wait_group that retires it, so it conflicts with every access in that window that
//     a barrier (or, within the warp, a warp synchronisation) after the wait does not order; its
//     global read is a read at the issue.
//   global memory between blocks: nothing orders two blocks of one launch (launches are ordered):
//     two blocks that touch the same byte, one of them writing, race, unless both use atomics.
//   Hopper's asynchronous instructions (TMA copies and stores, wgmma's operands in shared memory):
//     ordered by vector clocks along __syncthreads(), mbarrier phases and named barriers, and a
//     generic store that wgmma or TMA reads needs its thread's fence.proxy.async
//     (racecheck_async.h; docs/simt.md, "Racecheck on Hopper").
//   uninitialised reads: a read of shared memory that no thread of the block wrote in this block,
//     and of a DeviceBuffer byte that nothing wrote since the buffer was made (poisoned memory,
//     DeviceBuffer(count) and DeviceBuffer::poison(), counts as unwritten).
// A read-write hazard is called read-after-write or write-after-read by which of the two comes
// first in its own thread since the barrier they both follow (counted in memory accesses; ties:
// read-after-write): the order the kernel's code gives them, not the order the CPU ran them in.
//
// Exact and schedule-independent: each check is over all the accesses of a barrier interval (or a
// launch), summarised per 4-byte word in a form that does not depend on their order; every pair
// of access sites that races is found, whatever order the threads ran in. What is reported for a
// pair (the threads, the offset or element) is the smallest example, so it is the same on every
// run too. Memory, bounded by the memory the kernels touch: per host thread, 64 bytes per 4-byte
// word of the running block's shared memory (more for a word several sites touch, and 40 for the
// cp.async windows of a kernel that issues any) and 128 bytes per global word the block touches;
// per launch, 72 bytes per 4-byte word of every DeviceBuffer it touches, freed when the launch
// ends; and one bit per byte of every DeviceBuffer made while the checker is on.
//
// Available in builds with GCC or Clang and without a sanitizer, as the memory profile (profile.h);
// available() says so, and enable() and start() throw std::logic_error where it is not.
// Source: NVIDIA Compute Sanitizer User Manual, "Racecheck Tool" (hazard kinds and severities,
// the summary line) and "Initcheck Tool"; PTX ISA, "cp.async", "cp.async.wait_group" (when a copy
// completes), "bar.warp.sync"; CUDA C++ Programming Guide, "Synchronization Functions"
// (__syncthreads, __syncwarp) and "Atomic Functions".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace simt::racecheck {

// True where this build has the instrumentation (GCC or Clang, no sanitizer preset), and why not.
bool available();
std::string unavailable_reason();

// Checks every launch from now on, and when the program ends prints format_report() on stdout and
// ends it with status 1 if anything was found (whatever status it was going to end with); prints
// nothing where the program launched no kernel. What
// SIMT_RACECHECK=1 does at the first launch. Throws std::logic_error where not available().
void enable();
// True once enable() was called or while start() is on; reads SIMT_RACECHECK (0 or 1) the first
// time it is called, and throws std::invalid_argument for another value, or for 1 where
// racecheck is not available (the message says why).
bool enabled();

// For a test: forgets every finding and checks the launches until stop(), with no report at exit.
// Throws std::logic_error where not available().
void start();
void stop();

// One access of a hazard: what it is ("read (4 bytes)", "write (4 bytes)", "ldmatrix_x4 read",
// "cp.async write", "cp.async read", "atomicAdd", "TMA write", "TMA store read", "wgmma read"), and its file and line
// (empty, 0 where the debug information has none; `where` is then the code address).
struct Access {
  std::string operation;
  std::string file;
  int line = 0;
  std::string where;  // "file:line"
};

struct Hazard {
  std::string kernel;    // as simt::launch names it, without the profiled copy's namespace
  std::string kind;      // "shared write-after-read", "global read-after-write",
                         // "shared write-after-write", "uninitialised shared read",
                         // "shared write without fence.proxy.async", ...
  bool warning = false;  // a hazard between lanes of one warp; every other finding is an error
  bool uninitialised = false;
  Access first;             // the earlier access (the one of the pair that comes first in its thread since
                            // the barrier); for write-after-write the one with the smaller site
  Access second;            // empty for an uninitialised read
  std::string who;          // the threads of one example, in the order of `first` and `second`, e.g.
                            // "thread 5 (warp 0) and thread 37 (warp 1) of block (0, 0, 0)",
                            // "thread 0 (lane 0) and thread 8 (lane 8) of warp 0 of block (2, 0, 0)",
                            // "thread 0 of block (0, 0, 0) and thread 0 of block (1, 0, 0)"
  std::string where;        // e.g. "dynamic shared memory, byte 16384",
                            // "the buffer of argument 7 (1024 elements of 4 bytes), element 17" (arguments
                            // counted from 1; the first pointer argument that points into the buffer)
  std::uint64_t count = 0;  // in how many places: 4-byte words x barrier intervals x blocks (for a
                            // race between blocks: words x launches); reads, for an uninitialised read
};

struct Findings {
  std::vector<Hazard> hazards;                 // kernels in the order of their first launch, then by kind and line
  std::uint64_t launches = 0;                  // launches of profiled copies checked
  std::uint64_t kernels = 0;                   // distinct kernels among them
  std::uint64_t unchecked_launches = 0;        // launches of kernels without a profiled copy
  std::vector<std::string> unchecked_kernels;  // their names
  std::uint64_t errors() const;
  std::uint64_t warnings() const;
  std::uint64_t uninitialised() const;
  bool clean() const { return hazards.empty(); }
};

// Everything found since start() (or since the program began, after enable()).
Findings findings();

// The first hazard of `f` whose kind is `kind` and whose kernel name contains `kernel`, or nullptr.
const Hazard* find(const Findings& f, const std::string& kind, const std::string& kernel = "");

// Every hazard in a few lines each, then one summary line in compute-sanitizer's words:
//   RACECHECK SUMMARY: 2 hazards displayed (2 errors, 0 warnings), 0 uninitialised reads; 4 launches of 2 kernels
//   checked
// (a clean run prints that line alone, with "0 hazards").
std::string format_report(const Findings& f);
std::string summary_line(const Findings& f);

}  // namespace simt::racecheck
