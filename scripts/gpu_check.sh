#!/usr/bin/env bash
# The GPU check: everything that needs an NVIDIA GPU, in one run of at most 8 minutes on one H200.
#
#  step         budget  what
#  build         110 s  configure with the cuda preset (for the local GPU) and build what the GPU
#                       steps run: the GPU tests, the benchmarks, the demos, make_figures
#  gpu-tests      35 s  ctest -L gpu: the chapters' tests and simt's on the GPU
#  sanitizer     100 s  compute-sanitizer racecheck, memcheck, initcheck and synccheck on the test
#                       cases tagged [sanitizer] of each chapter's GPU test (04 to 08 where
#                       built), 8 at a time; beside them, on half the cores, the rest of the build
#                       and the CPU tests (ctest -LE gpu, CI's suite)
#  ch05-bench     50 s  naive attention (ch04) against FlashAttention-2 (ch05), float32, CUDA events
#  ch05-torch     20 s  torch sdpa, float32, EFFICIENT_ATTENTION and MATH, on the same shapes
#  ch06-bench     20 s  chapter 06 (tensor cores), bf16 and fp16
#  ch06-torch     25 s  torch sdpa FLASH_ATTENTION and CUDNN_ATTENTION, bf16 and fp16
#  ch07-bench     20 s  chapter 07 (backward), float32
#  ch07-torch     20 s  torch autograd of sdpa, float32, forward + backward
#  ncu-dram       35 s  Nsight Compute: DRAM bytes per kernel beside the traffic model (N = 4096)
#  ncu-counts     30 s  Nsight Compute: instructions, sectors, wavefronts, bank conflicts of the
#                       chapters 04-06 demos beside simt's CPU profile of the same run (256 x 256)
#  report         15 s  docs/benchmarks.md, the figures redrawn from it, the summary printed last
# Every step runs under `timeout`; a step never starts past the total of 480 s (it is reported
# "skipped (out of time)"), and one that would overrun it gets what is left. A program, flag or
# tool that is missing is reported "skipped (not built)" / "skipped (not installed)", and ncu on a
# driver that keeps the performance counters from it "skipped (not permitted)", never as passed;
# a timed-out run is never called clean. Exit status: 0 if no step FAILED, else 1.
#
# Usage: scripts/gpu_check.sh            (from anywhere; it works in the repository root)
# Libraries not installed system-wide can be found through CMAKE_PREFIX_PATH (CMake reads it from
# the environment). Logs go to $OUT when it is set, else to build/gpu-check-logs/.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

logs=${OUT:-build/gpu-check-logs}
mkdir -p "$logs"
report=docs/benchmarks.md
bin=build/cuda/bin
# The Catch2 filter of compute-sanitizer's test runs; tests/sanitizer_subset.cmake reads this line.
sanitizer_filter='[sanitizer]'
sanitizer_tools=(racecheck memcheck initcheck synccheck)  # the slowest first: 8 run at a time
sanitizer_chapters=(04_naive_attention 05_flash_attention_2 06_tensor_cores 07_backward 08_decoding)
bench_runs=20 bench_warmup=3 bench_budget_ms=800
torch_budget_ms=300  # torch's kernels are fast where ours are slow: less time per row is enough
# What the GPU steps run, built first (those of them that exist in this checkout).
gpu_targets=(04_naive_attention_gpu_test 05_flash_attention_2_gpu_test 06_tensor_cores_gpu_test
             07_backward_gpu_test 08_decoding_gpu_test simt_gpu_test ch05_gpu_bench ch06_gpu_bench ch07_gpu_bench
             ch04_naive_attention ch05_flash_attention_2 ch06_tensor_cores make_figures)
# The shape simt profiles on the CPU and Nsight Compute measures on the GPU (ncu-counts).
profile_shape=(--batch 1 --heads 2 --seq-q 256 --seq-k 256 --head-dim 64)

total_budget=480
declare -A budget=([build]=110 [gpu-tests]=35 [sanitizer]=100 [ch05-bench]=50 [ch05-torch]=20
                   [ch06-bench]=20 [ch06-torch]=25 [ch07-bench]=20 [ch07-torch]=20 [ncu-dram]=35
                   [ncu-counts]=30 [report]=15)
