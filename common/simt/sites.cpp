// sites.h: keys of access sites, and their file and line.
#include "common/simt/sites.h"

#include <mutex>
#include <string_view>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#if SIMT_HAVE_LIBDW
#include <elfutils/libdwfl.h>
#include <unistd.h>
#endif

namespace simt::sites {
namespace {

// The sites of simt's own instructions, which have a source_location instead of a code address.
struct NamedSites {
  std::mutex mutex;
  std::unordered_map<std::uintptr_t, std::pair<std::string, int>> by_key;
};
NamedSites& named_sites() {
  static NamedSites n;
  return n;
}
constexpr std::uintptr_t kNamedSite = std::uintptr_t{1} << (8 * sizeof(std::uintptr_t) - 1);

bool named_site(std::uintptr_t key, std::string& file, int& line) {
  if ((key & kNamedSite) == 0) return false;
  NamedSites& n = named_sites();
  std::scoped_lock lock(n.mutex);
  const auto it = n.by_key.find(key);
  if (it == n.by_key.end()) return false;
  file = it->second.first;
  line = it->second.second;
  return true;
}

// The path from the repository's top folder, where it is inside it.
SourceLine trim_path(SourceLine s) {
  for (const char* top : {"/chapters/", "/common/", "/tests/"}) {
    const std::size_t at = s.file.rfind(top);
    if (at != std::string::npos) {
      s.file = s.file.substr(at + 1);
      break;
    }
  }
  return s;
}

}  // namespace

void make_table() { (void)named_sites(); }

std::uintptr_t key(const std::source_location& site) {
  // Per host thread, a cache of the sites already registered (keyed by file pointer and line).
  thread_local std::unordered_map<std::uint64_t, std::uintptr_t> cache;
  const std::uint64_t local = reinterpret_cast<std::uintptr_t>(site.file_name()) * 1000003u ^
                              (std::uint64_t{site.line()} << 12) ^ site.column();
  if (auto it = cache.find(local); it != cache.end()) return it->second;
  NamedSites& n = named_sites();
  std::scoped_lock lock(n.mutex);
  std::uintptr_t k = kNamedSite | (static_cast<std::uintptr_t>(local) >> 1);
  while (true) {
    auto [it, added] = n.by_key.try_emplace(k, site.file_name(), static_cast<int>(site.line()));
    if (added || (it->second.first == site.file_name() && it->second.second == static_cast<int>(site.line()))) break;
    k = kNamedSite | ((k + 1) & ~kNamedSite);  // another site took this key: the next one
  }
  cache.emplace(local, k);
  return k;
}

SourceLine source_line(std::uintptr_t key) {
  SourceLine named;
  if (named_site(key, named.file, named.line)) return trim_path(named);
#if SIMT_HAVE_LIBDW
  // The key is a return address: the line of the call instruction just before it.
  static std::mutex mutex;
  static Dwfl* dwfl = [] {
    static const Dwfl_Callbacks callbacks = {dwfl_linux_proc_find_elf, dwfl_standard_find_debuginfo, nullptr, nullptr};
    Dwfl* d = dwfl_begin(&callbacks);
    if (d != nullptr) {
      dwfl_report_begin(d);
      dwfl_linux_proc_report(d, getpid());
      dwfl_report_end(d, nullptr, nullptr);
    }
    return d;
  }();
  std::scoped_lock lock(mutex);
  if (dwfl == nullptr) return {};
  const Dwarf_Addr pc = key - 1;
  Dwfl_Module* module = dwfl_addrmodule(dwfl, pc);
  if (module == nullptr) return {};
  Dwfl_Line* line = dwfl_module_getsrc(module, pc);
  if (line == nullptr) return {};
  int number = 0;
  const char* file = dwfl_lineinfo(line, nullptr, &number, nullptr, nullptr, nullptr);
  if (file == nullptr) return {};
  return trim_path({file, number});
#else
  return {};
#endif
}

std::string where(std::uintptr_t key, const SourceLine& line) {
  return line.file.empty() ? fmt::format("0x{:x} (no line information)", key)
                           : fmt::format("{}:{}", line.file, line.line);
}

}  // namespace simt::sites
