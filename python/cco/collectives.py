"""Collectives on tensors that live in windows: what is behind
``comm.all_reduce``, ``all_gather``, ``reduce_scatter``, ``all_to_all``,
``broadcast`` and ``collective_algorithm`` (``ccoAllReduce`` ... of cco.h).

The C calls take addresses, an element count and a type; this module turns
the caller's tensor into those and checks, before any C call, everything
the caller can get wrong without the library's help:

- what was passed (:func:`describe`): a torch tensor, a cupy array, a numpy
  array (host platform), or one of cco's own typed views
  (``region.dlpack(dtype, shape)``, ``region.cuda_array(dtype, shape)``;
  the only way to hand bfloat16 host memory over without torch);
- its type (float32, bfloat16, float16, int32), contiguity, device, and the
  sizes each collective needs;
- where it is (:func:`address`): the library looks windows up by their
  address in the flat VA. Memory of this rank's slot (a window from
  ``register_window_alloc``, one over ``alloc_mem``, a ``SymmetricMemPool``
  tensor) is passed as it is; a tensor of an external window
  (``register_external_window``, ``cco.torch.import_symmetric_tensor``, a
  backend "CCO" tensor after its rendezvous) lives at another address and
  is passed as its alias in the flat VA. Memory that is neither raises
  :class:`~cco.errors.CCONotInWindow` at once; memory of the slot that no
  window covers is found by the library, and reported the same way.

The C functions are bound on first use (``cco._lib.function``): a libcco
built before them still loads, and only these calls fail, naming the symbol.
"""
from __future__ import annotations

import ctypes
import sys
from typing import TYPE_CHECKING, Any, Dict, List, NamedTuple, Optional, Tuple

from . import _lib
from ._convert import INT, POINTER, SIZE_T, to_c
from .dlpack import DL_BFLOAT, DL_BOOL, DL_COMPLEX, DL_FLOAT, DL_INT, DL_UINT, KDL_CPU, KDL_CUDA, DLPackArray
from .errors import CCOError, CCOInvalidArgument, CCONotInWindow, error_for
from .views import PLATFORM_HOST, CudaArray

if TYPE_CHECKING:  # pragma: no cover
    from .communicator import Communicator

# ccoDataType_t, by the dtype names torch, numpy and cupy share.
DTYPES: Dict[str, int] = {"float32": 0, "bfloat16": 1, "float16": 2, "int32": 3}
# ccoRedOp_t.
OPS: Dict[str, int] = {"sum": 0, "max": 1, "min": 2}
# ccoAlgo_t, by value; the names are CCO_ALGO's.
ALGORITHMS: Tuple[str, ...] = ("auto", "oneshot", "ll", "twoshot", "push", "pull", "hier")
# The Python names of the collectives and the names ccoCollAlgorithm takes.
COLLECTIVES: Dict[str, str] = {
    "all_reduce": "allreduce",
    "all_gather": "allgather",
    "reduce_scatter": "reducescatter",
    "all_to_all": "alltoall",
    "broadcast": "broadcast",
}

_DL_CODES = {DL_INT: "int", DL_UINT: "uint", DL_FLOAT: "float", DL_BFLOAT: "bfloat", DL_COMPLEX: "complex",
             DL_BOOL: "bool"}
_TYPESTR_NAMES = {"<f4": "float32", "<f2": "float16", "<i4": "int32", "<f8": "float64", "<i8": "int64",
                  "<i2": "int16", "|i1": "int8", "|u1": "uint8", "<u2": "uint16", "<u4": "uint32",
                  "<u8": "uint64", "|b1": "bool"}


class Buffer(NamedTuple):
    """A tensor or array as the collectives see it."""

    obj: Any
    kind: str  # "torch tensor", "cupy array", "numpy array", "cco array view"
    ptr: int  # where its first element is, as its framework says
    numel: int
    itemsize: int
    dtype: str  # the framework's name: "float32", "bfloat16", "float64", ...
    shape: Tuple[int, ...]
    location: str  # "cpu", "cuda", or another torch device type
    device: Optional[int]  # the CUDA ordinal, when known
    contiguous: bool
    readonly: bool

    @property
    def nbytes(self) -> int:
        return self.numel * self.itemsize

    def text(self) -> str:
        """What an error message calls it: kind, shape and dtype."""
        return f"{self.kind} of shape {self.shape} and dtype {self.dtype}"


