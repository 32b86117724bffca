"""NCCL references for the multi-GPU benchmarks, through torch.distributed.

    ccorun -n N python3 bench/nccl_ref.py        (one process per GPU)

- all-gather bus bandwidth (busbw = algbw * (n-1)/n, as nccl-tests reports it)
  for 1 MiB .. 256 MiB per rank, against which LSA put bandwidth compares;
- AllReduce latency of fp32 buffers of 1 KiB .. 1 MiB, REPS calls captured in
  one CUDA graph and replayed, like bench/bench_allreduce.cu.

Ranks come from ccorun's environment (CCO_RANK, CCO_NRANKS, CCO_LOCAL_RANK);
the rendezvous is a TCP store on 127.0.0.1 (CCO_BENCH_NCCL_PORT, default
29531). Prints one JSON object per figure (rank 0).
"""
import json
import os
import time

import torch
import torch.distributed as dist

REPS = 20
ITERS = 50


def main() -> None:
    rank = int(os.environ["CCO_RANK"])
    world = int(os.environ["CCO_NRANKS"])
    local = int(os.environ.get("CCO_LOCAL_RANK", "0"))
    torch.cuda.set_device(local % torch.cuda.device_count())
    port = int(os.environ.get("CCO_BENCH_NCCL_PORT", "29531"))
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    dev = torch.device("cuda", torch.cuda.current_device())

    def report(obj: dict) -> None:
        if rank == 0:
            print(json.dumps(obj), flush=True)

    # All-gather bus bandwidth.
    size = 1 << 20
    while size <= 256 << 20:
        send = torch.ones(size // 4, dtype=torch.float32, device=dev)
        recv = torch.empty(world * (size // 4), dtype=torch.float32, device=dev)
        for _ in range(5):
            dist.all_gather_into_tensor(recv, send)
        torch.cuda.synchronize()
        iters = 20
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_gather_into_tensor(recv, send)
        torch.cuda.synchronize()
        secs = (time.perf_counter() - t0) / iters
        algbw = size * world / secs / 1e9
        report({"bench": "nccl_allgather", "ranks": world, "bytes_per_rank": size, "us": round(secs * 1e6, 2),
                "algbw_GBps": round(algbw, 2), "busbw_GBps": round(algbw * (world - 1) / world, 2)})
        size *= 4

    # AllReduce latency in a CUDA graph.
    size = 1024
    stream = torch.cuda.Stream()
    while size <= 1 << 20:
        buf = torch.full((size // 4,), float(rank + 1), dtype=torch.float32, device=dev)
        with torch.cuda.stream(stream):
            for _ in range(3):  # NCCL wants a warm communicator before capture
                dist.all_reduce(buf)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            for _ in range(REPS):
                dist.all_reduce(buf)
        graph.replay()
        torch.cuda.synchronize()
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(ITERS):
            graph.replay()
        torch.cuda.synchronize()
        us = (time.perf_counter() - t0) / (ITERS * REPS) * 1e6
        report({"bench": "nccl_allreduce_graph", "ranks": world, "bytes": size, "reps": REPS, "iters": ITERS,
                "us": round(us, 2)})
        del graph
        size *= 4
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
