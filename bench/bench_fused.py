#!/usr/bin/env python3
"""Fused GEMM + communication (cco.ops.fused) against the sequential path, the GEMM alone, the
collective alone and torch's own fused operators, one JSON line per measurement:

    python3 bench/bench_fused.py --bin build/bin [--ranks 8] [--tokens 1024,2048,4096,8192]
        [--layers qkv,o,fc1,fc2] [--jobs cco,torch,torch_cco] [--timeout SEC] [--dry-run]

The shapes: Llama-70B (hidden 8192, 64 heads and 8 KV heads of 128, intermediate 28672) split for
tensor parallelism over --ranks, sequence parallel between the layers:

    qkv  ag_gemm  x [T/W, 8192] gathered, @ [8192, 10240/W]
    o    gemm_rs  [T, 8192/W] @ [8192/W, 8192], reduce-scattered
    fc1  ag_gemm  x [T/W, 8192] gathered, @ [8192, 57344/W]   (gate and up)
    fc2  gemm_rs  [T, 28672/W] @ [28672/W, 8192], reduce-scattered

Per shape, the cco job times: the GEMM alone (torch.matmul, cuBLAS), the collective alone (cco's
all_gather / reduce_scatter on window buffers), the sequential path (transport="sequential":
torch.matmul and the cco collective), and the fused op over LSA and over SDMA, each with the GEMM
tile configs of CCO_BENCH_FUSED_TILES (BLOCK_N x stages, default 256x3,128x3,128x4; its figure is
the best, named in the line); CCO_BENCH_FUSED_TRANSPORTS picks the transports (lsa,sdma); the torch job times
torch.ops.symm_mem.fused_all_gather_matmul / fused_matmul_reduce_scatter on its
"NVSHMEM" backend, and its GEMM alone; the torch_cco job times the same torch ops on cco's backend
"CCO" (cco.torch), for rank counts where NVSHMEM does not start with ranks sharing one GPU. Timing: every rank at once, 10 calls back to back between
CUDA events after 3 warm-up calls, each trial after a barrier, the median of 5 trials, the slowest
rank's figure, in us per call. The ranks share one GPU, so they compete for its SMs and memory:
overlap efficiency (gemm + comm - fused) / comm is reported, and the goal here is fused never slower
than sequential by more than 3%.
"""
import argparse
import os
import statistics
import sys
from pathlib import Path
from typing import Dict, List

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
from perf_common import NVSHMEM_ENV, json_line, run_rank_mode_job, slowest_over  # noqa: E402

HIDDEN, HEADS, KV_HEADS, HEAD_DIM, INTER = 8192, 64, 8, 128, 28672
CALLS, WARMUP, TRIALS = 10, 3, 5
TRANSPORTS = os.environ.get("CCO_BENCH_FUSED_TRANSPORTS", "lsa,sdma").split(",")  # fused ones timed
# GEMM tile configs (BLOCK_N, stages) each fused transport is timed with; its figure is the best
TILES = [tuple(int(v) for v in t.split("x")) for t in os.environ.get("CCO_BENCH_FUSED_TILES", "256x3,128x3,128x4").split(",")]


def layer_shape(layer: str, tokens: int, world: int):
    """(op, rows of a on this rank, K, N)."""
    if layer == "qkv":
        return "ag_gemm", tokens // world, HIDDEN, (HEADS + 2 * KV_HEADS) * HEAD_DIM // world
    if layer == "o":
        return "gemm_rs", tokens, HEADS * HEAD_DIM // world, HIDDEN
    if layer == "fc1":
        return "ag_gemm", tokens // world, HIDDEN, 2 * INTER // world
    if layer == "fc2":
        return "gemm_rs", tokens, INTER // world, HIDDEN
    raise SystemExit(f"bench_fused: unknown layer {layer!r}")


def timed_us(torch, fn, barrier) -> float:
    for _ in range(WARMUP):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(TRIALS):
        barrier()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(CALLS):
            fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1e3 / CALLS)
    return statistics.median(times)


def inputs(torch, op, rows, k, n, world, rank):
    g = torch.Generator(device="cuda").manual_seed(1234 + rank)
    a = torch.randn((rows, k), generator=g, device="cuda").div_(k ** 0.5).bfloat16()
    b = torch.randn((k, n), generator=g, device="cuda").bfloat16()
    full_rows = rows * world if op == "ag_gemm" else rows
    return a, b, full_rows


