"""Every binding of cco.ir.triton on the GPU, with each result checked: the
kernels of tests/gpu/triton_kernels.py, run as the ranks of a cco job.

    source tests/gpu/mps.sh; mps_start
    build/bin/ccorun -n 4 python3 tests/gpu/test_triton_gpu.py            (queries, LSA, signals,
                                                                          world barrier, SDMA)
    build/bin/ccorun -n 2 --virtual-hosts 2 -p python3 tests/gpu/test_triton_gpu.py gda

Every rank runs the same checks in the same order. Kernels are loaded
(cco.preload) on every rank before any of them runs, since a module load
waits for running kernels, a peer's too under MPS. Each rank prints its
failures; rank 0 prints "test_triton_gpu: N passed, N failed" for the job.
Needs torch and Triton (no clang: the prebuilt bitcode is found next to the
package, libcco or in the checkout's build tree).
"""
import os
import sys
import traceback
from pathlib import Path

os.environ.setdefault("CUDA_MODULE_LOADING", "EAGER")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "python"))
sys.path.insert(0, str(HERE))

import torch  # noqa: E402

import triton_kernels as K  # noqa: E402
from cco import (CCODevCommRequirements, GDA_CONNECTION_CROSSNODE, GDA_CONNECTION_FULL,  # noqa: E402
                 GDA_CONNECTION_NONE, TEAM_CROSS_NODE, TEAM_LSA, TEAM_RAIL, TEAM_WORLD)
from cco.ir.triton import cco  # noqa: E402
from cco.launch import finalize, init_communicator  # noqa: E402

SUCCESS, TIMEOUT, INVALID, NO_PEER = 0, 2, 4, 5
TRACE = os.environ.get("CCO_TEST_TRACE") == "1"
GDA_TEAM = {GDA_CONNECTION_NONE: TEAM_CROSS_NODE, 1: TEAM_CROSS_NODE, GDA_CONNECTION_FULL: TEAM_WORLD, 3: TEAM_RAIL}


class Job:
    def __init__(self, comm):
        self.comm = comm
        self.libs = cco.get_extern_libs()
        self.passed = self.failed = 0
        self.loaded = set()

    def expect(self, name, got, want):
        if got == want:
            self.passed += 1
        else:
            self.failed += 1
            print(f"rank {self.comm.rank}: FAIL {name}: got {got}, want {want}", flush=True)

    def launch(self, kernel, args, grid=(1,), num_warps=4, collective=True, **consts):
        """Launches and waits; the first launch of a variant is preceded by
        its load on every rank (collective) and a host barrier."""
        key = (kernel.fn.__name__ if hasattr(kernel, "fn") else str(kernel), num_warps, tuple(sorted(consts.items())))
        if key not in self.loaded:
            cco.preload(kernel, *args, grid=grid, num_warps=num_warps, extern_libs=self.libs, **consts)
            self.loaded.add(key)
            if collective:
                self.comm.barrier()
        if TRACE:  # which kernel a rank was in when it died
            print(f"rank {self.comm.rank}: launch {key}", flush=True)
        kernel[grid](*args, num_warps=num_warps, extern_libs=self.libs, **consts)
        torch.cuda.synchronize()

    def run(self, name, fn, *args):
        try:
            fn(self, *args)
        except Exception:  # noqa: BLE001 - a failed part is reported, the others still run
            self.failed += 1
            print(f"rank {self.comm.rank}: FAIL {name}:\n{traceback.format_exc()}", flush=True)
        self.comm.barrier()


def out_words(n=64):
    return torch.full((n,), -1, dtype=torch.int64, device="cuda")


def check_queries(job, dc, win):
    comm, s = job.comm, dc.struct
    out = out_words()
    job.launch(K.queries, (dc.ptr, win.handle, out))
    got = out.tolist()
    want = [comm.rank, comm.size, comm.lsa_rank, comm.lsa_size, comm.node_index, comm.node_count,
            s.lsaBarrierCount, s.barrierCount, s.sdmaQueueCount, s.gdaContextCount, s.gdaSignalCount,
            s.gdaCounterCount, s.gdaConnectionType, 0]
    for t, kind in enumerate([TEAM_WORLD, TEAM_LSA, TEAM_CROSS_NODE, TEAM_RAIL, GDA_TEAM[s.gdaConnectionType]]):
        team = comm.team(kind)
        want += [team.n_ranks, team.rank, comm.rank, team.rank, 1]
    self_peer = got[43] if s.gdaConnectionType == GDA_CONNECTION_FULL else 0  # FULL may connect a rank to itself
    want += [win.size, 8, 1, -1, self_peer, comm.team_rank_to_world(GDA_TEAM[s.gdaConnectionType], 0)]
    want += [0, 1, 0, 32, 0, 128, 0, 0, 0]
    job.expect("DevComm / Window / Coop queries", got[:54], want)


