#!/usr/bin/env python3
"""cco's collectives against torch's own symmetric-memory kernels, every figure timed inside CUDA
graphs, in one run (bench/cco_perf.py coll runs it; one GPU under MPS, or a GPU per rank):

    python3 bench/bench_coll.py --bin build/bin --ranks 2,4,8 [-b 1K] [-e 256M] [-f 4] [-n 7] [-w 2]
        [--op allreduce,allgather,reducescatter,alltoall] [--algos auto,oneshot,ll,twoshot]
        [--refs torch_nvshmem,torch_cuda,nccl] [--reps N] [--no-ref] [--timeout SEC] [--dry-run]

For each rank count, jobs of their own under ccorun (CCO_ALGO is read once per process):

- cco, algorithm auto: all-reduce over the sweep (float32) and at 4 KiB, 256 KiB and 16 MiB
  (bfloat16), all-gather, reduce-scatter and all-to-all over the sweep;
- cco with CCO_ALGO=oneshot, ll, twoshot: the all-reduces (ll up to the 64 KiB it takes);
- the references (--refs, default torch_nvshmem): torch's kernels on its "NVSHMEM"
  symmetric-memory backend (torch_nvshmem: gloo process group, NVSHMEM's settings for MPS; ranks
  may share a GPU) or on its "CUDA" backend (torch_cuda: a GPU per rank): one_shot_all_reduce_out
  and two_shot_all_reduce_out beside the all-reduces, reduce_scatter_out beside the
  reduce-scatters (torch has no such kernel for all-gather or all-to-all on those backends); and
  NCCL through torch.distributed (nccl: every collective; a GPU per rank).

bench/coll_jobs.py is what each rank runs: per size, REPS calls in one CUDA graph (100 up to
1 MiB, 20 above; --reps), a warm-up replay, -n timed replays, the median per call, the slowest
rank; results checked before and after. Sizes are nccl-tests': the all-reduce's buffer, the
all-gather's output, the reduce-scatter's input, the all-to-all's buffer. Lines (bench "coll",
docs/perf.md): per measurement "us" and "GBps" (bus bandwidth), cco's with "algo" (ref null),
the references' with their ref name and "variant"; then, per rank count and reference, the
ratios of cco's algorithm auto to it ("vs" names it), with the goals:
  torch_nvshmem  ratio_us: all-reduce time / the better of one-shot and two-shot, <= 0.9 at 2 ranks
                 and <= 0.7 at 8 ranks from 1 KiB to 1 MiB; reduce-scatter / reduce_scatter_out
                 (no goal). ratio_GBps: all-reduce bus bandwidth / two-shot's, >= 1.0 from 16 MiB
  torch_cuda     ratio_us: the same, <= 0.8 at any rank count from 1 KiB to 1 MiB
  nccl           ratio_us: every collective; all-reduce <= 0.6 from 1 KiB to 1 MiB. ratio_GBps:
                 all-reduce >= 1.0 from 16 MiB
Exit status: 0, 1 when a cco job failed or computed a wrong result (a reference that fails is
reported and leaves its ratios out), 2 for bad arguments, 77 without a GPU driver.
"""
import argparse
import ctypes
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from perf_common import (COMMON_KEYS, NVSHMEM_ENV, add_sweep_args, check_sweep_args, int_arg, json_line,  # noqa: E402
                         sweep)

OPS = ("allreduce", "allgather", "reducescatter", "alltoall")
ALGOS = ("auto", "oneshot", "ll", "twoshot")
ALGO_MAX_BYTES = {"ll": 64 << 10}  # CCO_COLL_LL_MAX_BYTES: beyond it CCO_ALGO=ll falls back to auto
BF16_SIZES = (4 << 10, 256 << 10, 16 << 20)
REFS = ("torch_nvshmem", "torch_cuda", "nccl")
# Per reference: its variants beside each collective (time: the best of them), and the one
# whose bus bandwidth cco's is compared with.
REF_VARIANTS = {"torch": {"allreduce": ("one_shot", "two_shot"), "reducescatter": ("reduce_scatter_out",)},
                "nccl": {op: ("nccl",) for op in OPS}}
REF_BW_VARIANT = {"torch": {"allreduce": "two_shot", "reducescatter": "reduce_scatter_out"},
                  "nccl": {op: "nccl" for op in OPS}}
