"""cco's collectives on torch tensors on the GPU, against torch references,
called eagerly and replayed inside CUDA graphs. Run as the ranks of a job on
one GPU under MPS (or one GPU per rank):

    source tests/gpu/mps.sh; mps_start
    build/bin/ccorun -n 4 -x CCO_LIBRARY=build/lib/libcco.so python3 tests/gpu/test_coll_torch.py
    ... -x CCO_ALGO=twoshot ... test_coll_torch.py --only all_reduce --algo twoshot [--max-bytes N]
    ... -x CCO_TORCH_STORE=/tmp/store.X ... test_coll_torch.py --part backend

1. eager: every collective x dtype (float32, bfloat16, float16, int32) x
   operator, in place and not, at 1 to 4 Mi elements, on tensors in a
   window (register_window_alloc, win.torch); torch's current stream by
   default, a side stream given as a torch.cuda.Stream and as an int;
   cupy arrays on the same window, on cupy's stream.
2. graphs: for each collective, a CUDA graph of [a torch op that changes
   the input (a counter incremented inside the graph, added to the rank's
   base values); the collective] replayed 100 times, the output checked
   after every replay; and one graph of two collectives in a row.
3. errors that need no C call: a plain torch.empty tensor (CCONotInWindow),
   a non-contiguous one, a tensor on the wrong device.
4. --part backend: a tensor of torch backend "CCO" (symm_mem.empty and
   rendezvous) through cco.torch.window_of(t).communicator, eagerly and in
   a graph: the tensor's address is outside cco's flat VA and is found in
   its window.

Inputs are small integers, so sums are exact in float32 and a half type's
result is the float32 sum rounded once, as the library promises: the
references are exact and compared bit for bit. Every rank runs the same
checks in the same order, each ending in a barrier; rank 0 prints "ok" or
"FAIL" per check and "test_coll_torch: N passed, N failed". Needs torch and
cupy.
"""
import argparse
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Callable, List, Tuple

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

import cupy as cp  # noqa: E402
import torch  # noqa: E402

from cco import CCOInvalidArgument, CCONotInWindow, Communicator  # noqa: E402
from cco.collectives import ALGORITHMS  # noqa: E402

DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.int32)
OPS = ("sum", "max", "min")
COUNTS = (1, 1000, (1 << 16) + 3, 1 << 22)
MAX_COUNT = max(COUNTS)
REPLAYS = 100


class Runner:
    def __init__(self, comm: Communicator) -> None:
        self.comm = comm
        self.passed = 0
        self.failed: List[str] = []

    def check(self, name: str, fn: Callable[[], None]) -> None:
        """One check on every rank; ends with a barrier so that the ranks
        enter the next one together (and no push into a peer's output
        lands before the peer reset it)."""
        t0 = time.perf_counter()
        try:
            fn()
            why = ""
        except Exception:  # noqa: BLE001 - reported; the job goes on together
            why = traceback.format_exc(limit=5)
        torch.cuda.synchronize()
        self.comm.barrier()
        if why:
            self.failed.append(name)
            print(f"[{self.comm.rank}] FAIL {name}: {why}", flush=True)
        else:
            self.passed += 1
            if self.comm.rank == 0:
                print(f"ok   {name} ({time.perf_counter() - t0:.2f} s)", flush=True)

    def summary(self) -> int:
        counts = self.comm.allgather(bytes([min(self.passed, 255), min(len(self.failed), 255)]))
        failed = sum(c[1] for c in counts)
        if self.comm.rank == 0:
            print(f"test_coll_torch: {sum(c[0] for c in counts)} passed, {failed} failed "
                  f"({self.comm.size} ranks x {self.passed + len(self.failed)} checks)", flush=True)
        return 0 if failed == 0 else 1


# ---------------------------------------------------------------- references


def ints(rank: int, n: int, salt: int = 0) -> torch.Tensor:
    """Rank `rank`'s base values: small integers in [-5, 5], as int64."""
    i = torch.arange(n, device="cuda", dtype=torch.int64)
    return (i * 7 + rank * 3 + salt) % 11 - 5


