#!/usr/bin/env python3
"""torch.nn.functional.scaled_dot_product_attention beside the chapters' GPU benchmarks.

For scripts/gpu_check.sh: the same shapes and the same FLOP count as the chapters' benchmarks,
timed with CUDA events so that Python's dispatch is not counted: each run is one pair of events
around a loop of calls (enough for about 10 ms of GPU work, at most 100), so that the GPU runs the
calls back to back while Python queues the next; its time is the pair's divided by the calls. The
warm-up calls are timed one by one to size the loop and see how many runs fit in --budget-ms; the
median of the runs is printed, as Markdown rows in the columns of the benchmark it stands beside
(--columns):

  ch05  | kernel | seq_len | head_dim | causal | median ms | TFLOP/s | model MB | runs |
  ch06  | kernel | dtype | seq_len | head_dim | causal | median ms | TFLOP/s |
  ch07  | kernel | seq_len | head_dim | causal | median ms | TFLOP/s |
  ch10  | kernel | dtype | seq_len | head_dim | causal | median ms | TFLOP/s | speed-up |  (the last cell empty)

Each row names the backend that ran: every call is forced onto one backend with
torch.nn.attention.sdpa_kernel, so a row either is that backend's time or says why it did not
run ("not available: ..." when torch refuses the backend for these inputs, e.g. FLASH_ATTENTION
and CUDNN_ATTENTION take only fp16 and bf16; "failed: ..." for any other error, or an output
that is not finite). A row without a time never holds a number. --backend fa3 is not torch's: it is FlashAttention-3's own
package (flash_attn_interface.flash_attn_func, built from the flash-attention repository's hopper/
folder, bf16 and fp16 on sm_90 only), called on the same inputs laid out [batch, N, heads, d], as
it takes them; where the package is not installed its row says "not available". The kernel cell also says what
arithmetic the backend uses on these inputs (arithmetic() below).

FLOPs: forward 4 * batch * heads * N^2 * d (two matrix products of 2 N^2 d), halved when causal;
with --backward the timed call is forward + backward (torch.autograd.grad), counted as 3.5 times
the forward, as FlashAttention's benchmarks count the backward pass (2.5 times the forward: five
matrix products instead of two).

Exit status: 0 when every row either ran or was not available, 1 when a row failed, 2 for a bad
flag, 77 when torch or a CUDA device is missing (scripts/gpu_check.sh reports that step skipped,
with the last line on stderr as the reason). Otherwise the last line on stderr counts the rows:
"sdpa_reference: T timed, U not available, F failed". --plan checks the flags and says what it
would measure, without torch.

  scripts/sdpa_reference.py --dtype bf16 fp16 --backend flash cudnn --columns ch06
  scripts/sdpa_reference.py --dtype float32 --backend efficient math --backward --columns ch07
"""
import argparse
import statistics
import sys
import warnings

BACKENDS = {"flash": "FLASH_ATTENTION", "cudnn": "CUDNN_ATTENTION",
            "efficient": "EFFICIENT_ATTENTION", "math": "MATH"}
DTYPES = {"float32": "float32", "bf16": "bfloat16", "fp16": "float16"}
SKIP_STATUS = 77  # cannot measure on this machine (scripts/gpu_check.sh: "skipped")
FA3 = "fa3"  # FlashAttention-3's own package, beside torch's backends (--backend fa3)



def load_torch(program):
    """(torch, torch.nn.functional) where torch is installed and sees a CUDA device; otherwise None,
    after one line to stderr that says which of the two is missing (the caller then exits with
    SKIP_STATUS)."""
    try:
        import torch
        import torch.nn.functional as F
    except ImportError as e:
        print(f"{program}: torch is not installed ({e})", file=sys.stderr)
        return None
    if not torch.cuda.is_available():
        print(f"{program}: torch sees no CUDA device", file=sys.stderr)
        return None
    return torch, F