def describe(obj: Any, what: str = "tensor") -> Buffer:
    """The :class:`Buffer` of a torch tensor, cupy or numpy array, or cco
    array view; anything else raises CCOInvalidArgument. Frameworks are
    looked up in ``sys.modules``: an object of one not imported cannot exist."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        return _torch_buffer(obj)
    cupy = sys.modules.get("cupy")
    if cupy is not None and isinstance(obj, cupy.ndarray):
        return Buffer(obj, "cupy array", obj.data.ptr, obj.size, obj.itemsize, _dtype_name(obj.dtype),
                      tuple(obj.shape), "cuda", obj.device.id, bool(obj.flags.c_contiguous), False)
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(obj, numpy.ndarray):
        flags = obj.flags
        return Buffer(obj, "numpy array", obj.__array_interface__["data"][0], obj.size, obj.itemsize,
                      _dtype_name(obj.dtype), obj.shape, "cpu", None, bool(flags.c_contiguous), not flags.writeable)
    if isinstance(obj, DLPackArray):
        code, bits, lanes = obj.dtype
        name = _DL_CODES.get(code, f"code{code}_") + str(bits) + (f"x{lanes}" if lanes != 1 else "")
        kind, ordinal = obj.device
        location = "cpu" if kind == KDL_CPU else "cuda" if kind == KDL_CUDA else f"DLPack device {kind}"
        return Buffer(obj, "cco array view", obj.ptr, _product(obj.shape), bits * lanes // 8, name, obj.shape,
                      location, ordinal if kind == KDL_CUDA else None, True, obj.readonly)
    if isinstance(obj, CudaArray):
        size = int(obj.typestr[2:]) if obj.typestr[2:].isdigit() else 0
        return Buffer(obj, "cco array view", obj.ptr, _product(obj.shape), size,
                      _TYPESTR_NAMES.get(obj.typestr, obj.typestr), obj.shape, "cuda", obj.device, True,
                      obj.readonly)
    raise CCOInvalidArgument(
        f"{what} must be a torch tensor, a cupy array, a numpy array or a cco array view "
        f"(region.dlpack / region.cuda_array), not {type(obj).__module__}.{type(obj).__name__}")


def _torch_buffer(t: Any) -> Buffer:
    device = t.device
    cuda = device.type == "cuda"
    return Buffer(t, "torch tensor", t.data_ptr(), t.numel(), t.element_size(), _dtype_name(t.dtype),
                  tuple(t.shape), device.type, device.index if cuda else None, t.is_contiguous(), False)


# dtype object -> name; numpy computes .name in Python on every access.
_names: Dict[Any, str] = {}


def _dtype_name(dtype: Any) -> str:
    name = _names.get(dtype)
    if name is None:
        name = getattr(dtype, "name", None) if type(dtype).__module__ != "torch" else None
        name = _names[dtype] = name if isinstance(name, str) else str(dtype).rpartition(".")[2]
    return name


def _product(shape: Tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


# ---------------------------------------------------------------- checks


def dtype_code(buf: Buffer, what: str, call: str) -> int:
    """``ccoDataType_t`` of the buffer's dtype; others are refused by name."""
    code = DTYPES.get(buf.dtype)
    if code is None:
        raise CCOInvalidArgument(
            f"{call}: {what} is a {buf.text()}; the collectives take "
            f"{', '.join(DTYPES)}, not {buf.dtype}")
    return code


