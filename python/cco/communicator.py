"""The communicator: the Python face of ``ccoComm``.

Design choices, and why:

- Every method maps to one C call (plus bookkeeping), so the cost of the
  Python layer stays a few microseconds (``bench/bench_python.py``).
- Everything handed out (memory, windows, device communicators) is tracked
  and released newest first by :meth:`Communicator.destroy`, which ``with``
  calls on exit. The C library would release it all anyway; doing it here
  in reverse order also marks the Python handles dead, so a stale handle
  raises instead of reaching C with a dangling pointer.
- A destroyed communicator refuses every call with
  :class:`~cco.errors.CCOInvalidUsage` without calling C: the C handle is
  freed memory by then. ``destroy()`` itself is idempotent (a second call
  does nothing), so cleanup code may call it unconditionally.
- :meth:`abort` may be called from any thread while another thread is
  blocked in a collective of the same communicator; nothing else should be
  called concurrently with :meth:`destroy`.
- Every integer passed to C (sizes, offsets, ranks, team kinds, signal
  values, addresses, streams) goes through :func:`cco._convert.to_c` with
  its C parameter's type first: ctypes would silently keep the low bits of
  a value the type cannot hold. The checked value is the one passed to C
  and the one the handles report.
"""
from __future__ import annotations

import ctypes
import os
import threading
import weakref
from collections import namedtuple
from typing import Any, Dict, List, Optional, Tuple, Union

from . import _abi, _lib, collectives
from ._convert import INT, POINTER, SIZE_T, UINT64, to_c
from .devcomm import CCODevCommRequirements, DevComm
from .errors import CCOError, CCOInternalError, CCOInvalidArgument, CCOInvalidUsage, error_for
from .resources import AllocatedMemory, RegisteredWindow, Resource
from .views import PLATFORM_CUDA, PLATFORM_HOST, Region

Team = namedtuple("Team", ["n_ranks", "rank", "stride"])
Team.__doc__ = "A team as seen from this rank (``ccoTeam``); stride 0: use the member table."

_Pointer = Union[int, Region]


class UniqueId:
    """The 128-byte job id rank 0 mints and every rank passes to ``init``.

    Bytes-backed and picklable, so any channel can carry it: mpi4py
    ``bcast``, ``torch.distributed.broadcast_object_list``, a file
    (:meth:`hex` / :meth:`from_hex`), or ccorun's ``CCO_UNIQUE_ID``
    (:meth:`from_env`). It holds a secret that admits ranks to the job, so
    ``repr`` does not print it.
    """

    __slots__ = ("_raw",)

    def __init__(self, raw: Union[bytes, bytearray, memoryview]) -> None:
        raw = bytes(raw)
        if len(raw) != _abi.UNIQUE_ID_BYTES:
            raise CCOInvalidArgument(
                f"a unique id is {_abi.UNIQUE_ID_BYTES} bytes, not {len(raw)}")
        self._raw = raw

    @classmethod
    def from_hex(cls, text: str) -> "UniqueId":
        """Parses the hex form; the library checks magic, version and family."""
        if not isinstance(text, str):
            raise CCOInvalidArgument(f"a hex unique id is a str, not {type(text).__name__}")
        out = _abi.UniqueIdStruct()
        lib = _lib.load()
        res = lib.ccoUniqueIdFromString(text.encode(), ctypes.byref(out))
        if res != _lib.SUCCESS:
            raise error_for(res, _lib.last_error(None))
        return cls(bytes(out))

    @classmethod
    def from_env(cls, name: str = "CCO_UNIQUE_ID") -> "UniqueId":
        """The id ccorun put in the environment."""
        text = os.environ.get(name)
        if not text:
            raise CCOInvalidArgument(f"{name} is not set (not started by ccorun?)")
        return cls.from_hex(text)

    def hex(self) -> str:
        """256 lowercase hex characters, as ``ccoUniqueIdToString`` writes."""
        return self._raw.hex()

    def __bytes__(self) -> bytes:
        return self._raw

    def _struct(self) -> _abi.UniqueIdStruct:
        return _abi.UniqueIdStruct.from_buffer_copy(self._raw)

    def __reduce__(self) -> Tuple[Any, ...]:
        return (UniqueId, (self._raw,))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UniqueId) and other._raw == self._raw

    def __hash__(self) -> int:
        return hash(self._raw)

    def __repr__(self) -> str:
        return "UniqueId(<128 bytes, secret>)"


