#!/usr/bin/env python3
"""Turns a run of chapter 02's benchmark into docs/benchmarks-cpu.md.

    build/default/bin/ch02_softmax_bench --benchmark_repetitions=3 \
        --benchmark_enable_random_interleaving=true --benchmark_out=run.json
    scripts/softmax_bench_table.py run.json > docs/benchmarks-cpu.md
    cmake --build build/default --target figures        # redraws docs/figures/softmax-bench.svg

It prints the machine (lscpu: model, family and model numbers, cores, hypervisor), one core's
share of each data cache (lscpu -C -B, ONE-SIZE), and per row size the median CPU time of each
benchmark over the repetitions, with the ratio safe / online for ordinary and streaming stores.
The ratios compare times from the same run. figures/softmax_bench_data.h reads the table back.
"""
import argparse
import json
import statistics
import subprocess
import sys

TO_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}


def medians(path):
    """{(family, n, store): median cpu time in us} over the repetitions of one run."""
    with open(path) as f:
        run = json.load(f)
    times = {}
    for b in run["benchmarks"]:
        if b.get("run_type") != "iteration" or b.get("error_occurred"):
            continue
        parts = b["run_name"].split("/")
        family, args = parts[0], [int(p) for p in parts[1:] if p.isdigit()]
        key = (family, args[0], args[1] if len(args) > 1 else 0)
        times.setdefault(key, []).append(b["cpu_time"] * TO_US[b["time_unit"]])
    return run["context"], {k: statistics.median(v) for k, v in times.items()}, \
        max(len(v) for v in times.values())


def lscpu(*args):
    return subprocess.run(["lscpu", *args], capture_output=True, text=True, check=True).stdout


def machine(context):
    fields = dict(line.split(":", 1) for line in lscpu().splitlines() if ":" in line)
    get = lambda k: fields.get(k, "?").strip()
    hypervisor = f", under {get('Hypervisor vendor')}" if "Hypervisor vendor" in fields else ""
    return (f"{get('Model name')} (CPU family {get('CPU family')}, model {get('Model')}), "
            f"{get('CPU(s)')} cores{hypervisor}; SIMD {context.get('simd', '?').split(' (')[0]} (Highway)")


def caches():
    """[(name, bytes per core)] of the data and unified caches."""
    lines = lscpu("-C", "-B").splitlines()
    head = lines[0].split()
    out = []
    for line in lines[1:]:
        row = dict(zip(head, line.split()))
        if row["TYPE"] in ("Data", "Unified"):
            out.append((row["NAME"], int(row["ONE-SIZE"])))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", help="ch02_softmax_bench's --benchmark_out JSON file")
    args = parser.parse_args()
    context, t, repetitions = medians(args.run)
    sizes = sorted({n for (family, n, _) in t if family == "BM_safe_three_pass"})
    load = context.get("load_avg", [])
    print("# CPU benchmarks\n")
    print("Written by `scripts/softmax_bench_table.py` from one run of `ch02_softmax_bench`; "
          "[02-online-softmax.md](02-online-softmax.md) reads it, and `softmax-bench.svg` draws it.\n")
    print(f"## Safe against online softmax (ch02_softmax_bench), median of {repetitions}\n")
    print(f"Machine: {machine(context)}; one thread; CPU time, median of {repetitions} repetitions "
          f"in one run (load average at the start {', '.join(f'{x:.1f}' for x in load)})\n")
    print("| cache | bytes per core |\n|---|---|")
    for name, size in caches():
        print(f"| {name} | {size} |")
    print("\n| n | safe us | online us | safe / online | safe us, streaming | online us, streaming "
          "| safe / online, streaming | max pass us |")
    print("|---|---|---|---|---|---|---|---|")
    for n in sizes:
        s0, o0 = t[("BM_safe_three_pass", n, 0)], t[("BM_online_two_pass", n, 0)]
        s1, o1 = t[("BM_safe_three_pass", n, 1)], t[("BM_online_two_pass", n, 1)]
        mx = t.get(("BM_max_pass", n, 0), float("nan"))
        # Times to 4 figures, and each ratio from the printed times, so the table checks out as read.
        s0, o0, s1, o1, mx = (float(f"{v:.4g}") for v in (s0, o0, s1, o1, mx))
        print(f"| {n} | {s0:g} | {o0:g} | {s0 / o0:.2f} | {s1:g} | {o1:g} | {s1 / o1:.2f} | {mx:g} |")


if __name__ == "__main__":
    sys.exit(main())
