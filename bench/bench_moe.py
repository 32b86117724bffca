#!/usr/bin/env python3
"""MoE dispatch and combine (cco.ops.EpDispatchCombineOp) against torch's own MoE token exchange on
its "NVSHMEM" symmetric-memory backend (torch.ops.symm_mem.all_to_all_vdev_2d for dispatch,
all_to_all_vdev_2d_offset for combine), same tokens and routing, one JSON line per measurement:

    python3 bench/bench_moe.py --bin build/bin [--ranks 2[,4,8]] [--tokens 4096,128] [--jobs cco,torch]
        [--parts 0[,32,...]] [--hosts N] [--timeout SEC] [--dry-run]

The DeepSeek-V3 shape: hidden 7168, top-8 of 256 experts spread over the ranks, each token's 8
experts distinct, chosen at random (seeded per rank); 4,096 tokens per rank in throughput mode, 128
in low-latency mode. cco runs fp8 dispatch (e4m3, 1x128 scales) and bf16 combine, and bf16 dispatch
too, since torch's exchange moves bf16 (compare bf16 against bf16). torch's exchange sends one row
per (token, expert) sorted by expert, cco one row per (token, rank) deduplicated: the comparison is
of time, the bytes are each one's own.

Timing, every rank at once, the slowest rank's figure: dispatch and combine apart with CUDA events
around eager calls (median of 20 after 5 warm-up rounds). Each round starts in step on the GPU: a
spin kernel (torch.cuda._sleep) holds the stream while the host enqueues a device-side barrier (cco:
barrier_on_stream; torch: its symmetric memory's barrier), the first event and the two calls, so
the events time the GPU work of the calls from the moment every rank is ready, not the host's
launch of the first call nor another rank's late start (the memcpy floor is timed back to back
too); the host time each eager call takes to return is reported apart (host_us: the caller's cost
of a launch). cco's pair also replayed in a CUDA graph (per pair). --parts runs cco's op with
that many blocks per call (a list: one op each; 0: the mode's default). The floor: the bytes this rank's dispatch writes to
its peers at the device-to-device cudaMemcpy speed measured in the same job with every rank copying
at once (the ranks share one GPU); goal >= 0.8 of it in throughput mode. SMs used: cco's blocks per
call (goal <= 24). After each rank count, ratio lines: cco bf16 (dispatch + combine) / torch's.
--hosts N spreads the ranks over N virtual hosts (the op's path across hosts: GDA between them, over
whatever network engine the machine has); cco only, and each line says hosts.
"""
import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Dict, List

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
from perf_common import NVSHMEM_ENV, json_line, run_rank_mode_job, slowest_over  # noqa: E402

HIDDEN, TOPK, EXPERTS, SCALE_BLOCK = 7168, 8, 256, 128
ROUNDS, WARMUP = 20, 5
# The spin that holds the stream while the host enqueues a round: ~150 us at 2 GHz, longer than
# the host takes to launch the barrier and both calls (host_us: 20-40 us a call).
LEAD_CYCLES = 300_000


def routing(torch, rank: int, tokens: int):
    g = torch.Generator().manual_seed(1 + rank)
    ids = torch.rand((tokens, EXPERTS), generator=g).argsort(dim=1)[:, :TOPK].to(torch.int32)
    x = torch.randn((tokens, HIDDEN), generator=g)
    w = torch.rand((tokens, TOPK), generator=g)
    return x, w, ids


