"""cco.ops.EpDispatchCombineOp on the host platform against numpy, as the
ranks of one job (tests/python/test_moe.py starts it):

    ccorun -n 4 python3 tests/python/moe_body.py

The blog's pipeline, dispatch -> expert -> combine, on numpy arrays (bf16
rows as uint16, numpy has no bfloat16): every rank derives every rank's
tokens, weights and expert ids from one seed, so each checks what it
received (the count, and the received rows as a multiset, with their
weights and ids) and what combine gave back (each token's row times the
sum of (d + 1) over the ranks d it went to: the expert scales its rows by
rank + 1; small integers, exact in bf16; the weights of the kept choices).
Rounds alternate the zero-copy path (the expert writes into
combine_in_view) and the copy fallback (its own array, counted in
combine_copies), with weights passed back to combine or not. Then the
misuse errors. Prints "moe_body: N ok, 0 failed, R ranks"; exit 1 on a
failure.
"""
import os
import sys

try:
    import cco  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

import numpy as np

from cco import CCOInvalidArgument, CCOInvalidUsage, Communicator
from cco.ops import EpDispatchCombineConfig, EpDispatchCombineOp

HIDDEN, MAX_TOKENS, EXPERTS_PER_RANK, TOPK = 64, 12, 2, 3


def bf16(values):
    """bf16 bits of float32 values that bf16 holds exactly."""
    return (np.asarray(values, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)


def f32(bits):
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def inputs(rank, rnd, nranks):
    """One rank's tokens of round rnd, the same on every rank."""
    rng = np.random.default_rng(1000 * rnd + rank)
    n = int(rng.integers(0, MAX_TOKENS + 1))
    x = rng.integers(-8, 9, size=(n, HIDDEN)).astype(np.float32)
    w = rng.random((n, TOPK), dtype=np.float32)
    idx = rng.integers(-1, nranks * EXPERTS_PER_RANK, size=(n, TOPK)).astype(np.int32)
    return bf16(x), w, idx


def ranks_of(idx_row):
    return sorted({int(e) // EXPERTS_PER_RANK for e in idx_row if e >= 0})


def main():
    ok = failed = 0
    with Communicator.from_env(per_rank_vmm=1 << 30) as comm:
        me, n_ranks = comm.rank, comm.size

        def check(cond, what):
            nonlocal ok, failed
            if cond:
                ok += 1
            else:
                failed += 1
                print(f"FAIL {what} (rank {me})", flush=True)

        cfg = EpDispatchCombineConfig(hidden_dim=HIDDEN, max_num_inp_token_per_rank=MAX_TOKENS,
                                      num_experts_per_rank=EXPERTS_PER_RANK, num_experts_per_token=TOPK)
        op = EpDispatchCombineOp(cfg, comm)
        try:
            op.combine(op.combine_in_view()[:0])
            check(False, "combine before any dispatch refused")
        except CCOInvalidUsage:
            check(True, "")
        own = np.zeros((op.max_recv_tokens, HIDDEN), dtype=np.uint16)
        copies = 0
        first_views = None
        for rnd in range(6):
            every = [inputs(r, rnd, n_ranks) for r in range(n_ranks)]
            x, w, idx = every[me]
            recv_x, recv_w, recv_s, recv_i, total_recv, routing = op.dispatch(x, w, None, idx, return_routing=True)
            total = int(total_recv[0])
            # The arena does not move: every dispatch hands out the same views, made once.
            views = (recv_x, recv_w, recv_i, total_recv, op.combine_in_view())
            first_views = first_views or views
            check(all(a is b for a, b in zip(views, first_views)), f"round {rnd}: the arena's views made once")
            want = [(s, t) for s in range(n_ranks) for t in range(every[s][0].shape[0])
                    if me in ranks_of(every[s][2][t])]
            check(total == len(want), f"round {rnd}: {total} tokens received, {len(want)} sent here")
            check(recv_s is None and routing.num_tokens == x.shape[0], f"round {rnd}: no scales, the routing's count")
            got = sorted(recv_x[q].tobytes() + recv_w[q].tobytes() + recv_i[q].tobytes() for q in range(total))
            exp = sorted(every[s][0][t].tobytes() + every[s][1][t].tobytes() + every[s][2][t].tobytes()
                         for s, t in want)
            check(got == exp, f"round {rnd}: received rows, weights and ids")
            for t in range(x.shape[0]):
                slots = routing.slots[t]
                check(all((slots[d] >= 0) == (d in ranks_of(idx[t])) for d in range(n_ranks)),
                      f"round {rnd}: routing of token {t}")
            # The expert: its rows times (rank + 1), into the arena or its own array.
            zero_copy = rnd % 2 == 0
            dst = op.combine_in_view()[:total] if zero_copy else own[:total]
            dst[:] = bf16(f32(recv_x[:total]) * (me + 1))
            copies += not zero_copy
            back = 2 * recv_w[:total] if rnd % 3 == 1 else w  # per-slot weights, or the dispatch's own
            out, out_w = op.combine(dst, back, routing=routing)
            factor = np.array([sum(d + 1 for d in ranks_of(idx[t])) for t in range(x.shape[0])], dtype=np.float32)
            # + 0: a token that went nowhere sums nothing, +0 (not x times 0, -0 for x < 0)
            check(np.array_equal(out, bf16(f32(x) * factor[:, None] + np.float32(0))), f"round {rnd}: combined rows")
            scale = 2.0 if rnd % 3 == 1 else 1.0
            check(np.array_equal(out_w, np.where(idx >= 0, w * np.float32(scale), np.float32(0))),
                  f"round {rnd}: combined weights")
            comm.barrier()
        check(op.combine_copies == copies, f"combine_copies {op.combine_copies}, {copies} copies made")
        # Misuse: refused before any C call that peers would wait for.
        x, w, idx = inputs(me, 0, n_ranks)
        for bad, what in ((dict(tokens=x.astype(np.float32)), "float32 tokens"),
                          (dict(weights=w.astype(np.float64)), "float64 weights"),
                          (dict(indices=idx.astype(np.int64)), "int64 indices"),
                          (dict(scales=w), "scales for bf16 tokens")):
            args = dict(tokens=x, weights=w, scales=None, indices=idx)
            args.update(bad)
            try:
                op.dispatch(**args)
                check(False, f"{what} refused")
            except CCOInvalidArgument:
                check(True, "")
        _, _, _, _, _, routing = op.dispatch(x, w, None, idx, return_routing=True)
        try:
            op.dispatch(x, w, None, idx)
            check(False, "two dispatches in a row refused")
        except CCOInvalidUsage:
            check(True, "")
        op.combine(op.combine_in_view(), None, routing=routing)
        try:
            op.combine(op.combine_in_view(), None, routing=routing)
            check(False, "a second combine of one dispatch refused")
        except CCOInvalidUsage:
            check(True, "")
        op.release()
        check(not op.alive, "released")
        counts = comm.allgather(ok.to_bytes(4, "little") + failed.to_bytes(4, "little"))
        ok_all = sum(int.from_bytes(c[:4], "little") for c in counts)
        failed_all = sum(int.from_bytes(c[4:], "little") for c in counts)
        if me == 0:
            print(f"moe_body: {ok_all} ok, {failed_all} failed, {n_ranks} ranks", flush=True)
    return 1 if failed_all else 0


if __name__ == "__main__":
    sys.exit(main())
