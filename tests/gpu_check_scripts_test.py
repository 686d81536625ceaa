#!/usr/bin/env python3
"""Tests of the table makers and helpers scripts/gpu_check.sh uses, on made-up inputs (no GPU, no
torch, no ncu): what they print must follow from what they read, or the GPU check's report would be
wrong on the one run a lent GPU gives it.

  python3 tests/gpu_check_scripts_test.py        (CTest: gpu_check_scripts, label common)
"""
import contextlib
import csv
import io
import json
import os
import sys
import tarfile
import tempfile
import types
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import gpu_deps  # noqa: E402
import ncu_profile_table  # noqa: E402
import ncu_run  # noqa: E402
import ncu_table  # noqa: E402
import sdpa_reference  # noqa: E402

NCU_COLUMNS = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
               "Block Size", "Grid Size", "Device", "CC", "Section Name", "Metric Name", "Metric Unit",
               "Metric Value"]


def ncu_csv(path, launches):
    """Writes ncu's --csv form: launches = [(kernel name, {metric: (value text, unit)})]."""
    with open(path, "w", newline="") as f:
        f.write("==PROF== Connected to process 1 (a log line ncu mixes into its output)\n")
        w = csv.writer(f, quoting=csv.QUOTE_ALL)
        w.writerow(NCU_COLUMNS)
        for i, (name, metrics) in enumerate(launches):
            for metric, (value, unit) in metrics.items():
                w.writerow([i, 1, "p", "h", name, 1, 7, "(256, 1, 1)", "(4, 2, 1)", 0, "9.0",
                            "Command line profiler metrics", metric, unit, value])


def access(instructions, sectors=None, wavefronts=None, conflicts=None):
    entry = {"instructions": instructions, "bytes": 4 * instructions}
    if sectors is not None:
        entry["sectors"] = sectors
    else:
        entry.update(wavefronts=wavefronts, bank_conflicts=conflicts)
    return entry


class NcuProfileTable(unittest.TestCase):
    def run_table(self, simt_kernels, launches):
        with tempfile.TemporaryDirectory() as d:
            js, cs = os.path.join(d, "p.json"), os.path.join(d, "c.csv")
            with open(js, "w") as f:
                json.dump({"kernels": simt_kernels}, f)
            ncu_csv(cs, launches)
            sys.argv = ["ncu_profile_table.py", "--program", "demo", "--simt", js, "--ncu", cs]
            out = io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
                status = ncu_profile_table.main()
        return status, [line for line in out.getvalue().splitlines() if line.startswith("|")]

    def test_pairs_the_cpu_and_gpu_names_and_divides_by_launches(self):
        simt = [{"kernel": "ch05::cpu::flash_attention_2_kernel<64, 64, 64>", "launches": 2,
                 "global_load": access(200, sectors=800), "global_store": access(20, sectors=80),
                 "shared_load": access(1000, wavefronts=1000, conflicts=0),
                 "shared_store": access(100, wavefronts=300, conflicts=200)}]
        gpu_name = ("void ch05::gpu::flash_attention_2_kernel<(int)64, (int)64, (int)64>"
                    "(const float *, const float *, const float *, float *, float *, int, int, float, bool)")
        metrics = {"l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": ("400", "sector"),
                   "smsp__inst_executed_op_global_ld.sum": ("0.05", "Kinst"),  # 50 after the prefix
                   "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum": ("1,234", "")}
        # A second instance of the same template on both sides: only the full names tell them apart.
        simt.append(dict(simt[0], kernel="ch05::cpu::flash_attention_2_kernel<128, 64, 64>", launches=1))
        other = gpu_name.replace("<(int)64,", "<(int)128,")
        status, rows = self.run_table(simt, [(other, {"l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": ("9", "sector")}),
                                             (gpu_name, metrics)])
        self.assertEqual(status, 0)
        self.assertEqual(len(rows), 8)  # one per kernel and access kind
        self.assertIn("<128,64,64> | global load | 1 / 1 | 200 / - | 800 / 9 |", rows[4])
        rows = rows[:4]
        load = rows[0]
        self.assertIn("ch05::flash_attention_2_kernel<64,64,64>", load)
        self.assertIn("| 2 / 1 |", load)             # launches on each side
        self.assertIn("| 100 / 50 |", load)          # instructions per launch: 200 / 2, 0.05 K
        self.assertIn("| 400 / 400 |", load)         # sectors per launch: 800 / 2, 400 / 1
        self.assertIn("| 100 / 1,234 |", rows[3])    # bank conflicts of the shared stores: 200 / 2
        self.assertIn("| 10 / - |", rows[1])         # a metric ncu did not report: "-"

    def test_a_kernel_ncu_did_not_see_fails(self):
        simt = [{"kernel": "ch04::cpu::scores_kernel", "launches": 1, "global_load": access(1, sectors=1),
                 "global_store": access(1, sectors=1), "shared_load": access(0, wavefronts=0, conflicts=0),
                 "shared_store": access(0, wavefronts=0, conflicts=0)}]
        status, rows = self.run_table(simt, [("ch04::gpu::pv_kernel(const float *)", {})])
        self.assertEqual(status, 1)
        self.assertTrue(all("/ - |" in r for r in rows))

    def test_the_metric_list_names_what_the_table_reads(self):
        for space, op in (("global", "ld"), ("global", "st"), ("shared", "ld"), ("shared", "st")):
            for m in ncu_profile_table.metric_names(space, op):
                if m:
                    self.assertIn(m, ncu_profile_table.ALL_METRICS)
        self.assertIn("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum", ncu_profile_table.ALL_METRICS)


