# Compiler warnings, sanitizer switches and the optional CUDA language.

# Warnings as errors: off by default; CI turns it on for every preset through the environment
# (.ci/run exports FA_WARNINGS_AS_ERRORS=ON before the first configure), so that it runs the README's
# own workflow command. -DFA_WARNINGS_AS_ERRORS=ON does the same on the command line.
if("$ENV{FA_WARNINGS_AS_ERRORS}")
  set(fa_warnings_as_errors_default ON)
else()
  set(fa_warnings_as_errors_default OFF)
endif()
option(FA_WARNINGS_AS_ERRORS "Treat compiler warnings as errors" ${fa_warnings_as_errors_default})
set(FA_SANITIZE "" CACHE STRING "Sanitizers to build with: '', 'address' (ASan + UBSan) or 'thread'")
set_property(CACHE FA_SANITIZE PROPERTY STRINGS "" address thread)
if(NOT FA_SANITIZE MATCHES "^(|address|thread)$")
  message(FATAL_ERROR "FA_SANITIZE='${FA_SANITIZE}': accepted values are '', 'address' and 'thread'.")
endif()
option(FA_REQUIRE_CUDA "Stop the configure if nvcc is not found (the cuda preset sets this)" OFF)
option(FA_CUDA "Compile the kernels for the GPU too where nvcc is found (OFF: the CPU path only)" ON)

# std::source_location (simt names the lines of its instructions with it) needs GCC 11, or Clang 15
# (Apple clang 15, Xcode 15): older Clangs lack the builtin that the standard libraries build it on.
include(CheckCXXSourceCompiles)
check_cxx_source_compiles("#include <source_location>
int main() { return static_cast<int>(std::source_location::current().line()) - __LINE__; }" FA_HAVE_SOURCE_LOCATION)
if(NOT FA_HAVE_SOURCE_LOCATION)
  message(FATAL_ERROR "${CMAKE_CXX_COMPILER} (${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}) has no "
                      "std::source_location: use GCC 11 or newer, or Clang 15 or newer (macOS: Xcode 15; "
                      "Debian 12: sudo apt-get install clang-16, then -DCMAKE_CXX_COMPILER=clang++-16).")
endif()

# Warnings for every C++ target of the project (not for fetched dependencies).
add_library(fa_warnings INTERFACE)
target_compile_options(fa_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion
                             -Wno-missing-field-initializers>
  # GCC's note that "the ABI for passing parameters with 64-byte alignment has changed in GCC 4.6"
  # is about calls across compilers older than GCC 4.6; chapter 10's kernels take their tensor maps
  # (64-byte aligned, as CUDA's CUtensorMap) by value, each compiled by one compiler, so it says
  # nothing to a reader of this book.
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>>:-Wno-psabi>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${FA_WARNINGS_AS_ERRORS}>>:-Werror>)

if(FA_SANITIZE STREQUAL "address")
  # GCC 12 reports false "may be used uninitialized" warnings inside libstdc++'s <regex> (used by
  # Catch2 and CLI11) when ASan instruments it; the warning stays on in every other preset (Clang
  # has no such warning, nor the option).
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
                      $<$<CXX_COMPILER_ID:GNU>:-Wno-maybe-uninitialized>)
  add_link_options(-fsanitize=address,undefined)
elseif(FA_SANITIZE STREQUAL "thread")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
endif()
# Lets a test leave out its longest cases under a sanitizer (they would take minutes there).
if(FA_SANITIZE STREQUAL "")
  add_compile_definitions(FA_SANITIZER_BUILD=0)
else()
  add_compile_definitions(FA_SANITIZER_BUILD=1)
endif()

# CUDA is optional: every chapter runs on the CPU through common/simt. Where nvcc is found (and no
# sanitizer is on: nvcc's host code is not instrumented), the kernels are also compiled for the GPU,
# unless FA_CUDA is OFF: on a machine with nvcc and no GPU, -DFA_CUDA=OFF leaves out the GPU path
# and its compile time.
include(CheckLanguage)
find_program(FA_NVIDIA_SMI nvidia-smi)  # the driver's tool: where it is, a GPU is
set(FA_HAVE_CUDA OFF)
if(FA_SANITIZE STREQUAL "" AND FA_CUDA)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      # With a GPU present, build for it; without one, build for sm_80 (A100), PTX included so
      # that the driver can JIT it for newer GPUs. sm_80 rather than CUDA 13's oldest, sm_75: the
      # tensor-core instructions (mma.sync m16n8k16 with bf16, cp.async) start at sm_80, and the
      # build without a GPU is the one that proves their inline PTX assembles. Built natively for
      # an older GPU (a T4: sm_75), chapter 06 stays on the CPU (FA_CUDA_SM80, below).
      if(FA_NVIDIA_SMI)
        set(CMAKE_CUDA_ARCHITECTURES native)
      else()
        set(CMAKE_CUDA_ARCHITECTURES 80)
      endif()
    endif()
    enable_language(CUDA)
    # C++20 for the CUDA sources too. CMake 3.25 does not know nvcc's flag for it (3.26 does).
    if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    # One CUDA runtime per program: the shared one, which fa_common links for gpu_available().
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
    find_package(CUDAToolkit REQUIRED)
    set(FA_HAVE_CUDA ON)
  endif()
endif()

