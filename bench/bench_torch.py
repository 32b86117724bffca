#!/usr/bin/env python3
"""torch backend "CCO" against torch's own symmetric-memory backends, in one run: rendezvous time
and one_shot_all_reduce (4 KiB, 256 KiB, 4 MiB; fp32 and bf16), one JSON line per measurement
(bench/cco_perf.py torch runs it):

    python3 bench/bench_torch.py --bin build/bin [--ranks 2[,4..]] [--backends CCO,NVSHMEM[,CUDA]]
        [--op rendezvous,allreduce] [-n ITERS] [--timeout SEC] [--dry-run]

Each backend runs as a job of its own (a process cannot change backend): `--bin`'s ccorun starts
the ranks, torch.distributed runs over gloo, and NVSHMEM gets the settings it needs under MPS
(NVSHMEM_DISABLE_NCCL=1 and the rest, unless already set). "CUDA" is added where there is one GPU
per rank; on a shared GPU torch refuses it. Rank 0 prints each job's lines; after each rank count,
the ratios CCO / each reference, with the goal 1.0 (the smaller the better).

Timing: rendezvous of a fresh tensor (no caching pool) on every rank after a barrier, the slowest
rank's time, median of 20 (op "rendezvous"); the first allocation and rendezvous (which make the
group's communicator or start NVSHMEM) apart ("first_alloc", "first_rendezvous"). The all-reduce
twice: "one_shot_all_reduce", calls captured in a CUDA graph and replayed (torch_timing.graph_us:
the GPU's time per call, what the ratio lines use); and "one_shot_all_reduce_eager", calls back to
back from the host, timed on the host (value) and with CUDA events (gpu_us), the median of 5
batches: bound by the host's launches, and noisy, whatever the backend. The slowest rank's
figure each time. Lines: bench "torch", ref null for "CCO", "torch_nvshmem" / "torch_cuda" for the
others, "backend" naming it; ratio lines have metric "ratio_us".
"""
import argparse
import os
import shlex
import statistics
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
from perf_common import NVSHMEM_ENV, add_sweep_args, count, int_arg, json_line, run_ranks_job  # noqa: E402
from bench_coll import gpu_driver_here  # noqa: E402
from torch_timing import graph_us  # noqa: E402

SIZES = (4 << 10, 256 << 10, 4 << 20)
PARTS = ("rendezvous", "allreduce")
BACKENDS = ("CCO", "NVSHMEM", "CUDA")
REFS = {"CCO": None, "NVSHMEM": "torch_nvshmem", "CUDA": "torch_cuda"}
ITERS, GRAPH_TRIALS, GRAPH_WARMUP = 500, 7, 2


# ------------------------------------------------------------------- a rank