class NcuTableModel(unittest.TestCase):
    def test_reads_the_model_of_the_chapter_kernels_only(self):
        with tempfile.NamedTemporaryFile("w", suffix=".md", delete=False) as f:
            f.write("| kernel | seq_len | head_dim | causal | median ms | TFLOP/s | model MB | runs |\n")
            f.write("|---|---|---|---|---|---|---|---|\n")
            f.write("| naive (ch04) | 4096 | 64 | no | 10.0 | 1.0 | 1.745e+04 | 3 |\n")
            f.write("| flash-attention-2 (ch05) | 4096 | 64 | no | 1.0 | 9.0 | 8724 | 20 |\n")
            f.write("| torch sdpa MATH fwd (float32 in) | 4096 | 64 | no | 2.0 | 5.0 | - | 20 |\n")
        try:
            model = ncu_table.read_model(f.name)
        finally:
            os.unlink(f.name)
        self.assertEqual(model, {("naive", 4096, 64, "no"): "1.745e+04", ("flash", 4096, 64, "no"): "8724"})


class FakeTorch:
    """Just enough of torch for sdpa_reference.main: FLASH refuses float32 as torch does, and every
    call of sdpa takes 2 ms of GPU time, so that a pair of events around a loop of k calls reads 2k ms."""

    def __init__(self):
        self.current = None
        self.calls = 0
        backend = types.SimpleNamespace(MATH="MATH", FLASH_ATTENTION="FLASH_ATTENTION",
                                        EFFICIENT_ATTENTION="EFFICIENT_ATTENTION")  # no CUDNN: an old torch
        fake = self

        @contextlib.contextmanager
        def sdpa_kernel(b):
            fake.current = b
            yield

        def sdpa(q, k, v, is_causal=False):
            if fake.current == "FLASH_ATTENTION" and q.dtype == "float32":
                import warnings
                warnings.warn("Flash attention kernel not used because:")
                warnings.warn("Expected query, key and value to all be of dtype: {Half, BFloat16}.")
                raise RuntimeError("No available kernel. Aborting execution.")
            fake.calls += 1
            return q

        class Tensor:
            def __init__(self, dtype, shape=None):
                self.dtype = dtype
                self.shape = shape

            def all(self):
                return True

        class Event:
            def __init__(self, enable_timing=False):
                self.calls = 0

            def record(self):
                self.calls = fake.calls

            def synchronize(self):
                pass

            def elapsed_time(self, other):
                return 2.0 * (other.calls - self.calls)

        self.torch = types.SimpleNamespace(
            __version__="0-test", float32="float32", bfloat16="bfloat16", float16="float16",
            randn=lambda shape, device=None, dtype=None, requires_grad=False: Tensor(dtype, shape),
            randn_like=lambda t: Tensor(t.dtype), isfinite=lambda t: t,
            autograd=types.SimpleNamespace(grad=lambda out, ins, g: ins),
            cuda=types.SimpleNamespace(is_available=lambda: True, empty_cache=lambda: None, Event=Event),
            backends=types.SimpleNamespace(cuda=types.SimpleNamespace(matmul=types.SimpleNamespace()),
                                           cudnn=types.SimpleNamespace()))
        functional = types.SimpleNamespace(scaled_dot_product_attention=sdpa)
        attention = types.SimpleNamespace(SDPBackend=backend, sdpa_kernel=sdpa_kernel)
        self.torch.nn = types.SimpleNamespace(functional=functional, attention=attention)
        # FlashAttention-3's package: flash_attn_func(q, k, v, causal) on [batch, N, heads, d], 2 ms a
        # call too, returning (O, L) as some of its versions do.
        self.fa3_shapes = []

        def flash_attn_func(q, k, v, causal=False):
            fake.fa3_shapes.append(q.shape)
            fake.calls += 1
            return q, None

        self.fa3 = types.SimpleNamespace(flash_attn_func=flash_attn_func)
        self.modules = {"torch": self.torch, "torch.nn": self.torch.nn,
                        "torch.nn.functional": functional, "torch.nn.attention": attention}


