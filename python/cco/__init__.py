"""cco: GPU communication with symmetric memory, from Python.

A pure-Python (ctypes) binding of libcco. The API of the CCO guide (docs/design.md)::

    from cco import Communicator, CCODevCommRequirements, GDA_CONNECTION_NONE
    uid = Communicator.get_unique_id() if rank == 0 else None
    uid = comm_mpi.bcast(uid, root=0)
    with Communicator.init(nranks, rank, uid, per_rank_vmm=256 << 20) as comm:
        mem = comm.alloc_mem(4096)
        win = comm.register_window(mem.ptr, mem.size)
        reqs = CCODevCommRequirements()
        reqs.gda_connection_type = GDA_CONNECTION_NONE
        dc = comm.create_dev_comm(reqs)
        comm.barrier()

libcco is found through ``CCO_LIBRARY``, ``cco/lib/`` next to this package
(where the wheel puts it), or the ``build/lib`` of the checkout this package
sits in (see docs/python.md).
Importing ``cco`` does not load it; the first call that needs it does.
``cco.torch`` (torch integration, torch backend "CCO") loads on first use.
"""
import importlib
from typing import Any

from . import cuda, launch  # noqa: F401  (light: cupy and mpi4py load on use)
from ._lib import LibraryNotFoundError, library_path, version
from ._version import __version__
from .communicator import Communicator, Team, UniqueId, set_torch_allocator_comm
from .devcomm import (
    GDA_CONNECTION_CROSSNODE,
    GDA_CONNECTION_FULL,
    GDA_CONNECTION_NONE,
    GDA_CONNECTION_RAIL,
    TEAM_CROSS_NODE,
    TEAM_LSA,
    TEAM_RAIL,
    TEAM_WORLD,
    CCODevCommRequirements,
    DevComm,
)
from .errors import (
    CCOArgumentOverflow,
    CCOCudaError,
    CCOError,
    CCOInternalError,
    CCOInvalidArgument,
    CCOInvalidUsage,
    CCONetError,
    CCONotInWindow,
    CCOOutOfMemory,
    CCORemoteError,
    CCOSystemError,
    CCOTimeout,
    CCOUnsupported,
)
from .resources import AllocatedMemory, RegisteredWindow
from .views import PLATFORM_CUDA, PLATFORM_HOST, CudaArray, MemoryRegion, from_pointer, to_cupy, to_torch

__all__ = [
    "AllocatedMemory", "CCOArgumentOverflow", "CCOCudaError", "CCODevCommRequirements",
    "CCOError", "CCOInternalError", "CCOInvalidArgument", "CCOInvalidUsage", "CCONetError", "CCONotInWindow",
    "CCOOutOfMemory", "CCORemoteError", "CCOSystemError", "CCOTimeout", "CCOUnsupported",
    "Communicator", "CudaArray", "DevComm", "GDA_CONNECTION_CROSSNODE", "GDA_CONNECTION_FULL",
    "GDA_CONNECTION_NONE", "GDA_CONNECTION_RAIL", "LibraryNotFoundError", "MemoryRegion",
    "PLATFORM_CUDA", "PLATFORM_HOST", "RegisteredWindow", "TEAM_CROSS_NODE", "TEAM_LSA",
    "TEAM_RAIL", "TEAM_WORLD", "Team", "UniqueId", "from_pointer", "library_path",
    "set_torch_allocator_comm", "to_cupy", "to_torch", "version",
]


def __getattr__(name: str) -> Any:
    # cco.torch imports torch and registers the torch backend, so it loads
    # on first use (cco.torch.x, import cco.torch), not with the package.
    if name == "torch":
        return importlib.import_module(".torch", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
