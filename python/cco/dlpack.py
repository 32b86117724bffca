"""DLPack export of symmetric memory, built with ctypes.

``__dlpack__`` hands the consumer a PyCapsule that holds a managed tensor
(the structures of ``dlpack.h``): named ``"dltensor_versioned"``
(``DLManagedTensorVersioned``, DLPack 1.0) when the consumer passes
``max_version >= (1, 0)``, else ``"dltensor"`` (the legacy
``DLManagedTensor``). The consumer renames the capsule ``"used_..."`` when
it takes the tensor, and calls the tensor's deleter once it is done with
it; a capsule nobody took frees the tensor when it is collected.

Until then the exported tensor holds a reference to the Python object it
was made from, so the region's handle (and through it the communicator)
lives as long as any consumer array over it. cco never copies: the tensor
is the region's memory.
"""
from __future__ import annotations

import ctypes
import sys
from typing import Any, Callable, Dict, Optional, Tuple

from .errors import CCOInvalidArgument

# DLDeviceType values this package exports.
KDL_CPU = 1
KDL_CUDA = 2

# DLDataTypeCode values, by the array-interface kind letter that maps to them.
DL_INT, DL_UINT, DL_FLOAT, DL_BFLOAT, DL_COMPLEX, DL_BOOL = 0, 1, 2, 4, 5, 6
_CODE_OF_KIND = {"i": DL_INT, "u": DL_UINT, "f": DL_FLOAT, "c": DL_COMPLEX, "b": DL_BOOL}

# The version written into versioned tensors: nothing exported uses a later feature.
DLPACK_VERSION = (1, 0)
FLAG_READ_ONLY = 1 << 0

# (DLDataTypeCode, bits, lanes), as in DLDataType.
DLDtype = Tuple[int, int, int]


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


# void (*deleter)(self): both managed structures take their own address.
Deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", Deleter)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", Deleter),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


# Exported tensors not yet released, by the address of their managed
# structure: the entry owns the structure, its shape and strides, and a
# reference to what the memory belongs to. The deleter drops the entry.
_live: Dict[int, Tuple[Any, ...]] = {}


def live_exports() -> int:
    """How many exported tensors no consumer has released yet (for leak checks)."""
    return len(_live)


def _release(address: Optional[int]) -> None:
    if address is not None:
        _live.pop(address, None)


def _immortal(obj: Any) -> Any:
    """Keeps `obj` alive until the process exits. A capsule or a consumer
    array can outlive this module at interpreter exit, and its destructor
    then still calls into these callbacks and reads the capsule names."""
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))
    return obj


_deleter = _immortal(Deleter(_release))

_LEGACY_NAME = _immortal(ctypes.create_string_buffer(b"dltensor"))
_VERSIONED_NAME = _immortal(ctypes.create_string_buffer(b"dltensor_versioned"))

# Our own prototypes of the capsule API (PYFUNCTYPE holds the GIL and turns
# a set Python error into an exception); setting argtypes on the functions of
# the shared ctypes.pythonapi would change them for every other user.
_CapsuleDestructor = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_capsule_new: Callable[..., Any] = ctypes.PYFUNCTYPE(
    ctypes.py_object, ctypes.c_void_p, ctypes.c_void_p, _CapsuleDestructor,
)(("PyCapsule_New", ctypes.pythonapi))
_capsule_is_valid: Callable[..., int] = ctypes.PYFUNCTYPE(
    ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
)(("PyCapsule_IsValid", ctypes.pythonapi))
_capsule_get_pointer: Callable[..., Optional[int]] = ctypes.PYFUNCTYPE(
    ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
)(("PyCapsule_GetPointer", ctypes.pythonapi))


def _destroy_capsule(capsule: Optional[int]) -> None:
    # The capsule arrives as a bare address: wrapping an object that is
    # being deallocated in a py_object would revive it. A name still
    # "dltensor[_versioned]" means no consumer took the tensor, so it is
    # ours to free; a consumer renamed it to "used_..." and calls the deleter.
    for name in (_LEGACY_NAME, _VERSIONED_NAME):
        if _capsule_is_valid(capsule, ctypes.addressof(name)):
            _release(_capsule_get_pointer(capsule, ctypes.addressof(name)))
            return


_capsule_destructor = _immortal(_CapsuleDestructor(_destroy_capsule))


def dtype_of_typestr(typestr: str) -> DLDtype:
    """The DLDataType of an array-interface typestr such as ``"<f4"``."""
    order, kind, size = typestr[:1], typestr[1:2], typestr[2:]
    if kind not in _CODE_OF_KIND or not size.isdigit() or int(size) < 1:
        raise CCOInvalidArgument(f"dtype {typestr!r} has no DLPack type (integers, floats, "
                                 "complex and bool have)")
    native = "<" if sys.byteorder == "little" else ">"
    if int(size) > 1 and order not in (native, "="):
        raise CCOInvalidArgument(f"dtype {typestr!r} is not in this machine's byte order")
    return _CODE_OF_KIND[kind], 8 * int(size), 1


