"""Launcher detection and the local rank cco takes from other launchers."""
import pytest

from cco import launch


@pytest.fixture
def clean_env(monkeypatch):
    for name in ("CCO_UNIQUE_ID", "CCO_NRANKS", "CCO_RANK", "CCO_LOCAL_RANK", "RANK", "WORLD_SIZE")\
            + launch._MPI_VARS + launch._LOCAL_RANK_VARS:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_torchrun_local_rank_becomes_cco_local_rank(clean_env):
    clean_env.setenv("RANK", "5")
    clean_env.setenv("WORLD_SIZE", "8")
    clean_env.setenv("LOCAL_RANK", "1")
    assert launch.detect() == "torchrun"
    assert launch.export_local_rank() == 1
    import os
    assert os.environ["CCO_LOCAL_RANK"] == "1"


def test_open_mpi_local_rank(clean_env):
    clean_env.setenv("OMPI_COMM_WORLD_SIZE", "4")
    clean_env.setenv("OMPI_COMM_WORLD_LOCAL_RANK", "3")
    assert launch.export_local_rank("mpi") == 3


def test_slurm_local_id_under_mpi(clean_env):
    clean_env.setenv("PMI_SIZE", "4")
    clean_env.setenv("SLURM_LOCALID", "2")
    assert launch.export_local_rank() == 2


def test_an_existing_cco_local_rank_wins(clean_env):
    clean_env.setenv("RANK", "0")
    clean_env.setenv("WORLD_SIZE", "2")
    clean_env.setenv("LOCAL_RANK", "1")
    clean_env.setenv("CCO_LOCAL_RANK", "0")
    assert launch.export_local_rank() == 0


def test_single_process_and_garbage_set_nothing(clean_env):
    assert launch.detect() == "single"
    assert launch.export_local_rank() is None
    clean_env.setenv("RANK", "0")
    clean_env.setenv("WORLD_SIZE", "2")
    clean_env.setenv("LOCAL_RANK", "x1")
    assert launch.export_local_rank() is None
