"""The console scripts ``ccorun`` and ``cco-info`` of the wheel.

The wheel carries the programs themselves in ``cco/bin/`` (they find
``cco/lib/libcco.so.0`` through their ``$ORIGIN`` runpath); pip puts these
small entry points on PATH, and each replaces itself with its program, so
signals and the exit status are the program's own.
"""
from __future__ import annotations

import os
import sys

from ._checkout import PACKAGE_DIR


def _exec(name: str) -> None:
    program = PACKAGE_DIR / "bin" / name
    if not os.access(program, os.X_OK):
        sys.exit(f"{name}: {program} is missing; this cco package was not installed from its wheel "
                 "(pip install . at the repository root builds one)")
    os.execv(program, [name] + sys.argv[1:])


def ccorun() -> None:
    _exec("ccorun")


def cco_info() -> None:
    _exec("cco-info")
