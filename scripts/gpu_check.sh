#!/usr/bin/env bash
# The GPU check: everything that needs an NVIDIA GPU, in one run (under 8 minutes on one H200).
#
#   1. configure and build with the cuda preset (for the local GPU)
#   2. run every test, the gpu-labelled ones included
#   3. compute-sanitizer memcheck and racecheck on the chapter 04 and 05 GPU tests (if installed)
#   4. benchmark naive attention (ch04) against FlashAttention-2 (ch05): CUDA events, median of 20
#   5. DRAM bytes per kernel from Nsight Compute (if ncu is installed), beside the traffic model
#   6. torch.nn.functional.scaled_dot_product_attention on the same shapes (if torch is installed)
#   7. write docs/benchmarks.md, redraw docs/figures/hbm-traffic.svg from it, print the table last
#
# Usage: scripts/gpu_check.sh            (from the repository root)
# Libraries not installed system-wide can be found through CMAKE_PREFIX_PATH (CMake reads it from
# the environment). Logs go to $OUT when it is set, else to build/gpu-check-logs/.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

logs=${OUT:-build/gpu-check-logs}
mkdir -p "$logs"
report=docs/benchmarks.md
summary=()
note() { summary+=("$1"); echo "== $1"; }

# 1. Build.
if ! cmake --preset cuda >"$logs/configure.log" 2>&1; then
  tail -30 "$logs/configure.log"; echo "configure failed"; exit 1
fi
if ! cmake --build --preset cuda -j "$(nproc)" >"$logs/build.log" 2>&1; then
  grep -E "error|Error" "$logs/build.log" | head -30; echo "build failed"; exit 1
fi
bin=build/cuda/bin
note "build: ok ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -1))"

# 2. Every test. The CPU-path tests run too: they are the same suite as CI's.
if ctest --preset cuda -j 8 >"$logs/ctest.log" 2>&1; then
  note "tests: $(grep -E 'tests passed' "$logs/ctest.log")"
else
  note "tests: FAILED: $(grep -E 'tests passed|tests failed' "$logs/ctest.log")"
  grep -E "Failed|\*\*\*" "$logs/ctest.log" | head -20
fi
grep -E "gpu_test" "$logs/ctest.log" | sed 's/^/   /'

# 3. compute-sanitizer on the GPU tests of chapters 04 and 05: the first shape list only (every
# kernel and tail case, minutes less than the whole suite under the tool).
if command -v compute-sanitizer >/dev/null; then
  for tool in memcheck racecheck; do
    for t in 04_naive_attention_gpu_test 05_flash_attention_2_gpu_test; do
      filter="*every shape of the list"
      if timeout 150 compute-sanitizer --tool "$tool" --error-exitcode 1 "$bin/$t" "$filter" \
          >"$logs/$tool-$t.log" 2>&1; then
        note "compute-sanitizer $tool $t: clean ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$logs/$tool-$t.log" | tail -1))"
      else
        note "compute-sanitizer $tool $t: FAILED or timed out, see $tool-$t.log"
        grep -m5 -E "=========" "$logs/$tool-$t.log"
      fi
    done
  done
else
  note "compute-sanitizer: not installed, skipped"
fi

# 4. Timings.
"$bin/ch05_gpu_bench" --batch 4 --heads 16 --seq 1024 4096 8192 --head-dim 64 128 --runs 20 \
  | tee "$logs/bench.md"
bench_ok=$?

# 5. DRAM bytes, one launch of each kernel per shape (N = 4096; every kernel replayed per metric pass).
ncu_table=""
if command -v ncu >/dev/null; then
  if timeout 240 ncu --csv --metrics dram__bytes_read.sum,dram__bytes_write.sum \
      "$bin/ch05_gpu_bench" --once --batch 4 --heads 16 --seq 4096 --head-dim 64 128 \
      >"$logs/ncu.csv" 2>"$logs/ncu.err"; then
    ncu_table=$(python3 scripts/ncu_table.py "$logs/ncu.csv" --bench "$logs/bench.md" --seq 4096 --head-dim 64 128)
    note "ncu: ok"
  else
    note "ncu: failed, see ncu.err"
  fi
else
  note "ncu: not installed, skipped"
fi

# 6. torch reference.
torch_rows=""
if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  torch_rows=$(timeout 180 python3 scripts/sdpa_reference.py --batch 4 --heads 16 --seq 1024 4096 8192 \
               --head-dim 64 128 --runs 20 2>"$logs/torch.err")
  note "torch sdpa: ok"
else
  note "torch: not available, skipped"
fi

# 7. The report.
{
  echo "# Benchmarks"
  echo
  echo "Written by \`scripts/gpu_check.sh\` on $(date -u +%Y-%m-%d), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1),"
  echo "CUDA $(nvcc --version | grep -o 'release [0-9.]*' | cut -d' ' -f2). Times are CUDA-event medians of 20 launches after 3 warm-up"
  echo "launches, all in one run of the script; TFLOP/s counts 4 * batch * heads * N^2 * d (halved when causal)."
  echo "\"model MB\" is the chapter 05 traffic model for the whole batch in float32 (Br = Bc = 64)."
  echo
  echo "## Naive attention (chapter 04) against FlashAttention-2 (chapter 05), batch 4, heads 16, float32"
  echo
  grep -E '^\|' "$logs/bench.md"
  if [ -n "$torch_rows" ]; then
    echo "$torch_rows"
  fi
  if [ -n "$ncu_table" ]; then
    echo
    echo "## Measured DRAM traffic (Nsight Compute) beside the traffic model, N = 4096, batch 4, heads 16"
    echo
    echo "$ncu_table"
  fi
  echo
  echo "## The check"
  echo
  for line in "${summary[@]}"; do echo "- $line"; done
} >"$report"
cp "$report" "$logs/benchmarks.md" 2>/dev/null || true
# The traffic figure draws the measured bytes from docs/benchmarks.md: redraw it, and commit both
# (the figures test fails until the committed figure matches the report).
if cmake --build --preset cuda --target figures >"$logs/figures.log" 2>&1; then
  cp docs/figures/hbm-traffic.svg "$logs/" 2>/dev/null || true
  note "figures: redrawn from the new report (commit docs/benchmarks.md and docs/figures/)"
else
  note "figures: redraw FAILED, see figures.log"
fi

echo
for line in "${summary[@]}"; do echo "- $line"; done
echo
grep -E '^\|' "$logs/bench.md"
[ -n "$torch_rows" ] && echo "$torch_rows"
[ -n "$ncu_table" ] && echo && echo "$ncu_table"
exit $bench_ok