class SdpaReference(unittest.TestCase):
    def run_main(self, *args, fa3=False):
        """sdpa_reference.main on the fake torch; with FlashAttention-3's package (fa3=True) or with
        its import failing (False: a None in sys.modules makes `import` raise ImportError)."""
        fake = self.fake = FakeTorch()
        modules = {**fake.modules, "flash_attn_interface": fake.fa3 if fa3 else None, "flash_attn_3": None}
        saved = {name: sys.modules.get(name) for name in modules}
        sys.modules.update(modules)
        sys.argv = ["sdpa_reference.py", *args]
        out, err = io.StringIO(), io.StringIO()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                status = sdpa_reference.main()
        finally:
            for name, module in saved.items():
                if module is None:
                    sys.modules.pop(name, None)
                else:
                    sys.modules[name] = module
        rows = [line for line in out.getvalue().splitlines() if line.startswith(("| torch", "| FlashAttention-3"))]
        return status, rows, err.getvalue()

    def test_flash_attention_3_is_called_in_its_own_layout_or_said_to_be_missing(self):
        status, rows, err = self.run_main("--seq", "1024", "--head-dim", "128", "--batch", "2", "--heads", "3",
                                          "--dtype", "bf16", "--backend", "fa3", "--columns", "ch10", fa3=True)
        self.assertEqual(status, 0, err)
        self.assertEqual(len(rows), 2)  # causal and not
        self.assertEqual(set(self.fake.fa3_shapes), {(2, 1024, 3, 128)})  # [batch, N, heads, d], its layout
        for r in rows:
            cells = [c.strip() for c in r.strip("|").split("|")]
            self.assertEqual(len(cells), 8)  # chapter 10's columns, the speed-up cell empty
            self.assertEqual(cells[7], "")
            self.assertEqual(float(cells[5]), 2.0)  # the fake's 2 ms a call: its (out, L) pair was taken
        # Without the package (an import that fails): one row that says so, and no failure.
        status, rows, err = self.run_main("--seq", "1024", "--dtype", "bf16", "--backend", "fa3", "--columns", "ch10",
                                          fa3=False)
        self.assertEqual(status, 0)
        self.assertEqual(len(rows), 1)
        self.assertIn("not available: FlashAttention-3 is not installed", rows[0])

    def test_a_refused_backend_prints_a_row_without_a_number(self):
        status, rows, err = self.run_main("--seq", "4096", "--head-dim", "64", "--batch", "4", "--heads", "16",
                                          "--backend", "flash", "math", "--columns", "ch05")
        self.assertEqual(status, 0)  # "not available" is not a failure
        flash = [r for r in rows if "FLASH_ATTENTION" in r]
        math = [r for r in rows if "MATH" in r]
        self.assertEqual(len(flash), 2)  # causal and not
        for r in flash:
            cells = [c.strip() for c in r.strip("|").split("|")]
            self.assertTrue(cells[4].startswith("not available: Expected query"), cells[4])
            self.assertEqual(cells[5:], ["-", "-", "-"])
        for r in math:
            cells = [c.strip() for c in r.strip("|").split("|")]
            self.assertEqual(len(cells), 8)  # chapter 05's columns
            self.assertEqual(float(cells[4]), 2.0)  # the fake's time per call, timed in loops of 5 calls
            # 4 * 4 * 16 * 4096^2 * 64 flops (halved when causal) in 2 ms
            flops = 4 * 4 * 16 * 4096**2 * 64 * (0.5 if cells[3] == "yes" else 1.0)
            self.assertAlmostEqual(float(cells[5]), round(flops / 2e-3 / 1e12, 2))
        self.assertIn("2 timed, 2 not available, 0 failed", err)

    def test_a_torch_without_the_backend_says_so_once_and_backward_counts_3_5_times(self):
        status, rows, _ = self.run_main("--seq", "4096", "--head-dim", "128", "--batch", "4", "--heads", "16",
                                        "--dtype", "bf16", "--backend", "cudnn", "efficient", "--backward")
        self.assertEqual(status, 0)
        cudnn = [r for r in rows if "CUDNN_ATTENTION" in r]
        self.assertEqual(len(cudnn), 1)
        self.assertIn("not available: torch 0-test has no", cudnn[0])
        efficient = [r for r in rows if "EFFICIENT_ATTENTION fwd+bwd" in r]
        cells = [c.strip() for c in efficient[0].strip("|").split("|")]
        self.assertEqual(len(cells), 6)  # chapter 07's columns
        # forward 4 * 4 * 16 * 4096^2 * 128 flops, times 3.5 for forward + backward, in 2 ms
        self.assertAlmostEqual(float(cells[5]), round(3.5 * 4 * 4 * 16 * 4096**2 * 128 / 2e-3 / 1e12, 2))

    def test_the_float32_memory_efficient_row_says_tf32(self):
        self.assertIn("3xTF32", sdpa_reference.arithmetic("efficient", "float32"))
        self.assertIn("TF32 off", sdpa_reference.arithmetic("math", "float32"))


