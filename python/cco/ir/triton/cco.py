"""The seeds' Triton namespace of the cco device API.

    from cco.ir.triton import cco

    @triton.jit
    def lsa_copy(dev_comm, win, peer: tl.constexpr, N: tl.constexpr):
        me = cco.DevComm.lsa_rank(dev_comm)
        src = cco.Window.lsa_ptr(win, me, 0).to(tl.pointer_type(tl.uint32), bitcast=True)
        dst = cco.Window.lsa_ptr(win, peer, 0).to(tl.pointer_type(tl.uint32), bitcast=True)
        offs = tl.arange(0, N)
        tl.store(dst + offs, tl.load(src + offs))

    lsa_copy[(1,)](dc.ptr, win.handle, peer=1, N=256, extern_libs=cco.get_extern_libs())

Kernels take the device communicator as ``dc.ptr`` and windows as
``win.handle``. Each namespace (DevComm, Window, Coop, Signal, LsaSignal,
LsaBarrier, Barrier, Sdma, Gda, GdaDeferred, GdaCallerOrdered, GdaBarrier)
mirrors the C functions of the same name (``ccoGdaPut`` is ``cco.Gda.put``);
docs/triton.md lists every call and the rules. Every thread of a program
makes each call: a call of block scope is collective over the program.
Scopes, thread modes and doorbell modes must be constants; they pick the
symbol, so the kernel makes one direct call, which LLVM inlines.
"""
from __future__ import annotations

import functools
import os
from enum import IntEnum
from typing import Any, Dict, Optional

from triton.language import core

from ..bitcode import BITCODE_ENV, DISABLE_JIT_ENV, find_cco_bitcode
from ..device_functions import TEAM_GDA, symbol_name
from ._extern import LIB_NAME, call, constant
from ._extern import context as _ctx


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


def _scope(coop: Any, allowed=tuple(CoopScope)) -> str:
    return _SCOPE_NAMES[CoopScope(constant(coop, "coop", allowed))]


def _mode(thread_mode: Any) -> str:
    return _MODE_NAMES[ThreadMode(constant(thread_mode, "thread_mode", tuple(ThreadMode)))]


def _signal_op(op: Any) -> Any:
    # Constant (as the seeds pass it) or run-time; a constant is checked here.
    if not isinstance(getattr(op, "value", op), core.tensor):
        constant(op, "signal_op", tuple(SignalOp))
    return op


def _counter(counter: Any) -> Any:
    return -1 if counter is None else counter  # -1: CCO_GDA_NO_COUNTER


# ------------------------------------------------------------------ host side


@functools.lru_cache(maxsize=None)
def _extern_libs(arch: int, env: tuple) -> Dict[str, str]:
    return {LIB_NAME: find_cco_bitcode(arch)}


def current_arch() -> int:
    """Compute capability of the GPU Triton launches on (90 for an H200)."""
    from triton.runtime import driver

    return int(driver.active.get_current_target().arch)


def get_extern_libs(arch: Optional[int] = None) -> Dict[str, str]:
    """``extern_libs`` for a launch of a kernel that calls cco:
    ``{"cco": <libcco_device_sm<arch>.bc>}`` for the current GPU (or for
    ``arch``, e.g. 90 to compile without a GPU). See cco.ir.bitcode for
    where the file comes from."""
    arch = current_arch() if arch is None else int(arch)
    env = tuple(os.environ.get(n) for n in BITCODE_ENV + DISABLE_JIT_ENV)
    return dict(_extern_libs(arch, env))


def preload(kernel: Any, *args: Any, grid: Any = (1,), **kwargs: Any) -> Any:
    """Compiles ``kernel`` for these arguments and loads it on the GPU now,
    without launching it; returns Triton's compiled kernel. A module load
    waits for kernels already running, including a peer's under MPS: load
    every kernel before any of them may wait for another rank
    (docs/triton.md)."""
    compiled = kernel.warmup(*args, grid=grid, **kwargs)
    compiled.run  # noqa: B018 - reading it loads the module (every Triton since 3.0)
    return compiled


# --------------------------------------------------------------- device side


