// platform.h: Linux and macOS. The macOS branch is not compiled by CI (no Mac there); it calls only
// the documented APIs named beside each function.
#include "common/platform.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#if defined(__APPLE__)
#include <dlfcn.h>           // dladdr
#include <mach-o/getsect.h>  // getsectiondata
#include <mach/mach.h>       // host_statistics64, mach_host_self, vm_kernel_page_size
#else
#include <link.h>  // dl_iterate_phdr
#endif

namespace fa::platform {

namespace {

// a * b, or UINT64_MAX when the product does not fit in 64 bits.
std::uint64_t product_or_max(std::uint64_t a, std::uint64_t b) {
  std::uint64_t product = 0;
  return __builtin_mul_overflow(a, b, &product) ? UINT64_MAX : product;
}

#if !defined(__APPLE__)
// The first unsigned number in a file (cgroup v2's memory.max holds "max" when there is no limit:
// no number, nothing).
std::optional<std::uint64_t> number_in_file(const char* path) {
  std::FILE* f = std::fopen(path, "r");
  if (f == nullptr) return std::nullopt;
  unsigned long long value = 0;
  const bool read = std::fscanf(f, "%llu", &value) == 1;
  std::fclose(f);
  return read ? std::optional<std::uint64_t>(value) : std::nullopt;
}
#endif

}  // namespace

#if defined(__APPLE__)

std::optional<std::uint64_t> available_physical_memory_bytes() {
  vm_statistics64_data_t vm{};
  mach_msg_type_number_t count = HOST_VM_INFO64_COUNT;
  if (host_statistics64(mach_host_self(), HOST_VM_INFO64, reinterpret_cast<host_info64_t>(&vm), &count) !=
      KERN_SUCCESS) {
    return std::nullopt;
  }
  return product_or_max(std::uint64_t{vm.free_count} + vm.inactive_count, vm_kernel_page_size);
}

std::optional<std::uint64_t> container_memory_left_bytes() { return std::nullopt; }

std::optional<std::uint64_t> address_space_left_bytes() { return std::nullopt; }

void* map_stack(std::size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

namespace {
// A descriptor of a __thread_vars section (S_THREAD_LOCAL_VARIABLES, <mach-o/loader.h>), as dyld
// reads it: calling thunk(descriptor) gives the calling thread's address of the variable, which is
// `offset` bytes into the thread's block of the image's thread-local storage.
struct TlvDescriptor {
  void* (*thunk)(TlvDescriptor*);
  unsigned long key;
  unsigned long offset;
};
}  // namespace

AddressRange program_thread_local_storage() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(&program_thread_local_storage), &info) == 0) return {};
  const auto* image = static_cast<const mach_header_64*>(info.dli_fbase);
  unsigned long vars_bytes = 0, data_bytes = 0, bss_bytes = 0;
  auto* vars = reinterpret_cast<TlvDescriptor*>(getsectiondata(image, "__DATA", "__thread_vars", &vars_bytes));
  const std::uint8_t* data = getsectiondata(image, "__DATA", "__thread_data", &data_bytes);
  const std::uint8_t* bss = getsectiondata(image, "__DATA", "__thread_bss", &bss_bytes);
  if (vars == nullptr || vars_bytes < sizeof(TlvDescriptor)) return {};
  // The block holds the initial values (__thread_data) then the zeros (__thread_bss), laid out as
  // the two sections are in the image.
  const std::uint8_t* first = data != nullptr ? data : bss;
  const std::uint8_t* last = bss != nullptr ? bss + bss_bytes : data + data_bytes;
  const auto begin = reinterpret_cast<std::uintptr_t>(vars->thunk(vars)) - vars->offset;
  return {begin, begin + static_cast<std::uintptr_t>(last - first)};
}

std::vector<AddressRange> thread_local_storage() {
  const AddressRange program = program_thread_local_storage();
  if (program.begin == program.end) return {};
  return {program};
}

#else  // Linux

std::optional<std::uint64_t> available_physical_memory_bytes() {
  if (std::FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    unsigned long long kib = 0;
    bool found = false;
    while (!found && std::fgets(line, sizeof line, f) != nullptr) {
      found = std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1;
    }
    std::fclose(f);
    if (found) return product_or_max(kib, 1024);
  }
  const long pages = sysconf(_SC_AVPHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return std::nullopt;
  return product_or_max(static_cast<std::uint64_t>(pages), static_cast<std::uint64_t>(page));
}

std::optional<std::uint64_t> container_memory_left_bytes() {
  const std::optional<std::uint64_t> limit = number_in_file("/sys/fs/cgroup/memory.max");
  const std::optional<std::uint64_t> used = number_in_file("/sys/fs/cgroup/memory.current");
  if (!limit || !used) return std::nullopt;
  return *limit > *used ? *limit - *used : 0;
}

std::optional<std::uint64_t> address_space_left_bytes() {
  rlimit address_space{};
  if (getrlimit(RLIMIT_AS, &address_space) != 0 || address_space.rlim_cur == RLIM_INFINITY) return std::nullopt;
  const std::optional<std::uint64_t> pages = number_in_file("/proc/self/statm");
  const long page = sysconf(_SC_PAGESIZE);
  const std::uint64_t mapped = pages && page > 0 ? product_or_max(*pages, static_cast<std::uint64_t>(page)) : 0;
  const std::uint64_t cap = address_space.rlim_cur;
  return cap > mapped ? cap - mapped : 0;
}

void* map_stack(std::size_t bytes) {
  void* p =
      mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

namespace {
// The thread-local storage of the module dl_iterate_phdr reports, added to `out` where it has one.
void add_tls(const dl_phdr_info* info, std::vector<AddressRange>& out) {
  if (info->dlpi_tls_data == nullptr) return;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    if (info->dlpi_phdr[i].p_type != PT_TLS) continue;
    const auto begin = reinterpret_cast<std::uintptr_t>(info->dlpi_tls_data);
    out.push_back({begin, begin + info->dlpi_phdr[i].p_memsz});
  }
}
}  // namespace

AddressRange program_thread_local_storage() {
  std::vector<AddressRange> ranges;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* out) {
        add_tls(info, *static_cast<std::vector<AddressRange>*>(out));
        return 1;  // the first module reported is the program itself: stop after it
      },
      &ranges);
  return ranges.empty() ? AddressRange{} : ranges.front();
}

std::vector<AddressRange> thread_local_storage() {
  std::vector<AddressRange> ranges;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* out) {
        add_tls(info, *static_cast<std::vector<AddressRange>*>(out));
        return 0;
      },
      &ranges);
  return ranges;
}

#endif

}  // namespace fa::platform
