#!/usr/bin/env python3
"""plot.py: one PNG per figure of the benchmarks' JSON lines (docs/perf.md).

    bench/plot.py RESULTS.jsonl... -o DIR [--prefix plots/] [--suffix NAME]

A figure is one measurement ("op", plus what tells its variants apart:
writers, burst, doorbell, ...) on one machine, drawn against bytes (log2)
when the lines sweep sizes and against ranks otherwise, one figure per rank
count or size held fixed. cco's line (ref null) is solid; each reference
measured in the same run (cudaMemcpy, NCCL, NVSHMEM, the raw engine, ...) is
dashed beside it (a lone value with nothing beside it is not drawn). The
title names the machine and the date; figures of a
second machine in the same input get "_m1" (and so on) in their file names.
On stdout, one Markdown image line per PNG written, to paste into
bench/RESULTS.md.

Needs matplotlib (imported only once the lines are read).
"""
import argparse
import os
import re
import sys
from collections import OrderedDict, defaultdict
from typing import Dict, List, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perf_common import read_lines, size_text  # noqa: E402

# Extras that make a different figure of the same op, and how a title says them.
FIGURE_EXTRAS = OrderedDict([
    ("writers", lambda v, line: "one writer" if v == 1 else "every rank writing"),
    ("burst", lambda v, line: f"{v} puts in flight" if v != "deep" else "deep stream of puts"),
    ("doorbell", lambda v, line: f"{v} doorbells"),
    ("provider", lambda v, line: str(v)),
    ("hosts", lambda v, line: f"{v} hosts"),
    ("scope", lambda v, line: f"{v} scope"),
    ("dtype", lambda v, line: str(v)),
])
UNITS = {"GBps": "GB/s", "us": "time (us)", "ms": "time (ms)", "Mmsg_per_s": "million messages/s"}


def family_key(line: dict) -> Tuple:
    extras = tuple(FIGURE_EXTRAS[k](line[k], line) for k in FIGURE_EXTRAS if k in line)
    return line.get("machine", ""), line["op"], line["metric"], extras


def figures(lines: List[dict]) -> Dict[Tuple, Tuple[str, List[dict]]]:
    """(family, fixed) -> (x axis, lines): bytes when the family sweeps sizes, else ranks."""
    families: Dict[Tuple, List[dict]] = defaultdict(list)
    for line in lines:
        families[family_key(line)].append(line)
    out: Dict[Tuple, Tuple[str, List[dict]]] = OrderedDict()
    for fam, members in families.items():
        sizes = {m["bytes"] for m in members if m["bytes"] is not None}
        ranks = {m["ranks"] for m in members}
        x = "bytes" if len(sizes) >= 2 or (sizes and len(ranks) < 2) else "ranks"
        fixed_key = "ranks" if x == "bytes" else "bytes"
        for m in members:
            out.setdefault((fam, m[fixed_key]), (x, []))[1].append(m)
    return out


def series(members: List[dict]) -> Dict[str, List[dict]]:
    """Label -> lines: "cco" or the reference, its variant, and where needed whose run and when."""
    own = {m["bench"] for m in members if m["ref"] is None}
    dates = {m.get("date", "") for m in members}
    out: Dict[str, List[dict]] = OrderedDict()
    for m in sorted(members, key=lambda m: (m["ref"] is not None, str(m["ref"]))):
        label = "cco" if m["ref"] is None else m["ref"]
        if m.get("variant"):
            label += f" {m['variant']}"
        if m["ref"] is not None and own and m["bench"] not in own and m["ref"] != m["bench"]:
            label += f" ({m['bench']} run)"
        if len(dates) > 1:
            label += f", {m.get('date', '')}"
        out.setdefault(label, []).append(m)
    return out


def file_name(fam: Tuple, fixed, x: str, machine_index: int, suffix: str, with_metric: bool = False) -> str:
    _, op, metric, extras = fam
    parts = [op] + list(extras) + ([metric] if with_metric else [])
    if fixed is not None:
        parts.append(f"{fixed}ranks" if x == "bytes" else size_text(fixed, "iB"))
    if machine_index:  # the same figure of a second machine must not overwrite the first
        parts.append(f"m{machine_index}")
    if suffix:
        parts.append(suffix)
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", "_".join(parts)).strip("-") + ".png"