def rank_cco(layers: List[str], tokens_list: List[int]) -> None:
    import torch

    sys.path.insert(0, str(REPO / "python"))
    from cco.launch import finalize, init_communicator
    from cco.ops import fused
    DEFAULT_TILES = (fused.BLOCK_N, fused.NUM_STAGES)

    comm = init_communicator(per_rank_vmm=8 << 30)
    torch.cuda.set_device(comm.cuda_device)
    rank, world = comm.rank, comm.size

    def slowest(v: float) -> float:
        return slowest_over(comm.allgather, v)

    def progress(text: str) -> None:
        if rank == 0:
            print(f"bench_fused: {text}", file=sys.stderr, flush=True)

    for tokens in tokens_list:
        for layer in layers:
            op, rows, k, n = layer_shape(layer, tokens, world)
            a, b, full_rows = inputs(torch, op, rows, k, n, world, rank)
            a_full = torch.empty((full_rows, k), dtype=a.dtype, device="cuda")
            res: Dict[str, float] = {}
            res["gemm"] = timed_us(torch, lambda: torch.matmul(a_full, b), comm.barrier)
            progress(f"{layer} T={tokens} gemm: {res['gemm']:.1f} us")
            fn = getattr(fused, op)
            # the collective alone, on window buffers of the sequential path's layout
            fn(a, b, comm, transport="sequential")
            ws = fused._WORKSPACES[comm]
            p = fused.plan(op, "sequential", rows, n, k, 2, world)
            if op == "ag_gemm":
                send, recv = ws.view(p.send_off, a.dtype, (rows, k)), ws.view(p.recv_off, a.dtype, (full_rows, k))
                res["comm"] = timed_us(torch, lambda: comm.all_gather(send, out=recv), comm.barrier)
                nbytes = full_rows * k * 2
            else:
                send = ws.view(p.send_off, a.dtype, (rows, n))
                recv = ws.view(p.result_off, a.dtype, (rows // world, n))
                res["comm"] = timed_us(torch, lambda: comm.reduce_scatter(send, out=recv), comm.barrier)
                nbytes = rows * n * 2
            ref = None
            best_tiles: Dict[str, str] = {}
            for transport in ["sequential"] + TRANSPORTS:
                got = fn(a, b, comm, transport=transport)
                # before any synchronous copy (.item()): see docs/fused_ops.md on SDMA and synchronous calls
                torch.cuda.synchronize()
                if ref is None:
                    ref = got.float().clone()
                else:  # the same result as the sequential path
                    err = (got.float() - ref).abs().max().item() / max(1e-6, ref.abs().max().item())
                    if err > 2e-2:
                        raise SystemExit(f"bench_fused: {op} {transport} differs from sequential by {err:.3g}")
                configs = TILES if transport != "sequential" else [None]
                for tiles in configs:
                    if tiles is not None:  # the bench's own knob: the module's tile globals
                        fused.BLOCK_N, fused.NUM_STAGES = tiles
                        fn(a, b, comm, transport=transport)  # loads this config's kernels on every rank
                        torch.cuda.synchronize()
                    us = timed_us(torch, lambda t=transport: fn(a, b, comm, transport=t), comm.barrier)
                    name = transport if tiles is None else f"{transport}:{tiles[0]}x{tiles[1]}"
                    res[name] = us
                    progress(f"{layer} T={tokens} {name}: {us:.1f} us")
                if configs != [None]:  # the transport's figure: its best tile config on every rank alike
                    best = min(configs, key=lambda t: slowest(res[f"{transport}:{t[0]}x{t[1]}"]))
                    res[transport] = res[f"{transport}:{best[0]}x{best[1]}"]
                    best_tiles[transport] = f"128x{best[0]}x64, {best[1]} stages"
                fused.BLOCK_N, fused.NUM_STAGES = DEFAULT_TILES
            fused.check(comm)
            res = {key: slowest(v) for key, v in res.items()}
            if rank == 0:
                seq, comm_us = res["sequential"], res["comm"]
                extra = dict(layer=layer, tokens=tokens, m=full_rows, k=k, n=n, gemm_us=round(res["gemm"], 2),
                             comm_us=round(comm_us, 2), sequential_us=round(seq, 2))
                for key in ("gemm", "comm", "sequential"):
                    print(json_line("fused", f"{op}_{key}", nbytes, world, CALLS * TRIALS, "us", res[key], None,
                                    layer=layer, tokens=tokens, m=full_rows, k=k, n=n), flush=True)
                for key in res:
                    if ":" in key:
                        print(json_line("fused", f"{op}_tiles", nbytes, world, CALLS * TRIALS, "us", res[key], None,
                                        transport=key, layer=layer, tokens=tokens), flush=True)
                for transport in TRANSPORTS:
                    t = res[transport]
                    print(json_line("fused", op, nbytes, world, CALLS * TRIALS, "us", t, "sequential",
                                    transport=transport, tiles=best_tiles.get(transport), vs_sequential=round(t / seq, 3),
                                    overlap=round((res["gemm"] + comm_us - t) / comm_us, 3), **extra), flush=True)
            del a, b, a_full
            comm.barrier()
    comm.destroy()
    finalize()


def rank_torch(layers: List[str], tokens_list: List[int], backend: str) -> None:
    import torch
    import torch.distributed as dist
    import torch.distributed._symmetric_memory as symm_mem

    rank, world = int(os.environ["CCO_RANK"]), int(os.environ["CCO_NRANKS"])
    torch.cuda.set_device(int(os.environ.get("CCO_LOCAL_RANK", "0")) % torch.cuda.device_count())
    dist.init_process_group("gloo", init_method=f"file://{os.environ['CCO_TORCH_STORE']}", rank=rank,
                            world_size=world)
    if backend == "CCO":
        sys.path.insert(0, str(REPO / "python"))
        import cco.allocator  # noqa: F401  (registers backend "CCO")
    symm_mem.set_backend(backend)
    group = dist.group.WORLD.group_name
    symm_mem.enable_symm_mem_for_group(group)

    def slowest(v: float) -> float:
        values: List[float] = [0.0] * world
        dist.all_gather_object(values, v)
        return max(values)

    for tokens in tokens_list:
        for layer in layers:
            op, rows, k, n = layer_shape(layer, tokens, world)
            a, b, full_rows = inputs(torch, op, rows, k, n, world, rank)
            a_full = torch.empty((full_rows, k), dtype=a.dtype, device="cuda")
            gemm = slowest(timed_us(torch, lambda: torch.matmul(a_full, b), dist.barrier))
            if op == "ag_gemm":
                def fn():
                    return torch.ops.symm_mem.fused_all_gather_matmul(a, [b], 0, group)
            else:
                def fn():
                    return torch.ops.symm_mem.fused_matmul_reduce_scatter(a, b, "sum", 0, group)
            try:
                t = slowest(timed_us(torch, fn, dist.barrier))
                err = None
            except Exception as exc:  # noqa: BLE001 - reported, the other shapes still run
                t, err = float("nan"), f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
            if rank == 0:
                name = "fused_all_gather_matmul" if op == "ag_gemm" else "fused_matmul_reduce_scatter"
                print(json_line("fused", op, None, world, CALLS * TRIALS, "us", t, f"torch_{name}", layer=layer,
                                tokens=tokens, m=full_rows, k=k, n=n, gemm_us=round(gemm, 2), backend=backend,
                                error=err), flush=True)
            del a, b, a_full
            dist.barrier()
    dist.destroy_process_group()


def run_job(args, job: str, ranks: int) -> List[dict]:
    env = dict(os.environ)
    env.setdefault("CUDA_MODULE_LOADING", "EAGER")
    if job == "torch":
        for key, v in NVSHMEM_ENV.items():
            env.setdefault(key, v)
        env.setdefault("NVSHMEM_SYMMETRIC_SIZE", str(4 << 30))
    return run_rank_mode_job("bench_fused", __file__, args.bin, job, ranks, args.timeout,
                             ["--tokens", args.tokens, "--layers", args.layers], env, args.dry_run)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bin", default=str(REPO / "build" / "bin"))
    p.add_argument("--ranks", default="8")
    p.add_argument("--tokens", default="1024,2048,4096,8192")
    p.add_argument("--layers", default="qkv,o,fc1,fc2")
    p.add_argument("--jobs", default="cco,torch,torch_cco")
    p.add_argument("--timeout", type=int, default=600)
    p.add_argument("--dry-run", action="store_true")
    p.add_argument("--rank-mode", choices=("cco", "torch", "torch_cco"))
    args = p.parse_args()
    tokens = [int(t) for t in args.tokens.split(",")]
    layers = args.layers.split(",")
    if args.rank_mode == "cco":
        rank_cco(layers, tokens)
        return 0
    if args.rank_mode in ("torch", "torch_cco"):
        rank_torch(layers, tokens, "NVSHMEM" if args.rank_mode == "torch" else "CCO")
        return 0
    for ranks in (int(r) for r in args.ranks.split(",")):
        for job in args.jobs.split(","):
            run_job(args, job, ranks)
    return 0


if __name__ == "__main__":
    sys.exit(main())
