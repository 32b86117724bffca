"""What each rank of a bench_coll.py job does (bench_coll.py starts the jobs under ccorun):

    coll_jobs.py --impl cco --algo auto --op allreduce,allgather --sizes 1024,4096 [--bf16-sizes 4096]
                 [-n TRIALS] [-w WARMUP] [--reps N]
    coll_jobs.py --impl torch [--torch-backend NVSHMEM|CUDA] --op allreduce,reducescatter --sizes ...
    coll_jobs.py --impl nccl --op allreduce,allgather,reducescatter,alltoall --sizes ...

torch's symmetric-memory kernels run on its "NVSHMEM" backend (several ranks may share a GPU) or its
"CUDA" one (a GPU per rank); NCCL runs through torch.distributed (a GPU per rank: NCCL refuses
several ranks on one GPU), its calls captured in CUDA graphs like the others.

Per collective, type and size: the inputs set so that the result is known, one call checked, then
REPS calls captured in a CUDA graph and timed (torch_timing.graph_us: warm-up replays, TRIALS timed
replays between host barriers, the median per call), the slowest rank's figure, and the result
checked again where the input survives the calls. Rank 0 prints two lines per measurement, "us" and
"GBps" (bus bandwidth), with "wrong" the elements that were not as expected on any rank (the job
then exits 1). Needs torch (and, for --impl cco, the cco package).
"""
import argparse
import os
import struct
import sys
import traceback
from typing import Any, Callable, Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "python"))
from perf_common import count, int_arg, json_line  # noqa: E402
from torch_timing import bus_factor, graph_us  # noqa: E402

TRIALS, WARMUP = 7, 2
CCO_NAMES = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
             "alltoall": "all_to_all"}


def reps_for(nbytes: int, given: Optional[int]) -> int:
    return given or (100 if nbytes <= 1 << 20 else 20)


def counts(op: str, nbytes: int, ranks: int, itemsize: int) -> Tuple[int, int, int]:
    """(input elements, output elements, bytes as reported) of `op` at size `nbytes` (nccl-tests':
    the all-gather's output, the reduce-scatter's input, the all-to-all's buffer); 0 elements when
    the size is too small for one element per rank."""
    if op == "allreduce":
        n = nbytes // itemsize
        return n, n, n * itemsize
    per = nbytes // (ranks * itemsize)
    total = ranks * per
    return {"allgather": (per, total, total * itemsize), "reducescatter": (total, per, total * itemsize),
            "alltoall": (total, total, total * itemsize)}[op]


class Data:
    """Inputs whose results are exact small integers in every type, and the expected outputs."""

    def __init__(self, torch: Any, op: str, rank: int, ranks: int, n_in: int, n_out: int) -> None:
        self.torch, self.op, self.rank, self.ranks = torch, op, rank, ranks
        self.n_in, self.n_out = n_in, n_out
        self.per = n_out if op == "reducescatter" else n_in // ranks if op == "alltoall" else n_in

    def blocks(self, values: List[int], per: int) -> Any:
        torch = self.torch
        return torch.tensor(values, device="cuda", dtype=torch.float32).repeat_interleave(per)

    def input(self) -> Any:
        r, n = self.rank, self.ranks
        if self.op == "reducescatter":  # block b of rank r: r + b + 1
            return self.blocks([r + b + 1 for b in range(n)], self.per)
        if self.op == "alltoall":  # block b of rank r: r * n + b
            return self.blocks([r * n + b for b in range(n)], self.per)
        return self.torch.full((self.n_in,), float(r + 1), device="cuda")

    def want(self) -> Any:
        r, n = self.rank, self.ranks
        total = n * (n + 1) // 2
        if self.op == "allreduce":
            return self.torch.full((self.n_out,), float(total), device="cuda")
        if self.op == "allgather":
            return self.blocks([p + 1 for p in range(n)], self.n_in)
        if self.op == "reducescatter":  # sum over ranks p of p + r + 1
            return self.torch.full((self.n_out,), float(total + n * r), device="cuda")
        return self.blocks([p * n + r for p in range(n)], self.per)  # all-to-all: block r of rank p

    def wrong(self, got: Any) -> int:
        return int((got.float() != self.want()).sum())