def _as_unique_id(uid: Any) -> UniqueId:
    if isinstance(uid, UniqueId):
        return uid
    if isinstance(uid, (bytes, bytearray, memoryview)):
        return UniqueId(uid)
    if isinstance(uid, str):
        return UniqueId.from_hex(uid)
    if uid is None:
        raise CCOInvalidArgument("uid is None: did the broadcast from rank 0 reach this rank?")
    raise CCOInvalidArgument(f"uid must be a UniqueId, bytes or hex str, not {type(uid).__name__}")


def _address(value: _Pointer, what: str) -> int:
    """An address from an int or a region (memory, window, view target),
    checked to fit a C pointer (ctypes would keep its low 64 bits)."""
    if isinstance(value, Region):
        return value._view_target()[0]
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise CCOInvalidArgument(f"{what} must be an address (int) or a cco region, not {value!r}")
    return to_c(POINTER, what, value, low=0)


def _written(out: ctypes.c_void_p) -> int:
    """The address or handle a successful call wrote into `out`."""
    if out.value is None:  # the library never reports success with NULL
        raise CCOInternalError("the library reported success but wrote a NULL address")
    return out.value


def _stream(stream: Any) -> Optional[int]:
    """A CUDA stream handle as an int (0 or None: the legacy default stream)."""
    if stream is None:
        return None
    return to_c(POINTER, "stream", stream) or None


def _stream_of(stream: Any) -> Optional[int]:
    """A stream as collectives.stream_handle takes it; None: the legacy
    default stream."""
    return None if stream is None else collectives.stream_handle(stream)


# The communicator torch's allocator hooks draw from (cco.torch), so that
# destroy() can switch them off before the handle goes away.
_allocator_lock = threading.Lock()
_allocator_comm: Optional["weakref.ref[Communicator]"] = None


def set_torch_allocator_comm(comm: Optional["Communicator"]) -> None:
    """Selects the communicator ``cco_torch_malloc`` draws from (None: off).

    Switching away forgets the blocks handed out so far (they are released
    with their communicator); see ``include/cco/cco_torch.h``.
    """
    global _allocator_comm
    lib = _lib.load()
    with _allocator_lock:
        handle = None
        if comm is not None:
            comm._check_alive()
            handle = comm._h
        res = lib.ccoTorchAllocatorSetComm(handle)
        if res != _lib.SUCCESS:
            raise error_for(res, _lib.last_error(None))
        _allocator_comm = weakref.ref(comm) if comm is not None else None


def torch_allocator_comm() -> Optional["Communicator"]:
    """The communicator the torch allocator hooks draw from, or None."""
    with _allocator_lock:
        return _allocator_comm() if _allocator_comm is not None else None


