#!/usr/bin/env python3
"""What the machine code of a chapter's kernels says, read without a GPU.

Compiles a chapter's kernel source (chapters/NN_*/*.cuh) with nvcc for one or more architectures,
disassembles it with cuobjdump, and prints for every kernel instance (one template instantiation):

  resources   registers, spill bytes, shared memory per block, and the blocks and warps one SM
              can hold, with what limits them (registers, shared memory, threads, blocks)
  main loop   the instructions of one iteration of the kernel's main loop (for the attention
              kernels: one key tile, per warp), by kind: HMMA, LDSM, LDGSTS, LDS/STS, FFMA/FMUL/
              FADD, MUFU.EX2, SHFL, BAR and all instructions; and LDSM per HMMA over the whole kernel.
              For Hopper's kernel (chapter 10, sm_90a): HGMMA (wgmma; those with A in registers
              apart), WARPGROUP (wgmma's fence and commit, WARPGROUP.ARRIVE, and its wait,
              WARPGROUP.DEPBAR.LE), SYNCS (mbarriers: SYNCS.PHASECHK...TRYWAIT, SYNCS.ARRIVE...),
              BAR (the named barriers of the ping-pong: BAR.SYNC, BAR.ARV), UTMALDG (TMA), and the
              loop's tensor FLOP and shared bytes
  wgmma       for sm_90a: "wgmma serialized: none", or the kernels for which ptxas -v says that
              it serialised the wgmma (infos C7514, C7515: "wgmma.mma_async instructions are
              serialized due to ..."): each then waits for the one before, and no overlap is left
  ceilings    the TFLOP/s those counts allow on the GPUs of that architecture (T4 for sm_75, A100
              for sm_80, H100 SXM and H200 for sm_90 and sm_90a), one per unit: tensor cores, shared-memory bandwidth,
              instruction issue, MUFU; and the lowest of them. Every ceiling is a MODEL: it
              assumes that the pipes overlap perfectly and that nothing else (latency, barriers,
              global memory, occupancy) stands in the way. A measured kernel is slower.

How the main loop is found: the control-flow graph of the function is built from its branches;
the main loop is the outermost loop that holds HGMMA, else HMMA (or, in a kernel without tensor
cores, FFMA). In chapter 10 that is the consumer's loop over key tiles (the producer's loop of TMA
copies holds no HGMMA); its one inner loop is the retry of an mbarrier's try_wait, out of line,
which the steady iteration does not enter.
One iteration is a path from the loop's head to one of its back edges, through the loop's blocks
(an inner loop, if any, counted once: the report says so). Of all such paths, "steady" is the
one with the most LDGSTS (a tile whose successor is being prefetched) and, among those, the
fewest instructions (no mask); "masked" is the one with the most instructions (a tile on the
causal diagonal or at the tail). Predicated instructions count whether or not their predicate
holds: they take an issue slot either way.

The model, per warp and per iteration of the main loop (F = 4096 FLOP per HMMA.16816):
  tensor   F_SM FLOP per clock per SM (dense bf16/fp16)
  shared   128 bytes per clock per SM (32 banks of 4 bytes); bytes = 512 per LDSM .x4 (256 .x2,
           128 .x1), 512 per LDGSTS.128 (32 lanes x 16 bytes), lanes x width per LDS/STS
  issue    4 warp instructions per clock per SM (one per scheduler)
  MUFU     16 results per clock per SM, 32 per warp instruction
ceiling = FLOP per iteration / (clocks per iteration of that unit) x SMs x clock.

Hopper's wgmma, in the same model. An HGMMA.MxNxK (HGMMA.64x64x16.F32.BF16: m64n64k16) is one
wgmma.mma_async of a warpgroup, a 2 M N K FLOP product. cuobjdump shows the program of every warp,
and each of the warpgroup's four warps issues the HGMMA: in chapter 10 (head dim 128) the loop holds
8 HGMMA.64x64x16 for S = Q K^T, as many as the source's wgmma calls per warpgroup (128 / 16), and
each thread's S accumulator is 32 registers (64 x 64 floats over 128 threads). So the report
counts, per warp, a quarter of each: 2 M N K / 4 FLOP, and from shared memory A (M x K, unless A is
in registers: `HGMMA... R24, R132, gdesc[..].tnspB`, chapter 10's P V) and B (K x N), 2 bytes an
element (bf16, fp16), over 4. The shared-memory ceiling treats wgmma's operand reads like LDSM's,
128 bytes per clock per SM; how wgmma actually feeds its operands is not documented, so this is
the crudest part of the model. TMA's writes into shared memory are not counted: they are in the
producer's code, and their size is in the tensor map, not in the SASS. The producer's warps are
not counted either (one thread of it issues the copies; the others have returned).

Registers under setmaxnreg (chapter 10): the report reads the count ptxas gives the kernel (168 for
384 threads and __launch_bounds__(384, 1)), which is what a block is given at launch; the
setmaxnreg in the code then moves registers from the producer (24) to the consumers (240) within
that allocation. Occupancy is computed from ptxas's count.

Usage:
  scripts/sass_report.py                       chapter 06, sm_80 and sm_90
  scripts/sass_report.py --chapter 05 --arch sm_90
  scripts/sass_report.py --chapter 05 --arch sm_75   a T4's machine code (chapter 06's kernel needs sm_80)
  scripts/sass_report.py --chapter 10          chapter 10, sm_90a (its only architecture)
  scripts/sass_report.py --source FILE.cu      any CUDA source (a test kernel)
  scripts/sass_report.py --json out.json ...   the same figures as JSON, besides the tables
  scripts/sass_report.py --plan ...            what it would compile and report, then stop
Needs nvcc (--nvcc, or on the PATH) and cuobjdump (from the CUDA toolkit, or from PyPI:
`pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm`, with the folder of nvdisasm on the
PATH). Exit status: 0 reported; 77 a tool is missing (the last line on stderr says which: the GPU
check reports the step skipped); 1 a compile or a tool failed; 2 a bad flag.

Sources of the figures (GPUS below): NVIDIA A100 Tensor Core GPU Architecture (2020) and NVIDIA
H100 Tensor Core GPU Architecture (2022) whitepapers and the H200 datasheet (SMs, clocks, dense
tensor TFLOP/s, shared memory per SM); CUDA C++ Programming Guide, "Compute Capabilities"
(registers, threads, blocks and shared memory per SM, 1 KiB of shared memory reserved per
block), "Shared Memory" (32 banks, 4 bytes each per clock) and "Arithmetic Instructions"
(throughput: 16 MUFU results per clock per SM on compute capability 8.0 and 9.0); the PTX ISA,
"mma" (m16n8k16: 2 x 16 x 8 x 16 FLOP) and "Asynchronous Warpgroup Level Matrix Multiply-Accumulate
Instructions" (wgmma.mma_async .m64nNk16: A of 64 x 16 from registers or shared memory through a
matrix descriptor, B of 16 x N from shared memory; a warpgroup is four warps); "setmaxnreg"; the H100
whitepaper, "H100 SM Architecture" (the fourth-generation tensor cores a warpgroup drives, TMA).
"""
import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

