"""The collectives from Python (Communicator.all_reduce ... and cco.collectives) on the host platform.

The argument checks run on one rank and need none of the C collectives: every bad argument is refused
before any C call, so they run whatever libcco is loaded. The calls themselves run as the ranks of a
ccorun job (coll_body.py) at 2 and 4 ranks against numpy, and with each algorithm forced through
CCO_ALGO. Those need ccoAllReduce and the rest in libcco: while the library lacks them and src/ does
not implement them yet, they skip and say what was not run (test_python.sh runs pytest with -rs, which
prints the reasons); once src/ implements them, a library without them fails instead (a stale build).
"""
import ctypes
import re

import numpy as np
import pytest

from conftest import REPO, TESTS_DIR, describe, run_ranks
from test_ranks import run_threads

import cco
from cco import CCOInvalidArgument, CCOInvalidUsage, CCONotInWindow, CCOUnsupported, Communicator, _lib
from cco import collectives as coll

HEADER = REPO / "include" / "cco" / "cco_coll_types.h"
COLLECTIVE_SYMBOLS = tuple(_lib.LATE_PROTOTYPES)


def require_c_collectives():
    """Skips (saying why) while libcco and src/ both lack the C collectives;
    fails when src/ has them but the loaded library does not."""
    missing = [name for name in COLLECTIVE_SYMBOLS if not _lib.has_function(name)]
    if not missing:
        return
    sources = [p.read_text(errors="replace") for p in (REPO / "src").rglob("*") if p.suffix in (".c", ".cu")]
    in_src = [name for name in missing if any(re.search(rf"\b{name}\s*\(", text) for text in sources)]
    if in_src:
        pytest.fail(f"src/ implements {', '.join(in_src)}, but the loaded libcco ({_lib.library_path()}) "
                    "lacks them: rebuild it")
    pytest.skip(f"not run: libcco has no {', '.join(missing)} yet and src/ does not implement them; "
                "these tests run once the C collectives land")


def header_enum(name: str, prefix: str) -> dict:
    """{lowercased name after prefix: value} of a typedef enum of cco_coll_types.h."""
    text = HEADER.read_text()
    body = re.search(r"typedef enum \{([^}]*)\}\s*" + name + ";", text).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    out, value = {}, -1
    for item in body.split(","):
        m = re.match(r"\s*(\w+)\s*(?:=\s*(\d+))?\s*$", item)
        if not m or not m.group(1).startswith(prefix) or m.group(1).startswith("ccoNum"):
            continue
        value = int(m.group(2)) if m.group(2) else value + 1
        out[m.group(1)[len(prefix):].lower()] = value
    return out


def test_types_operators_and_algorithms_match_the_header():
    assert header_enum("ccoDataType_t", "cco") == coll.DTYPES
    assert header_enum("ccoRedOp_t", "cco") == coll.OPS
    algos = header_enum("ccoAlgo_t", "ccoAlgo")
    assert tuple(sorted(algos, key=algos.get)) == coll.ALGORITHMS
    assert list(algos.values()) == list(range(len(algos)))


# ------------------------------------------------------------ arguments, one rank, no C call


@pytest.fixture
def win(comm):
    w = comm.register_window_alloc(1 << 20)
    yield w
    w.deregister()


def f32(win, n, offset=0):
    return win.numpy("float32", (n,), offset)


@pytest.mark.parametrize("dtype", ["float64", "int64", "uint8", "int16", "bool", "complex64"])
def test_other_dtypes_are_refused_by_name(comm, win, dtype):
    a = win.numpy(dtype, (8,))
    with pytest.raises(CCOInvalidArgument, match=rf"float32, bfloat16, float16, int32, not {dtype}"):
        comm.all_reduce(a)
    with pytest.raises(CCOInvalidArgument, match=rf"numpy array of shape \(8,\) and dtype {dtype}"):
        comm.all_gather(a, win.numpy(dtype, (8,), 4096))


def test_the_four_types_pass_the_checks(comm, win):
    """Zero elements: every check runs, and nothing is left to call C for."""
    for a, b in ((win.numpy("float32", (0,)), win.numpy("float32", (0,), 64)),
                 (win.numpy("float16", (0,)), win.numpy("float16", (0, 2), 64)),
                 (win.numpy("int32", (0,)), win.numpy("int32", (0,), 64)),
                 (win.dlpack("bfloat16", (0,)), win.dlpack("bfloat16", (0,), 64)),
                 (win.dlpack("float32", (0, 4)), win.dlpack("float32", (0,), 64))):
        assert comm.all_reduce(a) is a and comm.all_reduce(a, out=b) is b
        assert comm.broadcast(a, 0) is a and comm.broadcast(a, 0, out=b) is b
        for call in (comm.all_gather, comm.reduce_scatter, comm.all_to_all):
            assert call(a, b) is b
    assert coll.describe(win.dlpack("bfloat16", (3, 2))).dtype == "bfloat16"
    assert coll.describe(win.dlpack("bfloat16", (3, 2))).nbytes == 12