class SdpaTiming(unittest.TestCase):
    def measure(self, **kw):
        """sdpa_reference.measure on the fake torch, whose calls take 2 ms each: (ms, runs, calls)."""
        fake = FakeTorch()

        def call():
            fake.torch.nn.functional.scaled_dot_product_attention(FakeTorchTensor(), None, None)

        ms, runs = sdpa_reference.measure(fake.torch, call, **kw)
        return ms, runs, fake.calls

    def test_a_run_is_a_loop_of_calls_between_two_events(self):
        # Loops of 5 calls make the 10 ms a run aims at; 1000 ms would fit 100 runs, 20 are asked.
        self.assertEqual(self.measure(warmup=3, runs=20, budget_ms=1000), (2.0, 20, 3 + 20 * 5))

    def test_the_budget_bounds_the_runs(self):
        # 12 ms fit one run of 5 calls (10 ms), never less than one.
        self.assertEqual(self.measure(warmup=1, runs=20, budget_ms=12), (2.0, 1, 1 + 5))

    def test_the_plan_needs_no_torch(self):
        sys.argv = ["sdpa_reference.py", "--plan", "--dtype", "bf16", "fp16", "--backend", "flash", "cudnn",
                    "--seq", "1024", "4096", "--head-dim", "64", "128"]
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.assertEqual(sdpa_reference.main(), 0)
        self.assertIn("plan: 32 rows of torch sdpa fwd", out.getvalue())


class FakeTorchTensor:
    dtype = "float32"


class NcuRun(unittest.TestCase):
    def test_what_the_machine_cannot_give_is_told_apart(self):
        self.assertIn("counters unavailable on this machine (ncu: LibraryNotLoaded",
                      ncu_run.unavailable_reason("==ERROR== Failed to load: LibraryNotLoaded"))
        self.assertIn("ERR_NVGPUCTRPERM", ncu_run.unavailable_reason("==ERROR== ERR_NVGPUCTRPERM - The user ..."))
        self.assertIsNone(ncu_run.unavailable_reason("==ERROR== An error occurred while trying to profile"))

    def test_no_ncu_is_not_measurable_and_a_failing_one_fails(self):
        with tempfile.TemporaryDirectory() as d:
            saved = os.environ["PATH"]
            try:
                os.environ["PATH"] = d
                with self.assertRaises(ncu_run.NotMeasurable):
                    ncu_run.run_ncu("m", ["prog"], os.path.join(d, "c.csv"), os.path.join(d, "l.log"))
                ncu = os.path.join(d, "ncu")
                with open(ncu, "w") as f:
                    f.write("#!/bin/sh\necho '==ERROR== the application returned an error' >&2\nexit 1\n")
                os.chmod(ncu, 0o755)
                with self.assertRaises(ncu_run.NcuFailed):
                    ncu_run.run_ncu("m", ["prog"], os.path.join(d, "c.csv"), os.path.join(d, "l.log"))
            finally:
                os.environ["PATH"] = saved


def ar_member(name, data):
    """One member of an ar archive (the .deb container): a 60-byte header, the data, padding."""
    header = f"{name + '/':<16}{0:<12}{0:<6}{0:<6}{'100644':<8}{len(data):<10}`\n".encode()
    return header + data + (b"\n" if len(data) % 2 else b"")