FLOP_PER_HMMA = 2 * 16 * 8 * 16  # mma.m16n8k16: a 16 x 16 by 16 x 8 product, a multiply and an add each
WARPS_PER_WARPGROUP = 4          # a wgmma (HGMMA) is issued by each of its warpgroup's four warps
SHARED_BYTES_PER_CLOCK = 128     # 32 banks x 4 bytes, per SM
ISSUE_PER_CLOCK = 4              # warp instructions per clock per SM (4 schedulers)
MUFU_PER_CLOCK = 16              # results per clock per SM (compute capability 8.0 and 9.0)
RESERVED_SHARED = 1024           # bytes of shared memory the system keeps per block (cc 8.0+)


@dataclass
class Gpu:
    name: str
    arch: str
    sms: int
    clock_ghz: float         # the clock at which the dense tensor figure below is quoted
    tensor_tflops: float     # dense bf16/fp16 tensor-core TFLOP/s (float32 accumulation)
    shared_per_sm: int       # bytes of shared memory an SM can give its blocks
    shared_per_block: int    # bytes one block may ask for (dynamic + static)
    registers_per_sm: int = 65536
    threads_per_sm: int = 2048
    blocks_per_sm: int = 32
    reserved_shared: int = RESERVED_SHARED  # bytes the system keeps per block (none before cc 8.0)
    source: str = ""

    def flop_per_clock(self):
        """Dense tensor FLOP per clock per SM implied by the datasheet figure."""
        return self.tensor_tflops * 1e12 / (self.sms * self.clock_ghz * 1e9)


GPUS = [
    Gpu("T4", "sm_75", 40, 1.59, 65.0, 64 * 1024, 64 * 1024, threads_per_sm=1024, blocks_per_sm=16,
        reserved_shared=0,
        source="T4 datasheet and Turing whitepaper: 40 SMs, 1590 MHz boost, 65 TFLOP/s fp16 with float32 "
               "accumulation, 64 KB shared per SM; cc 7.5: 1024 threads, 16 blocks per SM"),
    Gpu("A100 SXM4", "sm_80", 108, 1.41, 312.0, 164 * 1024, 163 * 1024,
        source="A100 whitepaper: 108 SMs, 1410 MHz, 312 TFLOP/s dense bf16, 164 KB shared per SM"),
    Gpu("H100 SXM5", "sm_90", 132, 1.83, 989.0, 228 * 1024, 227 * 1024,
        source="H100 whitepaper: 132 SMs, 989 TFLOP/s dense bf16 (4096 FLOP/clk/SM at 1.83 GHz), 228 KB shared per SM"),
    Gpu("H200 SXM", "sm_90", 132, 1.83, 989.0, 228 * 1024, 227 * 1024,
        source="H200 datasheet: the H100's GH100 with HBM3e; 989 TFLOP/s dense bf16"),
]


# What each chapter's kernels ask for at launch: threads per block (None: read from the kernel's
# __launch_bounds__ in the binary) and bytes of dynamic shared memory, as functions of the template
# arguments (strings, in order). They mirror the chapter's .cuh (the functions named in the
# comments); a kernel not listed is reported without its shared memory.
def ch06_kernel(args):
    d, br, bc = int(args[1]), int(args[2]), int(args[3])
    # tensor_cores.cuh: threads from __launch_bounds__; shared_elements() x 2 bytes
    return None, 2 * (br * d + 4 * bc * d)


def ch05_kernel(args):
    d, br, bc = (int(a) for a in args)
    # flash_attention_2.cuh: Br * kThreadsPerRow (4) threads, shared_floats() x 4 bytes
    return br * 4, 4 * (br * (d + 1) + 2 * bc * (d + 1) + br * (bc + 1))