# FA_CUDA_SM80: whether every architecture the GPU path is built for is sm_80 (A100) or newer.
# Chapter 06's kernel needs it: mma.sync m16n8k16 (bf16 and fp16) starts at sm_80, and ptxas refuses
# it for an older target. Where an architecture below sm_80 is in the list (a T4 is sm_75, and
# `native` on it means 75), chapter 06's kernel is compiled for the CPU only, its program runs on the
# CPU unless --device gpu is given, and refuses that in one line (ch06::check_device); chapters 04,
# 05, 07, 08 and 09 (with float32) still run on the GPU (cp.async has a synchronous form for sm_75:
# common/simt/instructions/detail/tensor_core_gpu.h). Values: a number with a suffix (75, 80-real, 90a, 100f), a list of
# them, `native` (the GPUs found, CMAKE_CUDA_ARCHITECTURES_NATIVE), or `all`, `all-major` and OFF,
# which count as below sm_80 (they include nvcc's oldest target).
set(FA_CUDA_SM80 OFF)
if(FA_HAVE_CUDA)
  set(fa_architectures ${CMAKE_CUDA_ARCHITECTURES})
  if(fa_architectures STREQUAL "native")
    set(fa_architectures ${CMAKE_CUDA_ARCHITECTURES_NATIVE})
  endif()
  list(LENGTH fa_architectures fa_count)
  if(fa_count GREATER 0)
    set(FA_CUDA_SM80 ON)
  endif()
  foreach(arch IN LISTS fa_architectures)
    if(NOT arch MATCHES "^([0-9]+)")
      set(FA_CUDA_SM80 OFF)
    elseif(CMAKE_MATCH_1 LESS 80)
      set(FA_CUDA_SM80 OFF)
    endif()
  endforeach()
endif()
# FA_SASS_ARCHS: the same architectures as scripts/sass_report.py names them (75 -> sm_75, 80-real ->
# sm_80, 90a -> sm_90a), for the SASS report of the build's own machine code (sass-report-05).
set(FA_SASS_ARCHS "")
if(FA_HAVE_CUDA)
  foreach(arch IN LISTS fa_architectures)
    if(arch MATCHES "^([0-9]+a?)")
      list(APPEND FA_SASS_ARCHS sm_${CMAKE_MATCH_1})
    endif()
  endforeach()
  list(REMOVE_DUPLICATES FA_SASS_ARCHS)
endif()
# FA_GPU_TESTS: the GPU builds of the tests (label gpu; add_chapter_test's GPU). On where a GPU is
# (nvidia-smi is found) and in the cuda preset (the GPU check and its dry run, which builds them
# without one). Elsewhere off: they could only report SKIPPED, after about 800 CPU-seconds of
# compiling (a fifth of the test workflow's build, timed on the 2-core development machine on
# 2026-12-05). The chapters' GPU kernels are built either way, as their programs' --device gpu runs
# them, and so are the simt tests' GPU kernels (tests/CMakeLists.txt: the check that ptxas accepts
# every instruction simt issues).
if(FA_NVIDIA_SMI)
  set(fa_gpu_tests_default ON)
else()
  set(fa_gpu_tests_default OFF)
endif()
option(FA_GPU_TESTS "Build the GPU tests (label gpu); on by default where nvidia-smi is found" ${fa_gpu_tests_default})

if(FA_REQUIRE_CUDA AND NOT FA_CUDA)
  message(FATAL_ERROR "The cuda preset builds the GPU path, which FA_CUDA=OFF leaves out: drop -DFA_CUDA=OFF "
                      "(or use the default preset, which runs every kernel on the CPU).")
elseif(FA_REQUIRE_CUDA AND NOT FA_HAVE_CUDA)
  message(FATAL_ERROR "The cuda preset needs nvcc, the CUDA Toolkit's compiler, and no sanitizer. "
                      "Install the CUDA Toolkit (https://developer.nvidia.com/cuda-downloads) and make "
                      "sure nvcc is on PATH, or use the default preset, which runs every kernel on the CPU.")
endif()
if(FA_CUDA)
  message(STATUS "GPU path (nvcc): ${FA_HAVE_CUDA}")
  if(FA_HAVE_CUDA)
    set(fa_architectures_text "${CMAKE_CUDA_ARCHITECTURES}")
    if(CMAKE_CUDA_ARCHITECTURES STREQUAL "native")
      set(fa_architectures_text "native, ${CMAKE_CUDA_ARCHITECTURES_NATIVE}")
    endif()
    if(FA_GPU_TESTS)
      message(STATUS "GPU tests: ON")
    else()
      if(FA_NVIDIA_SMI)
        message(STATUS "GPU tests: OFF (FA_GPU_TESTS=OFF)")
      else()
        message(STATUS "GPU tests: OFF (no GPU found; -DFA_GPU_TESTS=ON builds them, to report SKIPPED)")
      endif()
    endif()
    if(FA_CUDA_SM80)
      message(STATUS "GPU architectures: ${fa_architectures_text}; chapter 06 on the GPU: ON")
    else()
      message(STATUS "GPU architectures: ${fa_architectures_text}; chapter 06 on the GPU: OFF (its mma.sync "
                     "m16n8k16 needs sm_80 or newer: it runs on the CPU)")
    endif()
  endif()
else()
  message(STATUS "GPU path (nvcc): OFF (FA_CUDA=OFF)")
endif()