def check_lsa(job, dc, win):
    comm = job.comm
    slots = win.torch(torch.int32, (comm.lsa_size, 1024))
    status = torch.zeros(1, dtype=torch.int32, device="cuda")
    senders = [comm.team_rank_to_world(TEAM_LSA, p) for p in range(comm.lsa_size)]
    variants = [(2, 0, 0, 4), (2, 1, 0, 4), (1, 0, 0, 1), (1, 1, 0, 1), (0, 0, 1, 4)]  # scope, split, leader, warps
    for v, (scope, split, leader, nw) in enumerate(variants):
        for rnd in range(3):
            base = (v * 3 + rnd + 1) * 1000
            comm.barrier()  # nobody stores while a peer still checks the last round
            status.fill_(-1)
            job.launch(K.lsa_put, (dc.ptr, win.handle, status, base + comm.rank), num_warps=nw, WORDS=1024,
                       SCOPE=scope, SPLIT=split, LEADER=leader)
            how = ("arrive/wait" if split else "sync") + (", leader" if leader else "")
            name = f"LSA put + barrier (scope {scope}, {how})"
            job.expect(name + " status", int(status.item()), SUCCESS)
            job.expect(name + " data", [int(x) for x in slots[:, 0].tolist()] + [int((slots != slots[:, :1]).sum())],
                       [base + r for r in senders] + [0])
    out = out_words(4)
    if comm.rank == 0:  # barrier 1 is nobody else's: it times out
        job.launch(K.lsa_statuses, (dc.ptr, out), collective=False, UNUSED=1)
        job.expect("LSA barrier timeout, bad index (sync, arrive)", out[:3].tolist(), [TIMEOUT, INVALID, INVALID])


def check_signals(job, dc, win):
    out = out_words(16)
    for rnd in range(3):
        job.comm.barrier()
        job.launch(K.signals, (dc.ptr, win.handle, out, rnd + 1), num_warps=1, OFF=1 << 19)
        job.expect(f"Signal / LsaSignal calls, ping round {rnd}", out[:10].tolist(),
                   [0, 5, 7, 0, 9, 10, SUCCESS, TIMEOUT, SUCCESS, rnd + 1])


def check_world_barrier(job, dc, multi_host):
    out = out_words(1)
    for scope, nw in ((0, 1), (1, 1), (2, 4)):
        for _ in range(3):
            job.launch(K.world_barrier, (dc.ptr, out), num_warps=nw, SCOPE=scope)
            want = INVALID if multi_host and scope == 0 else SUCCESS  # several hosts: warp or block
            job.expect(f"world barrier, scope {scope}", int(out.item()), want)


