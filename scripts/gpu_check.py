#!/usr/bin/env python3
"""The GPU check: everything that needs an NVIDIA GPU, in one run of at most 8 minutes on one H200
(16 cores), build included. Run it as scripts/gpu_check.sh (docs/benchmarks.md says what to copy to
a bare GPU machine first).

  step        budget  what
  build        100 s  configure the cuda preset (with the libraries carried in .deps/ where there
                      are some) and build the target gpu_check: every program the steps below run
  gpu-tests     30 s  ctest -L gpu: every test labelled gpu, on the GPU
  sanitizer     70 s  compute-sanitizer racecheck, memcheck, initcheck (SIMT_POISON=0) and synccheck
                      on the [sanitizer] test cases of every SANITIZER GPU test, 8 at a time
  ...                 the steps that cmake/GpuCheck.cmake lists in build/<preset>/gpu_check.json,
                      in the order the chapters declare them (benchmarks, torch beside them, Nsight
                      Compute, reports), each with its own budget
  report        10 s  docs/benchmarks.md (below its marker line), its figure redrawn, the files
                      that come back and the summary, printed last

Nothing here lists what to build or run: the manifest (gpu_check.json) is written by CMake from
the declarations beside each program (add_chapter_test(... GPU), gpu_check_step, add_gpu_benchmark),
and `ctest -L gpu` is checked against it.

A step's result is "ok" (it measured what it names), "partial" (out of time after some rows, which
are kept), "skipped" (a program that is not installed, no GPU seen, counters unavailable, out of
time, or a step it stands beside did not measure: each with its reason) or "FAILED" (something of
ours). Exit status: 0 when every step is ok; 3 when none FAILED but some were partial or skipped;
1 when something FAILED (2 for a bad flag). Every step runs under its time limit (its budget, or
what the check has left before the report's share); one that cannot get 5 s is skipped (out of
time).

What comes back from a lent GPU machine is at most 8 files under $OUT (no deeper than
$OUT/a/b/file) and the last 12,000 printed characters. The check writes benchmarks.md,
summary.txt, logs.tar.gz (every log), hbm-traffic.svg and the files steps declare as OUTPUTS into
$OUT (never more than 8), and prints a summary of at most 8,000 characters whose last line is the
verdict.

--dry-run (wherever nvcc is; no GPU needed) builds the same programs for sm_90 into
build/gpu-check-dry, timing each step's share of the build, checks the manifest against ctest,
lists each SANITIZER test's [sanitizer] cases, runs every step's plan (its command with --plan),
writes the report and the files that would come back into build/gpu-check-dry/gpu-check/ and
checks them, and prints the step table with the build times and their extrapolation to 16 cores.
"""
import argparse
import datetime
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tarfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import gpu_deps  # noqa: E402

TOTAL_BUDGET = 480        # seconds: 8 minutes on one H200, build included
BUILT_IN = {"build": 100, "gpu-tests": 30, "sanitizer": 70, "report": 10}
MIN_STEP = 5              # a step that cannot get this many seconds is skipped (out of time)
BUILD_LIMIT = 240         # the build may overrun its budget up to this; the steps after it get less
SKIP_STATUS = 77          # a step that cannot measure here (cmake/GpuCheck.cmake)
MAX_FILES = 8             # what comes back from the GPU machine: files under $OUT ...
MAX_DEPTH = 2             # ... no deeper than $OUT/a/b/file ...
NAME_RULE = re.compile(r"^[A-Za-z0-9._-]+$")  # ... with names of these characters
SUMMARY_CHARS = 8000      # the printed summary, verdict last (12,000 printed characters come back)
FIXED_OUTPUTS = ["benchmarks.md", "summary.txt", "logs.tar.gz", "hbm-traffic.svg"]
SANITIZER_TOOLS = ["racecheck", "memcheck", "initcheck", "synccheck"]  # the slowest first
SANITIZER_PARALLEL = 8
DRY_RUN_ARCH = "90"       # the H200's: the dry run compiles what the GPU machine will
DRY_RUN_BUILD_LIMIT = 4 * 3600  # seconds: a 2-core machine builds for an hour
DRY_RUN_STEP_LIMIT = 300
CORES_THERE = 16
MARKER = "<!-- Everything below this line is written by scripts/gpu_check.sh; everything above it is kept. -->"
OK, PARTIAL, SKIPPED, FAILED = "ok", "partial", "skipped", "FAILED"


def log(text=""):
    print(text, flush=True)


def table_rows(text):
    """The data rows of the Markdown tables in `text` (not a head, not a rule)."""
    lines = text.splitlines()
    rows = []
    for i, line in enumerate(lines):
        if not line.startswith("|") or re.match(r"^\|\s*:?-", line):
            continue
        if i + 1 < len(lines) and re.match(r"^\|\s*:?-", lines[i + 1]):
            continue  # a table's head
        rows.append(line)
    return rows


def last_line(path, default=""):
    try:
        with open(path, errors="replace") as f:
            lines = [line.strip() for line in f if line.strip()]
        return lines[-1][:300] if lines else default
    except OSError:
        return default


