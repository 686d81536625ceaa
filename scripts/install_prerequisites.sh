#!/usr/bin/env bash
# Installs the book's prerequisites: the one list of packages that README.md ("Prerequisites")
# shows, that CI installs (.ci/run) and that the dev container is built from
# (.devcontainer/Dockerfile), so that the three never drift apart (the test
# prerequisites_are_one_list checks README.md's apt line against this list).
#
# Usage: scripts/install_prerequisites.sh            (Debian 12+, Ubuntu 24.04+, WSL2's Ubuntu)
#        scripts/install_prerequisites.sh --print    (print the install command, run nothing)
# Exit status: 0 installed (or printed); 1 the package manager failed; 2 a platform this script
# does not know (it says which platforms it knows).
set -euo pipefail

# Debian and Ubuntu (apt): cmake and ninja, the compiler, fmt, CLI11, Catch2, Google Benchmark,
# Boost.Context (simt's fibers), Highway (simt's vector exp), libdw (source lines in simt's reports),
# pkg-config (which finds libdw), and Open MPI (chapter 09).
apt_packages=(cmake ninja-build g++ libfmt-dev libcli11-dev catch2 libbenchmark-dev libboost-context-dev libhwy-dev
  libdw-dev pkg-config openmpi-bin libopenmpi-dev)

if [ "$(uname -s)" != Linux ] || ! command -v apt-get >/dev/null; then
  echo "error: $(uname -s) without apt-get: this script installs on Debian 12+, Ubuntu 24.04+ and WSL2's Ubuntu; README.md, \"Prerequisites\", says what else there is" >&2
  exit 2
fi
sudo=()
if [ "$(id -u)" -ne 0 ]; then sudo=(sudo); fi
command=("${sudo[@]}" apt-get install -y --no-install-recommends "${apt_packages[@]}")
if [ "${1:-}" = --print ]; then
  echo "${command[*]}"
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update
"${command[@]}"