class DLPackArray:
    """A C-contiguous array at an address, exported through DLPack.

    ``device`` is the ``(DLDeviceType, ordinal)`` pair, ``dtype`` the
    ``(code, bits, lanes)`` of a DLDataType. ``owner`` is kept alive for as
    long as a consumer holds a tensor exported from here.
    """

    __slots__ = ("ptr", "shape", "dtype", "device", "owner", "readonly")

    def __init__(self, ptr: int, shape: Tuple[int, ...], dtype: DLDtype,
                 device: Tuple[int, int], owner: Any = None, readonly: bool = False) -> None:
        self.ptr = int(ptr)
        self.shape = tuple(int(s) for s in shape)
        self.dtype = dtype
        self.device = device
        self.owner = owner
        self.readonly = readonly

    def __dlpack_device__(self) -> Tuple[int, int]:
        return self.device

    def __dlpack__(self, *, stream: Any = None, max_version: Optional[Tuple[int, int]] = None,
                   dl_device: Optional[Tuple[int, int]] = None, copy: Optional[bool] = None) -> Any:
        """A ``"dltensor_versioned"`` capsule when `max_version` is (1, 0) or
        later, else a legacy ``"dltensor"`` one.

        `stream` (CUDA) is the consumer's stream, validated as the array API
        standard says: None, -1, 1, 2 or a stream handle, never 0. cco has no
        work of its own in flight on this memory (kernels and copies that
        write it were launched by the user), so there is nothing to order
        against the consumer's stream: that stays the user's to do, as with
        any pointer. ``copy=True`` raises ``BufferError`` (cco exports its
        memory, never a copy of it), and so does a `dl_device` other than
        :meth:`__dlpack_device__`.
        """
        _check_stream(self.device[0], stream)
        if copy is not None and not isinstance(copy, bool):
            raise CCOInvalidArgument(f"copy must be None, True or False, not {copy!r}")
        if copy:
            raise BufferError("cco exports its memory without a copy; copy=True is not "
                              "supported (copy the array after importing it)")
        if dl_device is not None and tuple(dl_device) != tuple(self.device):
            raise BufferError(f"this memory is on DLPack device {self.device}, not {dl_device}")
        versioned = _wants_versioned(max_version)
        if self.readonly and not versioned:
            raise BufferError("a read-only array needs a versioned (DLPack >= 1.0) consumer")
        return _capsule(self, versioned)

    def __repr__(self) -> str:
        return (f"DLPackArray(ptr={self.ptr:#x}, shape={self.shape}, dtype={self.dtype}, "
                f"device={self.device})")


def _check_stream(device_type: int, stream: Any) -> None:
    if stream is None:
        return
    if device_type != KDL_CUDA:
        raise CCOInvalidArgument(f"stream must be None for a device without streams, "
                                 f"not {stream!r}")
    if not isinstance(stream, int) or isinstance(stream, bool) or stream == 0 or stream < -1:
        raise CCOInvalidArgument(f"stream must be None, -1, 1, 2 or a CUDA stream handle "
                                 f"(0 is ambiguous), not {stream!r}")
    if stream >= 1 << (8 * ctypes.sizeof(ctypes.c_void_p)):
        raise CCOInvalidArgument(f"stream {stream:#x} does not fit a pointer")


def _wants_versioned(max_version: Any) -> bool:
    if max_version is None:
        return False
    try:
        major, minor = max_version
    except (TypeError, ValueError):
        raise CCOInvalidArgument(f"max_version must be a (major, minor) pair, "
                                 f"not {max_version!r}") from None
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (major, minor)):
        raise CCOInvalidArgument(f"max_version must hold integers, not {max_version!r}")
    return bool(major >= DLPACK_VERSION[0])


def _fill_tensor(tensor: DLTensor, array: DLPackArray) -> Any:
    """Fills `tensor` from `array`; returns the shape-and-strides buffer it points into."""
    ndim = len(array.shape)
    extents = (ctypes.c_int64 * max(2 * ndim, 2))()
    stride = 1
    for i in reversed(range(ndim)):  # row-major strides, in elements
        extents[i] = array.shape[i]
        extents[ndim + i] = stride
        stride *= array.shape[i]
    tensor.data = array.ptr
    tensor.device = DLDevice(*array.device)
    tensor.ndim = ndim
    tensor.dtype = DLDataType(*array.dtype)
    # Strides are always given: DLPack 1.2 asks for them whenever ndim > 0.
    tensor.shape = ctypes.cast(extents, ctypes.POINTER(ctypes.c_int64))
    strides_at = ctypes.addressof(extents) + ndim * ctypes.sizeof(ctypes.c_int64)
    tensor.strides = ctypes.cast(strides_at, ctypes.POINTER(ctypes.c_int64))
    tensor.byte_offset = 0
    return extents


def _capsule(array: DLPackArray, versioned: bool) -> Any:
    managed: Any
    if versioned:
        managed = DLManagedTensorVersioned()
        managed.version = DLPackVersion(*DLPACK_VERSION)
        managed.flags = FLAG_READ_ONLY if array.readonly else 0
        name = _VERSIONED_NAME
    else:
        managed = DLManagedTensor()
        name = _LEGACY_NAME
    extents = _fill_tensor(managed.dl_tensor, array)
    managed.deleter = _deleter
    address = ctypes.addressof(managed)
    _live[address] = (managed, extents, array)
    try:
        return _capsule_new(address, ctypes.addressof(name), _capsule_destructor)
    except BaseException:
        _release(address)
        raise