def timed_pairs(torch, first, second, barrier, device_barrier):
    """Median GPU times (us) of `first` and `second` called in turn, CUDA events around each, and
    the median host time (us) each call takes to return (what a launch costs the caller: the
    arguments' checks, the views, the launch; the GPU work runs after). Each round starts with
    every rank in step on the GPU (`device_barrier`, enqueued behind a spin kernel that hides the
    host's enqueueing of the round: module doc)."""
    for _ in range(WARMUP):
        first()
        second()
    torch.cuda.synchronize()
    a, b, ha, hb = [], [], [], []
    for _ in range(ROUNDS):
        barrier()
        e = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
        torch.cuda._sleep(LEAD_CYCLES)
        device_barrier()
        e[0].record()
        t0 = time.perf_counter()
        first()
        t1 = time.perf_counter()
        e[1].record()
        t2 = time.perf_counter()
        second()
        t3 = time.perf_counter()
        e[2].record()
        e[2].synchronize()
        a.append(e[0].elapsed_time(e[1]) * 1e3)
        b.append(e[1].elapsed_time(e[2]) * 1e3)
        ha.append((t1 - t0) * 1e6)
        hb.append((t3 - t2) * 1e6)
    return statistics.median(a), statistics.median(b), statistics.median(ha), statistics.median(hb)


def memcpy_gbps(torch, barrier) -> float:
    src = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    torch.cuda.synchronize()
    barrier()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(10):
        dst.copy_(src)
    stop.record()
    stop.synchronize()
    return 10 * src.numel() / (start.elapsed_time(stop) * 1e-3) / 1e9


