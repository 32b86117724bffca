"""What the Python layer costs over the C call it wraps, measured in one run.

For each operation, the raw ctypes call (the C function with its argtypes,
no wrapper) and the Python method run alternately, in rounds of a batch
each, so drift of a noisy machine hits both alike; the figure per side is
the median over rounds of the mean time per call. Prints two JSON lines per
operation (rank 0 only; docs/perf.md): the Python method's time, and the C
call's as the reference "c_api":

    {"bench": "python", "op": "barrier", "bytes": null, "ranks": 4, "iters": 2000,
     "metric": "us", "value": 10.0, "ref": null, "platform": "host"}
    {"bench": "python", "op": "barrier", ..., "value": 9.1, "ref": "c_api", "platform": "host"}

Operations: init (create + destroy), alloc_mem (+ free), register_window
(+ deregister; collective), create_dev_comm (+ device copy + destroy;
collective), barrier. Run with any number of ranks:

    build/bin/ccorun -n 4 python3 bench/bench_python.py [--scale 1.0] [-n N] [--op barrier,init]
    python3 bench/bench_python.py            # one rank
"""
import argparse
import ctypes
import os
import statistics
import sys
import time
from typing import Callable

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cco  # noqa: E402
from perf_common import int_arg, json_line  # noqa: E402
from cco import _abi, _lib  # noqa: E402
from cco.communicator import Communicator, UniqueId  # noqa: E402
from cco.devcomm import CCODevCommRequirements  # noqa: E402


def timed_rounds(comm: Communicator, raw: Callable[[], None], py: Callable[[], None],
                 iters: int, rounds: int = 5):
    """(c_us, py_us): medians over rounds of the mean time per call."""
    per = max(1, iters // rounds)
    c_times, py_times = [], []
    raw()  # warm both paths (first-touch, lazy state)
    py()
    for _ in range(rounds):
        for fn, out in ((raw, c_times), (py, py_times)):
            comm.barrier()  # collectives start together
            t0 = time.perf_counter()
            for _ in range(per):
                fn()
            out.append((time.perf_counter() - t0) / per * 1e6)
    return statistics.median(c_times), statistics.median(py_times), per * rounds


def ok(res: int) -> None:
    if res != 0:
        raise cco.errors.error_for(res, _lib.last_error(None))


OPS = ("barrier", "alloc_mem", "register_window", "create_dev_comm", "init")


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 1000:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number above 0 and at most 1000")
    return value


def main() -> int:
    ap = argparse.ArgumentParser(description="Python-over-C overhead of cco calls")
    ap.add_argument("--scale", type=positive_float, default=1.0, help="multiply every iteration count")
    ap.add_argument("-n", "--iters", type=int_arg(1, 10**7),
                    help="calls per operation (default: barrier 2000, alloc_mem 1000, register_window 200, "
                         "create_dev_comm 50, init 20 on one rank and 10 on several, times --scale)")
    ap.add_argument("--op", default=",".join(OPS), help="operations, comma-separated: " + ", ".join(OPS))
    args = ap.parse_args()
    ops = args.op.split(",")
    for op in ops:
        if op not in OPS:
            ap.error(f"--op: unknown operation '{op}' (choose from {', '.join(OPS)})")
    lib = _lib.load()
    under_ccorun = bool(os.environ.get("CCO_UNIQUE_ID"))
    comm = Communicator.from_env() if under_ccorun else Communicator.init(1, 0, Communicator.get_unique_id())
    h = comm.handle
    n, rank = comm.size, comm.rank
    vmm = 1 << 32

    def iters(k: int) -> int:
        return args.iters if args.iters else max(5, int(k * args.scale))

    sizes = {"alloc_mem": 1 << 16, "register_window": 1 << 20}

    def report(op: str, c_us: float, py_us: float, count: int) -> None:
        if rank == 0:
            for value, ref in ((py_us, None), (c_us, "c_api")):
                print(json_line("python", op, sizes.get(op), n, count, "us", value, ref, platform=comm.platform),
                      flush=True)

    # --- barrier
    if "barrier" in ops:
        report("barrier", *timed_rounds(comm, lambda: ok(lib.ccoBarrierAll(h)), comm.barrier, iters(2000)))

    # --- alloc_mem (+ free)
    if "alloc_mem" in ops:
        out = ctypes.c_void_p()

        def raw_alloc() -> None:
            ok(lib.ccoMemAlloc(h, 1 << 16, ctypes.byref(out)))
            ok(lib.ccoMemFree(h, out.value))

        report("alloc_mem", *timed_rounds(comm, raw_alloc, lambda: comm.alloc_mem(1 << 16).free(),
                                          iters(1000)))

    # --- register_window (+ deregister), over one allocation
    if "register_window" in ops:
        mem = comm.alloc_mem(1 << 20)
        win = ctypes.c_void_p()

        def raw_window() -> None:
            ok(lib.ccoWindowRegister(h, mem.ptr, 1 << 20, ctypes.byref(win)))
            ok(lib.ccoWindowDeregister(h, win.value))

        report("register_window", *timed_rounds(comm, raw_window,
                                                lambda: comm.register_window(mem).deregister(), iters(200)))
        mem.free()

    # --- create_dev_comm (+ device copy + destroy)
    if "create_dev_comm" in ops:
        reqs = CCODevCommRequirements(gda_connection_type=cco.GDA_CONNECTION_NONE)
        dc = _abi.DevCommStruct()
        dptr = ctypes.c_void_p()

        def raw_devcomm() -> None:
            ok(lib.ccoDevCommCreate(h, ctypes.byref(reqs), ctypes.byref(dc)))
            ok(lib.ccoDevCommCopyToDevice(h, ctypes.byref(dc), ctypes.byref(dptr)))
            ok(lib.ccoDevCommDestroy(h, ctypes.byref(dc)))

        report("create_dev_comm", *timed_rounds(comm, raw_devcomm,
                                                lambda: comm.create_dev_comm(reqs).destroy(), iters(50)))

    # --- init (create + destroy): every rank needs the same fresh id per
    # call, so rank 0 mints them all up front and allgather hands them out.
    if "init" in ops:
        count = iters(20) if n == 1 or args.iters else max(5, int(10 * args.scale))
        count += 2  # the warm-up pair of timed_rounds
        ids = []
        for _ in range(2 * count):
            mine = bytes(Communicator.get_unique_id()) if rank == 0 else bytes(128)
            ids.append(UniqueId(comm.allgather(mine)[0]))
        it_raw, it_py = iter(ids[0::2]), iter(ids[1::2])
        new = ctypes.c_void_p()

        def raw_init() -> None:
            ok(lib.ccoCommCreate(next(it_raw)._struct(), n, rank, vmm, ctypes.byref(new)))
            ok(lib.ccoCommDestroy(new.value))

        def py_init() -> None:
            Communicator.init(n, rank, next(it_py), per_rank_vmm=vmm).destroy()

        report("init", *timed_rounds(comm, raw_init, py_init, count - 2, rounds=min(5, count - 2)))
    comm.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())
