"""The cco window behind a tensor of torch backend "CCO" (``cco.torch.window_of``).

Every rendezvous of a "CCO" tensor registers its allocation as a window of
the group's cco communicator. The backend owns both; Python gets them as a
:class:`BackendCommunicator` (a :class:`~cco.Communicator` that never
destroys the C communicator) and a :class:`BackendWindow` (a
:class:`~cco.RegisteredWindow` that cannot be deregistered by hand: it goes
with its tensor), so cco's own kernels, device communicators and SDMA calls
take the same memory that torch's ops use; so do its collectives
(``window_of(t).communicator.all_reduce(t)``: the tensor is found in its
window).
"""
from __future__ import annotations

import threading
from typing import Any, Dict, NamedTuple, Optional

from . import _lib
from .communicator import Communicator
from .errors import CCOInvalidArgument, CCOInvalidUsage
from .resources import RegisteredWindow


class BackendCommunicator(Communicator):
    """A process group's communicator, owned by the torch backend.

    Everything made through it from Python (device communicators, windows,
    memory) is released by :meth:`destroy` as usual; the communicator itself
    lives until the backend shuts down at interpreter exit.
    """

    # The process group this communicator serves, once window_of saw it:
    # where its tensors' windows are looked up.
    group_name: Optional[str] = None

    def _destroy_handle(self, handle: int) -> int:
        return _lib.SUCCESS

    def _external_alias(self, ptr: int, nbytes: int) -> Optional[int]:
        """Also a tensor of the backend: the extension knows its window and
        where it starts there; its alias is the window's flat-VA copy."""
        found = super()._external_alias(ptr, nbytes)
        if found is not None or self.group_name is None:
            return found
        from . import allocator

        (comm, _window, local_ptr, _window_bytes, offset, _buffer_bytes, pad_offset,
         _name, error) = allocator.extension().window_of(ptr, self.group_name)
        # Not a backend tensor, not of this group, or past the tensor's buffer
        # (which ends before its signal pad).
        if error or comm != self._h or offset + nbytes > pad_offset:
            return None
        return int(local_ptr) + int(offset)


class BackendWindow(RegisteredWindow):
    """A window the torch backend registered: the segment a tensor is a
    range of, or the tensor's own allocation (its buffer, then torch's
    signal pad)."""

    def release(self) -> None:
        raise CCOInvalidUsage("this window belongs to the torch backend: it goes with its tensor")

    deregister = release

    def _release_c(self) -> int:
        return _lib.SUCCESS  # the backend deregisters it


class TensorWindow(NamedTuple):
    """A tensor's place in cco: its window and where the tensor starts in it."""

    window: BackendWindow  # ``window.handle`` is the ccoWindow_t kernels take
    offset: int  # byte offset of the tensor's first element in the window
    signal_pad_offset: int  # torch's signal pad starts here in the window
    communicator: BackendCommunicator  # the group's communicator
    group: str  # the process group's name


_lock = threading.Lock()
_communicators: Dict[int, BackendCommunicator] = {}


def _communicator(handle: int, group: str) -> BackendCommunicator:
    with _lock:
        comm = _communicators.get(handle)
        if comm is None or not comm.alive:
            comm = _communicators[handle] = BackendCommunicator(handle)
        if comm.group_name is None:
            comm.group_name = group  # one communicator per group (and device)
        return comm


def _group_name(group: Any) -> Optional[str]:
    if group is None or isinstance(group, str):
        return group
    name = getattr(group, "group_name", None)
    if isinstance(name, str):
        return name
    raise CCOInvalidArgument(f"group must be a process group or its name, not {type(group).__name__}")


def window_of(tensor: Any, group: Any = None) -> TensorWindow:
    """The cco window of a "CCO" tensor after its rendezvous over `group`
    (a process group or its name; None: the group it was allocated for, or
    its only rendezvous). The window keeps the tensor alive."""
    import torch

    from . import allocator

    if not isinstance(tensor, torch.Tensor) or not tensor.is_cuda:
        raise CCOInvalidArgument("window_of takes a CUDA tensor of symm_mem.empty")
    (comm, window, local_ptr, window_bytes, offset, _buffer_bytes, pad_offset,
     name, error) = allocator.extension().window_of(tensor.data_ptr(), _group_name(group))
    if error:
        raise CCOInvalidUsage(f"window_of: {error}")
    communicator = _communicator(comm, name)
    win = BackendWindow(communicator, window, local_ptr, window_bytes, owns=None, keepalive=tensor)
    return TensorWindow(win, offset, pad_offset, communicator, name)
