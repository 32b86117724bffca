"""What the Python benchmarks, the perf driver and plot.py share (stdlib only).

The same command-line rules as bench/bench_args.c: sizes with K/M/G suffixes
(powers of 1024), -b/-e/-f/-i sweeps whose left-out ends keep each
measurement's own default, -n/-w counts; and the JSON line format of
bench/bench_json.h: one object per measurement, starting with COMMON_KEYS.
"""
import argparse
import json
import math
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, Iterator, List, Optional

# Keys every JSON line of a benchmark has, in this order (docs/perf.md).
COMMON_KEYS = ("bench", "op", "bytes", "ranks", "iters", "metric", "value", "ref")

# What torch's NVSHMEM backend needs to run with ranks sharing a GPU under MPS: no NCCL bootstrap,
# no MPS thread-percentage check, the loopback interface for its unique-id bootstrap, no NVLS.
NVSHMEM_ENV = {
    "NVSHMEM_DISABLE_NCCL": "1",
    "NVSHMEM_IGNORE_CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "1",
    "NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME": "lo",
    "NVSHMEM_DISABLE_NVLS": "1",
}

_SIZE = re.compile(r"^([0-9]+)([KkMmGg]?)$")
_SHIFT = {"": 0, "k": 10, "m": 20, "g": 30}


def parse_size(text: str) -> int:
    """'4096', '64K', '1M', '2G' -> bytes; ValueError otherwise."""
    m = _SIZE.match(text)
    if not m:
        raise ValueError(f"'{text}' is not a size (a number with an optional K, M or G suffix)")
    return int(m.group(1)) << _SHIFT[m.group(2).lower()]


def size_arg(text: str) -> int:
    """argparse type: a size of at least one byte."""
    try:
        value = parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if value < 1:
        raise argparse.ArgumentTypeError("the size must be at least 1 byte")
    return value


def int_arg(low: int, high: int):
    """argparse type: an integer from low to high."""
    def parse(text: str) -> int:
        if not re.match(r"^-?[0-9]+$", text) or not low <= int(text) <= high:
            raise argparse.ArgumentTypeError(f"'{text}' is not an integer from {low} to {high}")
        return int(text)
    parse.__name__ = "integer"
    return parse


def add_sweep_args(parser: argparse.ArgumentParser, sizes: bool = True) -> None:
    """-b/-e/-f/-i (when sizes) and -n/-w, each None when left out."""
    if sizes:
        parser.add_argument("-b", "--minbytes", type=size_arg, metavar="SIZE",
                            help="smallest size (K, M, G suffixes: powers of 1024)")
        parser.add_argument("-e", "--maxbytes", type=size_arg, metavar="SIZE", help="largest size")
        step = parser.add_mutually_exclusive_group()
        step.add_argument("-f", "--stepfactor", type=int_arg(2, 1024), metavar="N",
                          help="multiply the size by N each step")
        step.add_argument("-i", "--stepbytes", type=size_arg, metavar="SIZE", help="add SIZE each step instead")
    parser.add_argument("-n", "--iters", type=int_arg(1, 10**9), metavar="N",
                        help="timed iterations of each measurement")
    parser.add_argument("-w", "--warmup", type=int_arg(0, 10**9), metavar="N", help="warm-up iterations")


def check_sweep_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """What argparse cannot see alone: -b past -e."""
    lo, hi = getattr(args, "minbytes", None), getattr(args, "maxbytes", None)
    if lo is not None and hi is not None and lo > hi:
        parser.error(f"-b {lo} is more than -e {hi}")


def sweep(args: argparse.Namespace, d_min: int, d_max: int, d_factor: int) -> Iterator[int]:
    """The sizes asked for; left-out ends and step keep the measurement's defaults
    (a given end moves the other one if they would cross), as bench_args_sweep does."""
    lo = args.minbytes if args.minbytes is not None else d_min
    hi = args.maxbytes if args.maxbytes is not None else d_max
    if args.maxbytes is None and hi < lo:
        hi = lo
    if args.minbytes is None and lo > hi:
        lo = hi
    size = lo
    while size <= hi:
        yield size
        if args.stepbytes:
            size += args.stepbytes
        else:
            size *= args.stepfactor or d_factor


def count(value: Optional[int], default: int) -> int:
    """A -n or -w value, or the measurement's own default when left out."""
    return default if value is None else value