def ch10_kernel(args):
    d, br, bc = int(args[1]), int(args[2]), int(args[3])
    stages, repeat = 2, 1024  # kStages, kSwizzleRepeat
    # hopper.cuh: kThreads (384) from __launch_bounds__; shared_bytes(): Q_i and the ring of K_j,
    # V_j, 2 bytes an element, and 1024 for the alignment of the 128-byte swizzle
    return None, 2 * d * (br + 2 * stages * bc) + repeat


def ch07_dk_dv(args):
    d, br, bc = (int(a) for a in args[:3])
    # backward.cuh: Bc * kThreadsPerRow (4) threads, dk_dv_shared_floats() x 4 bytes
    return bc * 4, 4 * (2 * bc * (d + 1) + 2 * br * (d + 1) + 2 * br * (bc + 1) + 2 * br)


def ch07_dq(args):
    d, br, bc = (int(a) for a in args)
    # backward.cuh: Br * kThreadsPerRow (4) threads, dq_shared_floats() x 4 bytes
    return br * 4, 4 * (2 * br * (d + 1) + 2 * bc * (d + 1) + br * (bc + 1) + 2 * br)


CHAPTERS = {
    "05": ("chapters/05_flash_attention_2/flash_attention_2.cuh", {"flash_attention_2_kernel": ch05_kernel}),
    "06": ("chapters/06_tensor_cores/tensor_cores.cuh", {"tensor_cores_kernel": ch06_kernel}),
    "07": ("chapters/07_backward/backward.cuh",
           {"dk_dv_kernel": ch07_dk_dv, "dq_kernel": ch07_dq, "preprocess_kernel": lambda a: (128, 0)}),
    "10": ("chapters/10_hopper/hopper.cuh", {"hopper_kernel": ch10_kernel}),
}
# The architectures a chapter is reported for by default. Chapter 10 exists for sm_90a only (wgmma
# and setmaxnreg); sm_90a runs on the GPUs of sm_90 (H100, H200).
DEFAULT_ARCHS = {"10": ["sm_90a"]}
# The architectures with GPUs in GPUS (occupancy and ceilings); --arch takes any sm_NN or sm_NNa that
# nvcc knows, and reports the others without those columns. The build's own are what the
# sass-report-05 target passes (chapters/05_flash_attention_2/CMakeLists.txt).
ARCHS = ["sm_75", "sm_80", "sm_90", "sm_90a"]


def arch_name(text):
    """An --arch value: sm_ followed by a number, and `a` for the arch-specific targets (sm_90a)."""
    if not re.fullmatch(r"sm_[0-9]+a?", text):
        raise argparse.ArgumentTypeError(f"{text}: give sm_NN or sm_NNa, e.g. {' '.join(ARCHS)}")
    return text


def gpus_of(arch):
    """The GPUs of GPUS that run code built for `arch` (sm_90a: the sm_90 ones)."""
    return [g for g in GPUS if g.arch == arch.rstrip("a")]


class ToolMissing(Exception):
    pass


# ---- compiling and disassembling ---------------------------------------------------------------

def find_tool(name, nvcc=None):
    """The tool on the PATH, or beside nvcc (the CUDA toolkit's bin folder)."""
    found = shutil.which(name)
    if found:
        return found
    if nvcc:
        beside = os.path.join(os.path.dirname(os.path.realpath(nvcc)), name)
        if os.access(beside, os.X_OK):
            return beside
    raise ToolMissing(f"{name} not found (on the PATH or beside nvcc): install the CUDA toolkit, or "
                      f"`pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm` and put their folder on the PATH")


def run(command):
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return done.stdout + done.stderr


def compile_cubin(nvcc, source, arch, workdir, extra_flags=()):
    """The .cubin of `source` (a .cu or a .cuh, included from a one-line translation unit, as
    cmake/Chapters.cmake's add_kernels does), with the flags of the build's Release kernels, and
    ptxas's verbose output (registers, spills)."""
    tu = os.path.join(workdir, f"kernels_{arch}.cu")
    with open(tu, "w") as f:
        f.write(f'#include "{os.path.abspath(source)}"\n')
    cubin = os.path.join(workdir, f"kernels_{arch}.cubin")
    log = run([nvcc, "-std=c++20", "-O2", "-lineinfo", f"-arch={arch}", "-cubin", "-Xptxas", "-v",
               "--expt-relaxed-constexpr", "-I", ROOT, *extra_flags, "-o", cubin, tu])
    return cubin, log


def demangle(names):
    tool = shutil.which("c++filt") or shutil.which("cu++filt")
    if not tool or not names:
        return {n: n for n in names}
    out = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True).stdout.splitlines()
    return dict(zip(names, out)) if len(out) == len(names) else {n: n for n in names}


def per_function(text, header, values, fields):
    """{function: fields(match)} from tool output where a line matching `header` (group 1: the
    function) comes before the line matching `values` that describes it."""
    result, current = {}, None
    for line in text.splitlines():
        m = re.search(header, line)
        if m:
            current = m.group(1)
            continue
        m = re.search(values, line)
        if m and current:
            result[current] = fields(m)
    return result


def parse_ptxas(log):
    """{mangled name: {"stack", "spill_stores", "spill_loads"}} from ptxas -v."""
    return per_function(log, r"Compiling entry function '([^']+)'",
                        r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads",
                        lambda m: dict(zip(("stack", "spill_stores", "spill_loads"), map(int, m.groups()))))


