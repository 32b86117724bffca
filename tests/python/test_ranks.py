"""Several ranks: processes through ccorun and multiprocessing (spawn), and
threads of this process; the fd leak check over 50 create/destroy cycles."""
import multiprocessing as mp
import os
import threading
from typing import Callable, List

import pytest

from conftest import TESTS_DIR, describe, run_ranks

import rank_body
from cco import CCOError, CCORemoteError, Communicator


@pytest.mark.parametrize("n", [2, 4])
def test_api_under_ccorun(n):
    proc = run_ranks(n, [str(TESTS_DIR / "rank_body.py")])
    assert proc.returncode == 0, describe(proc)
    assert proc.stdout.count(": ok") == n, describe(proc)


@pytest.mark.parametrize("n", [3])
def test_api_under_multiprocessing_spawn(n):
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    uid = Communicator.get_unique_id()  # pickled into each child
    procs = [ctx.Process(target=rank_body.run_child, args=(n, r, uid, queue)) for r in range(n)]
    for p in procs:
        p.start()
    results = dict(queue.get(timeout=120) for _ in range(n))
    for p in procs:
        p.join(timeout=60)
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
    assert sorted(results) == list(range(n))
    assert all(not fails for fails in results.values()), results


def run_threads(n: int, body: Callable[[Communicator], object], uid=None) -> List[object]:
    """Runs `body` on n ranks, one thread each, in this process. ctypes
    releases the GIL during C calls, so the collectives proceed together."""
    uid = uid or Communicator.get_unique_id()
    out: List[object] = [None] * n

    def rank(r: int) -> None:
        try:
            with Communicator.init(n, r, uid, per_rank_vmm=1 << 30) as comm:
                out[r] = body(comm)
        except Exception as exc:  # reported by the caller
            out[r] = exc

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a rank thread hung"
    return out


def test_api_with_thread_ranks():
    results = run_threads(4, rank_body.exercise)
    assert results == [[], [], [], []], results


def test_write_through_a_peer_view_read_in_the_owner():
    def body(comm):
        win = comm.register_window_alloc(4096)
        comm.barrier()
        if comm.rank == 0:
            win.peer(1).numpy("int64")[:] = 1234567  # rank 0 writes rank 1's memory
        comm.barrier()
        got = int(win.numpy("int64")[511]) if comm.rank == 1 else None
        comm.barrier()
        return got

    assert run_threads(2, body) == [None, 1234567]


def test_different_allgather_lengths_fail_on_every_rank():
    def body(comm):
        try:
            comm.allgather(b"x" * (comm.rank + 1))
            return "no error"
        except CCOError as exc:
            return type(exc).__name__

    results = run_threads(2, body)
    assert all(r != "no error" and isinstance(r, str) for r in results), results


def test_abort_wakes_the_peer_blocked_in_a_barrier():
    def body(comm):
        if comm.rank == 0:
            comm.barrier()  # both ranks are up
            comm.abort()
            return "aborted"
        comm.barrier()
        try:
            comm.barrier()  # rank 0 never comes
            return "barrier returned"
        except CCORemoteError:
            return "remote error"

    assert run_threads(2, body) == ["aborted", "remote error"]


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_no_leaked_fds_after_50_cycles():
    def body(comm):
        mem = comm.alloc_mem(1 << 16)
        win = comm.register_window(mem)
        win.peer((comm.rank + 1) % comm.size).numpy("uint8")[:8] = comm.rank
        comm.register_window_alloc(4096)
        comm.create_dev_comm()
        comm.barrier()
        return None  # leaving the with block releases everything

    run_threads(2, body)  # warm up (lazy library state, thread pools)
    before = _fds()
    for _ in range(50):
        assert run_threads(2, body) == [None, None]
    assert _fds() == before, f"{_fds() - before} fds leaked over 50 cycles"
