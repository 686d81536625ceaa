#!/usr/bin/env bash
# Is this machine ready for the workshop? One command for a teacher (or an attendee) to run on each
# laptop before the session; its last line is READY or NOT READY, and the exit status is 0 or 1.
#
#   1. tools      cmake >= 3.25, ninja and a C++ compiler on the PATH; nvcc and a GPU are reported
#                 but not required (without them every kernel runs on the CPU through common/simt)
#   2. configure  the default preset: finds fmt, CLI11, Catch2, Google Benchmark and Boost.Context;
#                 and Open MPI (openmpi-bin, libopenmpi-dev), reported but not required (without it
#                 chapter 09's program and its mpirun tests are left out)
#   3. build      everything (a few minutes on a 2-core laptop, the first time)
#   4. tests      every test, counted as they finish (the gpu-labelled ones are built where there
#                 is a GPU: FA_GPU_TESTS)
#   5. tour       every chapter's demo and the summary table (docs/workshop.md)
#
# Usage: scripts/check_setup.sh [build folder]      (from anywhere; default: build/default, the
#                                                    folder the presets and the docs use)
# The logs of each step go to <build folder>/check-setup/.
set -uo pipefail
cd "$(dirname "$0")/.."

build=${1:-build/default}
logs="$build/check-setup"
jobs=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)

not_ready() {
  echo
  echo "NOT READY: $1"
  exit 1
}

# step <number> <name>: prints "[n/4] name ..." without a newline; the caller finishes the line.
step() { printf '[%s/4] %-10s ' "$1" "$2"; }

# The platform, and the one command that installs the prerequisites on it (README.md, "Prerequisites").
platform="$(uname -s) $(uname -m)"
fix="scripts/install_prerequisites.sh"
if [ -r /etc/os-release ]; then
  platform="$(. /etc/os-release && echo "${PRETTY_NAME:-$ID}") ($(uname -m))"
fi
if grep -qi microsoft /proc/version 2>/dev/null; then
  platform="$platform under WSL2"
fi
case "$(uname -s)" in
  Linux) command -v apt-get >/dev/null ||
    fix="install the packages of README.md's apt line with this distribution's package manager" ;;
  Darwin) fix="xcode-select --install; brew install cmake ninja fmt cli11 catch2 google-benchmark boost highway open-mpi (README.md, \"Prerequisites\")" ;;
  *) fix="this platform is not supported: use WSL2 with Ubuntu 24.04 or the dev container (README.md)" ;;
esac

echo "== Is this machine ready for the workshop? (build folder: $build)"
echo "   platform: $platform"

# 1. Tools.
for tool in cmake ninja; do
  command -v "$tool" >/dev/null ||
    not_ready "$tool is not installed. Install the prerequisites: $fix"
done
cmake_version=$(cmake --version | head -1 | awk '{print $3}')
if [ "$(printf '%s\n3.25.0\n' "$cmake_version" | sort -V | head -1)" != "3.25.0" ]; then
  not_ready "cmake $cmake_version is too old: the presets need 3.25 or newer (python3 -m pip install cmake)."
fi
cxx=${CXX:-$(command -v c++ || command -v g++ || command -v clang++ || true)}
[ -n "$cxx" ] || not_ready "no C++ compiler found (g++ 11 or newer): $fix"
echo "   cmake $cmake_version, ninja $(ninja --version), $("$cxx" --version | head -1)"
gpu=$(nvidia-smi -L 2>/dev/null | head -1)
# Which chapters run on this GPU, from its compute capability (docs/workshop.md, "On Colab or Kaggle"):
# chapter 06 needs 8.0 (mma.sync m16n8k16 on bf16 and fp16, cp.async), chapter 10 a Hopper, 9.0.
chapters_on_gpu() {
  local cc
  cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
  case "$cc" in
    '' | *[!0-9]*) echo "its compute capability unknown" ;;
    90) echo "compute capability 9.0: chapters 04 to 10 run on it" ;;
    *)
      if [ "$cc" -ge 80 ]; then
        echo "compute capability ${cc%?}.${cc: -1}: chapters 04 to 09 run on it; 10 (a Hopper's, 9.0) on the CPU"
      elif [ "$cc" -ge 75 ]; then
        echo "compute capability ${cc%?}.${cc: -1}: chapters 04, 05, 07, 08 and 09 run on it, in tiles that" \
          "fit its 64 KiB of shared memory per block (not chapter 08's 16-bit cache at head dim 128);" \
          "06 (needs 8.0) and 10 (9.0) on the CPU"
      else
        echo "compute capability ${cc%?}.${cc: -1}: older than 7.5, CUDA 13's oldest target: every chapter on the CPU"
      fi
      ;;
  esac
}
if [ -n "$gpu" ]; then
  echo "   GPU: $gpu; $(chapters_on_gpu)"
