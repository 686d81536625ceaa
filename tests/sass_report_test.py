#!/usr/bin/env python3
"""Tests of scripts/sass_report.py.

  python3 tests/sass_report_test.py model     the parsing, the loop, occupancy and the ceilings, on
                                              made-up machine code (no CUDA needed; CTest
                                              sass_report_model)
  python3 tests/sass_report_test.py counts    compiles tests/sass_report_kernel.cu for sm_80 and
                                              checks the counts of its loop against the ones
                                              worked out by hand in its comment (CTest
                                              sass_report_counts); exits 77 (SKIPPED), saying
                                              why, where nvcc or cuobjdump is missing
"""
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
import sass_report as sr  # noqa: E402

# A function of made-up SASS (cuobjdump's layout): a prologue, then a loop from 0x30 to its back
# edge at 0xe0, whose body branches at 0x70 around a masked part (the two FSEL at 0x80-0x90), then
# an exit and the padding loop. By hand, the steady iteration is 0x30-0x70 and 0xa0-0xe0: 10
# instructions, of them 2 HMMA, 1 LDSM .x4, 1 LDGSTS.128, 1 MUFU.EX2, 1 FFMA and one never executed
# (@!PT); the masked one also runs the two FSEL.
SASS = """
        Function : _Z6kernelv
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   S2R R0, SR_TID.X ;
        /*0020*/                   HMMA.16816.F32.BF16 R4, R8, R12, R4 ;
        /*0030*/                   LDSM.16.M88.4 R8, [R2] ;
        /*0040*/                   LDGSTS.E.BYPASS.128 [R3+0x100], desc[UR4][R6.64] ;
        /*0050*/              @!PT LDS RZ, [RZ] ;
        /*0060*/                   HMMA.16816.F32.BF16 R4, R8, R12, R4 ;
        /*0070*/              @P0 BRA 0xa0 ;
        /*0080*/                   FSEL R4, R4, -INF , !P1 ;
        /*0090*/                   FSEL R5, R5, -INF , !P1 ;
        /*00a0*/                   FFMA R4, R4, R5, -R6 ;
        /*00b0*/                   MUFU.EX2 R4, R4 ;
        /*00c0*/                   HMMA.16816.F32.BF16 R4, R8, R12, R4 ;
        /*00d0*/                   ISETP.GE.AND P2, PT, R0, 0x4, PT ;
        /*00e0*/              @!P2 BRA 0x30 ;
        /*00f0*/                   EXIT ;
        /*0100*/                   BRA 0x100;
"""


# Made-up Hopper SASS (chapter 10's shapes, cuobjdump's layout): a producer's loop of TMA copies
# (0x20-0x40, no HGMMA), then the consumer's loop from 0x60 to its back edge at 0x130: an mbarrier
# try_wait whose retry lies out of line at 0x170 (an inner loop, off the steady path), then S = Q K^T
# as two HGMMA.64x64x16 from shared memory, its wait, one MUFU.EX2, P V as one HGMMA.64x128x16 with
# A in registers, its wait and the release of the stage. By hand, per warp (an HGMMA is the
# warpgroup's wgmma, issued by each of its four warps: a quarter of its FLOP and bytes each):
#   FLOP   2 x (2 x 64 x 64 x 16) / 4 + 2 x 64 x 128 x 16 / 4 = 65536 + 65536 = 131072
#   shared 2 x (64 x 16 + 16 x 64) x 2 / 4 + (16 x 128) x 2 / 4 = 2048 + 1024 = 3072 bytes
#   the steady iteration: 0x60-0x70 (2), 0x80-0x130 (12): 14 instructions; the masked one (the most
#   instructions) takes the retry too: 0x170-0x190, 3 more.
HOPPER_SASS = """
        Function : _Z6hopperv
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   USETMAXREG.DEALLOC.CTAPOOL 0x18 ;
        /*0020*/                   UTMALDG.3D [UR8], [UR16] ;
        /*0030*/                   ISETP.GE.AND P1, PT, R0, 0x4, PT ;
        /*0040*/              @!P1 BRA 0x20 ;
        /*0050*/                   USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xf0 ;
        /*0060*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R16+UR10], R15 ;
        /*0070*/              @!P0 BRA 0x170 ;
        /*0080*/                   BAR.SYNC.DEFER_BLOCKING R8, 0x100 ;
        /*0090*/                   WARPGROUP.ARRIVE ;
        /*00a0*/                   HGMMA.64x64x16.F32.BF16 R88, gdesc[UR16], RZ, !UPT ;
        /*00b0*/                   HGMMA.64x64x16.F32.BF16 R88, gdesc[UR20], R88, gsb0 ;
        /*00c0*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;
        /*00d0*/                   MUFU.EX2 R4, R4 ;
        /*00e0*/                   WARPGROUP.ARRIVE ;
        /*00f0*/                   HGMMA.64x128x16.F32.BF16 R24, R132, gdesc[UR16].tnspB, R24, gsb0 ;
        /*0100*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;
        /*0110*/                   SYNCS.ARRIVE.TRANS64.A1T0 RZ, [R0+UR6], RZ ;
        /*0120*/                   ISETP.GE.AND P2, PT, R0, 0x4, PT ;
        /*0130*/              @!P2 BRA 0x60 ;
        /*0140*/                   EXIT ;
        /*0150*/                   BRA 0x150;
        /*0160*/                   NOP;
        /*0170*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R16+UR10], R15 ;
        /*0180*/              @!P0 BRA 0x170 ;
        /*0190*/                   BRA 0x80 ;
"""

