"""Integers that cross into C are checked, not truncated.

ctypes converts a Python int to a C integer or pointer by keeping its low
bits: ``nranks=2**32 + 1`` reached ``ccoCommCreate`` as 1, and
``alloc_mem(2**64 + 4096)`` allocated 4096 bytes while the handle reported
the huge size, so a view past 4096 bytes passed the bounds check and
crashed. Every public entry point that takes an integer is called here with
a value its C parameter cannot hold (OverflowError) or that the argument
does not allow (CCOInvalidArgument), and must refuse it before any C call:
no communicator created, nothing allocated, registered or freed.
"""
import ctypes
import types

import numpy as np
import pytest

import cco
from cco import (TEAM_WORLD, CCODevCommRequirements, CCOError, CCOInvalidArgument,
                 Communicator, _lib)

U64 = 1 << 64
I32 = 1 << 31
U32 = 1 << 32


class Spy:
    """Stands in for the CDLL: forwards every call and records its name."""

    def __init__(self, real):
        self.real = real
        self.calls = []

    def __getattr__(self, name):
        fn = getattr(self.real, name)

        def call(*args):
            self.calls.append(name)
            return fn(*args)

        return call


@pytest.fixture
def env(monkeypatch):
    """A one-rank communicator with an allocation and windows, then a spy on
    every path to the library (the communicator's and the module's)."""
    for var in ("CCO_UNIQUE_ID", "CCO_NRANKS", "CCO_RANK"):
        monkeypatch.delenv(var, raising=False)
    comm = Communicator.init(1, 0, Communicator.get_unique_id(), per_rank_vmm=1 << 30)
    e = types.SimpleNamespace(comm=comm, uid=Communicator.get_unique_id())
    e.mem = comm.alloc_mem(8192)
    e.win = comm.register_window(e.mem, 4096)
    e.src = comm.register_window_alloc(4096)
    e.dst = comm.register_window_alloc(4096)
    e.sig = comm.register_window_alloc(4096)
    e.spy = Spy(comm._lib)
    comm._lib = e.spy
    monkeypatch.setattr(_lib, "load", lambda: e.spy)
    yield e
    comm._lib = e.spy.real
    monkeypatch.undo()
    comm.destroy()


def _sdma(e, **kw):
    args = dict(peer=0, dst_win=e.dst, dst_off=0, src_win=e.src, src_off=0, nbytes=8,
                sig_win=e.sig, sig_off=0, sig_value=1, stream=0)
    args.update(kw)
    return e.comm.sdma_put_async(**args)


OVER = OverflowError
BAD = CCOInvalidArgument

