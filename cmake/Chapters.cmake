# Helpers that give every chapter the same shape: a demo program in bin/, a test executable with
# the chapter's CTest label, and a build target chNN that builds both (and nothing of a later
# chapter).

# add_chapter_program(<chapter target, e.g. ch03> <program name> <sources...>)
#   Builds bin/<program name> and attaches it to the chapter target.
function(add_chapter_program chapter program)
  add_executable(${program} ${ARGN})
  target_link_libraries(${program} PRIVATE fa_warnings)
  if(NOT TARGET ${chapter})
    add_custom_target(${chapter})
  endif()
  add_dependencies(${chapter} ${program})
  set_property(GLOBAL APPEND PROPERTY FA_TOUR_PROGRAMS ${program})
endfunction()

# add_chapter_test(<chapter target> <test executable> LABELS <labels...> SOURCES <sources...>
#                  [LIBRARIES <libs...>] [GPU])
#   Builds a Catch2 test executable, registers it with CTest under the given labels and attaches
#   it to the chapter target. GPU tests exit with 77 when no device is present, which CTest
#   reports as SKIPPED (never as a pass); a program whose test cases are all left out fails
#   (Catch2's --warn NoTests).
function(add_chapter_test chapter name)
  cmake_parse_arguments(ARG "GPU" "" "LABELS;SOURCES;LIBRARIES" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  if(ARG_GPU)
    target_link_libraries(${name} PRIVATE fa_gpu_test_main)
  else()
    target_link_libraries(${name} PRIVATE fa_test_main)
  endif()
  target_link_libraries(${name} PRIVATE fa_warnings ${ARG_LIBRARIES})
  add_test(NAME ${name} COMMAND ${name} --warn NoTests)  # a test program that runs nothing fails
  set(labels ${ARG_LABELS})
  if(ARG_GPU)
    list(APPEND labels gpu)
    set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77)
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "${labels}")
  if(NOT TARGET ${chapter})
    add_custom_target(${chapter})
  endif()
  add_dependencies(${chapter} ${name})
endfunction()
