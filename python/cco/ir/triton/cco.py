"""The guide's Triton namespace (docs/design.md) of the cco device API.

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
LsaBarrier, Barrier, Sdma, Gda, GdaDeferred, GdaCallerOrdered, GdaBarrier, Coll)
mirrors the C functions of the same name (``ccoGdaPut`` is ``cco.Gda.put``);
docs/triton.md lists every call and the rules. Every thread of a program
makes each call: a call of block scope is collective over the program.
Scopes, thread modes and doorbell modes must be constants; they pick the
symbol, so the kernel makes one direct call, which LLVM inlines.
"""
from __future__ import annotations

import functools
import os
from typing import Any, Dict, Optional, Tuple

from triton.language import core

from ..bitcode import BITCODE_ENV, DISABLE_JIT_ENV, find_cco_bitcode
from ..device_functions import symbol_name
from ._extern import LIB_NAME, call, constant
from ._extern import context as _ctx
from ._gda import gda_namespace
from .enums import (CoopScope, DataType, RedOp, SdmaSignal, SignalOp, Status, Team, ThreadMode,  # noqa: F401 (API)
                    scope_name)


# ------------------------------------------------------------------ host side


@functools.lru_cache(maxsize=None)
def _extern_libs(arch: int, env: Tuple[Optional[str], ...]) -> Dict[str, str]:
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


def _query(symbol: str, doc: str) -> Any:
    """A binding of a one-argument query of the device communicator."""

    def query(dev_comm, _semantic=None, _builder=None):
        return call(symbol, [dev_comm], _ctx(_semantic, _builder))

    query.__name__ = query.__qualname__ = symbol.replace("cco_ir_devcomm_", "")
    query.__doc__ = doc
    return staticmethod(core.extern(query))


class DevComm:
    """Queries of the device communicator (``dc.ptr``)."""

    rank = _query("cco_ir_devcomm_rank", "World rank.")
    world_size = _query("cco_ir_devcomm_world_size", "Ranks in the communicator.")
    lsa_rank = _query("cco_ir_devcomm_lsa_rank", "Rank among the LSA peers (this host).")
    lsa_size = _query("cco_ir_devcomm_lsa_size", "LSA peers, this rank included.")
    node = _query("cco_ir_devcomm_node", "This rank's host.")
    node_count = _query("cco_ir_devcomm_node_count", "Hosts.")
    lsa_barrier_count = _query("cco_ir_devcomm_lsa_barrier_count", "LSA barriers (world barriers' included).")
    barrier_count = _query("cco_ir_devcomm_barrier_count", "World barriers.")
    sdma_queue_count = _query("cco_ir_devcomm_sdma_queue_count", "SDMA queues per LSA peer.")
    gda_context_count = _query("cco_ir_devcomm_gda_context_count", "GDA contexts.")
    gda_signal_count = _query("cco_ir_devcomm_gda_signal_count", "GDA signal slots.")
    gda_counter_count = _query("cco_ir_devcomm_gda_counter_count", "GDA counters.")
    gda_connection_type = _query("cco_ir_devcomm_gda_connection_type", "ccoGdaConnectionType_t.")
    aborted = _query("cco_ir_devcomm_aborted", "1 once the host has set the abort word (read on each call).")

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
        return call(symbol_name("coop_rank", scope=scope_name(coop)), [], _ctx(_semantic, _builder))

    @staticmethod
    @core.extern
    def size(coop, _semantic=None, _builder=None):
        return call(symbol_name("coop_size", scope=scope_name(coop)), [], _ctx(_semantic, _builder))

    @staticmethod
    @core.extern
    def sync(coop, _semantic=None, _builder=None):
        return call(symbol_name("coop_sync", scope=scope_name(coop)), [], _ctx(_semantic, _builder))


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

    @staticmethod
    @core.extern
    def store_relaxed(dev_comm, signal, value, _semantic=None, _builder=None):
        """store without ordering earlier writes (a flag that carries no data)."""
        return call("cco_ir_lsa_signal_store_relaxed", [dev_comm, signal, value], _ctx(_semantic, _builder))

    @staticmethod
    @core.extern
    def add_relaxed(dev_comm, signal, value, _semantic=None, _builder=None):
        """add without ordering earlier writes."""
        return call("cco_ir_lsa_signal_add_relaxed", [dev_comm, signal, value], _ctx(_semantic, _builder))


