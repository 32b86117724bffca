"""tests/scripts/ptx_divergence.py, the check device.triton runs on the PTX
of every Triton kernel: barriers under branches that differ between threads
are found, barriers every thread reaches are not."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from ptx_divergence import barrier_problems  # noqa: E402

BAR_RED = "{ .reg .pred p; setp.ne.u32 p, %r2, 0; bar.red.or.pred p, 0, p; selp.u32 %r3, 1, 0, p; }"


def kernel(body):
    return (".version 8.5\n.target sm_90\n.extern .func (.param .b32 r) vprintf(.param .b64 a);\n"
            ".visible .entry k(\n\t.param .u64 k_param_0\n)\n{\n\t.reg .pred %p<4>;\n\t.reg .b32 %r<9>;\n"
            "\t.loc 1 2 3\n" + body + "\n\tret;\n}\n")


LEADER = "\tmov.u32 %r1, %tid.x;\n\tsetp.eq.s32 %p1, %r1, 0;\n"


def test_copies_of_a_bar_red_in_both_arms_of_a_leader_branch():
    # What LLVM made of ccoGdaWait's broadcast when the asm was not convergent.
    ptx = kernel(LEADER + f"\t@%p1 bra $L__BB0_2;\n\t{BAR_RED}\n\tbra.uni $L__BB0_3;\n$L__BB0_2:\n"
                 f"\t// begin inline asm\n\t{BAR_RED}\n\t// end inline asm\n$L__BB0_3:")
    problems = barrier_problems(ptx)
    assert len(problems) == 2 and all("bar.red" in p and p.startswith("k: ") for p in problems)


def test_a_barrier_after_the_leader_branch_joins():
    ptx = kernel(LEADER + "\t@%p1 bra $L__BB0_2;\n\tst.global.u32 [%rd1], %r1;\n$L__BB0_2:\n\tbar.sync 0;\n"
                 f"\t{BAR_RED}")
    assert barrier_problems(ptx) == []


def test_a_barrier_only_the_leader_reaches():
    ptx = kernel(LEADER + "\t@!%p1 bra $L__BB0_2;\n\tbar.sync 0;\n$L__BB0_2:")
    assert len(barrier_problems(ptx)) == 1


def test_a_branch_on_a_reduction_is_uniform():
    ptx = kernel(LEADER + f"\tselp.u32 %r2, 1, 0, %p1;\n\t{BAR_RED}\n\tsetp.eq.s32 %p2, %r3, 0;\n"
                 "\t@%p2 bra $L__BB0_2;\n\tbar.sync 0;\n$L__BB0_2:")
    assert barrier_problems(ptx) == []


def test_a_value_set_under_a_leader_branch_varies_after_the_join():
    ptx = kernel(LEADER + "\tmov.u32 %r5, 0;\n\t@%p1 bra $L__BB0_2;\n\tmov.u32 %r5, 1;\n$L__BB0_2:\n"
                 "\tsetp.eq.s32 %p2, %r5, 0;\n\t@%p2 bra $L__BB0_3;\n\tbar.sync 0;\n$L__BB0_3:")
    assert len(barrier_problems(ptx)) == 1


def test_warp_collectives_need_lanes_that_agree():
    lane = "\tmov.u32 %r1, %laneid;\n\tsetp.eq.s32 %p1, %r1, 0;\n"
    bad = kernel(lane + "\t@%p1 bra $L__BB0_2;\n\tbar.warp.sync -1;\n$L__BB0_2:")
    assert ["bar.warp.sync" in p for p in barrier_problems(bad)] == [True]
    # A warp-wide broadcast is the same in every lane: branching on it is fine.
    good = kernel(lane + "\tshfl.sync.idx.b32 %r4, %r1, 0, 0x1f, -1;\n\tsetp.eq.s32 %p2, %r4, 0;\n"
                  "\t@%p2 bra $L__BB0_2;\n\tbar.warp.sync -1;\n$L__BB0_2:")
    assert barrier_problems(good) == []
