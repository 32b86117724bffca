"""Timing inside CUDA graphs, shared by the torch benchmarks (bench_coll.py, bench_torch.py).

A collective launched from Python costs 10-25 us of host time per call, more than the GPU needs
for a small one, so eager timings measure the host. In a graph the GPU runs the calls back to
back: `graph_us` captures `reps` calls, replays the graph `warmup` times, then `trials` times, each
replay started after `barrier()` (the ranks begin together) and timed with CUDA events around it,
and returns the median time per call on this rank, in microseconds. The caller takes the slowest
rank's figure. torch is passed in, so importing this module needs no torch.
"""
import statistics
from typing import Any, Callable


def graph_us(torch: Any, fn: Callable[[], Any], reps: int, trials: int, warmup: int,
             barrier: Callable[[], None]) -> float:
    fn()  # once outside the capture: libraries set their state up on a first call
    torch.cuda.synchronize()
    barrier()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(reps):
            fn()
    torch.cuda.synchronize()
    for _ in range(warmup):
        barrier()
        graph.replay()
        torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(trials):
        barrier()
        start.record()
        graph.replay()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1e3 / reps)
    torch.cuda.synchronize()
    del graph
    return statistics.median(times)


def bus_factor(op: str, ranks: int) -> float:
    """nccl-tests' bus bandwidth factor: algorithm bandwidth (bytes / time) times this gives what
    each rank's links carry, comparable across rank counts."""
    if op == "allreduce":
        return 2 * (ranks - 1) / ranks
    if op in ("allgather", "reducescatter", "alltoall"):
        return (ranks - 1) / ranks
    return 1.0
