"""Importing this module registers cco as torch's symmetric-memory backend "CCO".

    import cco.allocator  # noqa: F401  (registers "CCO")
    import torch.distributed._symmetric_memory as symm_mem

    symm_mem.set_backend("CCO")
    t = symm_mem.empty(1 << 20, device="cuda")
    hdl = symm_mem.rendezvous(t, dist.group.WORLD.group_name)
    hdl.buffer_ptrs_dev            # peers' copies, for Triton or CUDA kernels

A tensor (torch's signal pad after its buffer) is a range of a segment: a
cuMem allocation of ``CCO_TORCH_SEGMENT_SIZE`` bytes (64 MiB by default; 0
turns segments off) that can be exported as an fd; a tensor larger than a
quarter of a segment is an allocation of its own. The first rendezvous over
a process group joins the group's cco communicator (made once per group, its
unique id passed through the group's store); a segment is registered there
as an external window the first time the group needs it, so later
rendezvous of its tensors only exchange offsets. Peers' copies are addresses
in the windows' flat VA, and ``cco.torch.window_of(t)`` gives the window to
cco's own kernels.

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
from .errors import CCOInvalidArgument

BACKEND = "CCO"
SLOT_ENV = "CCO_TORCH_SLOT_SIZE"
DEFAULT_SLOT_BYTES = 32 << 30
SEGMENT_ENV = "CCO_TORCH_SEGMENT_SIZE"
DEFAULT_SEGMENT_BYTES = 64 << 20
_GRANULARITY = 2 << 20  # cuMem's granularity on NVIDIA GPUs

def slot_bytes() -> int:
    """The heap and group-communicator slot size: ``CCO_TORCH_SLOT_SIZE`` or 32 GiB."""
    text = os.environ.get(SLOT_ENV, "").strip()
    return _torch_ext.parse_size(text, SLOT_ENV) if text else DEFAULT_SLOT_BYTES


def segment_bytes() -> int:
    """The segment size: ``CCO_TORCH_SEGMENT_SIZE`` (0: every tensor is an
    allocation of its own) or 64 MiB. A multiple of 2 MiB, within the slot."""
    text = os.environ.get(SEGMENT_ENV, "").strip()
    if text == "0":
        return 0
    size = _torch_ext.parse_size(text, SEGMENT_ENV) if text else DEFAULT_SEGMENT_BYTES
    if size % _GRANULARITY or size > slot_bytes():
        raise CCOInvalidArgument(f"{SEGMENT_ENV}={text!r}: 0 or a multiple of 2 MiB no larger than "
                         f"{SLOT_ENV} ({slot_bytes()} bytes)")
    return size


_ext: ModuleType = _torch_ext.load()
_ext.register(slot_bytes(), segment_bytes())
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
