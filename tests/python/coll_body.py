"""The collectives on the host platform against numpy, as the ranks of one
job (tests/python/test_collectives.py starts it):

    ccorun -n 4 python3 tests/python/coll_body.py [--only all_reduce,...] [--algo NAME] [--small]

Every collective x dtype (float32, float16, int32 as numpy arrays; bfloat16
as cco's DLPack view, numpy having no bfloat16) x operator, at several
counts, in place and not, on arrays in a window; then the errors only the
library can find (memory of the slot outside any window, a buffer running
past its window's end) and collective_algorithm. Inputs are small integers,
so every sum is exact in every type and the reference is exact too.

Each check ends with a barrier, and every rank makes the same calls with the
same arguments, so a failure on one rank never leaves another waiting. Rank
0 prints one line per check for the whole job: "ok NAME", "FAIL NAME: why
(rank r)", or "not run NAME: why" when libcco lacks the C function; the last
line counts them. Exit status 1 when a check failed.
"""
import argparse
import os
import sys
import traceback
from typing import Callable

try:
    import cco  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

import numpy as np

from cco import CCONotInWindow, Communicator, _lib
from cco.collectives import ALGORITHMS

DTYPES = ("float32", "bfloat16", "float16", "int32")
OPS = ("sum", "max", "min")
REDUCE = {"sum": np.add.reduce, "max": np.maximum.reduce, "min": np.minimum.reduce}
C_NAMES = {"all_reduce": "ccoAllReduce", "all_gather": "ccoAllGather", "reduce_scatter": "ccoReduceScatter",
           "all_to_all": "ccoAlltoAll", "broadcast": "ccoBroadcast", "errors": "ccoAllReduce",
           "algorithm": "ccoCollAlgorithm", "stream_ops": "ccoBarrierOnStream"}
WINDOW = 16 << 20
OUT = WINDOW // 2  # outputs start here; inputs at 0
SENTINEL = 99  # never a result (results lie in [-40, 40]), exact in every type


def values(rank: int, n: int, salt: int = 0) -> np.ndarray:
    """Rank `rank`'s input of n elements: small integers in [-5, 5]."""
    i = np.arange(n, dtype=np.int64)
    return ((i * 7 + rank * 3 + salt) % 11) - 5