steps=(build gpu-tests sanitizer ch05-bench ch05-torch ch06-bench ch06-torch ch07-bench ch07-torch
       ncu-dram ncu-counts report)
t0=$SECONDS
summary=()     # "- what: verdict", one per check, printed at the end
step_rows=()   # "| step | budget | took | result |"
failed=0       # 1 once anything FAILED
failures=0     # how many things FAILED, so that a step can tell whether it added one

note() { summary+=("- $1"); echo "== $1"; }
fail() { failed=1 failures=$((failures + 1)); note "$1"; }

# begin STEP: prints the step's budget and sets $limit, the seconds it may take now (its budget,
# or what the whole check has left before the report's share); returns 1 when nothing is left.
begin() {
  step=$1 step_t0=$SECONDS step_failures=$failures
  local left=$((total_budget - budget[report] - (SECONDS - t0)))
  limit=${budget[$step]}
  # The report always gets its share: every step before it stops short of it.
  [ "$step" != report ] && ((left < limit)) && limit=$left
  echo
  echo "## $step: budget ${budget[$step]} s, limit ${limit} s, $((SECONDS - t0)) s into the check"
  if ((limit < 5)); then
    end "skipped (out of time)"
    note "$step: skipped (out of time)"
    return 1
  fi
}
# end RESULT: records the step's time beside its budget; end_checked: "ok", or "FAILED" when the
# step added a failure.
end() { step_rows+=("| $step | ${budget[$step]} | $((SECONDS - step_t0)) | $1 |"); }
end_checked() { if ((failures > step_failures)); then end FAILED; else end ok; fi; }
# skip STEP WHY: a step that cannot run because an earlier one did not give it what it needs.
skip() { step=$1 step_t0=$SECONDS; end "skipped ($2)"; note "$1: skipped ($2)"; }
# remaining END: seconds until END (a value of $SECONDS), at least 1 (timeout 0 means no limit).
remaining() { local r=$(($1 - SECONDS)); ((r < 1)) && r=1; echo "$r"; }
# no_counters LOG: whether ncu said it may not read the GPU's performance counters (a setting of
# the machine's driver, not a fault of the code).
no_counters() { grep -q "ERR_NVGPUCTRPERM" "$1" 2>/dev/null; }
# has_flag PROGRAM FLAG: whether PROGRAM --help mentions FLAG.
has_flag() { "$1" --help 2>&1 | grep -q -- "$2"; }

echo "GPU check: $(date -u '+%Y-%m-%d %H:%M UTC'), logs in $logs"
echo "| step | budget s |"
echo "|---|---|"
for s in "${steps[@]}"; do echo "| $s | ${budget[$s]} |"; done
echo "| total | $total_budget |"

# ---- build -------------------------------------------------------------------------------------
begin build
if ! timeout -k 10 "$limit" cmake --preset cuda >"$logs/configure.log" 2>&1; then
  tail -30 "$logs/configure.log"
  fail "build: configure FAILED (or timed out), see configure.log"
  end FAILED
else
  # The targets of gpu_targets that this checkout defines (ninja lists every target as "name: ...").
  known=$(ninja -C build/cuda -t targets all 2>/dev/null | sed 's/:.*//')
  targets=()
  for t in "${gpu_targets[@]}"; do grep -qx "$t" <<<"$known" && targets+=("$t"); done
  if ! timeout -k 10 "$(remaining $((step_t0 + limit)))" cmake --build --preset cuda -j "$(nproc)" \
      --target "${targets[@]}" >"$logs/build.log" 2>&1; then
    grep -E "error|Error" "$logs/build.log" | head -30
    fail "build: FAILED (or timed out after $((SECONDS - step_t0)) s), see build.log"
    end FAILED
  else
    gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
    note "build: ok, ${#targets[@]} targets for the GPU steps (${gpu_name:-no GPU named by nvidia-smi})"
    end ok
  fi
fi
if [ "$failed" = 1 ]; then  # nothing below can run
  printf '%s\n' "${summary[@]}" "" "| step | budget s | took s | result |" "|---|---|---|---|" "${step_rows[@]}"
  exit 1
