"""Zero-copy views of symmetric memory.

Symmetric memory is plain memory at a known address: on the host platform
CPU memory (memfd mappings), on the cuda platform device memory (cuMem
mappings). A view is an array object over that address, with no copy:

- host platform: ``memoryview`` and ``numpy.ndarray`` (and CPU torch
  tensors through :func:`to_torch`);
- cuda platform: objects with ``__cuda_array_interface__``, which
  ``torch.as_tensor(obj, device="cuda")`` and ``cupy.asarray(obj)`` take
  without copying (:func:`to_torch` and :func:`to_cupy` do that for you).

On both platforms a region is also a DLPack producer (``numpy.from_dlpack``,
``torch.from_dlpack``, ``cupy.from_dlpack`` take it): as flat bytes, or
with a dtype and a shape through :meth:`Region.dlpack`. See :mod:`cco.dlpack`.

A peer's part of a window is a view too (``win.peer(p)``): writing into it
writes into the peer's memory. numpy, torch and cupy are imported only when
a view of their kind is asked for.

Lifetime: a view keeps the Python object it came from alive, but not the
mapping. Once the window is deregistered, the memory freed or the
communicator destroyed, the address is unmapped and touching an old view
crashes the process (SIGSEGV on the host, an illegal address on the GPU),
exactly as a dangling pointer in C would. Drop views first.
"""
from __future__ import annotations

import ctypes
from typing import Any, Dict, Optional, Sequence, Tuple, Union

from ._convert import INT, POINTER, SIZE_T, to_c
from .dlpack import DL_BFLOAT, KDL_CPU, KDL_CUDA, DLDtype, DLPackArray, dtype_of_typestr
from .errors import CCOInvalidArgument, CCOUnsupported

PLATFORM_HOST = "host"
PLATFORM_CUDA = "cuda"

Shape = Union[int, Sequence[int], None]

# typestr and size of common dtype names, for when numpy is not installed.
_TYPESTRS = {
    "int8": "|i1", "uint8": "|u1", "int16": "<i2", "uint16": "<u2", "int32": "<i4",
    "uint32": "<u4", "int64": "<i8", "uint64": "<u8", "float16": "<f2", "float32": "<f4",
    "float64": "<f8", "bool": "|b1",
}


def _typestr(dtype: Any) -> Tuple[str, int]:
    """(array-interface typestr, item size) of a numpy-style dtype."""
    try:
        import numpy as np
    except ImportError:
        pass
    else:
        try:
            dt = np.dtype(dtype)
        except TypeError as exc:
            raise CCOInvalidArgument(f"unknown dtype {dtype!r}: {exc}") from None
        return dt.str, dt.itemsize
    name = str(dtype)
    if name in _TYPESTRS:
        name = _TYPESTRS[name]
    if len(name) >= 3 and name[0] in "<>|=" and name[1] in "iufb" and name[2:].isdigit():
        return name, int(name[2:])
    raise CCOInvalidArgument(f"unknown dtype {dtype!r} (install numpy for full dtype support)")


def _dl_dtype(dtype: Any) -> Tuple[DLDtype, int]:
    """(DLDataType, item size) of a numpy-style or torch dtype; bfloat16 included,
    which numpy does not know."""
    if type(dtype).__module__ == "torch":
        dtype = str(dtype).rpartition(".")[2]  # torch.float32 -> "float32"
    if str(dtype) == "bfloat16":
        return (DL_BFLOAT, 16, 1), 2
    typestr, itemsize = _typestr(dtype)
    return dtype_of_typestr(typestr), itemsize


def _dl_device(region: Region) -> Tuple[int, int]:
    """The region's DLPack device: the CPU on the host platform, its GPU on cuda."""
    _, _, platform = region._view_target()
    if platform == PLATFORM_HOST:
        return KDL_CPU, 0
    device = region._cuda_device()
    if device is None or device < 0:
        raise BufferError("the CUDA device of this region is unknown: pass device= to "
                          "from_pointer()")
    return KDL_CUDA, device