class LsaBarrier:
    """LSA barrier ``index`` of the device communicator. Use block scope in
    Triton (the program is the block); one index per program that syncs at
    the same time."""

    @staticmethod
    @core.extern
    def sync(dev_comm, index=0, coop=CoopScope.BLOCK, timeout_ns=0, _semantic=None, _builder=None):
        return call(symbol_name("lsa_barrier_sync", scope=scope_name(coop)), [dev_comm, index, timeout_ns],
                    _ctx(_semantic, _builder))

    @staticmethod
    @core.extern
    def arrive(dev_comm, index=0, coop=CoopScope.BLOCK, _semantic=None, _builder=None):
        return call(symbol_name("lsa_barrier_arrive", scope=scope_name(coop)), [dev_comm, index],
                    _ctx(_semantic, _builder))

    @staticmethod
    @core.extern
    def wait(dev_comm, index=0, coop=CoopScope.BLOCK, timeout_ns=0, _semantic=None, _builder=None):
        """Waits for the peers' arrival at this rank's last arrive."""
        return call(symbol_name("lsa_barrier_wait", scope=scope_name(coop)), [dev_comm, index, timeout_ns],
                    _ctx(_semantic, _builder))


class Barrier:
    """World barrier ``index`` (``barrier_count`` of the requirements)."""

    @staticmethod
    @core.extern
    def sync(dev_comm, index=0, coop=CoopScope.BLOCK, timeout_ns=0, context=0, _semantic=None, _builder=None):
        return call(symbol_name("barrier_sync", scope=scope_name(coop)), [dev_comm, context, index, timeout_ns],
                    _ctx(_semantic, _builder))


class GdaBarrier:
    """GDA barrier ``index`` over the rail team (``rail_gda_barrier_count``);
    warp or block scope."""

    @staticmethod
    @core.extern
    def sync(dev_comm, index=0, coop=CoopScope.BLOCK, timeout_ns=0, context=0, _semantic=None, _builder=None):
        scope = scope_name(coop, (CoopScope.WARP, CoopScope.BLOCK))
        return call(symbol_name("gda_barrier_sync", scope=scope), [dev_comm, context, index, timeout_ns],
                    _ctx(_semantic, _builder))


class Sdma:
    """Copy-engine puts and gets to LSA peers, their signals and quiet."""

    @staticmethod
    @core.extern
    def put(dev_comm, peer, dst_win, dst_off, src_win, src_off, nbytes, queue=0, signal=SdmaSignal.REMOTE,
            coop=CoopScope.BLOCK, _semantic=None, _builder=None):
        sig = constant(signal, "signal", tuple(SdmaSignal))
        return call(symbol_name("sdma_put", scope=scope_name(coop)),
                    [dev_comm, peer, dst_win, dst_off, src_win, src_off, nbytes, queue, sig],
                    _ctx(_semantic, _builder))

    @staticmethod
    @core.extern
    def get(dev_comm, peer, dst_win, dst_off, src_win, src_off, nbytes, queue=0, coop=CoopScope.BLOCK,
            _semantic=None, _builder=None):
        return call(symbol_name("sdma_get", scope=scope_name(coop)),
                    [dev_comm, peer, dst_win, dst_off, src_win, src_off, nbytes, queue], _ctx(_semantic, _builder))

    @staticmethod
    @core.extern
    def commit(dev_comm, peer, queue=0, coop=CoopScope.BLOCK, _semantic=None, _builder=None):
        return call(symbol_name("sdma_commit", scope=scope_name(coop)), [dev_comm, peer, queue],
                    _ctx(_semantic, _builder))

    @staticmethod
    @core.extern
    def wait_signal(dev_comm, src, expected, queue=0, coop=CoopScope.BLOCK, timeout_ns=0, _semantic=None,
                    _builder=None):
        return call(symbol_name("sdma_wait_signal", scope=scope_name(coop)),
                    [dev_comm, src, queue, expected, timeout_ns], _ctx(_semantic, _builder))

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
    def quiet(dev_comm, peer, coop=CoopScope.BLOCK, queue=None, timeout_ns=0, _semantic=None, _builder=None):
        """Every operation posted to ``peer`` (on ``queue``, or on all its
        queues) has finished; Status.TIMEOUT after timeout_ns (0: never)."""
        ctx = _ctx(_semantic, _builder)
        if queue is None:
            return call(symbol_name("sdma_quiet_timeout", scope=scope_name(coop)), [dev_comm, peer, timeout_ns], ctx)
        return call(symbol_name("sdma_quiet_queue_timeout", scope=scope_name(coop)),
                    [dev_comm, peer, queue, timeout_ns], ctx)