fi

# ---- gpu-tests ---------------------------------------------------------------------------------
if begin gpu-tests; then
  if timeout -k 10 "$limit" ctest --preset cuda -L gpu -j 8 >"$logs/ctest-gpu.log" 2>&1; then
    if grep -qE "Skipped|Not Run" "$logs/ctest-gpu.log"; then
      fail "gpu tests: some SKIPPED or not run (no GPU seen, or not built): $(grep -E 'tests passed' "$logs/ctest-gpu.log")"
      end FAILED
    else
      note "gpu tests: $(grep -E 'tests passed' "$logs/ctest-gpu.log")"
      end ok
    fi
  else
    fail "gpu tests: FAILED or timed out: $(grep -E 'tests passed|tests failed' "$logs/ctest-gpu.log")"
    grep -E "Failed|\*\*\*|Timeout" "$logs/ctest-gpu.log" | head -20
    end FAILED
  fi
  grep -E "gpu_test" "$logs/ctest-gpu.log" | sed 's/^/   /'
fi

# ---- sanitizer (and the CPU tests beside it) ---------------------------------------------------
# One compute-sanitizer run: TOOL on CHAPTER's GPU test, the [sanitizer] cases, --warn NoTests (an
# empty filter is an error). Clean only when the tool exits 0, its summary counts 0 errors and
# Catch2 says every selected test passed. Writes its verdict to $logs/sanitizer-TOOL-CHAPTER.verdict.
sanitize() {
  local tool=$1 chapter=$2 seconds=$3 exe=$bin/${2}_gpu_test
  local log=$logs/sanitizer-$tool-$chapter.log verdict
  timeout -k 5 "$seconds" compute-sanitizer --tool "$tool" --error-exitcode 1 \
    "$exe" "$sanitizer_filter" --warn NoTests >"$log" 2>&1
  local status=$?
  local tool_summary catch_summary
  tool_summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | tail -1 | sed 's/^=* *//')
  catch_summary=$(grep -E "All tests passed|test cases?:" "$log" | tail -1)
  if ((status == 124 || status == 137)); then
    verdict="FAILED: timed out after ${seconds} s (not clean: incomplete)"
  elif ((status == 0)) && [[ $tool_summary =~ (^|[^0-9])0\ errors ]] &&
       [[ $catch_summary == "All tests passed"* ]]; then
    verdict="clean ($tool_summary; $catch_summary)"
  else
    verdict="FAILED (exit $status; ${tool_summary:-no summary}; ${catch_summary:-no Catch2 summary}), see $(basename "$log")"
  fi
  echo "compute-sanitizer $tool $chapter: $verdict" >"$logs/sanitizer-$tool-$chapter.verdict"
}