def load_fa3():
    """(module, None) for FlashAttention-3's Python interface, or (None, why): it installs as the
    module flash_attn_interface (older builds of hopper/) or inside the package flash_attn_3."""
    import importlib
    reasons = []
    for name in ("flash_attn_interface", "flash_attn_3.flash_attn_interface"):
        try:
            return importlib.import_module(name), None
        except ImportError as e:
            reasons.append(f"{name}: {e}")
    return None, "not available: FlashAttention-3 is not installed (" + "; ".join(reasons)[:90] + ")"


def arithmetic(backend, dtype):
    """What the backend computes with, for inputs of `dtype` (a key of DTYPES)."""
    if dtype == "float32":
        if backend == "efficient":
            # The memory-efficient kernel (CUTLASS) runs its float32 products on TF32 tensor cores
            # with the 3xTF32 split (each operand as a sum of two TF32 numbers): close to float32
            # accuracy, but not plain float32 arithmetic, whatever allow_tf32 says.
            return "float32 in; products on TF32 tensor cores, 3xTF32"
        if backend == "math":
            return "float32 in; cuBLAS float32 products, TF32 off"
        return "float32 in"  # flash and cudnn refuse float32: the row says "not available"
    if backend == "math":
        return f"{dtype} in; cuBLAS {dtype} products"
    return f"{dtype} in; {dtype} tensor cores, float32 accumulation"


def forward_flops(batch, heads, n, d, causal):
    return 4.0 * batch * heads * n * n * d * (0.5 if causal else 1.0)


LOOP_MS = 10.0  # GPU time one run's loop of calls aims at
MAX_LOOP = 100


def measure(torch, fn, warmup, runs, budget_ms):
    """(median ms per call, runs): the warm-up calls timed one by one (only one where a call takes
    over 100 ms) to size the loop of a run by the last of them, and the runs to what fits in
    budget_ms; each run one pair of CUDA events around its loop."""
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def timed(calls):
        start.record()
        for _ in range(calls):
            fn()
        stop.record()
        stop.synchronize()
        return start.elapsed_time(stop) / calls

    warm_ms = timed(1)
    for _ in range(warmup - 1):
        if warm_ms > 100.0:
            break
        warm_ms = timed(1)
    warm_ms = max(warm_ms, 1e-3)
    calls = max(1, min(MAX_LOOP, int(LOOP_MS / warm_ms + 0.999)))
    count = max(1, min(runs, int(budget_ms / (warm_ms * calls))))
    return statistics.median(timed(calls) for _ in range(count)), count


def reason_of(error, caught):
    """One line: torch's own reason for refusing a backend (the first of its warnings that is not a
    heading such as "Flash attention kernel not used because:"), else the error's first line."""
    for w in caught:
        for line in str(w.message).strip().splitlines():
            line = line.strip()
            if line and not line.endswith(":"):
                return line[:110]
    text = str(error).strip()
    return text.splitlines()[0][:110] if text else type(error).__name__