class Communicator:
    """A communicator over ``size`` ranks (processes or threads).

    Create with :meth:`init` (any launcher that can broadcast the id) or
    :meth:`from_env` (under ``ccorun``). Use as a context manager, or call
    :meth:`destroy`.
    """

    def __init__(self, handle: int) -> None:
        """Wraps a live ``ccoComm*``; use :meth:`init` or :meth:`from_env`."""
        handle = to_c(POINTER, "handle", handle, low=1)
        self._lib = _lib.load()
        self._h: Optional[int] = handle
        self._lock = threading.RLock()
        self._resources: Dict[int, Resource] = {}  # insertion order = creation order
        self._allocs: Dict[int, AllocatedMemory] = {}  # by ptr
        self._windows: Dict[int, RegisteredWindow] = {}  # by handle
        lib, h = self._lib, handle
        self._rank = self._query(lib.ccoCommRank)
        self._size = self._query(lib.ccoCommSize)
        self._lsa_rank = self._query(lib.ccoCommLsaRank)
        self._lsa_size = self._query(lib.ccoCommLsaSize)
        self._node_count = self._query(lib.ccoCommNodeCount)
        self._node_index = self._query(lib.ccoCommNodeIndex)
        platform = self._query(lib.ccoCommPlatform)
        self._platform = PLATFORM_CUDA if platform == _lib.PLATFORM_CUDA else PLATFORM_HOST
        self._cuda_device = self._query(lib.ccoCommCudaDevice)
        base, slot = ctypes.c_void_p(), ctypes.c_size_t()
        self._check(lib.ccoCommFlatVa(h, ctypes.byref(base), ctypes.byref(slot)))
        self._flat_va = (base.value or 0, slot.value)
        # Bound once: the hot calls skip an attribute lookup on the CDLL.
        self._barrier_fn = lib.ccoBarrierAll

    # ------------------------------------------------------------ creation

    @staticmethod
    def get_unique_id() -> UniqueId:
        """Mints a job id (rank 0 only); broadcast it to the other ranks."""
        lib = _lib.load()
        out = _abi.UniqueIdStruct()
        res = lib.ccoGetUniqueId(ctypes.byref(out))
        if res != _lib.SUCCESS:
            raise error_for(res, _lib.last_error(None))
        return UniqueId(bytes(out))

    @classmethod
    def init(cls, nranks: int, rank: int, uid: Union[UniqueId, bytes, str],
             per_rank_vmm: int = 0) -> "Communicator":
        """Collective: joins the job `uid` names as `rank` of `nranks`.

        per_rank_vmm: bytes of flat VA per rank (rounded up to 4 GiB by the
        library; 0 means its default). Blocks until every rank has joined or
        ``CCO_BOOTSTRAP_TIMEOUT`` passes.
        """
        nranks = to_c(INT, "nranks", nranks, low=1)
        rank = to_c(INT, "rank", rank, low=0, high=nranks - 1)
        per_rank_vmm = to_c(SIZE_T, "per_rank_vmm", per_rank_vmm, low=0)
        uid = _as_unique_id(uid)
        lib = _lib.load()
        out = ctypes.c_void_p()
        res = lib.ccoCommCreate(uid._struct(), nranks, rank, per_rank_vmm, ctypes.byref(out))
        if res != _lib.SUCCESS:
            raise error_for(res, _lib.last_error(None))
        return cls(_written(out))

    @classmethod
    def from_env(cls, per_rank_vmm: int = 0) -> "Communicator":
        """Collective: joins the job ccorun described in the environment
        (``CCO_UNIQUE_ID``, ``CCO_NRANKS``, ``CCO_RANK``)."""
        per_rank_vmm = to_c(SIZE_T, "per_rank_vmm", per_rank_vmm, low=0)
        lib = _lib.load()
        out = ctypes.c_void_p()
        res = lib.ccoCommCreateFromEnv(per_rank_vmm, ctypes.byref(out))
        if res != _lib.SUCCESS:
            raise error_for(res, _lib.last_error(None))
        return cls(_written(out))

    # ------------------------------------------------------------ plumbing

    def _check_alive(self) -> None:
        if self._h is None:
            raise CCOInvalidUsage("the communicator was destroyed")

    def _check(self, res: int) -> None:
        if res != _lib.SUCCESS:
            raise error_for(res, _lib.last_error(self._h))

    def _query(self, fn: Any) -> int:
        out = ctypes.c_int()
        self._check(fn(self._h, ctypes.byref(out)))
        return out.value

    def _track(self, res: Resource) -> None:
        with self._lock:
            self._resources[id(res)] = res
            if isinstance(res, AllocatedMemory):
                self._allocs[res._ptr] = res
            elif isinstance(res, RegisteredWindow):
                self._windows[res._handle] = res

    def _untrack(self, res: Resource) -> None:
        with self._lock:
            self._resources.pop(id(res), None)
            if isinstance(res, AllocatedMemory):
                self._allocs.pop(res._ptr, None)
            elif isinstance(res, RegisteredWindow):
                self._windows.pop(res._handle, None)
        res._alive = False

    def _own(self, res: Resource, what: str) -> None:
        if not isinstance(res, Resource) or res._comm is not self:
            raise CCOInvalidArgument(f"{what} does not belong to this communicator")
        res._check_alive()

    def _release(self, res: Resource) -> None:
        self._check(res._release_c())
        self._untrack(res)

    # ------------------------------------------------------------ queries

    @property
    def alive(self) -> bool:
        """False once destroyed."""
        return self._h is not None

    @property
    def handle(self) -> int:
        """The raw ``ccoComm*`` (for ctypes calls of your own)."""
        self._check_alive()
        return self._h  # type: ignore[return-value]

    @property
    def rank(self) -> int:
        self._check_alive()
        return self._rank

    @property
    def size(self) -> int:
        """Number of ranks."""
        self._check_alive()
        return self._size

    world_size = size

    @property
    def lsa_rank(self) -> int:
        """Rank among the ranks of this host (the LSA team)."""
        self._check_alive()
        return self._lsa_rank

    @property
    def lsa_size(self) -> int:
        self._check_alive()
        return self._lsa_size

    @property
    def node_count(self) -> int:
        """Number of distinct hosts."""
        self._check_alive()
        return self._node_count

    @property
    def node_index(self) -> int:
        """This rank's host, numbered by lowest world rank."""
        self._check_alive()
        return self._node_index

    @property
    def platform(self) -> str:
        """``"host"`` or ``"cuda"``: where symmetric memory lives."""
        self._check_alive()
        return self._platform

    @property
    def cuda_device(self) -> int:
        """The CUDA device ordinal the communicator belongs to; -1 on the host
        platform. A thread with no current device gets GPU
        ``CCO_LOCAL_RANK % device count``."""
        self._check_alive()
        return self._cuda_device

    @property
    def flat_va(self) -> Tuple[int, int]:
        """(base, slot size): LSA rank p's slot starts at base + p * slot."""
        self._check_alive()
        return self._flat_va

    def in_flat_va(self, ptr: int) -> bool:
        """Whether `ptr` lies in some LSA rank's slot of this communicator."""
        base, slot = self.flat_va
        return base <= ptr < base + self._lsa_size * slot

    def team(self, kind: int) -> Team:
        """The team `kind` (``cco.TEAM_WORLD``, ``TEAM_LSA``, ...) seen from here."""
        self._check_alive()
        kind = to_c(INT, "kind", kind)
        out = _abi.TeamStruct()
        self._check(self._lib.ccoCommTeam(self._h, kind, ctypes.byref(out)))
        return Team(out.nRanks, out.rank, out.stride)

    def team_rank_to_world(self, kind: int, team_rank: int) -> int:
        self._check_alive()
        kind = to_c(INT, "kind", kind)
        team_rank = to_c(INT, "team_rank", team_rank)
        out = ctypes.c_int()
        self._check(self._lib.ccoTeamRankToWorld(self._h, kind, team_rank, ctypes.byref(out)))
        return out.value

    def team_rank_from_world(self, kind: int, world_rank: int) -> int:
        """Team rank of `world_rank`; CCOInvalidArgument when not a member."""
        self._check_alive()
        kind = to_c(INT, "kind", kind)
        world_rank = to_c(INT, "world_rank", world_rank)
        out = ctypes.c_int()
        self._check(self._lib.ccoTeamRankFromWorld(self._h, kind, world_rank, ctypes.byref(out)))
        return out.value

    @property
    def async_error(self) -> Optional[CCOError]:
        """The first failure of the job (a dead peer, an abort) as an
        exception instance, not raised; None while healthy."""
        self._check_alive()
        out = ctypes.c_int()
        self._check(self._lib.ccoCommGetAsyncError(self._h, ctypes.byref(out)))
        if out.value == _lib.SUCCESS:
            return None
        return error_for(out.value, _lib.last_error(self._h))

    # ------------------------------------------------------------- SDMA

    def sdma_put_async(self, peer: int, dst_win: "RegisteredWindow", dst_off: int,
                       src_win: "RegisteredWindow", src_off: int, nbytes: int,
                       sig_win: Optional["RegisteredWindow"] = None, sig_off: int = 0,
                       sig_value: int = 0, stream: Optional[int] = 0) -> None:
        """Enqueues a copy-engine copy of nbytes from this rank's copy of
        src_win to LSA peer `peer`'s (world rank) copy of dst_win, then the
        store of sig_value into the peer's uint64 at sig_win + sig_off,
        ordered after the data (ccoSdmaPutAsync). `stream` is a CUDA stream
        handle as an int (e.g. torch.cuda.current_stream().cuda_stream);
        the host platform copies before returning."""
        self._check_alive()
        peer = to_c(INT, "peer", peer, low=0, high=self._size - 1)
        dst_off = to_c(SIZE_T, "dst_off", dst_off, low=0)
        src_off = to_c(SIZE_T, "src_off", src_off, low=0)
        nbytes = to_c(SIZE_T, "nbytes", nbytes, low=0)
        sig_off = to_c(SIZE_T, "sig_off", sig_off, low=0)
        sig_value = to_c(UINT64, "sig_value", sig_value)
        stream = _stream(stream)
        self._check(self._lib.ccoSdmaPutAsync(
            self._h, peer, dst_win.handle, dst_off, src_win.handle, src_off, nbytes,
            sig_win.handle if sig_win is not None else None, sig_off, sig_value, stream))

    def stream_wait_signal(self, sig_win: "RegisteredWindow", sig_off: int, value: int,
                           stream: Optional[int] = 0) -> None:
        """Makes `stream` wait until this rank's uint64 at sig_win + sig_off
        reaches value (ccoStreamWaitSignal); the host platform waits here."""
        self._check_alive()
        sig_off = to_c(SIZE_T, "sig_off", sig_off, low=0)
        value = to_c(UINT64, "value", value)
        stream = _stream(stream)
        self._check(self._lib.ccoStreamWaitSignal(self._h, sig_win.handle, sig_off, value,
                                                  stream))

    # ------------------------------------------- one-sided, stream-ordered

    _SIGNAL_OPS = {"set": 0, "add": 1}

    def _signal_op(self, op: str) -> int:
        if op not in self._SIGNAL_OPS:
            raise CCOInvalidArgument(f"op must be 'set' or 'add', not {op!r}")
        return self._SIGNAL_OPS[op]

    def put_on_stream(self, peer: int, dst_win: "RegisteredWindow", dst_off: int,
                      src_win: "RegisteredWindow", src_off: int, nbytes: int, stream: Any = None) -> None:
        """Enqueues on `stream` a copy of nbytes from this rank's copy of
        src_win at src_off into `peer`'s (world rank) copy of dst_win at
        dst_off: the copy engine for a peer on this host, a GDA put for one
        on another (ccoPutOnStream). Streams as :meth:`all_reduce`; the
        host platform copies before returning."""
        self.put_signal_on_stream(peer, dst_win, dst_off, src_win, src_off, nbytes, None, 0, 0, "set", stream)

    def put_signal_on_stream(self, peer: int, dst_win: "RegisteredWindow", dst_off: int,
                             src_win: "RegisteredWindow", src_off: int, nbytes: int,
                             sig_win: Optional["RegisteredWindow"], sig_off: int, value: int,
                             op: str = "set", stream: Any = None) -> None:
        """:meth:`put_on_stream`, then peer's uint64 at sig_win + sig_off set
        to (op "set") or increased by ("add") `value`, ordered after the
        data: a peer that sees the signal sees the data
        (ccoPutSignalOnStream; sig_win None: the put alone)."""
        self._check_alive()
        peer = to_c(INT, "peer", peer, low=0, high=self._size - 1)
        dst_off = to_c(SIZE_T, "dst_off", dst_off, low=0)
        src_off = to_c(SIZE_T, "src_off", src_off, low=0)
        nbytes = to_c(SIZE_T, "nbytes", nbytes, low=0)
        h = _stream_of(stream)
        if sig_win is None:
            self._check(_lib.function("ccoPutOnStream")(self._h, peer, dst_win.handle, dst_off, src_win.handle, src_off,
                                                 nbytes, h))
            return
        sig_off = to_c(SIZE_T, "sig_off", sig_off, low=0)
        value = to_c(UINT64, "value", value)
        self._check(_lib.function("ccoPutSignalOnStream")(self._h, peer, dst_win.handle, dst_off, src_win.handle, src_off,
                                                   nbytes, sig_win.handle, sig_off, value, self._signal_op(op), h))

    def signal_on_stream(self, peer: int, sig_win: "RegisteredWindow", sig_off: int, value: int,
                         op: str = "set", stream: Any = None) -> None:
        """Enqueues: peer's uint64 at sig_win + sig_off set to ("set") or
        increased by ("add", atomic) `value` once the stream's earlier work
        is done (ccoSignalOnStream). Waiting for it:
        :meth:`stream_wait_signal`."""
        self._check_alive()
        peer = to_c(INT, "peer", peer, low=0, high=self._size - 1)
        sig_off = to_c(SIZE_T, "sig_off", sig_off, low=0)
        value = to_c(UINT64, "value", value)
        op_c = self._signal_op(op)
        self._check(_lib.function("ccoSignalOnStream")(self._h, peer, sig_win.handle, sig_off, value, op_c,
                                                _stream_of(stream)))

    def barrier_on_stream(self, stream: Any = None) -> None:
        """Collective, enqueued on `stream`: every rank's stream work before
        it (puts and signals included) is complete and visible before any
        rank's stream work after it starts (ccoBarrierOnStream; one block
        on the GPU, capturable after the first call). The host platform
        waits here. `stream`, here and in the other *_on_stream calls: a
        handle, a torch or cupy stream or a CUstream; None is the legacy
        default stream (pass torch.cuda.current_stream() to order it with
        torch's work)."""
        self._check_alive()
        self._check(_lib.function("ccoBarrierOnStream")(self._h, _stream_of(stream)))

    def quiet_on_stream(self, stream: Any = None) -> None:
        """This rank's puts and signals enqueued on `stream` before it are
        complete at their peers before the stream's later work
        (ccoQuietOnStream; they already are, so nothing is enqueued)."""
        self._check_alive()
        self._check(_lib.function("ccoQuietOnStream")(self._h, _stream_of(stream)))

    # ---------------------------------------------------- host collectives

    def barrier(self) -> None:
        """Collective barrier over every rank (bootstrap sockets)."""
        h = self._h
        if h is None:
            raise CCOInvalidUsage("the communicator was destroyed")
        res = self._barrier_fn(h)
        if res:
            raise error_for(res, _lib.last_error(h))

    def allgather(self, data: Union[bytes, bytearray, memoryview]) -> List[bytes]:
        """Collective: every rank passes the same number of bytes; returns
        each rank's bytes, indexed by rank."""
        self._check_alive()
        send = bytes(data)
        n = to_c(SIZE_T, "len(data)", len(send))
        recv = ctypes.create_string_buffer(max(1, n * self._size))
        self._check(self._lib.ccoBootstrapAllGather(self._h, send, recv, n))
        raw = recv.raw
        return [raw[r * n:(r + 1) * n] for r in range(self._size)]

    def abort(self) -> None:
        """Fails the communicator now and tells the peers (they get
        CCORemoteError). Safe from any thread; destroy() is still needed."""
        self._check_alive()
        self._check(self._lib.ccoCommAbort(self._h))

    # ---------------------------------------------- collectives on windows

    def all_reduce(self, tensor: Any, op: Any = "sum", out: Any = None, stream: Any = None) -> Any:
        """Collective: every rank's `tensor` reduced elementwise with `op`
        ("sum", "max" or "min") into `out` on every rank, in place when
        `out` is None; returns the result (`out`, else `tensor`).

        `tensor` and `out` are torch tensors, cupy arrays, numpy arrays (host
        platform) or cco array views, contiguous, of float32, bfloat16,
        float16 or int32, in windows of this communicator at the same
        offsets on every rank (docs/collectives_python.md); every rank
        passes the same shape, dtype and op. On a GPU the work is enqueued
        on `stream` (a handle, a torch or cupy stream, a CUstream; by default
        torch's current stream for a torch tensor, cupy's for a cupy array)
        and the call returns: it can be captured in a CUDA graph, once one
        call of the communicator ran outside the capture. The host platform
        reduces before returning. Half types are reduced in float32 and
        rounded once; sums add the ranks in rank order, so every rank gets
        the same bits. A tensor outside the windows raises CCONotInWindow.
        """
        return collectives.all_reduce(self, tensor, op, out, stream)

    def all_gather(self, tensor: Any, out: Any, stream: Any = None) -> Any:
        """Collective: rank r's `tensor` lands in block r of `out` on every
        rank. `out` has size x tensor.numel() elements (any shape), and may
        be a tensor whose block `rank` is `tensor`. Returns `out`.
        Arguments and streams as :meth:`all_reduce`."""
        return collectives.all_gather(self, tensor, out, stream)

    def reduce_scatter(self, tensor: Any, out: Any, op: Any = "sum", stream: Any = None) -> Any:
        """Collective: `tensor` is size blocks of out.numel() elements; rank
        r's `out` gets block r reduced over every rank with `op`. Returns
        `out`. Arguments and streams as :meth:`all_reduce`."""
        return collectives.reduce_scatter(self, tensor, out, op, stream)

    def all_to_all(self, tensor: Any, out: Any, stream: Any = None) -> Any:
        """Collective: `tensor` is size equal blocks; block p goes to rank p,
        into block `rank` of its `out` (the same number of elements as
        `tensor`, not overlapping it). Returns `out`. Arguments and streams
        as :meth:`all_reduce`."""
        return collectives.all_to_all(self, tensor, out, stream)

    def broadcast(self, tensor: Any, root: int, out: Any = None, stream: Any = None) -> Any:
        """Collective: rank `root`'s `tensor` into `out` on every rank (into
        `tensor` itself when `out` is None). Every rank passes a tensor of
        the same shape and dtype in a window. Returns the result.
        Arguments and streams as :meth:`all_reduce`."""
        return collectives.broadcast(self, tensor, root, out, stream)

    def collective_algorithm(self, name: str, nbytes: int) -> str:
        """The algorithm a collective of `nbytes` would use here ("oneshot",
        "ll", "twoshot", "push", "pull", "hier"), CCO_ALGO included; `name`
        is "all_reduce", "all_gather", "reduce_scatter", "all_to_all" or
        "broadcast" (or the C names, "allreduce" ...)."""
        return collectives.collective_algorithm(self, name, nbytes)

    def _external_alias(self, ptr: int, nbytes: int) -> Optional[int]:
        """The flat-VA alias of [ptr, ptr + nbytes) when it lies in the
        memory of an external window of this communicator (its own address,
        outside the flat VA), else None."""
        with self._lock:
            windows = list(self._windows.values())
        for win in windows:
            src = win.source_ptr
            if src is not None and win._alive and src <= ptr and ptr + nbytes <= src + win.size:
                return win._local_ptr + (ptr - src)
        return None

    # ---------------------------------------------------- symmetric memory

    def alloc_mem(self, size: int) -> AllocatedMemory:
        """Local: `size` bytes of symmetric memory in this rank's slot.
        Ranks that allocate and free in the same order get the same offsets."""
        self._check_alive()
        size = to_c(SIZE_T, "size", size, low=1)
        out = ctypes.c_void_p()
        self._check(self._lib.ccoMemAlloc(self._h, size, ctypes.byref(out)))
        mem = AllocatedMemory(self, _written(out), size)
        self._track(mem)
        return mem

    def free_mem(self, mem: Union[AllocatedMemory, int]) -> None:
        """Frees an allocation (or import). It must have no live window."""
        self._check_alive()
        if isinstance(mem, AllocatedMemory):
            self._own(mem, "this allocation")
        else:
            ptr = _address(mem, "mem")
            with self._lock:
                tracked = self._allocs.get(ptr)
            if tracked is None:  # let the library judge (foreign, interior, double free)
                self._check(self._lib.ccoMemFree(self._h, ptr))
                return
            mem = tracked
        self._release(mem)

    def import_mem(self, ext_ptr: int, size: int, keepalive: Any = None) -> AllocatedMemory:
        """Local: maps memory allocated elsewhere into this rank's slot, no
        copy (on cuda the base of a cuMem allocation exportable as an fd,
        such as a torch symmetric-memory tensor). `keepalive` is held by the
        handle (e.g. the tensor that owns the memory)."""
        self._check_alive()
        ext_ptr = _address(ext_ptr, "ext_ptr")
        size = to_c(SIZE_T, "size", size, low=1)
        out = ctypes.c_void_p()
        self._check(self._lib.ccoMemImport(self._h, ext_ptr, size, ctypes.byref(out)))
        mem = AllocatedMemory(self, _written(out), size, imported=True, source_ptr=ext_ptr,
                              keepalive=keepalive)
        self._track(mem)
        return mem

    def register_window(self, ptr: _Pointer, size: Optional[int] = None) -> RegisteredWindow:
        """Collective: makes [ptr, ptr + size) of one allocation reachable by
        the LSA peers. Same order, offset and size on every rank."""
        self._check_alive()
        memory = ptr if isinstance(ptr, AllocatedMemory) else None
        if memory is not None:
            self._own(memory, "this allocation")
            if size is None:
                size = memory.size
        address = _address(ptr, "ptr")
        if size is None:
            raise CCOInvalidArgument("size is required with a raw pointer")
        size = to_c(SIZE_T, "size", size, low=1)
        if memory is None:
            with self._lock:
                memory = self._allocs.get(address)
        out = ctypes.c_void_p()
        self._check(self._lib.ccoWindowRegister(self._h, address, size, ctypes.byref(out)))
        win = RegisteredWindow(self, _written(out), address, size, memory=memory)
        self._track(win)
        return win

    def register_window_alloc(self, size: int) -> RegisteredWindow:
        """Collective: allocates `size` bytes and registers them (the guide's
        size-only form). The window owns the memory."""
        self._check_alive()
        size = to_c(SIZE_T, "size", size, low=1)
        win, local = ctypes.c_void_p(), ctypes.c_void_p()
        self._check(self._lib.ccoWindowRegisterAlloc(self._h, size, ctypes.byref(win),
                                                     ctypes.byref(local)))
        window = RegisteredWindow(self, _written(win), _written(local), size, owns="alloc")
        self._track(window)
        return window

    def register_external_window(self, ptr: int, nbytes: int,
                                 keepalive: Any = None) -> RegisteredWindow:
        """Collective: imports external memory (e.g. a torch symmetric-memory
        tensor's ``data_ptr()``) and registers `nbytes` of it, zero copy.
        ``local_ptr`` is its alias in the flat VA. The window owns the import;
        `keepalive` (e.g. the tensor) is held as long as the window."""
        self._check_alive()
        ptr = _address(ptr, "ptr")
        nbytes = to_c(SIZE_T, "nbytes", nbytes, low=1)
        win, local = ctypes.c_void_p(), ctypes.c_void_p()
        self._check(self._lib.ccoWindowRegisterExternal(self._h, ptr, nbytes, ctypes.byref(win),
                                                        ctypes.byref(local)))
        window = RegisteredWindow(self, _written(win), _written(local), nbytes, owns="external",
                                  keepalive=keepalive, source_ptr=ptr)
        self._track(window)
        return window

    def deregister_window(self, win: Union[RegisteredWindow, int]) -> None:
        """Local: unmaps the peers' copies and frees what the window owns."""
        self._check_alive()
        if isinstance(win, RegisteredWindow):
            self._own(win, "this window")
        else:
            handle = _address(win, "win")
            with self._lock:
                tracked = self._windows.get(handle)
            if tracked is None:
                raise CCOInvalidArgument(f"{handle:#x} is not a live window of this communicator")
            win = tracked
        self._release(win)

    def window_info(self, win: RegisteredWindow) -> _abi.WindowDeviceStruct:
        """A host copy of the window's descriptor (``ccoWindowGetInfo``)."""
        self._check_alive()
        self._own(win, "this window")
        desc, local = _abi.WindowDeviceStruct(), ctypes.c_void_p()
        self._check(self._lib.ccoWindowGetInfo(self._h, win._handle, ctypes.byref(desc),
                                               ctypes.byref(local)))
        return desc

    def peer_ptr(self, local_ptr: _Pointer, peer: int) -> int:
        """Address on this host of world rank `peer`'s copy of `local_ptr`,
        which must lie in a registered window; `peer` must be on this host."""
        self._check_alive()
        address = _address(local_ptr, "local_ptr")
        peer = to_c(INT, "peer", peer, low=0, high=self._size - 1)
        out = ctypes.c_void_p()
        self._check(self._lib.ccoGetPeerPtr(self._h, address, peer, ctypes.byref(out)))
        return _written(out)

    # ------------------------------------------------ device communicators

    def create_dev_comm(self, reqs: Optional[CCODevCommRequirements] = None) -> DevComm:
        """Collective: allocates what `reqs` asks for (defaults when None)
        and makes the device copy kernels take as ``dc.ptr``."""
        self._check_alive()
        if reqs is None:
            reqs = CCODevCommRequirements()
        if not isinstance(reqs, _abi.DevCommRequirementsStruct):
            raise CCOInvalidArgument(
                f"reqs must be a CCODevCommRequirements, not {type(reqs).__name__}")
        struct = _abi.DevCommStruct()
        self._check(self._lib.ccoDevCommCreate(self._h, ctypes.byref(reqs), ctypes.byref(struct)))
        dptr = ctypes.c_void_p()
        res = self._lib.ccoDevCommCopyToDevice(self._h, ctypes.byref(struct), ctypes.byref(dptr))
        if res != _lib.SUCCESS:
            detail = _lib.last_error(self._h)
            self._lib.ccoDevCommDestroy(self._h, ctypes.byref(struct))
            raise error_for(res, detail)
        dc = DevComm(self, struct, _written(dptr))
        self._track(dc)
        return dc

    def destroy_dev_comm(self, dc: DevComm) -> None:
        """Local: releases a device communicator (its kernels must be done)."""
        self._check_alive()
        self._own(dc, "this device communicator")
        self._release(dc)

    # ------------------------------------------------------------ teardown

    def destroy(self) -> None:
        """Releases every resource, newest first, then the communicator.

        Local (peers still talking to this rank get CCORemoteError). A second
        call does nothing. Failures while releasing single resources are
        ignored, since ccoCommDestroy releases whatever is left; a failure of
        ccoCommDestroy itself is raised.
        """
        with self._lock:
            h = self._h
            if h is None:
                return
            left = list(self._resources.values())
        for res in reversed(left):
            if res._alive:
                res._release_c()
            self._untrack(res)
        global _allocator_comm
        with _allocator_lock:
            if _allocator_comm is not None and _allocator_comm() is self:
                self._lib.ccoTorchAllocatorSetComm(None)
                _allocator_comm = None
        with self._lock:
            self._h = None
        rc = self._destroy_handle(h)
        if rc != _lib.SUCCESS:
            raise error_for(rc, _lib.last_error(None))

    close = destroy

    def _destroy_handle(self, handle: int) -> int:
        """The C call that ends the communicator; a subclass that wraps a
        communicator owned elsewhere (the torch backend's) does not."""
        return int(self._lib.ccoCommDestroy(handle))

    def __enter__(self) -> "Communicator":
        self._check_alive()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.destroy()

    def __del__(self) -> None:
        # A forgotten communicator still releases its memory and sockets.
        try:
            if getattr(self, "_h", None) is not None:
                self.destroy()
        except Exception:  # noqa: BLE001 - nothing useful to do at collection time
            pass

    def __repr__(self) -> str:
        if self._h is None:
            return "Communicator(destroyed)"
        return (f"Communicator(rank={self._rank}, size={self._size}, lsa_rank={self._lsa_rank}, "
                f"lsa_size={self._lsa_size}, platform={self._platform!r})")
