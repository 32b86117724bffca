"""The CUDAPluggableAllocator hooks (cco_torch_malloc / cco_torch_free),
called through ctypes on the host platform, as torch would call them."""
import ctypes

import pytest

from test_ranks import run_threads

import cco
from cco import CCOInvalidArgument, Communicator, _lib


@pytest.fixture
def lib():
    lib = _lib.load()
    cco.set_torch_allocator_comm(None)
    yield lib
    cco.set_torch_allocator_comm(None)


def test_no_communicator_gives_null(lib):
    assert lib.cco_torch_malloc(4096, 0, None) is None
    lib.cco_torch_free(None, 0, 0, None)  # ignored
    lib.cco_torch_free(0x1234, 64, 0, None)  # not ours: ignored


def test_blocks_are_symmetric_memory(lib):
    # The selection is process-wide: one rank here, symmetry across two below.
    with Communicator.init(1, 0, Communicator.get_unique_id()) as comm:
        cco.set_torch_allocator_comm(comm)
        assert cco.communicator.torch_allocator_comm() is comm
        p = lib.cco_torch_malloc(3 << 20, 0, None)
        base, slot = comm.flat_va
        assert p and base <= p < base + slot, "inside this rank's slot of the flat VA"
        ctypes.memset(p, 0x5A, 3 << 20)
        win = comm.register_window(p, 3 << 20)  # symmetric memory: a window works
        assert comm.peer_ptr(p + 100, 0) == p + 100
        win.deregister()
        assert lib.cco_torch_malloc(0, 0, None) is None
        assert lib.cco_torch_malloc(-5, 0, None) is None
        assert lib.cco_torch_malloc(8 << 30, 0, None) is None  # more than the slot
        lib.cco_torch_free(p, 3 << 20, 0, None)
        with pytest.raises(CCOInvalidArgument):  # the hook really freed it
            comm.free_mem(p)
        q = lib.cco_torch_malloc(4096, 0, None)
        assert q == p, "freed range reused: the allocator is deterministic"
    # Destroying the selected communicator switched the hooks off.
    assert cco.communicator.torch_allocator_comm() is None
    assert lib.cco_torch_malloc(4096, 0, None) is None


def test_same_offsets_on_every_rank(lib):
    """Each rank process draws from its own communicator; here two
    communicators of one 2-rank job in threads take turns with the hook."""
    import threading

    turn = threading.Lock()

    def body(comm):
        with turn:
            cco.set_torch_allocator_comm(comm)
            ptrs = [lib.cco_torch_malloc(s, 0, None) for s in (1 << 20, 4096, 5 << 20)]
            lib.cco_torch_free(ptrs[1], 4096, 0, None)
            ptrs.append(lib.cco_torch_malloc(100, 0, None))
            cco.set_torch_allocator_comm(None)
        base, slot = comm.flat_va
        offsets = [(p - base) % slot for p in ptrs]
        gathered = comm.allgather(b"".join(o.to_bytes(8, "little") for o in offsets))
        # Blocks of the switched-away communicator were forgotten, not freed:
        # they are still allocations of comm, released with it.
        comm.free_mem(ptrs[0])
        return len(set(gathered)) == 1 and offsets[3] == offsets[1]

    assert run_threads(2, body) == [True, True]


def test_switching_forgets_blocks(lib):
    with Communicator.init(1, 0, Communicator.get_unique_id()) as a, \
            Communicator.init(1, 0, Communicator.get_unique_id()) as b:
        cco.set_torch_allocator_comm(a)
        pa = lib.cco_torch_malloc(4096, 0, None)
        cco.set_torch_allocator_comm(b)
        lib.cco_torch_free(pa, 4096, 0, None)  # a's block, b selected: ignored
        a.free_mem(pa)  # still a's allocation
        pb = lib.cco_torch_malloc(4096, 0, None)
        assert b.in_flat_va(pb) and not a.in_flat_va(pb)
        cco.set_torch_allocator_comm(None)
        b.free_mem(pb)


def test_set_comm_refuses_a_destroyed_communicator(lib):
    comm = Communicator.init(1, 0, Communicator.get_unique_id())
    comm.destroy()
    with pytest.raises(cco.CCOInvalidUsage):
        cco.set_torch_allocator_comm(comm)


def test_pool_needs_cuda_platform():
    torch = pytest.importorskip("torch")
    import cco.torch as cco_torch

    with Communicator.init(1, 0, Communicator.get_unique_id()) as comm:
        with pytest.raises(cco.CCOUnsupported):
            cco_torch.SymmetricMemPool(comm)
    assert torch
