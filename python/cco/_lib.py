"""Finding libcco and declaring its functions for ctypes.

Nothing here parses C at run time: the prototypes are written out below
(the result-code table is in :mod:`cco.errors`), and
``tests/python/test_lib.py`` compares them with the header text (every
declaration, and ``CCO_RESULT_LIST``) so that the two cannot drift apart
silently.

The library is loaded on first use, not at import, so ``import cco`` works
(and ``cco.errors`` can be used) on a machine that has no libcco yet.
"""
from __future__ import annotations

import ctypes
import glob
import os
import threading
from typing import Any, Dict, List, Optional, Tuple

from . import _abi, _checkout
from .errors import CCOUnsupported, error_for

# ---------------------------------------------------------------- results

# ccoResult_t values the calls below compare with (the whole table, with the
# descriptions, is errors.RESULT_CODES).
SUCCESS = 0
INVALID_ARGUMENT = 1
INVALID_USAGE = 2
SYSTEM_ERROR = 3
CUDA_ERROR = 4
NET_ERROR = 5
REMOTE_ERROR = 6
TIMEOUT = 7
OUT_OF_MEMORY = 8
UNSUPPORTED = 9
INTERNAL_ERROR = 10

PLATFORM_HOST = 0  # ccoPlatformHost
PLATFORM_CUDA = 1  # ccoPlatformCuda

# ------------------------------------------------------------- prototypes

_p = ctypes.c_void_p
_pp = ctypes.POINTER(ctypes.c_void_p)
_int = ctypes.c_int
_pint = ctypes.POINTER(ctypes.c_int)
_size = ctypes.c_size_t
_psize = ctypes.POINTER(ctypes.c_size_t)
_res = ctypes.c_int  # ccoResult_t
_pres = ctypes.POINTER(ctypes.c_int)
_ssize = ctypes.c_ssize_t

# name -> (restype, argtypes). Every function of cco.h and cco_torch.h.
PROTOTYPES = {
    "ccoGetErrorString": (ctypes.c_char_p, [_res]),
    "ccoGetLastError": (ctypes.c_char_p, [_p]),
    "ccoGetVersion": (_res, [_pint]),
    "ccoGetUniqueId": (_res, [ctypes.POINTER(_abi.UniqueIdStruct)]),
    "ccoUniqueIdToString": (_res, [ctypes.POINTER(_abi.UniqueIdStruct), ctypes.c_char_p, _size]),
    "ccoUniqueIdFromString": (_res, [ctypes.c_char_p, ctypes.POINTER(_abi.UniqueIdStruct)]),
    "ccoUniqueIdGetRootAddress": (_res, [ctypes.POINTER(_abi.UniqueIdStruct), ctypes.c_char_p, _size]),
    "ccoCommCreate": (_res, [_abi.UniqueIdStruct, _int, _int, _size, _pp]),
    "ccoCommCreateFromEnv": (_res, [_size, _pp]),
    "ccoCommDestroy": (_res, [_p]),
    "ccoCommAbort": (_res, [_p]),
    "ccoCommGetAsyncError": (_res, [_p, _pres]),
    "ccoCommRank": (_res, [_p, _pint]),
    "ccoCommSize": (_res, [_p, _pint]),
    "ccoCommLsaRank": (_res, [_p, _pint]),
    "ccoCommLsaSize": (_res, [_p, _pint]),
    "ccoCommNodeCount": (_res, [_p, _pint]),
    "ccoCommNodeIndex": (_res, [_p, _pint]),
    "ccoCommTeam": (_res, [_p, _int, ctypes.POINTER(_abi.TeamStruct)]),
    "ccoTeamRankToWorld": (_res, [_p, _int, _int, _pint]),
    "ccoTeamRankFromWorld": (_res, [_p, _int, _int, _pint]),
    "ccoBarrierAll": (_res, [_p]),
    "ccoBootstrapAllGather": (_res, [_p, _p, _p, _size]),
    "ccoCommPlatform": (_res, [_p, _pint]),
    "ccoCommCudaDevice": (_res, [_p, _pint]),
    "ccoCommFlatVa": (_res, [_p, _pp, _psize]),
    "ccoMemAlloc": (_res, [_p, _size, _pp]),
    "ccoMemFree": (_res, [_p, _p]),
    "ccoMemImport": (_res, [_p, _p, _size, _pp]),
    "ccoWindowRegister": (_res, [_p, _p, _size, _pp]),
    "ccoWindowRegisterAlloc": (_res, [_p, _size, _pp, _pp]),
    "ccoWindowRegisterExternal": (_res, [_p, _p, _size, _pp, _pp]),
    "ccoWindowDeregister": (_res, [_p, _p]),
    "ccoWindowGetInfo": (_res, [_p, _p, ctypes.POINTER(_abi.WindowDeviceStruct), _pp]),
    "ccoGetPeerPtr": (_res, [_p, _p, _int, _pp]),
    "ccoDevCommCreate": (
        _res,
        [_p, ctypes.POINTER(_abi.DevCommRequirementsStruct), ctypes.POINTER(_abi.DevCommStruct)],
    ),
    "ccoDevCommDestroy": (_res, [_p, ctypes.POINTER(_abi.DevCommStruct)]),
    "ccoDevCommCopyToDevice": (_res, [_p, ctypes.POINTER(_abi.DevCommStruct), _pp]),
    "ccoSdmaPutAsync": (
        _res,
        [_p, _int, _p, _size, _p, _size, _size, _p, _size, ctypes.c_uint64, _p],
    ),
    "ccoStreamWaitSignal": (_res, [_p, _p, _size, ctypes.c_uint64, _p]),
    # cco_torch.h
    "ccoTorchAllocatorSetComm": (_res, [_p]),
    "cco_torch_malloc": (_p, [_ssize, _int, _p]),
    "cco_torch_free": (None, [_p, _ssize, _int, _p]),
}