def run(command, limit, stdout, stderr=None, env=None, cwd=ROOT):
    """Runs `command` (a list) with stdout/stderr to files, killed with its whole process group
    after `limit` seconds. Returns (exit status or None when killed for time, seconds)."""
    start = time.monotonic()
    with open(stdout, "w") as out, open(stderr or os.devnull, "w") as err:
        try:
            process = subprocess.Popen(command, stdout=out, stderr=err if stderr else subprocess.STDOUT,
                                       env=env, cwd=cwd, start_new_session=True)
        except OSError as e:
            (err if stderr else out).write(f"cannot run {command[0]}: {e}\n")
            return 127, time.monotonic() - start
        try:
            status = process.wait(timeout=max(limit, 1))
        except subprocess.TimeoutExpired:
            for sig, grace in ((signal.SIGTERM, 5), (signal.SIGKILL, None)):
                try:
                    os.killpg(process.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    process.wait(timeout=grace)
                    break
                except subprocess.TimeoutExpired:
                    continue
            process.wait()
            return None, time.monotonic() - start
    return status, time.monotonic() - start


def ninja_edges(build_dir):
    """{output: [every input, explicit, implicit and order-only]} of build.ninja (the Ninja
    generator's one file, its rules aside)."""
    edges = {}
    try:
        with open(os.path.join(build_dir, "build.ninja")) as f:
            text = f.read().replace("$\n", " ")
    except OSError:
        return edges
    for line in text.splitlines():
        if not line.startswith("build "):
            continue
        line = line[len("build "):].replace("$ ", "\0").replace("$:", "\1")
        outputs, _, rest = line.partition(":")
        words = [w.replace("\0", " ").replace("\1", ":") for w in rest.split()[1:] if w not in ("|", "||", "|@")]
        for out in outputs.split():
            edges[out.replace("\0", " ").replace("\1", ":")] = words
    return edges


def critical_path(edges, seconds):
    """The longest chain of builds, in seconds, where seconds[output] is how long the edge that
    made `output` took (0 for one not built now)."""
    done = {}

    def finish(node, depth=0):
        if node in done or depth > 500:
            return done.get(node, 0.0)
        done[node] = 0.0  # (no cycles in a build graph; this only bounds the recursion)
        done[node] = seconds.get(node, 0.0) + max((finish(i, depth + 1) for i in edges.get(node, [])), default=0.0)
        return done[node]

    return max((finish(n) for n in seconds), default=0.0)


def list_cases(program, filters):
    """The names of the test cases a Catch2 program selects with `filters` (no device needed:
    tests/main.cpp); [] where it cannot list them. (Catch2 v2 exits with the count.)"""
    try:
        listed = subprocess.run([program, "--list-test-names-only"] + filters, capture_output=True, text=True,
                                timeout=60)
        if "Unrecognised token" in listed.stdout + listed.stderr:  # Catch2 v3
            listed = subprocess.run([program, "--list-tests", "--verbosity", "quiet"] + filters, capture_output=True,
                                    text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if listed.returncode < 0:  # killed by a signal
        return []
    return [line for line in listed.stdout.splitlines() if line.strip()]


def cpu_seconds():
    """CPU time of every child process that has ended (ninja and the compilers it ran)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def self_cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Check:
    def __init__(self, args):
        self.args = args
        self.dry = args.dry_run
        self.t0 = time.monotonic()
        self.build_dir = os.path.abspath(args.build_dir or os.path.join(
            ROOT, "build", "gpu-check-dry" if self.dry else "cuda"))
        self.work = os.path.join(self.build_dir, "gpu-check")
        self.out = os.path.abspath(args.out or (os.path.join(self.work, "out") if self.dry else
                                                os.environ.get("OUT") or os.path.join(ROOT, "build", "gpu-check-out")))
        self.report = os.path.abspath(args.report or (os.path.join(self.work, "benchmarks.md") if self.dry else
                                                      os.path.join(ROOT, "docs", "benchmarks.md")))
        self.results = []    # (step, budget, took, status, why)
        self.notes = []      # "- ..." lines of the summary
        self.outputs = {}    # step name -> its Markdown output file
        self.status = {}     # step name -> status
        self.manifest = None
        self.build_rows = []  # dry run: (step, wall s, CPU s, estimate on 16 cores s)
        self.cmake_args = []

    # ---- bookkeeping ----------------------------------------------------------------------------
    def elapsed(self):
        return time.monotonic() - self.t0

    def limit_for(self, step, budget):
        """The seconds `step` may take now: its budget, or what is left before the report's share.
        The dry run runs on a machine of any size: its build takes what it takes, a plan 5 minutes."""
        if self.dry:
            return DRY_RUN_BUILD_LIMIT if step == "build" else DRY_RUN_STEP_LIMIT
        left = TOTAL_BUDGET - self.elapsed() - (0 if step == "report" else BUILT_IN["report"])
        if step == "build":  # a build stopped short measures nothing: it may overrun into the steps
            return min(BUILD_LIMIT, left)
        return min(budget, left)

    def record(self, step, budget, took, status, why=""):
        self.results.append((step, budget, took, status, why))
        self.status[step] = status
        self.note(f"{step}: {status}" + (f" ({why})" if why else ""))

    def note(self, line):
        self.notes.append(f"- {line}")
        log(f"== {line}")

    def begin(self, step, budget):
        limit = self.limit_for(step, budget)
        log()
        log(f"## {step}: budget {budget} s, limit {max(limit, 0):.0f} s, {self.elapsed():.0f} s into the "
            + ("dry run" if self.dry else "check"))
        if limit < MIN_STEP:
            self.record(step, budget, 0, SKIPPED, "out of time")
            return None
        return limit

    def exit_status(self):
        statuses = [r[3] for r in self.results]
        if FAILED in statuses:
            return 1
        if PARTIAL in statuses or SKIPPED in statuses:
            return 3
        return 0

    def verdict(self):
        status = self.exit_status()
        what = "dry run" if self.dry else "GPU check"
        if status == 0:
            return f"{what}: ok, every step " + ("planned and built (exit 0)" if self.dry else
                                                   "measured what it names (exit 0)")
        kinds = (FAILED,) if status == 1 else (PARTIAL, SKIPPED)
        named = "; ".join(f"{r[0]} {r[3]}" + (f" ({r[4]})" if r[4] else "") for r in self.results if r[3] in kinds)
        word = "FAILED" if status == 1 else "PARTIAL"
        return f"{what}: {word} (exit {status}): {named}"[:1500]

    # ---- preflight, libraries, configure, build -------------------------------------------------
    def preflight(self):
        """One line for each tool the build needs that is missing or too old; False if any."""
        problems = []
        cmake = shutil.which("cmake")
        if not cmake:
            problems.append("cmake is not installed (CMake 3.25 or newer is needed)")
        else:
            text = subprocess.run([cmake, "--version"], capture_output=True, text=True).stdout
            m = re.search(r"(\d+)\.(\d+)", text)
            if m and (int(m.group(1)), int(m.group(2))) < (3, 25):
                problems.append(f"CMake {m.group(0)} is older than the 3.25 this project needs (its presets)")
        if not shutil.which("ninja"):
            problems.append("ninja is not installed (the presets use the Ninja generator)")
        if not shutil.which("nvcc"):
            problems.append("nvcc is not on the PATH (the cuda preset needs the CUDA Toolkit)")
        for p in problems:
            self.note(f"build: {p}")
        return not problems

    def carried_libraries(self):
        """CMake arguments for the libraries carried in .deps/ (gpu_deps.py), or [] for the system's."""
        if self.args.system_deps:
            self.note("libraries: the system's (--system-deps)")
            return []
        debs = gpu_deps.deb_files(os.path.join(ROOT, ".deps"))
        if not debs:
            self.note("libraries: the system's (no .deb files in .deps/)")
            return []
        prefix = os.path.join(ROOT, "build", "gpu-deps")
        try:
            gpu_deps.unpack(debs, prefix)
            args = gpu_deps.cmake_args(prefix)
            problem = gpu_deps.probe(prefix, os.path.join(prefix, "probe"))
        except gpu_deps.DepsError as e:
            problem, args = str(e), []
        if problem:
            self.note(f"libraries: the carried ones (Debian 12, .deps/) cannot be used on this machine: {problem}; "
                      "trying the system's")
            return []
        self.note(f"libraries: the {len(debs)} Debian 12 packages carried in .deps/, unpacked into build/gpu-deps "
                  "(fmt header-only, Boost.Context static)")
        return args

    def configure(self, limit):
        command = ["cmake", "--preset", "cuda", "-B", self.build_dir] + self.cmake_args
        if self.dry:
            command.append(f"-DCMAKE_CUDA_ARCHITECTURES={DRY_RUN_ARCH}")  # no GPU here to build "native" for
        status, _ = run(command, limit, os.path.join(self.work, "configure.log"))
        if status != 0:
            with open(os.path.join(self.work, "configure.log"), errors="replace") as f:
                lines = [line.rstrip() for line in f if "Error" in line or "not found" in line or "was not" in line]
            why = lines[0][:200] if lines else ("timed out" if status is None else f"exit {status}")
            return f"configure FAILED: {why} (configure.log)"
        return None

    def load_manifest(self):
        path = os.path.join(self.build_dir, "gpu_check.json")
        try:
            with open(path) as f:
                manifest = json.load(f)
        except (OSError, ValueError) as e:
            return None, f"cannot read {path}: {e}"
        return manifest, None

    def manifest_problems(self, manifest):
        """What is wrong with the manifest against ctest and the 8-file rule ([] when nothing)."""
        problems = gpu_test_problems(manifest, self.build_dir)
        if not manifest.get("gpu_path"):
            return problems + ["the build has no GPU path (the configure found no nvcc, or FA_CUDA=OFF)"]
        return problems + step_problems(manifest)
    @staticmethod
    def clock():
        return time.monotonic(), cpu_seconds() + self_cpu_seconds()

    def serial_row(self, what, clock):
        """A row of the build table for work that runs one thing at a time: as long on 16 cores as
        its CPU time here (at this machine's speed per core); on the GPU machine, as measured."""
        wall, cpu = time.monotonic() - clock[0], cpu_seconds() + self_cpu_seconds() - clock[1]
        there = cpu if self.dry else wall
        self.build_rows.append((what, wall, cpu, there, there))

    def build(self, targets, limit, log_name):
        """Builds `targets`; returns (status, wall s, CPU s, {output: seconds} of what it built)."""
        ninja_log = os.path.join(self.build_dir, ".ninja_log")
        seen = os.path.getsize(ninja_log) if os.path.exists(ninja_log) else 0
        command = ["cmake", "--build", self.build_dir, "-j", str(self.args.jobs), "--target"] + targets
        cpu0 = cpu_seconds()
        status, wall = run(command, limit, os.path.join(self.work, log_name))
        cpu = cpu_seconds() - cpu0
        built = {}
        if os.path.exists(ninja_log):
            with open(ninja_log) as f:
                f.seek(seen if seen <= os.path.getsize(ninja_log) else 0)
                for line in f:
                    fields = line.rstrip("\n").split("\t")
                    if len(fields) >= 4 and fields[0].isdigit():
                        built[fields[3]] = (int(fields[1]) - int(fields[0])) / 1000
        return status, wall, cpu, built

    def step_build(self):
        budget = BUILT_IN["build"]
        limit = self.begin("build", budget)
        start = time.monotonic()
        if self.args.no_build:
            manifest, problem = self.load_manifest()
        else:
            if not self.preflight():
                self.record("build", budget, 0, FAILED, "a tool the build needs is missing")
                return False
            clock = self.clock()
            self.cmake_args = self.carried_libraries()
            self.serial_row("libraries (unpack, probe)", clock)
            clock = self.clock()
            problem = self.configure(limit)
            self.serial_row("configure", clock)
            manifest = None
            if not problem:
                manifest, problem = self.load_manifest()
        if not problem:
            problems = self.manifest_problems(manifest)
            for p in problems:
                self.note(f"manifest: {p}")
            problem = f"{len(problems)} problem(s) with what the check would build and run" if problems else None
        if problem:
            self.record("build", budget, time.monotonic() - start, FAILED, problem)
            return False
        self.manifest = manifest
        if not self.args.no_build:
            problem = self.build_all(manifest, limit - (time.monotonic() - start))
            if problem:
                self.record("build", budget, time.monotonic() - start, FAILED, problem)
                return False
        missing = [name for name, path in manifest["files"].items() if not os.path.exists(path)]
        if missing:
            self.record("build", budget, time.monotonic() - start, FAILED, "not built: " + ", ".join(missing))
            return False
        gpu = self.gpu_name()
        self.record("build", budget, time.monotonic() - start, OK,
                    f"{len(manifest['files'])} programs" + ("" if self.args.no_build else f", {self.args.jobs} jobs") +
                    (" (existing build, --no-build)" if self.args.no_build else "") + (f"; {gpu}" if gpu else ""))
        return True

    def build_all(self, manifest, limit):
        """The real run builds gpu_check at once; the dry run builds each step's share in turn and
        times it. Returns None or what failed."""
        if not self.dry:
            status, wall, cpu, _ = self.build([manifest["build_target"]], limit, "build.log")
            self.build_rows.append(("the programs", wall, cpu, wall, wall))
            if status != 0:
                return self.build_failure(status, "build.log", wall)
            return None
        shares = [("gpu-tests", manifest["gpu_tests"])]
        shares += [(s["name"], s["targets"]) for s in manifest["steps"]]
        shares += [("report", [manifest["figures"]])]
        end = time.monotonic() + limit
        edges = ninja_edges(self.build_dir)
        everything = {}
        for step, targets in shares:
            if not targets:
                continue
            status, wall, cpu, built = self.build(targets, end - time.monotonic(), f"build-{step}.log")
            self.build_rows.append((step, wall, cpu) + self.on_more_cores(edges, built, cpu))
            everything.update({k: v * cpu / max(sum(built.values()), 1e-9) for k, v in built.items()})
            log(f"   built {step}'s share in {wall:.0f} s ({cpu:.0f} CPU-s)")
            if status != 0:
                return self.build_failure(status, f"build-{step}.log", wall)
        compiled = [r for r in self.build_rows if r[0] in {s for s, _ in shares}]
        cpu = sum(r[2] for r in compiled)
        low, high = self.on_more_cores(edges, everything, cpu)
        self.build_rows.append(("the programs all at once (as the check builds them)", sum(r[1] for r in compiled),
                                cpu, low, high))
        before = [r for r in self.build_rows if r not in compiled][:2]  # the libraries and the configure
        low += sum(r[3] for r in before)
        high += sum(r[4] for r in before)
        self.build_rows.append(("the build step (libraries, configure, programs)",
                                sum(r[1] for r in before + compiled), sum(r[2] for r in before) + cpu, low, high))
        self.note(f"build: {cpu:.0f} CPU-s of compiling; on {CORES_THERE} cores the build step between {low:.0f} and "
                  f"{high:.0f} s at this machine's speed per core"
                  + (f", OVER its budget of {BUILT_IN['build']} s" if high > BUILT_IN["build"] else
                     f", within its budget of {BUILT_IN['build']} s"))
        return None

    @staticmethod
    def on_more_cores(edges, built, cpu):
        """(at least, at most) seconds the builds in `built` take on CORES_THERE cores: each edge's
        time here scaled to its share of the CPU time; at least the longest chain of them or the CPU
        time spread over the cores, at most their sum (Graham's bound for any greedy schedule)."""
        total = sum(built.values())
        scale = cpu / total if total > 0 else 0.0
        chain = critical_path(edges, {k: v * scale for k, v in built.items()})
        return max(chain, cpu / CORES_THERE), chain + cpu / CORES_THERE

    def build_failure(self, status, log_name, wall):
        path = os.path.join(self.work, log_name)
        errors = []
        with open(path, errors="replace") as f:
            for line in f:
                if "error" in line.lower() or "FAILED" in line:
                    errors.append(line.rstrip())
        for line in errors[:20]:
            log(f"   {line[:200]}")
        if status is None:
            return f"timed out after {wall:.0f} s ({log_name})"
        linker = [e for e in errors if "GLIBC" in e or "undefined reference" in e]
        if linker and self.cmake_args:
            return f"the carried libraries do not link here: {linker[0][:160]} ({log_name})"
        return f"exit {status}: {errors[0][:160] if errors else 'see ' + log_name}"

    def gpu_name(self):
        if not shutil.which("nvidia-smi"):
            return ""
        r = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                           capture_output=True, text=True)
        return r.stdout.strip().splitlines()[0] if r.returncode == 0 and r.stdout.strip() else ""

    # ---- gpu-tests ------------------------------------------------------------------------------
    def step_gpu_tests(self):
        budget = BUILT_IN["gpu-tests"]
        limit = self.begin("gpu-tests", budget)
        if limit is None:
            return
        path = os.path.join(self.work, "ctest-gpu.log")
        if self.dry:
            # Every gpu test starts and lists its test cases (no device needed: tests/main.cpp).
            bad = []
            for test in self.manifest["gpu_tests"]:
                if not list_cases(self.manifest["files"][test], []):
                    bad.append(test)
            self.record("gpu-tests", budget, 0, FAILED if bad else OK,
                        ("cannot list: " + ", ".join(bad)) if bad else
                        f"{len(self.manifest['gpu_tests'])} gpu tests built and listed; ctest -L gpu matches")
            return
        status, took = run(["ctest", "--test-dir", self.build_dir, "-L", "gpu", "-j", "8", "--output-on-failure",
                            "--timeout", str(int(limit))], limit + 5, path)
        with open(path, errors="replace") as f:
            text = f.read()
        outcome = re.findall(r"Test\s+#\d+: (\S+) \.+\**\s*([A-Za-z ]+?)\s+[\d.]+ sec", text)
        bad = [f"{name} {what.strip()}" for name, what in outcome if what.strip() not in ("Passed", "Skipped")]
        skipped = [name for name, what in outcome if what.strip() == "Skipped"]
        summary = re.search(r"\d+% tests passed.*", text)
        summary = summary.group(0) if summary else "no ctest summary"
        for line in re.findall(r"^.*gpu_test.*(?:Passed|Failed|Skipped|Not Run|Timeout|Exception).*$", text, re.M):
            log(f"   {line.strip()}")
        if status is None:
            self.record("gpu-tests", budget, took, PARTIAL, f"out of time: {summary}")
        elif bad or (status != 0 and not skipped):
            self.record("gpu-tests", budget, took, FAILED, f"{summary}: " + ", ".join(bad[:6]))
        elif skipped:
            why = re.search(r"SKIPPED: (.*)", text)
            self.record("gpu-tests", budget, took, SKIPPED,
                        f"{len(skipped)} skipped: {why.group(1) if why else 'the tests saw no GPU'}")
        elif not outcome:
            self.record("gpu-tests", budget, took, FAILED, f"ctest ran no test: {summary}")
        else:
            self.record("gpu-tests", budget, took, OK, summary)

    # ---- sanitizer ------------------------------------------------------------------------------
    def step_sanitizer(self):
        budget = BUILT_IN["sanitizer"]
        limit = self.begin("sanitizer", budget)
        if limit is None:
            return
        tests = self.manifest["sanitizer_tests"]
        flt = self.manifest["sanitizer_filter"]
        files = self.manifest["files"]
        if self.dry:
            bad = [test for test in tests if not list_cases(files[test], [flt])]
            tool = shutil.which("compute-sanitizer")
            self.record("sanitizer", budget, 0, FAILED if bad else OK,
                        (f"no {flt} test case in: " + ", ".join(bad)) if bad else
                        f"{len(tests)} tests x {len(SANITIZER_TOOLS)} tools planned"
                        + ("" if tool else "; compute-sanitizer is not installed here"))
            return
        if not shutil.which("compute-sanitizer"):
            self.record("sanitizer", budget, 0, SKIPPED, "compute-sanitizer is not installed")
            return
        from concurrent.futures import ThreadPoolExecutor
        end = time.monotonic() + limit
        runs = [(tool, test) for tool in SANITIZER_TOOLS for test in tests]
        start = time.monotonic()

        def sanitize(tool, test):
            seconds = end - time.monotonic()
            if seconds < MIN_STEP:
                return tool, test, SKIPPED, "out of time"
            path = os.path.join(self.work, f"sanitizer-{tool}-{test}.log")
            env = dict(os.environ)
            if tool == "initcheck":
                env["SIMT_POISON"] = "0"  # poisoned memory reads as written: initcheck would see nothing
            status, _ = run(["compute-sanitizer", "--tool", tool, "--error-exitcode", "1", files[test], flt,
                             "--warn", "NoTests"], seconds, path, env=env)
            with open(path, errors="replace") as f:
                text = f.read()
            tool_summary = re.findall(r"(?:ERROR|RACECHECK) SUMMARY: .*", text)
            catch = re.findall(r"All tests passed.*|test cases?:.*", text)
            tool_summary = tool_summary[-1] if tool_summary else "no summary"
            catch = catch[-1] if catch else "no Catch2 summary"
            if status is None:
                return tool, test, PARTIAL, f"out of time after {seconds:.0f} s (not clean: incomplete)"
            machine = re.search(r"Internal Sanitizer Error.*|.*LibraryNotLoaded.*", text)
            if machine and not catch.startswith("All tests passed"):  # the tool, not the program
                return tool, test, SKIPPED, f"compute-sanitizer cannot run here: {machine.group(0).strip()[:160]}"
            if status == 0 and re.search(r"(^|[^0-9])0 errors", tool_summary) and catch.startswith("All tests passed"):
                return tool, test, OK, f"{tool_summary}; {catch}"
            return tool, test, FAILED, f"exit {status}; {tool_summary}; {catch} (sanitizer-{tool}-{test}.log)"

        with ThreadPoolExecutor(max_workers=SANITIZER_PARALLEL) as pool:
            verdicts = list(pool.map(lambda r: sanitize(*r), runs))
        for tool, test, status, why in verdicts:  # every run in the log; those not clean in the summary too
            line = f"compute-sanitizer {tool} {test}: {status if status != OK else 'clean'} ({why})"
            log(f"   {line}")
            if status != OK:
                self.notes.append(f"  - {line}")
        statuses = [v[2] for v in verdicts]
        clean = statuses.count(OK)
        if FAILED in statuses:
            worst = FAILED
        elif clean == 0:
            worst = SKIPPED  # not one run could be made here
        else:
            worst = OK if clean == len(runs) else PARTIAL
        why = f"{clean} of {len(runs)} runs clean"
        if worst != OK:
            why += ": " + ", ".join(f"{v[0]} {v[1]} {v[2]}" for v in verdicts if v[2] != OK)[:300]
        self.record("sanitizer", budget, time.monotonic() - start, worst, why)

    # ---- the steps of the manifest --------------------------------------------------------------
    def expand(self, words, step):
        logs = os.path.join(self.work, step)
        os.makedirs(logs, exist_ok=True)
        out = []
        for w in words:
            w = w.replace("{logs}", logs)
            for m in re.findall(r"\{out:([A-Za-z0-9_-]+)\}", w):
                w = w.replace("{out:%s}" % m, self.outputs.get(m, os.path.join(self.work, m + ".md")))
            out.append(w)
        if out and out[0] == "python3":
            out[0] = shutil.which("python3") or sys.executable
        return out

    def program_problem(self, words):
        """Why the step's program cannot run (None when it can): ours missing is a failure."""
        program = words[0]
        if os.path.isabs(program):
            return None if os.access(program, os.X_OK) else f"not built: {program}"
        if not shutil.which(program):
            return f"{program} is not installed"
        if os.path.basename(program).startswith("python") and len(words) > 1 and words[1].endswith(".py"):
            if not os.path.exists(os.path.join(ROOT, words[1])):
                return f"no such script: {words[1]}"
        return None

    def step_manifest(self, step):
        name, budget = step["name"], step["budget"]
        parent = step["beside"]
        if parent and self.status.get(parent) not in (OK, PARTIAL):
            self.record(name, budget, 0, SKIPPED, f"{parent} did not measure")
            return
        limit = self.begin(name, budget)
        if limit is None:
            return
        words = self.expand(step["plan" if self.dry else "command"], name)
        out = os.path.join(self.work, name + ".md")
        err = os.path.join(self.work, name + ".err")
        self.outputs[name] = out
        problem = self.program_problem(words)
        if problem:
            # Our own program or script missing is a failure; a tool that is not installed is not.
            mine = problem.startswith(("not built", "no such script")) or self.dry
            self.record(name, budget, 0, FAILED if mine else SKIPPED, problem)
            return
        status, took = run(words, limit, out, err)
        with open(out, errors="replace") as f:
            text = f.read()
        rows = len(table_rows(text))
        if self.dry:
            if status == 0 and text.strip():
                self.record(name, budget, took, OK, text.strip().splitlines()[-1][:200])
            else:
                self.record(name, budget, took, FAILED, f"its plan failed (exit {status}): {last_line(err)}")
        elif status == 0:
            self.record(name, budget, took, OK if text.strip() else FAILED,
                        f"{rows} rows" if text.strip() else "printed nothing")
        elif status == SKIP_STATUS:
            self.record(name, budget, took, SKIPPED, last_line(err, "it cannot measure here"))
        elif status is None:
            if rows:
                self.record(name, budget, took, PARTIAL, f"out of time after {rows} rows (kept)")
            else:
                self.record(name, budget, took, SKIPPED, f"out of time after {took:.0f} s, before its first row")
        else:
            self.record(name, budget, took, FAILED, f"exit {status}: {last_line(err)} ({name}.err)")

    # ---- report ---------------------------------------------------------------------------------
    def versions(self):
        if getattr(self, "_versions", None):
            return self._versions
        cuda = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout if shutil.which("nvcc") else ""
        m = re.search(r"release ([0-9.]+)", cuda)
        # torch's version from its package's metadata: importing torch would take seconds.
        torch = subprocess.run([shutil.which("python3") or sys.executable, "-c",
                                "import importlib.metadata as m; print(m.version('torch'))"], capture_output=True, text=True)
        self._versions = (m.group(1) if m else "unknown",
                          torch.stdout.strip() if torch.returncode == 0 else "not installed")
        return self._versions

    def write_report(self):
        """docs/benchmarks.md: the part above MARKER kept, the measured part below it rewritten."""
        try:
            with open(os.path.join(ROOT, "docs", "benchmarks.md")) as f:
                kept = f.read()
        except OSError:
            kept = "# Benchmarks\n\n"
        kept = kept.split(MARKER)[0].rstrip() + "\n\n" + MARKER + "\n"
        cuda, torch = self.versions()
        today = datetime.date.today().isoformat()
        gpu = self.gpu_name() or ("no GPU (a dry run: plans, not measurements)" if self.dry else "unknown GPU")
        parts = [kept, f"## The last run of the GPU check: {today}, {gpu}\n",
                 f"Written by `scripts/gpu_check.sh{' --dry-run' if self.dry else ''}` on {today}: {gpu} (name, "
                 f"driver), CUDA {cuda}, torch {torch}; every figure below is from that one run. How each is "
                 "measured is said above and in each section's first lines.\n"]
        for step in self.manifest["steps"]:
            if not step["title"]:
                continue
            # A section whose step did not measure says so in its heading (make_figures reads the
            # DRAM table by its heading, and finds none where none was measured).
            measured = self.status.get(step["name"]) in (OK, PARTIAL)
            prefix = "Planned: " if self.dry else "" if measured else "Not measured: "
            parts.append(f"## {prefix}{step['title']}\n")
            for s in [step] + [t for t in self.manifest["steps"] if t["beside"] == step["name"] and not t["title"]]:
                status = self.status.get(s["name"])
                text = ""
                if s["name"] in self.outputs and os.path.exists(self.outputs[s["name"]]):
                    with open(self.outputs[s["name"]], errors="replace") as f:
                        text = f.read().strip()
                if status in (OK, PARTIAL) and text and not self.dry and s is not step and text.startswith("|"):
                    parts[-1] = parts[-1].rstrip("\n") + "\n" + text + "\n"  # rows that continue the table
                elif status in (OK, PARTIAL) and text:
                    parts.append((f"`{s['name']}` would run: " if self.dry else "") + text + "\n")
                else:
                    why = next((r[4] for r in self.results if r[0] == s["name"]), "it did not run")
                    parts.append(f"Not measured by {s['name']}: {status or 'not run'} ({why}).\n")
        parts.append("## The steps of that run\n")
        parts.append("\n".join(self.notes) + "\n")
        parts.append(self.step_table() + "\n")
        text = "\n".join(parts)
        os.makedirs(os.path.dirname(self.report), exist_ok=True)
        with open(self.report, "w") as f:
            f.write(text)

    def figures(self):
        """The figures' folder beside the report: docs/figures for docs/benchmarks.md."""
        return os.path.join(os.path.dirname(self.report), "figures")

    def step_table(self):
        lines = ["| step | budget s | took s | result |", "|---|---|---|---|"]
        for step, budget, took, status, why in self.results:
            lines.append(f"| {step} | {budget} | {took:.0f} | {status}{': ' + why if why else ''} |".replace("\n", " "))
        lines.append(f"| total | {TOTAL_BUDGET} | {self.elapsed():.0f} | exit {self.exit_status()} |")
        return "\n".join(lines)

    def build_table(self):
        if not self.dry:
            lines = [f"| the build step | wall s (-j{self.args.jobs}) | CPU s |", "|---|---|---|"]
            return "\n".join(lines + [f"| {r[0]} | {r[1]:.0f} | {r[2]:.0f} |" for r in self.build_rows])
        lines = [f"| what is built | wall s here (-j{self.args.jobs}) | CPU s | on {CORES_THERE} cores, s |",
                 "|---|---|---|---|"]
        for step, wall, cpu, low, high in self.build_rows:
            there = f"{low:.0f}" if round(low) == round(high) else f"{low:.0f} to {high:.0f}"
            lines.append(f"| {step} | {wall:.0f} | {cpu:.0f} | {there} |")
        return "\n".join(lines)

    def step_report(self):
        budget = BUILT_IN["report"]
        log()
        log(f"## report: budget {budget} s, {self.elapsed():.0f} s into the " + ("dry run" if self.dry else "check"))
        limit = max(self.limit_for("report", budget), MIN_STEP)  # the report always runs: its share is kept
        start = time.monotonic()
        self.write_report()
        figures = self.figures()
        make_figures = self.manifest["files"][self.manifest["figures"]]
        status, _ = run([make_figures, figures, "--benchmarks", self.report,
                         "--cpu-benchmarks", os.path.join(ROOT, "docs", "benchmarks-cpu.md")],
                        limit, os.path.join(self.work, "figures.log"))
        if status != 0:
            self.record("report", budget, time.monotonic() - start, FAILED,
                        f"the figures were not redrawn (exit {status}, figures.log)")
        else:
            written = f"{os.path.relpath(self.report, ROOT)} and {os.path.relpath(self.figures(), ROOT)}/ written"
            self.record("report", budget, time.monotonic() - start, OK,
                        written + ("" if self.dry else ": commit both"))
        self.write_report()  # again, with the report's own row

    # ---- what comes back ------------------------------------------------------------------------
    def pack(self, summary):
        """Writes the files that come back into $OUT; returns what breaks the rule ([] when nothing)."""
        os.makedirs(self.out, exist_ok=True)
        step_outputs = []
        for step in self.manifest["steps"] if self.manifest else []:
            for name in step["outputs"]:
                step_outputs.append(os.path.join(self.work, step["name"], name))
        wanted = len(FIXED_OUTPUTS) + len(step_outputs)
        if wanted > MAX_FILES:
            return [f"the check would write {wanted} files under $OUT; at most {MAX_FILES} come back"]
        if os.path.exists(self.report):
            shutil.copyfile(self.report, os.path.join(self.out, "benchmarks.md"))
        with open(os.path.join(self.out, "summary.txt"), "w") as f:
            f.write(summary + "\n")
        figures = self.figures()
        if os.path.exists(os.path.join(figures, "hbm-traffic.svg")):
            shutil.copyfile(os.path.join(figures, "hbm-traffic.svg"), os.path.join(self.out, "hbm-traffic.svg"))
        for path in step_outputs:
            if os.path.exists(path):
                shutil.copyfile(path, os.path.join(self.out, os.path.basename(path)))
        with tarfile.open(os.path.join(self.out, "logs.tar.gz"), "w:gz") as tar:
            for folder, _, names in os.walk(self.work):
                for n in sorted(names):
                    path = os.path.join(folder, n)
                    if (os.path.commonpath([path, self.out]) != self.out and os.path.getsize(path) < 4 << 20
                            and "figures" not in os.path.relpath(path, self.work).split(os.sep)[:1]):
                        tar.add(path, arcname=os.path.join("gpu-check", os.path.relpath(path, self.work)))
        return output_rule_problems(self.out)

    def summary(self):
        """The printed summary: the tables as room allows, then the notes, the step table and the
        verdict, in at most SUMMARY_CHARS characters."""
        tail = ["", "\n".join(self.notes), "", self.step_table()]
        if self.build_rows:
            tail += ["", self.build_table()]
        tail += ["", self.verdict()]
        tail_text = "\n".join(tail)
        room = SUMMARY_CHARS - len(tail_text) - 200
        tables = []
        for step in self.manifest["steps"] if self.manifest and not self.dry else []:
            path = self.outputs.get(step["name"])
            if not path or not os.path.exists(path) or self.status.get(step["name"]) not in (OK, PARTIAL):
                continue
            with open(path, errors="replace") as f:
                rows = [line for line in f.read().splitlines() if line.startswith("|")]
            block = "\n".join([f"{step['name']}:"] + rows)
            if len(block) + 1 <= room:
                tables.append(block)
                room -= len(block) + 1
            else:
                tables.append(f"{step['name']}: {len(table_rows(chr(10).join(rows)))} rows in benchmarks.md")
                room -= 60
        text = "\n".join(tables) + "\n" + tail_text if tables else tail_text.lstrip("\n")
        if len(text) > SUMMARY_CHARS:  # the notes are long: keep the end, where the verdict is
            text = text[-SUMMARY_CHARS:]
            text = text[text.index("\n") + 1:]
        return text

    # ---- the whole check ------------------------------------------------------------------------
    def main(self):
        shutil.rmtree(self.work, ignore_errors=True)
        os.makedirs(self.work, exist_ok=True)
        budgets = "; ".join(f"{k} {v} s" for k, v in BUILT_IN.items())
        log(f"{'Dry run of the GPU check' if self.dry else 'GPU check'}: "
            f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {TOTAL_BUDGET} s in all ({budgets}; "
            f"the manifest's steps their own); logs in {self.work}, files back in {self.out}")
        if self.step_build():
            self.step_gpu_tests()
            self.step_sanitizer()
            for step in self.manifest["steps"]:
                self.step_manifest(step)
            self.step_report()
        problems = []
        summary = self.summary()
        problems = self.pack(summary)
        for p in problems:
            self.record("report", 0, 0, FAILED, p)
        if problems:
            summary = self.summary()
            with open(os.path.join(self.out, "summary.txt"), "w") as f:
                f.write(summary + "\n")
        log()
        log(summary)
        return self.exit_status()


def gpu_test_problems(manifest, build_dir):
    """Each gpu test of the manifest, and each test ctest labels gpu, must be a program that the
    target gpu_check builds."""
    problems = []
    files = manifest["files"]
    for test in manifest["gpu_tests"] + manifest["sanitizer_tests"]:
        if test not in files:
            problems.append(f"the GPU test {test} is not among what gpu_check builds")
    # ctest's own list of gpu tests: each must run a program that gpu_check builds.
    listed = subprocess.run(["ctest", "--test-dir", build_dir, "--show-only=json-v1", "-L", "gpu"],
                            capture_output=True, text=True)
    try:
        tests = json.loads(listed.stdout)["tests"]
    except (ValueError, KeyError):
        problems.append(f"ctest --show-only=json-v1 -L gpu gave no list: {listed.stderr.strip()[:200]}")
        tests = []
    built = {os.path.realpath(p) for p in files.values()}
    for test in tests:
        command = test.get("command") or []  # (ctest leaves it out where the program is not built yet)
        if test["name"] not in manifest["gpu_tests"]:
            problems.append(f"ctest's gpu test {test['name']} is not among the tests gpu_check builds and runs "
                            "(declare it with add_chapter_test(... GPU))")
        elif command and os.path.realpath(command[0]) not in built:
            problems.append(f"ctest's gpu test {test['name']} runs {command[0]}, which gpu_check does not build")
    if not tests and manifest.get("gpu_tests_built", True):
        problems.append("ctest -L gpu lists no test")
    return problems


def step_problems(manifest):
    """Steps that name an unknown step or an unbuilt program, budgets over the check's, outputs
    over the 8 files that come back."""
    problems = []
    files = manifest["files"]
    names = set(BUILT_IN)
    budgets = sum(BUILT_IN.values())
    declared = list(FIXED_OUTPUTS)
    for step in manifest["steps"]:
        if step["name"] in names:
            problems.append(f"two steps are named {step['name']}")
        if step["beside"] and step["beside"] not in names:
            problems.append(f"step {step['name']} stands beside {step['beside']}, which is not an earlier step")
        for t in step["targets"]:
            if t not in files:
                problems.append(f"step {step['name']} needs {t}, which gpu_check does not build")
        names.add(step["name"])
        budgets += step["budget"]
        declared += step["outputs"]
    if budgets > TOTAL_BUDGET:
        problems.append(f"the steps' budgets add up to {budgets} s, more than the check's {TOTAL_BUDGET} s")
    if len(declared) > MAX_FILES:
        problems.append(f"the check would write {len(declared)} files under $OUT ({', '.join(declared)}); "
                        f"at most {MAX_FILES} come back")
    for name in declared:
        if not NAME_RULE.match(name):
            problems.append(f"the output {name!r} has characters that do not come back (letters, digits, . _ -)")
    return problems


def check_manifest(build_dir):
    """--check-manifest: what the check would build and run, checked in an existing build (a CPU
    test: tests/CMakeLists.txt). Returns the exit status."""
    path = os.path.join(build_dir, "gpu_check.json")
    try:
        with open(path) as f:
            manifest = json.load(f)
    except (OSError, ValueError) as e:
        print(f"gpu_check: cannot read {path}: {e}")
        return 1
    problems = gpu_test_problems(manifest, build_dir)
    if manifest.get("gpu_path"):
        problems += step_problems(manifest)
    for p in problems:
        print(f"gpu_check: {p}")
    steps = ", ".join(s["name"] for s in manifest["steps"]) or "none (no GPU path in this build)"
    print(f"gpu_check: {len(manifest['gpu_tests'])} gpu tests ({len(manifest['sanitizer_tests'])} under "
          f"compute-sanitizer) and {len(manifest['files'])} programs to build; steps: {steps}: "
          + ("ok" if not problems else f"{len(problems)} problem(s)"))
    return 1 if problems else 0


def output_rule_problems(out):
    """What under `out` would not come back whole: more than MAX_FILES files, a file deeper than
    out/a/b/file, a name of other characters, anything that is not a plain file."""
    problems = []
    files = []
    for folder, dirs, names in os.walk(out):
        depth = len(os.path.relpath(folder, out).split(os.sep)) if folder != out else 0
        for n in dirs + names:
            path = os.path.join(folder, n)
            if not NAME_RULE.match(n):
                problems.append(f"{os.path.relpath(path, out)}: a name of characters that do not come back")
            if os.path.islink(path):
                problems.append(f"{os.path.relpath(path, out)}: a link, which does not come back")
        for n in names:
            files.append(os.path.join(folder, n))
            if depth > MAX_DEPTH:
                problems.append(f"{os.path.relpath(os.path.join(folder, n), out)}: deeper than $OUT/a/b/file")
    if len(files) > MAX_FILES:
        problems.append(f"{len(files)} files under $OUT, more than the {MAX_FILES} that come back")
    return problems


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dry-run", action="store_true",
                    help="no GPU needed: build for sm_90, run every step's plan, check the files that would come back")
    ap.add_argument("--no-build", action="store_true", help="use the existing build (its gpu_check.json) as it is")
    ap.add_argument("--build-dir", help="the build tree (default: build/cuda, or build/gpu-check-dry for --dry-run)")
    ap.add_argument("--out", help="where the files that come back go (default: $OUT, else build/gpu-check-out)")
    ap.add_argument("--report", help="the report to write (default: docs/benchmarks.md; for --dry-run, in the build)")
    ap.add_argument("--system-deps", action="store_true", help="configure against the system's libraries even "
                    "where .deps/ holds .deb files")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="build jobs (default: every core)")
    ap.add_argument("--check-manifest", action="store_true",
                    help="only check what the check would build and run against ctest, in --build-dir")
    args = ap.parse_args(argv)
    if args.jobs < 1:
        ap.error("--jobs: at least 1")
    if args.check_manifest:
        if not args.build_dir:
            ap.error("--check-manifest needs --build-dir")
        return check_manifest(os.path.abspath(args.build_dir))
    return Check(args).main()


if __name__ == "__main__":
    sys.exit(main())
