#!/usr/bin/env python3
"""scripts/gpu_check.sh without a GPU: its exit status and what it leaves under $OUT, with stand-in
programs on the PATH (nvidia-smi, ncu, compute-sanitizer, a python3 with or without torch) and a
made-up build tree (gpu_check.json, a CTest file, stand-in GPU tests and benchmarks, make_figures).

  0  every step measured: a GPU test that passes, a clean compute-sanitizer, a benchmark, torch
     beside it (a stand-in torch), Nsight Compute's DRAM bytes (a stand-in ncu);
  3  a python3 without torch, an ncu that cannot load its counter library, no compute-sanitizer,
     a benchmark stopped by its time limit after some rows: each step named, with why;
  1  a benchmark of ours that fails;
and the dry run fails when a gpu-labelled test is not built by what the check builds, when the
check would write more than 8 files, or when a step's program is missing.

  python3 tests/gpu_check_test.py        (CTest: gpu_check_exit_status, label common)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import gpu_check  # noqa: E402

PY = sys.executable


def script(path, body):
    """Writes an executable Python script."""
    with open(path, "w") as f:
        f.write(f"#!{PY}\n" + textwrap.dedent(body))
    os.chmod(path, 0o755)
    return path


# A GPU test: lists its cases without a device; runs them as Catch2 reports.
GPU_TEST = """
    import os, sys
    if any(a.startswith("--list") for a in sys.argv[1:]):
        print("a kernel launch that reaches every tail case")
        sys.exit(0)
    if os.environ.get("FAKE_GPU_TEST") == "fail":
        print("test cases: 1 | 1 failed")
        sys.exit(1)
    print("All tests passed (12 assertions in 1 test case)")
"""

# A benchmark in the chapters' form: a paragraph, then a table; --plan; 77 without a GPU; a mode
# that fails and one that overruns its time after two rows.
BENCH = """
    import os, sys, time
    mode = os.environ.get("FAKE_BENCH", "ok")
    if "--plan" in sys.argv:
        print("plan: 2 rows; 0.1 GB of device memory")
        sys.exit(0)
    if "--once" in sys.argv:
        sys.exit(0)
    if mode == "fail":
        print("error: CUDA error: an illegal memory access was encountered", file=sys.stderr)
        sys.exit(1)
    print("device: NVIDIA H200; batch 1, heads 1, float32")
    print()
    print("| kernel | seq_len | head_dim | causal | median ms | TFLOP/s | model MB | runs |")
    print("|---|---|---|---|---|---|---|---|")
    print("| naive (ch04) | 64 | 64 | no | 0.010 | 0.10 | 1.0 | 20 |", flush=True)
    print("| flash-attention-2 (ch05) | 64 | 64 | no | 0.005 | 0.20 | 0.5 | 20 |", flush=True)
    if mode == "slow":
        time.sleep(60)
"""

# nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
NVIDIA_SMI = """
    print("NVIDIA H200, 570.86.15")
"""

# compute-sanitizer --tool T --error-exitcode 1 PROGRAM ARGS: runs the program, then its summary;
# initcheck counts an error unless SIMT_POISON=0 (poisoned memory would hide what it looks for).
COMPUTE_SANITIZER = """
    import os, subprocess, sys
    tool = sys.argv[sys.argv.index("--tool") + 1]
    program = sys.argv[sys.argv.index("--error-exitcode") + 2:]
    status = subprocess.run(program).returncode
    errors = 1 if tool == "initcheck" and os.environ.get("SIMT_POISON") != "0" else 0
    print(f"========= ERROR SUMMARY: {errors} errors")
    sys.exit(1 if errors or status else 0)
"""

# ncu --csv ... --metrics M PROGRAM ARGS: four launches per (seq_len, head_dim, causal) of the
# program's flags, as ch05_gpu_bench --once makes; FAKE_NCU=nolib: as on a machine whose counters
# ncu cannot load.
NCU = """
    import os, sys
    if "--help" in sys.argv:
        print("--print-units arg  Set scaling of metric units")
        sys.exit(0)
    if os.environ.get("FAKE_NCU") == "nolib":
        print("==ERROR== Failed to initialize the profiler: LibraryNotLoaded", file=sys.stderr)
        sys.exit(1)
    args = sys.argv[sys.argv.index("--metrics") + 2:]
    def values(flag):
        i = args.index(flag) + 1
        out = []
        while i < len(args) and not args[i].startswith("--"):
            out.append(args[i]); i += 1
        return out
    print("==PROF== Connected to process 1")
    print('"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"')
    launch = 0
    for n in values("--seq"):
        for d in values("--head-dim"):
            for causal in (0, 1):
                for kernel in ("scores_kernel", "softmax_kernel", "pv_kernel", "flash_attention_2_kernel"):
                    for metric in ("dram__bytes_read.sum", "dram__bytes_write.sum"):
                        print(f'"{launch}","ch04::gpu::{kernel}(const float *)","{metric}","byte","1000000"')
                    launch += 1
