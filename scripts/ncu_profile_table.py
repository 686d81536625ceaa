#!/usr/bin/env python3
"""simt's memory profile of a kernel (the CPU run, --profile-json) beside Nsight Compute's counts
of the same kernel on the GPU (ncu --csv --metrics ..., same program and shape), as Markdown rows:

  | program | kernel | access | launches simt / GPU | instructions simt / GPU | sectors or wavefronts simt / GPU | bank conflicts simt / GPU |

one row per kernel and access kind (global load, global store, shared load, shared store), the
counts per launch (each side's sum over its launches, divided by its launches). The metrics, by
Nsight Compute's definitions, that simt's profile counts on the CPU:
  instructions          smsp__inst_executed_op_{global,shared}_{ld,st}.sum
  sectors (global)      l1tex__t_sectors_pipe_lsu_mem_global_op_{ld,st}.sum
  wavefronts (shared)   l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{ld,st}.sum
  bank conflicts        l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{ld,st}.sum
A metric Nsight Compute did not report prints "-" on the GPU side. simt counts the kernel as the
host compiler sees it; nvcc may use wider loads or keep values in registers, so the instruction
counts may differ where the sectors agree (docs/profiling.md).

Kernels are matched by name with the backend namespace (::cpu::, ::gpu::), the return type, the
parameter list and spaces taken out ("ch05::flash_attention_2_kernel<64,64,64>"); where that finds
nothing, by the bare function name when each side has exactly one kernel of that name.

  ncu_profile_table.py --program ch05_flash_attention_2 --simt profile.json --ncu counts.csv [--header]
  ncu_profile_table.py --run --logs DIR --shape "--seq-q 256 ..." -- PROGRAM...
      for each PROGRAM whose --help offers --profile-json: the CPU profile (--device cpu SHAPE
      --profile-json), Nsight Compute on the GPU run (--device gpu SHAPE; ncu_run.py), and their
      rows, under one head; a paragraph names the programs left out and why
  ncu_profile_table.py --run --plan ...   which programs it would profile; no GPU, no ncu
Exit status: 0 the table; 77 ncu not installed or no counters here (the reason on stderr); 1 failed.
"""
import argparse
import csv
import json
import os
import re
import shlex
import subprocess
import sys

import ncu_run

ACCESSES = [("global_load", "global load", "global", "ld"), ("global_store", "global store", "global", "st"),
            ("shared_load", "shared load", "shared", "ld"), ("shared_store", "shared store", "shared", "st")]


def metric_names(space, op):
    """(instructions, sectors or wavefronts, bank conflicts or None) metric names."""
    inst = f"smsp__inst_executed_op_{space}_{op}.sum"
    if space == "global":
        return inst, f"l1tex__t_sectors_pipe_lsu_mem_global_op_{op}.sum", None
    return (inst, f"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{op}.sum",
            f"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{op}.sum")


ALL_METRICS = [m for _, _, s, o in ACCESSES for m in metric_names(s, o) if m]
PREFIX = {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}


def strip_parameters(name):
    """The name without a trailing parameter list: the first '(' outside <...>."""
    depth = 0
    for i, c in enumerate(name):
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == "(" and depth == 0 and i > 0:
            return name[:i]
    return name


def full_key(name):
    n = re.sub(r"^\s*void\s+", "", name.strip())
    n = strip_parameters(n)
    n = re.sub(r"\((?:int|unsigned int|unsigned|bool|long)\)", "", n)  # demangled literal casts
    n = n.replace("::cpu_profiled::", "::").replace("::cpu::", "::").replace("::gpu::", "::")
    return re.sub(r"\s+", "", n)


def base_key(name):
    return re.sub(r"<.*", "", full_key(name)).split("::")[-1]


def value_of(text, unit):
    """A metric value in base units: ncu may print "1,234" and, without --print-units base,
    scale a unit as "Ksector" or "Minst"."""
    value = float(text.replace(",", ""))
    if len(unit) > 1 and unit[0] in PREFIX and unit[1:2].islower():
        value *= PREFIX[unit[0]]
    return value


