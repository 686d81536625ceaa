# What the GPU check (scripts/gpu_check.sh) builds and runs, declared beside the programs it runs,
# never kept in a list of its own:
#   - every test added with add_chapter_test(... GPU) (cmake/Chapters.cmake), and of those, the ones
#     declared SANITIZER, whose [sanitizer] test cases run under compute-sanitizer;
#   - every step declared with gpu_check_step() or add_gpu_benchmark() below;
#   - the targets appended to the global property FA_GPU_CHECK_TARGETS (make_figures: the report
#     redraws the traffic figure).
# When the configure ends, gpu_check_write_manifest() writes all of it to
# build/<preset>/gpu_check.json, and the target `gpu_check` builds every program named there
# (cmake --build --preset cuda --target gpu_check).
#
# A step is a command that prints Markdown (a paragraph and a table) on stdout. Its exit status:
#   0   it measured what it names;
#   77  it cannot measure on this machine (no GPU, no torch, no counters): its last line on stderr
#       says why; the check reports the step "skipped" with that reason and exits 3;
#   any other status is a failure of ours (the check exits 1). A step stopped by its time limit
#   after printing table rows is "partial (out of time)", its rows kept.
# Given --plan (or the words after PLAN), the command must check its arguments and print what it
# would measure, without a GPU, and exit 0: that is what `scripts/gpu_check.sh --dry-run` runs.

# The Catch2 filter of the test cases compute-sanitizer runs (tests/sanitizer_subset.cmake checks
# on every machine that each SANITIZER test has some).
set(FA_SANITIZER_FILTER "[sanitizer]")

# gpu_check_step(<name> BUDGET <seconds on one H200> COMMAND <words...>
#                [TITLE <heading>] [BESIDE <step>] [TARGETS <targets...>] [OUTPUTS <files...>]
#                [PLAN <words...>])
#   TITLE    the section of docs/benchmarks.md the step's output opens; without it, the output goes
#            under the section of the BESIDE step.
#   BESIDE   the step runs only after that one measured (its rows stand beside that one's).
#   TARGETS  what the command runs; built by `gpu_check` (in the dry run, in this step's turn).
#   OUTPUTS  files the step writes into {logs} that come back from the GPU machine beside the
#            report (every file counts against the 8 that come back).
#   PLAN     the command of the dry run (default: COMMAND with --plan added, before a "--" where
#            it has one: the words after it are a program that the command runs).
# In COMMAND and PLAN, $<TARGET_FILE:...> names a program; `python3 scripts/x.py` runs a script of
# the repository with the python3 on the PATH; {logs} is a folder for the step's own files and
# {out:STEP} the Markdown that STEP printed.
function(gpu_check_step name)
  if(NOT FA_HAVE_CUDA)  # the check needs the GPU path: without it, it has no steps
    return()
  endif()
  cmake_parse_arguments(ARG "" "BUDGET;TITLE;BESIDE" "COMMAND;TARGETS;OUTPUTS;PLAN" ${ARGN})
  if(NOT ARG_BUDGET OR NOT ARG_COMMAND)
    message(FATAL_ERROR "gpu_check_step(${name}): BUDGET and COMMAND are required")
  endif()
  if(NOT ARG_TITLE AND NOT ARG_BESIDE)
    message(FATAL_ERROR "gpu_check_step(${name}): give a TITLE (its own section) or BESIDE (another step's)")
  endif()
  if(NOT ARG_PLAN)  # --plan before the words after a "--" (a program a script runs), else last
    set(ARG_PLAN ${ARG_COMMAND})
    list(FIND ARG_PLAN "--" separator)
    if(separator EQUAL -1)
      list(APPEND ARG_PLAN --plan)
    else()
      list(INSERT ARG_PLAN ${separator} --plan)
    endif()
  endif()
  foreach(field command plan targets outputs)  # each ARG_<FIELD> as a JSON list, in <field>
    string(TOUPPER ${field} upper)
    _fa_json_list(${field} ${ARG_${upper}})
  endforeach()
  foreach(field title beside)  # and as a JSON string
    string(TOUPPER ${field} upper)
    _fa_json_string(${field} "${ARG_${upper}}")
  endforeach()
  string(CONCAT step ",\n    {\"name\": \"${name}\", \"budget\": ${ARG_BUDGET}, \"title\": ${title}, "
         "\"beside\": ${beside},\n     \"targets\": ${targets}, \"outputs\": ${outputs},\n"
         "     \"command\": ${command},\n     \"plan\": ${plan}}")
  set_property(GLOBAL APPEND_STRING PROPERTY FA_GPU_CHECK_STEPS "${step}")
  set_property(GLOBAL APPEND PROPERTY FA_GPU_CHECK_TARGETS ${ARG_TARGETS})
endfunction()

