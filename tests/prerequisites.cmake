# The test prerequisites_are_one_list: README.md's apt line ("Prerequisites") names exactly the
# packages scripts/install_prerequisites.sh installs (the script CI and the dev container run), in
# the same order, so that a reader who copies the line gets what CI tested. Run as
#   cmake -DSOURCE_DIR=<repository> -P tests/prerequisites.cmake
file(READ "${SOURCE_DIR}/README.md" readme)
string(REGEX MATCH "sudo apt-get install -y ([^\n`]*)" line "${readme}")
if(line STREQUAL "")
  message(FATAL_ERROR "README.md has no line \"sudo apt-get install -y ...\" under Prerequisites")
endif()
string(REGEX REPLACE " +" ";" readme_packages "${CMAKE_MATCH_1}")

execute_process(COMMAND bash "${SOURCE_DIR}/scripts/install_prerequisites.sh" --print
                OUTPUT_VARIABLE printed RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "scripts/install_prerequisites.sh --print exited ${status}")
endif()
string(REGEX REPLACE ".*--no-install-recommends +" "" printed "${printed}")
string(STRIP "${printed}" printed)
string(REGEX REPLACE " +" ";" script_packages "${printed}")

if(NOT readme_packages STREQUAL script_packages)
  message(FATAL_ERROR "README.md's apt line and scripts/install_prerequisites.sh disagree:\n"
                      "  README.md: ${readme_packages}\n  script:    ${script_packages}")
endif()
list(LENGTH script_packages count)
message(STATUS "README.md and scripts/install_prerequisites.sh name the same ${count} packages")
