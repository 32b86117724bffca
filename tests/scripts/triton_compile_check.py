"""Compiles every Triton kernel of the examples, the GPU test and the
benchmark for a fixed GPU (sm_90, or --arch) without one, linked with the
device bitcode the lookup finds, and checks the PTX: no call and no extern
declaration of a cco_ir_ function left (every wrapper inlined), no local
memory, and every barrier of a scope reached by all of its threads through
the same instruction (tests/scripts/ptx_divergence.py). Also checks that a
kernel compiled without the bitcode in extern_libs, or misusing a binding (a
value out of its C type, a run-time scope, a scope the call refuses, a
tensor for a side effect), fails while tracing with the reason named. Run by
tests/scripts/device_triton.sh; prints one line per kernel and ends with
"N passed, N failed".
"""
import argparse
import importlib.util
import inspect
import re
import sys
import time
from pathlib import Path

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget

from cco.ir.triton import cco
from ptx_divergence import barrier_problems  # next to this file

REPO = Path(__file__).resolve().parents[2]
_I64 = "i64"
# The examples' kernels: (file, kernel, signature, constexprs, num_warps).
EXAMPLES = [
    ("examples/ir/lsa_copy.py", "lsa_copy", {"dev_comm": _I64, "win": _I64, "peer": "constexpr", "N": "constexpr"},
     {"peer": 1, "N": 256}, 4),
    ("examples/ir/gda_put.py", "gda_put_kernel",
     {"dev_comm": _I64, "window": _I64, "peer": "constexpr", "dst_off": "constexpr", "src_off": "constexpr",
      "nbytes": "constexpr"}, {"peer": 1, "dst_off": 0, "src_off": 0, "nbytes": 65536}, 1),
    ("examples/ir/gda_put.py", "gda_wait_kernel", {"dev_comm": _I64}, {}, 1),
    ("examples/ir/test_triton_cco.py", "lsa_put",
     {"dev_comm": _I64, "win": _I64, "status": "*i32", "WORDS": "constexpr", "BLOCK": "constexpr"},
     {"WORDS": 16384, "BLOCK": 1024}, 4),
    ("examples/ir/test_triton_cco.py", "sdma_put",
     {"dev_comm": _I64, "win": _I64, "status": "*i32", "expected": _I64, "NBYTES": "constexpr"}, {"NBYTES": 65536}, 4),
    ("examples/ir/test_triton_cco.py", "gda_ring",
     {"dev_comm": _I64, "win": _I64, "status": "*i32", "expected": _I64, "TEAM": "constexpr", "NBYTES": "constexpr"},
     {"TEAM": 3, "NBYTES": 65536}, 4),
]


@triton.jit
def _peer_too_big(dc, win):
    cco.Window.lsa_ptr(win, 2**40, 0)


@triton.jit
def _run_time_scope(dc, win):
    cco.Gda.flush(dc, coop=cco.DevComm.rank(dc))


@triton.jit
def _thread_scope_gda_barrier(dc, win):
    cco.GdaBarrier.sync(dc, coop=cco.CoopScope.THREAD)


@triton.jit
def _tensor_of_peers(dc, win):
    cco.Gda.put(dc, tl.arange(0, 4), win, 0, win, 0, 8)


# Misuse caught while tracing: (kernel, words of the message).
MISUSE = [(_peer_too_big, "does not fit the C int"), (_run_time_scope, "must be a compile-time constant"),
          (_thread_scope_gda_barrier, "coop must be one of [1, 2]"), (_tensor_of_peers, "must be a scalar")]


def error_text(exc):
    text, cause = "", exc
    while cause is not None:  # Triton 3.2 keeps the message in the cause only
        text, cause = text + str(cause) + "\n", cause.__cause__ or cause.__context__
    return text


