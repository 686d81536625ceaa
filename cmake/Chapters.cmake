# Helpers that give every chapter the same shape: a demo program in bin/, a test executable with
# the chapter's CTest label, and a build target chNN that builds both (and nothing of a later
# chapter).

# add_chapter_program(<chapter target, e.g. ch03> <program name> <sources...>)
#   Builds bin/<program name> and attaches it to the chapter target.
function(add_chapter_program chapter program)
  add_executable(${program} ${ARGN})
  target_link_libraries(${program} PRIVATE fa_warnings)
  if(FA_SANITIZE STREQUAL "thread")
    # The tsan preset runs the chapters' test programs only (tests/CMakeLists.txt, add_demo_test):
    # `cmake --build --preset tsan` leaves the programs out; `--target chNN` still builds them.
    set_target_properties(${program} PROPERTIES EXCLUDE_FROM_ALL TRUE)
  endif()
  if(NOT TARGET ${chapter})
    add_custom_target(${chapter})
  endif()
  add_dependencies(${chapter} ${program})
  set_property(GLOBAL APPEND PROPERTY FA_TOUR_PROGRAMS ${program})
endfunction()

# fa_untested_in_sanitizer_builds(<targets...>)
#   Leaves programs that no test of the asan and tsan presets runs out of those builds' `all`
#   (`--target` still builds them): the benchmarks (an instrumented build's timings mean nothing),
#   the examples that show simt's profile and race checker (which a sanitizer build has not:
#   cmake/SimtProfile.cmake), the figures' program. Minutes of CI's 2 cores (docs/conventions.md, "CI").
function(fa_untested_in_sanitizer_builds)
  if(NOT FA_SANITIZE STREQUAL "")
    set_target_properties(${ARGN} PROPERTIES EXCLUDE_FROM_ALL TRUE)
  endif()
endfunction()

# <name>_sanitizer_subset: the test cases of `program` tagged FA_SANITIZER_FILTER exist, so that
# the GPU check's compute-sanitizer runs of GPU test <name> run some (tests/sanitizer_subset.cmake).
function(_fa_sanitizer_subset name program labels)
  add_test(NAME ${name}_sanitizer_subset
           COMMAND ${CMAKE_COMMAND} -DTEST_BINARY=$<TARGET_FILE:${program}> "-DFILTER=${FA_SANITIZER_FILTER}"
                   -P ${PROJECT_SOURCE_DIR}/tests/sanitizer_subset.cmake)
  set_tests_properties(${name}_sanitizer_subset PROPERTIES LABELS "${labels};common")
endfunction()

