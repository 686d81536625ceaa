# The check behind the tests <chapter test>_sanitizer_subset (tests/CMakeLists.txt), run as
#   cmake -DTEST_BINARY=<CPU test program> -DGPU_CHECK=scripts/gpu_check.sh -P tests/sanitizer_subset.cmake
#
# scripts/gpu_check.sh runs compute-sanitizer on the test cases of each chapter's GPU test that its
# filter selects (sanitizer_filter, the Catch2 tag "[sanitizer]"), with --warn NoTests so that a
# filter matching nothing fails instead of passing. This check runs on every machine, GPU or not,
# on the CPU build of the same test source (same test cases, same tags):
#   1. reads the filter from the script, so that the two cannot drift apart;
#   2. lists the test cases it selects (Catch2 v2: --list-test-names-only; v3, which refuses that
#      flag: --list-tests --verbosity quiet) and fails unless there is at least one;
#   3. runs a filter that matches nothing with --warn NoTests and fails unless that exits non-zero:
#      the guarantee the script relies on.
foreach(variable TEST_BINARY GPU_CHECK)
  if(NOT DEFINED ${variable})
    message(FATAL_ERROR "sanitizer_subset.cmake: -D${variable}=... is missing")
  endif()
endforeach()

if(NOT EXISTS "${TEST_BINARY}")
  message(FATAL_ERROR "${TEST_BINARY} is not built; build the chapter's target first")
endif()

# 1. The filter, from the line sanitizer_filter='...' of the script.
file(STRINGS "${GPU_CHECK}" filter_line REGEX "^sanitizer_filter='[^']+'")
if(NOT filter_line MATCHES "^sanitizer_filter='([^']+)'")
  message(FATAL_ERROR "${GPU_CHECK} has no line sanitizer_filter='...' (the Catch2 filter it gives "
                      "compute-sanitizer's test runs)")
endif()
set(filter "${CMAKE_MATCH_1}")

# 2. The test cases it selects, one name per line.
execute_process(COMMAND "${TEST_BINARY}" --list-test-names-only "${filter}"
                OUTPUT_VARIABLE listed ERROR_VARIABLE errors RESULT_VARIABLE status)
if("${listed}${errors}" MATCHES "Unrecognised token")  # Catch2 v3
  execute_process(COMMAND "${TEST_BINARY}" --list-tests --verbosity quiet "${filter}"
                  OUTPUT_VARIABLE listed ERROR_VARIABLE errors RESULT_VARIABLE status)
endif()
string(REGEX MATCHALL "[^\n]*[^ \n][^\n]*" names "${listed}")
list(LENGTH names count)
get_filename_component(program "${TEST_BINARY}" NAME)
if(count EQUAL 0)
  message(FATAL_ERROR "${program}: no test case matches \"${filter}\", so compute-sanitizer would run "
                      "nothing for this chapter in scripts/gpu_check.sh. Tag a small subset that "
                      "launches every kernel and reaches every tail case with [sanitizer]. "
                      "(listing exited ${status}; ${errors})")
endif()
message(STATUS "${program}: ${count} test case(s) match \"${filter}\":")
foreach(name IN LISTS names)
  message(STATUS "  ${name}")
endforeach()

# 3. An empty filter must fail under --warn NoTests.
execute_process(COMMAND "${TEST_BINARY}" "[no_test_case_has_this_tag]" --warn NoTests
                OUTPUT_QUIET ERROR_QUIET RESULT_VARIABLE empty_status)
if(empty_status EQUAL 0)
  message(FATAL_ERROR "${program}: a filter that matches nothing exits 0 even with --warn NoTests; "
                      "scripts/gpu_check.sh relies on it failing")
endif()
message(STATUS "${program}: a filter that matches nothing fails under --warn NoTests (exit ${empty_status})")
