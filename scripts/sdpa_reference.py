#!/usr/bin/env python3
"""torch.nn.functional.scaled_dot_product_attention on the GPU check's shapes, float32.

A side-by-side reference for scripts/gpu_check.sh: the same shapes and FLOP count as
ch05_gpu_bench, timed the same way (CUDA events, median after warm-up). Prints Markdown rows.
Which backend torch picks for float32 (math, or a memory-efficient kernel) is torch's choice;
the row says which one was allowed.
"""
import argparse
import statistics

import torch
import torch.nn.functional as F


def median_ms(fn, warmup, runs):
    for _ in range(warmup):
        fn()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(runs):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seq", type=int, nargs="+", default=[1024, 4096, 8192])
    ap.add_argument("--head-dim", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False  # float32 arithmetic, as the chapters use
    for n in args.seq:
        for d in args.head_dim:
            q, k, v = (torch.randn(args.batch, args.heads, n, d, device="cuda", dtype=torch.float32)
                       for _ in range(3))
            for causal in (False, True):
                try:
                    ms = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
                                   args.warmup, args.runs)
                except RuntimeError as e:  # e.g. out of memory for the math backend
                    print(f"| torch sdpa (float32) | {n} | {d} | {'yes' if causal else 'no'} | "
                          f"failed: {str(e).splitlines()[0][:60]} | | |")
                    continue
                flops = 4 * args.batch * args.heads * n * n * d * (0.5 if causal else 1.0)
                print(f"| torch sdpa (float32) | {n} | {d} | {'yes' if causal else 'no'} | "
                      f"{ms:.3f} | {flops / (ms * 1e-3) / 1e12:.2f} | |", flush=True)
            del q, k, v
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
