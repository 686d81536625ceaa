# Runs one program and checks what a reader would see: its exit status and a pattern in its output.
#
#   cmake -DCOMMAND="prog|--flag|value" -DSTATUS=2 -DPATTERN="regex" [-DABSENT="regex"]
#         [-DSECONDS=10] [-DNO_FILES="glob"] -P expect_run.cmake
#
# COMMAND is the program and its arguments joined by '|' (no argument may be empty or hold '|';
# give an empty value as --flag=). Fails unless the exit status is STATUS, the standard output and
# error together match PATTERN, do not match ABSENT (when given), the program ends within SECONDS
# (default 60: a refusal that comes only after the work is a failure), and, after it, no file
# matches NO_FILES (when given: an output that must not have been written, a temporary file that
# must have been removed).
if(NOT DEFINED SECONDS)
  set(SECONDS 60)
endif()
string(REPLACE "|" ";" COMMAND "${COMMAND}")
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err
                TIMEOUT ${SECONDS})
set(all "${out}${err}")
if(NOT "${status}" STREQUAL "${STATUS}")
  message(FATAL_ERROR "exit status ${status}, expected ${STATUS}\n--- output ---\n${all}")
endif()
if(NOT all MATCHES "${PATTERN}")
  message(FATAL_ERROR "the output does not match '${PATTERN}'\n--- output ---\n${all}")
endif()
if(DEFINED ABSENT AND all MATCHES "${ABSENT}")
  message(FATAL_ERROR "the output matches '${ABSENT}', which it must not\n--- output ---\n${all}")
endif()
if(DEFINED NO_FILES)
  file(GLOB left ${NO_FILES})
  if(left)
    message(FATAL_ERROR "these files exist, which must not: ${left}\n--- output ---\n${all}")
  endif()
endif()
message(STATUS "ok: status ${status}, output matches '${PATTERN}'")
