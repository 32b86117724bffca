"""The Python examples on the host platform, as CI runs them."""
import importlib.util
import re
import shutil
import subprocess
import sys

import pytest

from conftest import REPO, describe, rank_env, run_ranks

EXAMPLES = REPO / "examples" / "python"


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("example,args", [
    ("01_barrier.py", []),
    ("02_lsa_put.py", ["--bytes", "4096", "--iters", "3"]),
    ("03_lsa_allreduce.py", ["--count", "10000", "--iters", "3"]),
    ("04_moe_pipeline.py", ["--tokens", "16", "--hidden", "128", "--iters", "2"]),
])
def test_example_under_ccorun(example, args, n):
    proc = run_ranks(n, [str(EXAMPLES / example)] + args)
    assert proc.returncode == 0, describe(proc)
    assert proc.stdout.count("ok\n") == n, describe(proc)
    assert re.search(r"\((\w+, )?host", proc.stdout), describe(proc)


def test_barrier_example_alone():
    proc = subprocess.run([sys.executable, str(EXAMPLES / "01_barrier.py")], env=rank_env(),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "(single, host" in proc.stdout, describe(proc)


def test_barrier_example_under_mpirun():
    mpirun = shutil.which("mpirun")
    if not mpirun or importlib.util.find_spec("mpi4py") is None:
        pytest.skip("OpenMPI mpirun or mpi4py is not installed")
    cmd = [mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "2", sys.executable,
           str(EXAMPLES / "01_barrier.py")]
    proc = subprocess.run(cmd, env=rank_env({"OMPI_MCA_rmaps_base_oversubscribe": "1"}),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, describe(proc)
    assert proc.stdout.count("(mpi, host") == 2, describe(proc)


@pytest.mark.parametrize("example", ["05_tp_mlp.py", "06_gemm_a2a.py"])
def test_gpu_only_examples_compile(example):
    """The fused-op examples need a GPU (tests/gpu/run_gpu_tests.sh runs them); here they must compile."""
    import py_compile
    py_compile.compile(str(EXAMPLES / example), doraise=True, cfile=str(REPO / "build" / f"{example}.pyc"))
