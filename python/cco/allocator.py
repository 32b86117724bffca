"""Importing this module registers cco as torch's symmetric-memory backend "CCO".

    import cco.allocator  # noqa: F401  (registers "CCO")
    import torch.distributed._symmetric_memory as symm_mem

    symm_mem.set_backend("CCO")
    t = symm_mem.empty(1 << 20, device="cuda")
    hdl = symm_mem.rendezvous(t, dist.group.WORLD.group_name)
    hdl.buffer_ptrs_dev            # peers' copies, for Triton or CUDA kernels

Each tensor is its own cuMem allocation that can be exported as an fd, with
torch's signal pad after the buffer. Its first rendezvous over a process
group joins the group's cco communicator (made once per group, its unique
id passed through the group's store) and registers the allocation there as
an external window: peers' copies are addresses in that window's flat VA,
and ``cco.torch.window_of(t)`` gives the window to cco's own kernels.

Tensors of one device share a heap of ``CCO_TORCH_SLOT_SIZE`` bytes of
address space (32 GiB by default; a number of bytes, or with a K/M/G/T
suffix), and so does each group's communicator per rank. The backend shuts
down at interpreter exit: the groups' communicators go, and tensors still
alive keep their memory for local use. docs/torch.md says more.

The C++ side is built on first import and cached (``cco._torch_ext``).
"""
from __future__ import annotations

import atexit
import os
from types import ModuleType
from typing import Dict

from . import _torch_ext

BACKEND = "CCO"
SLOT_ENV = "CCO_TORCH_SLOT_SIZE"
DEFAULT_SLOT_BYTES = 32 << 30

def slot_bytes() -> int:
    """The heap and group-communicator slot size: ``CCO_TORCH_SLOT_SIZE`` or 32 GiB."""
    text = os.environ.get(SLOT_ENV, "").strip()
    return _torch_ext.parse_size(text, SLOT_ENV) if text else DEFAULT_SLOT_BYTES


_ext: ModuleType = _torch_ext.load()
_ext.register(slot_bytes())
# Before the interpreter tears down: the groups' communicators say goodbye
# to their peers while every library is still there.
atexit.register(_ext.shutdown)


def extension() -> ModuleType:
    """The loaded C++ extension (``register``, ``shutdown``, ``window_of``, ``stats``)."""
    return _ext


def stats() -> Dict[str, int]:
    """Live allocations of the backend, their bytes (signal pads included),
    and rendezvous (allocation x group) still held."""
    return dict(_ext.stats())


def shutdown() -> None:
    """What interpreter exit does: destroys the groups' communicators and
    the idle heaps, and refuses new allocations. Tensors still alive keep
    their memory for local use."""
    _ext.shutdown()
