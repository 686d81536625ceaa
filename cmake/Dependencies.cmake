# Libraries the project uses but does not teach. Each one is looked up with find_package; a missing
# one stops the configure with the Debian/Ubuntu package to install, or, with
# -DFA_FETCH_DEPENDENCIES=ON and an internet connection, is downloaded by FetchContent instead.
# Nothing is copied into the repository. FA_FETCH_DEPENDENCIES=ON in the environment of the first
# configure does the same (as FA_WARNINGS_AS_ERRORS, cmake/Options.cmake): scripts/check_setup.sh
# configures the default preset, and a notebook (docs/workshop.md, "On Colab or Kaggle") sets it so.

if("$ENV{FA_FETCH_DEPENDENCIES}")
  set(fa_fetch_dependencies_default ON)
else()
  set(fa_fetch_dependencies_default OFF)
endif()
option(FA_FETCH_DEPENDENCIES "Download fmt, CLI11, Catch2, Google Benchmark and Google Highway when not installed"
       ${fa_fetch_dependencies_default})
include(FetchContent)

# fa_require(<find_package name> <apt package> <git repository> <git tag>)
macro(fa_require name apt_package repository tag)
  find_package(${name} QUIET)
  if(NOT ${name}_FOUND)
    if(FA_FETCH_DEPENDENCIES)
      message(STATUS "${name} not installed: fetching ${repository} ${tag}")
      FetchContent_Declare(${name} GIT_REPOSITORY ${repository} GIT_TAG ${tag} GIT_SHALLOW TRUE)
      FetchContent_MakeAvailable(${name})
    else()
      message(FATAL_ERROR "${name} was not found. Install it with\n"
                          "    sudo apt-get install ${apt_package}\n"
                          "(the README's prerequisites line installs everything), or configure with "
                          "-DFA_FETCH_DEPENDENCIES=ON to download it.")
    endif()
  endif()
endmacro()

set(BENCHMARK_ENABLE_TESTING OFF CACHE BOOL "" FORCE)  # for a fetched Google Benchmark
set(CATCH_INSTALL_DOCS OFF CACHE BOOL "" FORCE)
fa_require(fmt       libfmt-dev       https://github.com/fmtlib/fmt.git              10.2.1)
# fmt as the project links it (fa_fmt): the compiled library, or with FA_FMT_HEADER_ONLY its headers
# alone, so that no libfmt is needed at run time (scripts/gpu_check.sh, with the libraries it carries
# to a machine that has none, uses that).
option(FA_FMT_HEADER_ONLY "Use fmt from its headers alone (no libfmt at run time)" OFF)
add_library(fa_fmt INTERFACE)
if(FA_FMT_HEADER_ONLY)
  target_link_libraries(fa_fmt INTERFACE fmt::fmt-header-only)
else()
  target_link_libraries(fa_fmt INTERFACE fmt::fmt)
endif()
fa_require(CLI11     libcli11-dev     https://github.com/CLIUtils/CLI11.git          v2.4.2)
fa_require(Catch2    catch2           https://github.com/catchorg/Catch2.git         v3.5.4)
fa_require(benchmark libbenchmark-dev https://github.com/google/benchmark.git        v1.8.3)

# Google Highway: portable SIMD, and the vectorised exp of its contrib math, for chapter 02's
# benchmark of the safe against the online softmax (chapters/02_online_softmax/lab/softmax_simd.cpp).
set(HWY_ENABLE_TESTS OFF CACHE BOOL "" FORCE)     # for a fetched Highway
set(HWY_ENABLE_EXAMPLES OFF CACHE BOOL "" FORCE)
set(HWY_ENABLE_INSTALL OFF CACHE BOOL "" FORCE)
find_package(hwy CONFIG QUIET)
if(NOT hwy_FOUND)
  if(FA_FETCH_DEPENDENCIES)
    message(STATUS "Google Highway not installed: fetching https://github.com/google/highway.git 1.0.3")
    FetchContent_Declare(hwy GIT_REPOSITORY https://github.com/google/highway.git GIT_TAG 1.0.3
                         GIT_SHALLOW TRUE)
    FetchContent_MakeAvailable(hwy)
    if(NOT TARGET hwy::hwy)
      add_library(hwy::hwy ALIAS hwy)
    endif()
  else()
    message(FATAL_ERROR "Google Highway (CMake package 'hwy', version 1.0 or newer) was not found. "
                        "Chapter 02's benchmark takes its vectorised exp from Highway. Install it with\n"
                        "    sudo apt-get install libhwy-dev\n"
                        "(the README's prerequisites line installs everything), or configure with "
                        "-DFA_FETCH_DEPENDENCIES=ON to download it.")
  endif()
endif()

# Catch2 v2 (Debian 12) and v3 (newer systems) differ in their headers; tests/catch.h hides that.

# Boost.Context (its fcontext layer) switches between the CUDA threads of common/simt.
find_package(boost_context CONFIG QUIET)
if(NOT boost_context_FOUND)
  message(FATAL_ERROR "Boost.Context was not found. Install it with\n"
                      "    sudo apt-get install libboost-context-dev\n"
                      "(common/simt uses it to run CUDA threads as fibers on the CPU).")
endif()

# MPI (Open MPI) runs chapter 09's ring as several processes, on one machine as on a cluster. Only
# that chapter's program and its mpirun tests need it: without it they are left out and the rest of
# the book builds.
find_package(MPI COMPONENTS CXX QUIET)
if(MPI_CXX_FOUND AND MPIEXEC_EXECUTABLE)
  set(FA_HAVE_MPI ON)
else()
  set(FA_HAVE_MPI OFF)
  message(WARNING "MPI was not found: chapter 09 (ring attention across processes) leaves out its program "
                  "ch09_ring_attention and its mpirun tests. Install Open MPI with\n"
                  "    sudo apt-get install openmpi-bin libopenmpi-dev\n"
                  "(the README's prerequisites line installs everything) and configure again.")
endif()