DEFAULT_SWEEP = (1 << 10, 256 << 20, 4)
LATENCY_GOALS = {2: 0.9, 8: 0.7}  # all-reduce time / torch's better one (NVSHMEM), from LATENCY_RANGE
TORCH_CUDA_LATENCY_GOAL = 0.8  # the same on torch's CUDA backend, a GPU per rank, any rank count
NCCL_LATENCY_GOAL = 0.6  # all-reduce time / NCCL's, from LATENCY_RANGE
LATENCY_RANGE = (1 << 10, 1 << 20)
BANDWIDTH_GOAL, BANDWIDTH_FROM = 1.0, 16 << 20
SKIPPED = 77


@dataclass
class Job:
    """One ccorun job: cco under one algorithm, or a reference."""
    ranks: int
    impl: str  # "cco" or a reference of REFS
    algo: str  # cco: "auto" or CCO_ALGO's value; a reference: ""
    ops: List[str]
    sizes: List[int]  # float32 sizes (every op)
    bf16_sizes: List[int]  # bfloat16 sizes (all-reduce only)

    def name(self) -> str:
        return {"cco": f"cco {self.algo}", "torch_nvshmem": "torch NVSHMEM", "torch_cuda": "torch CUDA",
                "nccl": "NCCL"}[self.impl]

    def env(self) -> Dict[str, Optional[str]]:
        """What the job's environment changes: None removes a variable."""
        if self.impl == "cco":
            return {"CCO_ALGO": None if self.algo == "auto" else self.algo}
        return dict(NVSHMEM_ENV) if self.impl == "torch_nvshmem" else {}


IMPLS = {"cco": "cco", "torch_nvshmem": "torch", "torch_cuda": "torch", "nccl": "nccl"}  # coll_jobs.py --impl


def ref_family(ref: str) -> str:
    """"torch" for torch's kernels on either backend, "nccl" for NCCL."""
    return "nccl" if ref == "nccl" else "torch"


def latency_goal(ref: str, op: str, nbytes: int, ranks: int) -> Optional[float]:
    if op != "allreduce" or not LATENCY_RANGE[0] <= nbytes <= LATENCY_RANGE[1]:
        return None
    return {"torch_nvshmem": LATENCY_GOALS.get(ranks), "torch_cuda": TORCH_CUDA_LATENCY_GOAL,
            "nccl": NCCL_LATENCY_GOAL}[ref]


def bandwidth_goal(ref: str, op: str, nbytes: int) -> Optional[float]:
    if op != "allreduce" or nbytes < BANDWIDTH_FROM or ref == "torch_cuda":
        return None
    return BANDWIDTH_GOAL


def list_arg(choices: Tuple[str, ...]):
    def parse(text: str) -> List[str]:
        items = text.split(",")
        for item in items:
            if item not in choices:
                raise argparse.ArgumentTypeError(f"'{item}' is not one of {', '.join(choices)}")
        return items
    parse.__name__ = "list"
    return parse


def ranks_arg(text: str) -> List[int]:
    parse = int_arg(2, 1024)
    return [parse(item) for item in text.split(",")]


