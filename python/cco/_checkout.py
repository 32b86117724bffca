"""Whether this package is the one of a cco checkout, and what that gives.

A package imported from ``<repo>/python/cco`` of a checkout (the tests and
examples put ``<repo>/python`` on the path) may use the checkout's build
tree and headers. An installed package must not: its parent directories
are somebody else's (``<venv>/lib/python3.X``), and a ``build/lib`` found
there would be a guess.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

PACKAGE_DIR = Path(__file__).resolve().parent


def checkout_root() -> Optional[Path]:
    """``<repo>`` when this package is ``<repo>/python/cco`` of a cco checkout, else None."""
    repo = PACKAGE_DIR.parent.parent
    if PACKAGE_DIR.parent.name != "python":
        return None
    if not (repo / "CMakeLists.txt").is_file() or not (repo / "include" / "cco" / "cco.h").is_file():
        return None
    return repo


def header_version(repo: Path) -> str:
    """``MAJOR.MINOR.PATCH`` from the ``CCO_VERSION_*`` lines of the checkout's
    ``cco.h``, the one source of the version (a wheel carries it written out)."""
    text = (repo / "include" / "cco" / "cco.h").read_text()
    parts = []
    for part in ("MAJOR", "MINOR", "PATCH"):
        found = re.search(rf"^#define CCO_VERSION_{part} +(\d+) *$", text, flags=re.M)
        if found is None:
            raise RuntimeError(f"no '#define CCO_VERSION_{part} <number>' line in {repo / 'include/cco/cco.h'}")
        parts.append(found.group(1))
    return ".".join(parts)