if begin sanitizer; then
  step_end=$((SECONDS + limit))
  rm -f "$logs"/sanitizer-*.verdict "$logs"/cpu-*.status
  # The rest of the build and CI's CPU suite use no GPU: they run beside the sanitizer runs, on
  # half the cores, and write their exit status to a file each.
  half=$(($(nproc) / 2))
  ((half < 1)) && half=1
  (timeout -k 10 "$limit" cmake --build --preset cuda -j "$half" >"$logs/build-rest.log" 2>&1
   echo $? >"$logs/cpu-build.status"
   if [ "$(cat "$logs/cpu-build.status")" = 0 ]; then
     timeout -k 10 "$(remaining "$step_end")" ctest --preset cuda -LE gpu -j "$half" >"$logs/ctest-cpu.log" 2>&1
     echo $? >"$logs/cpu-tests.status"
   fi) &
  if ! command -v compute-sanitizer >/dev/null; then
    note "compute-sanitizer: skipped (not installed)"
  else
    for tool in "${sanitizer_tools[@]}"; do
      for chapter in "${sanitizer_chapters[@]}"; do
        verdict_file=$logs/sanitizer-$tool-$chapter.verdict
        if [ ! -x "$bin/${chapter}_gpu_test" ]; then
          echo "compute-sanitizer $tool $chapter: skipped (not built)" >"$verdict_file"
          continue
        fi
        while (($(jobs -rp | wc -l) > 8)); do wait -n; done  # 8 sanitizer runs + the CPU tests
        if ((step_end - SECONDS < 10)); then
          echo "compute-sanitizer $tool $chapter: skipped (out of time)" >"$verdict_file"
          continue
        fi
        sanitize "$tool" "$chapter" "$(remaining "$step_end")" &
      done
    done
  fi
  wait  # every sanitizer run and the CPU tests; each wrote its own verdict or status
  if command -v compute-sanitizer >/dev/null; then
    for tool in "${sanitizer_tools[@]}"; do
      for chapter in "${sanitizer_chapters[@]}"; do
        line=$(cat "$logs/sanitizer-$tool-$chapter.verdict" 2>/dev/null ||
               echo "compute-sanitizer $tool $chapter: FAILED (no verdict written)")
        if [[ $line == *FAILED* ]]; then fail "$line"; else note "$line"; fi
      done
    done
  fi
  build_status=$(cat "$logs/cpu-build.status" 2>/dev/null || echo none)
  ctest_status=$(cat "$logs/cpu-tests.status" 2>/dev/null || echo none)
  if [ "$build_status" = 124 ] || [ "$build_status" = 137 ]; then
    note "cpu tests: skipped (out of time: the rest of the build did not finish beside the sanitizer runs; CI runs them)"
  elif [ "$build_status" != 0 ]; then
    fail "cpu tests: the rest of the build FAILED (exit $build_status), see build-rest.log"
    grep -E "error|Error" "$logs/build-rest.log" | head -20
  elif [ "$ctest_status" = 0 ]; then
    note "cpu tests: $(grep -E 'tests passed' "$logs/ctest-cpu.log")"
  elif [ "$ctest_status" = 124 ] || [ "$ctest_status" = 137 ]; then
    note "cpu tests: skipped (out of time: ctest did not finish beside the sanitizer runs; CI runs them)"
  else
    fail "cpu tests: FAILED (exit $ctest_status): $(grep -E 'tests passed|tests failed' "$logs/ctest-cpu.log")"
    grep -E "Failed|\*\*\*" "$logs/ctest-cpu.log" | head -20
  fi
  end_checked
fi

# ---- benchmarks ---------------------------------------------------------------------------------
# bench STEP OUTPUT COMMAND...: runs a benchmark under the step's limit; its Markdown rows land in
# $logs/OUTPUT. Returns 0 when it ran to the end, or when it ran out of time after printing some
# rows (the benchmarks print the slowest shapes last): those rows are kept and called partial.
bench() {
  local name=$1 out=$2
  shift 2
  if [ ! -x "$1" ]; then
    note "$name: skipped (not built: $1)"
    end "skipped (not built)"
    return 1
  fi
  timeout -k 5 "$limit" "$@" >"$logs/$out" 2>"$logs/$out.err"
  local status=$? rows
  rows=$(grep -E '^\|' "$logs/$out" 2>/dev/null | grep -cvE '^\| kernel |^\|---')
  if ((status == 0)); then
    note "$name: ok ($rows rows)"
    end ok
    return 0
  fi
  if ((status == 124 || status == 137)) && ((rows > 0)); then
    note "$name: partial, out of time after $rows rows (the rows it printed are kept)"
    end "partial (out of time)"
    return 0
  fi
  fail "$name: FAILED (exit $status$( ((status == 124)) && echo ', timed out')), see $out.err"
  tail -5 "$logs/$out.err"
  end FAILED
  return 1
}
# torch_rows STEP OUTPUT ARGS...: scripts/sdpa_reference.py with ARGS; ok only when it ran and
# every row either has a time or says "not available".
torch_version=""
torch_rows() {
  local name=$1 out=$2
  shift 2
  timeout -k 5 "$limit" python3 scripts/sdpa_reference.py --no-header --runs "$bench_runs" \
    --warmup "$bench_warmup" --budget-ms "$torch_budget_ms" "$@" >"$logs/$out" 2>"$logs/$out.err"
  local status=$?
  local counts
  counts=$(grep -E "^sdpa_reference: [0-9]+ timed" "$logs/$out.err" | tail -1)
  case $status in
    0) note "$name: ok (${counts#sdpa_reference: })"; end ok ;;
    2) note "$name: skipped (not installed: $(tail -1 "$logs/$out.err"))"; end "skipped (not installed)"
       : >"$logs/$out" ;;
    124 | 137)
      if grep -q '^| torch' "$logs/$out"; then
        note "$name: partial, out of time after $(grep -c '^| torch' "$logs/$out") rows (kept)"
        end "partial (out of time)"
      else
        fail "$name: FAILED (timed out before its first row)"; end FAILED
      fi ;;
    *) fail "$name: FAILED (exit $status; ${counts:-see $out.err})"; end FAILED ;;
  esac
  if [ -z "$torch_version" ] && ((status != 2)); then
    torch_version=$(python3 -c "import torch; print(torch.__version__)" 2>/dev/null)
  fi
}