def load(path):
    spec = importlib.util.spec_from_file_location(Path(path).stem, REPO / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fused_specs():
    """The fused GEMM ops' kernels (cco.ops.fused_kernels), each variant the
    ops launch: (name, kernel, signature, constexprs, num_warps)."""
    from cco.ops import fused, fused_kernels as K
    # fused.py sizes the ctrl region without importing Triton, so it keeps its own copy of where
    # the counters start: the two must agree, or the entry kernel resets the wrong words
    assert fused.CTRL_HEADER_WORDS == K.COUNTER_WORD.value, (fused.CTRL_HEADER_WORDS, K.COUNTER_WORD)
    assert fused.CTRL_HEADER_WORDS >= K.BASE_WORD.value + fused.MAX_RANKS
    ints = lambda *names: {n: "i32" for n in names}  # noqa: E731
    tiles = {"BLOCK_M": fused.BLOCK_M, "BLOCK_N": fused.BLOCK_N, "BLOCK_K": fused.BLOCK_K, "GROUP_M": fused.GROUP_M}
    jobs = []
    for sdma in (False, True):
        t = "sdma" if sdma else "lsa"
        jobs.append((f"entry[{t}]", K.entry, {"dc": _I64, "ctrl": "*i64", **ints("n_reset", "W"), "SDMA": "constexpr",
                                             "BLOCK": "constexpr"}, {"SDMA": sdma, "BLOCK": 1024}, 4))
        for mode in (0, 1):
            sig = {"dc": _I64, "win": _I64, "ctrl": "*i64", "win_ptr": "*bf16", "a_ptr": "*bf16", "b_ptr": "*bf16",
                   **ints("M_A", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn", "rows_per_slot"),
                   "send_off": _I64, "recv_off": _I64, "MODE": "constexpr", "SDMA": "constexpr", "ALIGNED": "constexpr",
                   **{k: "constexpr" for k in tiles}}
            jobs.append((f"gemm_push[{'scatter' if mode == 0 else 'broadcast'},{t}]", K.gemm_push, sig,
                         {"MODE": mode, "SDMA": sdma, "ALIGNED": True, **tiles}, fused.NUM_WARPS))
        sig = {"dc": _I64, "win": _I64, "ctrl": "*i64", **ints("rows_per_slot", "push_tiles_n", "panels_per_source"),
               "SDMA": "constexpr", "PUSH_BLOCK_M": "constexpr"}
        jobs.append((f"finish_wait[{t}]", K.finish_wait, sig, {"SDMA": sdma, "PUSH_BLOCK_M": fused.BLOCK_M}, 1))
        # one panel per source: Triton passes an int argument of 1 as a constant, not a tensor
        one = {**sig, "panels_per_source": "constexpr", "push_tiles_n": "constexpr"}
        jobs.append((f"finish_wait[{t},1 panel]", K.finish_wait, one,
                     {"SDMA": sdma, "PUSH_BLOCK_M": fused.BLOCK_M, "panels_per_source": 1, "push_tiles_n": 1}, 1))
        for per_dest in (False, True):  # noqa: B007
            sig = {"dc": _I64, "win": _I64, "ctrl": "*i64", "win_ptr": "*bf16", "b_ptr": "*bf16", "out_ptr": "*bf16",
                   **ints("rows_per_block", "N", "K", "stride_bk", "stride_bn", "stride_om", "stride_on"),
                   "send_off": _I64, "recv_off": _I64, "first_block": "i32", "PER_DEST": "constexpr",
                   "SDMA": "constexpr", "ALIGNED": "constexpr", **{k: "constexpr" for k in tiles}}
            jobs.append((f"gemm_pull[{'a2a' if per_dest else 'ag'},{t}]", K.gemm_pull, sig,
                         {"PER_DEST": per_dest, "SDMA": sdma, "ALIGNED": per_dest == sdma, **tiles}, fused.NUM_WARPS))
    jobs.append(("wait_rows", K.wait_rows, {"dc": _I64, "ctrl": "*i64", "chunks": "i32"}, {}, 1))
    sig = {"recv_ptr": "*bf16", "out_ptr": "*bf16", **ints("rows_per_slot", "N", "W", "stride_om", "stride_on"),
           "BLOCK_M": "constexpr", "BLOCK_N": "constexpr"}
    jobs.append(("reduce_slots", K.reduce_slots, sig, {"BLOCK_M": fused.REDUCE_BLOCK_M, "BLOCK_N": fused.REDUCE_BLOCK_N},
                 4))
    for per_dest in (False, True):
        sig = {"dc": _I64, "win": _I64, "ctrl": "*i64", **ints("rows_per_block", "row_bytes"), "send_off": _I64,
               "recv_off": _I64, "chunk_rows": "i32", "PER_DEST": "constexpr"}
        jobs.append((f"sdma_post_rows[{'a2a' if per_dest else 'ag'}]", K.sdma_post_rows, sig, {"PER_DEST": per_dest}, 1))
    # the wide tiles of CCO_FUSED_TILES=256x3: the two GEMMs the benchmark found fastest with them
    wide = []
    for name, kernel, sig, consts, nw in jobs:
        if name in ("gemm_push[scatter,lsa]", "gemm_pull[ag,lsa]"):
            wide.append((name.replace("]", ",128x256]"), kernel, sig, {**consts, "BLOCK_N": 256}, nw))
    return [(f"cco/ops/fused_kernels.py:{name}", *rest) for name, *rest in jobs + wide]


def compile_one(kernel, signature, constexprs, num_warps, arch, libs):
    # Triton 3.2 names the constants `constants`; later ones `constexprs`.
    if "constexprs" in inspect.signature(triton.compiler.ASTSource).parameters:
        src = triton.compiler.ASTSource(fn=kernel, signature=signature, constexprs=constexprs)
    else:
        src = triton.compiler.ASTSource(fn=kernel, signature=signature, constants=constexprs)
    options = {"num_warps": num_warps, "extern_libs": tuple(libs.items())}
    return triton.compile(src, target=GPUTarget("cuda", arch, 32), options=options)


def ptx_problems(ptx):
    # Inlined wrappers leave their names in comments (block labels) only.
    code = [line.split("//")[0] for line in ptx.splitlines()]
    problems = [f"left in the PTX: {line.strip()}" for line in code if re.search(r"\bcco_ir_\w+", line)]
    if ".local" in ptx:
        problems.append("local memory in the PTX")
    # A scope's barrier that only some of its threads reach, or that they
    # reach through different copies: undefined behaviour on the GPU.
    problems += barrier_problems(ptx)
    return problems[:3]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", type=int, default=90)
    ap.add_argument("--expect-bitcode", help="the file the lookup must find")
    args = ap.parse_args()
    libs = cco.get_extern_libs(arch=args.arch)
    passed = failed = 0

    def report(ok, what, detail=""):
        nonlocal passed, failed
        passed, failed = passed + ok, failed + (not ok)
        print(f"{'ok  ' if ok else 'FAIL'} {what}{': ' + detail if detail else ''}", flush=True)

    report(args.expect_bitcode is None or Path(libs["cco"]) == Path(args.expect_bitcode).resolve(),
           f"extern_libs for sm_{args.arch}: {libs['cco']}")
    sys.path.insert(0, str(REPO / "tests" / "gpu"))
    import triton_kernels

    jobs = [(f"{path}:{name}", getattr(load(path), name), sig, consts, nw) for path, name, sig, consts, nw in EXAMPLES]
    jobs += [(f"tests/gpu/triton_kernels.py:{key}", *spec) for key, spec in triton_kernels.COMPILE_SPECS.items()]
    bench = load("bench/bench_triton.py")
    jobs += [(f"bench/bench_triton.py:{key}", *spec) for key, spec in bench.COMPILE_SPECS.items()]
    jobs += fused_specs()
    for what, kernel, sig, consts, nw in jobs:
        t0 = time.time()
        try:
            compiled = compile_one(kernel, sig, consts, nw, args.arch, libs)
        except Exception as exc:  # noqa: BLE001 - reported as this kernel's failure
            report(False, what, f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1][:300]}")
            continue
        problems = ptx_problems(compiled.asm["ptx"])
        report(not problems and len(compiled.asm["cubin"]) > 0, what,
               "; ".join(problems) or f"inlined, assembled ({time.time() - t0:.1f} s)")

    # Without the bitcode: a clear error while tracing, not ptxas's.
    try:
        compile_one(getattr(load(EXAMPLES[0][0]), EXAMPLES[0][1]), *EXAMPLES[0][2:], args.arch, {})
        report(False, "a kernel compiled without the bitcode fails", "it compiled")
    except Exception as exc:  # noqa: BLE001
        text = error_text(exc)
        report("extern_libs=cco.get_extern_libs()" in text, "a kernel compiled without the bitcode fails while "
               "tracing, naming extern_libs", "" if "extern_libs=" in text else text.strip().splitlines()[-1][:300])
    for kernel, words in MISUSE:
        try:
            compile_one(kernel, {"dc": _I64, "win": _I64}, {}, 4, args.arch, libs)
            report(False, f"misuse {kernel.__name__} fails while tracing", "it compiled")
        except Exception as exc:  # noqa: BLE001
            text = error_text(exc)
            report(words in text, f"misuse {kernel.__name__} fails while tracing: {words}",
                   "" if words in text else text.strip().splitlines()[-1][:300])
    print(f"triton_compile_check: {passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