def check_sdma(job, dc):
    comm, nbytes = job.comm, 4096
    win = comm.register_window_alloc(3 * nbytes)
    src = win.torch(torch.int32, (nbytes // 4,))
    got_put = win.torch(torch.int32, (nbytes // 4,), offset=nbytes)
    got_get = win.torch(torch.int32, (nbytes // 4,), offset=2 * nbytes)
    prv = comm.team_rank_to_world(TEAM_LSA, (comm.lsa_rank + comm.lsa_size - 1) % comm.lsa_size)
    nxt = comm.team_rank_to_world(TEAM_LSA, (comm.lsa_rank + 1) % comm.lsa_size)
    pattern = lambda rank, rnd: torch.arange(nbytes // 4, dtype=torch.int32, device="cuda") + rank * 7919 + rnd  # noqa
    out, expected = out_words(16), 0
    for scope, nw in ((2, 4), (1, 1), (0, 1)):
        for rnd in range(2):
            expected += 32 * nw if scope == 0 else (nw if scope == 1 else 1)  # every thread posts at thread scope
            src.copy_(pattern(comm.rank, rnd))
            torch.cuda.synchronize()
            comm.barrier()
            job.launch(K.sdma_all, (dc.ptr, win.handle, out, expected), num_warps=nw, NBYTES=nbytes, SCOPE=scope)
            job.expect(f"SDMA calls, scope {scope}", out[:10].tolist(),
                       [SUCCESS, SUCCESS, SUCCESS, SUCCESS, expected, expected, SUCCESS, SUCCESS, SUCCESS, INVALID])
            job.expect(f"SDMA put data, scope {scope}", bool(torch.equal(got_put, pattern(prv, rnd))), True)
            job.expect(f"SDMA get data, scope {scope}", bool(torch.equal(got_get, pattern(nxt, rnd))), True)
            # The next rank's src is read by this rank's get: it must not take the next round's pattern
            # before every rank has checked this one.
            comm.barrier()
    comm.barrier()
    win.deregister()


def check_gda(job, dc, multi_host):
    comm, nbytes = job.comm, 4096
    team = TEAM_RAIL if multi_host else TEAM_WORLD
    me = comm.team(team)
    prv = comm.team_rank_to_world(team, (me.rank + me.n_ranks - 1) % me.n_ranks)
    nxt = comm.team_rank_to_world(team, (me.rank + 1) % me.n_ranks)
    win = comm.register_window_alloc(4 * nbytes)
    src = win.torch(torch.int32, (nbytes // 4,))
    from_prev = win.torch(torch.int32, (nbytes // 4,), offset=nbytes)
    from_next = win.torch(torch.int32, (nbytes // 4,), offset=2 * nbytes)
    value = win.torch(torch.int64, (1,), offset=3 * nbytes)
    pattern = lambda rank, rnd: torch.arange(nbytes // 4, dtype=torch.int32, device="cuda") * 3 + rank * 7 + rnd  # noqa
    totals = [0] * 6
    out, exp = out_words(32), torch.zeros(6, dtype=torch.int64, device="cuda")
    rnd = 0
    for doorbell in (0, 1, 2):
        for scope, mode, nw in ((2, 0, 4), (1, 0, 1), (2, 1, 1), (0, 0, 1)):
            threads = 32 * nw
            posts = threads if scope == 0 or mode == 1 else (nw if scope == 1 else 1)
            aggregates = threads if scope == 0 else (nw if scope == 1 else 1)
            for i, add in enumerate([posts, 2 * posts, aggregates, posts, posts, aggregates]):
                totals[i] += add
            exp.copy_(torch.tensor(totals, dtype=torch.int64))
            src.copy_(pattern(comm.rank, rnd))
            torch.cuda.synchronize()
            comm.barrier()
            job.launch(K.gda_all, (dc.ptr, win.handle, out, 1000 * rnd + comm.rank, exp), num_warps=nw, TEAM=team,
                       NBYTES=nbytes, DOORBELL=doorbell, SCOPE=scope, MODE=mode)
            name = f"GDA calls (doorbell {doorbell}, scope {scope}, thread mode {mode})"
            job.expect(name, out[:22].tolist(), [SUCCESS] * 8 + totals[:3] + totals[3:6] + [totals[0], totals[3]] +
                       [SUCCESS, 0, SUCCESS, SUCCESS, 1, SUCCESS])
            job.expect(name + ": put data", bool(torch.equal(from_prev, pattern(prv, rnd))), True)
            job.expect(name + ": get data", bool(torch.equal(from_next, pattern(nxt, rnd))), True)
            job.expect(name + ": put-value", int(value.item()), 1000 * rnd + prv)
            comm.barrier()  # as for SDMA: the next round's src only after every rank's get has been checked
            rnd += 1
    if multi_host:  # CROSSNODE: this rank has no endpoint to itself
        out = out_words(16)
        job.launch(K.gda_local, (dc.ptr, win.handle, out), num_warps=1, SLOT=5)
        job.expect("GDA slots through pointers, reset; no-peer and bad-index statuses", out[:9].tolist(),
                   [5, 6, SUCCESS, SUCCESS, 0, 0, 0, NO_PEER, INVALID])
    comm.barrier()
    win.deregister()


def check_coll(job, _dc):
    """cco.Coll: every collective of the blocks over two parts (programs), in int32 and fp32 (sums of small
    integers, exact in both) with each operator, against torch; the replay of mp_triton sdma on the GPU.
    On a device communicator of its own: part p syncs LSA barrier p, and the shared one's barrier 1 is
    spoiled on purpose by check_lsa (rank 0 alone arrives there, to time out), so a part syncing it
    would wait for peers a step behind."""
    comm, n, me, count = job.comm, job.comm.lsa_size, job.comm.lsa_rank, 3001
    dc = comm.create_dev_comm(CCODevCommRequirements(gda_connection_type=GDA_CONNECTION_NONE, lsa_barrier_count=2))
    region, scratch = 64 << 10, 4096 + (4 * (64 << 10) + 512) * job.comm.lsa_size  # ccoDevCollScratchBytes(n, parts)
    win = comm.register_window_alloc(2 * region + scratch)
    win.torch(torch.uint8, (2 * region + scratch,)).zero_()
    torch.cuda.synchronize()
    comm.barrier()
    idx = torch.arange(count * n, dtype=torch.int64, device="cuda")
    vals = torch.stack([(idx * 7 + r * 13) % 101 - 50 for r in range(n)])  # [LSA rank][element]
    out = out_words()
    for algo in range(6):  # one-shot, LL, two-shot all-reduce, all-gather, reduce-scatter, broadcast from 0
        for dtype, op in ((3, 0), (3, 1), (0, 0), (0, 2)):  # int32 sum, max; fp32 sum, min
            if algo in (3, 5) and op != 0:
                continue
            tdt = torch.int32 if dtype == 3 else torch.float32
            n_in = count * n if algo == 4 else count
            red = vals.sum(0) if op == 0 else vals.max(0).values if op == 1 else vals.min(0).values
            want = {0: red[:count], 1: red[:count], 2: red[:count], 3: vals[:, :count].reshape(-1),
                    4: red[me * count:(me + 1) * count], 5: vals[0, :count]}[algo]
            win.torch(tdt, (n_in,)).copy_(vals[me, :n_in].to(tdt))
            got = win.torch(tdt, (want.numel(),), offset=region)
            got.fill_(-7)
            torch.cuda.synchronize()
            comm.barrier()
            out.fill_(-1)
            job.launch(K.coll, (dc.ptr, win.handle, out, count, region, 2 * region, scratch), grid=(2,),
                       DTYPE=dtype, OP=op, ALGO=algo)
            name = f"Coll algo {algo}, dtype {dtype}, op {op}"
            job.expect(name + " statuses", out[:2].tolist(), [SUCCESS, SUCCESS])
            job.expect(name + " scratch_bytes", int(out[63].item()), scratch)
            job.expect(name + " data", bool(torch.equal(got, want.to(tdt))), True)
            comm.barrier()
    win.deregister()
    dc.release()


def main() -> int:
    part = sys.argv[1] if len(sys.argv) > 1 else "lsa"
    with init_communicator(per_rank_vmm=256 << 20) as comm:
        torch.cuda.set_device(comm.cuda_device)
        job = Job(comm)
        multi_host = comm.node_count > 1
        win = comm.register_window_alloc(1 << 20)
        win.torch(torch.uint8, (1 << 20,)).zero_()  # signal words start at 0
        torch.cuda.synchronize()
        if part == "gda":
            reqs = CCODevCommRequirements(
                gda_connection_type=GDA_CONNECTION_CROSSNODE if multi_host else GDA_CONNECTION_FULL,
                gda_signal_count=8, gda_counter_count=8, rail_gda_barrier_count=1, barrier_count=1)
            dc = comm.create_dev_comm(reqs)
            job.run("queries", check_queries, dc, win)
            job.run("GDA", check_gda, dc, multi_host)
            job.run("world barrier over GDA", check_world_barrier, dc, multi_host)
        else:
            reqs = CCODevCommRequirements(gda_connection_type=GDA_CONNECTION_NONE, lsa_barrier_count=2,
                                          barrier_count=1)
            dc = comm.create_dev_comm(reqs)
            job.run("queries", check_queries, dc, win)
            job.run("LSA", check_lsa, dc, win)
            job.run("signals", check_signals, dc, win)
            job.run("world barrier", check_world_barrier, dc, multi_host)
            job.run("SDMA", check_sdma, dc)
            job.run("collectives", check_coll, dc)
        counts = comm.allgather(job.passed.to_bytes(4, "little") + job.failed.to_bytes(4, "little"))
        passed = sum(int.from_bytes(c[:4], "little") for c in counts)
        failed = sum(int.from_bytes(c[4:], "little") for c in counts)
        if comm.rank == 0:
            print(f"test_triton_gpu {part}, {comm.size} ranks: {passed} passed, {failed} failed", flush=True)
    finalize()
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
