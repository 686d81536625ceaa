# Keeps a doc's quotes of a program's output true: runs the program and checks that every piece of
# its output that matches REGEX stands in DOC word for word (a file and line that the doc quotes,
# for instance, moves with the code).
#
#   cmake -DCOMMAND="prog|--flag|value" -DDOC=docs/page.md -DREGEX="regex" -P doc_quotes.cmake
#
# COMMAND is the program and its arguments joined by '|'. Fails when the output has no match (the
# check would check nothing) or when a match is missing from DOC.
string(REPLACE "|" ";" COMMAND "${COMMAND}")
execute_process(COMMAND ${COMMAND} OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 300)
string(REGEX MATCHALL "${REGEX}" quotes "${out}${err}")
if(NOT quotes)
  message(FATAL_ERROR "no output matches '${REGEX}'\n--- output ---\n${out}${err}")
endif()
file(READ "${DOC}" doc)
foreach(quote IN LISTS quotes)
  string(FIND "${doc}" "${quote}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${DOC} does not quote what the program now prints: '${quote}'")
  endif()
  message(STATUS "quoted: ${quote}")
endforeach()