def op_code(op: Any, call: str) -> int:
    """``ccoRedOp_t`` of "sum", "max" or "min" (any case; also an enum with
    such a ``name``, as ``torch.distributed.ReduceOp.SUM``)."""
    name = op if isinstance(op, str) else getattr(op, "name", None)
    code = OPS.get(name.lower()) if isinstance(name, str) else None
    if code is None:
        raise CCOInvalidArgument(f"{call}: op must be one of {', '.join(OPS)}, not {op!r}")
    return code


def _check_buffer(comm: "Communicator", buf: Buffer, what: str, call: str, output: bool) -> None:
    if not buf.contiguous:
        raise CCOInvalidArgument(
            f"{call}: {what} ({buf.text()}) is not contiguous; the collectives take contiguous memory "
            "(a .contiguous() copy would not be in a window: make the tensor contiguous in the window)")
    if output and buf.readonly:
        raise CCOInvalidArgument(f"{call}: {what} ({buf.text()}) is read-only")
    if comm._platform == PLATFORM_HOST:
        if buf.location != "cpu":
            raise CCOInvalidArgument(
                f"{call}: {what} ({buf.text()}) is {buf.location} memory, but this communicator's windows "
                "are host memory (platform host)")
        return
    if buf.location != "cuda":
        raise CCOInvalidArgument(
            f"{call}: {what} ({buf.text()}) is {buf.location} memory, but this communicator's windows are "
            f"on GPU {comm._cuda_device} (platform cuda)")
    if buf.device is not None and comm._cuda_device >= 0 and buf.device != comm._cuda_device:
        raise CCOInvalidArgument(
            f"{call}: {what} ({buf.text()}) is on GPU {buf.device}, but this communicator's windows are "
            f"on GPU {comm._cuda_device}")


def _same_dtype(src: Buffer, dst: Buffer, call: str) -> None:
    if dst.dtype != src.dtype:
        raise CCOInvalidArgument(f"{call}: out has dtype {dst.dtype}, the input {src.dtype}; they must match")


def _need(ok: bool, call: str, text: str) -> None:
    if not ok:
        raise CCOInvalidArgument(f"{call}: {text}")


# ---------------------------------------------------------------- addresses


def not_in_window(buf: Buffer, what: str, call: str, why: str = "") -> CCONotInWindow:
    """The error for a buffer outside the communicator's windows."""
    return CCONotInWindow(
        f"{call}: {what} ({buf.text()}, at {buf.ptr:#x}) is not in a window of this communicator{why}; "
        "allocate it from the communicator's symmetric memory, at the same offset on every rank (a view "
        "of comm.register_window_alloc(nbytes), a registered comm.alloc_mem or SymmetricMemPool tensor, "
        "or a torch backend \"CCO\" tensor with cco.torch.window_of(t).communicator)")


def address(comm: "Communicator", buf: Buffer, what: str, call: str) -> int:
    """The address the library looks the buffer up by: the buffer's own when
    it is in this rank's slot of the flat VA, its alias there when it is in
    an external window, else CCONotInWindow."""
    base, slot = comm._flat_va
    mine = base + comm._lsa_rank * slot
    if mine <= buf.ptr and buf.ptr + buf.nbytes <= mine + slot:
        return buf.ptr
    if base <= buf.ptr < base + comm._lsa_size * slot:
        peer = (buf.ptr - base) // slot
        raise not_in_window(buf, what, call, f" but in LSA peer {peer}'s copy (a view of a peer's memory)")
    alias = comm._external_alias(buf.ptr, buf.nbytes)
    if alias is None:
        raise not_in_window(buf, what, call)
    return alias


def _in_a_window(comm: "Communicator", ptr: int, nbytes: int) -> bool:
    """Whether the library finds [ptr, ptr + nbytes) in a window: its first
    and last byte have a peer address for this rank (ccoGetPeerPtr)."""
    out = ctypes.c_void_p()
    for at in (ptr, ptr + max(nbytes, 1) - 1):
        if comm._lib.ccoGetPeerPtr(comm._h, at, comm._rank, ctypes.byref(out)) != _lib.SUCCESS:
            return False
    return True


# ---------------------------------------------------------------- streams