def rank_cco(tokens_list: List[int], parts_list: List[int]) -> None:
    import torch

    sys.path.insert(0, str(REPO / "python"))
    from cco.launch import finalize, init_communicator
    from cco.ops import EpDispatchCombineConfig, EpDispatchCombineOp

    with init_communicator(per_rank_vmm=8 << 30) as comm:
        torch.cuda.set_device(comm.cuda_device)
        rank, world = comm.rank, comm.size
        bw = memcpy_gbps(torch, comm.barrier)

        def slowest(v: float) -> float:
            return slowest_over(comm.allgather, v)

        bw_all = min(float(b.decode()) for b in comm.allgather(f"{bw:.6f}".encode().ljust(32)))
        for tokens in tokens_list:
            mode = "low_latency" if tokens <= 128 else "throughput"
            x, w, ids = routing(torch, rank, tokens)
            owners = (ids // (EXPERTS // world)).tolist()
            dests = sum(len(set(r)) for r in owners)
            for dtype, want_parts in [(d, p) for d in ("fp8", "bf16") for p in parts_list]:
                cfg = EpDispatchCombineConfig(hidden_dim=HIDDEN, max_num_inp_token_per_rank=tokens,
                                              num_experts_per_rank=EXPERTS // world, num_experts_per_token=TOPK,
                                              data_type=dtype, mode=mode, parts=want_parts)
                op = EpDispatchCombineOp(cfg, comm)
                tok = (x.to(torch.float8_e4m3fn) if dtype == "fp8" else x.to(torch.bfloat16)).cuda()
                scales = torch.ones((tokens, HIDDEN // SCALE_BLOCK), device="cuda") if dtype == "fp8" else None
                wd, idd = w.cuda(), ids.cuda()
                view = op.combine_in_view()
                out = torch.empty((tokens, HIDDEN), dtype=torch.bfloat16, device="cuda")
                out_w = torch.empty((tokens, TOPK), device="cuda")

                def dispatch():
                    op.dispatch(tok, wd, scales, idd)

                def combine():
                    op.combine(view, wd, out=out, out_weights=out_w)

                def in_step():
                    comm.barrier_on_stream(torch.cuda.current_stream())

                d_us, c_us, d_host, c_host = timed_pairs(torch, dispatch, combine, comm.barrier, in_step)
                d_us, c_us, d_host, c_host = slowest(d_us), slowest(c_us), slowest(d_host), slowest(c_host)
                row = HIDDEN * (1 if dtype == "fp8" else 2) + (HIDDEN // SCALE_BLOCK * 4 if dtype == "fp8" else 0)
                sent = dests * (row + TOPK * 8 + 8)
                back = dests * HIDDEN * 2
                parts = op.stats()["parts"]
                floor_d, floor_c = sent / (bw_all * 1e3), back / (bw_all * 1e3)
                # The pair in a graph: per pair.
                graph = torch.cuda.CUDAGraph()
                torch.cuda.synchronize()
                comm.barrier()
                reps = 5 if tokens > 128 else 20
                with torch.cuda.graph(graph):
                    for _ in range(reps):
                        dispatch()
                        combine()
                times = []
                for _ in range(5):
                    comm.barrier()
                    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    s.record()
                    graph.replay()
                    e.record()
                    e.synchronize()
                    times.append(s.elapsed_time(e) * 1e3 / reps)
                op.check()
                pair_us = slowest(statistics.median(times))
                del graph
                if rank == 0:
                    extra = dict(tokens=tokens, dtype=dtype, mode=mode, parts=parts, parts_asked=want_parts,
                                 memcpy_gbps=round(bw_all, 1),
                                 hosts=comm.node_count)
                    print(json_line("moe", "dispatch", sent, world, ROUNDS, "us", d_us, None,
                                    floor_us=round(floor_d, 2), of_floor=round(floor_d / d_us, 3),
                                    host_us=round(d_host, 1), **extra))
                    print(json_line("moe", "combine", back, world, ROUNDS, "us", c_us, None,
                                    floor_us=round(floor_c, 2), of_floor=round(floor_c / c_us, 3),
                                    host_us=round(c_host, 1), **extra))
                    print(json_line("moe", "dispatch_combine_graph", sent + back, world, 5 * reps, "us", pair_us,
                                    None, **extra), flush=True)
                op.release()
                comm.barrier()
    finalize()


def rank_torch(tokens_list: List[int]) -> None:
    import torch
    import torch.distributed as dist
    import torch.distributed._symmetric_memory as symm_mem

    rank, world = int(os.environ["CCO_RANK"]), int(os.environ["CCO_NRANKS"])
    torch.cuda.set_device(int(os.environ.get("CCO_LOCAL_RANK", "0")) % torch.cuda.device_count())
    dist.init_process_group("gloo", init_method=f"file://{os.environ['CCO_TORCH_STORE']}", rank=rank,
                            world_size=world)
    symm_mem.set_backend("NVSHMEM")
    group = dist.group.WORLD.group_name
    dev = torch.device("cuda", torch.cuda.current_device())

    def slowest(v: float) -> float:
        values: List[float] = [0.0] * world
        dist.all_gather_object(values, v)
        return max(values)

    def symm(shape, dtype):
        t = symm_mem.empty(shape, dtype=dtype, device=dev)
        symm_mem.rendezvous(t, group)
        return t

    for tokens in tokens_list:
        x, w, ids = routing(torch, rank, tokens)
        flat = ids.flatten().long()
        # all_to_all_vdev_2d takes at most 16 splits per rank (its NUM_TILES): with more experts per
        # rank (DeepSeek's 256 over 2-8 ranks), neighbouring experts of a rank share a split. The rows
        # and bytes are the same; only the sort is coarser.
        per_rank = EXPERTS // world
        groups = min(per_rank, 16)
        split = (flat // per_rank) * groups + (flat % per_rank) // (per_rank // groups)
        order = torch.argsort(split, stable=True)  # rows by split: what all_to_all_vdev_2d takes
        rows = tokens * TOPK
        inp = symm((rows, HIDDEN), torch.bfloat16)
        inp.copy_(x.to(torch.bfloat16)[order // TOPK].to(dev))
        splits = symm((world * groups,), torch.int64)
        splits.copy_(torch.bincount(split, minlength=world * groups).to(dev))
        out = symm((world * rows, HIDDEN), torch.bfloat16)
        out_so = symm((2, world * groups), torch.int64)
        back = symm((rows, HIDDEN), torch.bfloat16)
        back_so = symm((2, world * groups), torch.int64)
        # A device-side barrier for the rounds' start: the symmetric memory's own, else a one-shot
        # all-reduce of one element (a barrier in its kernel).
        token = symm((1,), torch.float32)
        handle = symm_mem.rendezvous(token, group)

        try:
            handle.barrier(channel=0)
            torch.cuda.synchronize()
            own_barrier = True
        except (RuntimeError, NotImplementedError, AttributeError):
            own_barrier = False
        if rank == 0:
            print(f"torch's rounds start after {'its barrier' if own_barrier else 'a one-shot all-reduce'}",
                  file=sys.stderr, flush=True)

        def in_step():
            if own_barrier:
                handle.barrier(channel=0)
            else:
                torch.ops.symm_mem.one_shot_all_reduce(token, "sum", group)

        dist.barrier()

        def dispatch():
            torch.ops.symm_mem.all_to_all_vdev_2d(inp, out, splits, out_so, group, major_align=1)

        def combine():
            torch.ops.symm_mem.all_to_all_vdev_2d_offset(out, back, out_so, back_so, group)

        d_us, c_us, d_host, c_host = timed_pairs(torch, dispatch, combine, dist.barrier, in_step)
        torch.cuda.synchronize()
        correct = bool(torch.equal(back, inp))  # the rows come back where they were
        d_us, c_us, d_host, c_host = slowest(d_us), slowest(c_us), slowest(d_host), slowest(c_host)
        if rank == 0:
            extra = dict(tokens=tokens, dtype="bf16", correct=correct)
            print(json_line("moe", "dispatch", rows * HIDDEN * 2, world, ROUNDS, "us", d_us, "torch_a2a_vdev_2d",
                            host_us=round(d_host, 1), **extra))
            print(json_line("moe", "combine", rows * HIDDEN * 2, world, ROUNDS, "us", c_us, "torch_a2a_vdev_2d",
                            host_us=round(c_host, 1), **extra), flush=True)
        del inp, out, back
        dist.barrier()
    dist.destroy_process_group()


def run_job(args, job: str, ranks: int) -> List[dict]:
    env = dict(os.environ)
    if job == "torch":
        for k, v in NVSHMEM_ENV.items():
            env.setdefault(k, v)
        # NVSHMEM's heap holds torch's input, output (ranks x input) and combine output, plus slack.
        rows = max(int(t) for t in args.tokens.split(",")) * TOPK
        env.setdefault("NVSHMEM_SYMMETRIC_SIZE", str((2 + ranks) * rows * HIDDEN * 2 + (1 << 30)))
    return run_rank_mode_job("bench_moe", __file__, args.bin, job, ranks, args.timeout,
                             ["--tokens", args.tokens, "--parts", args.parts], env, args.dry_run, hosts=args.hosts)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bin", default=str(REPO / "build" / "bin"))
    p.add_argument("--ranks", default="2,4")
    p.add_argument("--tokens", default="4096,128")
    p.add_argument("--jobs", default="cco,torch")
    p.add_argument("--parts", default="0")
    p.add_argument("--hosts", type=int, default=1)
    p.add_argument("--timeout", type=int, default=300)
    p.add_argument("--dry-run", action="store_true")
    p.add_argument("--rank-mode", choices=("cco", "torch"))
    args = p.parse_args()
    tokens = [int(t) for t in args.tokens.split(",")]
    if args.hosts > 1 and "torch" in args.jobs.split(","):
        p.error("--hosts: torch's exchange runs on one host only; pass --jobs cco")
    if args.rank_mode == "cco":
        rank_cco(tokens, [int(x) for x in args.parts.split(",")])
        return 0
    if args.rank_mode == "torch":
        rank_torch(tokens)
        return 0
    first_parts = int(args.parts.split(",")[0])
    for ranks in (int(r) for r in args.ranks.split(",")):
        got: Dict[str, List[dict]] = {job: run_job(args, job, ranks) for job in args.jobs.split(",")}
        pick = {}
        for r in got.get("cco", []) + got.get("torch", []):
            if r["op"] in ("dispatch", "combine") and r.get("dtype") == "bf16" and \
                    r.get("parts_asked", first_parts) == first_parts:
                pick.setdefault((r["ref"], r["tokens"]), 0.0)
                pick[(r["ref"], r["tokens"])] += r["value"]
        for t in tokens:
            mine, ref = pick.get((None, t)), pick.get(("torch_a2a_vdev_2d", t))
            if mine and ref:
                print(json_line("moe", "dispatch_combine_ratio", None, ranks, 1, "ratio_us", mine / ref,
                                "torch_a2a_vdev_2d", tokens=t, dtype="bf16", goal=0.7), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
