"""NCCL references for the multi-GPU benchmarks, through torch.distributed.

    ccorun -n N python3 bench/nccl_ref.py [-b ..] [-e ..] [-f ..] [-n ..] [-w ..] [--op allgather,allreduce]
                                                      (one process per GPU)

- allgather: all-gather bus bandwidth (busbw = algbw * (n-1)/n, as
  nccl-tests reports it) per rank's bytes, default 1 MiB .. 256 MiB x4, -n 20
  calls after -w 5; LSA put bandwidth compares against it;
- allreduce: AllReduce latency of fp32 buffers, default 1 KiB .. 1 MiB x4,
  --reps calls (20) captured in one CUDA graph and replayed -n times (50)
  after -w (1), like bench/bench_allreduce.cu.

Ranks come from ccorun's environment (CCO_RANK, CCO_NRANKS, CCO_LOCAL_RANK);
the rendezvous is a TCP store on 127.0.0.1 (--port, default
CCO_BENCH_NCCL_PORT or 29531). One JSON line per measurement (rank 0), with
ref "nccl" (docs/perf.md).
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perf_common import add_sweep_args, check_sweep_args, count, int_arg, json_line, sweep  # noqa: E402

OPS = ("allgather", "allreduce")


def parse_args(argv):
    ap = argparse.ArgumentParser(description="NCCL all-gather bandwidth and AllReduce latency (under ccorun)")
    add_sweep_args(ap)
    ap.add_argument("--op", default=",".join(OPS), help="measurements, comma-separated: " + ", ".join(OPS))
    ap.add_argument("--reps", type=int_arg(1, 10000), default=20, help="AllReduce calls per CUDA graph")
    ap.add_argument("--port", type=int_arg(1, 65535), default=os.environ.get("CCO_BENCH_NCCL_PORT", "29531"),
                    help="TCP store port on 127.0.0.1")
    args = ap.parse_args(argv)
    check_sweep_args(ap, args)
    args.op = args.op.split(",")
    for op in args.op:
        if op not in OPS:
            ap.error(f"--op: unknown measurement '{op}' (choose from {', '.join(OPS)})")
    return args


def main(argv) -> int:
    args = parse_args(argv)
    import torch  # after the arguments, so --help and bad input need no torch
    import torch.distributed as dist

    rank = int(os.environ["CCO_RANK"])
    world = int(os.environ["CCO_NRANKS"])
    local = int(os.environ.get("CCO_LOCAL_RANK", "0"))
    torch.cuda.set_device(local % torch.cuda.device_count())
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{args.port}", rank=rank, world_size=world)
    dev = torch.device("cuda", torch.cuda.current_device())

    def report(*fields, **extra) -> None:
        if rank == 0:
            print(json_line("nccl", *fields, ref="nccl", **extra), flush=True)

    if "allgather" in args.op:
        iters, warmup = count(args.iters, 20), count(args.warmup, 5)
        for size in sweep(args, 1 << 20, 256 << 20, 4):
            send = torch.ones(max(1, size // 4), dtype=torch.float32, device=dev)
            recv = torch.empty(world * send.numel(), dtype=torch.float32, device=dev)
            for _ in range(warmup):
                dist.all_gather_into_tensor(recv, send)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(iters):
                dist.all_gather_into_tensor(recv, send)
            torch.cuda.synchronize()
            secs = (time.perf_counter() - t0) / iters
            algbw = send.numel() * 4 * world / secs / 1e9
            report("allgather", send.numel() * 4, world, iters, "GBps", algbw * (world - 1) / world,
                   bw="busbw", algbw_GBps=round(algbw, 3), us=round(secs * 1e6, 3))

    if "allreduce" in args.op:
        iters, warmup = count(args.iters, 50), count(args.warmup, 1)
        stream = torch.cuda.Stream()
        for size in sweep(args, 1024, 1 << 20, 4):
            buf = torch.full((max(1, size // 4),), float(rank + 1), dtype=torch.float32, device=dev)
            with torch.cuda.stream(stream):
                for _ in range(3):  # NCCL wants a warm communicator before capture
                    dist.all_reduce(buf)
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, stream=stream):
                for _ in range(args.reps):
                    dist.all_reduce(buf)
            for _ in range(warmup):
                graph.replay()
            torch.cuda.synchronize()
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                graph.replay()
            torch.cuda.synchronize()
            us = (time.perf_counter() - t0) / (iters * args.reps) * 1e6
            report("allreduce", buf.numel() * 4, world, iters, "us", us, dtype="fp32", reps=args.reps)
            del graph
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
