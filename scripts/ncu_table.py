#!/usr/bin/env python3
"""Measured DRAM bytes per attention call beside the traffic model's figures, as a Markdown table:
Nsight Compute's dram__bytes_read.sum + dram__bytes_write.sum of each kernel of
`ch05_gpu_bench --once`, the model's figures read from the benchmark's own table (bench.md, its
"model MB" column).

ch05_gpu_bench --once launches, for each seq_len, head_dim and causal flag in that order, the
three naive kernels (scores, softmax, pv) and then the FlashAttention-2 kernel.

  ncu_table.py --bench bench.md --seq 4096 --head-dim 64 128 --logs DIR -- ch05_gpu_bench --once ...
                     runs ncu on the program (ncu_run.py), keeps its CSV in DIR, prints the table
  ncu_table.py ncu.csv --bench bench.md --seq 4096 --head-dim 64 128     an existing CSV
  ncu_table.py --plan ... -- PROGRAM ...   checks the arguments, runs PROGRAM ... --plan (no GPU)
Exit status: 0 the table; 77 ncu not installed or no counters here (the reason on stderr); 1 failed.
"""
import argparse
import csv
import os
import re
import subprocess
import sys

import ncu_run

UNITS = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12,
         "KB": 1e3, "MB": 1e6, "GB": 1e9}


def read_launches(path):
    """[(kernel name, bytes read + written)] in launch order."""
    with open(path, newline="") as f:
        lines = [line for line in f if line.startswith('"')]  # drop ncu's own log lines
    launches = {}
    for row in csv.DictReader(lines):
        launch_id = int(row["ID"])
        value = float(row["Metric Value"].replace(",", "")) * UNITS.get(row["Metric Unit"], 1)
        name = row["Kernel Name"]
        entry = launches.setdefault(launch_id, [name, 0.0])
        entry[1] += value
    return [tuple(launches[k]) for k in sorted(launches)]


def read_model(path):
    """{(kernel, seq, head_dim, causal): model MB} from the benchmark's Markdown table
    (| kernel | seq_len | head_dim | causal | median ms | TFLOP/s | model MB | runs |); rows of
    other kernels (torch's, beside it) are skipped."""
    model = {}
    with open(path) as f:
        for line in f:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) >= 7 and cells[1].isdigit() and cells[0].startswith(("flash", "naive")):
                kind = "flash" if cells[0].startswith("flash") else "naive"
                model[(kind, int(cells[1]), int(cells[2]), cells[3])] = cells[6]
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", nargs="?", help="Nsight Compute's CSV, when it was run already")
    ap.add_argument("--bench", required=True, help="the benchmark's Markdown table (bench.md)")
    ap.add_argument("--seq", type=int, nargs="+", required=True)
    ap.add_argument("--head-dim", type=int, nargs="+", required=True)
    ap.add_argument("--logs", help="where ncu's CSV and messages go (with a program after --)")
    ap.add_argument("--plan", action="store_true", help="check the arguments and the program's, measure nothing")
    argv = sys.argv[1:]
    program = argv[argv.index("--") + 1:] if "--" in argv else []
    args = ap.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    if bool(program) == bool(args.csv):
        ap.error("give either a CSV or a program to run after --")
    if program and not args.logs:
        ap.error("--logs is required with a program")
    if args.plan:
        plan = subprocess.run(program + ["--plan"], capture_output=True, text=True)
        if plan.returncode != 0:
            sys.exit(f"ncu_table: {' '.join(program[:1])} --plan failed: {plan.stderr.strip()[:200]}")
        print(f"plan: ncu DRAM bytes of {os.path.basename(program[0])} ({plan.stdout.strip()}), "
              f"{len(args.seq) * len(args.head_dim) * 2 * 4} launches expected")
        return 0
    if program:
        args.csv = os.path.join(args.logs, "ncu-dram.csv")
        try:
            ncu_run.run_ncu("dram__bytes_read.sum,dram__bytes_write.sum", program, args.csv,
                            os.path.join(args.logs, "ncu-dram.log"))
        except ncu_run.NotMeasurable as e:
            print(f"ncu_table: {e}", file=sys.stderr)
            return ncu_run.SKIP_STATUS
        except ncu_run.NcuFailed as e:
            sys.exit(f"ncu_table: {e}")

    launches = read_launches(args.csv)
    model = read_model(args.bench)
    expected = len(args.seq) * len(args.head_dim) * 2 * 4
    if len(launches) != expected:
        sys.exit(f"ncu_table: expected {expected} kernel launches in {args.csv}, found {len(launches)}")
    print("Nsight Compute's dram__bytes_read.sum + dram__bytes_write.sum of each kernel of one "
          "`ch05_gpu_bench --once` launch, beside the traffic model (chapter 05) for the whole batch in float32.")
    print()
    print("| kernel | seq_len | head_dim | causal | DRAM MB (ncu) | model MB |")
    print("|---|---|---|---|---|---|")
    at = 0
    for n in args.seq:
        for d in args.head_dim:
            for causal in ("no", "yes"):
                naive = launches[at:at + 3]
                flash = launches[at + 3]
                at += 4
                names = " + ".join(re.sub(r"\(.*", "", k).split("::")[-1] for k, _ in naive)
                print(f"| naive (ch04: {names}) | {n} | {d} | {causal} | "
                      f"{sum(b for _, b in naive) / 1e6:.4g} | {model.get(('naive', n, d, causal), '?')} |")
                print(f"| flash-attention-2 (ch05) | {n} | {d} | {causal} | {flash[1] / 1e6:.4g} | "
                      f"{model.get(('flash', n, d, causal), '?')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
