#!/usr/bin/env python3
"""torch.nn.functional.scaled_dot_product_attention on chapter 08's decoding steps.

For scripts/gpu_check.sh, beside ch08_gpu_bench: the same steps (one new token per sequence,
`--heads` query heads on `--kv-heads` K/V heads with enable_gqa=True, a dense cache of `context`
keys per sequence in bf16 or fp16), the same timing (CUDA events around the call alone; the median
of the runs; sdpa_reference.measure) and the same columns:

  | kernel | batch | context | splits | median ms | GB/s | of 4.8 TB/s | speedup over 1 split |

GB/s is the cache's bytes (K and V of every key, batch x kv_heads x context x head_dim x 2 x 2)
over the time, as ch08_gpu_bench counts them. Each row names the backend, forced with
torch.nn.attention.sdpa_kernel; a backend that refuses these inputs (enable_gqa, one query row)
gets a row that says so and holds no number.

Exit status: 0 when every row either ran or was not available, 1 when a row failed, 2 for a bad
flag, 77 when torch or a CUDA device is missing (scripts/gpu_check.sh reports the step skipped).
--plan checks the flags and says what it would measure, without torch or a GPU.

  scripts/sdpa_decoding.py --batch 1 8 64 --context 1024 8192 32768 131072 --backend flash efficient cudnn math
"""
import argparse
import sys
import warnings

from sdpa_reference import BACKENDS, DTYPES, SKIP_STATUS, load_torch, measure, reason_of

DRAM_BYTES_PER_SECOND = 4.8e12  # an H200's HBM3e, as ch08::kH200DramBytesPerSecond


def cache_bytes(batch, kv_heads, context, head_dim, element_bytes=2):
    """The K and V rows of every key: what a decoding step must read at least once."""
    return batch * kv_heads * context * head_dim * 2 * element_bytes


def row(kernel, batch, context, ms=None, bytes_=None, why=None):
    """One Markdown row in ch08_gpu_bench's columns: timed (ms, bytes_) or, with `why`, no number."""
    if why is None:
        rate = bytes_ / (ms * 1e-3) / 1e9
        cells = [kernel, batch, context, "-", f"{ms:.4f}", f"{rate:.0f}",
                 f"{100 * rate / (DRAM_BYTES_PER_SECOND / 1e9):.0f}%", "-"]
    else:
        cells = [kernel, batch, context, "-", why.replace("|", "/"), "-", "-", "-"]
    print("| " + " | ".join(str(c) for c in cells) + " |", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8, 64], help="sequences (default: 1 8 64)")
    ap.add_argument("--context", type=int, nargs="+", default=[1024, 8192, 32768, 131072],
                    help="keys per sequence (default: 1024 8192 32768 131072)")
    ap.add_argument("--heads", type=int, default=64, help="query heads (default: 64)")
    ap.add_argument("--kv-heads", type=int, default=8, help="K/V heads (default: 8)")
    ap.add_argument("--head-dim", type=int, default=128, help="head dim (default: 128)")
    ap.add_argument("--dtype", choices=["bf16", "fp16"], default="bf16", help="the cache's type (default: bf16)")
    ap.add_argument("--backend", nargs="+", choices=list(BACKENDS), default=["flash", "efficient", "cudnn", "math"],
                    help="each is forced in turn (default: flash efficient cudnn math)")
    ap.add_argument("--warmup", type=int, default=3, help="calls before the timed ones (default: 3)")
    ap.add_argument("--runs", type=int, default=20, help="timed calls at most (default: 20)")
    ap.add_argument("--budget-ms", type=float, default=300.0, help="time for one row's timed calls (default: 300)")
    ap.add_argument("--no-header", action="store_true", help="rows only (to append to ch08_gpu_bench's table)")
    ap.add_argument("--plan", action="store_true", help="check the flags, say what would be measured, stop")
    args = ap.parse_args()
    for name in ("batch", "context"):
        if min(getattr(args, name)) < 1:
            ap.error(f"--{name}: every value must be at least 1")
    for name in ("heads", "kv_heads", "head_dim", "warmup", "runs"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')}: must be at least 1")
    if args.heads % args.kv_heads != 0:
        ap.error(f"--kv-heads {args.kv_heads}: --heads {args.heads} is not a multiple of it")
    if args.budget_ms <= 0:
        ap.error("--budget-ms: must be positive")
    rows = len(args.backend) * len(args.batch) * len(args.context)
    if args.plan:
        largest = cache_bytes(max(args.batch), args.kv_heads, max(args.context), args.head_dim)
        print(f"plan: {rows} rows (torch sdpa {' '.join(args.backend)}, enable_gqa, {args.dtype}, batch "
              f"{' '.join(map(str, args.batch))}, context {' '.join(map(str, args.context))}); "
              f"{largest / 1e9:.1f} GB of device memory")
        return 0

    loaded = load_torch("sdpa_decoding")
    if loaded is None:
        return SKIP_STATUS
    torch, F = loaded
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as e:
        print(f"sdpa_decoding: this torch has no torch.nn.attention ({e})", file=sys.stderr)
        return SKIP_STATUS

    if not args.no_header:
        print("| kernel | batch | context | splits | median ms | GB/s | of 4.8 TB/s | speedup over 1 split |")
        print("|---|---|---|---|---|---|---|---|")
    counts = {"timed": 0, "not available": 0, "failed": 0}
    dtype = getattr(torch, DTYPES[args.dtype])
    for backend in args.backend:
        member = getattr(SDPBackend, BACKENDS[backend], None)
        kernel = f"torch sdpa {BACKENDS[backend]} (enable_gqa, {args.dtype})"
        for batch in args.batch:
            for context in args.context:
                why = None
                try:
                    q = torch.randn(batch, args.heads, 1, args.head_dim, device="cuda", dtype=dtype)
                    k = torch.randn(batch, args.kv_heads, context, args.head_dim, device="cuda", dtype=dtype)
                    v = torch.randn_like(k)
                except RuntimeError as e:  # out of memory for the inputs
                    why = f"failed: {reason_of(e, [])}"
                if why is None and member is None:
                    why = f"not available: torch {torch.__version__} has no SDPBackend.{BACKENDS[backend]}"
                if why is None:
                    def call():
                        with sdpa_kernel(member):
                            return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)

                    with warnings.catch_warnings(record=True) as caught:
                        warnings.simplefilter("always")
                        try:
                            if not bool(torch.isfinite(call()).all()):
                                raise ArithmeticError("output not finite")
                            ms, _ = measure(torch, call, args.warmup, args.runs, args.budget_ms)
                        except ArithmeticError as e:
                            why = f"failed: {e}"
                        except (RuntimeError, TypeError) as e:
                            text = str(e)
                            available = "No available kernel" in text or "not supported" in text.lower() or \
                                "enable_gqa" in text
                            why = f"{'not available' if available else 'failed'}: {reason_of(e, caught)}"
                if why is None:
                    counts["timed"] += 1
                    row(kernel, batch, context, ms=ms,
                        bytes_=cache_bytes(batch, args.kv_heads, context, args.head_dim))
                else:
                    counts["not available" if why.startswith("not available") else "failed"] += 1
                    row(kernel, batch, context, why=why)
                q = k = v = None
                torch.cuda.empty_cache()
    print(f"sdpa_decoding: {counts['timed']} timed, {counts['not available']} not available, "
          f"{counts['failed']} failed", file=sys.stderr)
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
