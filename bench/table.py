#!/usr/bin/env python3
"""Markdown table of benchmark JSON lines: each cco figure beside the references of the same run.

    python3 bench/table.py bench.jsonl [more.jsonl ...]

One row per cco figure, each reference of the same run beside the figure it matches (the same
op, size, ranks and unit, no contradicting configuration), so RESULTS.md can quote a run as it
came out.
Only the standard library: it runs on the GPU machine too.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Dict, List, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perf_common import COMMON_KEYS, read_lines, size_text  # noqa: E402

# Keys that are not a figure's configuration: the common ones and what the driver adds.
COMMON = set(COMMON_KEYS) | {"machine", "date", "cpus"}
# Programs that only measure references for another benchmark's figures.
REFERENCE_PROGRAMS = {"nvshmem", "nccl"}
# Extras that describe one line's own measurement (its best trial, its status count, its goal)
# rather than the configuration: they must not split a figure from its references.
PER_LINE = {"min_us", "min_ms", "bad_status", "goal_ratio_max", "goal_ratio_min", "flushed_ms",
            "posts_written_ms", "variant", "launch"}


def config(line: dict) -> Dict[str, str]:
    return {k: str(v) for k, v in line.items() if k not in COMMON and k not in PER_LINE}


def matches(ref: dict, figure: dict) -> bool:
    """Whether a reference line belongs beside a cco figure: the same op, size, ranks and unit, and no
    configuration key that both name with different values (a reference program, like NVSHMEM's, names
    its own bench and has fewer keys)."""
    if any(ref[k] != figure[k] for k in ("op", "bytes", "ranks", "metric")):
        return False
    if ref.get("date") != figure.get("date") or ref.get("machine") != figure.get("machine"):
        return False  # another run's line is not a same-run reference
    if ref["bench"] != figure["bench"] and ref["bench"] not in REFERENCE_PROGRAMS:
        return False
    a, b = config(ref), config(figure)
    return all(a[k] == b[k] for k in a.keys() & b.keys())


def label_of(line: dict, taken: Dict[str, float]) -> str:
    """The reference's name, numbered when the same reference appears twice (two variants)."""
    name = line["ref"] or "cco"
    variant = line.get("variant")
    label = f"{name} {variant}" if variant else name
    k = 2
    unique = label
    while unique in taken:
        unique = f"{label} ({k})"
        k += 1
    return unique


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    args = ap.parse_args(argv)
    lines = read_lines(args.files, "table.py")
    # Rows: every cco figure, then each reference beside the first figure it matches; a reference
    # that matches none (a figure of its own, like a loopback TCP time) gets its own row.
    rows: List[Tuple[dict, Dict[str, float]]] = [(ln, {}) for ln in lines if ln["ref"] is None]
    for ln in lines:
        if ln["ref"] is None:
            continue
        for figure, refs in rows:
            if figure["ref"] is None and matches(ln, figure):
                refs[label_of(ln, refs)] = ln["value"]
                break
        else:
            rows.append((ln, {}))
    print("| bench | op | size | ranks | configuration | cco | references (same run) |")
    print("|---|---|---|---|---|---|---|")
    for figure, refs in rows:
        nbytes = figure["bytes"]
        size = size_text(nbytes, "iB", " ") if isinstance(nbytes, int) else ""
        extra = ", ".join(f"{k}={v}" for k, v in sorted(config(figure).items()))
        unit = figure["metric"]
        if figure["ref"] is None:
            cco = f"{figure['value']:.4g} {unit}"
        else:
            cco = ""
            refs = {label_of(figure, {}): figure["value"]}
        others = ", ".join(f"{k}: {v:.4g} {unit}" for k, v in refs.items())
        print(f"| {figure['bench']} | {figure['op']} | {size} | {figure['ranks']} | {extra} | {cco} | {others} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