class GpuDeps(unittest.TestCase):
    def test_a_deb_unpacks_without_dpkg(self):
        with tempfile.TemporaryDirectory() as d:
            payload = os.path.join(d, "payload")
            os.makedirs(os.path.join(payload, "usr", "lib", "cmake", "fmt"))
            with open(os.path.join(payload, "usr", "lib", "cmake", "fmt", "fmt-config.cmake"), "w") as f:
                f.write("# fmt\n")
            data = io.BytesIO()
            with tarfile.open(fileobj=data, mode="w:xz") as tar:
                tar.add(os.path.join(payload, "usr"), arcname="./usr")
            deb = os.path.join(d, "libfmt-dev_9.1.0_amd64.deb")
            with open(deb, "wb") as f:
                f.write(b"!<arch>\n" + ar_member("debian-binary", b"2.0\n") +
                        ar_member("control.tar.xz", b"x" * 7) + ar_member("data.tar.xz", data.getvalue()))
            saved = gpu_deps.shutil.which
            try:
                gpu_deps.shutil.which = lambda name: None if name == "dpkg-deb" else saved(name)
                gpu_deps.unpack([deb], os.path.join(d, "prefix"))
            finally:
                gpu_deps.shutil.which = saved
            self.assertTrue(os.path.exists(os.path.join(d, "prefix", "usr", "lib", "cmake", "fmt", "fmt-config.cmake")))
            # Every CMake package the configure needs must be among them, or it says which is missing.
            with self.assertRaises(gpu_deps.DepsError) as e:
                gpu_deps.cmake_args(os.path.join(d, "prefix"))
            self.assertIn("no CLI11Config.cmake", str(e.exception))

    def test_the_arguments_name_each_package_header_only_fmt_and_static_boost(self):
        with tempfile.TemporaryDirectory() as d:
            for package, file in gpu_deps.CONFIG_FILES.items():
                folder = os.path.join(d, "usr", "lib", "x86_64-linux-gnu", "cmake", package)
                os.makedirs(folder)
                open(os.path.join(folder, file), "w").close()
            args = gpu_deps.cmake_args(d)
        self.assertIn(f"-Dboost_context_DIR={d}/usr/lib/x86_64-linux-gnu/cmake/boost_context", args)
        self.assertEqual(args[-2:], ["-DFA_FMT_HEADER_ONLY=ON", "-DBoost_USE_STATIC_LIBS=ON"])
        self.assertEqual(len(args), len(gpu_deps.CONFIG_FILES) + 2)


    def test_libraries_that_do_not_link_here_are_named_in_one_line(self):
        with tempfile.TemporaryDirectory() as d:
            folder = os.path.join(d, "usr", "lib", "x86_64-linux-gnu")
            os.makedirs(folder)
            open(os.path.join(folder, "libboost_context.a"), "w").close()
            compiler = os.path.join(d, "c++")  # a linker that meets an older C library
            with open(compiler, "w") as f:
                f.write("#!/bin/sh\necho \"libboost_context.a(stack_traits.o): undefined reference to "
                        "'pthread_once@GLIBC_2.34'\" >&2\nexit 1\n")
            os.chmod(compiler, 0o755)
            saved = os.environ.get("CXX")
            os.environ["CXX"] = compiler
            try:
                problem = gpu_deps.probe(d, os.path.join(d, "probe"))
            finally:
                if saved is None:
                    del os.environ["CXX"]
                else:
                    os.environ["CXX"] = saved
        self.assertEqual(problem, "the probe does not build with c++: libboost_context.a(stack_traits.o): undefined "
                                  "reference to 'pthread_once@GLIBC_2.34'")
        self.assertNotIn("\n", problem)


class NcuProfileRun(unittest.TestCase):
    def test_the_plan_takes_the_programs_that_offer_a_profile(self):
        with tempfile.TemporaryDirectory() as d:
            programs = []
            for name, flags in (("ch03_online_weighted_sum", "--block"), ("ch05_flash_attention_2", "--profile-json")):
                path = os.path.join(d, name)
                with open(path, "w") as f:
                    f.write(f"#!/bin/sh\necho 'usage: {name} {flags} FILE'\n")
                os.chmod(path, 0o755)
                programs.append(path)
            sys.argv = ["ncu_profile_table.py", "--run", "--plan", "--logs", d, "--"] + programs
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                self.assertEqual(ncu_profile_table.main(), 0)
        self.assertIn("plan: simt's profile and ncu's counts of ch05_flash_attention_2,", out.getvalue())
        self.assertNotIn("ch03", out.getvalue())


if __name__ == "__main__":
    unittest.main()