"""

# make_figures FOLDER --benchmarks FILE ...: the traffic figure.
MAKE_FIGURES = """
    import os, sys
    os.makedirs(sys.argv[1], exist_ok=True)
    with open(os.path.join(sys.argv[1], "hbm-traffic.svg"), "w") as f:
        f.write("<svg/>")
"""

# sitecustomize for the python3 "with torch": the stand-in torch of gpu_check_scripts_test.py.
WITH_TORCH = f"""
import sys
sys.path.insert(0, {HERE!r})
import gpu_check_scripts_test
for name, module in gpu_check_scripts_test.FakeTorch().modules.items():
    sys.modules[name] = module
"""


class FakeMachine:
    """A temporary build tree and PATH; `run` calls scripts/gpu_check.sh on them."""

    def __init__(self, root, torch=True, ncu=True, sanitizer=True, extra_steps=(), unbuilt_gpu_test=False,
                 bench_budget=20):
        self.root = root
        self.bin = os.path.join(root, "build", "bin")
        self.tools = os.path.join(root, "tools")
        os.makedirs(self.bin)
        os.makedirs(self.tools)
        files = {"fake_gpu_test": script(os.path.join(self.bin, "fake_gpu_test"), GPU_TEST),
                 "fake_bench": script(os.path.join(self.bin, "fake_bench"), BENCH),
                 "make_figures": script(os.path.join(self.bin, "make_figures"), MAKE_FIGURES)}
        bench = files["fake_bench"]
        steps = [
            {"name": "fake-bench", "budget": bench_budget, "title": "A benchmark", "beside": "",
             "targets": ["fake_bench"], "outputs": [], "command": [bench], "plan": [bench, "--plan"]},
            {"name": "fake-torch", "budget": 20, "title": "", "beside": "fake-bench", "targets": [], "outputs": [],
             "command": ["python3", "scripts/sdpa_reference.py", "--no-header", "--columns", "ch05", "--batch", "1",
                         "--heads", "1", "--seq", "64", "--head-dim", "64", "--backend", "math"],
             "plan": ["python3", "scripts/sdpa_reference.py", "--no-header", "--columns", "ch05", "--plan"]},
            {"name": "ncu-dram", "budget": 20, "title": "Measured DRAM traffic", "beside": "fake-bench",
             "targets": ["fake_bench"], "outputs": [],
             "command": ["python3", "scripts/ncu_table.py", "--bench", "{out:fake-bench}", "--logs", "{logs}",
                         "--seq", "64", "--head-dim", "64", "--", bench, "--once", "--seq", "64", "--head-dim", "64"],
             "plan": ["python3", "scripts/ncu_table.py", "--plan", "--bench", "{out:fake-bench}", "--logs", "{logs}",
                      "--seq", "64", "--head-dim", "64", "--", bench, "--once"]},
        ] + list(extra_steps)
        build = os.path.join(root, "build")
        manifest = {"gpu_path": True, "cuda_architectures": "90", "source_dir": ROOT, "build_dir": build,
                    "build_target": "gpu_check", "files": files, "gpu_tests": ["fake_gpu_test"],
                    "sanitizer_filter": "[sanitizer]", "sanitizer_tests": ["fake_gpu_test"], "programs": [],
                    "figures": "make_figures", "steps": steps}
        with open(os.path.join(build, "gpu_check.json"), "w") as f:
            json.dump(manifest, f)
        tests = [("fake_gpu_test", files["fake_gpu_test"])]
        if unbuilt_gpu_test:  # a gpu test CMake knows but the check's manifest does not
            tests.append(("forgotten_gpu_test", os.path.join(self.bin, "forgotten_gpu_test")))
        with open(os.path.join(build, "CTestTestfile.cmake"), "w") as f:
            for name, program in tests:
                f.write(f'add_test({name} "{program}")\n')
                f.write(f'set_tests_properties({name} PROPERTIES LABELS "gpu" SKIP_RETURN_CODE 77)\n')
        script(os.path.join(self.tools, "nvidia-smi"), NVIDIA_SMI)
        if ncu:
            script(os.path.join(self.tools, "ncu"), NCU)
        if sanitizer:
            script(os.path.join(self.tools, "compute-sanitizer"), COMPUTE_SANITIZER)
        site = os.path.join(root, "python-site")
        os.makedirs(site)
        if torch:
            with open(os.path.join(site, "sitecustomize.py"), "w") as f:
                f.write(WITH_TORCH)
        else:
            with open(os.path.join(site, "torch.py"), "w") as f:
                f.write('raise ImportError("No module named \'torch\' (a python3 without torch)")\n')
        with open(os.path.join(self.tools, "python3"), "w") as f:
            f.write(f'#!/bin/sh\nPYTHONPATH="{site}" exec "{PY}" "$@"\n')
        os.chmod(os.path.join(self.tools, "python3"), 0o755)
        self.build = build
        self.out = os.path.join(root, "out")

    def run(self, *flags, **env):
        environment = dict(os.environ)
        environment.pop("OUT", None)
        # The stand-ins first; the system's folders after, for sh, cmake and ctest (and no ncu,
        # compute-sanitizer or nvidia-smi of the machine's own: the test decides which exist).
        system = [p for p in os.environ.get("PATH", "").split(os.pathsep)
                  if p and not any(os.path.exists(os.path.join(p, t)) for t in ("ncu", "compute-sanitizer", "nvidia-smi"))]
        environment["PATH"] = os.pathsep.join([self.tools] + system)
        environment.update(env)
        r = subprocess.run([os.path.join(ROOT, "scripts", "gpu_check.sh"), "--no-build", "--build-dir", self.build,
                            "--out", self.out, "--report", os.path.join(self.root, "report", "benchmarks.md")]
                           + list(flags), env=environment, capture_output=True, text=True, timeout=300)
        return r.returncode, r.stdout, r.stderr


class ExitStatus(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.mkdtemp(prefix="gpu_check_test.")

    def tearDown(self):
        shutil.rmtree(self.folder, ignore_errors=True)

    def check_output_rule(self, machine, stdout):
        """The four files come back, the summary printed last is summary.txt, at most 8,000
        characters; returns its last line, the verdict."""
        names = sorted(os.listdir(machine.out))
        self.assertEqual(names, ["benchmarks.md", "hbm-traffic.svg", "logs.tar.gz", "summary.txt"])
        self.assertEqual(gpu_check.output_rule_problems(machine.out), [])
        with open(os.path.join(machine.out, "summary.txt")) as f:
            summary = f.read().strip()
        self.assertLessEqual(len(summary), gpu_check.SUMMARY_CHARS)
        self.assertTrue(stdout.strip().endswith(summary))
        return summary.splitlines()[-1]

    def test_every_step_measured_exits_0(self):
        machine = FakeMachine(self.folder)
        status, out, err = machine.run()
        verdict = self.check_output_rule(machine, out)
        self.assertEqual(status, 0, out + err)
        self.assertEqual(verdict, "GPU check: ok, every step measured what it names (exit 0)")
        with open(os.path.join(machine.out, "benchmarks.md")) as f:
            report = f.read()
        self.assertIn("| flash-attention-2 (ch05) | 64 | 64 | no | 0.005 |", report)
        # torch's rows continue the benchmark's table
        self.assertIn("| flash-attention-2 (ch05) | 64 | 64 | no | 0.005 | 0.20 | 0.5 | 20 |\n| torch sdpa MATH fwd", report)
        self.assertIn("| flash-attention-2 (ch05) | 64 | 64 | no | 2 | 0.5 |", report)  # ncu: 2 MB, model 0.5
        self.assertIn("NVIDIA H200, 570.86.15", report)
        self.assertIn("4 of 4 runs clean", out)               # initcheck saw SIMT_POISON=0

    def test_missing_tools_and_counters_exit_3_naming_each_step_and_why(self):
        machine = FakeMachine(self.folder, torch=False, sanitizer=False)
        status, out, err = machine.run(FAKE_NCU="nolib")
        verdict = self.check_output_rule(machine, out)
        self.assertEqual(status, 3, out + err)
        self.assertTrue(verdict.startswith("GPU check: PARTIAL (exit 3): "), verdict)
        self.assertIn("sanitizer skipped (compute-sanitizer is not installed)", verdict)
        self.assertIn("fake-torch skipped (sdpa_reference: torch is not installed", verdict)
        self.assertIn("ncu-dram skipped (ncu_table: counters unavailable on this machine (ncu: LibraryNotLoaded",
                      verdict)
        self.assertNotIn("FAILED", out)
        with open(os.path.join(machine.out, "benchmarks.md")) as f:
            report = f.read()
        self.assertIn("Not measured by fake-torch: skipped", report)
        # No heading promises what was not measured (make_figures reads the DRAM table by its heading).
        self.assertIn("\n## Not measured: Measured DRAM traffic\n", report)

    def test_out_of_time_after_some_rows_is_partial_and_keeps_them(self):
        machine = FakeMachine(self.folder, bench_budget=6)
        status, out, _ = machine.run(FAKE_BENCH="slow")
        self.assertEqual(status, 3, out)
        self.assertIn("fake-bench partial (out of time after 2 rows (kept))", out.strip().splitlines()[-1])
        with open(os.path.join(machine.out, "benchmarks.md")) as f:
            self.assertIn("| flash-attention-2 (ch05) | 64 | 64 | no | 0.005 |", f.read())

    def test_a_failure_of_ours_exits_1(self):
        machine = FakeMachine(self.folder)
        status, out, _ = machine.run(FAKE_BENCH="fail")
        self.check_output_rule(machine, out)
        self.assertEqual(status, 1, out)
        verdict = out.strip().splitlines()[-1]
        self.assertIn("GPU check: FAILED (exit 1): fake-bench FAILED (exit 1: error: CUDA error: an illegal memory "
                      "access", verdict)
        self.assertIn("fake-torch: skipped (fake-bench did not measure)", out)

    def test_a_failing_gpu_test_exits_1(self):
        machine = FakeMachine(self.folder)
        status, out, _ = machine.run(FAKE_GPU_TEST="fail")
        self.assertEqual(status, 1, out)
        self.assertIn("gpu-tests FAILED", out.strip().splitlines()[-1])


class DryRun(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.mkdtemp(prefix="gpu_check_test.")

    def tearDown(self):
        shutil.rmtree(self.folder, ignore_errors=True)

    def test_passes_when_everything_is_built_and_planned(self):
        machine = FakeMachine(self.folder, ncu=False, sanitizer=False, torch=False)
        status, out, err = machine.run("--dry-run")
        self.assertEqual(status, 0, out + err)
        self.assertEqual(out.strip().splitlines()[-1], "dry run: ok, every step planned and built (exit 0)")
        self.assertIn("plan: 2 rows; 0.1 GB of device memory", out)
        self.assertEqual(sorted(os.listdir(machine.out)), ["benchmarks.md", "hbm-traffic.svg", "logs.tar.gz",
                                                           "summary.txt"])

    def test_fails_when_a_gpu_test_is_not_built_by_the_check(self):
        machine = FakeMachine(self.folder, unbuilt_gpu_test=True)
        status, out, _ = machine.run("--dry-run")
        self.assertEqual(status, 1, out)
        self.assertIn("ctest's gpu test forgotten_gpu_test is not among the tests gpu_check builds and runs", out)

    def test_fails_when_the_check_would_write_more_than_8_files(self):
        many = {"name": "many-files", "budget": 10, "title": "Files", "beside": "", "targets": ["fake_bench"],
                "outputs": [f"extra{i}.txt" for i in range(5)], "command": ["true"], "plan": ["true"]}
        machine = FakeMachine(self.folder, extra_steps=[many])
        status, out, _ = machine.run("--dry-run")
        self.assertEqual(status, 1, out)
        self.assertIn("the check would write 9 files under $OUT", out)

    def test_fails_when_a_steps_program_is_missing(self):
        missing = os.path.join(self.folder, "build", "bin", "ch09_gpu_bench")
        step = {"name": "ch09-bench", "budget": 10, "title": "Ring", "beside": "", "targets": [],
                "outputs": [], "command": [missing], "plan": [missing, "--plan"]}
        machine = FakeMachine(self.folder, extra_steps=[step])
        status, out, _ = machine.run("--dry-run")
        self.assertEqual(status, 1, out)
        self.assertIn(f"ch09-bench FAILED (not built: {missing})", out.strip().splitlines()[-1])


class OutputRule(unittest.TestCase):
    def test_too_many_too_deep_and_odd_names_are_named(self):
        with tempfile.TemporaryDirectory() as out:
            for i in range(8):
                open(os.path.join(out, f"f{i}.md"), "w").close()
            os.makedirs(os.path.join(out, "a", "b", "c"))
            open(os.path.join(out, "a", "b", "c", "deep.txt"), "w").close()
            open(os.path.join(out, "a", "b", "c", "x y.txt"), "w").close()
            problems = "\n".join(gpu_check.output_rule_problems(out))
        self.assertIn("10 files under $OUT, more than the 8", problems)
        self.assertIn("a/b/c/deep.txt: deeper than $OUT/a/b/file", problems)
        self.assertIn("a/b/c/x y.txt: a name of characters that do not come back", problems)

    def test_two_folders_down_is_allowed(self):
        with tempfile.TemporaryDirectory() as out:
            os.makedirs(os.path.join(out, "a", "b"))
            open(os.path.join(out, "a", "b", "file.md"), "w").close()
            self.assertEqual(gpu_check.output_rule_problems(out), [])


if __name__ == "__main__":
    unittest.main()