def read_ncu(path):
    """{kernel name: {"launches": n, metric: sum over launches}} from ncu's CSV (one row per metric
    per launch; ncu's own log lines, which do not start with a quote, are skipped)."""
    with open(path, newline="") as f:
        lines = [line for line in f if line.startswith('"')]
    launches = {}
    for row in csv.DictReader(lines):
        entry = launches.setdefault(int(row["ID"]), {"name": row["Kernel Name"]})
        try:
            entry[row["Metric Name"]] = value_of(row["Metric Value"], row.get("Metric Unit", ""))
        except ValueError:  # "n/a": a metric this GPU does not have
            pass
    kernels = {}
    for entry in launches.values():
        k = kernels.setdefault(entry["name"], {"launches": 0})
        k["launches"] += 1
        for metric, value in entry.items():
            if metric != "name":
                k[metric] = k.get(metric, 0.0) + value
    return kernels


def read_simt(path):
    """{kernel name: entry} from simt's --profile-json file."""
    with open(path) as f:
        data = json.load(f)
    if not isinstance(data, dict) or not isinstance(data.get("kernels"), list):
        raise ValueError(f'{path}: expected {{"kernels": [...]}}')
    return {k["kernel"]: k for k in data["kernels"]}


def pair(simt, gpu):
    """[(simt name, simt entry, gpu entry or None)] in simt's order."""
    by_full = {full_key(n): e for n, e in gpu.items()}
    bases = {}
    for n, e in gpu.items():
        bases.setdefault(base_key(n), []).append(e)
    simt_bases = {}
    for n in simt:
        simt_bases.setdefault(base_key(n), []).append(n)
    pairs = []
    for name, entry in simt.items():
        match = by_full.get(full_key(name))
        if match is None and len(bases.get(base_key(name), [])) == 1 and len(simt_bases[base_key(name)]) == 1:
            match = bases[base_key(name)][0]
        pairs.append((name, entry, match))
    return pairs


def count(x):
    if x is None:
        return "-"
    return f"{x:,.0f}" if abs(x - round(x)) < 1e-6 or abs(x) >= 100 else f"{x:,.2f}"


HEAD = ("| program | kernel | access | launches simt / GPU | instructions simt / GPU | "
        "sectors or wavefronts simt / GPU | bank conflicts simt / GPU |\n|---|---|---|---|---|---|---|")


def run_programs(programs, shape, logs, plan):
    """--run: profiles each program that offers --profile-json on both sides; prints the table."""
    chosen, left_out = [], []
    for program in programs:
        name = os.path.basename(program)
        try:
            help_text = subprocess.run([program, "--help"], capture_output=True, text=True, timeout=60).stdout
        except (OSError, subprocess.TimeoutExpired) as e:
            sys.exit(f"ncu_profile_table: {name} --help failed: {e}")
        (chosen if "--profile-json" in help_text else left_out).append(program)
    if not chosen:
        sys.exit("ncu_profile_table: no program offers --profile-json")
    names = ", ".join(os.path.basename(p) for p in chosen)
    if plan:
        print(f"plan: simt's profile and ncu's counts of {names}, {shape}")
        return 0
    metrics = ",".join(ALL_METRICS)
    print(f"The same program and shape (`{shape}`), profiled by simt on the CPU (`--device cpu --profile-json`) and "
          "by Nsight Compute on the GPU (`--device gpu`); counts per launch, simt / GPU. nvcc may load wider words "
          "or keep values in registers where the host compiler does not, so instructions may differ where sectors "
          "and wavefronts agree." + (f" Not profiled (no --profile-json): "
                                      f"{', '.join(os.path.basename(p) for p in left_out)}." if left_out else ""))
    print()
    print(HEAD, flush=True)
    for program in chosen:
        name = os.path.basename(program)
        json_path = os.path.join(logs, f"profile-{name}.json")
        with open(os.path.join(logs, f"profile-{name}.log"), "w") as out:
            status = subprocess.run([program, "--device", "cpu"] + shlex.split(shape) + ["--profile-json", json_path],
                                    stdout=out, stderr=subprocess.STDOUT).returncode
        if status != 0:
            sys.exit(f"ncu_profile_table: the CPU profile of {name} failed (exit {status}, profile-{name}.log)")
        csv_path = os.path.join(logs, f"ncu-counts-{name}.csv")
        try:
            ncu_run.run_ncu(metrics, [program, "--device", "gpu"] + shlex.split(shape), csv_path,
                            os.path.join(logs, f"ncu-counts-{name}.log"))
        except ncu_run.NotMeasurable as e:
            print(f"ncu_profile_table: {e}", file=sys.stderr)
            return ncu_run.SKIP_STATUS
        except ncu_run.NcuFailed as e:
            sys.exit(f"ncu_profile_table: {name}: {e}")
        status = table(name, json_path, csv_path)
        if status != 0:
            return status
        sys.stdout.flush()
    return 0


