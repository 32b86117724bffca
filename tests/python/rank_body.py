"""What every rank of a multi-rank test does, however it was started
(ccorun process, multiprocessing child, thread). Returns the failed checks
rather than raising, so a rank still takes part in every collective and the
job ends together. Run as a script under ccorun:

    ccorun -n 4 python3 tests/python/rank_body.py
"""
import os
import sys
from typing import List

try:
    import cco  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

from cco import (CCODevCommRequirements, CCOInvalidArgument, CCOInvalidUsage, Communicator,
                 GDA_CONNECTION_NONE, TEAM_LSA, TEAM_WORLD)


def exercise(comm: Communicator) -> List[str]:
    fails: List[str] = []

    def check(cond: bool, what: str) -> None:
        if not cond:
            fails.append(f"rank {comm.rank}: {what}")

    n, r = comm.size, comm.rank
    check(0 <= r < n and comm.platform == "host", "rank/size/platform")
    check(comm.lsa_size == n and comm.node_count == 1, "one host: everyone is an LSA peer")
    check(comm.team(TEAM_WORLD) == (n, r, 1), f"world team {comm.team(TEAM_WORLD)}")
    check(comm.team_rank_to_world(TEAM_LSA, comm.lsa_rank) == r, "lsa rank -> world")

    got = comm.allgather(f"rank{r:04d}".encode())
    check(got == [f"rank{i:04d}".encode() for i in range(n)], "allgather")
    check(comm.async_error is None, "healthy communicator has no async error")

    # Symmetric memory, a window, and stores through peer views.
    mem = comm.alloc_mem(8192)
    win = comm.register_window(mem)
    check(win.local_ptr == mem.ptr and win.size == 8192, "window over the allocation")
    mine = win.numpy("uint32")
    mine[:] = 0
    comm.barrier()
    for p in range(n):
        win.peer(p).numpy("uint32")[r] = r + 1  # into peer p's memory
    comm.barrier()
    check(mine[:n].tolist() == list(range(1, n + 1)), f"peer stores landed: {mine[:n].tolist()}")

    # peer_ptr agrees with the descriptor arithmetic kernels use.
    info = win.info()
    for p in range(n):
        lsa = comm.team_rank_from_world(TEAM_LSA, p)
        check(comm.peer_ptr(win.local_ptr + 64, p) == info.peer_address(lsa, 64), f"peer_ptr {p}")
    base, slot = comm.flat_va
    check(mem.ptr == base + comm.lsa_rank * slot + (mem.ptr - base) % slot, "memory in my slot")

    # The same allocation order gives the same offset on every rank.
    offsets = comm.allgather(((mem.ptr - base) % slot).to_bytes(8, "little"))
    check(len(set(offsets)) == 1, "symmetric offsets")

    # Device communicator.
    reqs = CCODevCommRequirements(gda_connection_type=GDA_CONNECTION_NONE, lsa_barrier_count=2)
    dc = comm.create_dev_comm(reqs)
    check((dc.rank, dc.world_size, dc.lsa_rank, dc.lsa_size) == (r, n, comm.lsa_rank, n),
          "device communicator topology")
    check(dc.struct.lsaBarrierCount == 2 and dc.ptr != 0, "device communicator resources")
    check(bytes(dc.struct) == (ctypes_bytes_at(dc.ptr, 256)), "device copy equals the struct")

    # Size-only window: memoryview of a peer's copy.
    w2 = comm.register_window_alloc(4096)
    right = (r + 1) % n
    w2.peer(right).memoryview()[r] = 0xA0 + (r % 16)
    comm.barrier()
    left = (r - 1) % n
    check(w2.memoryview()[left] == 0xA0 + (left % 16), "memoryview store from the left neighbour")

    # A mismatched registration fails on every rank and maps nothing ...
    try:
        comm.register_window(mem, 4096 if r == 0 else 8192).deregister()
        check(n == 1, "mismatched window sizes must fail")  # one rank: nothing to mismatch
    except CCOInvalidUsage:
        pass
    # ... and a correct one works afterwards.
    w3 = comm.register_window(mem, 4096)
    check(comm.peer_ptr(w3.local_ptr, right) != 0, "window after a failed registration")

    # Release in an order different from creation; the rest goes with destroy.
    w2.deregister()
    dc.destroy()
    try:
        dc.destroy()
        check(False, "second device communicator destroy must raise")
    except CCOInvalidUsage:
        pass
    try:
        mem.free()  # two windows are still registered over it
        check(False, "freeing memory under a live window must fail")
    except CCOInvalidUsage:
        pass
    comm.deregister_window(w3)
    comm.deregister_window(win.handle)
    old = mem.ptr
    mem.free()
    try:
        comm.peer_ptr(old, right)
        check(False, "peer_ptr outside any window must fail")
    except (CCOInvalidArgument, CCOInvalidUsage):
        pass
    comm.barrier()
    return fails


def ctypes_bytes_at(ptr: int, size: int) -> bytes:
    import ctypes

    return ctypes.string_at(ptr, size)  # host platform: device copies are host memory


def run_from_env() -> int:
    with Communicator.from_env(per_rank_vmm=1 << 30) as comm:
        fails = exercise(comm)
        verdicts = comm.allgather(bytes([0 if fails else 1]))
        for f in fails:
            print("FAIL", f, flush=True)
        ok = all(v == b"\x01" for v in verdicts)
        print(f"rank_body rank {comm.rank}/{comm.size}: {'ok' if ok else 'FAILED'}", flush=True)
    return 0 if ok else 1


def run_child(nranks: int, rank: int, uid, queue) -> None:
    """multiprocessing target."""
    os.environ["CCO_PLATFORM"] = "host"
    try:
        with Communicator.init(nranks, rank, uid, per_rank_vmm=1 << 30) as comm:
            queue.put((rank, exercise(comm)))
    except Exception as exc:  # report, do not hang the parent
        queue.put((rank, [f"rank {rank}: {type(exc).__name__}: {exc}"]))


if __name__ == "__main__":
    sys.exit(run_from_env())
