"""Shared setup of the Python tests (CPU, host platform).

Ranks run as processes started by ccorun, as multiprocessing (spawn)
children, or as threads of the test process; each way has its own test
file. Everything here runs on the host platform, so no GPU is needed.
"""
import os
import subprocess
import sys
from pathlib import Path
from typing import List, Optional

import pytest

REPO = Path(__file__).resolve().parents[2]
PYTHON_DIR = REPO / "python"
TESTS_DIR = Path(__file__).resolve().parent

# The package under test is the checkout's, whatever else is installed.
if str(PYTHON_DIR) not in sys.path:
    sys.path.insert(0, str(PYTHON_DIR))

# Host platform everywhere (also on a GPU machine: this is the CPU suite),
# and short enough timeouts that a broken collective fails instead of hanging.
os.environ["CCO_PLATFORM"] = "host"
os.environ.setdefault("CCO_BOOTSTRAP_TIMEOUT", "60")
os.environ.setdefault("CCO_IGNORE_CPU_AFFINITY", "1")


def bin_dir() -> Path:
    """The build's bin directory: CCO_BIN, else next to CCO_LIBRARY, else build/bin."""
    if os.environ.get("CCO_BIN"):
        return Path(os.environ["CCO_BIN"])
    if os.environ.get("CCO_LIBRARY"):
        return Path(os.environ["CCO_LIBRARY"]).resolve().parent.parent / "bin"
    return REPO / "build" / "bin"


def rank_env(extra: Optional[dict] = None) -> dict:
    """Environment for rank processes: this package first on the path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PYTHON_DIR), env.get("PYTHONPATH")]))
    env.update(extra or {})
    return env


def run_ranks(n: int, args: List[str], timeout: int = 120, extra_env: Optional[dict] = None,
              prefix: bool = True, hosts: int = 1) -> subprocess.CompletedProcess:
    """`ccorun -n N python3 ARGS...`, output captured; hosts > 1: the ranks
    spread over that many virtual hosts (GDA between them)."""
    ccorun = bin_dir() / "ccorun"
    if not ccorun.exists():
        pytest.skip(f"no ccorun at {ccorun} (build the library first)")
    cmd = [str(ccorun), "-t", str(timeout), "-n", str(n)] + (["-p"] if prefix else [])
    cmd += ["--virtual-hosts", str(hosts)] if hosts > 1 else []
    cmd += [sys.executable] + args
    return subprocess.run(cmd, env=rank_env(extra_env), capture_output=True, text=True,
                          timeout=timeout + 30)


def describe(proc: subprocess.CompletedProcess) -> str:
    return f"exit {proc.returncode}\n--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}"


@pytest.fixture
def comm():
    """A one-rank communicator of this process (host platform)."""
    from cco import Communicator

    c = Communicator.init(1, 0, Communicator.get_unique_id(), per_rank_vmm=1 << 30)
    yield c
    c.destroy()
