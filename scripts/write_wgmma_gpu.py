#!/usr/bin/env python3
"""Writes common/simt/hopper_gpu_wgmma.h: the inline PTX of wgmma .m64nNk16 for every N that
hopper.h lists. Each N needs its own asm string (N / 2 accumulator registers, each an operand), and
an asm string must be a literal, so the lines are written out here rather than by the preprocessor.

    python3 scripts/write_wgmma_gpu.py    (from the repository root; rewrites the header)
"""
import pathlib

NS = [8, 16, 32, 64, 96, 128, 192, 256]
OUT = pathlib.Path(__file__).resolve().parent.parent / "common" / "simt" / "hopper_gpu_wgmma.h"


def wrap(items, indent, width=110, next_indent="        "):
    lines, line = [], indent
    for item in items:
        piece = item + ", "
        if len(line) + len(piece) > width:
            lines.append(line.rstrip())
            line = next_indent
        line += piece
    lines.append(line.rstrip().rstrip(","))
    return lines


def macro(n, registers_a):
    r = n // 2
    if registers_a:
        a = f"{{%{r}, %{r + 1}, %{r + 2}, %{r + 3}}}"
        b, p, tb = f"%{r + 4}", r + 5, r + 6
        tail = f"p, 1, 1, %{tb};"
        inputs = ['"r"(a[0])', '"r"(a[1])', '"r"(a[2])', '"r"(a[3])', '"l"(desc_b)',
                  '"r"(static_cast<int>(scale_d))', '"n"(static_cast<int>(major_b))']
        name = f"SIMT_WGMMA_RS_N{n}"
    else:
        a, b, p = f"%{r}", f"%{r + 1}", r + 2
        tail = f"p, 1, 1, %{r + 3}, %{r + 4};"
        inputs = ['"l"(desc_a)', '"l"(desc_b)', '"r"(static_cast<int>(scale_d))',
                  '"n"(static_cast<int>(major_a))', '"n"(static_cast<int>(major_b))']
        name = f"SIMT_WGMMA_SS_N{n}"
    out = [f"#define {name}(TYPE) \\",
           '  asm volatile( \\',
           '      "{\\n.reg .pred p;\\n" \\',
           f'      "setp.ne.b32 p, %{p}, 0;\\n" \\',
           f'      "wgmma.mma_async.sync.aligned.m64n{n}k16.f32." TYPE "." TYPE " " \\']
    regs = [f"%{i}" for i in range(r)]
    for k in range(0, r, 16):
        part = ", ".join(regs[k:k + 16])
        lead = '"{' if k == 0 else '" '
        end = "}, " if k + 16 >= r else ","
        out.append(f'      {lead}{part}{end}" \\')
    out.append(f'      "{a}, {b}, {tail}\\n}}\\n" \\')
    outs = [f'"+f"(d[{i}])' for i in range(r)]
    lines = wrap(outs, "      : ")
    for line in lines:
        out.append(line + " \\")
    ins = wrap(inputs, "      : ")
    for line in ins:
        out.append(line + " \\")
    out.append('      : "memory")')
    return out


text = ['// The inline PTX of wgmma.mma_async .m64nNk16 for hopper_gpu.h, one macro per N and operand',
        '// source: SIMT_WGMMA_SS_N<N>(TYPE) with A and B from shared memory (descriptors),',
        '// SIMT_WGMMA_RS_N<N>(TYPE) with A from registers. TYPE is "bf16" or "f16". Written by',
        '// scripts/write_wgmma_gpu.py (an asm string must be a literal, and each N has its own number of',
        '// operands); run it again rather than editing by hand.',
        '// Operands, in the order of the PTX ISA, "wgmma.mma_async": d (N / 2 f32 registers), a (a',
        '// descriptor, or 4 .b32 registers), b (a descriptor), scale-d (the predicate p, from scale_d),',
        '// imm-scale-a = imm-scale-b = 1, imm-trans-a (shared A only) and imm-trans-b.',
        '// clang-format off',
        '#pragma once', '']
for n in NS:
    text += macro(n, False) + [""] + macro(n, True) + [""]
text.append("// clang-format on")
OUT.write_text("\n".join(text) + "\n")