def parse_serialized(log):
    """{mangled name: ["C7515", ...]} from ptxas's infos that it serialised a kernel's wgmma: "(C7514)
    Potential Performance Loss: wgmma.mma_async instructions are serialized due to ... in the function
    '<name>'". Then every wgmma of the kernel waits for the one before it, and no overlap is left."""
    result = {}
    for m in re.finditer(r"\((C\d+)\)[^\n]*wgmma[^\n]*serialized[^\n]*in the function '([^']+)'", log):
        result.setdefault(m.group(2), []).append(m.group(1))
    return result


def parse_resources(text):
    """{mangled name: {"registers", "stack", "shared", "local"}} from cuobjdump -res-usage."""
    return per_function(text, r"^\s*Function (\S+):", r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)",
                        lambda m: dict(zip(("registers", "stack", "shared", "local"), map(int, m.groups()))))


def parse_max_threads(elf_text):
    """{mangled name: threads} from the EIATTR_MAX_THREADS of each kernel (__launch_bounds__)."""
    result, current = {}, None
    lines = elf_text.splitlines()
    for i, line in enumerate(lines):
        m = re.search(r"\.nv\.info\.(\S+)", line)
        if m:
            current = m.group(1)
        if "EIATTR_MAX_THREADS" in line and current:
            for follow in lines[i + 1:i + 4]:
                v = re.search(r"Value:\s+(0x[0-9a-f]+)\s+(0x[0-9a-f]+)\s+(0x[0-9a-f]+)", follow)
                if v:
                    result[current] = math.prod(int(x, 16) for x in v.groups())
                    break
    return result


# ---- SASS: instructions, blocks, loops ----------------------------------------------------------

@dataclass
class Instruction:
    address: int
    predicate: str
    opcode: str   # with its modifiers, e.g. "HMMA.16816.F32.BF16"
    operands: str

    @property
    def base(self):
        return self.opcode.split(".")[0]

    def branch_target(self):
        if self.base in ("BRA", "BRX", "JMP") and not self.opcode.startswith("BRA.DIV"):
            m = re.search(r"0x([0-9a-f]+)", self.operands)
            return int(m.group(1), 16) if m else None
        if self.opcode.startswith("BRA.DIV"):
            m = re.search(r"0x([0-9a-f]+)", self.operands)
            return int(m.group(1), 16) if m else None
        return None


# The opcode is upper case, but for the shape of an HGMMA (HGMMA.64x128x16.F32.BF16): its lower-case x.
INSTRUCTION = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*(?:x[0-9]+)*[A-Z0-9_.]*)\s*([^;]*);")


def parse_sass(text):
    """{mangled name: [Instruction]} from cuobjdump -sass."""
    functions, current = {}, None
    for line in text.splitlines():
        m = re.search(r"Function : (\S+)", line)
        if m:
            current = m.group(1)
            functions[current] = []
            continue
        m = INSTRUCTION.search(line)
        if m and current is not None:
            functions[current].append(Instruction(int(m.group(1), 16), (m.group(2) or "").strip(), m.group(3),
                                                  m.group(4).strip()))
    return functions


def hgmma_shape(ins):
    """(M, N, K) of an HGMMA, from its opcode (HGMMA.64x128x16.F32.BF16: m64n128k16)."""
    m = re.match(r"HGMMA\.(\d+)x(\d+)x(\d+)", ins.opcode)
    return tuple(int(x) for x in m.groups()) if m else None


def hgmma_a_in_registers(ins):
    """Whether an HGMMA takes A from registers (O += P V: `HGMMA... R24, R132, gdesc[UR16].tnspB, R24`)
    rather than from shared memory through the descriptor that also holds B's (`R24, gdesc[UR12], R24`)."""
    operands = [o.strip() for o in ins.operands.split(",")]
    return len(operands) > 1 and re.fullmatch(r"R\d+", operands[1]) is not None


def element_bytes(ins):
    """Bytes of one element of an HGMMA's A and B, from the input type in its opcode."""
    mods = ins.opcode.split(".")
    if "E4M3" in mods or "E5M2" in mods:
        return 1
    if "TF32" in mods:
        return 4
    return 2  # BF16, F16


def tensor_flop(ins):
    """FLOP one warp's instruction does on the tensor cores. HMMA.16816 is one warp's mma.sync:
    2 x 16 x 8 x 16 (HMMA.1688 half of it). An HGMMA is one wgmma of a warpgroup, and each of its
    four warps issues it (the SASS is every warp's program): a quarter of 2 M N K each."""
    if ins.predicate == "@!PT":
        return 0
    if ins.base == "HMMA":
        return FLOP_PER_HMMA // 2 if ".1688" in ins.opcode else FLOP_PER_HMMA
    if ins.base == "HGMMA":
        m, n, k = hgmma_shape(ins) or (0, 0, 0)
        return 2 * m * n * k // WARPS_PER_WARPGROUP
    return 0


def access_bytes(ins):
    """Bytes one lane moves in an LDS/STS/LDG/STG (from the width modifier)."""
    mods = ins.opcode.split(".")[1:]
    for width, size in (("128", 16), ("64", 8), ("U16", 2), ("S16", 2), ("U8", 1), ("S8", 1)):
        if width in mods:
            return size
    return 4


