#!/usr/bin/env python3
"""cco_perf: one driver for every cco benchmark (Python 3.9+, stdlib only).

    bench/cco_perf.py BENCH [-b SIZE] [-e SIZE] [-f N | -i SIZE] [-n N] [-w N] [--op LIST]
                      [--ranks N[,N..]] [--virtual-hosts H] [--ref] [--bin DIR] [-o FILE]
                      [-- PROGRAM OPTIONS]

runs a benchmark program under ccorun with the rank counts it needs (or its
own, for bootstrap, which forks its ranks), passes the sweep options through,
collects the JSON lines the program prints, adds the machine and the date to
each, and writes them to FILE (JSON lines; stdout without -o). Sets: "gpu"
runs what tests/gpu/gpu_machine.sh measures on a GPU machine, "all" is
bootstrap and gda_host, then "gpu". docs/perf.md describes the options, the JSON keys
and bench/plot.py, which draws the lines.

Exit status: 0 when every run passed, 1 when one failed, 2 for bad
arguments, 77 when nothing could run here (no GPU driver).
"""
import argparse
import ctypes
import datetime
import json
import os
import shlex
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from perf_common import COMMON_KEYS, add_sweep_args, check_sweep_args, int_arg  # noqa: E402

SKIPPED = 77  # a program's "cannot run here", as the test suite counts it
TIMEOUT = 300  # seconds per program start, unless --timeout


@dataclass(frozen=True)
class Bench:
    program: str                  # in --bin, or a script in bench/ (python: True)
    about: str
    ranks: Tuple[int, ...]        # default rank counts
    rank_range: Tuple[int, int]   # accepted rank counts
    ops: Tuple[str, ...] = ()
    sizes: bool = True            # takes -b/-e/-f/-i
    size_align: int = 1           # sizes must be multiples of this
    warmup: bool = True           # takes -w
    gpu: bool = True
    python: bool = False
    self_launched: bool = False   # forks its own ranks (--ranks goes to the program)
    reference: Optional[str] = None  # the separate reference program --ref adds
    reference_ops: Tuple[str, ...] = ()  # its measurements that compare (empty: as asked for here)
    env: Tuple[Tuple[str, str], ...] = ()
    hosts: int = 1                # virtual hosts a run takes unless --virtual-hosts says otherwise


