# The check behind the test cuda_switch_leaves_out_the_gpu_path (tests/CMakeLists.txt), run as
#   cmake -DSOURCE_DIR=<project> -DWORK_DIR=<empty folder> -DGENERATOR=Ninja -DCXX=<compiler> -P tests/cuda_switch.cmake
#
# -DFA_CUDA=OFF (cmake/Options.cmake) must build the CPU path only, even where nvcc is installed:
#   1. a configure with it says "GPU path (nvcc): OFF (FA_CUDA=OFF)", enables no CUDA language, and
#      generates no CUDA compilation and no GPU benchmark;
#   2. the cuda preset's FA_REQUIRE_CUDA with it stops the configure and says why.
foreach(variable SOURCE_DIR WORK_DIR GENERATOR CXX)
  if(NOT DEFINED ${variable})
    message(FATAL_ERROR "cuda_switch.cmake: -D${variable}=... is missing")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK_DIR}")

# 1. FA_CUDA=OFF: the CPU path alone.
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/off -G ${GENERATOR}
                        -DCMAKE_CXX_COMPILER=${CXX} -DFA_CUDA=OFF
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "the configure with -DFA_CUDA=OFF failed (${status}):\n${out}${err}")
endif()
if(NOT out MATCHES "GPU path \\(nvcc\\): OFF \\(FA_CUDA=OFF\\)")
  message(FATAL_ERROR "the configure with -DFA_CUDA=OFF did not say \"GPU path (nvcc): OFF (FA_CUDA=OFF)\":\n${out}")
endif()
file(READ ${WORK_DIR}/off/CMakeCache.txt cache)
if(cache MATCHES "CMAKE_CUDA_COMPILER:")
  message(FATAL_ERROR "the configure with -DFA_CUDA=OFF looked for nvcc (CMAKE_CUDA_COMPILER is in the cache)")
endif()
file(GLOB_RECURSE ninja_files ${WORK_DIR}/off/*.ninja)
foreach(file IN LISTS ninja_files)
  file(STRINGS ${file} cuda_lines REGEX "CUDA_COMPILER|\\.cu\\.o|_gpu_bench")
  if(cuda_lines)
    list(GET cuda_lines 0 first)
    message(FATAL_ERROR "-DFA_CUDA=OFF still compiles for the GPU (${file}): ${first}")
  endif()
endforeach()
message(STATUS "-DFA_CUDA=OFF: no CUDA language, no .cu compilation, no GPU benchmark")

# 2. The cuda preset's requirement with FA_CUDA=OFF: refused, with the reason.
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/required -G ${GENERATOR}
                        -DCMAKE_CXX_COMPILER=${CXX} -DFA_CUDA=OFF -DFA_REQUIRE_CUDA=ON
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE status)
if(status EQUAL 0 OR NOT err MATCHES "FA_CUDA=OFF leaves out")
  message(FATAL_ERROR "-DFA_REQUIRE_CUDA=ON -DFA_CUDA=OFF was not refused with its reason (${status}):\n${err}")
endif()
message(STATUS "-DFA_REQUIRE_CUDA=ON with -DFA_CUDA=OFF is refused")
file(REMOVE_RECURSE "${WORK_DIR}")
