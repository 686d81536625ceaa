# The tour (cmake --build --preset tour): every chapter's demo in order, then the table of their
# checks. A demo that fails does not stop the tour: every demo runs, the table shows every chapter's
# line, and only then does the tour fail, naming the demos that did.
#
#   cmake -DRUNS_FILE=<file> -DSUMMARY=<file> -DSUMMARY_PROGRAM=<tour_summary> -DEXPECT=<n> -P tour.cmake
#
# RUNS_FILE holds one run a line, a program and its arguments joined by '|'. A run with --summary
# whose program writes no line to the summary file (it stopped with an error before its verdict)
# gets a FAIL line there, so that the table still has a row for it. EXPECT: the number of checks.
# Open MPI refuses to start as root (in a container, say) unless told that it may: chapter 09's run.
set(ENV{OMPI_ALLOW_RUN_AS_ROOT} 1)
set(ENV{OMPI_ALLOW_RUN_AS_ROOT_CONFIRM} 1)
file(REMOVE ${SUMMARY})
file(TOUCH ${SUMMARY})
file(STRINGS ${RUNS_FILE} runs)
set(failed)
foreach(run IN LISTS runs)
  string(REPLACE "|" ";" command "${run}")
  list(GET command 0 program)
  get_filename_component(name ${program} NAME)
  file(STRINGS ${SUMMARY} before)
  list(LENGTH before lines_before)
  execute_process(COMMAND ${CMAKE_COMMAND} -E echo "")
  # Open MPI gives rank 0 a terminal of its own whatever mpirun's output is, so a program under
  # mpirun would colour its lines into a pipe or a log: the tour runs it without colour.
  set(colour "$ENV{NO_COLOR}")
  if(run MATCHES "mpirun|mpiexec")
    set(ENV{NO_COLOR} 1)
  endif()
  execute_process(COMMAND ${command} RESULT_VARIABLE status)
  set(ENV{NO_COLOR} "${colour}")
  if(NOT status EQUAL 0)
    list(SUBLIST command 1 -1 arguments)
    list(REMOVE_ITEM arguments --summary ${SUMMARY})
    list(JOIN arguments " " arguments)
    string(STRIP "${name} ${arguments}" shown)
    list(APPEND failed "${shown} (exit status ${status})")
  endif()
  # A run with --summary that added no line stopped before its verdict: record it as a failed check.
  if(run MATCHES "--summary")
    file(STRINGS ${SUMMARY} after)
    list(LENGTH after lines_after)
    if(lines_after EQUAL lines_before)
      string(REGEX MATCH "ch([0-9][0-9])_[a-z]" chapter_match "${run}")  # (the program may follow mpirun)
      file(APPEND ${SUMMARY} "${CMAKE_MATCH_1}\t${name}\tno verdict: it stopped with an error (status ${status})\t-\tFAIL\n")
    endif()
  endif()
endforeach()
execute_process(COMMAND ${SUMMARY_PROGRAM} ${SUMMARY} --expect ${EXPECT} RESULT_VARIABLE table_status)
if(failed OR NOT table_status EQUAL 0)
  message(NOTICE "")
  foreach(run IN LISTS failed)
    message(NOTICE "failed: ${run}")
  endforeach()
  list(LENGTH failed count)
  message(FATAL_ERROR "The tour ran every demo; ${count} of them failed (listed above).")
endif()