# add_gpu_benchmark(<chapter target> <program> SOURCES <sources...> [LIBRARIES <libs...>]
#                   STEP <step name> BUDGET <seconds> TITLE <heading> ARGS <arguments...>)
#   A GPU benchmark (CUDA events; common/gpu_bench.h) built where nvcc was found, attached to the
#   chapter's target, and run by the GPU check as step STEP with ARGS.
function(add_gpu_benchmark chapter program)
  cmake_parse_arguments(ARG "" "STEP;BUDGET;TITLE" "SOURCES;LIBRARIES;ARGS" ${ARGN})
  if(NOT FA_HAVE_CUDA)
    return()
  endif()
  if(TARGET fa_gpu_bench)
    add_executable(${program} ${ARG_SOURCES})
    target_link_libraries(${program} PRIVATE fa_gpu_bench ${ARG_LIBRARIES} CLI11::CLI11 fa_warnings)
    add_dependencies(${chapter} ${program})
    set_property(GLOBAL APPEND PROPERTY FA_GPU_BENCHMARKS "${chapter}:${program}")  # tests/CMakeLists.txt
    set(targets TARGETS ${program})
    set(file $<TARGET_FILE:${program}>)
  else()  # not built (common/CMakeLists.txt says why): the check reports the step as such
    set(targets)
    set(file ${CMAKE_RUNTIME_OUTPUT_DIRECTORY}/${program})
  endif()
  gpu_check_step(${ARG_STEP} BUDGET ${ARG_BUDGET} TITLE "${ARG_TITLE}" ${targets} COMMAND ${file} ${ARG_ARGS})
endfunction()

# _fa_json_string(<out var> <text>): the text as a JSON string.
function(_fa_json_string out text)
  string(REPLACE "\\" "\\\\" text "${text}")
  string(REPLACE "\"" "\\\"" text "${text}")
  set(${out} "\"${text}\"" PARENT_SCOPE)
endfunction()

# _fa_json_list(<out var> <items...>): the items as a JSON list of strings.
function(_fa_json_list out)
  set(items)
  foreach(item IN LISTS ARGN)
    _fa_json_string(quoted "${item}")
    list(APPEND items "${quoted}")
  endforeach()
  list(JOIN items ", " joined)
  set(${out} "[${joined}]" PARENT_SCOPE)
endfunction()

# _fa_json_programs(<out var> <targets...>): {"target": "its file", ...} (resolved when generated).
function(_fa_json_programs out)
  set(items)
  foreach(target IN LISTS ARGN)
    list(APPEND items "\"${target}\": \"$<TARGET_FILE:${target}>\"")
  endforeach()
  list(JOIN items ",\n    " joined)
  set(${out} "{\n    ${joined}}" PARENT_SCOPE)
endfunction()

# Writes build/<preset>/gpu_check.json and adds the target gpu_check. Called once, when the top
# directory's configure ends (cmake_language(DEFER) in CMakeLists.txt), so that every chapter has
# declared its tests and steps.
function(gpu_check_write_manifest)
  get_property(gpu_tests GLOBAL PROPERTY FA_GPU_TESTS)
  get_property(sanitizer_tests GLOBAL PROPERTY FA_GPU_SANITIZER_TESTS)
  get_property(programs GLOBAL PROPERTY FA_TOUR_PROGRAMS)
  get_property(step_targets GLOBAL PROPERTY FA_GPU_CHECK_TARGETS)
  get_property(steps GLOBAL PROPERTY FA_GPU_CHECK_STEPS)
  set(targets ${gpu_tests} ${programs} ${step_targets})
  list(REMOVE_DUPLICATES targets)

  if(FA_HAVE_CUDA)
    set(gpu_path true)
  else()
    set(gpu_path false)
  endif()
  if(FA_GPU_TESTS)  # (off: a build without a GPU leaves them out, cmake/Options.cmake; the check's build has them)
    set(gpu_tests_built true)
  else()
    set(gpu_tests_built false)
  endif()
  string(REGEX REPLACE "^,\n" "" steps "${steps}")  # the first step's separator
  _fa_json_list(gpu_tests_json ${gpu_tests})
  _fa_json_list(sanitizer_json ${sanitizer_tests})
  _fa_json_list(programs_json ${programs})
  _fa_json_programs(files ${targets})
  _fa_json_string(filter "${FA_SANITIZER_FILTER}")
  _fa_json_string(source "${PROJECT_SOURCE_DIR}")
  _fa_json_string(binary "${PROJECT_BINARY_DIR}")
  _fa_json_string(architectures "${CMAKE_CUDA_ARCHITECTURES}")
  file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/gpu_check.json CONTENT
"{
  \"what\": \"what scripts/gpu_check.sh builds and runs: written by cmake/GpuCheck.cmake\",
  \"gpu_path\": ${gpu_path},
  \"cuda_architectures\": ${architectures},
  \"source_dir\": ${source},
  \"build_dir\": ${binary},
  \"build_target\": \"gpu_check\",
  \"files\": ${files},
  \"gpu_tests_built\": ${gpu_tests_built},
  \"gpu_tests\": ${gpu_tests_json},
  \"sanitizer_filter\": ${filter},
  \"sanitizer_tests\": ${sanitizer_json},
  \"programs\": ${programs_json},
  \"figures\": \"make_figures\",
  \"steps\": [
${steps}
  ]
}
")
  add_custom_target(gpu_check)
  add_dependencies(gpu_check ${targets})
endfunction()