class DevComm:
    """Queries of the device communicator (``dc.ptr``)."""

    @staticmethod
    @core.extern
    def rank(dev_comm, _semantic=None, _builder=None):
        return call("cco_ir_devcomm_rank", [dev_comm], _ctx(_semantic, _builder))

    @staticmethod
    @core.extern
    def world_size(dev_comm, _semantic=None, _builder=None):
        return call("cco_ir_devcomm_world_size", [dev_comm], _ctx(_semantic, _builder))

    @staticmethod
    @core.extern
    def lsa_rank(dev_comm, _semantic=None, _builder=None):
        return call("cco_ir_devcomm_lsa_rank", [dev_comm], _ctx(_semantic, _builder))

    @staticmethod
    @core.extern
    def lsa_size(dev_comm, _semantic=None, _builder=None):
        return call("cco_ir_devcomm_lsa_size", [dev_comm], _ctx(_semantic, _builder))

    @staticmethod
    @core.extern
    def node(dev_comm, _semantic=None, _builder=None):
        return call("cco_ir_devcomm_node", [dev_comm], _ctx(_semantic, _builder))

    @staticmethod
    @core.extern
    def node_count(dev_comm, _semantic=None, _builder=None):
        return call("cco_ir_devcomm_node_count", [dev_comm], _ctx(_semantic, _builder))

    @staticmethod
    @core.extern
    def lsa_barrier_count(dev_comm, _semantic=None, _builder=None):
        return call("cco_ir_devcomm_lsa_barrier_count", [dev_comm], _ctx(_semantic, _builder))

    @staticmethod
    @core.extern
    def barrier_count(dev_comm, _semantic=None, _builder=None):
        return call("cco_ir_devcomm_barrier_count", [dev_comm], _ctx(_semantic, _builder))

    @staticmethod
    @core.extern
    def sdma_queue_count(dev_comm, _semantic=None, _builder=None):
        return call("cco_ir_devcomm_sdma_queue_count", [dev_comm], _ctx(_semantic, _builder))

    @staticmethod
    @core.extern
    def gda_context_count(dev_comm, _semantic=None, _builder=None):
        return call("cco_ir_devcomm_gda_context_count", [dev_comm], _ctx(_semantic, _builder))

    @staticmethod
    @core.extern
    def gda_signal_count(dev_comm, _semantic=None, _builder=None):
        return call("cco_ir_devcomm_gda_signal_count", [dev_comm], _ctx(_semantic, _builder))

    @staticmethod
    @core.extern
    def gda_counter_count(dev_comm, _semantic=None, _builder=None):
        return call("cco_ir_devcomm_gda_counter_count", [dev_comm], _ctx(_semantic, _builder))

    @staticmethod
    @core.extern
    def gda_connection_type(dev_comm, _semantic=None, _builder=None):
        return call("cco_ir_devcomm_gda_connection_type", [dev_comm], _ctx(_semantic, _builder))

    @staticmethod
    @core.extern
    def aborted(dev_comm, _semantic=None, _builder=None):
        """1 once the host has set the abort word (a failure anywhere)."""
        return call("cco_ir_devcomm_aborted", [dev_comm], _ctx(_semantic, _builder))

    @staticmethod
    @core.extern
    def team_size(dev_comm, team, _semantic=None, _builder=None):
        return call("cco_ir_devcomm_team_size", [dev_comm, team], _ctx(_semantic, _builder))

    @staticmethod
    @core.extern
    def team_rank(dev_comm, team, _semantic=None, _builder=None):
        return call("cco_ir_devcomm_team_rank", [dev_comm, team], _ctx(_semantic, _builder))

    @staticmethod
    @core.extern
    def team_rank_to_world(dev_comm, team, team_rank, _semantic=None, _builder=None):
        return call("cco_ir_devcomm_team_rank_to_world", [dev_comm, team, team_rank], _ctx(_semantic, _builder))

    @staticmethod
    @core.extern
    def team_rank_from_world(dev_comm, team, world_rank, _semantic=None, _builder=None):
        return call("cco_ir_devcomm_team_rank_from_world", [dev_comm, team, world_rank],
                    _ctx(_semantic, _builder))

    @staticmethod
    @core.extern
    def team_is_member(dev_comm, team, world_rank, _semantic=None, _builder=None):
        return call("cco_ir_devcomm_team_is_member", [dev_comm, team, world_rank], _ctx(_semantic, _builder))

    @staticmethod
    @core.extern
    def lsa_ptr(dev_comm, ptr, peer, _semantic=None, _builder=None):
        """LSA peer ``peer``'s address of a symmetric address ``ptr`` of this
        rank (ccoGetLsaPeerPtrFlat), as a uint64."""
        return call("cco_ir_devcomm_lsa_ptr_flat", [dev_comm, ptr, peer], _ctx(_semantic, _builder))


