"""cco.ops.EpDispatchCombineOp on the GPU with torch, as the ranks of one job
(several ranks on one GPU need MPS: tests/gpu/mps.sh):

    build/bin/ccorun -n 4 -p python3 tests/gpu/test_moe_gpu.py

Cases: bf16 and fp8 (e4m3, scales per 1x128 block) tokens, throughput and
low-latency modes. Every rank derives every rank's tokens, weights and
expert ids from one seed, so each checks what it received (the count, and
the rows, weights and ids as a multiset) and what combine gave back: the
expert scales its rows by rank + 1, so each token must come back as its
row times the sum of (d + 1) over the ranks d it went to (small integers,
exact in bf16 and e4m3), with the weights of its kept choices. Rounds
alternate the zero-copy path (combine_in_view) and the copy fallback,
which op.combine_copies must count. Then the pipeline captured in a CUDA
graph (dispatch, the expert over every slot, combine into fixed outputs)
and replayed with new inputs, every replay checked. First of all, a late
rank's GEMM before its dispatch while the others wait in theirs
(--late-gemm-only: that alone; CCO_TEST_LATE_GEMM_PARTS sets its grid).
Rank 0 prints
"test_moe_gpu: N passed, N failed"; exit 1 on a failure.
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
os.environ.setdefault("CUDA_MODULE_LOADING", "EAGER")  # kernels wait for kernels of other ranks (docs/sdma.md)

import torch  # noqa: E402

# One CPU thread per rank: the ranks share the machine, and torch's thread pools, one per rank,
# each as wide as the machine, made every small CPU tensor op take milliseconds.
torch.set_num_threads(1)

from cco.launch import finalize, init_communicator  # noqa: E402
from cco.ops import EpDispatchCombineConfig, EpDispatchCombineOp  # noqa: E402
from gpu_checks import Job  # noqa: E402  (next to this file)

EXPERTS_PER_RANK, TOPK = 4, 4
REPLAYS = int(os.environ.get("CCO_TEST_REPLAYS", "50"))


def inputs(rank, rnd, nranks, max_tokens, fp8, hidden):
    """One rank's tokens of round rnd (CPU tensors), the same on every rank.
    The scales differ per token and block, so a scale that lands in the
    wrong slot or place shows; the expert ignores them (it checks rows)."""
    g = torch.Generator().manual_seed(7919 * rnd + rank)
    n = int(torch.randint(0, max_tokens + 1, (1,), generator=g))
    x = torch.randint(-8, 9, (n, hidden), generator=g).float()
    w = torch.rand((n, TOPK), generator=g)
    idx = torch.randint(-1, nranks * EXPERTS_PER_RANK, (n, TOPK), generator=g, dtype=torch.int32)
    tok = x.to(torch.float8_e4m3fn) if fp8 else x.to(torch.bfloat16)
    scales = torch.rand((n, hidden // 128), generator=g) if fp8 else None
    return x, tok, w, idx, scales


def ranks_of(row):
    return sorted({int(e) // EXPERTS_PER_RANK for e in row.tolist() if e >= 0})


def expected_out(x, idx):
    factor = torch.tensor([float(sum(d + 1 for d in ranks_of(r))) for r in idx])
    return (x * factor[:, None] + 0.0).to(torch.bfloat16), torch.where(idx >= 0, 1.0, 0.0)


def expert(op, recv_x, rows, rank, fp8, out):
    """The expert: its rows times (rank + 1) (the scales left out)."""
    if fp8:
        out[:rows].copy_(recv_x[:rows].float() * (rank + 1))
    else:
        torch.mul(recv_x[:rows], rank + 1, out=out[:rows])


def run_case(job, name, fp8, mode, max_tokens, rounds, hidden):
    comm, me, n = job.comm, job.comm.rank, job.comm.size
    cfg = EpDispatchCombineConfig(hidden_dim=hidden, max_num_inp_token_per_rank=max_tokens,
                                  num_experts_per_rank=EXPERTS_PER_RANK, num_experts_per_token=TOPK,
                                  data_type="fp8" if fp8 else "bf16", mode=mode)
    op = EpDispatchCombineOp(cfg, comm)
    own = torch.empty((op.max_recv_tokens, hidden), dtype=torch.bfloat16, device="cuda")
    copies = 0
    for rnd in range(rounds):
        every = [inputs(r, rnd, n, max_tokens, fp8, hidden) for r in range(n)]
        x, tok, w, idx, scales = every[me]
        wd = w.cuda()  # combine gets the same tensor: the dispatched weights come back
        recv_x, recv_w, recv_s, recv_i, total_recv, routing = op.dispatch(
            tok.cuda(), wd, scales.cuda() if fp8 else None, idx.cuda(), return_routing=True)
        torch.cuda.synchronize()
        op.check()
        total = int(total_recv.cpu().item())
        want = [(s, t) for s in range(n) for t in range(every[s][0].shape[0]) if me in ranks_of(every[s][3][t])]
        job.expect(total == len(want), f"{name} round {rnd}: {total} received, {len(want)} sent here")
        rows = recv_x[:total].view(torch.uint8).cpu()
        # A slot holds one token's row, weights, ids and (fp8) scales together: compared as one record.
        scl = recv_s[:total].cpu() if fp8 else None
        got = sorted(rows[q].numpy().tobytes() + recv_w[q].cpu().numpy().tobytes() +
                     recv_i[q].cpu().numpy().tobytes() + (scl[q].numpy().tobytes() if fp8 else b"")
                     for q in range(total))
        exp = sorted(every[s][1][t].view(torch.uint8).numpy().tobytes() + every[s][2][t].numpy().tobytes() +
                     every[s][3][t].numpy().tobytes() + (every[s][4][t].numpy().tobytes() if fp8 else b"")
                     for s, t in want)
        job.expect(got == exp, f"{name} round {rnd}: received rows, weights, ids" + (" and scales" if fp8 else ""))
        zero_copy = rnd % 2 == 0
        dst = op.combine_in_view() if zero_copy else own
        expert(op, recv_x, total, me, fp8, dst)
        copies += not zero_copy
        # The view needs no copy (any rows); a buffer of its own is copied in, every slot of it.
        out, out_w = op.combine(dst[:total] if zero_copy else dst, wd, routing=routing)
        torch.cuda.synchronize()
        op.check()
        want_out, keep = expected_out(x, idx)
        job.expect(bool(torch.equal(out.cpu(), want_out)), f"{name} round {rnd}: combined rows")
        job.expect(bool(torch.equal(out_w.cpu(), w * keep)), f"{name} round {rnd}: combined weights")
        comm.barrier()
    job.expect(op.combine_copies == copies, f"{name}: combine_copies {op.combine_copies}, {copies} made")
    run_graph(job, name, op, fp8, max_tokens, hidden)
    op.release()


def run_graph(job, name, op, fp8, max_tokens, hidden):
    """The pipeline in one CUDA graph, replayed with new inputs: every rank
    sends max_tokens tokens (the count is fixed by the capture)."""
    comm, me, n = job.comm, job.comm.rank, job.comm.size
    x0, tok0, w0, idx0, s0 = inputs(me, 0, n, max_tokens, fp8, hidden)
    tok = torch.zeros((max_tokens,) + tok0.shape[1:], dtype=tok0.dtype, device="cuda")
    w = torch.zeros((max_tokens, TOPK), device="cuda")
    idx = torch.full((max_tokens, TOPK), -1, dtype=torch.int32, device="cuda")
    scales = torch.ones((max_tokens, hidden // 128), device="cuda") if fp8 else None
    out = torch.empty((max_tokens, hidden), dtype=torch.bfloat16, device="cuda")
    out_w = torch.empty((max_tokens, TOPK), device="cuda")
    slots = op.max_recv_tokens
    stream = torch.cuda.Stream()
    comm.barrier()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream):
        # One eager round first: capture records the calls, not their first-use setup.
        recv_x, *_ = op.dispatch(tok, w, scales, idx)
        expert(op, recv_x, slots, me, fp8, op.combine_in_view())
        op.combine(op.combine_in_view(), w, out=out, out_weights=out_w)
        stream.synchronize()
        comm.barrier()
        with torch.cuda.graph(graph, stream=stream):
            recv_x, *_ = op.dispatch(tok, w, scales, idx)
            expert(op, recv_x, slots, me, fp8, op.combine_in_view())
            op.combine(op.combine_in_view(), w, out=out, out_weights=out_w)
    bad = 0
    g = torch.Generator().manual_seed(me)
    for rep in range(REPLAYS):
        x = torch.randint(-8, 9, (max_tokens, hidden), generator=g).float()
        ids = torch.randint(-1, n * EXPERTS_PER_RANK, (max_tokens, TOPK), generator=g, dtype=torch.int32)
        wt = torch.rand((max_tokens, TOPK), generator=g)
        tok.copy_(x.to(tok.dtype))
        idx.copy_(ids)
        w.copy_(wt)
        torch.cuda.synchronize()
        comm.barrier()  # every rank's inputs are in place before any replay starts
        graph.replay()
        torch.cuda.synchronize()
        want_out, keep = expected_out(x, ids)
        bad += int(not torch.equal(out.cpu(), want_out)) + int(not torch.equal(out_w.cpu(), wt * keep))
        comm.barrier()
    op.check()
    job.expect(bad == 0, f"{name}: {REPLAYS} graph replays, {bad} wrong")


# Hidden 256: rows shorter than a warp's loads (lanes past the row's end still send the
# per-token words). Hidden 16384 in fp8: 128 scales and 8 weights and ids a token, more
# per-token words than a warp holds at once (the dispatch sends them in two goes).
CASES = (("bf16 throughput", False, "throughput", 512, 256),
         ("fp8 throughput", True, "throughput", 512, 256),
         ("bf16 low latency", False, "low_latency", 128, 256),
         ("fp8 low latency", True, "low_latency", 128, 256),
         ("fp8 throughput, hidden 16384", True, "throughput", 64, 16384))


def check_late_gemm(job, parts):
    """The last rank runs a large cuBLAS GEMM before its dispatch, while the
    others already wait in theirs on the same GPU: their waiting blocks must
    leave the GEMM room to run (docs/moe.md), or every rank waits forever.
    parts: the op's grid (0: its default)."""
    comm, me, n = job.comm, job.comm.rank, job.comm.size
    hidden, max_tokens = 256, 512
    cfg = EpDispatchCombineConfig(hidden_dim=hidden, max_num_inp_token_per_rank=max_tokens,
                                  num_experts_per_rank=EXPERTS_PER_RANK, num_experts_per_token=TOPK,
                                  data_type="bf16", mode="throughput", parts=parts)
    op = EpDispatchCombineOp(cfg, comm)
    a = torch.randn((8192, 8192), device="cuda").bfloat16()
    b = torch.randn((8192, 8192), device="cuda").bfloat16()
    every = [inputs(r, 0, n, max_tokens, False, hidden) for r in range(n)]
    _, tok, w, idx, _ = every[me]
    tok, w, idx = tok.cuda(), w.cuda(), idx.cuda()
    torch.cuda.synchronize()
    comm.barrier()
    if me == n - 1:
        time.sleep(0.2)  # the others' dispatch is on the GPU, waiting for this rank's rows
        for _ in range(4):
            torch.matmul(a, b)
    _, _, _, _, total_recv = op.dispatch(tok, w, None, idx)
    torch.cuda.synchronize()
    op.check()
    want = sum(1 for s in range(n) for t in range(every[s][0].shape[0]) if me in ranks_of(every[s][3][t]))
    total = int(total_recv.cpu().item())
    parts = op.stats()["parts"]
    job.expect(total == want, f"late GEMM, {parts} parts: {total} received, {want} sent here")
    comm.barrier()
    op.release()
    return parts


