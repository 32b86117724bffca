"""Handles of what a communicator hands out: memory and windows.

Each handle is tracked by its communicator, which releases whatever is
left, newest first, when it is destroyed. A released handle refuses every
use with :class:`~cco.errors.CCOInvalidUsage` before any C call, so Python
code never passes a stale pointer to the library.

Releasing twice by hand (``mem.free()`` twice, ``win.deregister()`` twice)
raises :class:`~cco.errors.CCOInvalidUsage`; leaving a ``with`` block
releases only what is still alive, so it never raises for that.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Tuple, TypeVar

from ._abi import WindowDeviceStruct
from ._convert import SIZE_T, to_c
from .errors import CCOInvalidUsage
from .views import MemoryRegion, Region

if TYPE_CHECKING:  # pragma: no cover
    from .communicator import Communicator

ResourceT = TypeVar("ResourceT", bound="Resource")


class Resource:
    """Base of every tracked handle: liveness and the ``with`` protocol."""

    kind = "resource"

    def __init__(self, comm: "Communicator") -> None:
        self._comm = comm
        self._alive = True

    @property
    def alive(self) -> bool:
        """False once released (by hand or by the communicator's destroy)."""
        return self._alive

    @property
    def communicator(self) -> "Communicator":
        return self._comm

    def _check_alive(self) -> None:
        if not self._alive:
            raise CCOInvalidUsage(f"this {self.kind} was already released")

    def _release_c(self) -> int:
        """The C call that releases the resource; returns its ccoResult_t."""
        raise NotImplementedError

    def release(self) -> None:
        """Releases the resource now (what free/deregister/destroy call)."""
        raise NotImplementedError

    def __enter__(self: ResourceT) -> ResourceT:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._alive and self._comm.alive:
            self.release()


class AllocatedMemory(Resource, Region):
    """Symmetric memory from :meth:`Communicator.alloc_mem` or ``import_mem``.

    ``ptr`` is this rank's address in the flat VA; ``size`` the size asked
    for (the library rounds the allocation up to its granularity).
    """

    kind = "allocation"

    def __init__(self, comm: "Communicator", ptr: int, size: int, imported: bool = False,
                 source_ptr: Optional[int] = None, keepalive: Any = None) -> None:
        super().__init__(comm)
        self._ptr = ptr
        self.size = size
        self.imported = imported
        self.source_ptr = source_ptr  # the external address an import maps
        self._keepalive = keepalive

    @property
    def ptr(self) -> int:
        self._check_alive()
        return self._ptr

    @property
    def platform(self) -> str:
        return self._comm.platform

    def _view_target(self) -> Tuple[int, int, str]:
        return self.ptr, self.size, self._comm.platform

    def _cuda_device(self) -> Optional[int]:
        return self._comm.cuda_device

    def _release_c(self) -> int:
        return self._comm._lib.ccoMemFree(self._comm._h, self._ptr)

    def release(self) -> None:
        self._comm.free_mem(self)

    free = release

    def __repr__(self) -> str:
        state = f"ptr={self._ptr:#x}" if self._alive else "released"
        return f"AllocatedMemory({state}, size={self.size}{', imported' if self.imported else ''})"


class RegisteredWindow(Resource, Region):
    """A collective window. ``handle`` is the ``ccoWindow_t`` kernels take
    (a device-visible descriptor address); ``local_ptr`` this rank's copy."""

    kind = "window"

    def __init__(self, comm: "Communicator", handle: int, local_ptr: int, size: int,
                 owns: Optional[str] = None, memory: Optional[AllocatedMemory] = None,
                 keepalive: Any = None, source_ptr: Optional[int] = None) -> None:
        super().__init__(comm)
        self._handle = handle
        self._local_ptr = local_ptr
        self.size = size
        self.owns = owns  # None, "alloc" or "external": what deregistering also releases
        self.memory = memory  # the AllocatedMemory it was registered over, if tracked
        self._keepalive = keepalive  # e.g. the torch tensor of an external window
        # An external window's memory at its own address (local_ptr is its
        # alias in the flat VA): a tensor there is still in this window.
        self.source_ptr = source_ptr

    @property
    def handle(self) -> int:
        self._check_alive()
        return self._handle

    @property
    def local_ptr(self) -> int:
        self._check_alive()
        return self._local_ptr

    ptr = local_ptr

    @property
    def platform(self) -> str:
        return self._comm.platform

    def info(self) -> WindowDeviceStruct:
        """A host copy of the descriptor (``ccoWindowGetInfo``)."""
        return self._comm.window_info(self)

    def peer_ptr(self, peer: int, offset: int = 0) -> int:
        """Address on this host of world rank `peer`'s copy of byte `offset`."""
        self._check_alive()
        offset = to_c(SIZE_T, "offset", offset, low=0, high=self.size - 1)
        return self._comm.peer_ptr(self._local_ptr + offset, peer)

    def peer(self, peer: int) -> MemoryRegion:
        """World rank `peer`'s copy of the whole window, to take views of."""
        return MemoryRegion(self.peer_ptr(peer), self.size, self._comm.platform, owner=self)

    def _view_target(self) -> Tuple[int, int, str]:
        return self.local_ptr, self.size, self._comm.platform

    def _cuda_device(self) -> Optional[int]:
        return self._comm.cuda_device

    def _release_c(self) -> int:
        return self._comm._lib.ccoWindowDeregister(self._comm._h, self._handle)

    def release(self) -> None:
        self._comm.deregister_window(self)

    deregister = release

    def __repr__(self) -> str:
        if not self._alive:
            return f"RegisteredWindow(released, size={self.size})"
        return (f"RegisteredWindow(handle={self._handle:#x}, local_ptr={self._local_ptr:#x}, "
                f"size={self.size}{', owns ' + self.owns if self.owns else ''})")