else
  echo "   GPU: none (fine: every kernel also runs on the CPU; the GPU tests are left out)"
fi

mkdir -p "$logs" || not_ready "cannot create $logs"

# 2. Configure.
step 1 configure
start=$SECONDS
if ! cmake --preset default -B "$build" >"$logs/configure.log" 2>&1; then
  echo "FAILED ($logs/configure.log)"
  grep -A2 -E "was not found|Install it with|CMake Error" "$logs/configure.log" | head -20
  not_ready "the configure failed: install what the lines above name ($fix), then run this again."
fi
echo "ok ($((SECONDS - start)) s)"
if grep -q "GPU path (nvcc): ON" "$logs/configure.log"; then
  echo "           the GPU path is on (nvcc was found): the kernels are compiled for the GPU too"
else
  echo "           the GPU path is off (no nvcc): the kernels run on the CPU only, enough for the workshop"
fi
if grep -q "MPI was not found" "$logs/configure.log"; then
  echo "           no MPI: chapter 09's ring across processes is left out (sudo apt-get install openmpi-bin libopenmpi-dev)"
else
  echo "           MPI was found: chapter 09's ring runs as several processes (mpirun)"
fi

# 3. Build.
step 2 build
start=$SECONDS
if ! cmake --build "$build" -j "$jobs" >"$logs/build.log" 2>&1; then
  echo "FAILED ($logs/build.log)"
  grep -E "error|Error" "$logs/build.log" | head -20
  not_ready "the build failed (the first errors are above)."
fi
echo "ok ($((SECONDS - start)) s)"

# 4. Tests. A count of finished tests while they run (in place on a terminal; a line every 10
# tests, and at the end, otherwise), so that a long step does not look like a hang.
step 3 tests
start=$SECONDS
total=$(ctest --test-dir "$build" -N 2>/dev/null | grep -oE 'Total Tests: [0-9]+' | grep -oE '[0-9]+' || true)
count_progress() {
  local finished=0 failed=0
  while IFS= read -r line; do
    if [[ $line =~ Test\ +#[0-9]+:.*(Passed|Failed|\*\*\*|Not\ Run|Skipped) ]]; then
      finished=$((finished + 1))
      [[ $line =~ (\*\*\*Failed|\*\*\*Exception|\*\*\*Timeout|Not\ Run) ]] && failed=$((failed + 1))
      if [ -t 1 ]; then
        printf '\r[3/4] tests      %s of %s finished, %s failed ' "$finished" "${total:-?}" "$failed"
      elif [ $((finished % 10)) -eq 0 ] || [ "$finished" = "${total:-}" ]; then
        printf '\n                 %s of %s finished, %s failed' "$finished" "${total:-?}" "$failed"
      fi
    fi
  done
  if [ -t 1 ]; then printf '\r[3/4] tests      '; else printf '\n[3/4] tests      '; fi
}
ctest --test-dir "$build" -j "$jobs" --output-on-failure 2>&1 | tee "$logs/tests.log" | count_progress
tests_status=${PIPESTATUS[0]}
total=$(grep -oE 'out of [0-9]+' "$logs/tests.log" | tail -1 | grep -oE '[0-9]+')
failed=$(grep -oE '[0-9]+ tests failed' "$logs/tests.log" | tail -1 | grep -oE '^[0-9]+')
skipped=$(grep -cE '\(Skipped\)' "$logs/tests.log")
if [ "$tests_status" -ne 0 ] || [ -z "$total" ] || [ "${total:-0}" -eq 0 ]; then
  echo "FAILED ($logs/tests.log): ${failed:-?} of ${total:-?} failed"
  sed -n '/The following tests FAILED:/,/Errors while running/p' "$logs/tests.log" | grep -v "Errors while"
  not_ready "tests failed (listed above); a fresh checkout should pass them all."
fi
echo "ok: $((total - skipped)) passed, $skipped skipped, of $total ($((SECONDS - start)) s)                "

# 5. The tour.
step 4 tour
start=$SECONDS
if ! cmake --build "$build" --target tour >"$logs/tour.log" 2>&1; then
  echo "FAILED ($logs/tour.log)"
  sed -n '/The tour: every chapter/,$p' "$logs/tour.log" | tail -12
  not_ready "the tour failed (see above)."
fi
echo "ok: $(grep -oE '[0-9]+ of [0-9]+ checks passed' "$logs/tour.log") ($((SECONDS - start)) s)"

echo
echo "READY: every chapter builds, every test passes and the tour runs on this machine."