_ALL_REDUCE = {"one_shot": "coll_all_reduce_one_shot", "ll": "coll_all_reduce_ll",
               "two_shot": "coll_all_reduce_two_shot"}


def _coll(family, ctx, dev_comm, send_win, send_off, recv_win, recv_off, count, dtype, op, root, scratch_win,
          scratch_off, scratch_bytes, barrier_base, signature, part, n_parts, v_table_off=None):
    """One block of the table's collectives family, arguments in the table's order."""
    args = [dev_comm, send_win, send_off, recv_win, recv_off, count, dtype, op, root, scratch_win, scratch_off,
            scratch_bytes, barrier_base, signature]
    if v_table_off is not None:
        args.append(v_table_off)
    return call(symbol_name(family), args + [part, n_parts], ctx)


class Coll:
    """The collectives' device building blocks (cco/cco_coll.h) over the LSA
    team, block scope: every thread of a program calls with the same
    arguments, and the program passes its ``part`` (``tl.program_id(0)``) of
    ``n_parts`` (the grid); every part of every rank must be resident at
    once. Buffers are (window, byte offset) pairs at the same offsets on
    every rank; ``scratch`` is a zeroed area of ``Coll.scratch_bytes`` bytes
    that the blocks own from then on (LL staging, the signature slots).
    ``dtype`` and ``op`` (DataType, RedOp) are best constants: the block's
    switch on them then folds away. Part p uses LSA barrier
    ``barrier_base + p``. Returns the status (Status)."""

    @staticmethod
    @core.extern
    def scratch_bytes(lsa_size, n_parts, _semantic=None, _builder=None):
        return call("cco_ir_coll_scratch_bytes", [lsa_size, n_parts], _ctx(_semantic, _builder))

    @staticmethod
    @core.extern
    def all_reduce(dev_comm, send_win, send_off, recv_win, recv_off, count, dtype, op, scratch_win, scratch_off,
                   scratch_bytes, part, n_parts, algo="one_shot", barrier_base=0, signature=0, _semantic=None,
                   _builder=None):
        """``algo``: "one_shot", "ll" (no barrier; up to the LL limit) or "two_shot" (in place too)."""
        family = _ALL_REDUCE.get(algo.value if isinstance(algo, core.constexpr) else algo)
        if family is None:
            raise ValueError(f"cco.Coll.all_reduce: algo must be one of {sorted(_ALL_REDUCE)}, not {algo!r}")
        return _coll(family, _ctx(_semantic, _builder), dev_comm, send_win, send_off, recv_win, recv_off, count,
                     dtype, op, 0, scratch_win, scratch_off, scratch_bytes, barrier_base, signature, part, n_parts)

    @staticmethod
    @core.extern
    def all_gather(dev_comm, send_win, send_off, recv_win, recv_off, count, dtype, scratch_win, scratch_off,
                   scratch_bytes, part, n_parts, barrier_base=0, signature=0, _semantic=None, _builder=None):
        return _coll("coll_all_gather", _ctx(_semantic, _builder), dev_comm, send_win, send_off, recv_win, recv_off,
                     count, dtype, 0, 0, scratch_win, scratch_off, scratch_bytes, barrier_base, signature, part,
                     n_parts)

    @staticmethod
    @core.extern
    def reduce_scatter(dev_comm, send_win, send_off, recv_win, recv_off, count, dtype, op, scratch_win,
                       scratch_off, scratch_bytes, part, n_parts, barrier_base=0, signature=0, _semantic=None,
                       _builder=None):
        return _coll("coll_reduce_scatter", _ctx(_semantic, _builder), dev_comm, send_win, send_off, recv_win,
                     recv_off, count, dtype, op, 0, scratch_win, scratch_off, scratch_bytes, barrier_base, signature,
                     part, n_parts)

    @staticmethod
    @core.extern
    def all_to_all(dev_comm, send_win, send_off, recv_win, recv_off, count, dtype, scratch_win, scratch_off,
                   scratch_bytes, part, n_parts, barrier_base=0, signature=0, _semantic=None, _builder=None):
        return _coll("coll_all_to_all", _ctx(_semantic, _builder), dev_comm, send_win, send_off, recv_win, recv_off,
                     count, dtype, 0, 0, scratch_win, scratch_off, scratch_bytes, barrier_base, signature, part,
                     n_parts)

    @staticmethod
    @core.extern
    def all_to_allv(dev_comm, send_win, send_off, recv_win, recv_off, v_table_off, dtype, scratch_win, scratch_off,
                    scratch_bytes, part, n_parts, barrier_base=0, signature=0, _semantic=None, _builder=None):
        """``v_table_off``: the int64 [3][lsa_size] table of counts and displacements in ``send_win``."""
        return _coll("coll_all_to_allv", _ctx(_semantic, _builder), dev_comm, send_win, send_off, recv_win,
                     recv_off, 0, dtype, 0, 0, scratch_win, scratch_off, scratch_bytes, barrier_base, signature,
                     part, n_parts, v_table_off=v_table_off)

    @staticmethod
    @core.extern
    def broadcast(dev_comm, send_win, send_off, recv_win, recv_off, count, dtype, root, scratch_win, scratch_off,
                  scratch_bytes, part, n_parts, barrier_base=0, signature=0, _semantic=None, _builder=None):
        """``root``: the root's LSA rank."""
        return _coll("coll_broadcast", _ctx(_semantic, _builder), dev_comm, send_win, send_off, recv_win, recv_off,
                     count, dtype, 0, root, scratch_win, scratch_off, scratch_bytes, barrier_base, signature, part,
                     n_parts)


Gda = gda_namespace("Gda", "immediate", "GDA calls on an Immediate handle: every post rings the doorbell.")
GdaDeferred = gda_namespace(
    "GdaDeferred", "deferred",
    "GDA calls on a Deferred handle: posts wait for the next Immediate post or flush on the context.")
GdaCallerOrdered = gda_namespace(
    "GdaCallerOrdered", "caller_ordered",
    "GDA calls on a CallerOrdered handle: no standalone signal (put with a signal_op); only its own "
    "flush, flush_peer and flush_async release its posts.")

__all__ = ["Barrier", "Coll", "Coop", "CoopScope", "DataType", "DevComm", "Gda", "GdaBarrier", "GdaCallerOrdered",
           "GdaDeferred", "LsaBarrier", "LsaSignal", "RedOp", "SdmaSignal", "Sdma", "Signal", "SignalOp", "Status",
           "Team", "ThreadMode", "Window", "current_arch", "get_extern_libs", "preload"]
