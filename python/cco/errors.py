"""Exceptions: one class per ``ccoResult_t`` code.

Every failing C call becomes the subclass of :class:`CCOError` for its code,
with ``.code`` (the integer result) and ``.detail`` (``ccoGetLastError``,
which names the rank and the argument at fault). Misuse that the Python
layer catches itself (a destroyed communicator, a released window, a bad
field name) raises the same classes, so callers handle one hierarchy.

Two classes also derive from the matching builtin, so generic handlers keep
working: :class:`CCOInvalidArgument` is a ``ValueError`` and
:class:`CCOTimeout` a ``TimeoutError``. :class:`CCOArgumentOverflow`, an
integer argument its C type cannot hold, is both a ``CCOInvalidArgument``
and an ``OverflowError`` (what Python's own conversions raise for it).
:class:`CCONotInWindow`, a collective's buffer outside the communicator's
windows, is a ``CCOInvalidArgument`` too.
"""
from __future__ import annotations

from typing import Any, Dict, Tuple, Type

# This module imports nothing of the package: cco._lib imports it (to raise
# these classes), so an import back would be a cycle.

# Mirror of CCO_RESULT_LIST in include/cco/cco.h: (C name, value, description).
# tests/python/test_lib.py compares it with the header text.
RESULT_CODES: Tuple[Tuple[str, int, str], ...] = (
    ("ccoSuccess", 0, "success"),
    ("ccoInvalidArgument", 1, "invalid argument"),
    ("ccoInvalidUsage", 2, "invalid usage"),
    ("ccoSystemError", 3, "system call failed"),
    ("ccoCudaError", 4, "CUDA driver error"),
    ("ccoNetError", 5, "network error"),
    ("ccoRemoteError", 6, "remote rank failed or closed its connection"),
    ("ccoTimeout", 7, "timed out"),
    ("ccoOutOfMemory", 8, "out of memory"),
    ("ccoUnsupported", 9, "unsupported"),
    ("ccoInternalError", 10, "internal error"),
)


class CCOError(Exception):
    """A cco call failed. ``code`` is the ccoResult_t, ``detail`` the reason."""

    code: int = -1
    c_name: str = "ccoUnknown"
    description: str = "unknown result"

    def __init__(self, detail: str = "", code: int = -1) -> None:
        if code >= 0 and type(self).code < 0:
            self.code = code  # an unknown code: keep the number
        self.detail = detail
        text = f"{self.c_name} ({self.code}): {self.description}"
        super().__init__(f"{text}: {detail}" if detail else text)

    def __reduce__(self) -> Tuple[Any, ...]:  # picklable across multiprocessing
        return (type(self), (self.detail, self.code))


class CCOInvalidArgument(CCOError, ValueError):
    code, c_name = 1, "ccoInvalidArgument"


class CCOArgumentOverflow(CCOInvalidArgument, OverflowError):
    """An integer argument out of the range of the C type it is passed as
    (ctypes would keep its low bits: 2**32 + 1 as an ``int`` is 1). Raised
    by the package before any C call; its code is ccoInvalidArgument."""


class CCONotInWindow(CCOInvalidArgument):
    """A collective was given a tensor or array whose memory is not in a
    window of the communicator (a plain ``torch.empty``, a numpy array of
    its own, memory allocated but never registered). Its code is
    ccoInvalidArgument; the message names the buffer's shape and dtype."""


class CCOInvalidUsage(CCOError):
    code, c_name = 2, "ccoInvalidUsage"


class CCOSystemError(CCOError):
    code, c_name = 3, "ccoSystemError"


class CCOCudaError(CCOError):
    code, c_name = 4, "ccoCudaError"


class CCONetError(CCOError):
    code, c_name = 5, "ccoNetError"


class CCORemoteError(CCOError):
    code, c_name = 6, "ccoRemoteError"


class CCOTimeout(CCOError, TimeoutError):
    code, c_name = 7, "ccoTimeout"


class CCOOutOfMemory(CCOError):
    code, c_name = 8, "ccoOutOfMemory"


class CCOUnsupported(CCOError):
    code, c_name = 9, "ccoUnsupported"


class CCOInternalError(CCOError):
    code, c_name = 10, "ccoInternalError"


ERRORS_BY_CODE: Dict[int, Type[CCOError]] = {
    cls.code: cls
    for cls in (
        CCOInvalidArgument,
        CCOInvalidUsage,
        CCOSystemError,
        CCOCudaError,
        CCONetError,
        CCORemoteError,
        CCOTimeout,
        CCOOutOfMemory,
        CCOUnsupported,
        CCOInternalError,
    )
}

# Descriptions come from the one mirrored table, not from a second copy.
for _name, _value, _desc in RESULT_CODES:
    if _value in ERRORS_BY_CODE:
        assert ERRORS_BY_CODE[_value].c_name == _name, (_name, _value)
        ERRORS_BY_CODE[_value].description = _desc


def error_for(code: int, detail: str = "") -> CCOError:
    """The exception instance for a non-success result code."""
    cls = ERRORS_BY_CODE.get(code)
    if cls is None:
        return CCOError(detail, code=code)
    return cls(detail)