# ptxas -v's info when it serialises the wgmma of a kernel (nvcc 13.0's wording), and one kernel without.
PTXAS_LOG = ("ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized "
             "due to non wgmma instructions defining accumulator registers of a wgmma between start and end of "
             "the pipeline stage in the function '_Z6hopperv'\n"
             "ptxas info    : Compiling entry function '_Z5otherv' for 'sm_90a'\n")


class Model(unittest.TestCase):
    def test_the_loop_and_its_paths(self):
        instructions = sr.parse_sass(SASS)["_Z6kernelv"]
        self.assertEqual(len(instructions), 17)
        loop = sr.main_loop(instructions)
        self.assertEqual(loop.head_address, 0x30)
        self.assertEqual(loop.inner_loops, 0)
        s = loop.steady
        # 0x30-0x70 (5, the @!PT LDS counted as issued only), then 0xa0-0xe0 (5): 10 in all.
        self.assertEqual(s.total, 10)
        self.assertEqual((s.get("HMMA"), s.get("LDSM"), s.get("LDGSTS"), s.get("MUFU.EX2"), s.get("FFMA")),
                         (2, 1, 1, 1, 1))
        self.assertEqual(s.get("LDS"), 0)
        self.assertEqual(s.get("never executed"), 1)
        # Shared bytes: LDSM .x4 512, LDGSTS.128 32 lanes x 16 = 512.
        self.assertEqual(s.shared, 1024)
        self.assertEqual(loop.masked.total - s.total, 2)  # the two FSEL

    def test_hopper_loop_flop_and_bytes(self):
        instructions = sr.parse_sass(HOPPER_SASS)["_Z6hopperv"]
        self.assertEqual(instructions[10].opcode, "HGMMA.64x64x16.F32.BF16")  # the shape is the opcode's
        self.assertEqual(sr.hgmma_shape(instructions[15]), (64, 128, 16))
        self.assertTrue(sr.hgmma_a_in_registers(instructions[15]))
        self.assertFalse(sr.hgmma_a_in_registers(instructions[10]))
        loop = sr.main_loop(instructions)
        # The outermost loop holding HGMMA: the consumer's, not the producer's loop before it.
        self.assertEqual(loop.head_address, 0x60)
        self.assertEqual((loop.inner_loops, loop.inner_on_path), (1, 0))  # the retry of the try_wait
        s = loop.steady
        self.assertEqual(s.total, 14)
        self.assertEqual((s.get("HGMMA"), s.get("HGMMA A in registers"), s.get("WARPGROUP"), s.get("SYNCS"),
                          s.get("BAR"), s.get("MUFU.EX2"), s.get("UTMALDG")), (3, 1, 4, 2, 1, 1, 0))
        self.assertEqual(s.flop, 2 * (2 * 64 * 64 * 16) // 4 + 2 * 64 * 128 * 16 // 4)
        self.assertEqual(s.flop, 131072)
        self.assertEqual(s.shared, 3072)
        self.assertEqual(loop.masked.total - s.total, 3)
        # The ceilings from these: H100, per warp per iteration.
        h100 = next(g for g in sr.GPUS if g.name.startswith("H100"))
        got = sr.ceilings(h100, loop)
        per_clock = 132 * 1.83e9 / 1e12
        self.assertAlmostEqual(got["shared memory"], 131072 / (3072 / 128) * per_clock, places=6)
        self.assertAlmostEqual(got["issue"], 131072 / (14 / 4) * per_clock, places=6)
        self.assertAlmostEqual(got["MUFU"], 131072 / (1 * 32 / 16) * per_clock, places=6)

    def test_hopper_shapes_and_serialized(self):
        self.assertEqual(sr.parse_serialized(PTXAS_LOG), {"_Z6hopperv": ["C7515"]})
        self.assertEqual(sr.parse_serialized("ptxas info    : Used 168 registers"), {})
        # hopper.cuh's shared_bytes(128, 128, 64): Q 128 x 128, two stages of K and V 64 x 128,
        # 2 bytes each, and 1024 for the alignment: 96 KiB + 1 KiB.
        self.assertEqual(sr.ch10_kernel(["__nv_bfloat16", "128", "128", "64"]), (None, 96 * 1024 + 1024))
        self.assertEqual([g.name for g in sr.gpus_of("sm_90a")], ["H100 SXM5", "H200 SXM"])

    def test_occupancy_worked_by_hand(self):
        h100 = next(g for g in sr.GPUS if g.name.startswith("H100"))
        # 255 registers -> 256 per thread, 8192 per warp: 8 warps by registers = 2 blocks of 4 warps;
        # 96 KiB + 1 KiB reserved per block: 228 / 97 = 2 blocks; 2048 / 128 threads = 16 blocks.
        self.assertEqual(sr.occupancy(h100, 255, 128, 96 * 1024), (2, 8, ["registers", "shared memory"]))
        # 130 registers -> 136 per thread (multiple of 8), 4352 per warp: 15 warps by registers = 3
        # blocks of 4 warps; 40 KiB + 1: 5 blocks by shared memory.
        self.assertEqual(sr.occupancy(h100, 130, 128, 40 * 1024), (3, 12, ["registers"]))
        a100 = next(g for g in sr.GPUS if g.name.startswith("A100"))
        # 96 KiB + 1 KiB: only one block fits A100's 164 KiB.
        self.assertEqual(sr.occupancy(a100, 200, 128, 96 * 1024)[:2], (1, 4))
        # More than a block may ask for: none.
        self.assertEqual(sr.occupancy(a100, 64, 128, 200 * 1024)[0], 0)

    def test_ceilings_worked_by_hand(self):
        h100 = next(g for g in sr.GPUS if g.name.startswith("H100"))
        c = sr.Counts({"HMMA": 128, "MUFU": 68}, shared=20480, total=512, flop=128 * 4096)
        loop = sr.LoopReport(0, 1, 0, c, c, [])
        got = sr.ceilings(h100, loop)
        per_clock = 132 * 1.83e9 / 1e12  # TFLOP/s per FLOP/clk/SM
        flop = 128 * 4096
        self.assertAlmostEqual(got["tensor"], 989.0, places=6)
        self.assertAlmostEqual(got["shared memory"], flop / (20480 / 128) * per_clock, places=6)  # 3277 FLOP/clk
        self.assertAlmostEqual(got["issue"], flop / (512 / 4) * per_clock, places=6)  # 4096 FLOP/clk
        self.assertAlmostEqual(got["MUFU"], flop / (68 * 32 / 16) * per_clock, places=6)  # 3855 FLOP/clk


def counts():
    """The hand-worked counts of tests/sass_report_kernel.cu against the report's, for sm_80."""
    try:
        nvcc = sr.shutil.which(os.environ.get("CUDACXX") or "nvcc")
        if nvcc is None:
            raise sr.ToolMissing("nvcc not found")
        cuobjdump = sr.find_tool("cuobjdump", nvcc)
        sr.find_tool("nvdisasm", nvcc)
    except sr.ToolMissing as e:
        print(f"SKIPPED: {e}")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        cubin, log = sr.compile_cubin(nvcc, os.path.join(HERE, "sass_report_kernel.cu"), "sm_80", tmp)
        kernels = sr.analyse(cubin, log, "sm_80", {}, cuobjdump)
    (k,) = [k for k in kernels if "sass_report_kernel" in k["name"]]
    s = k["loop"]["steady"]
    expected = {"LDGSTS": 1, "LDGDEPBAR": 1, "DEPBAR": 1, "BAR.SYNC": 2, "LDSM": 2, "HMMA": 4, "MUFU.EX2": 2,
                "SHFL": 1, "FADD": 3}
    failures = [f"{kind}: {s.get(kind, 0)}, by hand {n}" for kind, n in expected.items() if s.get(kind, 0) != n]
    if k["loop"]["inner_loops"] != 0:
        failures.append(f"inner loops: {k['loop']['inner_loops']}, by hand 0")
    if (k["whole"]["HMMA"], k["whole"]["LDSM"]) != (4, 2):
        failures.append(f"whole kernel HMMA, LDSM: {k['whole']['HMMA']}, {k['whole']['LDSM']}, by hand 4, 2")
    if k["threads"] != 32:
        failures.append(f"threads: {k['threads']}, __launch_bounds__ says 32")
    if s.get("LDS", 0) or s.get("STS", 0) or s.get("FMUL", 0):
        failures.append(f"LDS, STS, FMUL: {s.get('LDS', 0)}, {s.get('STS', 0)}, {s.get('FMUL', 0)}, by hand 0")
    print(f"sass_report_kernel, sm_80, one iteration: {dict(sorted(s.items()))}")
    for f in failures:
        print(f"FAIL {f}")
    print("PASS: every count as worked out by hand" if not failures else f"FAIL: {len(failures)} count(s) differ")
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) == 2 and sys.argv[1] == "counts":
        sys.exit(counts())
    if len(sys.argv) == 2 and sys.argv[1] == "model":
        sys.argv = sys.argv[:1]
    unittest.main()