def draw(plt, fam: Tuple, fixed, x: str, members: List[dict], path: str) -> str:
    machine, op, metric, extras = fam
    fig, ax = plt.subplots(figsize=(7, 4.2))
    values = []
    for label, pts in series(members).items():
        pts = sorted(pts, key=lambda m: m[x] if m[x] is not None else 0)
        xs = [m[x] if m[x] is not None else 0 for m in pts]
        ys = [m["value"] for m in pts]
        values += ys
        cco = label.startswith("cco")
        ax.plot(xs, ys, marker="o" if cco else "s", linestyle="-" if cco else "--", linewidth=2 if cco else 1.3,
                label=label)
    # A log axis cannot show a zero-byte point (a doorbell round trip): linear then.
    positive = all(m[x] is not None and m[x] > 0 for m in members)
    if positive and (x == "bytes" or len({m["ranks"] for m in members}) > 1):
        ax.set_xscale("log", base=2)
    ticks = sorted({m[x] for m in members if m[x] is not None})
    if ticks:
        ax.set_xticks(ticks)
        ax.set_xticklabels([size_text(t) if x == "bytes" else str(t) for t in ticks], rotation=45 if len(ticks) > 8
                           else 0)
        ax.minorticks_off()
    ax.set_xlabel("bytes" if x == "bytes" else "ranks")
    ax.set_ylabel(UNITS.get(metric, metric))
    positive = [v for v in values if v > 0]
    if positive and max(positive) / min(positive) > 100:
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)
    held = "" if fixed is None else (f", {fixed} ranks" if x == "bytes" else f", {size_text(fixed, 'iB')}")
    subject = op + (f" ({', '.join(extras)})" if extras else "") + held
    dates = sorted({m.get("date", "") for m in members} - {""})
    when = dates[0] if len(dates) == 1 else (f"{dates[0]} .. {dates[-1]}" if dates else "")
    title = subject + "\n" + ", ".join(t for t in (machine, when) if t)
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return subject


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description="Draw one PNG per figure of benchmark JSON lines.")
    ap.add_argument("files", nargs="+", metavar="RESULTS.jsonl", help="JSON lines of cco_perf.py or a benchmark")
    ap.add_argument("-o", "--outdir", required=True, metavar="DIR", help="where the PNGs go (made if missing)")
    ap.add_argument("--prefix", default="plots/", help="path before each file name in the Markdown lines")
    ap.add_argument("--suffix", default="", help="added to every file name (say, the machine: h200)")
    args = ap.parse_args(argv)
    for path in args.files:
        if not os.path.isfile(path):
            ap.error(f"no file {path}")
    lines = read_lines(args.files, "plot.py")
    if not lines:
        print("plot.py: no measurements in " + ", ".join(args.files), file=sys.stderr)
        return 1
    try:
        import matplotlib
        matplotlib.use("Agg")  # files only, no display needed
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot.py needs matplotlib: python3 -m pip install matplotlib (in a virtual environment, e.g. "
              "one made by tests/scripts/pyvenv.sh)", file=sys.stderr)
        return 1
    os.makedirs(args.outdir, exist_ok=True)
    machines = list(OrderedDict.fromkeys(m.get("machine", "") for m in lines))
    # An op measured in several units (time, bandwidth, ratios) gets the unit in its file names, so
    # that its figures do not overwrite each other; an op with one unit keeps the names it had.
    metrics: Dict[str, set] = defaultdict(set)
    for line in lines:
        metrics[line["op"]].add(line["metric"])
    for (fam, fixed), (x, members) in figures(lines).items():
        if len(members) == 1:  # one number alone is no figure
            continue
        name = file_name(fam, fixed, x, machines.index(fam[0]), args.suffix, len(metrics[fam[1]]) > 1)
        subject = draw(plt, fam, fixed, x, members, os.path.join(args.outdir, name))
        print(f"![{subject}]({args.prefix}{name})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