# add_chapter_test(<chapter target> <test executable> LABELS <labels...> SOURCES <sources...>
#                  [LIBRARIES <libs...>] [GPU [SANITIZER]] [RACECHECKED])
#   Builds a Catch2 test executable, registers it with CTest under the given labels and attaches
#   it to the chapter target. GPU tests are compiled with FA_TEST_ON_GPU=1 and exit with 77 when no
#   device is present, which CTest reports as SKIPPED (never as a pass); a program whose test cases
#   are all left out fails (Catch2's --warn NoTests). The GPU check (cmake/GpuCheck.cmake) builds and
#   runs every GPU test, and runs the test cases tagged [sanitizer] of each SANITIZER one under
#   compute-sanitizer; <name>_sanitizer_subset checks on every machine that it has some.
#   A sanitizer build leaves GPU tests out: it never compiles for the GPU (cmake/Options.cmake), so
#   they could only report SKIPPED, after minutes of compiling. A build without a GPU leaves them
#   out too, unless FA_GPU_TESTS is ON (cmake/Options.cmake: the cuda preset turns it on); there the
#   <name>_sanitizer_subset check lists the test cases of the CPU build of the same source (the
#   program of the same name without "_gpu"), which has the same cases.
#   RACECHECKED: a chapter's test program whose kernels simt's race checker checks exactly in the
#   default build (its NN_racecheck_test); the tsan preset leaves it out (docs/conventions.md, "CI":
#   ThreadSanitizer sees simt's threads and the synchronisation of its instructions, which simt's
#   own tests and examples run; the race checker sees every race of these kernels, under every
#   schedule). NO_THREADS: a test of host code that starts no thread and launches no kernel, which
#   the tsan preset leaves out too. The asan preset runs both.
function(add_chapter_test chapter name)
  cmake_parse_arguments(ARG "GPU;SANITIZER;RACECHECKED;NO_THREADS" "" "LABELS;SOURCES;LIBRARIES" ${ARGN})
  if(ARG_GPU AND NOT FA_SANITIZE STREQUAL "")
    return()
  endif()
  if(ARG_GPU AND NOT FA_GPU_TESTS)
    string(REPLACE "_gpu_test" "_test" twin ${name})
    if(ARG_SANITIZER AND TARGET ${twin})
      _fa_sanitizer_subset(${name} ${twin} "${ARG_LABELS}")
    endif()
    return()
  endif()
  if((ARG_RACECHECKED OR ARG_NO_THREADS) AND FA_SANITIZE STREQUAL "thread")
    return()
  endif()
  add_executable(${name} ${ARG_SOURCES})
  if(ARG_GPU)
    target_link_libraries(${name} PRIVATE fa_gpu_test_main)  # which defines FA_TEST_ON_GPU=1 for it
  else()
    target_link_libraries(${name} PRIVATE fa_test_main)
  endif()
  target_link_libraries(${name} PRIVATE fa_warnings ${ARG_LIBRARIES})
  add_test(NAME ${name} COMMAND ${name} --warn NoTests)  # a test program that runs nothing fails
  set(labels ${ARG_LABELS})
  if(ARG_GPU)
    list(APPEND labels gpu)
    set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77)
    set_property(GLOBAL APPEND PROPERTY FA_GPU_TESTS ${name})
  endif()
  if(ARG_SANITIZER)
    if(NOT ARG_GPU)
      message(FATAL_ERROR "add_chapter_test(${name}): SANITIZER applies to GPU tests only")
    endif()
    set_property(GLOBAL APPEND PROPERTY FA_GPU_SANITIZER_TESTS ${name})
    # Listing the test cases needs no GPU (tests/main.cpp), so this runs on every machine.
    _fa_sanitizer_subset(${name} ${name} "${ARG_LABELS}")
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "${labels}")
  if(NOT TARGET ${chapter})
    add_custom_target(${chapter})
  endif()
  add_dependencies(${chapter} ${name})
endfunction()

# add_kernels(<library> <kernel source .cuh> [PROFILED] [CPU_ONLY])
#   Compiles a chapter's kernel source twice into <library>: by the host compiler through
#   common/simt (the kernels land in namespace chNN::cpu) and, where nvcc was found, by nvcc
#   (chNN::gpu). Each compilation is a one-line translation unit, `#include "<the .cuh>"`, generated
#   in the build tree, so that a chapter's folder holds only the kernel source itself. PROFILED adds
#   a third copy for the CPU, chNN::cpu_profiled, whose every memory access simt counts (--profile;
#   cmake/SimtProfile.cmake). CPU_ONLY leaves out nvcc's copy (chapter 06 where an architecture of
#   the build is older than its instructions: FA_CUDA_SM80, cmake/Options.cmake).
function(add_kernels library cuh)
  cmake_parse_arguments(ARG "PROFILED;CPU_ONLY" "" "" ${ARGN})
  file(RELATIVE_PATH include ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR}/${cuh})
  get_filename_component(stem ${cuh} NAME_WE)
  set(cpu ${CMAKE_CURRENT_BINARY_DIR}/${stem}_cpu.cpp)
  file(CONFIGURE OUTPUT ${cpu} CONTENT
       "// Generated by add_kernels (cmake/Chapters.cmake): the kernels of ${include}, for the CPU.\n#include \"${include}\"\n")
  target_sources(${library} PRIVATE ${cpu})
  if(ARG_PROFILED)
    simt_add_profiled_kernels(${library} ${cpu})
  endif()
  if(FA_HAVE_CUDA AND NOT ARG_CPU_ONLY)
    set(gpu ${CMAKE_CURRENT_BINARY_DIR}/${stem}_gpu.cu)
    file(CONFIGURE OUTPUT ${gpu} CONTENT
         "// Generated by add_kernels (cmake/Chapters.cmake): the kernels of ${include}, for the GPU.\n#include \"${include}\"\n")
    target_sources(${library} PRIVATE ${gpu})
  endif()
endfunction()
