"""How a binding becomes one extern call: the symbol's entry in the table,
its arguments converted to the declared types, and ``extern_elementwise``.

Works with every Triton from 3.2, whose builtins take ``_builder``, to the
ones that take ``_semantic``: bindings accept both and pass on the one this
Triton's ``extern_elementwise`` declares.
"""
from __future__ import annotations

import inspect
import os
from typing import Any, Optional, Sequence

from triton.language import core

from ..._convert import INT, UINT64, CType, to_c
from ..device_functions import CCO_DEVICE_FUNCTIONS, I32, I64, U64

CONTEXT_KWARG = "_semantic" if "_semantic" in inspect.signature(core.extern_elementwise).parameters else "_builder"

_DTYPES = {U64: core.dtype("uint64"), I64: core.dtype("int64"), I32: core.dtype("int32")}
# Python integers pass the package's one checked conversion into C.
_CTYPES = {U64: UINT64, I64: CType("int64_t", -(1 << 63), (1 << 63) - 1), I32: INT}
LIB_NAME = "cco"


def context(semantic: Any, builder: Any) -> Any:
    ctx = semantic if semantic is not None else builder
    if ctx is None:
        raise ValueError("cco device calls run inside @triton.jit kernels only")
    return ctx


def _unwrap(value: Any) -> Any:
    return value.value if isinstance(value, core.constexpr) else value


def constant(value: Any, what: str, allowed: Optional[Sequence[int]] = None) -> int:
    """A compile-time integer (a cco enum, a Python int, a tl.constexpr)."""
    v = _unwrap(value)
    if isinstance(v, core.tensor):
        raise TypeError(f"cco: {what} must be a compile-time constant (a cco enum, an int or a tl.constexpr), "
                        "not a run-time value: it selects the function")
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"cco: {what} must be an integer constant, got {v!r}")
    if allowed is not None and v not in allowed:
        raise ValueError(f"cco: {what} must be one of {sorted(int(a) for a in allowed)}, got {int(v)}")
    return int(v)


def _check_linked(ctx: Any) -> None:
    """A kernel launched without the bitcode fails late, in ptxas, with
    "Unresolved extern function": say so while tracing instead."""
    builder = getattr(ctx, "builder", ctx)
    libs = getattr(getattr(builder, "options", None), "extern_libs", None)
    if libs is None:
        return  # this Triton keeps its options elsewhere: ptxas will tell
    items = libs.items() if isinstance(libs, dict) else libs
    for name, path in items:
        if name == LIB_NAME or os.path.basename(str(path)).startswith("libcco_device"):
            return
    raise ValueError("cco: this kernel calls the cco device API; launch (or compile) it with "
                     "extern_libs=cco.get_extern_libs()")


def _convert(value: Any, name: str, ctype: str, symbol: str, pure: bool, ctx: Any) -> Any:
    v = _unwrap(value)
    if v is None:
        raise TypeError(f"cco: {symbol}: argument {name} is None")
    if isinstance(v, core.tensor):
        if v.type.is_block() and not pure:
            raise TypeError(f"cco: {symbol}: argument {name} must be a scalar: every thread of the program "
                            "makes this call with the same arguments")
        sca = v.dtype
        if sca.is_floating() or (sca.is_ptr() and ctype == I32):
            kinds = "an integer" if ctype == I32 else "an integer or a pointer"
            raise TypeError(f"cco: {symbol}: argument {name} must be {kinds}, got {sca}")
    else:  # an enum member becomes a plain constant
        v = to_c(_CTYPES[ctype], f"cco: {symbol}: argument {name}", v)
    return core.cast(v, _DTYPES[ctype], **{CONTEXT_KWARG: ctx})


def call(symbol: str, args: Sequence[Any], ctx: Any) -> Any:
    """The extern call of one table entry; returns its (scalar) result."""
    fn = CCO_DEVICE_FUNCTIONS[symbol]
    if len(args) != len(fn.params):
        raise TypeError(f"cco: {symbol} takes {len(fn.params)} arguments, got {len(args)}")
    _check_linked(ctx)
    values = [_convert(a, n, t, symbol, fn.pure, ctx) for a, (n, t) in zip(args, fn.params)]
    types = tuple(_DTYPES[t] for t in fn.arg_types)
    return core.extern_elementwise(LIB_NAME, "", values, {types: (symbol, _DTYPES[fn.ret])}, is_pure=fn.pure,
                                   **{CONTEXT_KWARG: ctx})
