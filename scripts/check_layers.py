#!/usr/bin/env python3
"""The layering check: every file of src/ includes only headers of its own
layer or of the layers below it (CONTRIBUTING.md, docs/architecture.md).

    base -> boot -> platform -> mem -> transport -> coll -> comm -> ops

Inside transport/, each transport folder may include its own headers, the
transport interface (transport/transport.h) and the network engine
(transport/net/), never another transport; the network engine includes no
other part of transport/. Library headers are spelled from src/
("base/error.h"), public ones as "cco/...", so one file has one name.

Usage: check_layers.py [SRC_DIR]   (exit 1 and one line per violation)
"""
import os
import re
import sys

LAYERS = ["base", "boot", "platform", "mem", "transport", "coll", "comm", "ops"]
RANK = {name: i for i, name in enumerate(LAYERS)}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def transport_part(path):
    """'transport/gda/x.c' -> 'gda'; 'transport/transport.h' -> ''."""
    parts = path.split("/")
    return parts[1] if len(parts) > 2 else ""


def check_include(src_rel, target):
    """Why `src_rel` may not include `target`, or None."""
    layer = src_rel.split("/")[0]
    if target.startswith("cco/"):
        return None
    top = target.split("/")[0]
    if "/" not in target or top not in RANK:
        return 'spell library headers from src/ ("base/error.h") or as "cco/..."'
    if RANK[top] > RANK[layer]:
        return "%s/ is above %s/" % (top, layer)
    if top == "transport" and layer == "transport":
        mine, theirs = transport_part(src_rel), transport_part(target)
        if mine == "net" and theirs != "net":
            return "the network engine sits below the transports"
        if theirs not in ("", "net", mine):
            return "transports do not include each other (%s -> %s)" % (mine, theirs)
    return None


def check_tree(src_dir):
    problems = []
    for root, _, files in os.walk(src_dir):
        for name in sorted(files):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, src_dir).replace(os.sep, "/")
            layer = rel.split("/")[0]
            if layer not in RANK:
                problems.append("%s: not inside a layer folder (%s)" % (rel, ", ".join(LAYERS)))
                continue
            with open(path, encoding="utf-8") as f:
                text = f.read()
            for m in INCLUDE.finditer(text):
                why = check_include(rel, m.group(1))
                if why:
                    line = text.count("\n", 0, m.start()) + 1
                    problems.append('%s:%d: #include "%s": %s' % (rel, line, m.group(1), why))
    return problems


def main(argv):
    src_dir = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "src")
    problems = check_tree(src_dir)
    for p in problems:
        print(p)
    if problems:
        print("layering check: %d violation(s)" % len(problems))
        return 1
    print("layering check: every include of %s goes down the layers" % os.path.normpath(src_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
