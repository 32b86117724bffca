"""The fused GEMM + communication ops (cco.ops.fused) on the GPU, as the
ranks of one job (several ranks on one GPU need MPS: tests/gpu/mps.sh):

    build/bin/ccorun -n 4 -p python3 tests/gpu/test_fused_gpu.py [--quick] [--only OP:TRANSPORT,...]

Every op (gemm_rs, gemm_ar, gemm_ag, gemm_a2a, ag_gemm, a2a_gemm) over every
transport (lsa, sdma, sequential, auto), on shapes that are not multiples of
the tiles, against an fp32 reference that every rank computes from every
rank's inputs (one seed per rank and round, so no communication is needed
to check). Each case runs several rounds with new data (the counters and
buffers are reused), then is captured in a CUDA graph and replayed with new
inputs copied into the captured ones, every replay checked. The ops of one
shape run interleaved, so one workspace serves calls of every kind. After
each case the workspace's error word must be 0. Then calls of different ops
and transports back to back, a disagreement between ranks, which must raise
on every rank instead of hanging, and a call after release_workspace. Rank 0 prints
"test_fused_gpu: N passed, N failed"; exit 1 on a failure. A case still running after
CCO_TEST_WATCHDOG_S seconds (default 90) prints every thread's Python stack on every rank,
again every period, so a hang shows where each rank waits.
"""
import faulthandler
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
os.environ.setdefault("CUDA_MODULE_LOADING", "EAGER")  # kernels wait for kernels of other ranks (docs/sdma.md)

import torch  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False  # the reference's fp32 products exact
# One CPU thread per rank: the ranks share the machine, and torch's thread pools, one per rank,
# each as wide as the machine, made every small CPU tensor op take milliseconds.
torch.set_num_threads(1)

from cco import CCOInvalidUsage  # noqa: E402
from cco.launch import finalize, init_communicator  # noqa: E402
from cco.ops import fused  # noqa: E402
from gpu_checks import Job  # noqa: E402  (next to this file)

QUICK = "--quick" in sys.argv
# --only op:transport,...: just those cases on the first shape (to chase one failure)
ONLY = next((sys.argv[i + 1].split(",") for i, v in enumerate(sys.argv[:-1]) if v == "--only"), None)
ROUNDS = 2 if QUICK else 3
REPLAYS = 2 if QUICK else 4
TRANSPORTS = ["lsa", "sdma", "sequential", "auto"]
# (rows per rank of the GEMM's A or of a block, K, N): not tile multiples; one bigger
SHAPES = [(72, 136, 200), (300, 520, 392)] if QUICK else [(72, 136, 200), (300, 520, 392), (1000, 1024, 776)]
if ONLY:
    SHAPES = SHAPES[:1]
WATCHDOG_S = float(os.environ.get("CCO_TEST_WATCHDOG_S", "90"))


def rank_inputs(op, rank, rnd, world, rows, k, n):
    """Rank `rank`'s a and b of round rnd (CPU, fp32 values exact in bf16)."""
    g = torch.Generator().manual_seed(100003 * rnd + 7919 * rank + 31 * fused.OPS.index(op))
    a_rows = rows * world if op in ("gemm_rs", "gemm_ar", "gemm_a2a", "a2a_gemm") else rows
    a = (torch.randint(-16, 17, (a_rows, k), generator=g).float() / 16).bfloat16().float()
    b = (torch.randint(-16, 17, (k, n), generator=g).float() / 16).bfloat16().float()
    return a, b