def parse_args(argv: List[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="bench_coll.py", description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_sweep_args(ap)
    ap.add_argument("--op", type=list_arg(OPS), default=list(OPS), metavar="LIST",
                    help="collectives to measure: " + ", ".join(OPS))
    ap.add_argument("--algos", type=list_arg(ALGOS), default=list(ALGOS), metavar="LIST",
                    help="cco's all-reduce algorithms, a job each: " + ", ".join(ALGOS))
    ap.add_argument("--ranks", type=ranks_arg, default=[2, 4, 8], metavar="N[,N..]", help="rank counts (2,4,8)")
    ap.add_argument("--reps", type=int_arg(1, 100000), metavar="N",
                    help="calls per CUDA graph (default 100 up to 1 MiB, 20 above)")
    ap.add_argument("--refs", type=list_arg(REFS), default=["torch_nvshmem"], metavar="LIST",
                    help="references, a job each: torch_nvshmem (default; ranks may share a GPU), torch_cuda "
                         "and nccl (a GPU per rank)")
    ap.add_argument("--no-ref", action="store_true", help="leave out the references")
    ap.add_argument("--bin", default=os.environ.get("CCO_BIN", os.path.join(HERE, "..", "build", "bin")),
                    metavar="DIR", help="where ccorun and ../lib/libcco.so are (default $CCO_BIN or build/bin)")
    ap.add_argument("--timeout", type=int_arg(1, 86400), default=600, metavar="SEC", help="seconds per job (600)")
    ap.add_argument("--python", default=sys.executable, metavar="PATH", help="the ranks' interpreter")
    ap.add_argument("--dry-run", action="store_true", help="print the jobs instead of running them")
    args = ap.parse_args(argv)
    check_sweep_args(ap, args)
    sizes = list(sweep(args, *DEFAULT_SWEEP))
    for size in sizes:
        if size % 4:
            ap.error(f"sizes must be multiples of 4 bytes, not {size}")
    if not sizes:
        ap.error("the sweep has no sizes")
    args.sizes = sizes
    args.bin = os.path.abspath(args.bin)
    return args


def plan(args: argparse.Namespace) -> List[Job]:
    """The jobs, in the order they run: per rank count, cco auto first (its lines are the ones the
    references sit beside), the forced algorithms, then the reference."""
    low, high = min(args.sizes), max(args.sizes)
    bf16 = [s for s in BF16_SIZES if low <= s <= high] if "allreduce" in args.op else []
    jobs: List[Job] = []
    for n in args.ranks:
        for algo in args.algos:
            if algo == "auto":
                jobs.append(Job(n, "cco", "auto", list(args.op), list(args.sizes), bf16))
            elif "allreduce" in args.op:
                cap = ALGO_MAX_BYTES.get(algo, high)
                sizes = [s for s in args.sizes if s <= cap]
                if sizes:
                    jobs.append(Job(n, "cco", algo, ["allreduce"], sizes, [s for s in bf16 if s <= cap]))
        for ref in [] if args.no_ref else args.refs:
            ref_ops = [op for op in args.op if op in REF_VARIANTS[ref_family(ref)]]
            if ref_ops:
                jobs.append(Job(n, ref, "", ref_ops, list(args.sizes), bf16))
    return jobs


def command(args: argparse.Namespace, job: Job) -> List[str]:
    cmd = [os.path.join(args.bin, "ccorun"), "-t", str(args.timeout), "-n", str(job.ranks),
           args.python, os.path.join(HERE, "coll_jobs.py"), "--impl", IMPLS[job.impl], "--op", ",".join(job.ops),
           "--sizes", ",".join(map(str, job.sizes))]
    if job.bf16_sizes:
        cmd += ["--bf16-sizes", ",".join(map(str, job.bf16_sizes))]
    if job.impl == "cco":
        cmd += ["--algo", job.algo]
    elif job.impl == "torch_cuda":
        cmd += ["--torch-backend", "CUDA"]
    for opt, value in (("-n", args.iters), ("-w", args.warmup), ("--reps", args.reps)):
        if value is not None:
            cmd += [opt, str(value)]
    return cmd


def describe(job: Job, cmd: List[str]) -> str:
    env = " ".join(f"{k}={v}" if v is not None else f"-u {k}" for k, v in sorted(job.env().items()))
    return f"[{job.ranks} ranks, {job.name()}] {env} {shlex.join(cmd)}"


def run_job(args: argparse.Namespace, job: Job) -> Tuple[int, List[dict]]:
    """Runs one job; its lines are printed and returned. (exit status, lines)."""
    env = dict(os.environ)
    for key, value in job.env().items():
        if value is None:
            env.pop(key, None)
        elif job.impl != "cco":
            env.setdefault(key, value)  # the caller's own NVSHMEM settings win
        else:
            env[key] = value
    lib = os.path.join(args.bin, "..", "lib", "libcco.so")
    if os.path.exists(lib):
        env.setdefault("CCO_LIBRARY", os.path.abspath(lib))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.path.join(HERE, "..", "python"), env.get("PYTHONPATH")]))
    cmd = command(args, job)
    print(f"bench_coll: {describe(job, cmd)}", file=sys.stderr, flush=True)
    lines: List[dict] = []
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        env["CCO_TORCH_STORE"] = os.path.join(tmp, "store")  # the gloo group's file store
        # Lines pass through as they come (a job runs for minutes); ccorun -t bounds the job.
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True, start_new_session=True)
        assert proc.stdout is not None
        for text in proc.stdout:
            text = text.rstrip("\n")
            if not text.startswith("{"):
                print(text, file=sys.stderr, flush=True)
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError:
                obj = None
            if not isinstance(obj, dict) or not all(k in obj for k in COMMON_KEYS) or obj["bench"] != "coll":
                print(f"bench_coll: not a coll line: {text}", file=sys.stderr, flush=True)
                bad += 1
                continue
            lines.append(obj)
            print(text, flush=True)
        try:
            rc = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            rc = proc.wait()
    return rc or (1 if bad else 0), lines