ch05_ok=0 ch06_ok=0 ch07_ok=0
if begin ch05-bench; then
  bench "ch05_gpu_bench" bench-ch05.md "$bin/ch05_gpu_bench" --batch 4 --heads 16 --seq 1024 4096 8192 \
    --head-dim 64 128 --runs "$bench_runs" --warmup "$bench_warmup" --budget-ms "$bench_budget_ms" && ch05_ok=1
fi
if ((!ch05_ok)); then
  skip ch05-torch "no chapter 05 table to stand beside"
elif begin ch05-torch; then
  torch_rows "torch sdpa beside chapter 05" torch-ch05.md --columns ch05 --dtype float32 \
    --backend efficient math --batch 4 --heads 16 --seq 1024 4096 8192 --head-dim 64 128
fi
if begin ch06-bench; then
  bench "ch06_gpu_bench" bench-ch06.md "$bin/ch06_gpu_bench" --batch 4 --heads 16 --seq 1024 4096 8192 \
    --head-dim 64 128 --dtype bf16 fp16 --runs "$bench_runs" --warmup "$bench_warmup" && ch06_ok=1
fi
if ((!ch06_ok)); then
  skip ch06-torch "no chapter 06 table to stand beside"
elif begin ch06-torch; then
  torch_rows "torch sdpa beside chapter 06" torch-ch06.md --columns ch06 --dtype bf16 fp16 \
    --backend flash cudnn --batch 4 --heads 16 --seq 1024 4096 8192 --head-dim 64 128
fi
if begin ch07-bench; then
  bench "ch07_gpu_bench" bench-ch07.md "$bin/ch07_gpu_bench" --batch 4 --heads 16 --seq 1024 4096 \
    --head-dim 64 128 --runs 10 --warmup 2 && ch07_ok=1
fi
if ((!ch07_ok)); then
  skip ch07-torch "no chapter 07 table to stand beside"
elif begin ch07-torch; then
  torch_rows "torch autograd beside chapter 07" torch-ch07.md --columns ch07 --backward --dtype float32 \
    --backend efficient math --batch 4 --heads 16 --seq 1024 4096 --head-dim 64 128
fi

# ---- Nsight Compute ---------------------------------------------------------------------------
ncu_dram="" ncu_counts="" ncu_units=()
# Counts in base units ("sector", not "Ksector") where this ncu can print them so.
command -v ncu >/dev/null && ncu --help 2>&1 | grep -q -- --print-units && ncu_units=(--print-units base)
if begin ncu-dram; then
  if ! command -v ncu >/dev/null; then
    note "ncu DRAM bytes: skipped (not installed)"; end "skipped (not installed)"
  elif ((!ch05_ok)); then
    note "ncu DRAM bytes: skipped (needs the ch05 benchmark's table for the model)"; end skipped
  elif timeout -k 5 "$limit" ncu --csv "${ncu_units[@]}" --metrics dram__bytes_read.sum,dram__bytes_write.sum \
      "$bin/ch05_gpu_bench" --once --batch 4 --heads 16 --seq 4096 --head-dim 64 128 \
      >"$logs/ncu-dram.csv" 2>"$logs/ncu-dram.err" &&
      ncu_dram=$(python3 scripts/ncu_table.py "$logs/ncu-dram.csv" --bench "$logs/bench-ch05.md" \
                 --seq 4096 --head-dim 64 128 2>>"$logs/ncu-dram.err"); then
    note "ncu DRAM bytes: ok"; end ok
  elif no_counters "$logs/ncu-dram.err" || no_counters "$logs/ncu-dram.csv"; then
    ncu_dram=""
    note "ncu DRAM bytes: skipped (not permitted: ERR_NVGPUCTRPERM, the driver keeps the performance counters from ncu)"
    end "skipped (no counters)"
  else
    ncu_dram=""
    fail "ncu DRAM bytes: FAILED (or timed out), see ncu-dram.err"; tail -5 "$logs/ncu-dram.err"; end FAILED
  fi