class Window:
    """Addresses in a window (``win.handle``), as uint64: turn one into a
    pointer with ``.to(tl.pointer_type(tl.uint32), bitcast=True)``."""

    @staticmethod
    @core.extern
    def lsa_ptr(win, peer, offset, _semantic=None, _builder=None):
        """Byte ``offset`` of LSA peer ``peer``'s copy of the window."""
        return call("cco_ir_window_lsa_ptr", [win, peer, offset], _ctx(_semantic, _builder))

    @staticmethod
    @core.extern
    def local_ptr(win, offset, _semantic=None, _builder=None):
        return call("cco_ir_window_local_ptr", [win, offset], _ctx(_semantic, _builder))

    @staticmethod
    @core.extern
    def size(win, _semantic=None, _builder=None):
        return call("cco_ir_window_size", [win], _ctx(_semantic, _builder))


class Coop:
    """The cooperation scopes as the calling thread sees them."""

    @staticmethod
    @core.extern
    def rank(coop, _semantic=None, _builder=None):
        return call(symbol_name("coop_rank", scope=_scope(coop)), [], _ctx(_semantic, _builder))

    @staticmethod
    @core.extern
    def size(coop, _semantic=None, _builder=None):
        return call(symbol_name("coop_size", scope=_scope(coop)), [], _ctx(_semantic, _builder))

    @staticmethod
    @core.extern
    def sync(coop, _semantic=None, _builder=None):
        return call(symbol_name("coop_sync", scope=_scope(coop)), [], _ctx(_semantic, _builder))


class Signal:
    """Signal words (uint64 addresses) at system scope: release store,
    acquire load, release add (returns the old value)."""

    @staticmethod
    @core.extern
    def store(signal, value, _semantic=None, _builder=None):
        return call("cco_ir_signal_store", [signal, value], _ctx(_semantic, _builder))

    @staticmethod
    @core.extern
    def load(signal, _semantic=None, _builder=None):
        return call("cco_ir_signal_load", [signal], _ctx(_semantic, _builder))

    @staticmethod
    @core.extern
    def add(signal, value, _semantic=None, _builder=None):
        return call("cco_ir_signal_add", [signal, value], _ctx(_semantic, _builder))

    @staticmethod
    @core.extern
    def wait_until(dev_comm, signal, value, timeout_ns=0, _semantic=None, _builder=None):
        """Waits until the word reaches ``value``, the abort word, or the
        timeout (0: none); returns a Status. Every calling thread waits."""
        return call("cco_ir_signal_wait_until", [dev_comm, signal, value, timeout_ns], _ctx(_semantic, _builder))


class LsaSignal:
    """The same at the device communicator's LSA scope (GPU scope when every
    LSA peer is on this GPU)."""

    @staticmethod
    @core.extern
    def store(dev_comm, signal, value, _semantic=None, _builder=None):
        return call("cco_ir_lsa_signal_store", [dev_comm, signal, value], _ctx(_semantic, _builder))

    @staticmethod
    @core.extern
    def load(dev_comm, signal, _semantic=None, _builder=None):
        return call("cco_ir_lsa_signal_load", [dev_comm, signal], _ctx(_semantic, _builder))

    @staticmethod
    @core.extern
    def add(dev_comm, signal, value, _semantic=None, _builder=None):
        return call("cco_ir_lsa_signal_add", [dev_comm, signal, value], _ctx(_semantic, _builder))


class LsaBarrier:
    """LSA barrier ``index`` of the device communicator. Use block scope in
    Triton (the program is the block); one index per program that syncs at
    the same time."""

    @staticmethod
    @core.extern
    def sync(dev_comm, index=0, coop=CoopScope.BLOCK, timeout_ns=0, _semantic=None, _builder=None):
        return call(symbol_name("lsa_barrier_sync", scope=_scope(coop)), [dev_comm, index, timeout_ns],
                    _ctx(_semantic, _builder))

    @staticmethod
    @core.extern
    def arrive(dev_comm, index=0, coop=CoopScope.BLOCK, _semantic=None, _builder=None):
        return call(symbol_name("lsa_barrier_arrive", scope=_scope(coop)), [dev_comm, index],
                    _ctx(_semantic, _builder))

    @staticmethod
    @core.extern
    def wait(dev_comm, index=0, coop=CoopScope.BLOCK, timeout_ns=0, _semantic=None, _builder=None):
        """Waits for the peers' arrival at this rank's last arrive."""
        return call(symbol_name("lsa_barrier_wait", scope=_scope(coop)), [dev_comm, index, timeout_ns],
                    _ctx(_semantic, _builder))