def kinds(ins):
    """The counting classes an instruction belongs to (it may be in several: MUFU and MUFU.EX2).
    An instruction predicated on !PT (never true; ptxas puts `@!PT LDS RZ, [RZ]` after an LDGSTS)
    does nothing, but is issued: it counts in the total only."""
    op, base = ins.opcode, ins.base
    if ins.predicate == "@!PT":
        return ["never executed"]
    out = [base]
    if base == "MUFU":
        out.append("MUFU." + op.split(".")[1])
    if base == "BAR" and ".SYNC" in op:
        out.append("BAR.SYNC")
    if base == "HGMMA" and hgmma_a_in_registers(ins):
        out.append("HGMMA A in registers")
    return out


def shared_bytes(ins):
    """Bytes of shared memory a warp moves with this instruction (all 32 lanes active)."""
    if ins.predicate == "@!PT":
        return 0
    if ins.base == "LDSM":
        mods = ins.opcode.split(".")
        return 128 * (4 if mods[-1] == "4" else 2 if mods[-1] == "2" else 1)
    if ins.base == "LDGSTS":
        return 32 * access_bytes(ins)
    if ins.base in ("LDS", "STS"):
        return 32 * access_bytes(ins)
    if ins.base == "HGMMA":
        # The operands a wgmma reads from shared memory: A (M x K) unless it comes from registers,
        # and B (K x N), for the warpgroup; a quarter of it per warp, as with the FLOP.
        m, n, k = hgmma_shape(ins) or (0, 0, 0)
        a = 0 if hgmma_a_in_registers(ins) else m * k
        return (a + k * n) * element_bytes(ins) // WARPS_PER_WARPGROUP
    return 0


@dataclass
class Counts:
    by_kind: dict = field(default_factory=dict)
    shared: int = 0
    total: int = 0
    flop: int = 0  # on the tensor cores, this warp's share (tensor_flop)

    def add(self, ins):
        if ins.base == "NOP":
            return
        for k in kinds(ins):
            self.by_kind[k] = self.by_kind.get(k, 0) + 1
        self.shared += shared_bytes(ins)
        self.flop += tensor_flop(ins)
        self.total += 1

    def plus(self, other):
        c = Counts(dict(self.by_kind), self.shared + other.shared, self.total + other.total, self.flop + other.flop)
        for k, v in other.by_kind.items():
            c.by_kind[k] = c.by_kind.get(k, 0) + v
        return c

    def get(self, kind):
        return self.by_kind.get(kind, 0)


def basic_blocks(instructions):
    """[(start index, end index exclusive)], and the successors of each block (block indices)."""
    if not instructions:
        return [], []
    index_of = {ins.address: i for i, ins in enumerate(instructions)}
    leaders = {0}
    for i, ins in enumerate(instructions):
        target = ins.branch_target()
        if target is not None and target in index_of:
            leaders.add(index_of[target])
        if target is not None or ins.base in ("EXIT", "RET", "BRX", "JMP") or ins.opcode.startswith("BRA"):
            if i + 1 < len(instructions):
                leaders.add(i + 1)
    starts = sorted(leaders)
    blocks = [(s, (starts[k + 1] if k + 1 < len(starts) else len(instructions))) for k, s in enumerate(starts)]
    block_of = {s: k for k, (s, _) in enumerate(blocks)}
    successors = []
    for k, (s, e) in enumerate(blocks):
        last = instructions[e - 1]
        succ = []
        target = last.branch_target()
        unconditional = last.predicate in ("", "@PT") and last.base in ("BRA", "JMP", "BRX", "EXIT", "RET") \
            and not last.opcode.startswith("BRA.DIV")
        if target is not None and target in index_of:
            succ.append(block_of[index_of[target]])
        if not unconditional and e < len(instructions):
            succ.append(k + 1)
        if last.base in ("EXIT", "RET") and last.predicate not in ("", "@PT") and e < len(instructions):
            pass  # a predicated exit falls through (added above)
        # A branch to itself after EXIT is the padding loop at the end of every function: no successor.
        successors.append([x for x in dict.fromkeys(succ) if not (x == k and last.base == "BRA" and unconditional)])
    return blocks, successors


def back_edges(successors):
    """Edges (u, v) of a depth-first search from block 0 that go to a block still on the stack."""
    state = [0] * len(successors)  # 0 new, 1 on the stack, 2 done
    edges = []
    stack = [(0, iter(successors[0]))] if successors else []
    state[0] = 1 if successors else 0
    while stack:
        node, it = stack[-1]
        for nxt in it:
            if state[nxt] == 1:
                edges.append((node, nxt))
            elif state[nxt] == 0:
                state[nxt] = 1
                stack.append((nxt, iter(successors[nxt])))
                break
        else:
            state[node] = 2
            stack.pop()
    return edges


def natural_loop(head, latches, predecessors):
    body = {head}
    work = [u for u in latches if u != head]
    body.update(work)
    while work:
        u = work.pop()
        for p in predecessors[u]:
            if p not in body:
                body.add(p)
                work.append(p)
    return body


@dataclass
class LoopReport:
    head_address: int
    blocks: int
    inner_loops: int
    steady: Counts
    masked: Counts
    path: list  # the steady iteration's blocks: (first address, instructions, LDGSTS)
    inner_on_path: int = 0  # of the inner loops, those whose head the steady iteration runs through