def ratios(lines: List[dict], ranks: int) -> List[str]:
    """The ratio lines of one rank count: cco's algorithm auto against each reference at each size
    both measured (module docstring), with the goals where the issues set them."""
    def figure(op: str, dtype: str, nbytes: int, metric: str, ref: Optional[str], variant: str) -> Optional[dict]:
        for ln in lines:
            if (ln["op"], ln.get("dtype"), ln["bytes"], ln["ranks"], ln["metric"], ln["ref"], ln.get("variant")) == \
                    (op, dtype, nbytes, ranks, metric, ref, variant) and ln["value"]:
                return ln
        return None

    out = []
    present = [ref for ref in REFS if any(ln["ref"] == ref for ln in lines)]
    own = [ln for ln in lines if ln["ref"] is None and ln.get("algo") == "auto" and ln["ranks"] == ranks
           and ln["metric"] == "us"]
    for mine in own:
        op, dtype, nbytes = mine["op"], mine.get("dtype"), mine["bytes"]
        forced = [ln for ln in lines if ln["ref"] is None and ln.get("algo") not in (None, "auto")
                  and (ln["op"], ln.get("dtype"), ln["bytes"], ln["ranks"], ln["metric"]) ==
                  (op, dtype, nbytes, ranks, "us") and ln["value"]]
        best = min(forced, key=lambda ln: ln["value"]) if forced else None
        extra = {"dtype": dtype, "algo": "auto", "algo_used": mine.get("algo_used")}
        if best is not None:
            extra.update(best_algo=best["algo"], best_algo_us=best["value"])
        for name in present:
            family = ref_family(name)
            # Time: cco / the faster variant (the smaller the better).
            refs = [figure(op, dtype, nbytes, "us", name, v) for v in REF_VARIANTS[family].get(op, ())]
            refs = [r for r in refs if r]
            if refs:
                ref = min(refs, key=lambda r: r["value"])
                value = mine["value"] / ref["value"]
                goal = latency_goal(name, op, nbytes, ranks)
                out.append(json_line("coll", op, nbytes, ranks, mine["iters"], "ratio_us", value, None,
                                     vs=f"{name} {ref['variant']}", cco_us=mine["value"], ref_us=ref["value"],
                                     goal_ratio_max=goal, met=None if goal is None else value <= goal, **extra))
            # Bus bandwidth: cco / the reference's (two-shot's for torch), the larger the better.
            mine_bw = figure(op, dtype, nbytes, "GBps", None, "auto")
            bw_variant = REF_BW_VARIANT[family].get(op)
            ref_bw = figure(op, dtype, nbytes, "GBps", name, bw_variant) if bw_variant else None
            if mine_bw and ref_bw:
                value = mine_bw["value"] / ref_bw["value"]
                goal = bandwidth_goal(name, op, nbytes)
                out.append(json_line("coll", op, nbytes, ranks, mine["iters"], "ratio_GBps", value, None,
                                     vs=f"{name} {ref_bw['variant']}", cco_GBps=mine_bw["value"],
                                     ref_GBps=ref_bw["value"], goal_ratio_min=goal,
                                     met=None if goal is None else value >= goal, **extra))
    return out


def gpu_driver_here() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


def main(argv: List[str]) -> int:
    args = parse_args(argv)
    jobs = plan(args)
    if args.dry_run:
        for job in jobs:
            print(describe(job, command(args, job)))
        return 0
    if not gpu_driver_here():
        print("bench_coll.py: no GPU driver here", file=sys.stderr)
        return SKIPPED
    failed = []
    for n in args.ranks:
        lines: List[dict] = []
        for job in (j for j in jobs if j.ranks == n):
            rc, got = run_job(args, job)
            lines += got
            wrong = sum(ln.get("wrong", 0) or 0 for ln in got)
            if rc != 0 or wrong:
                why = f"exit status {rc}" + (f", {wrong} wrong elements" if wrong else "")
                print(f"bench_coll: {n} ranks, {job.name()}: {why}", file=sys.stderr, flush=True)
                if job.impl == "cco":
                    failed.append(job)
        for text in ratios(lines, n):
            print(text, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
