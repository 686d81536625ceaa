// What both backends check before a launch, in plain C++ so that nvcc and g++ compile the same
// rules: the kernel's readable name, the limits of a launch configuration, and buffer sizes.
//
// The limits are those of compute capability 9.0 (H100/H200), from the CUDA C++ Programming Guide,
// "Compute Capabilities", table "Technical Specifications per Compute Capability":
//   threads per block <= 1024; block.x, block.y <= 1024; block.z <= 64;
//   grid.x <= 2^31 - 1; grid.y, grid.z <= 65535;
//   dynamic shared memory per block: 48 KiB unless the kernel opts in with
//   cudaFuncAttributeMaxDynamicSharedMemorySize, and at most 227 KiB with it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#if defined(__clang__) && !defined(__CUDACC__)
#include <cxxabi.h>

#include <cstdlib>
#include <memory>
#include <typeinfo>
#endif

namespace simt::rules {

inline constexpr unsigned max_threads_per_block = 1024;
inline constexpr unsigned max_block_x = 1024, max_block_y = 1024, max_block_z = 64;
inline constexpr std::uint64_t max_grid_x = 2147483647, max_grid_y = 65535, max_grid_z = 65535;
inline constexpr std::size_t default_dynamic_shared_bytes = 48 * 1024;
inline constexpr std::size_t max_dynamic_shared_bytes = 227 * 1024;

#if defined(__clang__) && !defined(__CUDACC__)
namespace detail {
template <auto Kernel>
struct KernelTag {};

// The kernel's name out of the demangled name of KernelTag<&kernel>, as g++'s __PRETTY_FUNCTION__
// spells it: "simt::rules::detail::KernelTag<&(void ch05::cpu::flash_kernel<64, 64, 64u>(const
// float*, ...))>" gives "ch05::cpu::flash_kernel<64, 64, 64>" (an instance of a template is spelled
// with its type, and every kernel returns void; the demangler's literal suffixes, 64u or 64l,
// dropped), "...KernelTag<&demo::block_sum>" gives "demo::block_sum", "(anonymous namespace)"
// becomes "{anonymous}". The whole demangled text where it is spelled otherwise; the mangled one
// where it does not demangle.
inline std::string kernel_name_from_tag(const char* mangled) {
  int status = 0;
  const std::unique_ptr<char, void (*)(void*)> text(abi::__cxa_demangle(mangled, nullptr, nullptr, &status), std::free);
  if (status != 0 || !text) return mangled;
  std::string_view rest = text.get();
  const std::size_t start = rest.find("KernelTag<&");
  if (start == std::string_view::npos) return std::string(rest);
  rest.remove_prefix(start + 11);
  if (rest.starts_with('(') && !rest.starts_with("(anonymous")) rest.remove_prefix(1);  // "(void NAME(params))"
  if (rest.starts_with("void ")) rest.remove_prefix(5);                                 // (its return type)
  std::string name;
  int depth = 0;
  for (std::size_t i = 0; i < rest.size(); ++i) {
    if (rest.substr(i).starts_with("(anonymous namespace)")) {  // g++'s spelling of it
      name += "{anonymous}";
      i += 20;
      continue;
    }
    const char c = rest[i];
    if (c == '<') ++depth;
    if (c == '>' && --depth < 0) break;  // KernelTag's own '>'
    if (depth == 0 && c == '(') break;   // the parameter list
    const bool after_number = !name.empty() && name.back() >= '0' && name.back() <= '9';
    if ((c == 'u' || c == 'l') && after_number && i + 1 < rest.size() &&
        (rest[i + 1] == ',' || rest[i + 1] == '>' || rest[i + 1] == 'l')) {
      continue;
    }
    name += c;
  }
  return name;
}
}  // namespace detail
#endif

// The kernel's name as g++ spells the template argument, e.g. "ch05::cpu::flash_kernel<64, 64,
// 64>": on g++ (and nvcc, whose host compiler it is) cut out of __PRETTY_FUNCTION__ ("... [with auto
// Kernel = NAME]"). Clang's __PRETTY_FUNCTION__ leaves a function template's arguments out ("...
// [Kernel = &ch05::cpu::flash_kernel]", Clang 16 and Apple's), which would give every instance of a
// kernel one name, so there the name comes from the type KernelTag<Kernel>'s name, demangled.
// Never throws but std::bad_alloc; falls back to the whole signature if the compiler spells it
// differently.
template <auto Kernel>
std::string_view kernel_name() {
#if defined(__clang__) && !defined(__CUDACC__)
  static const std::string name = detail::kernel_name_from_tag(typeid(detail::KernelTag<Kernel>).name());
  return name;
#else
  const std::string_view signature = __PRETTY_FUNCTION__;
  const std::string_view key = "Kernel = ";
  const std::size_t start = signature.find(key);
  if (start == std::string_view::npos) return signature;
  std::string_view name = signature.substr(start + key.size());
  if (name.starts_with('&')) name.remove_prefix(1);  // (as a clang host compiler of nvcc spells an address)
  // The name ends at the first ';' or ']' outside of <...> and (...).
  int depth = 0;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (c == '<' || c == '(') ++depth;
    if (c == '>' || c == ')') --depth;
    if (depth == 0 && (c == ';' || c == ']')) return name.substr(0, i);
  }
  return name;
#endif
}

// "(x, y, z)" for a dim3 or a uint3 of either backend.
template <class D>
std::string str3(const D& d) {
  return "(" + std::to_string(d.x) + ", " + std::to_string(d.y) + ", " + std::to_string(d.z) + ")";
}

// Throws std::invalid_argument naming the kernel, what is wrong and what is accepted, when the grid
// or the block is empty or larger than the limits above. D is dim3 of either backend.
template <class D>
void check_launch_shape(std::string_view kernel, const D& grid, const D& block) {
  const auto fail = [&](const std::string& what) {
    throw std::invalid_argument("simt::launch of " + std::string(kernel) + ": " + what);
  };
  if (grid.x == 0 || grid.y == 0 || grid.z == 0) {
    fail("empty grid " + str3(grid) + "; every grid dimension must be at least 1");
  }
  if (block.x == 0 || block.y == 0 || block.z == 0) {
    fail("empty block " + str3(block) + "; every block dimension must be at least 1");
  }
  if (block.x > max_block_x || block.y > max_block_y || block.z > max_block_z) {
    fail("block " + str3(block) + " is too large in one dimension; accepted: x, y <= 1024, z <= 64");
  }
  const std::uint64_t threads = std::uint64_t{block.x} * block.y * block.z;
  if (threads > max_threads_per_block) {
    fail("block " + str3(block) + " has " + std::to_string(threads) +
         " threads; accepted: at most 1024 threads per block");
  }
  if (grid.x > max_grid_x || grid.y > max_grid_y || grid.z > max_grid_z) {
    fail("grid " + str3(grid) + " is too large; accepted: x <= 2^31 - 1, y and z <= 65535");
  }
}

// Throws std::invalid_argument when a host span of `host_count` elements does not match a device
// buffer of `device_count` elements; `what` names the operation, e.g. "copy_to_host".
inline void check_same_size(std::string_view what, std::size_t device_count, std::size_t host_count) {
  if (device_count != host_count) {
    throw std::invalid_argument("DeviceBuffer::" + std::string(what) + ": the buffer holds " +
                                std::to_string(device_count) + " elements but the host span has " +
                                std::to_string(host_count) + "; the two sizes must be equal");
  }
}

}  // namespace simt::rules