def _span(nbytes: int, itemsize: int, shape: Shape, offset: int) -> Tuple[Tuple[int, ...], int]:
    """Validated (shape, byte count) of a view of `nbytes` starting at `offset`."""
    if not isinstance(offset, int) or offset < 0 or offset > nbytes:
        raise CCOInvalidArgument(f"offset {offset!r} outside the region of {nbytes} bytes")
    if shape is None:
        shape = ((nbytes - offset) // itemsize,)
    elif isinstance(shape, int):
        shape = (shape,)
    shape = tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise CCOInvalidArgument(f"negative extent in shape {shape}")
    count = 1
    for s in shape:
        count *= s
    need = count * itemsize
    if offset + need > nbytes:
        raise CCOInvalidArgument(
            f"a view of shape {shape} ({need} bytes) at offset {offset} does not fit the "
            f"region of {nbytes} bytes"
        )
    return shape, need


class Region:
    """A byte range of symmetric memory that views can be taken of.

    Subclasses provide :meth:`_view_target`; every view method starts there,
    so a released resource refuses to hand out new views.
    """

    def _view_target(self) -> Tuple[int, int, str]:
        """(address, size in bytes, platform) of the region."""
        raise NotImplementedError

    def _cuda_device(self) -> Optional[int]:
        """The CUDA device ordinal of a cuda-platform region; None when unknown."""
        return None

    def memoryview(self, offset: int = 0, nbytes: Optional[int] = None) -> memoryview:
        """Writable ``memoryview`` of bytes (host platform only)."""
        return as_memoryview(self, offset, nbytes)

    def numpy(self, dtype: Any = "uint8", shape: Shape = None, offset: int = 0) -> Any:
        """``numpy.ndarray`` over the region (host platform only)."""
        return as_numpy(self, dtype, shape, offset)

    def cuda_array(self, dtype: Any = "uint8", shape: Shape = None, offset: int = 0) -> "CudaArray":
        """An object with ``__cuda_array_interface__`` (cuda platform only)."""
        return as_cuda_array(self, dtype, shape, offset)

    def torch(self, dtype: Any = None, shape: Shape = None, offset: int = 0) -> Any:
        """A torch tensor over the region: CPU on host, CUDA on cuda."""
        return to_torch(self, dtype, shape, offset)

    def cupy(self, dtype: Any = "uint8", shape: Shape = None, offset: int = 0) -> Any:
        """A cupy array over the region (cuda platform only)."""
        return to_cupy(self, dtype, shape, offset)

    def dlpack(self, dtype: Any = "uint8", shape: Shape = None, offset: int = 0) -> DLPackArray:
        """A DLPack producer over the region with this dtype and shape (both platforms)."""
        return as_dlpack(self, dtype, shape, offset)

    def __dlpack_device__(self) -> Tuple[int, int]:
        """``(kDLCPU, 0)`` on the host platform, ``(kDLCUDA, ordinal)`` on cuda."""
        return _dl_device(self)

    def __dlpack__(self, *, stream: Any = None, max_version: Optional[Tuple[int, int]] = None,
                   dl_device: Optional[Tuple[int, int]] = None, copy: Optional[bool] = None) -> Any:
        """The whole region as flat ``uint8``; :meth:`dlpack` for a dtype and a shape.
        The arguments are :meth:`cco.dlpack.DLPackArray.__dlpack__`'s."""
        return as_dlpack(self).__dlpack__(stream=stream, max_version=max_version,
                                          dl_device=dl_device, copy=copy)


class MemoryRegion(Region):
    """A plain (address, size, platform) range; ``owner`` is kept alive.
    The address and the size must fit a pointer and a ``size_t``: views are
    made with ctypes, which would keep only their low 64 bits. ``device`` is
    the CUDA ordinal DLPack reports; when None, the owner's (a window's, for
    its peers' copies)."""

    def __init__(self, ptr: int, size: int, platform: str, owner: Any = None,
                 device: Optional[int] = None) -> None:
        if platform not in (PLATFORM_HOST, PLATFORM_CUDA):
            raise CCOInvalidArgument(f"platform must be 'host' or 'cuda', not {platform!r}")
        self.ptr = to_c(POINTER, "ptr", int(ptr), low=0)
        self.size = to_c(SIZE_T, "size", int(size), low=0)
        self.platform = platform
        self.owner = owner
        self.device = None if device is None else to_c(INT, "device", device, low=0)

    def _view_target(self) -> Tuple[int, int, str]:
        return self.ptr, self.size, self.platform

    def _cuda_device(self) -> Optional[int]:
        if self.device is not None:
            return self.device
        return self.owner._cuda_device() if isinstance(self.owner, Region) else None

    def __repr__(self) -> str:
        return f"MemoryRegion(ptr={self.ptr:#x}, size={self.size}, platform={self.platform!r})"


def _host_target(region: Region, what: str) -> Tuple[int, int]:
    ptr, size, platform = region._view_target()
    if platform != PLATFORM_HOST:
        raise CCOUnsupported(
            f"{what} needs host memory, but this region is {platform} device memory: use "
            "cuda_array(), to_torch() or to_cupy()"
        )
    return ptr, size


def _host_buffer(region: Region, offset: int, nbytes: int) -> Any:
    ptr, _ = _host_target(region, "a host view")
    buf: Any = (ctypes.c_ubyte * nbytes).from_address(ptr + offset)
    buf._cco_owner = region  # numpy/memoryview keep buf alive, buf keeps the region
    return buf


def as_memoryview(region: Region, offset: int = 0, nbytes: Optional[int] = None) -> memoryview:
    """Writable byte ``memoryview`` over a host-platform region."""
    _, size = _host_target(region, "memoryview")
    if nbytes is None:
        nbytes = size - offset if isinstance(offset, int) else 0
    _, nbytes = _span(size, 1, (nbytes,), offset)
    return memoryview(_host_buffer(region, offset, nbytes)).cast("B")


def as_numpy(region: Region, dtype: Any = "uint8", shape: Shape = None, offset: int = 0) -> Any:
    """``numpy.ndarray`` over a host-platform region, no copy."""
    import numpy as np

    _, size = _host_target(region, "numpy")
    dt = np.dtype(dtype)
    shape, nbytes = _span(size, dt.itemsize, shape, offset)
    return np.frombuffer(_host_buffer(region, offset, nbytes), dtype=dt).reshape(shape)


class CudaArray:
    """Device memory described by ``__cuda_array_interface__`` (version 3),
    and through DLPack on GPU ``device`` (the owner region's when None).

    C-contiguous. Its ``stream`` is None: cco has no work in flight on the
    memory, so the consumer has nothing to wait for; order the producer's
    kernels yourself, as with any raw pointer. Holds ``owner`` so the
    region's Python object lives as long as arrays made from this one.
    """

    __slots__ = ("ptr", "shape", "typestr", "readonly", "owner", "device")

    def __init__(self, ptr: int, shape: Tuple[int, ...], typestr: str, owner: Any = None,
                 readonly: bool = False, device: Optional[int] = None) -> None:
        self.ptr = int(ptr)
        self.shape = tuple(shape)
        self.typestr = typestr
        self.readonly = readonly
        self.owner = owner
        self.device = device

    @property
    def __cuda_array_interface__(self) -> Dict[str, Any]:
        return {
            "shape": self.shape,
            "typestr": self.typestr,
            "data": (self.ptr, self.readonly),
            "strides": None,
            "stream": None,
            "version": 3,
        }

    def __dlpack_device__(self) -> Tuple[int, int]:
        device = self.device
        if device is None and isinstance(self.owner, Region):
            device = self.owner._cuda_device()
        if device is None or device < 0:
            raise BufferError("the CUDA device of this array is unknown: pass device=")
        return KDL_CUDA, device

    def __dlpack__(self, *, stream: Any = None, max_version: Optional[Tuple[int, int]] = None,
                   dl_device: Optional[Tuple[int, int]] = None, copy: Optional[bool] = None) -> Any:
        """As :meth:`cco.dlpack.DLPackArray.__dlpack__`."""
        array = DLPackArray(self.ptr, self.shape, dtype_of_typestr(self.typestr),
                            self.__dlpack_device__(), owner=self, readonly=self.readonly)
        return array.__dlpack__(stream=stream, max_version=max_version, dl_device=dl_device,
                                copy=copy)

    def __repr__(self) -> str:
        return f"CudaArray(ptr={self.ptr:#x}, shape={self.shape}, typestr={self.typestr!r})"


def as_cuda_array(region: Region, dtype: Any = "uint8", shape: Shape = None,
                  offset: int = 0) -> CudaArray:
    """A ``__cuda_array_interface__`` object over a cuda-platform region."""
    ptr, size, platform = region._view_target()
    if platform != PLATFORM_CUDA:
        raise CCOUnsupported(
            "cuda_array needs device memory, but this region is host-platform memory: use "
            "numpy() or memoryview()"
        )
    typestr, itemsize = _typestr(dtype)
    shape, _ = _span(size, itemsize, shape, offset)
    return CudaArray(ptr + offset, shape, typestr, owner=region)


def as_dlpack(region: Region, dtype: Any = "uint8", shape: Shape = None,
              offset: int = 0) -> DLPackArray:
    """A DLPack producer over the region (either platform): the memory
    itself, C-contiguous, with the dtype and shape given."""
    ptr, size, _ = region._view_target()
    dl_dtype, itemsize = _dl_dtype(dtype)
    shape, _ = _span(size, itemsize, shape, offset)
    return DLPackArray(ptr + offset, shape, dl_dtype, _dl_device(region), owner=region)


def _torch_dtype(torch: Any, dtype: Any) -> Any:
    if dtype is None:
        return torch.uint8
    if isinstance(dtype, torch.dtype):
        return dtype
    name = getattr(dtype, "name", None) or str(dtype)  # numpy dtypes and names
    resolved = getattr(torch, name, None)
    if not isinstance(resolved, torch.dtype):
        raise CCOInvalidArgument(f"no torch dtype for {dtype!r}")
    return resolved


def to_torch(region: Region, dtype: Any = None, shape: Shape = None, offset: int = 0) -> Any:
    """A torch tensor over the region, no copy.

    Host platform: a CPU tensor (``torch.frombuffer``). cuda: a CUDA tensor
    (``torch.as_tensor`` of a ``__cuda_array_interface__`` object). Any torch
    dtype works, bfloat16 included: the bytes are viewed, then reinterpreted.
    """
    import torch

    tdtype = _torch_dtype(torch, dtype)
    itemsize = torch.empty((), dtype=tdtype).element_size()
    ptr, size, platform = region._view_target()
    shape, nbytes = _span(size, itemsize, shape, offset)
    if nbytes == 0:
        device = "cuda" if platform == PLATFORM_CUDA else "cpu"
        return torch.empty(shape, dtype=tdtype, device=device)
    if platform == PLATFORM_HOST:
        import warnings

        with warnings.catch_warnings():  # frombuffer warns about non-writable buffers only
            warnings.simplefilter("ignore")
            raw = torch.frombuffer(_host_buffer(region, offset, nbytes), dtype=torch.uint8)
    else:
        raw = torch.as_tensor(CudaArray(ptr + offset, (nbytes,), "|u1", owner=region),
                              device="cuda")
    return raw.view(tdtype).reshape(shape)


def to_cupy(region: Region, dtype: Any = "uint8", shape: Shape = None, offset: int = 0) -> Any:
    """A cupy array over a cuda-platform region, no copy."""
    import cupy

    return cupy.asarray(as_cuda_array(region, dtype, shape, offset))


def from_pointer(ptr: int, size: int, platform: str, owner: Any = None,
                 device: Optional[int] = None) -> MemoryRegion:
    """A region over any address (for example ``comm.peer_ptr(...)``), to take
    views of. DLPack on cuda needs `device`, the GPU ordinal (``comm.cuda_device``)."""
    return MemoryRegion(ptr, size, platform, owner, device)