# (case, the C function (or ctypes call) the value would reach, call, exception)
CASES = [
    ("init nranks 2**32+1", "ccoCommCreate", lambda e: Communicator.init(U32 + 1, 0, e.uid), OVER),
    ("init nranks 2**31", "ccoCommCreate", lambda e: Communicator.init(I32, 0, e.uid), OVER),
    ("init nranks -2**40", "ccoCommCreate", lambda e: Communicator.init(-(1 << 40), 0, e.uid), BAD),
    ("init rank 2**32", "ccoCommCreate", lambda e: Communicator.init(2, U32, e.uid), OVER),
    ("init rank -2**40", "ccoCommCreate", lambda e: Communicator.init(2, -(1 << 40), e.uid), BAD),
    ("init per_rank_vmm 2**64+1G", "ccoCommCreate",
     lambda e: Communicator.init(1, 0, e.uid, per_rank_vmm=U64 + (1 << 30)), OVER),
    ("from_env per_rank_vmm 2**64", "ccoCommCreateFromEnv",
     lambda e: Communicator.from_env(per_rank_vmm=U64), OVER),
    ("Communicator(handle 2**64)", "ccoCommRank", lambda e: Communicator(U64), OVER),
    ("team kind 2**32", "ccoCommTeam", lambda e: e.comm.team(U32 + TEAM_WORLD), OVER),
    ("team kind -2**31-1", "ccoCommTeam", lambda e: e.comm.team(-I32 - 1), OVER),
    ("team_rank_to_world kind", "ccoTeamRankToWorld",
     lambda e: e.comm.team_rank_to_world(U32 + TEAM_WORLD, 0), OVER),
    ("team_rank_to_world rank", "ccoTeamRankToWorld",
     lambda e: e.comm.team_rank_to_world(TEAM_WORLD, U32), OVER),
    ("team_rank_from_world kind", "ccoTeamRankFromWorld",
     lambda e: e.comm.team_rank_from_world(U32 + TEAM_WORLD, 0), OVER),
    ("team_rank_from_world rank", "ccoTeamRankFromWorld",
     lambda e: e.comm.team_rank_from_world(TEAM_WORLD, U32), OVER),
    ("alloc_mem 2**64+4096", "ccoMemAlloc", lambda e: e.comm.alloc_mem(U64 + 4096), OVER),
    ("alloc_mem 2**64", "ccoMemAlloc", lambda e: e.comm.alloc_mem(U64), OVER),
    ("alloc_mem -4096", "ccoMemAlloc", lambda e: e.comm.alloc_mem(-4096), BAD),
    ("free_mem ptr+2**64", "ccoMemFree", lambda e: e.comm.free_mem(U64 + e.mem.ptr), OVER),
    ("import_mem ptr+2**64", "ccoMemImport",
     lambda e: e.comm.import_mem(U64 + e.mem.ptr, 4096), OVER),
    ("import_mem size 2**64+4096", "ccoMemImport",
     lambda e: e.comm.import_mem(e.mem.ptr, U64 + 4096), OVER),
    ("register_window ptr+2**64", "ccoWindowRegister",
     lambda e: e.comm.register_window(U64 + e.mem.ptr, 4096), OVER),
    ("register_window size 2**64+4096", "ccoWindowRegister",
     lambda e: e.comm.register_window(e.mem.ptr + 4096, U64 + 4096), OVER),
    ("register_window(mem) size 2**64+4096", "ccoWindowRegister",
     lambda e: e.comm.register_window(e.mem, U64 + 4096), OVER),
    ("register_window size -1", "ccoWindowRegister",
     lambda e: e.comm.register_window(e.mem.ptr, -1), BAD),
    ("register_window_alloc 2**64+4096", "ccoWindowRegisterAlloc",
     lambda e: e.comm.register_window_alloc(U64 + 4096), OVER),
    ("register_external_window ptr+2**64", "ccoWindowRegisterExternal",
     lambda e: e.comm.register_external_window(U64 + e.mem.ptr, 4096), OVER),
    ("register_external_window nbytes 2**64+4096", "ccoWindowRegisterExternal",
     lambda e: e.comm.register_external_window(e.mem.ptr, U64 + 4096), OVER),
    ("deregister_window handle+2**64", "ccoWindowDeregister",
     lambda e: e.comm.deregister_window(U64 + e.win.handle), OVER),
    ("peer_ptr ptr+2**64", "ccoGetPeerPtr",
     lambda e: e.comm.peer_ptr(U64 + e.win.local_ptr, 0), OVER),
    ("peer_ptr peer 2**32", "ccoGetPeerPtr", lambda e: e.comm.peer_ptr(e.win.local_ptr, U32), OVER),
    ("window.peer_ptr peer 2**32", "ccoGetPeerPtr", lambda e: e.win.peer_ptr(U32), OVER),
    ("window.peer_ptr offset 2**64", "ccoGetPeerPtr", lambda e: e.win.peer_ptr(0, U64), OVER),
    ("window.peer peer 2**32", "ccoGetPeerPtr", lambda e: e.win.peer(U32), OVER),
    ("sdma peer 2**32", "ccoSdmaPutAsync", lambda e: _sdma(e, peer=U32), OVER),
    ("sdma peer -1", "ccoSdmaPutAsync", lambda e: _sdma(e, peer=-1), BAD),
    ("sdma dst_off 2**64", "ccoSdmaPutAsync", lambda e: _sdma(e, dst_off=U64), OVER),
    ("sdma src_off 2**64", "ccoSdmaPutAsync", lambda e: _sdma(e, src_off=U64), OVER),
    ("sdma nbytes 2**64+8", "ccoSdmaPutAsync", lambda e: _sdma(e, nbytes=U64 + 8), OVER),
    ("sdma nbytes -8", "ccoSdmaPutAsync", lambda e: _sdma(e, nbytes=-8), BAD),
    ("sdma sig_off 2**64+8", "ccoSdmaPutAsync", lambda e: _sdma(e, sig_off=U64 + 8), OVER),
    ("sdma sig_value 2**64+1", "ccoSdmaPutAsync", lambda e: _sdma(e, sig_value=U64 + 1), OVER),
    ("sdma sig_value -1", "ccoSdmaPutAsync", lambda e: _sdma(e, sig_value=-1), OVER),
    ("sdma stream 2**64", "ccoSdmaPutAsync", lambda e: _sdma(e, stream=U64), OVER),
    ("wait sig_off 2**64", "ccoStreamWaitSignal",
     lambda e: e.comm.stream_wait_signal(e.sig, U64, 0), OVER),
    ("wait value 2**64", "ccoStreamWaitSignal",
     lambda e: e.comm.stream_wait_signal(e.sig, 0, U64), OVER),
    ("wait stream 2**64", "ccoStreamWaitSignal",
     lambda e: e.comm.stream_wait_signal(e.sig, 0, 0, stream=U64), OVER),
    ("requirements field 2**32", "ccoDevCommCreate",
     lambda e: CCODevCommRequirements(lsa_barrier_count=U32), OVER),
    ("from_pointer ptr+2**64", "from_address",
     lambda e: cco.from_pointer(U64 + e.mem.ptr, 8, "host"), OVER),
    ("from_pointer size 2**64+8", "from_address",
     lambda e: cco.from_pointer(e.mem.ptr, U64 + 8, "host"), OVER),
]