def typed(values: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Exact integers to `dtype`, through float32 for the float types: one
    rounding, as the library rounds a float32 result once."""
    return values.to(torch.int32) if dtype == torch.int32 else values.to(torch.float32).to(dtype)


def reduce(values: List[torch.Tensor], op: str) -> torch.Tensor:
    stacked = torch.stack(values)
    return stacked.sum(0) if op == "sum" else stacked.amax(0) if op == "max" else stacked.amin(0)


def expect(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    got, want = got.reshape(-1), want.reshape(-1)
    if not torch.equal(got, want):
        bad = (got != want).nonzero()
        i = int(bad[0])
        raise AssertionError(f"{what}: {bad.numel()} of {want.numel()} elements wrong, first [{i}] = "
                             f"{got[i].item()}, want {want[i].item()}")


# ---------------------------------------------------------------- eager


class Eager:
    def __init__(self, comm: Communicator, win) -> None:
        self.comm, self.win = comm, win
        self.n, self.rank = comm.size, comm.rank
        self.out_off = win.size // 2

    def t(self, dtype: torch.dtype, n: int, out: bool = False) -> torch.Tensor:
        return self.win.torch(dtype, (n,), self.out_off if out else 0)

    def all_reduce(self, dtype, op, n, in_place, stream=None) -> None:
        x = self.t(dtype, n)
        x.copy_(typed(ints(self.rank, n), dtype))
        y = x if in_place else self.t(dtype, n, out=True).fill_(99)
        torch.cuda.synchronize()
        self.comm.barrier()
        if stream is None:
            got = self.comm.all_reduce(x, op=op, out=None if in_place else y)
        else:  # a side stream: it waits for the inputs, the current stream waits for it
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            got = self.comm.all_reduce(x, op=op, out=None if in_place else y,
                                       stream=side if stream == "object" else side.cuda_stream)
            torch.cuda.current_stream().wait_stream(side)
        assert got is (x if in_place else y)
        want = reduce([ints(r, n) for r in range(self.n)], op)
        expect(y, typed(want, dtype), "result")

    def all_gather(self, dtype, n) -> None:
        x, y = self.t(dtype, n), self.t(dtype, self.n * n, out=True).fill_(99)
        x.copy_(typed(ints(self.rank, n), dtype))
        torch.cuda.synchronize()
        self.comm.barrier()
        self.comm.all_gather(x, y)
        expect(y, typed(torch.cat([ints(r, n) for r in range(self.n)]), dtype), "gathered blocks")

    def reduce_scatter(self, dtype, op, n) -> None:
        x, y = self.t(dtype, self.n * n), self.t(dtype, n, out=True).fill_(99)
        x.copy_(typed(ints(self.rank, self.n * n), dtype))
        torch.cuda.synchronize()
        self.comm.barrier()
        self.comm.reduce_scatter(x, y, op=op)
        whole = reduce([ints(r, self.n * n) for r in range(self.n)], op)
        expect(y, typed(whole[self.rank * n:(self.rank + 1) * n], dtype), f"block {self.rank}")

    def all_to_all(self, dtype, n) -> None:
        x, y = self.t(dtype, self.n * n), self.t(dtype, self.n * n, out=True).fill_(99)
        x.copy_(typed(ints(self.rank, self.n * n), dtype))
        torch.cuda.synchronize()
        self.comm.barrier()
        self.comm.all_to_all(x, y)
        want = torch.cat([ints(p, self.n * n)[self.rank * n:(self.rank + 1) * n] for p in range(self.n)])
        expect(y, typed(want, dtype), "exchanged blocks")

    def broadcast(self, dtype, n, root, in_place) -> None:
        x = self.t(dtype, n)
        x.copy_(typed(ints(self.rank, n, salt=1), dtype))
        y = x if in_place else self.t(dtype, n, out=True).fill_(99)
        torch.cuda.synchronize()
        self.comm.barrier()
        self.comm.broadcast(x, root, out=None if in_place else y)
        expect(y, typed(ints(root, n, salt=1), dtype), f"root {root}'s data")

    def cupy_all_reduce(self) -> None:
        n = 4096
        x = self.win.cupy("float32", (n,))
        y = self.win.cupy("float32", (n,), self.out_off)
        values = ints(self.rank, n).to(torch.float32)
        torch.cuda.synchronize()  # torch's values are there before cupy reads them
        x[:] = cp.asarray(values)
        y[:] = 99
        cp.cuda.get_current_stream().synchronize()
        self.comm.barrier()
        assert self.comm.all_reduce(x, out=y) is y
        cp.cuda.get_current_stream().synchronize()
        want = reduce([ints(r, n) for r in range(self.n)], "sum").to(torch.float32)
        expect(torch.as_tensor(y, device="cuda"), want, "cupy result")


# ---------------------------------------------------------------- graphs


def graph_check(comm: Communicator, win, name: str, dtype: torch.dtype, n_in: int,
                call: Callable[[torch.Tensor, torch.Tensor], None], n_out: int, in_place: bool,
                reference: Callable[[int], torch.Tensor]) -> None:
    """Captures [counter += 1; input = base + counter; call(input, output)]
    and replays it REPLAYS times, checking the output against
    reference(counter) after each replay."""
    x = win.torch(dtype, (n_in,), 0)
    y = x if in_place else win.torch(dtype, (n_out,), win.size // 2)
    base = typed(ints(comm.rank, n_in), dtype)
    step = torch.zeros(1, device="cuda", dtype=dtype)
    x.copy_(base)
    torch.cuda.synchronize()
    comm.barrier()
    call(x, y)  # eagerly first: the communicator's state is set up outside the capture
    torch.cuda.synchronize()
    comm.barrier()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step.add_(1)
        x.copy_(base + step)
        call(x, y)
    torch.cuda.synchronize()
    comm.barrier()
    for k in range(1, REPLAYS + 1):
        graph.replay()
        torch.cuda.synchronize()
        expect(y, reference(k), f"{name}, replay {k}")
    comm.barrier()
    del graph


def graph_checks(comm: Communicator, win, only: List[str], max_bytes: int) -> List[Tuple[str, Callable[[], None]]]:
    """The graphs to check: (name, check), those of `only`'s collectives, of at most `max_bytes`
    (float32 elements x 4: every graph's largest buffer is at most that)."""
    n, rank = comm.size, comm.rank

    def plus(values: torch.Tensor, k: int) -> torch.Tensor:
        return values + k

    def ar(dtype, op, count, in_place):
        def ref(k):
            return typed(reduce([plus(ints(r, count), k) for r in range(n)], op), dtype)
        return lambda: graph_check(comm, win, "all_reduce", dtype, count,
                                   lambda x, y: comm.all_reduce(x, op=op, out=None if in_place else y),
                                   count, in_place, ref)

    def ag(dtype, count):
        def ref(k):
            return typed(torch.cat([plus(ints(r, count), k) for r in range(n)]), dtype)
        return lambda: graph_check(comm, win, "all_gather", dtype, count,
                                   lambda x, y: comm.all_gather(x, y), n * count, False, ref)

    def rs(dtype, op, count):
        def ref(k):
            whole = reduce([plus(ints(r, n * count), k) for r in range(n)], op)
            return typed(whole[rank * count:(rank + 1) * count], dtype)
        return lambda: graph_check(comm, win, "reduce_scatter", dtype, n * count,
                                   lambda x, y: comm.reduce_scatter(x, y, op=op), count, False, ref)

    def a2a(dtype, count):
        def ref(k):
            return typed(torch.cat([plus(ints(p, n * count), k)[rank * count:(rank + 1) * count]
                                    for p in range(n)]), dtype)
        return lambda: graph_check(comm, win, "all_to_all", dtype, n * count,
                                   lambda x, y: comm.all_to_all(x, y), n * count, False, ref)

    def bc(dtype, count, root, in_place):
        def ref(k):
            return typed(plus(ints(root, count), k), dtype)
        return lambda: graph_check(comm, win, "broadcast", dtype, count,
                                   lambda x, y: comm.broadcast(x, root, out=None if in_place else y),
                                   count, in_place, ref)

    checks = [  # (collective, what, elements of its largest buffer, check)
        ("all_reduce", "float32 sum, 1 Ki elements", 1024, ar(torch.float32, "sum", 1024, False)),
        ("all_reduce", "float32 sum in place, 1 Mi elements", 1 << 20, ar(torch.float32, "sum", 1 << 20, True)),
        ("all_reduce", "bfloat16 sum, 64 Ki elements", 1 << 16, ar(torch.bfloat16, "sum", 1 << 16, False)),
        ("all_reduce", "float16 max, 4 Ki elements", 4096, ar(torch.float16, "max", 4096, False)),
        ("all_reduce", "int32 min, 16 Ki elements", 1 << 14, ar(torch.int32, "min", 1 << 14, False)),
        ("all_gather", "int32, 4 Ki elements per rank", n * 4096, ag(torch.int32, 4096)),
        ("all_gather", "bfloat16, 256 Ki elements per rank", n << 18, ag(torch.bfloat16, 1 << 18)),
        ("reduce_scatter", "float16 sum, 4 Ki elements per rank", n * 4096, rs(torch.float16, "sum", 4096)),
        ("reduce_scatter", "float32 max, 256 Ki elements per rank", n << 18, rs(torch.float32, "max", 1 << 18)),
        ("all_to_all", "float32, 1 Ki elements per peer", n * 1024, a2a(torch.float32, 1024)),
        ("broadcast", f"bfloat16 from rank {n - 1}, in place, 64 Ki elements", 1 << 16,
         bc(torch.bfloat16, 1 << 16, n - 1, True)),
        ("broadcast", "int32 from rank 0, 1 Ki elements", 1024, bc(torch.int32, 1024, 0, False)),
    ]
    out = [(f"graph of {coll} {what}, {REPLAYS} replays, checked after each", fn)
           for coll, what, elements, fn in checks if (not only or coll in only) and elements * 4 <= max_bytes]
    if not only or ("all_reduce" in only and "all_gather" in only):
        out.append((f"graph of all_reduce then all_gather of its result, {REPLAYS} replays",
                    lambda: chained_graph(comm, win)))
    return out


def chained_graph(comm: Communicator, win) -> None:
    """Two collectives in one graph: the second reads what the first wrote."""
    n, count = comm.size, 2048
    x = win.torch(torch.float32, (count,), 0)
    y = win.torch(torch.float32, (count,), 1 << 20)
    z = win.torch(torch.float32, (n * count,), win.size // 2)
    base = ints(comm.rank, count).to(torch.float32)
    step = torch.zeros(1, device="cuda")
    x.copy_(base)
    torch.cuda.synchronize()
    comm.barrier()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step.add_(1)
        x.copy_(base + step * (comm.rank + 1))
        comm.all_reduce(x, out=y)
        comm.all_gather(y, z)
    torch.cuda.synchronize()
    comm.barrier()
    for k in range(1, REPLAYS + 1):
        graph.replay()
        torch.cuda.synchronize()
        summed = sum(ints(r, count) + k * (r + 1) for r in range(n)).to(torch.float32)
        expect(z, summed.repeat(n), f"replay {k}")
    comm.barrier()
    del graph


# ---------------------------------------------------------------- errors


def errors(comm: Communicator, win) -> None:
    plain = torch.empty(1000, 4, device="cuda")
    try:
        comm.all_reduce(plain)
        raise AssertionError("torch.empty memory was taken")
    except CCONotInWindow as exc:
        assert "torch tensor of shape (1000, 4) and dtype float32" in str(exc), str(exc)
    try:
        comm.all_reduce(win.torch(torch.float32, (64, 64)).t())
        raise AssertionError("a transposed tensor was taken")
    except CCOInvalidArgument as exc:
        assert "not contiguous" in str(exc), str(exc)
    try:
        comm.all_reduce(win.torch(torch.float64, (64,)))
        raise AssertionError("float64 was taken")
    except CCOInvalidArgument as exc:
        assert "not float64" in str(exc), str(exc)
    try:
        comm.all_reduce(torch.zeros(8))  # CPU memory on a cuda communicator
        raise AssertionError("a CPU tensor was taken")
    except CCOInvalidArgument as exc:
        assert "cpu memory" in str(exc), str(exc)


def algorithm(comm: Communicator, forced: str, max_bytes: int) -> None:
    for name in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast"):
        for nbytes in (1024, 1 << 20, 256 << 20):
            algo = comm.collective_algorithm(name, nbytes)
            assert algo in ALGORITHMS and algo != "auto", (name, nbytes, algo)
            if forced and name == "all_reduce" and nbytes <= max_bytes:  # the sizes this job ran
                assert algo == forced, f"CCO_ALGO={forced}, but all_reduce of {nbytes} B uses {algo}"


def healthy(comm: Communicator) -> None:
    error = comm.async_error
    assert error is None, f"the communicator failed in the background: {error}"


# ---------------------------------------------------------------- backend "CCO"


def backend_part() -> int:
    import torch.distributed as dist
    import torch.distributed._symmetric_memory as symm_mem

    import cco.allocator  # noqa: F401  (registers "CCO")
    import cco.torch as cco_torch

    rank, world = int(os.environ["CCO_RANK"]), int(os.environ["CCO_NRANKS"])
    dist.init_process_group("gloo", init_method=f"file://{os.environ['CCO_TORCH_STORE']}", rank=rank,
                            world_size=world)
    symm_mem.set_backend("CCO")
    group = dist.group.WORLD.group_name
    count = 1 << 16
    t = symm_mem.empty(2 * count, dtype=torch.float32, device="cuda")
    symm_mem.rendezvous(t, group)
    comm = cco_torch.window_of(t, group).communicator
    r = Runner(comm)

    def eager() -> None:
        t.copy_(torch.cat([ints(rank, count), ints(rank, count, salt=1)]).to(torch.float32))
        torch.cuda.synchronize()
        comm.barrier()
        comm.all_reduce(t[:count])  # in place, at the tensor's start
        comm.all_reduce(t[count:], op="max")  # a slice further in
        expect(t[:count], reduce([ints(p, count) for p in range(world)], "sum").to(torch.float32), "sum")
        expect(t[count:], reduce([ints(p, count, 1) for p in range(world)], "max").to(torch.float32), "max")

    def graph() -> None:
        base = ints(rank, count).to(torch.float32)
        step = torch.zeros(1, device="cuda")
        x, y = t[:count], t[count:]
        torch.cuda.synchronize()
        comm.barrier()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            step.add_(1)
            x.copy_(base + step)
            comm.all_reduce(x, out=y)
        for k in range(1, REPLAYS + 1):
            g.replay()
            torch.cuda.synchronize()
            expect(y, reduce([ints(p, count) + k for p in range(world)], "sum").to(torch.float32), f"replay {k}")
        comm.barrier()

    r.check("backend \"CCO\" tensor: all_reduce in place, whole and a slice, through window_of", eager)
    r.check(f"backend \"CCO\" tensor: all_reduce in a graph, {REPLAYS} replays", graph)
    rc = r.summary()
    comm.barrier()
    dist.destroy_process_group()
    return rc


# ---------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", choices=("windows", "backend"), default="windows")
    ap.add_argument("--only", default="", help="comma-separated collectives (default: all)")
    ap.add_argument("--algo", default="", help="the CCO_ALGO the job runs under, checked by collective_algorithm")
    ap.add_argument("--max-bytes", type=int, default=1 << 40,
                    help="leave out the checks of larger buffers (a forced small-message algorithm)")
    args = ap.parse_args()
    torch.cuda.set_device(int(os.environ.get("CCO_LOCAL_RANK", "0")) % torch.cuda.device_count())
    torch.zeros(1, device="cuda")  # the primary context cco will use too
    if args.part == "backend":
        return backend_part()
    only = [c for c in args.only.split(",") if c]
    with Communicator.from_env(per_rank_vmm=1 << 32) as comm:
        r = Runner(comm)
        if comm.platform != "cuda":
            print(f"rank {comm.rank}: platform {comm.platform}, not cuda", flush=True)
            return 1
        win = comm.register_window_alloc(2 * comm.size * MAX_COUNT * 4)
        e = Eager(comm, win)
        counts = [n for n in COUNTS if n * 4 <= args.max_bytes]

        def want(collective: str) -> bool:
            return not only or collective in only

        if want("all_reduce"):
            for dtype in DTYPES:
                for op in OPS:
                    for n in counts:
                        for in_place in (False, True):
                            r.check(f"all_reduce {dtype} {op} n={n}{' in place' if in_place else ''}",
                                    lambda: e.all_reduce(dtype, op, n, in_place))
            r.check("all_reduce on a side stream given as a torch.cuda.Stream",
                    lambda: e.all_reduce(torch.float32, "sum", 1 << 16, False, stream="object"))
            r.check("all_reduce on a side stream given as an int",
                    lambda: e.all_reduce(torch.bfloat16, "sum", 1 << 16, True, stream="int"))
            r.check("all_reduce of cupy arrays on cupy's stream", e.cupy_all_reduce)
        if want("all_gather"):
            for dtype in DTYPES:
                for n in counts:
                    r.check(f"all_gather {dtype} n={n}", lambda: e.all_gather(dtype, n))
        if want("reduce_scatter"):
            for dtype in DTYPES:
                for op in OPS:
                    for n in counts:
                        r.check(f"reduce_scatter {dtype} {op} n={n}", lambda: e.reduce_scatter(dtype, op, n))
        if want("all_to_all"):
            for dtype in DTYPES:
                for n in counts:
                    r.check(f"all_to_all {dtype} n={n}", lambda: e.all_to_all(dtype, n))
        if want("broadcast"):
            for dtype in DTYPES:
                for n in counts:
                    for root in sorted({0, comm.size - 1}):
                        for in_place in (False, True):
                            r.check(f"broadcast {dtype} n={n} root={root}{' in place' if in_place else ''}",
                                    lambda: e.broadcast(dtype, n, root, in_place))
        for name, fn in graph_checks(comm, win, only, args.max_bytes):
            r.check(name, fn)
        r.check("errors found before any C call", lambda: errors(comm, win))
        r.check("collective_algorithm", lambda: algorithm(comm, args.algo, args.max_bytes))
        r.check("no asynchronous error", lambda: healthy(comm))
        rc = r.summary()
        win.deregister()
    return rc


if __name__ == "__main__":
    sys.exit(main())