class Typed:
    """n elements of `dtype` at `offset` of a window: the object the
    collectives take, and numpy access to the values (bfloat16 through its
    bits: the upper half of a float32)."""

    def __init__(self, win, dtype: str, n: int, offset: int, shape=None) -> None:
        self.dtype, self.n = dtype, n
        shape = shape or (n,)
        if dtype == "bfloat16":
            self.arg = win.dlpack("bfloat16", shape, offset)
            self.raw = win.numpy("uint16", (n,), offset)
        else:
            self.arg = win.numpy(dtype, shape, offset)
            self.raw = self.arg.reshape(-1)

    def set(self, data: np.ndarray) -> None:
        if self.dtype == "bfloat16":
            self.raw[:] = (data.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
        else:
            self.raw[:] = data.astype(self.dtype)

    def get(self) -> np.ndarray:
        if self.dtype == "bfloat16":
            return (self.raw.astype(np.uint32) << 16).view(np.float32).astype(np.int64)
        return self.raw.astype(np.int64)


class Job:
    def __init__(self, comm: Communicator) -> None:
        self.comm = comm
        self.n, self.rank = comm.size, comm.rank
        self.win = comm.register_window_alloc(WINDOW)
        self.passed = self.failed = 0

    def check(self, name: str, fn: Callable[[], None]) -> None:
        """Runs one check on every rank; rank 0 reports it for the job."""
        why = ""
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - reported, and the job goes on together
            why = "".join(traceback.format_exception_only(type(exc), exc)).strip().replace("\n", " | ")
        self.comm.barrier()
        whys = self.comm.allgather(why.encode()[:2000].ljust(2000))
        bad = [(r, w.decode().strip()) for r, w in enumerate(whys) if w.strip()]
        if bad:
            self.failed += 1
            r, w = bad[0]
            self.say(f"FAIL {name}: {w} (rank {r}{' and others' if len(bad) > 1 else ''})")
        else:
            self.passed += 1
            self.say(f"ok {name}")

    def say(self, line: str) -> None:
        if self.rank == 0:
            print(line, flush=True)

    def typed(self, dtype: str, n: int, out: bool = False, shape=None) -> Typed:
        return Typed(self.win, dtype, n, OUT if out else 0, shape)

    def expect(self, got: np.ndarray, want: np.ndarray, what: str) -> None:
        if not np.array_equal(got, want):
            bad = np.flatnonzero(got != want)
            i = int(bad[0])
            raise AssertionError(f"{what}: {len(bad)} of {len(want)} elements wrong, first [{i}] = {got[i]}, "
                                 f"want {want[i]}")

    # --------------------------------------------------------------- checks

    def all_reduce(self, dtype: str, op: str, n: int, in_place: bool) -> None:
        src = self.typed(dtype, n, shape=(n // 4, 4) if n % 4 == 0 else None)
        src.set(values(self.rank, n))
        dst = src if in_place else self.typed(dtype, n, out=True)
        if not in_place:
            dst.set(np.full(n, SENTINEL))
        self.comm.barrier()  # nobody writes into a peer's output before the peer reset it
        got = self.comm.all_reduce(src.arg, op=op, out=None if in_place else dst.arg)
        assert got is (src.arg if in_place else dst.arg), "all_reduce returns its output"
        want = REDUCE[op]([values(r, n) for r in range(self.n)])
        self.expect(dst.get(), want, "result")
        if not in_place:
            self.expect(src.get(), values(self.rank, n), "input left as it was")

    def all_gather(self, dtype: str, n: int) -> None:
        src, dst = self.typed(dtype, n), self.typed(dtype, self.n * n, out=True)
        src.set(values(self.rank, n))
        dst.set(np.full(self.n * n, SENTINEL))
        self.comm.barrier()
        self.comm.all_gather(src.arg, dst.arg)
        self.expect(dst.get(), np.concatenate([values(r, n) for r in range(self.n)]), "gathered blocks")

    def reduce_scatter(self, dtype: str, op: str, n: int) -> None:
        src, dst = self.typed(dtype, self.n * n), self.typed(dtype, n, out=True)
        src.set(values(self.rank, self.n * n))
        dst.set(np.full(n, SENTINEL))
        self.comm.barrier()
        self.comm.reduce_scatter(src.arg, dst.arg, op=op)
        whole = REDUCE[op]([values(r, self.n * n) for r in range(self.n)])
        self.expect(dst.get(), whole[self.rank * n:(self.rank + 1) * n], f"block {self.rank}")

    def all_to_all(self, dtype: str, n: int) -> None:
        src, dst = self.typed(dtype, self.n * n), self.typed(dtype, self.n * n, out=True)
        src.set(values(self.rank, self.n * n))
        dst.set(np.full(self.n * n, SENTINEL))
        self.comm.barrier()
        self.comm.all_to_all(src.arg, dst.arg)
        # Block p of my output is block `rank` of rank p's input.
        want = np.concatenate([values(p, self.n * n)[self.rank * n:(self.rank + 1) * n] for p in range(self.n)])
        self.expect(dst.get(), want, "exchanged blocks")

    def broadcast(self, dtype: str, n: int, root: int, in_place: bool) -> None:
        src = self.typed(dtype, n)
        src.set(values(self.rank, n, salt=1))  # non-roots' inputs differ from the root's
        dst = src if in_place else self.typed(dtype, n, out=True)
        if not in_place:
            dst.set(np.full(n, SENTINEL))
        self.comm.barrier()
        self.comm.broadcast(src.arg, root, out=None if in_place else dst.arg)
        self.expect(dst.get(), values(root, n, salt=1), f"root {root}'s data")

    def errors(self) -> None:
        """What only the library can tell: memory of this rank's slot that
        no window covers, and a buffer that runs past its window's end."""
        mem = self.comm.alloc_mem(1 << 16)
        try:
            a = mem.numpy("float32", (1024,))
            try:
                self.comm.all_reduce(a)
                raise AssertionError("unregistered memory was taken")
            except CCONotInWindow as exc:
                assert "shape (1024,)" in str(exc) and "float32" in str(exc), str(exc)
            win = self.comm.register_window(mem.ptr, 4096)  # the first 4 KiB of the 64
            try:
                past = mem.numpy("float32", (2048,))  # 8 KiB from the window's start
                try:
                    self.comm.all_reduce(past)
                    raise AssertionError("a buffer past its window's end was taken")
                except CCONotInWindow as exc:
                    assert "shape (2048,)" in str(exc), str(exc)
                inside = mem.numpy("int32", (1024,))
                inside[:] = self.rank + 1
                self.comm.barrier()
                self.comm.all_reduce(inside)  # the same window, within it: fine
                self.expect(inside.astype(np.int64), np.full(1024, self.n * (self.n + 1) // 2), "sum")
            finally:
                self.comm.barrier()
                win.deregister()
        finally:
            self.comm.barrier()
            mem.free()

    def stream_ops(self) -> None:
        """The one-sided calls ordered on a stream: a put with its signal to
        the next rank, a plain put to the previous one, an add from every
        rank to rank 0's counter, then barrier_on_stream; every rank checks
        what reached it. Bad arguments are refused before C."""
        n, me = self.n, self.rank
        nxt, prv = (me + 1) % n, (me - 1) % n
        sig_off = OUT + (1 << 20)  # uint64 words: [0] the put's signal, [1] the counter
        src, dst = Typed(self.win, "int32", 64, 0), Typed(self.win, "int32", 128, OUT)
        sig = Typed(self.win, "int32", 4, sig_off)
        src.set(np.arange(64) + 1000 * (me + 1))
        dst.set(np.full(128, -1))
        sig.set(np.zeros(4))
        self.comm.barrier()
        self.comm.put_signal_on_stream(nxt, self.win, OUT, self.win, 0, 64 * 4, self.win, sig_off, 7 + me)
        self.comm.put_on_stream(prv, self.win, OUT + 256, self.win, 0, 64 * 4)
        self.comm.signal_on_stream(0, self.win, sig_off + 8, 1, op="add")
        self.comm.quiet_on_stream()
        self.comm.barrier_on_stream()
        self.expect(dst.get()[:64], np.arange(64) + 1000 * (prv + 1), "put with signal from the previous rank")
        self.expect(dst.get()[64:], np.arange(64) + 1000 * (nxt + 1), "put from the next rank")
        words = sig.get()
        self.expect(words[:2], np.array([7 + prv, 0]), "signal set by the previous rank")
        if me == 0:
            self.expect(words[2:], np.array([n, 0]), "counter every rank added 1 to")
        for bad, call in (("op must be 'set' or 'add'",
                           lambda: self.comm.signal_on_stream(nxt, self.win, sig_off, 1, op="xor")),
                          ("peer", lambda: self.comm.signal_on_stream(n, self.win, sig_off, 1)),
                          ("stream", lambda: self.comm.barrier_on_stream(stream="default"))):
            try:
                call()
                raise AssertionError(f"a bad argument was taken ({bad})")
            except (ValueError, TypeError) as exc:
                assert bad in str(exc), str(exc)
        self.comm.barrier()

    def healthy(self) -> None:
        error = self.comm.async_error
        assert error is None, f"the communicator failed in the background: {error}"

    def algorithm(self, forced: str) -> None:
        for name in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "allreduce"):
            for nbytes in (0, 1024, 1 << 20, 256 << 20):
                algo = self.comm.collective_algorithm(name, nbytes)
                assert algo in ALGORITHMS and algo != "auto", f"{name} {nbytes} B: {algo!r}"
                # Forced where this job runs it (--small: up to 16 KiB); what the library does with
                # a forced small-message algorithm at 256 MiB is its own business.
                if forced and name in ("all_reduce", "allreduce") and nbytes <= 16 << 10:
                    assert algo == forced, f"CCO_ALGO={forced}, but all_reduce of {nbytes} B uses {algo}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="", help="comma-separated: all_reduce, all_gather, reduce_scatter, "
                    "all_to_all, broadcast, errors, algorithm, stream_ops")
    ap.add_argument("--algo", default="", help="the CCO_ALGO this job runs under (checked by collective_algorithm)")
    ap.add_argument("--small", action="store_true", help="counts up to 4 Ki elements only")
    args = ap.parse_args()
    parts = [p for p in args.only.split(",") if p] or list(C_NAMES)
    counts = (1, 5, 1000, 4099) if args.small else (1, 5, 1000, 4099, 1 << 16)
    with Communicator.from_env(per_rank_vmm=1 << 30) as comm:
        job = Job(comm)
        not_run = 0
        for part in parts:
            if not _lib.has_function(C_NAMES[part]):
                job.say(f"not run {part}: libcco has no {C_NAMES[part]} yet ({_lib.library_path()})")
                not_run += 1
                continue
            if part == "all_reduce":
                for dtype in DTYPES:
                    for op in OPS:
                        for n in counts:
                            for in_place in (False, True):
                                job.check(f"all_reduce {dtype} {op} n={n}{' in place' if in_place else ''}",
                                          lambda: job.all_reduce(dtype, op, n, in_place))
            elif part == "all_gather":
                for dtype in DTYPES:
                    for n in counts:
                        job.check(f"all_gather {dtype} n={n}", lambda: job.all_gather(dtype, n))
            elif part == "reduce_scatter":
                for dtype in DTYPES:
                    for op in OPS:
                        for n in counts:
                            job.check(f"reduce_scatter {dtype} {op} n={n}",
                                      lambda: job.reduce_scatter(dtype, op, n))
            elif part == "all_to_all":
                for dtype in DTYPES:
                    for n in counts:
                        job.check(f"all_to_all {dtype} n={n}", lambda: job.all_to_all(dtype, n))
            elif part == "broadcast":
                for dtype in DTYPES:
                    for n in counts:
                        for root in sorted({0, comm.size - 1}):
                            for in_place in (False, True):
                                job.check(f"broadcast {dtype} n={n} root={root}{' in place' if in_place else ''}",
                                          lambda: job.broadcast(dtype, n, root, in_place))
            elif part == "errors":
                job.check("errors: unregistered memory, a buffer past its window", job.errors)
            elif part == "stream_ops":
                job.check("put / signal / barrier / quiet on a stream", job.stream_ops)
            elif part == "algorithm":
                job.check("collective_algorithm", lambda: job.algorithm(args.algo))
        job.check("no asynchronous error", job.healthy)
        job.say(f"coll_body: {job.passed} ok, {job.failed} failed, {not_run} not run, {comm.size} ranks")
        return 1 if job.failed else 0


if __name__ == "__main__":
    sys.exit(main())
