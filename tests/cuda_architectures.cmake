# The check behind the test sm75_leaves_chapter_06_on_the_cpu (tests/CMakeLists.txt), run as
#   cmake -DSOURCE_DIR=<project> -DWORK_DIR=<empty folder> -DGENERATOR=Ninja -DCXX=<compiler>
#         -DCUDA=<nvcc> -P tests/cuda_architectures.cmake
#
# Built for a GPU older than sm_80 (a T4 is sm_75; the list here also holds 80-real, so that a
# list counts by its oldest member), the GPU path leaves out chapter 06's kernel and keeps the
# others (cmake/Options.cmake, FA_CUDA_SM80):
#   1. the configure says "chapter 06 on the GPU: OFF";
#   2. no nvcc compilation of chapter 06's kernel and no ch06_gpu_bench nor ch10_gpu_bench (which
#      times chapter 06's kernel beside chapter 10's) are generated, while
#      chapter 05's and chapter 08's kernels are compiled for the GPU, and sass-report-05 reports
#      sm_75 and sm_80.
cmake_minimum_required(VERSION 3.25)  # (IN_LIST)
foreach(variable SOURCE_DIR WORK_DIR GENERATOR CXX CUDA)
  if(NOT DEFINED ${variable})
    message(FATAL_ERROR "cuda_architectures.cmake: -D${variable}=... is missing")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK_DIR}")

execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR} -G ${GENERATOR}
                        -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_CUDA_COMPILER=${CUDA} "-DCMAKE_CUDA_ARCHITECTURES=80-real;75"
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "the configure with CMAKE_CUDA_ARCHITECTURES=80-real;75 failed (${status}):\n${out}${err}")
endif()
if(NOT out MATCHES "GPU architectures: 80-real;75; chapter 06 on the GPU: OFF")
  message(FATAL_ERROR "the configure for 80-real;75 did not say \"chapter 06 on the GPU: OFF\":\n${out}")
endif()

file(GLOB_RECURSE ninja_files ${WORK_DIR}/*.ninja)
set(found "")
foreach(file IN LISTS ninja_files)
  file(STRINGS ${file} lines REGEX "tensor_cores_gpu\\.cu\\.o|ch06_gpu_bench|ch10_gpu_bench|flash_attention_2_gpu\\.cu\\.o|decoding_gpu\\.cu\\.o|sass_report\\.py --chapter 05")
  foreach(line IN LISTS lines)
    foreach(name tensor_cores_gpu ch06_gpu_bench ch10_gpu_bench flash_attention_2_gpu decoding_gpu)
      if(line MATCHES "${name}")
        list(APPEND found ${name})
      endif()
    endforeach()
    if(line MATCHES "sass_report\\.py --chapter 05 --arch sm_80 sm_75")
      list(APPEND found sass_report_05)
    endif()
  endforeach()
endforeach()
foreach(absent tensor_cores_gpu ch06_gpu_bench ch10_gpu_bench)
  if(absent IN_LIST found)
    message(FATAL_ERROR "the build for 80-real;75 still compiles chapter 06 for the GPU (${absent})")
  endif()
endforeach()
foreach(present flash_attention_2_gpu decoding_gpu sass_report_05)
  if(NOT present IN_LIST found)
    message(FATAL_ERROR "the build for 80-real;75 has no ${present}: chapters 05 and 08 must stay on the GPU, and "
                        "sass-report-05 must report the build's sm_80 and sm_75")
  endif()
endforeach()
message(STATUS "CMAKE_CUDA_ARCHITECTURES=80-real;75: chapter 06 on the CPU only; chapters 05 and 08 on the GPU")
file(REMOVE_RECURSE "${WORK_DIR}")
