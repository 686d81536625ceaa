# The check behind the tests <GPU test>_sanitizer_subset (add_chapter_test(... GPU SANITIZER),
# cmake/Chapters.cmake), run as
#   cmake -DTEST_BINARY=<GPU test program> -DFILTER=[sanitizer] -P tests/sanitizer_subset.cmake
#
# scripts/gpu_check.sh runs compute-sanitizer on the test cases of each SANITIZER GPU test that
# FILTER selects (FA_SANITIZER_FILTER of cmake/GpuCheck.cmake, the Catch2 tag "[sanitizer]"), with
# --warn NoTests so that a filter matching nothing fails instead of passing. Listing test cases needs
# no device (tests/main.cpp), so this runs on every machine, GPU or not:
#   1. lists the test cases FILTER selects (Catch2 v2: --list-test-names-only; v3, which refuses
#      that flag: --list-tests --verbosity quiet) and fails unless there is at least one;
#   2. runs a filter that matches nothing with --warn NoTests (on a machine without a GPU the
#      program exits 77 first, which is no pass either) and fails unless that exits non-zero: the
#      guarantee the script relies on.
foreach(variable TEST_BINARY FILTER)
  if(NOT DEFINED ${variable})
    message(FATAL_ERROR "sanitizer_subset.cmake: -D${variable}=... is missing")
  endif()
endforeach()

if(NOT EXISTS "${TEST_BINARY}")
  message(FATAL_ERROR "${TEST_BINARY} is not built; build the chapter's target first")
endif()

# 1. The test cases it selects, one name per line.
execute_process(COMMAND "${TEST_BINARY}" --list-test-names-only "${FILTER}"
                OUTPUT_VARIABLE listed ERROR_VARIABLE errors RESULT_VARIABLE status)
if("${listed}${errors}" MATCHES "Unrecognised token")  # Catch2 v3
  execute_process(COMMAND "${TEST_BINARY}" --list-tests --verbosity quiet "${FILTER}"
                  OUTPUT_VARIABLE listed ERROR_VARIABLE errors RESULT_VARIABLE status)
endif()
string(REGEX MATCHALL "[^\n]*[^ \n][^\n]*" names "${listed}")
list(LENGTH names count)
get_filename_component(program "${TEST_BINARY}" NAME)
if(count EQUAL 0)
  message(FATAL_ERROR "${program}: no test case matches \"${FILTER}\", so compute-sanitizer would run "
                      "nothing for this chapter in scripts/gpu_check.sh. Tag a small subset that "
                      "launches every kernel and reaches every tail case with [sanitizer]. "
                      "(listing exited ${status}; ${errors})")
endif()
message(STATUS "${program}: ${count} test case(s) match \"${FILTER}\":")
foreach(name IN LISTS names)
  message(STATUS "  ${name}")
endforeach()

# 2. An empty filter must fail under --warn NoTests.
execute_process(COMMAND "${TEST_BINARY}" "[no_test_case_has_this_tag]" --warn NoTests
                OUTPUT_QUIET ERROR_QUIET RESULT_VARIABLE empty_status)
if(empty_status EQUAL 0)
  message(FATAL_ERROR "${program}: a filter that matches nothing exits 0 even with --warn NoTests; "
                      "scripts/gpu_check.sh relies on it failing")
endif()
message(STATUS "${program}: a filter that matches nothing fails under --warn NoTests (exit ${empty_status})")
