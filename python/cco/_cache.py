"""Where cco keeps what it compiles at run time for this user (the Triton
bitcode, the torch extension): ``$XDG_CACHE_HOME/cco``, else ``~/.cache/cco``.
Each user of it has its own override variable."""
from __future__ import annotations

import os
from pathlib import Path


def user_cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "cco"
