"""torch backend "CCO" against torch's own symmetric-memory backends, in one
run: rendezvous time and one_shot_all_reduce latency (4 KiB, 256 KiB,
4 MiB; fp32 and bf16), one JSON line per measurement.

    python3 bench/bench_torch_symm.py --bin build/bin --ranks 2
        [--backends CCO,NVSHMEM[,CUDA]] [--iters 500]

Each backend runs as a job of its own (a process cannot change backend):
`--bin`'s ccorun starts the ranks, torch.distributed runs over gloo, and
NVSHMEM gets the settings it needs under MPS (NVSHMEM_DISABLE_NCCL=1 and
the rest, unless already set). "CUDA" is added where there is one GPU per
rank; on a shared GPU torch refuses it, which is printed as an error line.
Rank 0 prints each job's lines; the last lines are the ratios CCO / each
reference, with the goals (rendezvous <= 1.0x, all-reduce <= 1.0x).

Timing: rendezvous of a fresh tensor (no caching pool) on every rank after
a barrier, the slowest rank's time, median of 20; the first rendezvous
(which makes the group's communicator or starts NVSHMEM) apart. All-reduce:
calls back to back on torch's stream, timed from the host around them and
with CUDA events, the median of 5 batches, the slowest rank.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

REPO = Path(__file__).resolve().parents[1]
SIZES = (4 << 10, 256 << 10, 4 << 20)
NVSHMEM_ENV = {
    "NVSHMEM_DISABLE_NCCL": "1",
    "NVSHMEM_IGNORE_CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "1",
    "NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME": "lo",
    "NVSHMEM_DISABLE_NVLS": "1",
}


# ------------------------------------------------------------------- a rank


def slowest(value: float) -> float:
    import torch.distributed as dist

    values: List[float] = [0.0] * dist.get_world_size()
    dist.all_gather_object(values, value)
    return max(values)


def emit(record: Dict[str, object]) -> None:
    import torch.distributed as dist

    if dist.get_rank() == 0:
        print(json.dumps(record), flush=True)


def rank_main(backend: str, iters: int) -> int:
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
    base = {"bench": "torch_symm", "backend": backend, "ranks": world}

    def fresh(nbytes: int) -> "torch.Tensor":
        return _SymmetricMemory.empty_strided_p2p((nbytes,), (1,), torch.uint8, device)

    # Rendezvous: the first (communicator or NVSHMEM start-up), then fresh tensors.
    dist.barrier()
    t0 = time.perf_counter()
    first = fresh(1 << 20)
    alloc_first = time.perf_counter() - t0
    dist.barrier()
    t0 = time.perf_counter()
    symm_mem.rendezvous(first, group)
    rdv_first = time.perf_counter() - t0
    emit({**base, "metric": "first_alloc_us", "us": round(slowest(alloc_first) * 1e6, 1)})
    emit({**base, "metric": "first_rendezvous_us", "us": round(slowest(rdv_first) * 1e6, 1)})
    times = []
    keep = []
    for _ in range(20):
        t = fresh(1 << 20)
        torch.cuda.synchronize()
        dist.barrier()
        t0 = time.perf_counter()
        symm_mem.rendezvous(t, group)
        times.append(slowest(time.perf_counter() - t0))
        keep.append(t)  # freed together afterwards: each rendezvous is a new allocation
    emit({**base, "metric": "rendezvous_us", "bytes": 1 << 20,
          "us": round(statistics.median(times) * 1e6, 1), "min_us": round(min(times) * 1e6, 1)})
    del keep

    # one_shot_all_reduce, as torch's ops call it: rendezvous looked up per call.
    for dtype in (torch.float32, torch.bfloat16):
        for nbytes in SIZES:
            n = nbytes // torch.tensor([], dtype=dtype).element_size()
            t = symm_mem.empty(n, dtype=dtype, device=device).fill_(1)
            symm_mem.rendezvous(t, group)
            for _ in range(20):
                torch.ops.symm_mem.one_shot_all_reduce(t, "sum", group)
            host, gpu = [], []
            batch = max(1, iters // 5)
            for _ in range(5):
                torch.cuda.synchronize()
                dist.barrier()
                start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                t0 = time.perf_counter()
                start.record()
                for _ in range(batch):
                    torch.ops.symm_mem.one_shot_all_reduce(t, "sum", group)
                stop.record()
                torch.cuda.synchronize()
                host.append((time.perf_counter() - t0) / batch)
                gpu.append(start.elapsed_time(stop) * 1e-3 / batch)
            out = torch.ops.symm_mem.one_shot_all_reduce(t, "sum", group)
            correct = bool((out == world).all())
            emit({**base, "metric": "one_shot_all_reduce_us", "dtype": str(dtype).replace("torch.", ""),
                  "bytes": nbytes, "host_us": round(slowest(statistics.median(host)) * 1e6, 2),
                  "gpu_us": round(slowest(statistics.median(gpu)) * 1e6, 2), "iters": 5 * batch,
                  "correct": correct})
    dist.barrier()
    dist.destroy_process_group()
    return 0


# ------------------------------------------------------------------ the run


def run_backend(args: argparse.Namespace, backend: str) -> List[Dict[str, object]]:
    env = dict(os.environ)
    if backend == "NVSHMEM":
        for k, v in NVSHMEM_ENV.items():
            env.setdefault(k, v)
    lib = Path(args.bin).resolve().parent / "lib" / "libcco.so"
    env.setdefault("CCO_LIBRARY", str(lib))
    with tempfile.TemporaryDirectory() as tmp:
        env["CCO_TORCH_STORE"] = str(Path(tmp) / "store")
        cmd = [str(Path(args.bin) / "ccorun"), "-t", str(args.timeout), "-n", str(args.ranks),
               sys.executable, str(Path(__file__).resolve()), "--rank-mode", "--backend", backend,
               "--iters", str(args.iters)]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout + 60)
    records = []
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            records.append(json.loads(line))
            print(line, flush=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-6:]
        error = {"bench": "torch_symm", "backend": backend, "ranks": args.ranks, "error": f"exit {proc.returncode}",
                 "detail": " | ".join(tail)}
        print(json.dumps(error), flush=True)
    return records


def ratios(results: Dict[str, List[Dict[str, object]]], ranks: int) -> None:
    def key(r: Dict[str, object]) -> tuple:
        return (r.get("metric"), r.get("dtype"), r.get("bytes"))

    cco = {key(r): r for r in results.get("CCO", [])}
    for ref_name, ref_records in results.items():
        if ref_name == "CCO":
            continue
        for r in ref_records:
            mine = cco.get(key(r))
            if not mine:
                continue
            field = "host_us" if "host_us" in r else "us"
            if not r.get(field):
                continue
            ratio = float(mine[field]) / float(r[field])  # type: ignore[arg-type]
            print(json.dumps({"bench": "torch_symm", "metric": r["metric"], "dtype": r.get("dtype"),
                              "bytes": r.get("bytes"), "ranks": ranks, "vs": ref_name,
                              "cco_us": mine[field], "ref_us": r[field], "ratio": round(ratio, 3),
                              "goal": 1.0, "met": ratio <= 1.0}), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=str(REPO / "build" / "bin"))
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--backends", default="")
    ap.add_argument("--iters", type=int, default=500)
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--rank-mode", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--backend", default="CCO", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rank_mode:
        return rank_main(args.backend, args.iters)
    backends = [b for b in args.backends.split(",") if b]
    if not backends:
        import torch

        backends = ["CCO", "NVSHMEM"] + (["CUDA"] if torch.cuda.device_count() >= args.ranks else [])
    results = {b: run_backend(args, b) for b in backends}
    ratios(results, args.ranks)
    return 0 if results.get("CCO") else 1


if __name__ == "__main__":
    sys.exit(main())
