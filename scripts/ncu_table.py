#!/usr/bin/env python3
"""Turns Nsight Compute's CSV (dram__bytes_read.sum, dram__bytes_write.sum) of
`ch05_gpu_bench --once` into a Markdown table: measured DRAM bytes per attention call beside the
traffic model's figures, which it reads from the benchmark's own table (bench.md, "model MB").

ch05_gpu_bench --once launches, for each seq_len, head_dim and causal flag in that order, the
three naive kernels (scores, softmax, pv) and then the FlashAttention-2 kernel.
"""
import argparse
import csv
import re
import sys

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
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("csv")
    ap.add_argument("--bench", required=True, help="the benchmark's Markdown table (bench.md)")
    ap.add_argument("--seq", type=int, nargs="+", required=True)
    ap.add_argument("--head-dim", type=int, nargs="+", required=True)
    args = ap.parse_args()

    launches = read_launches(args.csv)
    model = read_model(args.bench)
    expected = len(args.seq) * len(args.head_dim) * 2 * 4
    if len(launches) != expected:
        sys.exit(f"ncu_table: expected {expected} kernel launches in {args.csv}, found {len(launches)}")
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


if __name__ == "__main__":
    main()
