#!/usr/bin/env python3
"""Keeps the source lines that the docs quote true to the code.

The docs quote what the programs print, and what they print names source lines
(`chapters/05_flash_attention_2/flash_attention_2.cuh:154`, `.../examples/missing_barrier.cpp:33`).
When the code moves, those numbers go stale. This check fails when one does:

1. Every quoted `path:N` names a file of the repository (a `.../name` by its unique file name) with
   a line N of code: not blank, not only a comment or a brace. Where the doc's line names the
   instruction (`ldmatrix`, `cp.async`, `mma_m16n8k16`, `__syncthreads()`), line N must hold it
   (or one of the two lines after it: an exercise's answer quotes the file with a line deleted).
2. A block of the docs that shows a command of `build/default/bin/` and what it printed, outside an
   exercise's answer (`<details>`), is run again (from the repository root, with the programs of
   --bin), and every `path:N` the block quotes must be in what it prints now. A program that is
   not built is named and left out (build everything first, as CI does).

A quote that reads as a compiler's diagnostic (`path:N: error: ...`, `path:N:M: warning: ...`)
is left out of both: it quotes an edited file (a student's mistake, a deleted line), not the code.

Usage: check_doc_lines.py --root REPO [--bin DIR]   (without --bin, only the first check runs)
Exit status: 0 when every quote holds, 1 with one line per stale quote.
"""
import argparse
import re
import shlex
import subprocess
import sys
from pathlib import Path

# A diagnostic's `path:N: error:` (or `path:N:M: warning:`) is not matched: see the docstring.
CITATION = re.compile(r"((?:\.\.\./)?[A-Za-z0-9_./-]+\.(?:cuh|cu|cpp|h)):(\d+)(?!\d)"
                      r"(?!(?::\d+)?: (?:fatal )?(?:error|warning|note):)")
# The instruction a doc line names, and what the source line then holds.
INSTRUCTIONS = {"ldmatrix": "ldmatrix", "cp.async": "cp_async", "mma_m16n8k16": "mma_m16n8k16",
                "__syncthreads()": "__syncthreads"}
SOURCE_DIRS = ("chapters", "common", "tests", "examples", "figures")


def is_code(line):
    s = line.strip()
    return bool(s) and not s.startswith("//") and s not in ("{", "}", "};")


def resolve(root, name, by_basename):
    if name.startswith(".../"):
        found = by_basename.get(Path(name).name, [])
        return found[0] if len(found) == 1 else None
    path = root / name
    return path if path.is_file() else None


def code_blocks(text):
    """(first line number, lines, inside <details>) of each indented block of a page."""
    blocks, current, start, details = [], [], 0, False
    lines = text.split("\n")
    for number, line in enumerate(lines, 1):
        if "<details>" in line:
            details = True
        if "</details>" in line:
            details = False
        indented = line.startswith("    ") or (line.startswith("       ") and current)
        if indented or (not line.strip() and current):
            if not current:
                start = number
            current.append(line)
            continue
        if current:
            blocks.append((start, current, details))
            current = []
    if current:
        blocks.append((start, current, details))
    return blocks


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", required=True, type=Path)
    parser.add_argument("--bin", type=Path)
    args = parser.parse_args()
    root = args.root.resolve()
    by_basename = {}
    for folder in SOURCE_DIRS:
        for path in (root / folder).rglob("*"):
            if path.suffix in (".cuh", ".cu", ".cpp", ".h"):
                by_basename.setdefault(path.name, []).append(path)

    stale, unbuilt, checked, runs = [], [], 0, 0
    for page in sorted((root / "docs").glob("*.md")):
        text = page.read_text()
        for number, line in enumerate(text.split("\n"), 1):
            for name, n in CITATION.findall(line):
                where = f"{page.relative_to(root)}:{number}: {name}:{n}"
                path = resolve(root, name, by_basename)
                if path is None:
                    stale.append(f"{where}: no such file (or the name fits several)")
                    continue
                source = path.read_text().split("\n")
                n = int(n)
                checked += 1
                if n > len(source) or not is_code(source[n - 1]):
                    stale.append(f"{where}: line {n} is not a line of code")
                    continue
                for named, token in INSTRUCTIONS.items():
                    if named in line.split(name)[0] and not any(token in s for s in source[n - 1:n + 2]):
                        stale.append(f"{where}: the line names {named}, line {n} does not hold it")
        if args.bin is None:
            continue
        for start, block, details in code_blocks(text):
            command = block[0].strip().removeprefix("$ ")
            cited = {f"{m[0]}:{m[1]}" for line in block[1:] for m in CITATION.findall(line)}
            if details or not command.startswith("build/default/bin/") or not cited:
                continue
            argv = shlex.split(command)
            argv[0] = str(args.bin / Path(argv[0]).name)
            if not Path(argv[0]).exists():
                unbuilt.append(f"{page.relative_to(root)}:{start}: {Path(argv[0]).name} is not built: not run")
                continue
            runs += 1
            out = subprocess.run(argv, cwd=root, capture_output=True, text=True, timeout=300)
            printed = out.stdout + out.stderr
            for c in sorted(cited):
                bare = c.removeprefix(".../")
                if bare not in printed:
                    stale.append(f"{page.relative_to(root)}:{start}: `{command}` no longer prints {c}")

    for line in unbuilt + stale:
        print(line)
    print(f"{checked} quoted source lines checked, {runs} quoted runs repeated: "
          + (f"{len(stale)} stale" if stale else "all true to the code"))
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
