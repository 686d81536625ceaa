// sites.h: keys of access sites, and their file and line.
#include "common/simt/tools/detail/sites.h"

#include <mutex>
#include <string_view>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include <cxxabi.h>

#include <cstdlib>

#if SIMT_HAVE_LIBDW
#include <elfutils/libdwfl.h>
#include <gelf.h>
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
  for (const char* top : {"/chapters/", "/common/", "/tests/", "/examples/"}) {
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

namespace {

#if SIMT_HAVE_LIBDW
// The program's modules, read by libdw once; every use holds dwfl_mutex.
std::mutex dwfl_mutex;
Dwfl* program_dwfl() {
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
  return dwfl;
}
#endif

}  // namespace

SourceLine source_line(std::uintptr_t key) {
  SourceLine named;
  if (named_site(key, named.file, named.line)) return trim_path(named);
#if SIMT_HAVE_LIBDW
  // The key is a return address: the line of the call instruction just before it.
  std::scoped_lock lock(dwfl_mutex);
  Dwfl* dwfl = program_dwfl();
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

std::string thread_local_variable(std::uint64_t offset, std::uint64_t& into) {
#if SIMT_HAVE_LIBDW
  std::scoped_lock lock(dwfl_mutex);
  Dwfl* dwfl = program_dwfl();
  if (dwfl == nullptr) return "";
  // The program itself holds this function; thread-local symbols have their offset into the
  // program's thread-local block as their value (the ELF specification, "Thread-Local Storage").
  Dwfl_Module* module = dwfl_addrmodule(dwfl, reinterpret_cast<Dwarf_Addr>(&thread_local_variable));
  if (module == nullptr) return "";
  const int symbols = dwfl_module_getsymtab(module);
  for (int i = 0; i < symbols; ++i) {
    GElf_Sym symbol;
    GElf_Addr address = 0;
    // (getsym_info leaves st_value as the file has it: a thread-local symbol's offset, not moved by
    // where the program was loaded.)
    const char* name = dwfl_module_getsym_info(module, i, &symbol, &address, nullptr, nullptr, nullptr);
    if (name == nullptr || GELF_ST_TYPE(symbol.st_info) != STT_TLS) continue;
    if (offset < symbol.st_value || offset >= symbol.st_value + symbol.st_size) continue;
    into = offset - symbol.st_value;
    int status = 0;
    char* demangled = abi::__cxa_demangle(name, nullptr, nullptr, &status);
    std::string result = status == 0 && demangled != nullptr ? demangled : name;
    std::free(demangled);
    return result;
  }
#else
  (void)offset;
  (void)into;
#endif
  return "";
}

std::string display_name(std::string_view kernel) {
  std::string name(kernel);
  const std::string_view copy = "cpu_profiled::";
  for (std::size_t at; (at = name.find(copy)) != std::string::npos;) name.erase(at, copy.size());
  return name;
}

std::string where(std::uintptr_t key, const SourceLine& line) {
  return line.file.empty() ? fmt::format("0x{:x} (no line information)", key)
                           : fmt::format("{}:{}", line.file, line.line);
}

}  // namespace simt::sites
