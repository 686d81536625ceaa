// Internal to common/simt: access sites, as the memory profile (profile.h) and the race checker
// (racecheck.h) name them.
//
// A site is one place in a kernel that touches memory. For an ordinary load or store of a
// profiled kernel copy it is the return address of the hook call before it (a code address in the
// program); for simt's own instructions (ldmatrix, cp.async, atomicAdd) it is the place the kernel
// calls them from, a std::source_location, turned into a key with the top bit set (no user-space
// code address has it). Either way the key is one integer, and file and line are looked up only
// when a report is written: in the program's debug information (elfutils' libdw, where it was
// found at build time) for a code address.
#pragma once

#include <cstdint>
#include <source_location>
#include <string>
#include <string_view>

namespace simt::sites {

// The key of a source_location (the same key for the same file, line and column).
std::uintptr_t key(const std::source_location& site);

// Makes the table behind key() now, so that it outlives a handler registered with std::atexit
// after this call (the race checker's report at the end of the program).
void make_table();

struct SourceLine {
  std::string file;  // from the repository's top folder where the path is inside it; empty: unknown
  int line = 0;
};
// File and line of a key; {} where the debug information has none.
SourceLine source_line(std::uintptr_t key);

// A kernel's name as a report shows it: without the profiled copy's namespace
// ("ch05::cpu_profiled::kernel<64, 64, 64>" -> "ch05::kernel<64, 64, 64>").
std::string display_name(std::string_view kernel);

// "file:line", or "0x... (no line information)".
std::string where(std::uintptr_t key, const SourceLine& line);

// The thread_local variable of the program at `offset` bytes into its block of thread-local
// storage (memory_map.h: where static __shared__ arrays live), demangled, e.g.
// "demo::cpu_profiled::block_sum(float const*, float*, bool)::tile", and the offset into it; "" where
// the symbol table does not tell (no libdw, or no symbol there).
std::string thread_local_variable(std::uint64_t offset, std::uint64_t& into);

}  // namespace simt::sites