fi

if begin ncu-counts; then
  if ! command -v ncu >/dev/null; then
    note "ncu counts beside simt: skipped (not installed)"; end "skipped (not installed)"
  else
    step_end=$((SECONDS + limit)) header=--header any=0
    for program in ch04_naive_attention ch05_flash_attention_2 ch06_tensor_cores; do
      exe=$bin/$program
      if [ ! -x "$exe" ]; then note "ncu counts $program: skipped (not built)"; continue; fi
      if ! has_flag "$exe" --profile-json; then
        note "ncu counts $program: skipped (not built: no --profile-json in its --help)"; continue
      fi
      if ((step_end - SECONDS < 5)); then note "ncu counts $program: skipped (out of time)"; continue; fi
      json=$logs/profile-$program.json csv=$logs/ncu-counts-$program.csv
      if ! timeout -k 5 "$(remaining "$step_end")" "$exe" --device cpu "${profile_shape[@]}" --profile-json "$json" \
          >"$logs/profile-$program.log" 2>&1; then
        fail "ncu counts $program: the CPU profile run FAILED, see profile-$program.log"; continue
      fi
      metrics=$(python3 scripts/ncu_profile_table.py --metrics)
      if ! timeout -k 5 "$(remaining "$step_end")" ncu --csv "${ncu_units[@]}" --metrics "$metrics" \
          "$exe" --device gpu "${profile_shape[@]}" >"$csv" 2>"$logs/ncu-counts-$program.err"; then
        if no_counters "$logs/ncu-counts-$program.err" || no_counters "$csv"; then
          note "ncu counts $program: skipped (not permitted: ERR_NVGPUCTRPERM)"
        else
          fail "ncu counts $program: ncu FAILED (or timed out), see ncu-counts-$program.err"
        fi
        continue
      fi
      if rows=$(python3 scripts/ncu_profile_table.py --program "$program" --simt "$json" --ncu "$csv" $header \
                2>>"$logs/ncu-counts-$program.err"); then
        ncu_counts+="$rows"$'\n' header="" any=1
        note "ncu counts $program: ok"
      else
        fail "ncu counts $program: FAILED to pair simt's kernels with ncu's, see ncu-counts-$program.err"
      fi
    done
    if ((failures > step_failures)); then end FAILED; elif ((any)); then end ok; else end "nothing measured"; fi
  fi
fi