BENCHES = {
    "bootstrap": Bench("cco-bench-bootstrap", "communicator create/destroy, host barrier vs loopback TCP",
                       (2, 4, 8, 16), (2, 64), sizes=False, gpu=False, self_launched=True),
    "gda_host": Bench("cco-bench-gda-host", "GDA between CPU ranks on two virtual hosts (the staged path) vs the raw "
                      "network engine", (2,), (2, 2), ops=("latency", "bw", "barrier"), size_align=8, gpu=False,
                      env=(("CCO_GDA_PATH", "staged"),), hosts=2),
    "windows": Bench("cco-bench-windows", "window registration; copy into a peer's window vs cudaMemcpy",
                     (2, 4, 8), (1, 1024), ops=("register", "copy"), size_align=16),
    "lsa": Bench("cco-bench-lsa", "LSA put, signal ping-pong, LSA barrier vs cudaMemcpy and raw flags",
                 (2, 4, 8), (2, 1024), ops=("put", "pingpong", "barrier", "rate"), size_align=16, reference="nvshmem"),
    "allreduce": Bench("cco-bench-allreduce", "one-shot LSA all-reduce in CUDA graphs", (2,), (1, 1024),
                       size_align=4, reference="nccl", reference_ops=("allreduce",)),
    "sdma": Bench("cco-bench-sdma", "SDMA puts from kernels vs cudaMemcpyAsync and a naive floor", (2,), (2, 1024),
                  ops=("put", "latency", "issue", "overlap")),
    "gda": Bench("cco-bench-gda", "GDA from kernels vs the raw network engine (barrier: --virtual-hosts 2)", (2,),
                 (2, 2), ops=("overhead", "bw", "latency", "rate", "barrier")),
    "python": Bench("bench_python.py", "Python methods vs the C calls they wrap", (4,), (1, 1024),
                    ops=("barrier", "alloc_mem", "register_window", "create_dev_comm", "init"), sizes=False,
                    warmup=False, gpu=False, python=True),
    "nccl": Bench("nccl_ref.py", "NCCL all-gather and AllReduce (torch.distributed), the reference of allreduce",
                  (2,), (1, 1024), ops=("allgather", "allreduce"), python=True),
    "triton": Bench("bench_triton.py", "Triton kernels on the device bitcode vs the same CUDA C kernels "
                    "(LSA put, one-shot all-reduce, GDA put + flush)", (2, 4, 8), (2, 1024),
                    ops=("lsa", "allreduce", "gda"), size_align=4, warmup=False, python=True),
    "coll": Bench("bench_coll.py", "collectives (each all-reduce algorithm) in CUDA graphs vs torch's symm_mem "
                  "kernels on its NVSHMEM backend, with the goals' ratios", (2, 4, 8), (2, 1024),
                  ops=("allreduce", "allgather", "reducescatter", "alltoall"), size_align=4, python=True,
                  self_launched=True),
    "torch": Bench("bench_torch.py", "torch backend CCO vs torch's NVSHMEM (and CUDA) backends: rendezvous, "
                   "one_shot_all_reduce in CUDA graphs and eagerly", (2,), (2, 1024), ops=("rendezvous", "allreduce"),
                   sizes=False, warmup=False, python=True, self_launched=True),
    "nvshmem": Bench("nvshmem_ref", "NVSHMEM put, ping-pong, barrier, the reference of lsa "
                     "(bench/build_nvshmem_ref.sh builds it)", (2, 4, 8), (2, 1024), ops=("put", "pingpong", "barrier", "rate"),
                     size_align=16,
                     env=(("NVSHMEM_DISABLE_NCCL", "1"), ("NVSHMEM_DISABLE_NVLS", "1"),
                          ("NVSHMEM_IGNORE_CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "1"),
                          ("NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME", "lo"))),
}


@dataclass
class Run:
    """One program start: a benchmark at one rank count."""
    name: str
    ranks: int  # 0: a self-launched program's own counts (its default, or --ranks)
    virtual_hosts: int = 1
    ops: List[str] = field(default_factory=list)
    optional: bool = False  # in a set: a program that was not built is skipped, not failed


def gpu_set() -> List[Run]:
    """What tests/gpu/gpu_machine.sh measures under MPS on one GPU machine."""
    runs = [Run("windows", n) for n in (2, 4, 8)] + [Run("lsa", n) for n in (2, 4, 8)]
    runs += [Run("sdma", 2), Run("gda", 2, ops=["overhead", "bw", "latency", "rate"]),
             Run("gda", 2, virtual_hosts=2, ops=["barrier"])]
    runs += [Run("nvshmem", n, optional=True) for n in (2, 4, 8)]
    # Triton against CUDA C: LSA and the all-reduce at 2, 4, 8 ranks, GDA between two ranks.
    runs += [Run("triton", n, ops=["lsa", "allreduce"]) for n in (2, 4, 8)] + [Run("triton", 2, ops=["gda"])]
    # The collectives against torch's kernels on NVSHMEM; backend "CCO" against torch's backends.
    runs += [Run("coll", n) for n in (2, 4, 8)] + [Run("torch", n) for n in (2, 4)]
    return runs


SETS = {"gpu": gpu_set, "all": lambda: [Run("bootstrap", 0), Run("gda_host", 2, virtual_hosts=2)] + gpu_set()}


def list_arg(text: str) -> List[int]:
    parse = int_arg(1, 1024)
    return [parse(item) for item in text.split(",")]


def parse_args(argv: List[str]) -> argparse.Namespace:
    # After "--": the program's own options (--reps, --depth, ...), which it checks itself.
    own = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    epilog = "benchmarks:\n" + "\n".join(f"  {k:10} {b.about}" for k, b in BENCHES.items())
    epilog += ("\n  gpu        windows, lsa, sdma, gda (and its barrier on two virtual hosts), nvshmem if built, "
               "triton, coll, torch")
    epilog += "\n  all        bootstrap and gda_host, then gpu"
    epilog += "\n\nOptions after -- go to the program as they are (its --help lists them)."
    ap = argparse.ArgumentParser(prog="cco_perf.py", description="Run cco benchmarks and collect their JSON lines.",
                                 epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bench", choices=list(BENCHES) + list(SETS), metavar="BENCH", help="what to run (below)")
    add_sweep_args(ap)
    ap.add_argument("--op", metavar="LIST", help="measurements to run, comma-separated (default: all of the "
                    "benchmark's)")
    ap.add_argument("--ranks", type=list_arg, metavar="N[,N..]",
                    help="rank counts (default: the benchmark's own)")
    ap.add_argument("--virtual-hosts", type=int_arg(1, 1024), default=1, metavar="H", help="ccorun --virtual-hosts H")
    ap.add_argument("--ref", action="store_true",
                    help="also run the benchmark's separate reference program (lsa: nvshmem, allreduce: nccl)")
    ap.add_argument("--bin", metavar="DIR", default=os.environ.get("CCO_BIN", os.path.join(HERE, "..", "build", "bin")),
                    help="where the programs and ccorun are (default: $CCO_BIN or build/bin)")
    ap.add_argument("-o", "--output", metavar="FILE", help="JSON lines file (default: stdout)")
    ap.add_argument("--append", action="store_true", help="add to the output file instead of replacing it")
    ap.add_argument("--log-dir", metavar="DIR", help="keep each program's stderr and other output here")
    ap.add_argument("--timeout", type=int_arg(1, 86400), metavar="SEC",
                    help=f"seconds per program start ({TIMEOUT}); coll and torch: per job they start")
    ap.add_argument("--date", metavar="TEXT", help="the run's date in every line (default: now, UTC)")
    ap.add_argument("--machine", metavar="TEXT", help="the machine in every line (default: its CPUs and GPUs)")
    ap.add_argument("--python", metavar="PATH", default=sys.executable, help="interpreter for python and nccl")
    ap.add_argument("--dry-run", action="store_true", help="print the commands instead of running them")
    args = ap.parse_args(argv)
    args.own = own
    args.bin = os.path.abspath(args.bin)
    if args.date is None:
        args.date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ")
    check_args(ap, args)
    return args


def check_args(ap: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """What the types alone cannot check: sizes, names and counts against each benchmark."""
    check_sweep_args(ap, args)
    names = sorted({run.name for run in SETS[args.bench]()}) if args.bench in SETS else [args.bench]
    if args.ref and args.bench in BENCHES and BENCHES[args.bench].reference:
        names.append(BENCHES[args.bench].reference)
    for name in names:
        align = BENCHES[name].size_align
        for opt, value in (("-b", args.minbytes), ("-e", args.maxbytes), ("-i", args.stepbytes)):
            if value is not None and value % align:
                ap.error(f"{opt}: {name} takes multiples of {align} bytes, not {value}")
    if args.bench in SETS:
        for opt, given in (("--op", args.op), ("--ranks", args.ranks), ("--ref", args.ref),
                           ("--virtual-hosts", args.virtual_hosts != 1), ("options after --", args.own)):
            if given:
                ap.error(f"{opt} goes with one benchmark, not the set '{args.bench}'")
        return
    bench = BENCHES[args.bench]
    if not bench.sizes and any(v is not None for v in (args.minbytes, args.maxbytes, args.stepfactor,
                                                        args.stepbytes)):
        ap.error(f"{args.bench} takes no sizes (-b/-e/-f/-i)")
    if not bench.warmup and args.warmup is not None:
        ap.error(f"{args.bench} takes no -w")
    if args.op is not None:
        args.op = args.op.split(",")
        for op in args.op:
            if op not in bench.ops:
                known = ", ".join(bench.ops) if bench.ops else "none"
                ap.error(f"--op: {args.bench} has no measurement '{op}' (it has: {known})")
    low, high = bench.rank_range
    for n in args.ranks or ():
        if not low <= n <= high:
            ap.error(f"--ranks: {args.bench} runs with {low} to {high} ranks, not {n}")
    if bench.self_launched and args.virtual_hosts != 1:
        ap.error(f"{args.bench} starts its own ranks on this host: no --virtual-hosts")
    for n in args.ranks or bench.ranks:
        if args.virtual_hosts > n and not bench.self_launched:
            ap.error(f"--virtual-hosts {args.virtual_hosts} is more than {n} ranks")
    if args.bench == "gda" and args.op and "barrier" in args.op and args.virtual_hosts != 2:
        ap.error("gda --op barrier measures between two hosts: add --virtual-hosts 2")


def plan(args: argparse.Namespace) -> List[Run]:
    if args.bench in SETS:
        return SETS[args.bench]()
    bench = BENCHES[args.bench]
    if bench.self_launched:
        return [Run(args.bench, 0, ops=args.op or [])]
    counts = args.ranks or list(bench.ranks)
    hosts = args.virtual_hosts if args.virtual_hosts != 1 else bench.hosts
    runs = [Run(args.bench, n, hosts, args.op or []) for n in counts]
    if args.ref and bench.reference:
        ops = list(bench.reference_ops) or args.op or []
        runs += [Run(bench.reference, n, ops=ops) for n in counts]
    return runs


def bench_args(args: argparse.Namespace, bench: Bench, run: Run) -> List[str]:
    """The sweep options this program takes, in its own spelling."""
    out: List[str] = []
    given = [("-b", args.minbytes), ("-e", args.maxbytes), ("-f", args.stepfactor), ("-i", args.stepbytes)]
    if bench.sizes:
        out += [item for opt, v in given if v is not None for item in (opt, str(v))]
    if args.iters is not None:
        out += ["-n", str(args.iters)]
    if bench.warmup and args.warmup is not None:
        out += ["-w", str(args.warmup)]
    if run.ops:
        out += ["--op", ",".join(run.ops)]
    if bench.self_launched:
        ranks = [run.ranks] if run.ranks else args.ranks  # a set's run has its own count
        if ranks:
            out += ["--ranks", ",".join(map(str, ranks))]
        if bench.python:  # it starts its jobs itself: with this ccorun, interpreter and bound
            out += ["--bin", args.bin, "--python", args.python]
            out += ["--timeout", str(args.timeout)] if args.timeout is not None else []
    # The program's own options belong to the benchmark asked for, not to its reference.
    return out + (args.own if run.name == args.bench else [])


def command(args: argparse.Namespace, run: Run) -> List[str]:
    bench = BENCHES[run.name]
    program = [args.python, os.path.join(HERE, bench.program)] if bench.python else [
        os.path.join(args.bin, bench.program)]
    if bench.self_launched:
        return program + bench_args(args, bench, run)
    launcher = [os.path.join(args.bin, "ccorun"), "-t", str(args.timeout or TIMEOUT), "-n", str(run.ranks)]
    if run.virtual_hosts > 1:
        launcher += ["--virtual-hosts", str(run.virtual_hosts)]
    return launcher + program + bench_args(args, bench, run)


def gpu_driver_here() -> bool:
    """Whether the NVIDIA driver library loads (what the CUDA programs need)."""
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


def machine() -> str:
    """CPUs and GPUs, for plot titles and for telling runs apart."""
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            model = next((ln.split(":", 1)[1].strip() for ln in info if ln.startswith("model name")), "")
    except OSError:
        pass
    text = f"{os.cpu_count()} CPUs" + (f" ({model})" if model else "")
    try:
        names = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                               text=True, timeout=20, check=True).stdout.split("\n")
        names = [n.strip() for n in names if n.strip()]
        if names:
            text += f", {len(names)}x {names[0]}"
    except (OSError, subprocess.SubprocessError):
        pass
    return text


def check_line(obj, bench: str) -> Optional[str]:
    """Why a line is not a benchmark line, or None."""
    if not isinstance(obj, dict):
        return "not a JSON object"
    missing = [k for k in COMMON_KEYS if k not in obj]
    if missing:
        return "missing " + ", ".join(missing)
    if obj["bench"] != bench:
        return f"bench is '{obj['bench']}', not '{bench}'"
    for key, kinds in (("op", (str,)), ("ranks", (int,)), ("iters", (int,)), ("metric", (str,)),
                       ("bytes", (int, type(None))), ("value", (int, float, type(None))),
                       ("ref", (str, type(None)))):
        if not isinstance(obj[key], kinds) or isinstance(obj[key], bool):
            return f"'{key}' has the wrong type"
    return None


def describe(obj) -> str:
    size = "" if obj["bytes"] is None else f" {obj['bytes']} B"
    who = "cco" if obj["ref"] is None else f"ref {obj['ref']}"
    return f"  {obj['op']}{size}, {obj['ranks']} ranks, {who}: {obj['value']} {obj['metric']}"


class Collector:
    """Writes the lines of every run to one place, each with machine and date."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.machine = args.machine or machine()
        if args.output:
            os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
            self.out = open(args.output, "a" if args.append else "w", encoding="utf-8")
        else:
            self.out = sys.stdout
        if args.log_dir:
            os.makedirs(args.log_dir, exist_ok=True)
        self.lines = 0

    def close(self) -> None:
        if self.out is not sys.stdout:
            self.out.close()

    def run(self, run: Run) -> str:
        """'ok', 'failed' or 'skipped: why'."""
        bench = BENCHES[run.name]
        cmd = command(self.args, run)
        if bench.gpu and not gpu_driver_here():
            return "skipped: no GPU driver here"
        program = os.path.join(HERE if bench.python else self.args.bin, bench.program)
        if not os.path.exists(program):
            why = f"no {program}" + (" (bench/build_nvshmem_ref.sh builds it)" if run.name == "nvshmem" else "")
            return f"skipped: {why}" if run.optional else f"failed: {why}"
        env = dict(os.environ)
        for key, value in bench.env:
            env.setdefault(key, value)
        lib = os.path.join(self.args.bin, "..", "lib", "libcco.so")
        if bench.python and os.path.exists(lib):
            env.setdefault("CCO_LIBRARY", os.path.abspath(lib))
        log = self._log(run, cmd)
        print(f"cco_perf: {shlex.join(cmd)}", file=sys.stderr, flush=True)
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log or None, text=True, env=env,
                                start_new_session=True)
        bad = 0
        try:
            for text in proc.stdout:
                bad += self._take(text, run.name, log)
            rc = proc.wait(timeout=(self.args.timeout or TIMEOUT) + 60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc = 124
        finally:
            if log:
                log.close()
        if rc == SKIPPED:
            return "skipped: the program says it cannot run here (exit 77)"
        if rc != 0:
            return f"failed: exit status {rc}" + (f" (see {log.name})" if log else "")
        return f"failed: {bad} bad JSON lines" if bad else "ok"

    def _log(self, run: Run, cmd: List[str]):
        if not self.args.log_dir:
            return None
        name = run.name if BENCHES[run.name].self_launched and not run.ranks else f"{run.name}_{run.ranks}r"
        name += f"_{run.virtual_hosts}hosts" if run.virtual_hosts > 1 else ""
        name += ("_" + "-".join(run.ops)) if run.ops else ""
        log = open(os.path.join(self.args.log_dir, name + ".log"), "a", encoding="utf-8")
        log.write(f"$ {shlex.join(cmd)}\n")
        log.flush()
        return log

    def _take(self, text: str, bench: str, log) -> int:
        """One stdout line: a JSON line is checked and kept, anything else logged. 1 if bad."""
        text = text.rstrip("\n")
        if not text.startswith("{"):
            print(text, file=log or sys.stderr, flush=True)
            return 0
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            obj, why = None, f"not JSON ({exc})"
        else:
            why = check_line(obj, bench)
        if why:
            print(f"cco_perf: bad line from {bench}: {why}: {text}", file=sys.stderr, flush=True)
            return 1
        obj["machine"] = self.machine
        obj["date"] = self.args.date
        self.out.write(json.dumps(obj) + "\n")
        self.out.flush()
        self.lines += 1
        print(describe(obj), file=sys.stderr, flush=True)
        return 0


def main(argv: List[str]) -> int:
    args = parse_args(argv)
    runs = plan(args)
    if args.dry_run:
        for run in runs:
            print(shlex.join(command(args, run)))
        return 0
    collector = Collector(args)
    results = []
    try:
        for run in runs:
            results.append((run, collector.run(run)))
    finally:
        collector.close()
    for run, result in results:
        if result != "ok":
            hosts = f", {run.virtual_hosts} hosts" if run.virtual_hosts > 1 else ""
            ranks = "" if BENCHES[run.name].self_launched and not run.ranks else f" ({run.ranks} ranks{hosts})"
            print(f"cco_perf: {run.name}{ranks}: {result}", file=sys.stderr)
    print(f"cco_perf: {collector.lines} lines" + (f" in {args.output}" if args.output else ""), file=sys.stderr)
    if any(r.startswith("failed") for _, r in results):
        return 1
    return SKIPPED if all(r.startswith("skipped") for _, r in results) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