def rank_main(backend: str, parts: List[str], iters: int) -> int:
    import torch
    import torch.distributed as dist
    import torch.distributed._symmetric_memory as symm_mem
    from torch._C._distributed_c10d import _SymmetricMemory

    rank, world = int(os.environ["CCO_RANK"]), int(os.environ["CCO_NRANKS"])
    torch.cuda.set_device(int(os.environ.get("CCO_LOCAL_RANK", "0")) % torch.cuda.device_count())
    dist.init_process_group("gloo", init_method=f"file://{os.environ['CCO_TORCH_STORE']}", rank=rank,
                            world_size=world)
    if backend == "CCO":
        sys.path.insert(0, str(REPO / "python"))
        import cco.allocator  # noqa: F401  (registers "CCO")
    symm_mem.set_backend(backend)
    group = dist.group.WORLD.group_name
    device = torch.device("cuda", torch.cuda.current_device())
    ref = REFS[backend]

    def slowest(value: float) -> float:
        values: List[float] = [0.0] * world
        dist.all_gather_object(values, value)
        return max(values)

    def emit(op: str, nbytes: Optional[int], n: int, us: float, **extra: object) -> None:
        if rank == 0:
            print(json_line("torch", op, nbytes, world, n, "us", us, ref, backend=backend, **extra), flush=True)

    def fresh(nbytes: int) -> "torch.Tensor":
        return _SymmetricMemory.empty_strided_p2p((nbytes,), (1,), torch.uint8, device)

    if "rendezvous" in parts:
        # The first (the group's communicator, or NVSHMEM's start), then fresh tensors.
        dist.barrier()
        t0 = time.perf_counter()
        first = fresh(1 << 20)
        alloc_first = time.perf_counter() - t0
        dist.barrier()
        t0 = time.perf_counter()
        symm_mem.rendezvous(first, group)
        rdv_first = time.perf_counter() - t0
        emit("first_alloc", 1 << 20, 1, slowest(alloc_first) * 1e6)
        emit("first_rendezvous", 1 << 20, 1, slowest(rdv_first) * 1e6)
        times, keep = [], []
        for _ in range(20):
            t = fresh(1 << 20)
            torch.cuda.synchronize()
            dist.barrier()
            t0 = time.perf_counter()
            symm_mem.rendezvous(t, group)
            times.append(slowest(time.perf_counter() - t0))
            keep.append(t)  # freed together afterwards: each rendezvous is a new allocation
        emit("rendezvous", 1 << 20, len(times), statistics.median(times) * 1e6, min_us=min(times) * 1e6)
        del keep

    if "allreduce" in parts:
        # one_shot_all_reduce as torch's ops call it: the rendezvous looked up per call.
        for dtype, name in ((torch.float32, "fp32"), (torch.bfloat16, "bf16")):
            for nbytes in SIZES:
                n = nbytes // torch.tensor([], dtype=dtype).element_size()
                t = symm_mem.empty(n, dtype=dtype, device=device).fill_(1)
                symm_mem.rendezvous(t, group)

                def call() -> "torch.Tensor":
                    return torch.ops.symm_mem.one_shot_all_reduce(t, "sum", group)

                correct = bool((call() == world).all())
                reps = 100 if nbytes <= 1 << 20 else 20
                graph = slowest(graph_us(torch, call, reps, GRAPH_TRIALS, GRAPH_WARMUP, dist.barrier))
                emit("one_shot_all_reduce", nbytes, reps * GRAPH_TRIALS, graph, dtype=name, timing="graph",
                     reps=reps, correct=correct)
                for _ in range(20):
                    call()
                host, gpu = [], []
                batch = max(1, iters // 5)
                for _ in range(5):
                    torch.cuda.synchronize()
                    dist.barrier()
                    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    t0 = time.perf_counter()
                    start.record()
                    for _ in range(batch):
                        call()
                    stop.record()
                    torch.cuda.synchronize()
                    host.append((time.perf_counter() - t0) / batch)
                    gpu.append(start.elapsed_time(stop) * 1e-3 / batch)
                emit("one_shot_all_reduce_eager", nbytes, 5 * batch, slowest(statistics.median(host)) * 1e6,
                     dtype=name, timing="eager", gpu_us=round(slowest(statistics.median(gpu)) * 1e6, 2),
                     correct=correct)
                del t
    dist.barrier()
    dist.destroy_process_group()
    return 0


# ------------------------------------------------------------------ the run


def command(args: argparse.Namespace, backend: str, ranks: int) -> List[str]:
    return [str(Path(args.bin) / "ccorun"), "-t", str(args.timeout), "-n", str(ranks), args.python,
            str(Path(__file__).resolve()), "--rank-mode", "--backend", backend, "--op", ",".join(args.parts),
            "-n", str(count(args.iters, ITERS))]


def run_backend(args: argparse.Namespace, backend: str, ranks: int) -> List[dict]:
    env = dict(os.environ)
    if backend == "NVSHMEM":
        for k, v in NVSHMEM_ENV.items():
            env.setdefault(k, v)
    lib = Path(args.bin).resolve().parent / "lib" / "libcco.so"
    if lib.exists():
        env.setdefault("CCO_LIBRARY", str(lib))
    cmd = command(args, backend, ranks)
    return run_ranks_job("bench_torch", f"backend {backend}, {ranks} ranks", cmd, env, args.timeout + 60)


def ratios(results: Dict[str, List[dict]], ranks: int) -> List[str]:
    """CCO / each reference at every measurement both have (the all-reduce's in CUDA graphs: the eager
    figures measure the host's launches)."""
    def key(r: dict) -> tuple:
        return (r["op"], r.get("dtype"), r["bytes"])

    cco = {key(r): r for r in results.get("CCO", [])}
    out = []
    for backend, records in results.items():
        if backend == "CCO":
            continue
        for r in records:
            mine = cco.get(key(r))
            if not mine or r["op"] not in ("rendezvous", "one_shot_all_reduce") or not r["value"] or \
                    mine["value"] is None:
                continue
            ratio = mine["value"] / r["value"]
            out.append(json_line("torch", r["op"], r["bytes"], ranks, mine["iters"], "ratio_us", ratio, None,
                                 dtype=r.get("dtype"), vs=REFS[backend], cco_us=mine["value"], ref_us=r["value"],
                                 goal_ratio_max=1.0, met=ratio <= 1.0))
    return out


def parse_args(argv: List[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="bench_torch.py", description=__doc__.splitlines()[0])
    add_sweep_args(ap, sizes=False)
    ap.add_argument("--bin", default=os.environ.get("CCO_BIN", str(REPO / "build" / "bin")))
    ap.add_argument("--ranks", default=[2], type=lambda t: [int_arg(2, 1024)(x) for x in t.split(",")],
                    metavar="N[,N..]", help="rank counts (2)")
    ap.add_argument("--backends", default="", help="comma-separated: CCO, NVSHMEM, CUDA (default: CCO, "
                    "NVSHMEM, and CUDA where there is a GPU per rank)")
    ap.add_argument("--op", default=",".join(PARTS), help="comma-separated: " + ", ".join(PARTS))
    ap.add_argument("--timeout", type=int_arg(1, 86400), default=300, help="seconds per job (300)")
    ap.add_argument("--python", default=sys.executable, help="the ranks' interpreter")
    ap.add_argument("--dry-run", action="store_true", help="print the jobs instead of running them")
    ap.add_argument("--rank-mode", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--backend", default="CCO", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.warmup is not None:
        ap.error("-w: the warm-up is fixed (20 calls before the eager batches, 2 graph replays)")
    args.parts = args.op.split(",")
    for part in args.parts:
        if part not in PARTS:
            ap.error(f"--op: unknown measurement '{part}' (choose from {', '.join(PARTS)})")
    args.backend_list = [b for b in args.backends.split(",") if b]
    for backend in args.backend_list + [args.backend]:
        if backend not in BACKENDS:
            ap.error(f"--backends: unknown backend '{backend}' (choose from {', '.join(BACKENDS)})")
    return args


def gpus() -> int:
    try:
        import torch

        return torch.cuda.device_count()
    except ImportError:
        return 0


def main(argv: List[str]) -> int:
    args = parse_args(argv)
    if args.rank_mode:
        return rank_main(args.backend, args.parts, count(args.iters, ITERS))
    if not args.dry_run and not gpu_driver_here():
        print("bench_torch.py: no GPU driver here", file=sys.stderr)
        return 77
    ok = True
    for ranks in args.ranks:
        backends = args.backend_list or ["CCO", "NVSHMEM"] + (["CUDA"] if not args.dry_run and gpus() >= ranks else [])
        if args.dry_run:
            for b in backends:
                print(shlex.join(command(args, b, ranks)))
            continue
        results = {b: run_backend(args, b, ranks) for b in backends}
        for line in ratios(results, ranks):
            print(line, flush=True)
        ok = ok and bool(results.get("CCO"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