def reference(op, me, rnd, world, rows, k, n):
    """On the GPU in fp32, which is exact here (multiples of 1/256 below 2**13): every rank computes
    every rank's products, work that grows with the square of the ranks."""
    ins = [tuple(t.cuda() for t in rank_inputs(op, r, rnd, world, rows, k, n)) for r in range(world)]
    prods = [a @ b for a, b in ins]
    if op == "gemm_rs":
        return sum(prods)[me * rows:(me + 1) * rows]
    if op == "gemm_ar":
        return sum(prods)
    if op == "gemm_ag":
        return torch.cat(prods)
    if op == "gemm_a2a":
        return torch.cat([p[me * rows:(me + 1) * rows] for p in prods])
    b = ins[me][1]
    if op == "ag_gemm":
        return torch.cat([a for a, _ in ins]) @ b
    return torch.cat([a[me * rows:(me + 1) * rows] for a, _ in ins]) @ b  # a2a_gemm


def close(got, want):
    got = got.float()
    if got.shape != want.shape:
        return False, f"shape {list(got.shape)}, want {list(want.shape)}"
    err = (got - want).abs().max().item()
    scale = max(1.0, want.abs().max().item())
    return err <= 2e-2 * scale, f"max error {err:.4g} (scale {scale:.4g})"


def run_case(job, op, transport, shape):
    comm = job.comm
    world, me = comm.size, comm.rank
    rows, k, n = shape
    fn = getattr(fused, op)
    what = f"{op} {transport} rows={rows} k={k} n={n}"
    for rnd in range(ROUNDS):
        a, b = rank_inputs(op, me, rnd, world, rows, k, n)
        a, b = a.bfloat16().cuda(), b.bfloat16().cuda()
        if rnd == 1:  # a transposed weight view: any strides of b
            b = b.t().contiguous().t()
        got = fn(a, b, comm, transport=transport)
        torch.cuda.synchronize()
        ok, detail = close(got, reference(op, me, rnd, world, rows, k, n))
        job.expect(ok, f"{what} round {rnd}: {detail}")
    # calls back to back, no synchronization between them: only the last result is checked
    # (inputs copied to the GPU first: a copy from pageable memory is synchronous, see docs/fused_ops.md)
    ins = [[t.bfloat16().cuda() for t in rank_inputs(op, me, rnd, world, rows, k, n)] for rnd in range(3, 6)]
    torch.cuda.synchronize()
    for a, b in ins:
        got = fn(a, b, comm, transport=transport)
    torch.cuda.synchronize()
    ok, detail = close(got, reference(op, me, 5, world, rows, k, n))
    job.expect(ok, f"{what} back to back: {detail}")
    # out= given
    a, b = rank_inputs(op, me, 0, world, rows, k, n)
    want = reference(op, me, 0, world, rows, k, n)
    out = torch.full(tuple(want.shape), float("nan"), dtype=torch.bfloat16, device="cuda")
    got = fn(a.bfloat16().cuda(), b.bfloat16().cuda(), comm, out=out, transport=transport)
    torch.cuda.synchronize()
    ok, detail = close(out, want)
    job.expect(got is out and ok, f"{what} out=: {detail}")
    # CUDA graph: capture once, replay with new inputs
    a_in, b_in = a.bfloat16().cuda(), b.bfloat16().cuda()
    fn(a_in, b_in, comm, transport=transport)  # warm-up outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        with torch.cuda.graph(graph, stream=stream):
            g_out = fn(a_in, b_in, comm, transport=transport)
    torch.cuda.synchronize()
    comm.barrier()
    for rep in range(REPLAYS):
        rnd = 10 + rep
        a, b = rank_inputs(op, me, rnd, world, rows, k, n)
        a_in.copy_(a.bfloat16())
        b_in.copy_(b.bfloat16())
        graph.replay()
        torch.cuda.synchronize()
        ok, detail = close(g_out, reference(op, me, rnd, world, rows, k, n))
        job.expect(ok, f"{what} graph replay {rep}: {detail}")
    del graph
    st = fused.fused_status(comm)
    job.expect(st == 0, f"{what}: the workspace's error word is {st}")