class Barrier:
    """World barrier ``index`` (``barrier_count`` of the requirements)."""

    @staticmethod
    @core.extern
    def sync(dev_comm, index=0, coop=CoopScope.BLOCK, timeout_ns=0, context=0, _semantic=None, _builder=None):
        return call(symbol_name("barrier_sync", scope=_scope(coop)), [dev_comm, context, index, timeout_ns],
                    _ctx(_semantic, _builder))


class GdaBarrier:
    """GDA barrier ``index`` over the rail team (``rail_gda_barrier_count``);
    warp or block scope."""

    @staticmethod
    @core.extern
    def sync(dev_comm, index=0, coop=CoopScope.BLOCK, timeout_ns=0, context=0, _semantic=None, _builder=None):
        scope = _scope(coop, (CoopScope.WARP, CoopScope.BLOCK))
        return call(symbol_name("gda_barrier_sync", scope=scope), [dev_comm, context, index, timeout_ns],
                    _ctx(_semantic, _builder))


class Sdma:
    """Copy-engine puts and gets to LSA peers, their signals and quiet."""

    @staticmethod
    @core.extern
    def put(dev_comm, peer, dst_win, dst_off, src_win, src_off, nbytes, queue=0, signal=SdmaSignal.REMOTE,
            coop=CoopScope.BLOCK, _semantic=None, _builder=None):
        sig = constant(signal, "signal", tuple(SdmaSignal))
        return call(symbol_name("sdma_put", scope=_scope(coop)),
                    [dev_comm, peer, dst_win, dst_off, src_win, src_off, nbytes, queue, sig],
                    _ctx(_semantic, _builder))

    @staticmethod
    @core.extern
    def get(dev_comm, peer, dst_win, dst_off, src_win, src_off, nbytes, queue=0, coop=CoopScope.BLOCK,
            _semantic=None, _builder=None):
        return call(symbol_name("sdma_get", scope=_scope(coop)),
                    [dev_comm, peer, dst_win, dst_off, src_win, src_off, nbytes, queue], _ctx(_semantic, _builder))

    @staticmethod
    @core.extern
    def commit(dev_comm, peer, queue=0, coop=CoopScope.BLOCK, _semantic=None, _builder=None):
        return call(symbol_name("sdma_commit", scope=_scope(coop)), [dev_comm, peer, queue],
                    _ctx(_semantic, _builder))

    @staticmethod
    @core.extern
    def wait_signal(dev_comm, src, expected, queue=0, coop=CoopScope.BLOCK, timeout_ns=0, _semantic=None,
                    _builder=None):
        return call(symbol_name("sdma_wait_signal", scope=_scope(coop)), [dev_comm, src, queue, expected, timeout_ns],
                    _ctx(_semantic, _builder))

    @staticmethod
    @core.extern
    def read_signal(dev_comm, src, queue=0, _semantic=None, _builder=None):
        return call("cco_ir_sdma_read_signal", [dev_comm, src, queue], _ctx(_semantic, _builder))

    @staticmethod
    @core.extern
    def signal_ptr(dev_comm, src, queue=0, _semantic=None, _builder=None):
        return call("cco_ir_sdma_signal_ptr", [dev_comm, src, queue], _ctx(_semantic, _builder))

    @staticmethod
    @core.extern
    def quiet(dev_comm, peer, coop=CoopScope.BLOCK, queue=None, _semantic=None, _builder=None):
        """Every operation posted to ``peer`` (on ``queue``, or on all its
        queues) has finished."""
        ctx = _ctx(_semantic, _builder)
        if queue is None:
            return call(symbol_name("sdma_quiet", scope=_scope(coop)), [dev_comm, peer], ctx)
        return call(symbol_name("sdma_quiet_queue", scope=_scope(coop)), [dev_comm, peer, queue], ctx)


