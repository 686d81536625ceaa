# simt's memory profile (common/simt/tools/profile.h): a profiled copy of a chapter's CPU kernels.
#
# The ThreadSanitizer instrumentation of GCC or Clang (-fsanitize=thread), compiled without its
# runtime, makes every load and store of a translation unit call __tsan_read4(address),
# __tsan_write4(address) and their siblings, which common/simt/tools/detail/observer.cpp defines: the memory profile (profile.h) and the
# race checker (racecheck.h) see every access. (AddressSanitizer's instrumentation would serve the
# profile, but it checks the store of x += 1 only through the load before it, and a race checker
# needs both.) The copy is compiled with SIMT_PROFILED=1, which makes SIMT_BACKEND `cpu_profiled`
# (common/simt/runtime/backend.h), so that its kernels are chNN::cpu_profiled::... and live beside the
# ordinary chNN::cpu copy in one program. The ordinary copy is what runs unless a profile is being
# recorded or the race checker is on (common/simt/tools/profiled_copy.h).
#
# Available with GCC or Clang (AppleClang too) and without a sanitizer: the asan preset's -fsanitize=address does not
# combine with -fsanitize=thread in one translation unit, and the tsan preset's runtime defines the
# same hook names. Elsewhere the programs say that profiling and racecheck are not available in
# this build, in one line (common/simt/tools/detail/observer.cpp words the reason).
if(CMAKE_CXX_COMPILER_ID MATCHES "^(GNU|Clang|AppleClang)$" AND FA_SANITIZE STREQUAL "")
  set(FA_SIMT_PROFILE ON)
else()
  set(FA_SIMT_PROFILE OFF)
endif()
message(STATUS "simt memory profile (--profile): ${FA_SIMT_PROFILE}")

# File and line of an access site come from the program's debug information, read with elfutils'
# libdw (Debian: libdw-dev); without it the reports name sites by address. libdw reads ELF, so a
# Mac has none: the clang preset leaves it out (FA_USE_LIBDW=OFF) to build and test as there.
option(FA_USE_LIBDW "Name access sites by file and line with elfutils' libdw, where it is found" ON)
if(FA_USE_LIBDW)
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND)
    pkg_check_modules(FA_LIBDW QUIET IMPORTED_TARGET libdw)
  endif()
else()
  set(FA_LIBDW_FOUND OFF)
endif()
message(STATUS "simt source lines of access sites (libdw): ${FA_LIBDW_FOUND}")

# The flags of a profiled copy. No calls at each function's entry and exit; no auto-vectorisation:
# each access is reported at the size the kernel source gives it, as one CUDA thread makes it.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  set(FA_SIMT_PROFILE_FLAGS -fsanitize=thread --param=tsan-instrument-func-entry-exit=0 -fno-tree-vectorize
      -fno-tree-slp-vectorize -g)
else()
  # Clang's pass (LLVM's ThreadSanitizer.cpp) takes its switches through -mllvm. By default it drops
  # the load of a read-modify-write (x += 1: the store alone tells a race detector enough);
  # compound-read-before-write keeps it, as one call __tsan_read_write4(address) that observer.cpp
  # counts as a load and a store, as GCC's two calls. Its copies of memory (memcpy, a struct's
  # assignment) call __tsan_memcpy and its siblings from LLVM 16 on; before (Debian 12's Clang 14)
  # they call memcpy itself, which the profile does not see.
  set(FA_SIMT_PROFILE_FLAGS -fsanitize=thread "SHELL:-mllvm -tsan-instrument-func-entry-exit=0"
      "SHELL:-mllvm -tsan-compound-read-before-write=1" -fno-vectorize -fno-slp-vectorize -g)
endif()

# simt_add_profiled_kernels(<target> <kernel sources...>)
#   Compiles a second copy of each source (a *_cpu.cpp that includes a chapter's .cuh) with the
#   instrumentation and SIMT_PROFILED=1, adds it to <target>, and defines SIMT_PROFILED_KERNELS=1
#   (0 where profiling is not available) for <target> and what links it, so that the host code
#   can choose chNN::cpu_profiled while a profile is being recorded.
function(simt_add_profiled_kernels target)
  if(NOT FA_SIMT_PROFILE)
    target_compile_definitions(${target} PUBLIC SIMT_PROFILED_KERNELS=0)
    return()
  endif()
  set(copy ${target}_profiled)
  if(TARGET ${copy})  # another .cuh of the same library (chapter 10's hopper_fp8.cuh): one more source
    target_sources(${copy} PRIVATE ${ARGN})
    return()
  endif()
  add_library(${copy} OBJECT ${ARGN})
  target_link_libraries(${copy} PRIVATE simt fa_common fa_warnings)
  target_compile_definitions(${copy} PRIVATE SIMT_PROFILED=1)
  target_compile_options(${copy} PRIVATE ${FA_SIMT_PROFILE_FLAGS})
  target_sources(${target} PRIVATE $<TARGET_OBJECTS:${copy}>)
  target_compile_definitions(${target} PUBLIC SIMT_PROFILED_KERNELS=1)
endfunction()