def check_transitions(job):
    """Calls of different transports and ops back to back, no synchronization
    between them: each call's entry barrier must keep a call from overwriting
    buffers a peer still reads for the previous one. Only the last result is
    checked (the others are views the next call reuses)."""
    comm = job.comm
    world, me = comm.size, comm.rank
    rows, k, n = 300, 520, 392
    seq = [("ag_gemm", "lsa"), ("gemm_rs", "sequential"), ("a2a_gemm", "sdma"), ("ag_gemm", "sequential"),
           ("gemm_ag", "lsa"), ("a2a_gemm", "sequential"), ("gemm_a2a", "sdma"), ("gemm_rs", "lsa")]
    ins = [[t.bfloat16().cuda() for t in rank_inputs(op, me, 20 + i, world, rows, k, n)] for i, (op, _) in enumerate(seq)]
    torch.cuda.synchronize()
    for (op, transport), (a, b) in zip(seq, ins):
        got = getattr(fused, op)(a, b, comm, transport=transport)
    torch.cuda.synchronize()
    op = seq[-1][0]
    ok, detail = close(got, reference(op, me, 20 + len(seq) - 1, world, rows, k, n))
    job.expect(ok, f"transports and ops back to back, the last ({op}): {detail}")
    job.expect(fused.fused_status(comm) == 0, "transports back to back: the error word")


def check_disagreement(job):
    """Ranks that disagree on the shape raise (every rank), no hang."""
    comm = job.comm
    rows = 64 + (comm.rank % 2) * 8
    a = torch.ones((rows, 64), dtype=torch.bfloat16, device="cuda")
    b = torch.ones((64, 64), dtype=torch.bfloat16, device="cuda")
    try:
        fused.ag_gemm(a, b, comm, transport="lsa")
        job.expect(False, "ranks with different shapes: no error")
    except CCOInvalidUsage as exc:
        job.expect("disagree" in str(exc), f"ranks with different shapes: {exc}")


def main():
    comm = init_communicator()
    torch.cuda.set_device(comm.cuda_device)
    job = Job(comm)
    start = time.monotonic()
    for shape in SHAPES:
        for transport in TRANSPORTS:
            for op in fused.OPS:
                if ONLY and f"{op}:{transport}" not in ONLY:
                    continue
                t0, failed = time.monotonic(), job.failed
                faulthandler.dump_traceback_later(WATCHDOG_S, repeat=True)
                try:
                    run_case(job, op, transport, shape)
                except Exception:  # noqa: BLE001 - a failed case is reported, the others still run
                    job.expect(False, f"{op} {transport} {shape}:\n{traceback.format_exc()}")
                comm.barrier()
                faulthandler.cancel_dump_traceback_later()
                if comm.rank == 0:  # progress: a slow case (a compile, a wait that times out) shows here
                    print(f"test_fused_gpu: {op} {transport} rows={shape[0]} k={shape[1]} n={shape[2]}: "
                          f"{'ok' if job.failed == failed else 'FAILED'} on rank 0, {time.monotonic() - t0:.1f} s "
                          f"({time.monotonic() - start:.0f} s in all)", flush=True)
    if not ONLY:
        try:
            check_transitions(job)
        except Exception:  # noqa: BLE001
            job.expect(False, f"transports back to back:\n{traceback.format_exc()}")
        comm.barrier()
        if comm.size > 1:
            check_disagreement(job)
    # release, then a new workspace on the next call
    fused.release_workspace(comm)
    try:
        a = torch.ones((64, 64), dtype=torch.bfloat16, device="cuda")
        got = fused.ag_gemm(a, a, comm, transport="lsa")
        torch.cuda.synchronize()
        job.expect(bool((got.float() == 64).all()), "ag_gemm after release_workspace")
    except Exception:  # noqa: BLE001
        job.expect(False, f"ag_gemm after release_workspace:\n{traceback.format_exc()}")
    comm.barrier()
    print(f"rank {comm.rank}: {job.passed} passed, {job.failed} failed", flush=True)
    if comm.rank == 0:
        print(f"test_fused_gpu: {job.passed} passed, {job.failed} failed", flush=True)
    failed = job.failed
    comm.destroy()
    finalize()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