def _gda_namespace(name: str, doorbell: str, doc: str) -> type:
    """cco.Gda, cco.GdaDeferred and cco.GdaCallerOrdered: the same calls on
    a handle of another doorbell mode."""

    def peer_of(dev_comm, peer, team, ctx):
        if team is None:
            return peer
        kind = constant(team, "team", tuple(Team))
        return call("cco_ir_devcomm_team_rank_to_world", [dev_comm, kind, peer], ctx)

    def put(dev_comm, peer, dst_win, dst_off, src_win, src_off, nbytes, signal_op=SignalOp.NONE, signal_id=0,
            signal_val=1, counter=None, coop=CoopScope.BLOCK, thread_mode=ThreadMode.AGGREGATE, context=0,
            team=None, _semantic=None, _builder=None):
        ctx = _ctx(_semantic, _builder)
        sym = symbol_name("gda_put", doorbell=doorbell, scope=_scope(coop), thread_mode=_mode(thread_mode))
        return call(sym, [dev_comm, context, peer_of(dev_comm, peer, team, ctx), dst_win, dst_off, src_win,
                          src_off, nbytes, _signal_op(signal_op), signal_id, signal_val, _counter(counter)], ctx)

    def put_value(dev_comm, peer, dst_win, dst_off, value, size=8, signal_op=SignalOp.NONE, signal_id=0,
                  signal_val=1, counter=None, coop=CoopScope.BLOCK, thread_mode=ThreadMode.AGGREGATE, context=0,
                  team=None, _semantic=None, _builder=None):
        ctx = _ctx(_semantic, _builder)
        size = constant(size, "size", (1, 2, 4, 8))
        sym = symbol_name("gda_put_value", doorbell=doorbell, scope=_scope(coop), thread_mode=_mode(thread_mode))
        return call(sym, [dev_comm, context, peer_of(dev_comm, peer, team, ctx), dst_win, dst_off, value, size,
                          _signal_op(signal_op), signal_id, signal_val, _counter(counter)], ctx)

    def get(dev_comm, peer, dst_win, dst_off, src_win, src_off, nbytes, counter=None, coop=CoopScope.BLOCK,
            thread_mode=ThreadMode.AGGREGATE, context=0, team=None, _semantic=None, _builder=None):
        ctx = _ctx(_semantic, _builder)
        sym = symbol_name("gda_get", doorbell=doorbell, scope=_scope(coop), thread_mode=_mode(thread_mode))
        return call(sym, [dev_comm, context, peer_of(dev_comm, peer, team, ctx), dst_win, dst_off, src_win,
                          src_off, nbytes, _counter(counter)], ctx)

    def signal(dev_comm, peer, signal_id, signal_op=SignalOp.INC, signal_val=1, coop=CoopScope.BLOCK,
               context=0, team=None, _semantic=None, _builder=None):
        ctx = _ctx(_semantic, _builder)
        sym = symbol_name("gda_signal", doorbell=doorbell, scope=_scope(coop))
        return call(sym, [dev_comm, context, peer_of(dev_comm, peer, team, ctx), _signal_op(signal_op),
                          signal_id, signal_val], ctx)

    def counter(dev_comm, peer, counter_id, coop=CoopScope.BLOCK, context=0, team=None, _semantic=None,
                _builder=None):
        ctx = _ctx(_semantic, _builder)
        sym = symbol_name("gda_counter", doorbell=doorbell, scope=_scope(coop))
        return call(sym, [dev_comm, context, peer_of(dev_comm, peer, team, ctx), counter_id], ctx)

    def flush(dev_comm, coop=CoopScope.BLOCK, context=0, _semantic=None, _builder=None):
        return call(symbol_name("gda_flush", scope=_scope(coop)), [dev_comm, context],
                    _ctx(_semantic, _builder))

    def flush_peer(dev_comm, peer, coop=CoopScope.BLOCK, context=0, team=None, _semantic=None, _builder=None):
        ctx = _ctx(_semantic, _builder)
        return call(symbol_name("gda_flush_peer", scope=_scope(coop)),
                    [dev_comm, context, peer_of(dev_comm, peer, team, ctx)], ctx)

    def flush_async(dev_comm, peer=-1, coop=CoopScope.BLOCK, context=0, _semantic=None, _builder=None):
        """Starts a flush (toward ``peer``; -1: every peer); returns the
        request for ``wait`` (an int64; negative: -Status of a failure)."""
        return call(symbol_name("gda_flush_async", scope=_scope(coop)), [dev_comm, context, peer],
                    _ctx(_semantic, _builder))

    def wait(dev_comm, request, coop=CoopScope.BLOCK, context=0, _semantic=None, _builder=None):
        return call(symbol_name("gda_wait", scope=_scope(coop)), [dev_comm, context, request],
                    _ctx(_semantic, _builder))

    def wait_signal(dev_comm, signal_id, expected, coop=CoopScope.BLOCK, timeout_ns=0, _semantic=None,
                    _builder=None):
        return call(symbol_name("gda_wait_signal", scope=_scope(coop)), [dev_comm, signal_id, expected, timeout_ns],
                    _ctx(_semantic, _builder))

    def read_signal(dev_comm, signal_id, _semantic=None, _builder=None):
        return call("cco_ir_gda_read_signal", [dev_comm, signal_id], _ctx(_semantic, _builder))

    def reset_signal(dev_comm, signal_id, _semantic=None, _builder=None):
        return call("cco_ir_gda_reset_signal", [dev_comm, signal_id], _ctx(_semantic, _builder))

    def signal_ptr(dev_comm, signal_id, _semantic=None, _builder=None):
        return call("cco_ir_gda_signal_ptr", [dev_comm, signal_id], _ctx(_semantic, _builder))

    def wait_counter(dev_comm, counter_id, expected, coop=CoopScope.BLOCK, timeout_ns=0, _semantic=None,
                     _builder=None):
        return call(symbol_name("gda_wait_counter", scope=_scope(coop)),
                    [dev_comm, counter_id, expected, timeout_ns], _ctx(_semantic, _builder))

    def read_counter(dev_comm, counter_id, _semantic=None, _builder=None):
        return call("cco_ir_gda_read_counter", [dev_comm, counter_id], _ctx(_semantic, _builder))

    def reset_counter(dev_comm, counter_id, _semantic=None, _builder=None):
        return call("cco_ir_gda_reset_counter", [dev_comm, counter_id], _ctx(_semantic, _builder))

    def counter_ptr(dev_comm, counter_id, _semantic=None, _builder=None):
        return call("cco_ir_gda_counter_ptr", [dev_comm, counter_id], _ctx(_semantic, _builder))

    def has_peer(dev_comm, peer, _semantic=None, _builder=None):
        return call("cco_ir_gda_has_peer", [dev_comm, peer], _ctx(_semantic, _builder))

    def team_peer(dev_comm, team_index, _semantic=None, _builder=None):
        """World rank of member ``team_index`` of the GDA team (-1: none)."""
        return call("cco_ir_gda_team_peer", [dev_comm, team_index], _ctx(_semantic, _builder))

    members = dict(put=put, put_value=put_value, get=get, signal=signal, counter=counter, flush=flush,
                   flush_peer=flush_peer, flush_async=flush_async, wait=wait, wait_signal=wait_signal,
                   read_signal=read_signal, reset_signal=reset_signal, signal_ptr=signal_ptr,
                   wait_counter=wait_counter, read_counter=read_counter, reset_counter=reset_counter,
                   counter_ptr=counter_ptr, has_peer=has_peer, team_peer=team_peer)
    if doorbell == "caller_ordered":
        del members["signal"]  # its puts carry their signals
    attrs = {k: staticmethod(core.extern(f)) for k, f in members.items()}
    attrs["__doc__"] = doc
    attrs["__module__"] = __name__
    return type(name, (), attrs)


Gda = _gda_namespace("Gda", "immediate", "GDA calls on an Immediate handle: every post rings the doorbell.")
GdaDeferred = _gda_namespace(
    "GdaDeferred", "deferred",
    "GDA calls on a Deferred handle: posts wait for the next Immediate post or flush on the context.")
GdaCallerOrdered = _gda_namespace(
    "GdaCallerOrdered", "caller_ordered",
    "GDA calls on a CallerOrdered handle: no standalone signal (put with a signal_op); only its own "
    "flush, flush_peer and flush_async release its posts.")

__all__ = ["Barrier", "Coop", "CoopScope", "DevComm", "Gda", "GdaBarrier", "GdaCallerOrdered", "GdaDeferred",
           "LsaBarrier", "LsaSignal", "SdmaSignal", "Sdma", "Signal", "SignalOp", "Status", "Team", "ThreadMode",
           "Window", "current_arch", "get_extern_libs", "preload"]