def main_loop(instructions):
    """The outermost loop holding HGMMA (else HMMA, else FFMA), and its steady and masked iterations;
    None when the function has no such loop."""
    blocks, successors = basic_blocks(instructions)
    if not blocks:
        return None
    predecessors = [[] for _ in blocks]
    for u, succ in enumerate(successors):
        for v in succ:
            predecessors[v].append(u)
    block_counts = []
    for s, e in blocks:
        c = Counts()
        for ins in instructions[s:e]:
            c.add(ins)
        block_counts.append(c)
    edges = back_edges(successors)
    latches_of = {}
    for u, v in edges:
        latches_of.setdefault(v, []).append(u)
    loops = {h: natural_loop(h, ls, predecessors) for h, ls in latches_of.items()}
    work_kind = next((k for k in ("HGMMA", "HMMA") if any(c.get(k) for c in block_counts)), "FFMA")
    holding = [h for h, body in loops.items() if any(block_counts[b].get(work_kind) for b in body)]
    if not holding:
        return None
    head = max(holding, key=lambda h: (len(loops[h]), -h))
    body = loops[head]
    back = set(edges)
    inner = sum(1 for h in loops if h != head and h in body)
    # The loop's blocks without any back edge form a DAG; paths from the head to a latch.
    order, indegree = [], {b: 0 for b in body}
    for u in body:
        for v in successors[u]:
            if v in body and (u, v) not in back:
                indegree[v] += 1
    ready = [b for b in body if indegree[b] == 0]
    while ready:
        u = ready.pop()
        order.append(u)
        for v in successors[u]:
            if v in body and (u, v) not in back:
                indegree[v] -= 1
                if indegree[v] == 0:
                    ready.append(v)

    def best_path(key):
        best = {head: (block_counts[head], [head])}
        for u in order:
            if u not in best:
                continue
            for v in successors[u]:
                if v in body and (u, v) not in back:
                    candidate = best[u][0].plus(block_counts[v])
                    if v not in best or key(candidate) > key(best[v][0]):
                        best[v] = (candidate, best[u][1] + [v])
        ends = [best[u] for u in latches_of[head] if u in best]
        return max(ends, key=lambda e: key(e[0])) if ends else (None, [])

    steady, steady_path = best_path(lambda c: (c.get("LDGSTS"), -c.total))
    masked, _ = best_path(lambda c: (c.get("LDGSTS"), c.total))
    if steady is None:
        return None
    path = [(instructions[blocks[b][0]].address, block_counts[b].total, block_counts[b].get("LDGSTS"))
            for b in steady_path]
    inner_on_path = sum(1 for h in loops if h != head and h in steady_path)
    return LoopReport(instructions[blocks[head][0]].address, len(body), inner, steady, masked, path, inner_on_path)


# ---- occupancy and ceilings ---------------------------------------------------------------------