class Table:
    """Formats one row per (backend, dtype, N, d, causal) in the chosen columns; counts them."""

    def __init__(self, columns):
        self.columns = columns
        self.counts = {"timed": 0, "not available": 0, "failed": 0}

    def header(self):
        heads = {"ch05": "| kernel | seq_len | head_dim | causal | median ms | TFLOP/s | model MB | runs |",
                 "ch06": "| kernel | dtype | seq_len | head_dim | causal | median ms | TFLOP/s |",
                 "ch07": "| kernel | seq_len | head_dim | causal | median ms | TFLOP/s |",
                 "ch10": "| kernel | dtype | seq_len | head_dim | causal | median ms | TFLOP/s | speed-up |"}
        head = heads[self.columns]
        return head + "\n" + "|---" * (head.count("|") - 1) + "|"

    def row(self, kernel, dtype, n, d, causal, ms=None, tflops=None, runs=None, why=None):
        """A timed row (ms, tflops, runs) or, with `why`, a row that says so and holds no number."""
        kind = "timed" if why is None else ("not available" if why.startswith("not available") else "failed")
        self.counts[kind] += 1
        time_cell = f"{ms:.3f}" if why is None else why.replace("|", "/")
        rate_cell = f"{tflops:.2f}" if why is None else "-"
        runs_cell = str(runs) if why is None else "-"
        causal_cell = "-" if causal is None else "yes" if causal else "no"
        cells = {"ch05": [kernel, n, d, causal_cell, time_cell, rate_cell, "-", runs_cell],
                 "ch06": [kernel, dtype, n, d, causal_cell, time_cell, rate_cell],
                 "ch07": [kernel, n, d, causal_cell, time_cell, rate_cell],
                 "ch10": [kernel, dtype, n, d, causal_cell, time_cell, rate_cell, ""]}[self.columns]
        print("| " + " | ".join(str(c) for c in cells) + " |", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seq", type=int, nargs="+", default=[1024, 4096, 8192],
                    help="N, queries = keys (default: 1024 4096 8192)")
    ap.add_argument("--head-dim", type=int, nargs="+", default=[64, 128], help="d (default: 64 128)")
    ap.add_argument("--batch", type=int, default=4, help="batch size (default: 4)")
    ap.add_argument("--heads", type=int, default=16, help="heads (default: 16)")
    ap.add_argument("--dtype", nargs="+", choices=sorted(DTYPES), default=["float32"],
                    help="input types, each in turn (default: float32)")
    ap.add_argument("--backend", nargs="+", choices=list(BACKENDS) + [FA3], default=["efficient", "math"],
                    help="each is forced in turn with torch.nn.attention.sdpa_kernel; fa3: FlashAttention-3's "
                         "own package, where installed (default: efficient math)")
    ap.add_argument("--backward", action="store_true", help="time forward + backward (autograd)")
    ap.add_argument("--columns", choices=["ch05", "ch06", "ch07", "ch10"],
                    help="the benchmark table to match (default: ch07 with --backward, ch06 for "
                         "fp16/bf16, else ch05)")
    ap.add_argument("--warmup", type=int, default=3, help="calls before the timed ones, only the "
                    "first where a call takes over 100 ms (default: 3)")
    ap.add_argument("--runs", type=int, default=20, help="timed calls at most; the median is printed (default: 20)")
    ap.add_argument("--budget-ms", type=float, default=1000.0,
                    help="time for the timed calls of one row (default: 1000)")
    ap.add_argument("--no-header", action="store_true", help="rows only (to append to a benchmark's table)")
    ap.add_argument("--plan", action="store_true", help="check the flags, say what would be measured, stop "
                    "(no torch needed)")
    args = ap.parse_args()
    for name in ("seq", "head_dim"):
        if min(getattr(args, name)) < 1:
            ap.error(f"--{name.replace('_', '-')}: every value must be at least 1")
    for name in ("batch", "heads", "warmup", "runs"):
        if getattr(args, name) < 1:
            ap.error(f"--{name}: must be at least 1")
    if args.budget_ms <= 0:
        ap.error("--budget-ms: must be positive")
    columns = args.columns or ("ch07" if args.backward else
                               "ch05" if args.dtype == ["float32"] else "ch06")
    if columns == "ch05" and args.dtype != ["float32"]:
        ap.error("--columns ch05 has no dtype column: use --dtype float32 (or --columns ch06)")
    if FA3 in args.backend and args.backward:
        ap.error("--backend fa3 times the forward only: leave out --backward")
    if args.plan:
        rows = len(args.backend) * len(args.dtype) * len(args.seq) * len(args.head_dim) * 2
        print(f"plan: {rows} rows of torch sdpa {'fwd+bwd' if args.backward else 'fwd'} (backends "
              f"{' '.join(args.backend)}, dtype {' '.join(args.dtype)}, seq_len {' '.join(map(str, args.seq))}, "
              f"head_dim {' '.join(map(str, args.head_dim))}, causal no and yes) in the {columns} columns")
        return 0

    loaded = load_torch("sdpa_reference")
    if loaded is None:
        return SKIP_STATUS
    torch, F = loaded
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        SDPBackend = sdpa_kernel = None
    # Plain float32 products for the math backend (cuBLAS would otherwise be allowed TF32).
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    table = Table(columns)
    if not args.no_header:
        print(table.header())
    kind = "fwd+bwd" if args.backward else "fwd"
    for backend in args.backend:
        torch_name = BACKENDS.get(backend, "")
        for dtype in args.dtype:
            if backend == FA3:
                kernel = f"FlashAttention-3 (flash_attn_interface) {kind} ({arithmetic(backend, dtype)})"
                fa3, why = load_fa3()
                if fa3 is None or dtype == "float32":
                    table.row(kernel, dtype, "all", "all", None,
                              why=why or "not available: FlashAttention-3 takes bf16 and fp16 (and e4m3)")
                    continue
            else:
                kernel = f"torch sdpa {torch_name} {kind} ({arithmetic(backend, dtype)})"
                member = getattr(SDPBackend, torch_name, None) if SDPBackend is not None else None
                if member is None:  # this torch cannot force the backend: one row says so
                    table.row(kernel, dtype, "all", "all", None,
                              why=f"not available: torch {torch.__version__} has no "
                                  f"torch.nn.attention.SDPBackend.{torch_name}")
                    continue
            for n in args.seq:
                for d in args.head_dim:
                    # FlashAttention-3 takes [batch, N, heads, d]; torch's SDPA [batch, heads, N, d].
                    shape = (args.batch, n, args.heads, d) if backend == FA3 else (args.batch, args.heads, n, d)
                    for causal in (False, True):
                        try:
                            q, k, v = (torch.randn(shape, device="cuda", dtype=getattr(torch, DTYPES[dtype]),
                                                   requires_grad=args.backward) for _ in range(3))
                            grad_out = torch.randn_like(q) if args.backward else None
                        except RuntimeError as e:  # out of memory for the inputs
                            table.row(kernel, dtype, n, d, causal, why=f"failed: {reason_of(e, [])}")
                            continue

                        def call_fa3():
                            out = fa3.flash_attn_func(q, k, v, causal=causal)
                            return (out[0] if isinstance(out, tuple) else out,)  # some versions add L

                        def call():
                            if backend == FA3:
                                return call_fa3()
                            with sdpa_kernel(member):
                                out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                                if args.backward:
                                    return torch.autograd.grad(out, (q, k, v), grad_out)
                                return (out,)

                        with warnings.catch_warnings(record=True) as caught:
                            warnings.simplefilter("always")
                            try:
                                results = call()  # once untimed: does the backend take these inputs?
                                finite = all(bool(torch.isfinite(t).all()) for t in results)
                                del results
                                if not finite:
                                    raise ArithmeticError("output not finite")
                                ms, runs = measure(torch, call, args.warmup, args.runs, args.budget_ms)
                            except ArithmeticError as e:
                                table.row(kernel, dtype, n, d, causal, why=f"failed: {e}")
                            except RuntimeError as e:
                                text = str(e)
                                if "No available kernel" in text or "not supported" in text.lower():
                                    table.row(kernel, dtype, n, d, causal,
                                              why=f"not available: {reason_of(e, caught)}")
                                else:
                                    table.row(kernel, dtype, n, d, causal, why=f"failed: {reason_of(e, [])}")
                            else:
                                flops = forward_flops(args.batch, args.heads, n, d, causal)
                                flops *= 3.5 if args.backward else 1.0
                                table.row(kernel, dtype, n, d, causal, ms=ms,
                                          tflops=flops / (ms * 1e-3) / 1e12, runs=runs)
                        del q, k, v, grad_out
                        torch.cuda.empty_cache()
    c = table.counts
    print(f"sdpa_reference: {c['timed']} timed, {c['not available']} not available, {c['failed']} failed",
          file=sys.stderr)
    return 1 if c["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
