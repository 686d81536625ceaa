# simt's memory profile (common/simt/profile.h): a profiled copy of a chapter's CPU kernels.
#
# GCC's outline instrumentation (-fsanitize=kernel-address with a call threshold of 0) makes every
# load and store of a translation unit call __asan_load4_noabort(address) and its siblings, which
# common/simt/profile.cpp defines; no sanitizer runtime is linked. The copy is compiled with
# SIMT_PROFILED=1, which makes SIMT_BACKEND `cpu_profiled` (common/simt/backend.h), so that its
# kernels are chNN::cpu_profiled::... and live beside the ordinary chNN::cpu copy in one program.
# The ordinary copy is what runs unless a profile is being recorded.
#
# Available with GCC and without a sanitizer: -fsanitize=kernel-address does not combine with the
# asan preset's -fsanitize=address, whose runtime defines the same hook names, and the tsan preset
# builds the scheduler in a way the profile does not need to cover. Elsewhere the programs say
# that profiling is not available in this build.
# (common/simt/profile.cpp words the reason for the programs.)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND FA_SANITIZE STREQUAL "")
  set(FA_SIMT_PROFILE ON)
else()
  set(FA_SIMT_PROFILE OFF)
endif()
message(STATUS "simt memory profile (--profile): ${FA_SIMT_PROFILE}")

# File and line of an access site come from the program's debug information, read with elfutils'
# libdw (Debian: libdw-dev); without it the profile names sites by address.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(FA_LIBDW QUIET IMPORTED_TARGET libdw)
endif()

# The flags of a profiled copy. No auto-vectorisation: each access is reported at the size the
# kernel source gives it, as one CUDA thread makes it.
set(FA_SIMT_PROFILE_FLAGS -fsanitize=kernel-address --param=asan-instrumentation-with-call-threshold=0
    --param=asan-stack=0 --param=asan-globals=0 -fno-tree-vectorize -fno-tree-slp-vectorize -g)

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
  add_library(${copy} OBJECT ${ARGN})
  target_link_libraries(${copy} PRIVATE simt fa_common fa_warnings)
  target_compile_definitions(${copy} PRIVATE SIMT_PROFILED=1)
  target_compile_options(${copy} PRIVATE ${FA_SIMT_PROFILE_FLAGS})
  target_sources(${target} PRIVATE $<TARGET_OBJECTS:${copy}>)
  target_compile_definitions(${target} PUBLIC SIMT_PROFILED_KERNELS=1)
endfunction()
