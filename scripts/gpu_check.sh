#!/usr/bin/env bash
# The GPU check: everything that needs an NVIDIA GPU, in one run of at most 8 minutes on one H200,
# build included; it writes docs/benchmarks.md. scripts/gpu_check.py does the work and says how
# (python3 scripts/gpu_check.py --help); docs/benchmarks.md says what to copy to a bare GPU machine.
#
#   scripts/gpu_check.sh              on a machine with a GPU (files that come back go to $OUT)
#   scripts/gpu_check.sh --dry-run    wherever nvcc is, no GPU needed: build, plan, check
# Exit status: 0 every step measured; 3 some step skipped or partial (each named, with why); 1 a
# failure; 2 a bad flag.
python=$(command -v python3 || command -v python) || {
  echo "gpu_check: python3 is not installed (the check is scripts/gpu_check.py)" >&2
  exit 1
}
exec "$python" "$(dirname "$0")/gpu_check.py" "$@"