# Functions of cco.h that a libcco built before them lacks: the collectives,
# declared before their implementation landed. They are bound on first use
# (function()), not by load(), so such a library still loads and only these
# calls fail, naming the symbol. test_lib.py checks them against the header
# with the rest.
LATE_PROTOTYPES = {
    # comm, sendbuf, recvbuf, count, ccoDataType_t, ccoRedOp_t, stream
    "ccoAllReduce": (_res, [_p, _p, _p, _size, _int, _int, _p]),
    # comm, sendbuf, recvbuf, sendcount, ccoDataType_t, stream
    "ccoAllGather": (_res, [_p, _p, _p, _size, _int, _p]),
    # comm, sendbuf, recvbuf, recvcount, ccoDataType_t, ccoRedOp_t, stream
    "ccoReduceScatter": (_res, [_p, _p, _p, _size, _int, _int, _p]),
    # comm, sendbuf, recvbuf, count (per peer), ccoDataType_t, stream
    "ccoAlltoAll": (_res, [_p, _p, _p, _size, _int, _p]),
    # comm, sendbuf, recvbuf, count, ccoDataType_t, root, stream
    "ccoBroadcast": (_res, [_p, _p, _p, _size, _int, _int, _p]),
    # comm, collective name, bytes, ccoAlgo_t*
    "ccoCollAlgorithm": (_res, [_p, ctypes.c_char_p, _size, _pint]),
    # One-sided calls ordered on a stream (Communicator.put_on_stream ...).
    # comm, peer, dstWin, dstOff, srcWin, srcOff, bytes, stream
    "ccoPutOnStream": (_res, [_p, _int, _p, _size, _p, _size, _size, _p]),
    # ... then sigWin, sigOff, value, ccoStreamSignalOp_t, stream
    "ccoPutSignalOnStream": (_res, [_p, _int, _p, _size, _p, _size, _size, _p, _size, ctypes.c_uint64, _int, _p]),
    # comm, peer, sigWin, sigOff, value, ccoStreamSignalOp_t, stream
    "ccoSignalOnStream": (_res, [_p, _int, _p, _size, ctypes.c_uint64, _int, _p]),
    # comm, stream
    "ccoBarrierOnStream": (_res, [_p, _p]),
    "ccoQuietOnStream": (_res, [_p, _p]),
    # The MoE op (cco_moe.h; Python: cco.ops). comm, const ccoMoeConfig*, ccoMoeOp**
    "ccoMoeCreate": (_res, [_p, _p, _pp]),
    "ccoMoeDestroy": (_res, [_p]),
    # config, nRanks, bytes
    "ccoMoeArenaBytes": (_res, [_p, _int, _psize]),
    # op, ccoMoeRegion_t, ptr, bytes
    "ccoMoeRegion": (_res, [_p, _int, _pp, _psize]),
    # op, tokens, weights, scales, indices, numTokens, stream
    "ccoMoeDispatch": (_res, [_p, _p, _p, _p, _p, _int, _p]),
    # op, expertOut, weights, out, outWeights, stream
    "ccoMoeCombine": (_res, [_p, _p, _p, _p, _p, _p]),
    "ccoMoeCheck": (_res, [_p]),
    # op, ccoMoeStats*
    "ccoMoeGetStats": (_res, [_p, _p]),
}

# ---------------------------------------------------------------- loading

LIBRARY_ENV = "CCO_LIBRARY"
_PACKAGE_DIR = _checkout.PACKAGE_DIR


class LibraryNotFoundError(ImportError):
    """libcco could not be found or loaded; the message lists where we looked."""


def candidate_paths() -> List[str]:
    """Where libcco is looked for, in order (``CCO_LIBRARY`` handled apart).

    1. next to the package: ``cco/lib/libcco.so*`` (the wheel puts it there);
    2. only when this package is ``<repo>/python/cco`` of a checkout: that
       checkout's ``build/lib/libcco.so``;
    3. the system loader's search path (``LD_LIBRARY_PATH``, ldconfig).
    """
    found: List[str] = []
    bundled = sorted(glob.glob(str(_PACKAGE_DIR / "lib" / "libcco.so*")), key=len)
    # The pattern itself when nothing matches, so the error lists it.
    found.append(bundled[0] if bundled else str(_PACKAGE_DIR / "lib" / "libcco.so*"))
    repo = _checkout.checkout_root()
    if repo is not None:
        found.append(str(repo / "build" / "lib" / "libcco.so"))
    found.append("libcco.so.0")
    return found


