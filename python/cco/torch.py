"""torch integration, both directions.

1. **cco as torch's symmetric-memory backend**: importing this module (or
   :mod:`cco.allocator`) registers backend ``"CCO"`` when torch has CUDA;
   then ``symm_mem.set_backend("CCO")``, ``symm_mem.empty``,
   ``symm_mem.rendezvous`` and torch's own symm_mem ops run on cco memory,
   and :func:`window_of` gives a tensor's cco window to cco's kernels.
   ``CCO_TORCH_BACKEND=0`` skips the registration here (the extension is
   built on first use, see :mod:`cco._torch_ext`); a registration that
   fails here is a warning, and ``import cco.allocator`` raises it.

2. **torch memory into cco**: :func:`import_symmetric_tensor` registers a
   tensor from ``torch.distributed._symmetric_memory`` (any backend) as a
   cco window, with no copy (``ccoWindowRegisterExternal``). cco maps the
   tensor's whole cuMem allocation into its flat VA; the window covers the
   tensor's bytes.

3. **cco memory under torch's caching allocator**: :class:`SymmetricMemPool`
   is a ``torch.cuda.MemPool`` whose allocator is libcco's
   ``cco_torch_malloc`` / ``cco_torch_free``
   (``torch.cuda.memory.CUDAPluggableAllocator``). Tensors created under
   ``with pool.use():`` live in the communicator's symmetric memory, so
   they can be registered as windows and reached by peers::

       pool = SymmetricMemPool(comm)
       with pool.use():
           x = torch.empty(1 << 20, device="cuda")
       win = comm.register_window(x.data_ptr(), x.nbytes)   # collective

   torch's caching allocator asks for whole segments (2 MiB and up) and
   keeps them cached; each segment is one ``ccoMemAlloc``. Allocation order
   decides offsets, so ranks that create the same tensors in the same order
   get symmetric addresses, as windows require. Leaving ``use()`` checks
   that (a collective, :mod:`cco.symmetry`): the tensors made in the block
   must sit at the same offsets on every rank, or every rank raises.

Only one communicator feeds the hooks at a time (the C side holds one
pointer); creating a pool selects its communicator, and destroying that
communicator switches the hooks off. Destroy a communicator only after the
tensors of its pool are gone: their memory is unmapped with it.
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import warnings
from typing import Any, Iterator, List, Optional, Tuple

from . import _lib, symmetry
from ._tensor_window import BackendCommunicator, BackendWindow, TensorWindow, window_of  # noqa: F401
from .communicator import Communicator, set_torch_allocator_comm, torch_allocator_comm
from .errors import CCOInvalidArgument, CCOInvalidUsage, CCOUnsupported
from .resources import RegisteredWindow
from .views import Region, to_torch  # noqa: F401  (re-exported)

BACKEND_ENV = "CCO_TORCH_BACKEND"

# Why backend "CCO" is not registered, when importing this module tried and
# failed (None: registered, or not tried).
backend_error: Optional[BaseException] = None

ALLOC_FN = "cco_torch_malloc"
FREE_FN = "cco_torch_free"


def import_symmetric_tensor(comm: Communicator, tensor: Any) -> RegisteredWindow:
    """Collective: a window over a torch symmetric-memory tensor, zero copy.

    The tensor must start at the base of its allocation (what
    ``symm_mem.empty`` returns; not a slice). The window holds a reference
    to the tensor, so its memory outlives the window.
    """
    import torch

    if not isinstance(tensor, torch.Tensor):
        raise CCOInvalidArgument(f"expected a torch.Tensor, not {type(tensor).__name__}")
    if not tensor.is_cuda:
        raise CCOInvalidArgument("a symmetric-memory tensor lives on a CUDA device")
    if not tensor.is_contiguous():
        raise CCOInvalidArgument("the tensor must be contiguous")
    if tensor.storage_offset() != 0:
        raise CCOInvalidArgument(
            "the tensor is a view at an offset into its storage; import the base tensor "
            "(cco maps whole allocations, starting at their base)")
    return comm.register_external_window(tensor.data_ptr(), tensor.nbytes, keepalive=tensor)


def pluggable_allocator() -> Any:
    """``CUDAPluggableAllocator`` over libcco's hooks (the very library
    this process loaded, so both share the selected communicator)."""
    import torch

    memory = torch.cuda.memory
    cls = getattr(memory, "CUDAPluggableAllocator", None) or getattr(
        torch.cuda, "CUDAPluggableAllocator", None)
    if cls is None:
        raise CCOUnsupported(f"torch {torch.__version__} has no CUDAPluggableAllocator")
    return cls(_lib.library_path(), ALLOC_FN, FREE_FN)


class SymmetricMemPool:
    """A ``torch.cuda.MemPool`` that allocates from `comm`'s symmetric memory.

    check: leaving :meth:`use` checks, collectively, that the tensors made
    in the block are at the same offsets on every rank (:mod:`cco.symmetry`),
    and raises CCOInvalidUsage on every rank when they are not.
    """

    def __init__(self, comm: Communicator, check: bool = True) -> None:
        import torch

        if comm.platform != "cuda":
            raise CCOUnsupported("torch CUDA allocations need a communicator on the cuda platform")
        mem_pool = getattr(torch.cuda, "MemPool", None) or getattr(torch.cuda.memory, "MemPool", None)
        if mem_pool is None:
            raise CCOUnsupported(f"torch {torch.__version__} has no torch.cuda.MemPool (2.5+)")
        self.comm = comm
        self.check = check
        self.allocator = pluggable_allocator()
        set_torch_allocator_comm(comm)
        self.pool = mem_pool(self.allocator.allocator())

    @contextlib.contextmanager
    def use(self, device: Optional[Any] = None) -> Iterator[Any]:
        """Routes this thread's CUDA allocations into the pool; on leaving
        (without an exception) checks their symmetry when ``check`` is on."""
        import torch

        if self.pool is None:
            raise CCOInvalidUsage("this pool was released")
        if torch_allocator_comm() is not self.comm:
            raise CCOInvalidUsage(
                "the torch allocator hooks no longer draw from this pool's communicator "
                "(destroyed, or another pool selected a different one)")
        use_mem_pool = getattr(torch.cuda, "use_mem_pool", None) or getattr(
            torch.cuda.memory, "use_mem_pool", None)
        if use_mem_pool is None:
            raise CCOUnsupported(f"torch {torch.__version__} has no torch.cuda.use_mem_pool")
        before = symmetry.active_addresses(self._snapshot()) if self.check else None
        with use_mem_pool(self.pool, device=device) if device is not None else use_mem_pool(self.pool):
            yield self.pool
        # Not reached when the block raised: a rank that fails must not
        # enter a collective its peers may never reach.
        if before is not None:
            made = symmetry.new_blocks(before, self._snapshot())
            self._check_blocks(made, "the tensors made in SymmetricMemPool.use()")

    def check_symmetry(self, *tensors: Any) -> None:
        """Collective: every rank passes the same tensors of the pool; raises
        CCOInvalidUsage on every rank unless they sit at the same offsets."""
        blocks = [(t.data_ptr(), t.untyped_storage().nbytes()) for t in tensors]
        self._check_blocks(blocks, "the pool's tensors")

    def _check_blocks(self, blocks: List[Tuple[int, int]], what: str) -> None:
        offsets = [(symmetry.slot_offset(self.comm, a), n) for a, n in blocks]
        symmetry.check_symmetric(self.comm, offsets, what)

    def _snapshot(self) -> List[Any]:
        """The pool's segments and blocks, without stack traces."""
        import torch

        if self.pool is None:
            return []
        try:
            return list(self.pool.snapshot(include_traces=False))
        except TypeError:  # torch before include_traces
            return list(torch.cuda.memory_snapshot(self.pool.id))

    def close(self) -> None:
        """Switches the hooks off if they still draw from this communicator.

        Segments torch still caches for the pool are then forgotten by the
        hooks and released only with the communicator; :meth:`release`
        gives them back first.
        """
        if torch_allocator_comm() is self.comm:
            set_torch_allocator_comm(None)

    def release(self) -> None:
        """Drops the pool, hands its cached segments back to cco
        (``torch.cuda.empty_cache`` calls ``cco_torch_free``), then
        :meth:`close`. Every tensor of the pool must be gone by now."""
        import gc

        import torch

        self.pool = None
        gc.collect()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        self.close()


def symmetric_empty(pool: SymmetricMemPool, *shape: int, dtype: Any = None) -> Any:
    """``torch.empty(*shape)`` inside the pool: a tensor in symmetric memory."""
    import torch

    with pool.use():
        return torch.empty(*shape, dtype=dtype or torch.float32, device="cuda")


def window_tensor(region: Region, dtype: Any = None, shape: Any = None, offset: int = 0) -> Any:
    """A torch tensor over a window, allocation or peer view (see views.to_torch)."""
    return to_torch(region, dtype, shape, offset)


def _register_backend() -> None:
    """Registers backend "CCO" when torch is installed with CUDA, unless
    CCO_TORCH_BACKEND=0; a failure is a warning (see ``backend_error``)."""
    global backend_error
    if os.environ.get(BACKEND_ENV, "1") == "0" or importlib.util.find_spec("torch") is None:
        return
    try:
        import torch

        if not torch.cuda.is_available():
            return
        from . import allocator  # noqa: F401  (registers on import)
    except Exception as exc:  # noqa: BLE001 - reported, and raised by `import cco.allocator`
        backend_error = exc
        warnings.warn(f"cco.torch: torch backend \"CCO\" is not registered: {exc}", stacklevel=2)


_register_backend()
