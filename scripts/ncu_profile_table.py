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
"""
import argparse
import csv
import json
import re
import sys

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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--program", help="the program both profiles come from (first column)")
    ap.add_argument("--simt", help="the CPU run's --profile-json file")
    ap.add_argument("--ncu", help="Nsight Compute's --csv output of the GPU run")
    ap.add_argument("--header", action="store_true", help="print the table's head first")
    ap.add_argument("--metrics", action="store_true", help="print the ncu --metrics list and stop")
    args = ap.parse_args()
    if args.metrics:
        print(",".join(ALL_METRICS))
        return 0
    if not (args.program and args.simt and args.ncu):
        ap.error("--program, --simt and --ncu are required (or --metrics alone)")
    try:
        simt = read_simt(args.simt)
        gpu = read_ncu(args.ncu)
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"ncu_profile_table: {e}")
    if args.header:
        print("| program | kernel | access | launches simt / GPU | instructions simt / GPU | "
              "sectors or wavefronts simt / GPU | bank conflicts simt / GPU |")
        print("|---|---|---|---|---|---|---|")
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
            print(f"| {args.program} | {full_key(name)} | {label} | " + " | ".join(cells) + " |")
    if matched == 0:
        print(f"ncu_profile_table: no kernel of {args.simt} was found in {args.ncu} "
              f"(simt: {', '.join(simt) or 'none'}; ncu: {', '.join(gpu) or 'none'})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