def _discard(result):
    """What an unchecked call made by mistake, released so the test ends clean."""
    if isinstance(result, Communicator):
        result.destroy()


@pytest.mark.parametrize("reaches,call,exc", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_refused_before_c(env, reaches, call, exc):
    before = dict(env.comm._resources)
    try:
        result = call(env)
    except exc as err:
        assert isinstance(err, CCOInvalidArgument)  # OverflowError included: one hierarchy
        assert err.code == 1
        if exc is BAD:  # fits the C type: the argument's own bounds refuse it
            assert not isinstance(err, OverflowError), err
    except CCOError as err:
        pytest.fail(f"raised {type(err).__name__} ({err}), not {exc.__name__}")
    else:
        _discard(result)
        pytest.fail(f"accepted: {result!r}")
    assert env.spy.calls == [], f"reached C: {env.spy.calls}"
    assert env.comm._resources == before  # nothing allocated, registered or freed
    assert env.mem.alive and env.win.alive
    assert bytes(env.mem.memoryview(0, 16)) == bytes(16)  # still mapped


def test_every_c_function_with_an_integer_parameter_has_cases():
    """A prototype that gains an integer parameter must get a case above."""
    ints = (ctypes.c_int, ctypes.c_size_t, ctypes.c_uint64, ctypes.c_ssize_t)
    with_ints = {name for name, (_, args) in _lib.PROTOTYPES.items()
                 if any(a in ints for a in args)}
    not_called_with_user_ints = {
        "ccoGetErrorString",  # a result code from the library itself
        "ccoUniqueIdToString",  # not called (the package formats ids itself)
        "ccoUniqueIdGetRootAddress",  # not called (for launchers written in C)
        "ccoBootstrapAllGather",  # its size is len() of a bytes object (checked, always fits)
        "cco_torch_malloc", "cco_torch_free",  # called by torch, not the package
    }
    covered = {reaches for _, reaches, _, _ in CASES}
    assert with_ints - not_called_with_user_ints <= covered


def test_ranks_and_sizes_below_their_minimum_are_invalid_arguments():
    uid = Communicator.get_unique_id()
    for nranks, rank in [(0, 0), (-1, 0), (2, -1)]:
        with pytest.raises(CCOInvalidArgument) as info:
            Communicator.init(nranks, rank, uid)
        assert not isinstance(info.value, OverflowError)


def test_sizes_reported_are_sizes_registered(comm):
    mem = comm.alloc_mem(8192)
    assert mem.size == 8192 and len(mem.memoryview()) == 8192
    win = comm.register_window(mem, 4096)
    assert win.size == 4096 == win.info().size and len(win.memoryview()) == 4096
    alloc = comm.register_window_alloc(4096)
    assert alloc.size == 4096 == alloc.info().size


def test_largest_values_of_each_type_pass(comm):
    """The checks refuse only what the C type cannot hold: its bounds pass."""
    src = comm.register_window_alloc(4096)
    dst = comm.register_window_alloc(4096)
    sig = comm.register_window_alloc(4096)
    comm.sdma_put_async(0, dst, 0, src, 0, 8, sig, 8, U64 - 1)
    assert int(sig.numpy("uint64")[1]) == U64 - 1
    comm.stream_wait_signal(sig, 8, U64 - 1)
    with pytest.raises(CCOInvalidArgument) as info:  # an int the library refuses
        comm.team(I32 - 1)
    assert not isinstance(info.value, OverflowError)
    assert CCODevCommRequirements(gda_queue_depth=U32 - 1).gda_queue_depth == U32 - 1
    with pytest.raises(CCOError):  # in range for size_t: the library says why not
        comm.alloc_mem(U64 - 1)


def test_numpy_integers_are_integers(comm):
    mem = comm.alloc_mem(np.int64(4096))
    assert mem.size == 4096 and type(mem.size) is int
    win = comm.register_window(mem, np.uint64(4096))
    assert comm.peer_ptr(np.uint64(win.local_ptr), np.int32(0)) == win.local_ptr
    assert comm.team(np.int32(TEAM_WORLD)) == (1, 0, 1)


@pytest.mark.parametrize("value", [True, False, 1.0, 4096.0, "4096", None, b"\x10",
                                   np.True_, np.float64(4096)])
def test_non_integers_are_invalid_arguments(comm, value):
    for call in (lambda: comm.alloc_mem(value), lambda: comm.team(value),
                 lambda: comm.register_window_alloc(value)):
        with pytest.raises(CCOInvalidArgument) as info:
            call()
        assert not isinstance(info.value, OverflowError)


# ---------------------------------------------------------------- the helper


@pytest.mark.parametrize("type_name,low,high", [
    ("INT", -(1 << 31), (1 << 31) - 1),
    ("UINT32", 0, (1 << 32) - 1),
    ("SIZE_T", 0, (1 << 64) - 1),
    ("UINT64", 0, (1 << 64) - 1),
    ("POINTER", 0, (1 << 64) - 1),
])
def test_to_c_bounds(type_name, low, high):
    from cco import _convert

    ctype = getattr(_convert, type_name)
    assert (ctype.min, ctype.max) == (low, high)
    for v in (low, high, 0, 1):
        assert _convert.to_c(ctype, "x", v) == v
    for v in (low - 1, high + 1, high * 4, low - (1 << 70)):
        with pytest.raises(OverflowError, match=f"x={v} .*{ctype.name}"):
            _convert.to_c(ctype, "x", v)


def test_to_c_meaning_bounds():
    from cco import _convert

    with pytest.raises(CCOInvalidArgument, match="size must be an integer >= 1, not 0"):
        _convert.to_c(_convert.SIZE_T, "size", 0, low=1)
    with pytest.raises(CCOInvalidArgument, match="rank must be an integer 0..3, not 4"):
        _convert.to_c(_convert.INT, "rank", 4, low=0, high=3)
    with pytest.raises(OverflowError):  # the type first: the value cannot reach C at all
        _convert.to_c(_convert.INT, "rank", I32, low=0, high=3)
    assert type(_convert.to_c(_convert.INT, "rank", np.int16(3), low=0, high=3)) is int