def json_line(bench: str, op: str, nbytes: Optional[int], ranks: int, iters: int, metric: str, value: float,
              ref: Optional[str] = None, **extra) -> str:
    """One measurement as a JSON line: COMMON_KEYS first, then the extras."""
    # Six significant digits as the C programs print; JSON has no NaN or infinity.
    number = float(f"{value:.6g}") if value is not None and math.isfinite(value) else None
    obj = {"bench": bench, "op": op, "bytes": nbytes, "ranks": ranks, "iters": iters, "metric": metric,
           "value": number, "ref": ref}
    obj.update(extra)
    return json.dumps(obj)


def read_lines(paths: List[str], program: str) -> List[dict]:
    """Every benchmark line of the JSONL files (lines without a value left out); a line that is not
    JSON, or lacks a common key, ends the program with its file and line number."""
    lines = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for number, text in enumerate(f, 1):
                if not text.strip():
                    continue
                try:
                    obj = json.loads(text)
                except json.JSONDecodeError as exc:
                    raise SystemExit(f"{program}: {path}:{number}: not JSON ({exc})")
                missing = [k for k in COMMON_KEYS if not isinstance(obj, dict) or k not in obj]
                if missing:
                    raise SystemExit(f"{program}: {path}:{number}: not a benchmark line (no {', '.join(missing)})")
                if obj["value"] is not None:
                    lines.append(obj)
    return lines


def size_text(n: int, unit_suffix: str = "", sep: str = "") -> str:
    """1024 -> '1K' (plot ticks); with unit_suffix 'iB': '1KiB' (titles, file names); with sep ' ' too:
    '1 KiB' (tables)."""
    for shift, unit in ((30, "G"), (20, "M"), (10, "K")):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{sep}{unit}{unit_suffix}"
    return f"{n}{sep}B" if unit_suffix else str(n)


def run_ranks_job(program: str, label: str, cmd: List[str], env: Dict[str, str], timeout: int) -> List[dict]:
    """Runs one job of ranks (a ccorun command line) with a fresh torch store (CCO_TORCH_STORE, for
    ranks that make a torch process group), and returns its benchmark lines, each also printed to
    stdout; its other output goes to stderr, and a failure ends with the last lines of its output."""
    print(f"{program}: {shlex.join(cmd)}", file=sys.stderr, flush=True)
    env = dict(env)
    with tempfile.TemporaryDirectory() as tmp:
        env["CCO_TORCH_STORE"] = os.path.join(tmp, "store")
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
            out, err, rc = proc.stdout, proc.stderr, proc.returncode
        except subprocess.TimeoutExpired:
            out, err, rc = "", "", 124
    records = []
    for line in out.splitlines():
        obj = None
        if line.startswith("{"):
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                obj = None
        if isinstance(obj, dict) and all(k in obj for k in COMMON_KEYS):
            records.append(obj)
            print(line, flush=True)
        else:
            print(line, file=sys.stderr, flush=True)
    if rc != 0:
        tail = " | ".join((err or out).strip().splitlines()[-6:])
        print(f"{program}: {label}: exit {rc}: {tail}", file=sys.stderr, flush=True)
    return records


def run_rank_mode_job(program: str, script: str, bin_dir: str, job: str, ranks: int, timeout: int,
                      job_args: List[str], env: Dict[str, str], dry_run: bool, hosts: int = 1) -> List[dict]:
    """Runs `script --rank-mode JOB JOB_ARGS` as `ranks` ranks under bin_dir's ccorun (a Python
    benchmark that starts its own jobs: bench_moe.py, bench_fused.py), with the build's libcco as
    CCO_LIBRARY unless env names one; hosts > 1 spreads the ranks over that many virtual hosts;
    prints the command instead when dry_run."""
    env = dict(env)
    lib = Path(bin_dir).resolve().parent / "lib" / "libcco.so"
    if lib.exists():
        env.setdefault("CCO_LIBRARY", str(lib))
    cmd = [str(Path(bin_dir) / "ccorun"), "-t", str(timeout), "-n", str(ranks)]
    cmd += ["--virtual-hosts", str(hosts)] if hosts > 1 else []
    cmd += [sys.executable, str(Path(script).resolve()), "--rank-mode", job, *job_args]
    if dry_run:
        print(f"{program}: {shlex.join(cmd)}", file=sys.stderr, flush=True)
        return []
    return run_ranks_job(program, f"{job}, {ranks} ranks", cmd, env, timeout + 60)


def slowest_over(allgather, value: float) -> float:
    """The largest of every rank's value, through a communicator's bytes allgather (collective)."""
    return max(float(b.decode()) for b in allgather(f"{value:.6f}".encode().ljust(32)))
