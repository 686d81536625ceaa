#!/usr/bin/env python3
"""The road from a chapter's main() to its kernel, as a reader sees it in a debugger.

Runs a chapter's program under gdb with a breakpoint on simt's grid runner
(simt::cpu::detail::run_grid), takes the first backtrace whose frames name the chapter's namespace
(chapter 07 runs chapter 05's forward first), and measures the frames from main() to simt's launch
(the first frame in common/simt/runtime/launch_cpu.h, counted):

  frames      how many, main and simt::launch included         at most --frames (8)
  files       how many source files they stand in               at most --files (4)
  crossings   how often the next frame is in another file       at most --crossings (3)
  callbacks   a frame in common/ (not simt's launch) below which a frame of the chapter runs again:
              common calling back into the chapter                none

Prints the road, one frame a line, then one verdict line; exits 0 when every bound holds, 1 when
one does not (naming it), 2 when gdb or the program cannot be run.

  scripts/check_road.py --chapter ch05 -- build/default/bin/ch05_flash_attention_2 --seq-q 16 --seq-k 16

Source: GDB's manual, "Python API" (gdb.Breakpoint.stop, gdb.Frame.function, gdb.Symbol.symtab).
"""

import argparse
import pathlib
import shutil
import subprocess
import sys
import tempfile

# Run inside gdb: at every run_grid, one line per frame, innermost first, "FRAME|function|file",
# then "END"; the program runs on to its end. A frame's file is that of its current line, as `bt`
# shows it, unless that line is outside the source tree (an inlined std::unique_ptr::get names
# <bits/unique_ptr.h>): then the file of the frame's function.
GDB_SCRIPT = r"""
import gdb

ROOT = %r

class Road(gdb.Breakpoint):
    def stop(self):
        frame = gdb.newest_frame()
        while frame is not None:
            sal = frame.find_sal()
            path = sal.symtab.fullname() if sal.symtab is not None else "?"
            function = frame.function()
            if not path.startswith(ROOT) and function is not None and function.symtab is not None:
                path = function.symtab.fullname()
            print("FRAME|%%s|%%s" %% (frame.name(), path))
            frame = frame.older()
        print("END")
        return False

Road("simt::cpu::detail::run_grid")
gdb.execute("run")
"""


def backtraces(program: list[str]) -> list[list[tuple[str, str]]]:
    """The backtraces of every launch: lists of (function, file), innermost first."""
    with tempfile.NamedTemporaryFile("w", suffix=".py") as script:
        script.write(GDB_SCRIPT % (ROOT,))
        script.flush()
        args = ["gdb", "-batch", "-nx", "-ex", "set pagination off", "-x", script.name, "--args"] + program
        out = subprocess.run(args, capture_output=True, text=True, timeout=600).stdout
    traces, frames = [], []
    for line in out.splitlines():
        if line.startswith("FRAME|"):
            _, function, path = line.split("|", 2)
            frames.append((function, path))
        elif line == "END":
            traces.append(frames)
            frames = []
    return traces


ROOT = str(pathlib.Path(__file__).resolve().parent.parent) + "/"


def in_common(path: str) -> bool:
    return path.startswith(ROOT + "common/")


def is_launch(path: str) -> bool:
    return path.endswith("common/simt/runtime/launch_cpu.h")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chapter", required=True, help="the chapter's namespace, e.g. ch05")
    parser.add_argument("--frames", type=int, default=8)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--crossings", type=int, default=3)
    parser.add_argument("program", nargs=argparse.REMAINDER, help="-- the program and its flags")
    a = parser.parse_args()
    program = a.program[1:] if a.program and a.program[0] == "--" else a.program
    if not program:
        print("check_road: give the program after --", file=sys.stderr)
        return 2
    if shutil.which("gdb") is None:
        print("check_road: gdb is not on the PATH (apt-get install gdb)", file=sys.stderr)
        return 2

    road = None
    for trace in backtraces(program):
        if any(f"{a.chapter}::" in function for function, _ in trace):
            road = trace
            break
    if road is None:
        print(f"check_road: no launch of {a.chapter}'s kernels reached run_grid under gdb", file=sys.stderr)
        return 2

    outermost_first = list(reversed(road))
    start = next((n for n, (function, _) in enumerate(outermost_first) if function == "main"), None)
    end = next((n for n, (_, path) in enumerate(outermost_first) if is_launch(path)), None)
    if start is None or end is None:
        print("check_road: the backtrace holds no main() or no frame in common/simt/runtime/launch_cpu.h", file=sys.stderr)
        return 2
    frames = outermost_first[start:end + 1]
    for n, (function, path) in enumerate(frames):
        print(f"  {n + 1}. {function}   ({path.removeprefix(ROOT)})")

    files = {path for _, path in frames}
    crossings = sum(1 for (_, p), (_, q) in zip(frames, frames[1:]) if p != q)
    callbacks = [
        f"{frames[n][0]} ({frames[n][1]}) calls back into {frames[m][0]}"
        for n in range(len(frames))
        if in_common(frames[n][1]) and not is_launch(frames[n][1])
        for m in range(n + 1, len(frames))
        if not in_common(frames[m][1])
    ]
    failed = []
    if len(frames) > a.frames:
        failed.append(f"{len(frames)} frames (at most {a.frames})")
    if len(files) > a.files:
        failed.append(f"{len(files)} files (at most {a.files})")
    if crossings > a.crossings:
        failed.append(f"{crossings} crossings (at most {a.crossings})")
    if callbacks:
        failed.append("common calls back into the chapter: " + "; ".join(callbacks[:1]))
    summary = f"{a.chapter}: {len(frames)} frames, {len(files)} files, {crossings} crossings from main to simt::launch"
    if failed:
        print(f"{summary}: FAIL: " + ", ".join(failed))
        return 1
    print(f"{summary}, no callback from common: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
