"""cco.Gda, cco.GdaDeferred and cco.GdaCallerOrdered: one set of GDA
bindings, made once per doorbell mode (the symbols differ, the calls do not)."""
from __future__ import annotations

from typing import Dict

from triton.language import core

from ..device_functions import symbol_name
from ._extern import call, constant
from ._extern import context as _ctx
from .enums import CoopScope, SignalOp, Team, ThreadMode, checked_signal_op, counter_arg, mode_name, scope_name


def gda_namespace(name: str, doorbell: str, doc: str) -> type:
    """cco.Gda, cco.GdaDeferred and cco.GdaCallerOrdered: the same calls on
    a handle of another doorbell mode."""

    def post(family, coop, thread_mode):
        return symbol_name(family, doorbell=doorbell, scope=scope_name(coop), thread_mode=mode_name(thread_mode))

    def peer_of(dev_comm, peer, team, ctx):
        if team is None:
            return peer
        kind = constant(team, "team", tuple(Team))
        return call("cco_ir_devcomm_team_rank_to_world", [dev_comm, kind, peer], ctx)

    def put(dev_comm, peer, dst_win, dst_off, src_win, src_off, nbytes, signal_op=SignalOp.NONE, signal_id=0,
            signal_val=1, counter=None, coop=CoopScope.BLOCK, thread_mode=ThreadMode.AGGREGATE, context=0,
            team=None, _semantic=None, _builder=None):
        ctx = _ctx(_semantic, _builder)
        return call(post("gda_put", coop, thread_mode),
                    [dev_comm, context, peer_of(dev_comm, peer, team, ctx), dst_win, dst_off, src_win, src_off, nbytes,
                     checked_signal_op(signal_op), signal_id, signal_val, counter_arg(counter)], ctx)

    def put_value(dev_comm, peer, dst_win, dst_off, value, size=8, signal_op=SignalOp.NONE, signal_id=0,
                  signal_val=1, counter=None, coop=CoopScope.BLOCK, thread_mode=ThreadMode.AGGREGATE, context=0,
                  team=None, _semantic=None, _builder=None):
        ctx = _ctx(_semantic, _builder)
        size = constant(size, "size", (1, 2, 4, 8))
        return call(post("gda_put_value", coop, thread_mode),
                    [dev_comm, context, peer_of(dev_comm, peer, team, ctx), dst_win, dst_off, value, size,
                     checked_signal_op(signal_op), signal_id, signal_val, counter_arg(counter)], ctx)

    def get(dev_comm, peer, dst_win, dst_off, src_win, src_off, nbytes, counter=None, coop=CoopScope.BLOCK,
            thread_mode=ThreadMode.AGGREGATE, context=0, team=None, _semantic=None, _builder=None):
        ctx = _ctx(_semantic, _builder)
        return call(post("gda_get", coop, thread_mode),
                    [dev_comm, context, peer_of(dev_comm, peer, team, ctx), dst_win, dst_off, src_win, src_off, nbytes,
                     counter_arg(counter)], ctx)

    def signal(dev_comm, peer, signal_id, signal_op=SignalOp.INC, signal_val=1, coop=CoopScope.BLOCK,
               context=0, team=None, _semantic=None, _builder=None):
        ctx = _ctx(_semantic, _builder)
        sym = symbol_name("gda_signal", doorbell=doorbell, scope=scope_name(coop))
        return call(sym, [dev_comm, context, peer_of(dev_comm, peer, team, ctx), checked_signal_op(signal_op),
                          signal_id, signal_val], ctx)

    def counter(dev_comm, peer, counter_id, coop=CoopScope.BLOCK, context=0, team=None, _semantic=None,
                _builder=None):
        ctx = _ctx(_semantic, _builder)
        sym = symbol_name("gda_counter", doorbell=doorbell, scope=scope_name(coop))
        return call(sym, [dev_comm, context, peer_of(dev_comm, peer, team, ctx), counter_id], ctx)

    def flush(dev_comm, coop=CoopScope.BLOCK, context=0, _semantic=None, _builder=None):
        return call(symbol_name("gda_flush", scope=scope_name(coop)), [dev_comm, context],
                    _ctx(_semantic, _builder))

    def flush_peer(dev_comm, peer, coop=CoopScope.BLOCK, context=0, team=None, _semantic=None, _builder=None):
        ctx = _ctx(_semantic, _builder)
        return call(symbol_name("gda_flush_peer", scope=scope_name(coop)),
                    [dev_comm, context, peer_of(dev_comm, peer, team, ctx)], ctx)

    def flush_async(dev_comm, peer=-1, coop=CoopScope.BLOCK, context=0, _semantic=None, _builder=None):
        """Starts a flush (toward ``peer``; -1: every peer); returns the
        request for ``wait`` (an int64; negative: -Status of a failure)."""
        return call(symbol_name("gda_flush_async", scope=scope_name(coop)), [dev_comm, context, peer],
                    _ctx(_semantic, _builder))

    def wait(dev_comm, request, coop=CoopScope.BLOCK, context=0, _semantic=None, _builder=None):
        return call(symbol_name("gda_wait", scope=scope_name(coop)), [dev_comm, context, request],
                    _ctx(_semantic, _builder))

    def wait_signal(dev_comm, signal_id, expected, coop=CoopScope.BLOCK, timeout_ns=0, _semantic=None,
                    _builder=None):
        return call(symbol_name("gda_wait_signal", scope=scope_name(coop)), [dev_comm, signal_id, expected, timeout_ns],
                    _ctx(_semantic, _builder))

    def read_signal(dev_comm, signal_id, _semantic=None, _builder=None):
        return call("cco_ir_gda_read_signal", [dev_comm, signal_id], _ctx(_semantic, _builder))

    def reset_signal(dev_comm, signal_id, _semantic=None, _builder=None):
        return call("cco_ir_gda_reset_signal", [dev_comm, signal_id], _ctx(_semantic, _builder))

    def signal_ptr(dev_comm, signal_id, _semantic=None, _builder=None):
        return call("cco_ir_gda_signal_ptr", [dev_comm, signal_id], _ctx(_semantic, _builder))

    def wait_counter(dev_comm, counter_id, expected, coop=CoopScope.BLOCK, timeout_ns=0, _semantic=None,
                     _builder=None):
        return call(symbol_name("gda_wait_counter", scope=scope_name(coop)),
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
    attrs: Dict[str, object] = {k: staticmethod(core.extern(f)) for k, f in members.items()}
    attrs["__doc__"] = doc
    attrs["__module__"] = "cco.ir.triton.cco"
    return type(name, (), attrs)