def test_out_must_have_the_input_dtype(comm, win):
    with pytest.raises(CCOInvalidArgument, match="out has dtype float16, the input float32"):
        comm.all_reduce(f32(win, 8), out=win.numpy("float16", (8,), 4096))


def test_non_contiguous_is_refused(comm, win):
    with pytest.raises(CCOInvalidArgument, match=r"shape \(8,\) .* is not contiguous"):
        comm.all_reduce(f32(win, 16)[::2])
    with pytest.raises(CCOInvalidArgument, match="out .* is not contiguous"):
        comm.all_reduce(f32(win, 16), out=win.numpy("float32", (4, 4), 4096).T)


def test_read_only_out_is_refused(comm, win):
    out = f32(win, 8, 4096)
    out.setflags(write=False)
    with pytest.raises(CCOInvalidArgument, match="out .* is read-only"):
        comm.all_reduce(f32(win, 8), out=out)


def test_sizes(comm, win):
    a = f32(win, 8)
    with pytest.raises(CCOInvalidArgument, match="all_reduce: out has 7 elements, the input 8"):
        comm.all_reduce(a, out=f32(win, 7, 4096))
    with pytest.raises(CCOInvalidArgument, match=r"all_gather: out has 16 elements; it needs 8 \(1 ranks x"):
        comm.all_gather(a, f32(win, 16, 4096))
    with pytest.raises(CCOInvalidArgument, match=r"reduce_scatter: the input has 8 elements; it needs 4"):
        comm.reduce_scatter(a, f32(win, 4, 4096))
    with pytest.raises(CCOInvalidArgument, match="all_to_all: out has 9 elements, the input 8"):
        comm.all_to_all(a, f32(win, 9, 4096))
    with pytest.raises(CCOInvalidArgument, match="broadcast: out has 4 elements, the input 8"):
        comm.broadcast(a, 0, out=f32(win, 4, 4096))
    with pytest.raises(TypeError):
        comm.all_gather(a)  # out is required where the output is another size


def test_all_to_all_is_not_in_place(comm, win):
    a = f32(win, 8)
    with pytest.raises(CCOInvalidArgument, match="all_to_all does not work in place"):
        comm.all_to_all(a, a)
    with pytest.raises(CCOInvalidArgument, match="the input and out overlap"):
        comm.all_to_all(a, f32(win, 8, 16))


def test_operators(comm, win):
    a = win.numpy("float32", (0,))
    for op in ("sum", "max", "min", "SUM", "Max"):
        comm.all_reduce(a, op=op)
        comm.reduce_scatter(a, a, op=op)

    class RedOpType:  # what torch.distributed.ReduceOp.SUM is: an enum with a name
        name = "SUM"

    comm.all_reduce(a, op=RedOpType())
    for bad in ("prod", "avg", "", 0, None):
        with pytest.raises(CCOInvalidArgument, match="op must be one of sum, max, min"):
            comm.all_reduce(f32(win, 4), op=bad)


def test_root(comm, win):
    for bad in (1, -1, True, "0", 2 ** 40):
        with pytest.raises(CCOInvalidArgument, match="broadcast: root"):
            comm.broadcast(f32(win, 4), bad)


def test_stream_handles():
    class TorchLike:
        cuda_stream = 0x1234

    class CupyLike:
        ptr = 0x2345

    class Protocol:
        def __cuda_stream__(self):
            return (0, 0x3456)

    class CUstreamLike:
        def getPtr(self):
            return 0x4567

    assert coll.stream_handle(0x10) == 0x10
    assert coll.stream_handle(np.uint64(0x20)) == 0x20
    assert coll.stream_handle(0) is None  # the legacy default stream
    assert coll.stream_handle(TorchLike()) == 0x1234
    assert coll.stream_handle(CupyLike()) == 0x2345
    assert coll.stream_handle(Protocol()) == 0x3456
    assert coll.stream_handle(CUstreamLike()) == 0x4567
    for bad in (True, "s", -1, object()):
        with pytest.raises(CCOInvalidArgument, match="stream"):
            coll.stream_handle(bad)
    with pytest.raises(cco.CCOArgumentOverflow):
        coll.stream_handle(2 ** 64)


def test_bad_stream_is_refused_before_c(comm, win):
    with pytest.raises(CCOInvalidArgument, match="stream"):
        comm.all_reduce(f32(win, 4), stream="default")


def test_not_a_tensor(comm):
    with pytest.raises(CCOInvalidArgument, match="must be a torch tensor, a cupy array, a numpy array or a cco "
                                                 "array view .* not builtins.list"):
        comm.all_reduce([1.0, 2.0])


def test_memory_outside_the_windows_is_refused_before_c(comm):
    a = np.ones((4, 8), dtype=np.float32)
    with pytest.raises(CCONotInWindow, match=r"all_reduce: tensor \(numpy array of shape \(4, 8\) and dtype "
                                             r"float32, at 0x[0-9a-f]+\) is not in a window") as err:
        comm.all_reduce(a)
    assert "symmetric memory" in str(err.value) and "register_window_alloc" in str(err.value)
    assert isinstance(err.value, CCOInvalidArgument) and err.value.code == 1
    w = comm.register_window_alloc(4096)
    with pytest.raises(CCONotInWindow, match="out .* is not in a window"):
        comm.all_gather(w.numpy("float32", (8,)), np.empty(8, np.float32))
    w.deregister()