def stream_handle(stream: Any) -> Optional[int]:
    """A ``CUstream`` as an int (None for 0, the legacy default stream) from
    an int, a ``torch.cuda.Stream``, a ``cupy.cuda.Stream``, an object of
    the CUDA stream protocol (``__cuda_stream__``) or a cuda-python
    ``CUstream``."""
    if isinstance(stream, bool):
        raise CCOInvalidArgument(f"stream must be a CUDA stream or its handle, not {stream!r}")
    value: Any
    if hasattr(stream, "__index__"):
        value = stream
    elif hasattr(stream, "__cuda_stream__"):
        value = stream.__cuda_stream__()[1]  # (protocol version, handle)
    elif hasattr(stream, "cuda_stream"):  # torch.cuda.Stream
        value = stream.cuda_stream
    elif hasattr(stream, "ptr"):  # cupy.cuda.Stream
        value = stream.ptr
    elif hasattr(stream, "getPtr"):  # cuda-python CUstream
        value = stream.getPtr()
    elif hasattr(stream, "__int__"):
        value = int(stream)
    else:
        raise CCOInvalidArgument(
            f"stream must be an int handle, a torch or cupy stream or a CUstream, not {type(stream).__name__}")
    return to_c(POINTER, "stream", value, low=0) or None


def _default_stream(buf: Buffer) -> Optional[int]:
    """The stream work on `buf` is ordered on by default: torch's current
    stream of its device, cupy's current stream; the legacy default stream
    (NULL) for cco's views."""
    if buf.kind == "torch tensor":
        torch = sys.modules["torch"]
        return int(torch.cuda.current_stream(buf.obj.device).cuda_stream) or None
    if buf.kind == "cupy array":
        cupy = sys.modules["cupy"]
        try:
            return int(cupy.cuda.get_current_stream(buf.device).ptr) or None
        except TypeError:  # a cupy whose get_current_stream takes no device
            return int(cupy.cuda.get_current_stream().ptr) or None
    return None


# ---------------------------------------------------------------- the calls


def _launch(comm: "Communicator", call: str, c_name: str, src: Buffer, dst: Buffer, count: int,
            args: Tuple[int, ...], stream: Any, in_place_ok: bool = True) -> None:
    """Checks both buffers, resolves their addresses and the stream, and
    makes the C call ``c_name(comm, send, recv, count, *args, stream)``."""
    _check_buffer(comm, src, "tensor", call, output=False)
    _check_buffer(comm, dst, "out", call, output=True)
    handle = stream_handle(stream) if stream is not None else None
    if count == 0:
        return  # every rank has nothing to do (counts must match), so no call
    send = address(comm, src, "tensor", call)
    recv = send if dst is src else address(comm, dst, "out", call)
    if not in_place_ok and send < recv + dst.nbytes and recv < send + src.nbytes:
        raise CCOInvalidArgument(f"{call}: the input and out overlap; {call} does not work in place")
    if stream is None and comm._platform != PLATFORM_HOST:
        handle = _default_stream(src)
    count = to_c(SIZE_T, "count", count)
    fn = _lib.function(c_name)
    res = fn(comm._h, send, recv, count, *args, handle)
    if res != _lib.SUCCESS:
        raise _failure(comm, res, call, [(src, "tensor", send), (dst, "out", recv)])


def _failure(comm: "Communicator", res: int, call: str, buffers: List[Tuple[Buffer, str, int]]) -> CCOError:
    """The exception for a failed call: CCONotInWindow when the library
    refused an argument and one of the buffers is in no window it knows."""
    detail = _lib.last_error(comm._h)  # before the probes below overwrite it
    if res == _lib.INVALID_ARGUMENT:
        for buf, what, at in buffers:
            if not _in_a_window(comm, at, buf.nbytes):
                return not_in_window(buf, what, call, f" (the library says: {detail})")
    return error_for(res, f"{call} of a {buffers[0][0].text()}: {detail}")