_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None
_path: Optional[str] = None
_late: Dict[str, Any] = {}  # LATE_PROTOTYPES bound so far


def _declare(lib: ctypes.CDLL) -> None:
    for name, (restype, argtypes) in PROTOTYPES.items():
        fn = getattr(lib, name)  # AttributeError names a symbol this libcco lacks
        fn.restype = restype
        fn.argtypes = argtypes


def _try_load(path: str) -> Tuple[Optional[ctypes.CDLL], str]:
    try:
        lib = ctypes.CDLL(path)
    except OSError as exc:
        return None, str(exc)
    try:
        _declare(lib)
    except AttributeError as exc:
        return None, f"not a compatible libcco ({exc})"
    return lib, ""


def load() -> ctypes.CDLL:
    """The loaded libcco, loading it on the first call (thread-safe)."""
    global _lib, _path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        explicit = os.environ.get(LIBRARY_ENV)
        tried: List[str] = []
        if explicit:
            # An explicit choice that fails is an error, not a reason to pick
            # some other libcco the user did not ask for.
            lib, why = _try_load(explicit)
            if lib is None:
                raise LibraryNotFoundError(f"{LIBRARY_ENV}={explicit!r} could not be loaded: {why}")
            _lib, _path = lib, os.path.abspath(explicit)
            return _lib
        for path in candidate_paths():
            if os.sep in path and not os.path.exists(path):
                tried.append(f"{path} (missing)")
                continue
            lib, why = _try_load(path)
            if lib is not None:
                _lib, _path = lib, _resolved_path(lib, path)
                return _lib
            tried.append(f"{path} ({why})")
        raise LibraryNotFoundError(
            "libcco not found. Install this package with its library (pip install . at the "
            "repository root), set CCO_LIBRARY to the path of libcco.so, build the checkout "
            "this package sits in (cmake -S . -B build && cmake --build build), or put "
            "libcco.so.0 on the loader path. Tried: " + "; ".join(tried)
        )


def _resolved_path(lib: ctypes.CDLL, fallback: str) -> str:
    """Absolute path of the loaded file, for torch's allocator (which dlopens
    it again and must get the very same copy)."""
    if os.sep in fallback:
        return os.path.abspath(fallback)
    try:  # found through the loader: ask it where
        info = _DlInfo()
        libdl = ctypes.CDLL(None)
        addr = ctypes.cast(lib.ccoGetVersion, ctypes.c_void_p)
        if libdl.dladdr(addr, ctypes.byref(info)) and info.dli_fname:
            return os.path.abspath(info.dli_fname.decode())
    except (OSError, AttributeError):
        pass
    return fallback


class _DlInfo(ctypes.Structure):
    _fields_ = [
        ("dli_fname", ctypes.c_char_p),
        ("dli_fbase", ctypes.c_void_p),
        ("dli_sname", ctypes.c_char_p),
        ("dli_saddr", ctypes.c_void_p),
    ]


def library_path() -> str:
    """Path of the libcco this process uses (loads it if needed)."""
    load()
    assert _path is not None
    return _path


def version() -> Tuple[int, int, int]:
    """(major, minor, patch) of the loaded library."""
    v = ctypes.c_int()
    res = load().ccoGetVersion(ctypes.byref(v))
    if res != SUCCESS:
        raise error_for(res, "ccoGetVersion failed")
    return v.value // 10000, v.value // 100 % 100, v.value % 100


def last_error(handle: Optional[int]) -> str:
    """ccoGetLastError, copied at once (the C string is overwritten by the
    next failure). handle None: the calling thread's last failure."""
    raw = load().ccoGetLastError(handle)
    return raw.decode(errors="replace") if raw else ""


def has_function(name: str) -> bool:
    """Whether the loaded libcco exports `name` (one of LATE_PROTOTYPES)."""
    try:
        function(name)
    except CCOUnsupported:
        return False
    return True


def function(name: str) -> Any:
    """The bound C function `name` of LATE_PROTOTYPES (loads libcco first).

    Raises :class:`~cco.errors.CCOUnsupported` naming the symbol when this
    libcco lacks it, so a library older than the call fails the call, not
    the import or the load.
    """
    fn = _late.get(name)
    if fn is not None:
        return fn
    restype, argtypes = LATE_PROTOTYPES[name]
    lib = load()
    try:
        fn = getattr(lib, name)
    except AttributeError:
        raise CCOUnsupported(
            f"the loaded libcco ({_path}) has no symbol {name}: it was built before {name} "
            "existed; build or install a libcco that has it") from None
    fn.restype = restype
    fn.argtypes = argtypes
    _late[name] = fn
    return fn