class Rank:
    """The parts both implementations share: sizes, types, timing, the lines."""

    def __init__(self, torch: Any, args: argparse.Namespace, rank: int, ranks: int,
                 barrier: Callable[[], None], gather: Callable[[float], List[float]]) -> None:
        self.torch, self.args, self.rank, self.ranks = torch, args, rank, ranks
        self.barrier, self.gather = barrier, gather
        self.trials, self.warmup = count(args.iters, TRIALS), count(args.warmup, WARMUP)
        self.failed = 0

    def cases(self) -> List[Tuple[str, str, Any, int]]:
        """(op, dtype name, torch dtype, size) in the order measured."""
        torch = self.torch
        out = []
        for op in self.args.op:
            out += [(op, "fp32", torch.float32, s) for s in self.args.sizes]
            if op == "allreduce":
                out += [(op, "bf16", torch.bfloat16, s) for s in self.args.bf16_sizes]
        return out

    def measure(self, fn: Callable[[], Any], reps: int) -> float:
        return max(self.gather(graph_us(self.torch, fn, reps, self.trials, self.warmup, self.barrier)))

    def checked_time(self, data: "Data", x: Any, fn: Callable[[], Any], result: Any, keeps_input: bool,
                     nbytes: int) -> Tuple[float, int, int]:
        """(us per call, calls per graph, elements wrong on any rank) of `fn`: one call checked
        (`result` preset to -1 where it is not the input), then the graph timed and, where the call
        keeps its input, the replays' result checked too. A call that overwrites its input gets
        zeros for the replays: repeated sums would grow to infinity, sums of zeros stay zeros."""
        torch = self.torch
        x.copy_(data.input())
        if result is not x:
            result.fill_(-1)
        torch.cuda.synchronize()
        self.barrier()
        fn()
        torch.cuda.synchronize()
        wrong = data.wrong(result)
        if not keeps_input:
            x.zero_()
        reps = reps_for(nbytes, self.args.reps)
        us = self.measure(fn, reps)
        if keeps_input:
            wrong += data.wrong(result)
        return us, reps, int(sum(self.gather(float(wrong))))

    def emit(self, op: str, nbytes: int, reps: int, us: float, wrong: int, dtype: str, ref: Optional[str],
             **extra: Any) -> None:
        if wrong:
            self.failed += 1
        if self.rank != 0:
            return
        iters = reps * self.trials
        common = dict(dtype=dtype, reps=reps, trials=self.trials, wrong=wrong, **extra)
        print(json_line("coll", op, nbytes, self.ranks, iters, "us", us, ref, **common), flush=True)
        gbps = nbytes / (us * 1e-6) / 1e9 * bus_factor(op, self.ranks) if us > 0 else None
        print(json_line("coll", op, nbytes, self.ranks, iters, "GBps", gbps, ref, bw="bus", **common), flush=True)

    def note(self, text: str) -> None:
        if self.rank == 0:
            print(f"coll_jobs: {text}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- cco


def run_cco(args: argparse.Namespace) -> int:
    import torch

    from cco.launch import init_communicator

    with init_communicator() as comm:
        torch.cuda.set_device(comm.cuda_device)
        n = comm.size

        def gather(value: float) -> List[float]:
            return [struct.unpack("<d", b)[0] for b in comm.allgather(struct.pack("<d", value))]

        r = Rank(torch, args, comm.rank, n, comm.barrier, gather)
        largest = max(args.sizes + args.bf16_sizes)
        half = (largest + 4095) // 4096 * 4096
        win = comm.register_window_alloc(2 * half)  # inputs at 0, outputs at `half`
        for op, dtype_name, dtype, size in r.cases():
            n_in, n_out, nbytes = counts(op, size, n, torch.empty((), dtype=dtype).element_size())
            if n_in == 0:
                r.note(f"{op} {size} B: less than one element per rank, left out")
                continue
            x, y = win.torch(dtype, (n_in,), 0), win.torch(dtype, (n_out,), half)
            call = getattr(comm, CCO_NAMES[op])
            fn = (lambda: call(x, out=y)) if op == "allreduce" else (lambda: call(x, y))
            data = Data(torch, op, comm.rank, n, n_in, n_out)
            us, reps, wrong = r.checked_time(data, x, fn, y, True, nbytes)
            try:
                used = comm.collective_algorithm(CCO_NAMES[op], nbytes)
            except Exception as exc:  # noqa: BLE001 - a figure without its label is still a figure
                used = f"unknown ({exc})"
            r.emit(op, nbytes, reps, us, wrong, dtype_name, None, algo=args.algo, variant=args.algo,
                   algo_used=used)
        comm.barrier()
        win.deregister()
    return 1 if r.failed else 0


# ---------------------------------------------------------------- torch's kernels


def torch_op(torch: Any, name: str) -> Any:
    """torch.ops.symm_mem.<name>, or None where this torch lacks it."""
    try:
        return getattr(torch.ops.symm_mem, name)
    except (AttributeError, RuntimeError):
        return None


def reference_calls(torch: Any, op: str, x: Any, y: Any, group: str) -> Dict[str, Tuple[Callable[[], Any], Any, bool]]:
    """variant -> (call, where its result lands, whether the call keeps its input)."""
    out: Dict[str, Tuple[Callable[[], Any], Any, bool]] = {}
    if op == "allreduce":
        one = torch_op(torch, "one_shot_all_reduce_out")
        if one is not None:
            out["one_shot"] = (lambda: one(x, "sum", group, y), y, True)
        two = torch_op(torch, "two_shot_all_reduce_out")
        if two is not None:  # it also overwrites its input
            out["two_shot"] = (lambda: two(x, "sum", group, y), y, False)
        else:
            two_in_place = torch_op(torch, "two_shot_all_reduce_")
            if two_in_place is not None:
                out["two_shot"] = (lambda: two_in_place(x, "sum", group), x, False)
    elif op == "reducescatter":
        rs = torch_op(torch, "reduce_scatter_out")
        if rs is not None:  # it also overwrites its input
            out["reduce_scatter_out"] = (lambda: rs(x, group, False, y), y, False)
    return out


REF_NAMES = {"NVSHMEM": "torch_nvshmem", "CUDA": "torch_cuda"}


def run_torch(args: argparse.Namespace) -> int:
    import torch
    import torch.distributed as dist
    import torch.distributed._symmetric_memory as symm_mem

    rank, n = int(os.environ["CCO_RANK"]), int(os.environ["CCO_NRANKS"])
    torch.cuda.set_device(int(os.environ.get("CCO_LOCAL_RANK", "0")) % torch.cuda.device_count())
    dist.init_process_group("gloo", init_method=f"file://{os.environ['CCO_TORCH_STORE']}", rank=rank,
                            world_size=n)
    symm_mem.set_backend(args.torch_backend)
    ref_name = REF_NAMES[args.torch_backend]
    group = dist.group.WORLD.group_name

    def gather(value: float) -> List[float]:
        values: List[float] = [0.0] * n
        dist.all_gather_object(values, value)
        return values

    r = Rank(torch, args, rank, n, dist.barrier, gather)
    device = torch.device("cuda", torch.cuda.current_device())
    for op, dtype_name, dtype, size in r.cases():
        n_in, n_out, nbytes = counts(op, size, n, torch.empty((), dtype=dtype).element_size())
        if n_in == 0:
            continue
        x = symm_mem.empty(n_in, dtype=dtype, device=device)
        symm_mem.rendezvous(x, group)
        y = torch.empty(n_out, dtype=dtype, device=device)
        data = Data(torch, op, rank, n, n_in, n_out)
        for variant, (fn, result, keeps_input) in reference_calls(torch, op, x, y, group).items():
            try:
                us, reps, wrong = r.checked_time(data, x, fn, result, keeps_input, nbytes)
            except Exception:  # noqa: BLE001 - torch refuses some sizes; the others still count
                r.note(f"torch {variant} {op} {size} B {dtype_name}: {traceback.format_exc(limit=3)}")
                continue
            r.emit(op, nbytes, reps, us, wrong, dtype_name, ref_name, variant=variant)
        del x, y
        torch.cuda.synchronize()
    dist.barrier()
    dist.destroy_process_group()
    return 1 if r.failed else 0


# ---------------------------------------------------------------- NCCL


def nccl_call(dist: Any, op: str, x: Any, y: Any) -> Tuple[Callable[[], Any], Any, bool]:
    """(call, where its result lands, whether the call keeps its input): NCCL's collective for `op`
    through torch.distributed, the all-reduce in place (as NCCL users call it)."""
    if op == "allreduce":
        return (lambda: dist.all_reduce(x)), x, False
    if op == "allgather":
        return (lambda: dist.all_gather_into_tensor(y, x)), y, True
    if op == "reducescatter":
        return (lambda: dist.reduce_scatter_tensor(y, x)), y, True
    return (lambda: dist.all_to_all_single(y, x)), y, True


def run_nccl(args: argparse.Namespace) -> int:
    import torch
    import torch.distributed as dist

    rank, n = int(os.environ["CCO_RANK"]), int(os.environ["CCO_NRANKS"])
    if torch.cuda.device_count() < n:
        print(f"coll_jobs: NCCL needs a GPU per rank: {n} ranks, {torch.cuda.device_count()} GPUs here",
              file=sys.stderr)
        return 1
    device = torch.device("cuda", int(os.environ.get("CCO_LOCAL_RANK", "0")))
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", init_method=f"file://{os.environ['CCO_TORCH_STORE']}", rank=rank,
                            world_size=n, device_id=device)
    host = dist.new_group(backend="gloo")  # barriers and gathers between replays, off the GPU

    def gather(value: float) -> List[float]:
        values: List[float] = [0.0] * n
        dist.all_gather_object(values, value, group=host)
        return values

    r = Rank(torch, args, rank, n, lambda: dist.barrier(group=host), gather)
    for op, dtype_name, dtype, size in r.cases():
        n_in, n_out, nbytes = counts(op, size, n, torch.empty((), dtype=dtype).element_size())
        if n_in == 0:
            continue
        x = torch.empty(n_in, dtype=dtype, device=device)
        y = torch.empty(n_out, dtype=dtype, device=device)
        data = Data(torch, op, rank, n, n_in, n_out)
        fn, result, keeps_input = nccl_call(dist, op, x, y)
        try:
            us, reps, wrong = r.checked_time(data, x, fn, result, keeps_input, nbytes)
        except Exception:  # noqa: BLE001 - reported, the other sizes still count
            r.note(f"nccl {op} {size} B {dtype_name}: {traceback.format_exc(limit=3)}")
            continue
        r.emit(op, nbytes, reps, us, wrong, dtype_name, "nccl", variant="nccl")
        del x, y
        torch.cuda.synchronize()
    dist.barrier(group=host)
    dist.destroy_process_group()
    return 1 if r.failed else 0