def table(program, simt_path, ncu_path):
    """The rows of one program; 1 when no kernel of simt's profile is among ncu's."""
    try:
        simt = read_simt(simt_path)
        gpu = read_ncu(ncu_path)
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"ncu_profile_table: {e}")
    matched = 0
    for name, s, g in pair(simt, gpu):
        s_launches = max(int(s.get("launches", 1)), 1)
        g_launches = g["launches"] if g else 0
        matched += g is not None
        for key, label, space, op in ACCESSES:
            counts = s.get(key, {})
            inst_m, unit_m, conflict_m = metric_names(space, op)
            per = lambda v, n: None if v is None else v / n  # noqa: E731
            simt_unit = counts.get("sectors" if space == "global" else "wavefronts")
            cells = [
                f"{s_launches} / {g_launches if g else '-'}",
                f"{count(per(counts.get('instructions'), s_launches))} / "
                f"{count(per(g.get(inst_m), g_launches)) if g else '-'}",
                f"{count(per(simt_unit, s_launches))} / {count(per(g.get(unit_m), g_launches)) if g else '-'}",
                "" if conflict_m is None else
                f"{count(per(counts.get('bank_conflicts'), s_launches))} / "
                f"{count(per(g.get(conflict_m), g_launches)) if g else '-'}",
            ]
            print(f"| {program} | {full_key(name)} | {label} | " + " | ".join(cells) + " |")
    if matched == 0:
        print(f"ncu_profile_table: no kernel of {simt_path} was found in {ncu_path} "
              f"(simt: {', '.join(simt) or 'none'}; ncu: {', '.join(gpu) or 'none'})", file=sys.stderr)
        return 1
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", action="store_true", help="profile the programs after -- (see above)")
    ap.add_argument("--logs", help="with --run: where the profiles, CSVs and messages go")
    ap.add_argument("--shape", default="--batch 1 --heads 2 --seq-q 256 --seq-k 256 --head-dim 64",
                    help="with --run: the flags of the shape both sides run")
    ap.add_argument("--plan", action="store_true", help="with --run: say what it would profile, measure nothing")
    # Without --run, the table of one pair of profiles already made:
    for flag, what in (("--program", "the program both profiles come from (first column)"),
                       ("--simt", "the CPU run's --profile-json file"),
                       ("--ncu", "Nsight Compute's --csv output of the GPU run")):
        ap.add_argument(flag, help=what)
    ap.add_argument("--header", action="store_true", help="print the table's head first")
    ap.add_argument("--metrics", action="store_true", help="print the ncu --metrics list and stop")
    argv = sys.argv[1:]
    programs = argv[argv.index("--") + 1:] if "--" in argv else []
    args = ap.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    if args.metrics:
        print(",".join(ALL_METRICS))
        return 0
    if args.run:
        if not programs or not args.logs:
            ap.error("--run needs --logs and the programs after --")
        return run_programs(programs, args.shape, args.logs, args.plan)
    if not (args.program and args.simt and args.ncu):
        ap.error("--program, --simt and --ncu are required (or --metrics alone, or --run)")
    if args.header:
        print(HEAD)
    return table(args.program, args.simt, args.ncu)


if __name__ == "__main__":
    sys.exit(main())