def occupancy(gpu, registers, threads, shared):
    """(blocks per SM, warps per SM, what limits them) for a block of `threads` threads using
    `registers` registers per thread and `shared` bytes of shared memory (dynamic + static, without
    the reserved 1 KiB of cc 8.0 and newer). Registers are allocated per warp in units of 256 (CUDA
    C++ Programming Guide, occupancy calculator's rules for cc 7.5, 8.x and 9.0)."""
    warps = math.ceil(threads / 32)
    per_warp = math.ceil(max(registers, 1) * 32 / 256) * 256
    limits = {
        "registers": (gpu.registers_per_sm // per_warp) // warps,
        "threads": gpu.threads_per_sm // (warps * 32),
        "blocks": gpu.blocks_per_sm,
    }
    if shared is not None:
        block = shared + gpu.reserved_shared
        limits["shared memory"] = 0 if shared > gpu.shared_per_block else gpu.shared_per_sm // block
    blocks = min(limits.values())
    limiting = [k for k, v in limits.items() if v == blocks]
    return blocks, blocks * warps, limiting


def ceilings(gpu, loop):
    """TFLOP/s ceilings (a model) from one iteration of the main loop of one warp."""
    c = loop.steady
    flop = c.flop
    if flop == 0:
        return {}
    scale = gpu.sms * gpu.clock_ghz * 1e9 / 1e12
    out = {"tensor": gpu.flop_per_clock() * scale}
    if c.shared:
        out["shared memory"] = flop / (c.shared / SHARED_BYTES_PER_CLOCK) * scale
    out["issue"] = flop / (c.total / ISSUE_PER_CLOCK) * scale
    if c.get("MUFU"):
        out["MUFU"] = flop / (c.get("MUFU") * 32 / MUFU_PER_CLOCK) * scale
    return out


# ---- the report -----------------------------------------------------------------------------------

COLUMNS = ["HMMA", "LDSM", "LDGSTS", "LDS", "STS", "FFMA", "FMUL", "FADD", "MUFU.EX2", "SHFL", "BAR.SYNC"]
# Hopper's kernels (chapter 10): wgmma (HGMMA; those with A from registers apart), its fence, commit
# and wait (WARPGROUP.ARRIVE, WARPGROUP.DEPBAR), the mbarriers (SYNCS.*), the named barriers (BAR.*),
# the TMA copies (UTMALDG).
HOPPER_COLUMNS = ["HGMMA", "HGMMA A in registers", "WARPGROUP", "SYNCS", "BAR", "UTMALDG", "FFMA", "FMUL", "FADD",
                  "MUFU.EX2", "SHFL"]


def template_args(demangled):
    m = re.search(r"<(.*)>\s*\(", demangled)
    if not m:
        return None, []
    name = re.search(r"(\w+)<", demangled).group(1)
    return name, [a.strip() for a in m.group(1).split(",")]


def short_name(demangled):
    name, args = template_args(demangled)
    if name is None:
        return demangled.split("(")[0]
    args = [a.replace("__nv_bfloat16", "bf16").replace("__half", "fp16") for a in args]
    return f"{name}<{', '.join(args)}>"


def analyse(cubin, ptxas_log, arch, shapes, cuobjdump):
    sass = parse_sass(run([cuobjdump, "-sass", cubin]))
    resources = parse_resources(run([cuobjdump, "-res-usage", cubin]))
    max_threads = parse_max_threads(run([cuobjdump, "-elf", cubin]))
    spills = parse_ptxas(ptxas_log)
    serialized = parse_serialized(ptxas_log)
    names = demangle(list(sass))
    kernels = []
    for mangled, instructions in sorted(sass.items(), key=lambda kv: names[kv[0]]):
        demangled = names[mangled]
        res = resources.get(mangled, {})
        static_shared = max(0, res.get("shared", 0) - (RESERVED_SHARED if arch >= "sm_90" else 0))
        name, args = template_args(demangled)
        threads, dynamic = None, None
        shape = shapes.get(name) if name else None
        if shape is not None:
            threads, dynamic = shape(args)
        threads = threads or max_threads.get(mangled)
        whole = Counts()
        for ins in instructions:
            whole.add(ins)
        loop = main_loop(instructions)
        kernel = {
            "name": short_name(demangled), "mangled": mangled, "arch": arch,
            "registers": res.get("registers"), "stack": res.get("stack", 0),
            "spill_stores": spills.get(mangled, {}).get("spill_stores", 0),
            "spill_loads": spills.get(mangled, {}).get("spill_loads", 0),
            "threads": threads, "shared": None if dynamic is None else dynamic + static_shared,
            "wgmma_serialized": serialized.get(mangled, []),
            "whole": {"HMMA": whole.get("HMMA"), "HGMMA": whole.get("HGMMA"), "LDSM": whole.get("LDSM"),
                      "all": whole.total},
            "gpus": {},
        }
        if loop is not None:
            kernel["loop"] = {"head": f"{loop.head_address:#x}", "inner_loops": loop.inner_loops,
                              "inner_on_path": loop.inner_on_path,
                              "steady": dict(loop.steady.by_kind, all=loop.steady.total,
                                             shared_bytes=loop.steady.shared, flop=loop.steady.flop),
                              "masked_extra": loop.masked.total - loop.steady.total,
                              "path": [[f"{a:#x}", n, g] for a, n, g in loop.path]}
        for gpu in gpus_of(arch):
            entry = {}
            if threads and kernel["registers"] is not None:
                blocks, warps, limit = occupancy(gpu, kernel["registers"], threads, kernel["shared"])
                entry.update(blocks=blocks, warps=warps, limit=limit)
            if loop is not None:
                entry["ceilings"] = ceilings(gpu, loop)
            kernel["gpus"][gpu.name] = entry
        kernels.append(kernel)
    return kernels


def ratio(a, b):
    return f"{a / b:.2f}" if b else "-"


def print_report(kernels, arch):
    print(f"\n**{arch}: resources (per kernel instance)**\n")
    gpus = gpus_of(arch)
    head = "| kernel | registers | spills (st/ld bytes) | threads | shared KiB |"
    head += "".join(f" {g.name}: blocks, warps per SM (limit) |" for g in gpus)
    print(head)
    print("|---" * (head.count("|") - 1) + "|")
    for k in kernels:
        shared = "?" if k["shared"] is None else f"{k['shared'] / 1024:.1f}"
        row = f"| {k['name']} | {k['registers']} | {k['spill_stores']}/{k['spill_loads']} | {k['threads'] or '?'} | {shared} |"
        for g in gpus:
            e = k["gpus"].get(g.name, {})
            row += f" {e['blocks']}, {e['warps']} ({', '.join(e['limit'])}) |" if "blocks" in e else " ? |"
        print(row)
    hopper = any(k["whole"]["HGMMA"] for k in kernels)
    if hopper or arch.endswith("a"):
        # ptxas says when it serialises wgmma (C7514, C7515): the overlap the kernel was written for is gone.
        named = [f"{k['name']} ({', '.join(k['wgmma_serialized'])})" for k in kernels if k["wgmma_serialized"]]
        print(f"\nwgmma serialized (ptxas C7514/C7515, {arch}): {'; '.join(named) if named else 'none'}")
    looped = [k for k in kernels if "loop" in k]
    if looped:
        print(f"\n**{arch}: the main loop, one iteration (a key tile) of one warp; 'steady': neither masked nor last**\n")
        columns, tensor = (HOPPER_COLUMNS, "HGMMA") if hopper else (COLUMNS, "HMMA")
        last = "tensor FLOP, shared bytes (a warp's share)" if hopper else "LDSM/HMMA (loop, kernel)"
        head = "| kernel | " + " | ".join(columns) + f" | all | {tensor} share | {last} | masked: more |"
        print(head)
        print("|---" * (head.count("|") - 1) + "|")
        for k in looped:
            s = k["loop"]["steady"]
            cells = [str(s.get(c, 0)) for c in columns]
            share = f"{100 * s.get(tensor, 0) / s['all']:.0f}%" if s["all"] else "-"
            if hopper:
                extra = f"{s['flop']}, {s['shared_bytes']}"
            else:
                extra = f"{ratio(s.get('LDSM', 0), s.get('HMMA', 0))}, {ratio(k['whole']['LDSM'], k['whole']['HMMA'])}"
            inner = ""
            if k["loop"]["inner_loops"]:  # (chapter 10: the retry of an mbarrier's try_wait, off the path)
                inner = (f" ({k['loop']['inner_loops']} inner loop(s), {k['loop']['inner_on_path']} on this path, "
                         f"counted once)")
            print(f"| {k['name']} | " + " | ".join(cells) + f" | {s['all']}{inner} | {share} | {extra} | "
                  f"{k['loop']['masked_extra']} |")
        print(f"\n**{arch}: ceilings in TFLOP/s, a MODEL (each unit alone, perfect overlap; see the figures below)**\n")
        head = "| kernel | GPU | tensor | shared memory | issue | MUFU | lowest (model) |"
        print(head)
        print("|---" * (head.count("|") - 1) + "|")
        for k in looped:
            for g in gpus:
                c = k["gpus"].get(g.name, {}).get("ceilings", {})
                if not c:
                    continue
                low = min(c, key=c.get)
                cells = [f"{c[u]:.0f}" if u in c else "-" for u in ("tensor", "shared memory", "issue", "MUFU")]
                print(f"| {k['name']} | {g.name} | " + " | ".join(cells) + f" | {c[low]:.0f} ({low}) |")
        print("\nFigures assumed (sources in scripts/sass_report.py):")
        for g in gpus:
            print(f"- {g.name}: {g.sms} SMs at {g.clock_ghz} GHz, {g.flop_per_clock():.0f} dense FLOP/clk/SM, "
                  f"{g.shared_per_sm // 1024} KiB shared per SM ({g.source})")
        print(f"- per SM and clock: {SHARED_BYTES_PER_CLOCK} shared bytes, {ISSUE_PER_CLOCK} warp instructions, "
              f"{MUFU_PER_CLOCK} MUFU results; {FLOP_PER_HMMA} FLOP per HMMA.16816")
        if hopper:
            print(f"- an HGMMA.MxNxK is one wgmma of a warpgroup, issued by each of its {WARPS_PER_WARPGROUP} warps: "
                  f"2 M N K / {WARPS_PER_WARPGROUP} FLOP and (M K, unless A is in registers, + K N) x 2 bytes / "
                  f"{WARPS_PER_WARPGROUP} of shared memory per warp; TMA's writes into shared memory are not counted")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chapter", default="06", choices=sorted(CHAPTERS), help="the chapter's kernels (default 06)")
    ap.add_argument("--source", help="a CUDA source to report on instead of the chapter's own (a variant of "
                    "it, whose launch shapes are the chapter's, or a test kernel)")
    ap.add_argument("--arch", nargs="+", type=arch_name,
                    help="architectures, e.g. sm_75 (T4), sm_80, sm_90 (default: sm_80 sm_90; for chapter 10 "
                    "sm_90a, the only one it is built for)")
    ap.add_argument("--nvcc", default=os.environ.get("CUDACXX") or "nvcc", help="the nvcc to compile with")
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("--keep", help="keep the .cubin files in this folder")
    ap.add_argument("--plan", action="store_true", help="say what it would compile and report, then stop")
    args = ap.parse_args(argv)
    args.arch = args.arch or DEFAULT_ARCHS.get(args.chapter, ["sm_80", "sm_90"])
    source, shapes = CHAPTERS[args.chapter]
    source = args.source or os.path.join(ROOT, source)
    if not os.path.isfile(source):
        ap.error(f"--source {source}: no such file")
    if args.plan:
        gpus = ", ".join(g.name for a in args.arch for g in gpus_of(a))
        print(f"plan: {os.path.relpath(source, ROOT)} compiled by {args.nvcc} for {' '.join(args.arch)}; "
              f"registers, occupancy, the main loop's counts and the ceilings on {gpus}")
        return 0
    try:
        nvcc = shutil.which(args.nvcc) or (args.nvcc if os.access(args.nvcc, os.X_OK) else None)
        if nvcc is None:
            raise ToolMissing(f"nvcc not found ({args.nvcc}): install the CUDA toolkit or pass --nvcc")
        cuobjdump = find_tool("cuobjdump", nvcc)
        find_tool("nvdisasm", nvcc)  # cuobjdump -sass calls it
    except ToolMissing as e:
        print(f"sass_report: {e}", file=sys.stderr)
        return 77
    try:
        report(args, nvcc, cuobjdump, source, shapes)
    except RuntimeError as e:
        print(f"sass_report: {e}", file=sys.stderr)
        return 1
    return 0


def report(args, nvcc, cuobjdump, source, shapes):
    everything = []
    with tempfile.TemporaryDirectory() as tmp:
        workdir = args.keep or tmp
        os.makedirs(workdir, exist_ok=True)
        print(f"The machine code of {os.path.relpath(source, ROOT)} (scripts/sass_report.py): nvcc "
              f"{nvcc_version(nvcc)}, {os.path.basename(cuobjdump)} {tool_version(cuobjdump)}.")
        for arch in args.arch:
            cubin, log = compile_cubin(nvcc, source, arch, workdir)
            kernels = analyse(cubin, log, arch, shapes, cuobjdump)
            print_report(kernels, arch)
            everything.extend(kernels)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(everything, f, indent=1)


def nvcc_version(nvcc):
    m = re.search(r"release ([0-9.]+)", run([nvcc, "--version"]))
    return m.group(1) if m else "?"


def tool_version(tool):
    m = re.search(r"release ([0-9.]+)", run([tool, "--version"]))
    return m.group(1) if m else "?"


if __name__ == "__main__":
    sys.exit(main())
