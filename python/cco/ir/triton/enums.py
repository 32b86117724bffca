"""The constants of the cco Triton namespace (re-exported by
``cco.ir.triton.cco``), and the trace-time checks that turn them into
symbol names."""
from __future__ import annotations

from enum import IntEnum
from typing import Any

from triton.language import core

from ..device_functions import TEAM_GDA
from ._extern import constant


class CoopScope(IntEnum):
    """Who makes a call together (ccoCoop_t)."""
    THREAD = 0
    WARP = 1
    BLOCK = 2  # the whole program


class ThreadMode(IntEnum):
    """GDA thread modes (ccoGdaThreadMode_t)."""
    AGGREGATE = 0    # the scope issues one operation
    INDEPENDENT = 1  # every thread of the scope issues its own


class SignalOp(IntEnum):
    """What a GDA put or signal does to the peer's signal slot."""
    NONE = 0
    INC = 1  # add 1
    ADD = 2  # add signal_val


class SdmaSignal(IntEnum):
    NONE = 0    # no signal (aggregate with Sdma.commit)
    REMOTE = 1  # bump the peer's signal slot once the data is there


class Team(IntEnum):
    """Teams of the team queries and of the GDA calls' ``team=``."""
    WORLD = 0
    LSA = 1
    CROSS_NODE = 2
    RAIL = 3
    GDA = TEAM_GDA  # the ranks with GDA endpoints under the connection type


class DataType(IntEnum):
    """Element types of the collectives (ccoDataType_t)."""
    FLOAT32 = 0
    BFLOAT16 = 1
    FLOAT16 = 2
    INT32 = 3


class RedOp(IntEnum):
    """Reduction operators of the collectives (ccoRedOp_t)."""
    SUM = 0
    MAX = 1
    MIN = 2


class Status(IntEnum):
    """ccoDevStatus_t, what calls with a side effect return."""
    SUCCESS = 0
    ABORTED = 1
    TIMEOUT = 2
    UNSUPPORTED = 3
    INVALID = 4
    NO_PEER = 5


_SCOPE_NAMES = {CoopScope.THREAD: "thread", CoopScope.WARP: "warp", CoopScope.BLOCK: "block"}
_MODE_NAMES = {ThreadMode.AGGREGATE: "aggregate", ThreadMode.INDEPENDENT: "independent"}


def scope_name(coop: Any, allowed=tuple(CoopScope)) -> str:
    return _SCOPE_NAMES[CoopScope(constant(coop, "coop", allowed))]


def mode_name(thread_mode: Any) -> str:
    return _MODE_NAMES[ThreadMode(constant(thread_mode, "thread_mode", tuple(ThreadMode)))]


def checked_signal_op(op: Any) -> Any:
    # Constant (as the guide passes it) or run-time; a constant is checked here.
    if not isinstance(getattr(op, "value", op), core.tensor):
        constant(op, "signal_op", tuple(SignalOp))
    return op


def counter_arg(counter: Any) -> Any:
    return -1 if counter is None else counter  # -1: CCO_GDA_NO_COUNTER
