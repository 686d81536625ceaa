// What the book asks of the operating system beyond POSIX, in one place: Linux (the reference
// platform, checked by CI) and macOS (Apple's clang; the clang preset checks the rest of the code
// with clang on Linux, and no Mac runs it). platform.cpp holds both branches; nothing else in the
// tree reads /proc, calls dl_iterate_phdr or Mach, or names MAP_STACK.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace fa::platform {

// The memory the system could give this process without swapping, in bytes. Linux: MemAvailable of
// /proc/meminfo, else the free pages (sysconf(_SC_AVPHYS_PAGES)). macOS: the free and inactive
// pages of host_statistics64(HOST_VM_INFO64). nullopt where nothing can be read. Never throws.
std::optional<std::uint64_t> available_physical_memory_bytes();

// What a container's memory limit still leaves, in bytes: Linux, cgroup v2: memory.max less
// memory.current. nullopt where there is no such limit (always on macOS). Never throws.
std::optional<std::uint64_t> container_memory_left_bytes();

// What this process may still map under its address-space limit (ulimit -v, RLIMIT_AS), in bytes:
// Linux: the limit less what it has mapped (the first number of /proc/self/statm, in pages).
// nullopt where there is no limit, and always on macOS, whose RLIMIT_AS is RLIMIT_RSS (sys/resource.h)
// and makes no allocation fail. Never throws.
std::optional<std::uint64_t> address_space_left_bytes();

// An anonymous, private, read-write mapping of `bytes` for a stack that grows down, with no swap
// reserved for it (MAP_NORESERVE; MAP_STACK too on Linux, a flag macOS does not have). Returns the
// mapping's first byte, or nullptr with errno set when the system refuses. Never throws.
void* map_stack(std::size_t bytes);

// A range of addresses [begin, end).
struct AddressRange {
  std::uintptr_t begin = 0;
  std::uintptr_t end = 0;
};

// The calling thread's thread-local storage of the program (the module that holds this code),
// where `static thread_local` variables live: Linux: its PT_TLS segment (dl_iterate_phdr's
// dlpi_tls_data); macOS: the block dyld allocates per thread for the image's __thread_data and
// __thread_bss sections, found from the first of its __thread_vars descriptors. {0, 0} where the
// program has none. Never throws.
AddressRange program_thread_local_storage();

// The same for every loaded module that has thread-local storage (Linux); macOS: the program's
// alone. Never throws (but std::bad_alloc).
std::vector<AddressRange> thread_local_storage();

}  // namespace fa::platform
