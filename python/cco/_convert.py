"""Checked conversion of Python integers to the C types of libcco's parameters.

ctypes converts an int to a C integer or pointer by keeping its low bits,
without a word: ``2**32 + 1`` passed as an ``int`` arrives as 1,
``2**64 + 4096`` passed as a ``size_t`` arrives as 4096, and ``-1`` as a
``size_t`` arrives as ``2**64 - 1``. Every integer the package hands to C
(arguments, pointers given as ints, fields of structures) goes through
:func:`to_c` with the C type it is passed as, and the value it returns is
the one both passed to C and kept by the package (``mem.size`` is what was
allocated). In order:

1. not an integer (``int``, or anything with ``__index__`` such as numpy
   integers; ``bool`` is refused): :class:`~cco.errors.CCOInvalidArgument`;
2. below the argument's own minimum (a size below 1, a negative rank):
   :class:`~cco.errors.CCOInvalidArgument`;
3. outside the C type: :class:`~cco.errors.CCOArgumentOverflow`, an
   ``OverflowError`` that is also a ``CCOInvalidArgument``;
4. above the argument's own maximum (a rank >= nranks):
   :class:`~cco.errors.CCOInvalidArgument`.

Anything else in range is the library's to judge (it names the argument).
"""
from __future__ import annotations

import ctypes
import operator
from typing import Any, NamedTuple, Optional

from .errors import CCOArgumentOverflow, CCOInvalidArgument


class CType(NamedTuple):
    """A C integer type: its name in the headers and its range."""

    name: str
    min: int
    max: int


def _ctype(name: str, ctype: Any) -> CType:
    bits = 8 * ctypes.sizeof(ctype)
    if ctype(-1).value == -1:  # signed
        return CType(name, -(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    return CType(name, 0, (1 << bits) - 1)


# The types of the parameters in cco.h (see the prototypes in cco._lib).
INT = _ctype("int", ctypes.c_int)  # ranks, counts, ccoTeamKind_t
UINT32 = _ctype("uint32_t", ctypes.c_uint32)  # ccoDevCommRequirements fields
SIZE_T = _ctype("size_t", ctypes.c_size_t)  # sizes and offsets
UINT64 = _ctype("uint64_t", ctypes.c_uint64)  # signal values
POINTER = _ctype("pointer", ctypes.c_void_p)  # addresses, handles, streams


def to_c(ctype: CType, name: str, value: Any, low: Optional[int] = None,
         high: Optional[int] = None) -> int:
    """`value` as a plain int that `ctype` holds unchanged, else raises.

    `name` names the argument in the message; `low` and `high` are the
    argument's own bounds (inclusive), checked around the type's range as
    the module docstring says.
    """
    if type(value) is not int:
        value = _integer(name, value, low, high)
    if low is not None and value < low:
        raise CCOInvalidArgument(f"{name} must be an integer{_bounds(low, high)}, not {value}")
    if not ctype.min <= value <= ctype.max:
        raise CCOArgumentOverflow(
            f"{name}={value} does not fit the C {ctype.name} it is passed as "
            f"({ctype.min}..{ctype.max})")
    if high is not None and value > high:
        raise CCOInvalidArgument(f"{name} must be an integer{_bounds(low, high)}, not {value}")
    return value


def _integer(name: str, value: Any, low: Optional[int], high: Optional[int]) -> int:
    """An int subclass or an ``__index__`` object as a plain int; bool refused."""
    if not isinstance(value, bool):
        try:
            return int(operator.index(value))
        except TypeError:
            pass
    raise CCOInvalidArgument(f"{name} must be an integer{_bounds(low, high)}, not {value!r}")


def _bounds(low: Optional[int], high: Optional[int]) -> str:
    if low is not None and high is not None:
        return f" {low}..{high}"
    if low is not None:
        return f" >= {low}"
    if high is not None:
        return f" <= {high}"
    return ""