# ---- report ---------------------------------------------------------------------------------------
begin report
# The notes of every step, then the table of steps so far (the report's last section, and the end of
# what the script prints).
print_check() {
  printf '%s\n' "${summary[@]}"
  echo
  echo "| step | budget s | took s | result |"
  echo "|---|---|---|---|"
  printf '%s\n' "${step_rows[@]}"
}
table_of() { [ -s "$logs/$1" ] && grep -E '^\|' "$logs/$1"; }
text_of() { [ -s "$logs/$1" ] && grep -vE '^\||^$' "$logs/$1"; }
# section NN HEADING OK: chapter NN's benchmark table with torch's rows under it, or why there is none.
section() {
  echo
  echo "## $2"
  echo
  if (($3)); then
    text_of "bench-ch$1.md"
    echo
    table_of "bench-ch$1.md"
    table_of "torch-ch$1.md"
  else
    echo "Not measured: $(printf '%s\n' "${summary[@]}" | grep -m1 -E "ch$1_gpu_bench|ch$1-bench" | sed 's/^- //')"
  fi
}
cuda_version=$(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' | cut -d' ' -f2)
device_line=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
{
  echo "# Benchmarks"
  echo
  echo "Written by \`scripts/gpu_check.sh\` on $(date -u +%Y-%m-%d): ${device_line:-unknown GPU} (name, driver),"
  echo "CUDA ${cuda_version:-unknown}${torch_version:+, torch $torch_version}; every figure below is from that one run."
  echo "Times are medians of CUDA-event pairs around the kernels alone (asynchronous launches, no host"
  echo "synchronisation inside a pair), of up to $bench_runs runs after $bench_warmup warm-up launches; a kernel"
  echo "slower than 100 ms gets no further warm-up and fewer runs (at most ${bench_budget_ms} ms of runs per row,"
  echo "${torch_budget_ms} ms for torch's rows;"
  echo "chapter 05's table has a \`runs\` column). TFLOP/s counts 4 * batch * heads * N^2 * d per forward"
  echo "pass (halved when causal) and 3.5 times that for forward + backward. The kernels were built by the"
  echo "\`cuda\` preset, which keeps assertions and so SIMT_POISON (common/simt/gpu.h): each block of a"
  echo "kernel with dynamic shared memory first fills it with 0xff bytes, one pass of 16-byte stores."
  echo "Each torch row names the backend it was forced onto (torch.nn.attention.sdpa_kernel) and its"
  echo "arithmetic; \"model MB\" is the chapter 05 traffic model for the whole batch in float32 (Br = Bc = 64)."
  section 05 "Naive attention (chapter 04) against FlashAttention-2 (chapter 05), batch 4, heads 16, float32" "$ch05_ok"
  section 06 "FlashAttention-2 on tensor cores (chapter 06) beside torch's FlashAttention-2 and cuDNN backends" "$ch06_ok"
  section 07 "The backward pass (chapter 07) beside torch autograd (forward + backward), float32" "$ch07_ok"
  if [ -n "$ncu_dram" ]; then  # figures/measured_traffic.cpp reads this section: keep its heading
    echo
    echo "## Measured DRAM traffic (Nsight Compute) beside the traffic model, N = 4096, batch 4, heads 16"
    echo
    echo "$ncu_dram"
  fi
  if [ -n "$ncu_counts" ]; then
    echo
    echo "## Memory instructions, sectors, wavefronts and bank conflicts: simt on the CPU beside Nsight Compute"
    echo
    echo "The same program and shape (\`${profile_shape[*]}\`), profiled by simt on the CPU"
    echo "(\`--device cpu --profile-json\`) and by Nsight Compute on the GPU (\`--device gpu\`); counts per"
    echo "launch, simt / GPU. nvcc may load wider words or keep values in registers where the host"
    echo "compiler does not, so instructions may differ where sectors and wavefronts agree."
    echo
    printf '%s' "$ncu_counts"
  fi
  echo
  echo "## The check"
  echo
  print_check
  echo
  echo "CPU benchmarks (Google Benchmark) are built by the \`default\` preset: \`ch02_softmax_bench\` and"
  echo "\`simt_bench\`; their figures depend on the machine, so they are not recorded here."
} >"$report"
cp "$report" "$logs/benchmarks.md" 2>/dev/null || true
# The traffic figure draws the measured bytes from docs/benchmarks.md: redraw it, and commit both
# (the figures test fails until the committed figure matches the report).
if timeout -k 5 "$limit" cmake --build --preset cuda --target figures >"$logs/figures.log" 2>&1; then
  cp docs/figures/hbm-traffic.svg "$logs/" 2>/dev/null || true
  note "figures: redrawn from the new report (commit docs/benchmarks.md and docs/figures/)"
  end ok
else
  fail "figures: redraw FAILED, see figures.log"
  end FAILED
fi

# ---- the summary, last ---------------------------------------------------------------------------
echo
for f in bench-ch05.md torch-ch05.md bench-ch06.md torch-ch06.md bench-ch07.md torch-ch07.md; do
  table_of "$f"
done
[ -n "$ncu_dram" ] && printf '\n%s\n' "$ncu_dram"
[ -n "$ncu_counts" ] && printf '\n%s' "$ncu_counts"
echo
print_check
echo "| total | $total_budget | $((SECONDS - t0)) | $( ((failed)) && echo FAILED || echo ok) |"
exit "$failed"