def sizes_arg(text: str) -> List[int]:
    parse = int_arg(4, 1 << 40)
    return [parse(item) for item in text.split(",") if item]


def main() -> int:
    os.environ.setdefault("CUDA_MODULE_LOADING", "EAGER")  # no lazy load while a kernel waits for a peer
    ap = argparse.ArgumentParser(description="one rank of a bench_coll.py job")
    ap.add_argument("--impl", choices=("cco", "torch", "nccl"), required=True)
    ap.add_argument("--torch-backend", choices=tuple(REF_NAMES), default="NVSHMEM",
                    help="torch's symmetric-memory backend for --impl torch")
    ap.add_argument("--algo", default="auto")
    ap.add_argument("--op", required=True, type=lambda t: t.split(","))
    ap.add_argument("--sizes", required=True, type=sizes_arg)
    ap.add_argument("--bf16-sizes", default=[], type=sizes_arg)
    ap.add_argument("-n", "--iters", type=int_arg(1, 10**6))
    ap.add_argument("-w", "--warmup", type=int_arg(0, 10**6))
    ap.add_argument("--reps", type=int_arg(1, 100000))
    args = ap.parse_args()
    for op in args.op:
        if op not in CCO_NAMES:
            ap.error(f"unknown collective '{op}'")
    return {"cco": run_cco, "torch": run_torch, "nccl": run_nccl}[args.impl](args)


if __name__ == "__main__":
    sys.exit(main())