def main():
    with init_communicator(per_rank_vmm=4 << 30) as comm:
        torch.cuda.set_device(comm.cuda_device)
        job = Job(comm)
        late_parts = int(os.environ.get("CCO_TEST_LATE_GEMM_PARTS", "0"))
        parts = "?"
        try:
            parts = check_late_gemm(job, late_parts)
        except Exception as e:  # noqa: BLE001
            job.failed += 1
            print(f"rank {comm.rank}: FAIL late GEMM: {type(e).__name__}: {e}", flush=True)
        comm.barrier()
        if comm.rank == 0:
            print(f"test_moe_gpu: a late rank's GEMM before its dispatch ({parts} parts): {job.failed} failed",
                  flush=True)
        cases = () if "--late-gemm-only" in sys.argv else CASES
        for name, fp8, mode, tokens, hidden in cases:
            try:
                run_case(job, name, fp8, mode, tokens, rounds=4, hidden=hidden)
            except Exception as e:  # noqa: BLE001 - a failed case is reported, the others still run
                job.failed += 1
                print(f"rank {comm.rank}: FAIL {name}: {type(e).__name__}: {e}", flush=True)
            comm.barrier()
        counts = comm.allgather(job.passed.to_bytes(4, "little") + job.failed.to_bytes(4, "little"))
        passed = sum(int.from_bytes(c[:4], "little") for c in counts)
        failed = sum(int.from_bytes(c[4:], "little") for c in counts)
        if comm.rank == 0:
            print(f"test_moe_gpu, {comm.size} ranks: {passed} passed, {failed} failed", flush=True)
    finalize()
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