def all_reduce(comm: "Communicator", tensor: Any, op: Any, out: Any, stream: Any) -> Any:
    comm._check_alive()
    call = "all_reduce"
    src = describe(tensor, "tensor")
    dst = src if out is None or out is tensor else describe(out, "out")
    code = dtype_code(src, "tensor", call)
    _same_dtype(src, dst, call)
    _need(dst.numel == src.numel, call, f"out has {dst.numel} elements, the input {src.numel}; they must match")
    red = op_code(op, call)
    _launch(comm, call, "ccoAllReduce", src, dst, src.numel, (code, red), stream)
    return tensor if out is None else out


def all_gather(comm: "Communicator", tensor: Any, out: Any, stream: Any) -> Any:
    comm._check_alive()
    call = "all_gather"
    src, dst = describe(tensor, "tensor"), describe(out, "out")
    code = dtype_code(src, "tensor", call)
    _same_dtype(src, dst, call)
    n = comm._size
    _need(dst.numel == n * src.numel, call,
          f"out has {dst.numel} elements; it needs {n * src.numel} ({n} ranks x the input's {src.numel})")
    _launch(comm, call, "ccoAllGather", src, dst, src.numel, (code,), stream)
    return out


def reduce_scatter(comm: "Communicator", tensor: Any, out: Any, op: Any, stream: Any) -> Any:
    comm._check_alive()
    call = "reduce_scatter"
    src, dst = describe(tensor, "tensor"), describe(out, "out")
    code = dtype_code(src, "tensor", call)
    _same_dtype(src, dst, call)
    n = comm._size
    _need(src.numel == n * dst.numel, call,
          f"the input has {src.numel} elements; it needs {n * dst.numel} ({n} ranks x out's {dst.numel})")
    red = op_code(op, call)
    _launch(comm, call, "ccoReduceScatter", src, dst, dst.numel, (code, red), stream)
    return out


def all_to_all(comm: "Communicator", tensor: Any, out: Any, stream: Any) -> Any:
    comm._check_alive()
    call = "all_to_all"
    src, dst = describe(tensor, "tensor"), describe(out, "out")
    code = dtype_code(src, "tensor", call)
    _same_dtype(src, dst, call)
    n = comm._size
    _need(dst.numel == src.numel, call, f"out has {dst.numel} elements, the input {src.numel}; they must match")
    _need(src.numel % n == 0, call, f"the input's {src.numel} elements are not {n} equal blocks, one per rank")
    _need(out is not tensor, call, "out is the input; all_to_all does not work in place")
    _launch(comm, call, "ccoAlltoAll", src, dst, src.numel // n, (code,), stream, in_place_ok=False)
    return out


def broadcast(comm: "Communicator", tensor: Any, root: int, out: Any, stream: Any) -> Any:
    comm._check_alive()
    call = "broadcast"
    src = describe(tensor, "tensor")
    dst = src if out is None or out is tensor else describe(out, "out")
    code = dtype_code(src, "tensor", call)
    _same_dtype(src, dst, call)
    _need(dst.numel == src.numel, call, f"out has {dst.numel} elements, the input {src.numel}; they must match")
    root = to_c(INT, f"{call}: root", root, low=0, high=comm._size - 1)
    _launch(comm, call, "ccoBroadcast", src, dst, src.numel, (code, root), stream)
    return tensor if out is None else out


def collective_algorithm(comm: "Communicator", name: str, nbytes: int) -> str:
    comm._check_alive()
    c_name = COLLECTIVES.get(name, name if name in COLLECTIVES.values() else None) \
        if isinstance(name, str) else None
    if c_name is None:
        raise CCOInvalidArgument(
            f"collective_algorithm: name must be one of {', '.join(COLLECTIVES)}, not {name!r}")
    nbytes = to_c(SIZE_T, "nbytes", nbytes, low=0)
    out = ctypes.c_int()
    fn = _lib.function("ccoCollAlgorithm")
    comm._check(fn(comm._h, c_name.encode(), nbytes, ctypes.byref(out)))
    return ALGORITHMS[out.value] if 0 <= out.value < len(ALGORITHMS) else f"unknown ({out.value})"
