"""Creating a communicator under whichever launcher started this process.

cco needs only the 128-byte id on every rank; launchers differ in how it
travels. :func:`init_communicator` picks, in order:

- ``ccorun``: ``CCO_UNIQUE_ID``/``CCO_NRANKS``/``CCO_RANK`` in the
  environment (``Communicator.from_env``);
- ``mpirun``/``srun`` with mpi4py: rank 0 mints, ``MPI.COMM_WORLD.bcast``;
- ``torchrun``: ``RANK``/``WORLD_SIZE`` set; a gloo process group (created
  here if none exists) and ``broadcast_object_list``;
- otherwise one rank.

The examples use it so that one file runs under all of them.
"""
from __future__ import annotations

import os
from typing import Any, List, Optional, Tuple

from .communicator import Communicator, UniqueId

_MPI_VARS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MV2_COMM_WORLD_SIZE")
# Where launchers other than ccorun put a rank's index among the ranks of its
# host: torchrun, Open MPI, MVAPICH, Intel MPI / MPICH (Hydra), Slurm.
_LOCAL_RANK_VARS = ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_RANK",
                    "MPI_LOCALRANKID", "SLURM_LOCALID")
_created_torch_group = False


def detect() -> str:
    """``"ccorun"``, ``"mpi"``, ``"torchrun"`` or ``"single"``."""
    env = os.environ
    if env.get("CCO_UNIQUE_ID") and env.get("CCO_NRANKS") and env.get("CCO_RANK"):
        return "ccorun"
    if any(v in env for v in _MPI_VARS):
        return "mpi"
    if "RANK" in env and "WORLD_SIZE" in env:
        return "torchrun"
    return "single"


def rank_and_size(launcher: Optional[str] = None) -> Tuple[int, int]:
    """(rank, nranks) as the launcher tells them, before any communicator."""
    launcher = launcher or detect()
    env = os.environ
    if launcher == "ccorun":
        return int(env["CCO_RANK"]), int(env["CCO_NRANKS"])
    if launcher == "mpi":
        from mpi4py import MPI

        return MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()
    if launcher == "torchrun":
        return int(env["RANK"]), int(env["WORLD_SIZE"])
    return 0, 1


def broadcast_unique_id(launcher: Optional[str] = None) -> UniqueId:
    """Rank 0's fresh id on every rank, over the launcher's own channel."""
    global _created_torch_group
    launcher = launcher or detect()
    rank, _ = rank_and_size(launcher)
    uid = Communicator.get_unique_id() if rank == 0 else None
    if launcher == "ccorun":
        return UniqueId.from_env()
    if launcher == "mpi":
        from mpi4py import MPI

        return MPI.COMM_WORLD.bcast(uid, root=0)
    if launcher == "torchrun":
        import torch.distributed as dist

        if not dist.is_initialized():
            dist.init_process_group("gloo")
            _created_torch_group = True
        box: List[Any] = [uid]  # rank 0's id, on every rank once broadcast
        dist.broadcast_object_list(box, src=0)
        return box[0]
    assert uid is not None
    return uid


def export_local_rank(launcher: Optional[str] = None) -> Optional[int]:
    """Sets ``CCO_LOCAL_RANK`` from the launcher's own local-rank variable when
    it is unset (ccorun sets it itself), so that a rank that picked no GPU
    gets GPU ``local rank % GPU count``, as under ccorun. cco reads its
    environment once per process: call this before any other cco call.
    Returns the local rank now in the environment, or None."""
    env = os.environ
    if "CCO_LOCAL_RANK" not in env and (launcher or detect()) in ("mpi", "torchrun"):
        for name in _LOCAL_RANK_VARS:
            value = env.get(name, "")
            if value.isdigit():
                env["CCO_LOCAL_RANK"] = value
                break
    value = env.get("CCO_LOCAL_RANK", "")
    return int(value) if value.isdigit() else None


def init_communicator(per_rank_vmm: int = 0, launcher: Optional[str] = None) -> Communicator:
    """A communicator over every rank the launcher started. Under mpirun,
    srun or torchrun, each rank that picked no GPU gets its own
    (:func:`export_local_rank`)."""
    launcher = launcher or detect()
    export_local_rank(launcher)
    if launcher == "ccorun":
        return Communicator.from_env(per_rank_vmm)
    rank, nranks = rank_and_size(launcher)
    uid = broadcast_unique_id(launcher)
    return Communicator.init(nranks, rank, uid, per_rank_vmm=per_rank_vmm)


def finalize() -> None:
    """Tears down what :func:`broadcast_unique_id` set up (a gloo group)."""
    global _created_torch_group
    if _created_torch_group:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
        _created_torch_group = False