def test_a_peer_view_is_not_this_ranks_memory():
    def body(comm):
        w = comm.register_window_alloc(4096)
        comm.barrier()
        try:
            comm.all_reduce(w.peer(1 - comm.rank).numpy("float32", (8,)))
            return "taken"
        except CCONotInWindow as exc:
            return "peer" if f"LSA peer {1 - comm.rank}'s copy" in str(exc) else str(exc)
        finally:
            comm.barrier()

    assert run_threads(2, body) == ["peer", "peer"]


def test_external_window_memory_is_found_through_its_alias():
    """A buffer at an external window's own address is passed as its alias in the flat VA, where the
    library looks windows up (on the host platform, external memory is another communicator's)."""
    owner = Communicator.init(1, 0, Communicator.get_unique_id(), per_rank_vmm=1 << 30)
    comm = Communicator.init(1, 0, Communicator.get_unique_id(), per_rank_vmm=1 << 30)
    try:
        mem = owner.alloc_mem(1 << 16)
        win = comm.register_external_window(mem.ptr, 1 << 15)  # the first half of the memory
        assert win.source_ptr == mem.ptr and win.local_ptr != mem.ptr
        buf = coll.describe(mem.numpy("float32", (16,), 256))
        assert coll.address(comm, buf, "tensor", "all_reduce") == win.local_ptr + 256
        past = coll.describe(mem.numpy("float32", (16,), (1 << 15) - 32))
        with pytest.raises(CCONotInWindow):
            coll.address(comm, past, "tensor", "all_reduce")  # runs past the window's end
        win.deregister()
        with pytest.raises(CCONotInWindow):
            coll.address(comm, buf, "tensor", "all_reduce")  # no window any more
    finally:
        comm.destroy()
        owner.destroy()


def test_collective_algorithm_arguments(comm):
    with pytest.raises(CCOInvalidArgument, match="name must be one of all_reduce, all_gather"):
        comm.collective_algorithm("allreduce_", 1024)
    with pytest.raises(CCOInvalidArgument, match="nbytes"):
        comm.collective_algorithm("all_reduce", -1)


def test_destroyed_communicator():
    c = Communicator.init(1, 0, Communicator.get_unique_id(), per_rank_vmm=1 << 30)
    w = c.register_window_alloc(4096)
    a = w.numpy("float32", (8,))
    c.destroy()
    with pytest.raises(CCOInvalidUsage, match="destroyed"):
        c.all_reduce(a)
    with pytest.raises(CCOInvalidUsage, match="destroyed"):
        c.collective_algorithm("all_reduce", 8)


# ------------------------------------------------------------ the C functions


def test_a_missing_symbol_fails_the_call_naming_it(monkeypatch):
    monkeypatch.setitem(_lib.LATE_PROTOTYPES, "ccoNoSuchCollective", (ctypes.c_int, [ctypes.c_void_p]))
    assert not _lib.has_function("ccoNoSuchCollective")
    with pytest.raises(CCOUnsupported, match="has no symbol ccoNoSuchCollective: it was built before"):
        _lib.function("ccoNoSuchCollective")


def test_one_rank(comm, win):
    """With ccoAllReduce in the library: a one-rank all-reduce is a copy. Without it: the call fails
    naming the symbol, after every check passed."""
    a, out = f32(win, 8), f32(win, 8, 4096)
    a[:] = np.arange(8)
    if not _lib.has_function("ccoAllReduce"):
        with pytest.raises(CCOUnsupported, match="has no symbol ccoAllReduce"):
            comm.all_reduce(a, out=out)
        require_c_collectives()  # skips, saying so, unless src/ has them
    assert comm.all_reduce(a, out=out) is out
    assert out.tolist() == list(range(8))
    assert comm.collective_algorithm("all_reduce", 32) in coll.ALGORITHMS


def _job(n, args, extra_env=None):
    proc = run_ranks(n, [str(TESTS_DIR / "coll_body.py")] + args, timeout=600, extra_env=extra_env, prefix=False)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0 and not re.search(r"^(FAIL|not run) ", text, flags=re.M), describe(proc)
    assert re.search(rf"^coll_body: [1-9][0-9]* ok, 0 failed, 0 not run, {n} ranks$", text, flags=re.M), \
        describe(proc)


@pytest.mark.parametrize("n", [2, 4])
def test_every_collective_type_and_operator_against_numpy(n):
    require_c_collectives()
    _job(n, [])


@pytest.mark.parametrize("algo", ["oneshot", "ll", "twoshot"])
def test_all_reduce_with_a_forced_algorithm(algo):
    require_c_collectives()
    _job(4, ["--only", "all_reduce,algorithm", "--algo", algo, "--small"], {"CCO_ALGO": algo})
