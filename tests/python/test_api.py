"""The whole API on one rank in this process, and every misuse we can name."""
import ctypes
import gc

import numpy as np
import pytest

import cco
from cco import (CCODevCommRequirements, CCOError, CCOInvalidArgument, CCOInvalidUsage,
                 CCOOutOfMemory, CCOUnsupported, Communicator, GDA_CONNECTION_NONE, TEAM_LSA)


def test_quick_reference():
    uid = Communicator.get_unique_id()
    with Communicator.init(1, 0, uid, per_rank_vmm=256 * 1024 * 1024) as comm:
        mem = comm.alloc_mem(4096)
        win = comm.register_window(mem.ptr, mem.size)
        reqs = CCODevCommRequirements()
        reqs.gda_connection_type = GDA_CONNECTION_NONE
        reqs.lsa_barrier_count = 1
        dc = comm.create_dev_comm(reqs)
        assert (dc.rank, dc.world_size, dc.lsa_size, dc.lsa_rank) == (0, 1, 1, 0)
        assert dc.ptr and win.handle and win.local_ptr == mem.ptr and mem.size == 4096
        comm.barrier()
    assert not (dc.alive or win.alive or mem.alive or comm.alive)


def test_properties(comm):
    assert (comm.rank, comm.size, comm.lsa_rank, comm.lsa_size) == (0, 1, 0, 1)
    assert comm.node_count == 1 and comm.node_index == 0 and comm.platform == "host"
    assert comm.cuda_device == -1
    base, slot = comm.flat_va
    assert base and slot == 4 << 30  # rounded up to 4 GiB
    assert comm.team(TEAM_LSA) == (1, 0, 1)
    assert comm.async_error is None
    assert comm.allgather(b"xyz") == [b"xyz"] and comm.allgather(b"") == [b""]
    assert "rank=0" in repr(comm)


def test_release_order_is_newest_first(comm, monkeypatch):
    order = []
    lib = comm._lib

    class Spy:
        def __getattr__(self, name):
            fn = getattr(lib, name)
            if name in ("ccoMemFree", "ccoWindowDeregister", "ccoDevCommDestroy"):
                return lambda *a: (order.append(name), fn(*a))[1]
            return fn

    mem = comm.alloc_mem(100)
    win = comm.register_window(mem)
    dc = comm.create_dev_comm()
    comm._lib = Spy()
    comm.destroy()
    assert order == ["ccoDevCommDestroy", "ccoWindowDeregister", "ccoMemFree"]
    assert not (mem.alive or win.alive or dc.alive)


def test_memory_and_windows(comm):
    mem = comm.alloc_mem(10000)
    view = mem.numpy("uint8")
    assert view.shape == (10000,)
    view[:] = 3
    win = comm.register_window(mem, 8192)
    assert win.numpy("uint32", (2, 1024))[1, 1023] == 0x03030303
    assert comm.peer_ptr(win.local_ptr + 5, 0) == win.local_ptr + 5  # myself
    assert win.peer_ptr(0, 5) == win.local_ptr + 5
    info = win.info()
    assert info.size == 8192 and info.magic == cco._abi.WINDOW_MAGIC and info.lsaSize == 1
    w2 = comm.register_window_alloc(5000)
    assert w2.owns == "alloc" and comm.in_flat_va(w2.local_ptr)
    w2.memoryview()[:4] = b"abcd"
    assert bytes(w2.peer(0).memoryview(0, 4)) == b"abcd"
    w2.deregister()
    win.deregister()
    mem.free()


def test_with_blocks_release_resources(comm):
    with comm.alloc_mem(64) as mem:
        with comm.register_window(mem) as win:
            assert win.alive
        assert not win.alive
    assert not mem.alive
    with comm.create_dev_comm() as dc:
        assert dc.alive
    assert not dc.alive


def test_import_between_two_communicators():
    """Host platform: memory of another communicator of this process maps without a copy."""
    with Communicator.init(1, 0, Communicator.get_unique_id()) as a, \
            Communicator.init(1, 0, Communicator.get_unique_id()) as b:
        src = a.alloc_mem(8192)
        src.numpy("uint64")[:] = np.arange(1024, dtype=np.uint64)
        imp = b.import_mem(src.ptr, 8192)
        assert imp.imported and imp.source_ptr == src.ptr and imp.ptr != src.ptr
        assert imp.numpy("uint64")[1000] == 1000
        imp.numpy("uint64")[7] = 77
        assert src.numpy("uint64")[7] == 77
        win = b.register_external_window(src.ptr, 8192)
        assert win.owns == "external" and win.numpy("uint64")[7] == 77
        win.deregister()
        imp.free()
        assert src.numpy("uint64")[7] == 77  # the owner keeps its memory


# ------------------------------------------------------------------ misuse


@pytest.mark.parametrize("size", [0, -1, 1.5, True, "8", None])
def test_bad_sizes_are_refused_before_c(comm, size):
    with pytest.raises(CCOInvalidArgument):
        comm.alloc_mem(size)
    with pytest.raises(CCOInvalidArgument):
        comm.register_window_alloc(size)


def test_sizes_the_library_refuses(comm):
    with pytest.raises(CCOOutOfMemory) as info:
        comm.alloc_mem((4 << 30) + 1)  # more than the slot
    assert "slot" in info.value.detail
    mem = comm.alloc_mem(4096)
    with pytest.raises(CCOInvalidArgument):  # beyond the allocation
        comm.register_window(mem.ptr, 4096 * 2)
    with pytest.raises(CCOInvalidArgument, match="size is required"):
        comm.register_window(mem.ptr)


def test_foreign_pointers(comm):
    mem = comm.alloc_mem(8192)
    foreign = ctypes.create_string_buffer(64)
    for ptr in (0x1234, ctypes.addressof(foreign), mem.ptr + 64):
        with pytest.raises(CCOInvalidArgument) as info:
            comm.free_mem(ptr)
        assert "not an allocation" in info.value.detail
    with pytest.raises(CCOInvalidArgument):
        comm.register_window(ctypes.addressof(foreign), 64)
    with pytest.raises(CCOInvalidArgument, match="not inside a registered window"):
        comm.peer_ptr(mem.ptr, 0)  # no window yet
    win = comm.register_window(mem)
    with pytest.raises(CCOInvalidArgument):
        comm.peer_ptr(win.local_ptr, 1)  # no rank 1
    with pytest.raises(CCOInvalidArgument):
        comm.peer_ptr(-5, 0)
    with pytest.raises(CCOInvalidArgument):
        comm.deregister_window(0xDEAD)
    with pytest.raises(CCOInvalidArgument):
        win.peer_ptr(0, offset=8192)
    with pytest.raises(CCOInvalidArgument):  # the library refuses an interior import
        comm.import_mem(mem.ptr + 4096, 4096)


def test_double_release(comm):
    mem = comm.alloc_mem(64)
    ptr = mem.ptr
    mem.free()
    with pytest.raises(CCOInvalidUsage, match="already released"):
        mem.free()
    with pytest.raises(CCOInvalidUsage):
        comm.free_mem(mem)
    with pytest.raises(CCOInvalidArgument):  # by address, the library says double free
        comm.free_mem(ptr)
    with pytest.raises(CCOInvalidUsage):
        mem.ptr
    win = comm.register_window_alloc(64)
    handle = win.handle
    win.deregister()
    with pytest.raises(CCOInvalidUsage):
        win.deregister()
    with pytest.raises(CCOInvalidArgument):
        comm.deregister_window(handle)
    with pytest.raises(CCOInvalidUsage):
        win.numpy()
    dc = comm.create_dev_comm()
    dc.destroy()
    with pytest.raises(CCOInvalidUsage):
        comm.destroy_dev_comm(dc)
    with pytest.raises(CCOInvalidUsage):
        dc.ptr


def test_free_under_a_live_window(comm):
    mem = comm.alloc_mem(64)
    win = comm.register_window(mem)
    with pytest.raises(CCOInvalidUsage, match="registered window"):
        mem.free()
    assert mem.alive  # nothing changed
    win.deregister()
    mem.free()


def test_resources_of_another_communicator(comm):
    with Communicator.init(1, 0, Communicator.get_unique_id()) as other:
        mem = other.alloc_mem(64)
        win = other.register_window_alloc(64)
        dc = other.create_dev_comm()
        with pytest.raises(CCOInvalidArgument, match="does not belong"):
            comm.free_mem(mem)
        with pytest.raises(CCOInvalidArgument, match="does not belong"):
            comm.deregister_window(win)
        with pytest.raises(CCOInvalidArgument, match="does not belong"):
            comm.destroy_dev_comm(dc)
        with pytest.raises(CCOInvalidArgument, match="does not belong"):
            comm.register_window(mem)


def test_requirement_fields():
    reqs = CCODevCommRequirements()
    with pytest.raises(AttributeError, match="no field 'lsa_barrier_cnt'"):
        reqs.lsa_barrier_cnt = 1
    for bad in (-1, 1 << 32, 1.0, "1", None, True):
        with pytest.raises(CCOInvalidArgument):
            reqs.lsa_barrier_count = bad
    assert reqs.lsa_barrier_count == 1  # unchanged
    with pytest.raises(AttributeError):
        CCODevCommRequirements(gda_conection_type=0)


@pytest.mark.parametrize("field,value,named", [
    ("gda_queue_depth", 3, "gdaQueueDepth"),
    ("gda_connection_type", 9, "gdaConnectionType"),
    ("gda_context_count", 0, "gdaContextCount"),
    ("lsa_barrier_count", 5000, "barrier counts"),
    ("sdma_queue_count", 9, "sdmaQueueCount"),
    ("magic", 0, "magic"),
    ("size", 60, "size"),
    ("version", 2, "version"),
])
def test_requirement_values_the_library_refuses(comm, field, value, named):
    reqs = CCODevCommRequirements()
    setattr(reqs, field, value)
    with pytest.raises(CCOInvalidArgument) as info:
        comm.create_dev_comm(reqs)
    assert named in info.value.detail
    comm.create_dev_comm(CCODevCommRequirements()).destroy()  # still healthy


def test_requirements_type(comm):
    with pytest.raises(CCOInvalidArgument, match="CCODevCommRequirements"):
        comm.create_dev_comm({"lsa_barrier_count": 1})


def test_bad_init_arguments():
    uid = Communicator.get_unique_id()
    for nranks, rank in [(0, 0), (2, 2), (2, -1), (1.0, 0)]:
        with pytest.raises(CCOInvalidArgument):
            Communicator.init(nranks, rank, uid)
    with pytest.raises(CCOInvalidArgument, match="broadcast"):
        Communicator.init(1, 0, None)
    with pytest.raises(CCOInvalidArgument):
        Communicator.init(1, 0, 12345)
    with pytest.raises(CCOInvalidArgument):
        Communicator.init(1, 0, uid, per_rank_vmm=-1)
    with pytest.raises(CCOInvalidArgument, match="1 TiB"):
        Communicator.init(1, 0, uid, per_rank_vmm=2 << 40)


def test_from_env_outside_ccorun(monkeypatch):
    for var in ("CCO_UNIQUE_ID", "CCO_NRANKS", "CCO_RANK"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(CCOError):
        Communicator.from_env()


class _NoC:
    """Stands in for the CDLL: any C call is a test failure."""

    def __getattr__(self, name):
        raise AssertionError(f"{name} was called on a destroyed communicator")


def test_destroyed_communicator_refuses_everything_without_calling_c():
    comm = Communicator.init(1, 0, Communicator.get_unique_id())
    mem = comm.alloc_mem(64)
    win = comm.register_window_alloc(64)
    dc = comm.create_dev_comm()
    comm.destroy()
    comm.destroy()  # harmless
    comm._lib = _NoC()
    comm._barrier_fn = None
    calls = [
        lambda: comm.barrier(), lambda: comm.allgather(b"x"), lambda: comm.abort(),
        lambda: comm.alloc_mem(64), lambda: comm.free_mem(mem), lambda: comm.free_mem(12345),
        lambda: comm.import_mem(12345, 64), lambda: comm.register_window(12345, 64),
        lambda: comm.register_window_alloc(64), lambda: comm.register_external_window(12345, 64),
        lambda: comm.deregister_window(win), lambda: comm.peer_ptr(12345, 0),
        lambda: comm.create_dev_comm(), lambda: comm.destroy_dev_comm(dc),
        lambda: comm.team(0), lambda: comm.team_rank_to_world(0, 0),
        lambda: comm.team_rank_from_world(0, 0), lambda: comm.async_error, lambda: comm.rank,
        lambda: comm.size, lambda: comm.lsa_rank, lambda: comm.lsa_size, lambda: comm.node_count,
        lambda: comm.platform, lambda: comm.cuda_device, lambda: comm.flat_va, lambda: comm.handle,
        lambda: comm.window_info(win), lambda: mem.free(), lambda: win.deregister(),
        lambda: win.peer(0), lambda: win.info(), lambda: dc.destroy(), lambda: dc.ptr,
        lambda: mem.numpy(), lambda: comm.__enter__(),
    ]
    for call in calls:
        with pytest.raises(CCOInvalidUsage):
            call()
    assert not comm.alive and "destroyed" in repr(comm)


def test_abort_then_async_error():
    comm = Communicator.init(1, 0, Communicator.get_unique_id())
    comm.abort()
    err = comm.async_error
    assert isinstance(err, CCOError) and err.code != 0
    with pytest.raises(CCOError):
        comm.barrier()
    comm.destroy()  # still releases everything


def test_forgotten_communicator_is_destroyed_by_gc():
    import os
    import weakref

    fds = len(os.listdir("/proc/self/fd"))
    comm = Communicator.init(1, 0, Communicator.get_unique_id())
    mem = comm.alloc_mem(64)
    ref = weakref.ref(comm)
    del comm
    gc.collect()
    assert ref() is not None and mem.alive  # a live handle keeps its communicator
    del mem
    gc.collect()
    assert ref() is None
    assert len(os.listdir("/proc/self/fd")) == fds  # sockets and memfds closed


# ------------------------------------------------------------------- views


def test_numpy_views_and_bounds(comm):
    mem = comm.alloc_mem(4096)
    a = mem.numpy("float32", (4, 256))
    a[3, 255] = 1.5
    assert mem.numpy("float32")[1023] == 1.5
    assert mem.numpy("uint8", 16, offset=4080).shape == (16,)
    b = mem.numpy()
    del mem  # the view keeps the Python handle alive
    assert b.base is not None and b[0] == 0
    m2 = comm.alloc_mem(4096)
    for shape, offset in [((4097,), 0), (16, 4081), (None, 4097), (1, -1)]:
        with pytest.raises(CCOInvalidArgument):
            m2.numpy("uint8", shape, offset)
    with pytest.raises(CCOUnsupported, match="host-platform"):
        m2.cuda_array("float32")
    with pytest.raises(CCOUnsupported):
        cco.views.from_pointer(m2.ptr, 64, "cuda").numpy()


def test_cuda_array_interface_object():
    region = cco.from_pointer(0x7000_0000, 4096, "cuda")
    arr = region.cuda_array("float32", (16, 64))
    cai = arr.__cuda_array_interface__
    assert cai["shape"] == (16, 64) and cai["typestr"] == "<f4" and cai["data"] == (0x7000_0000, False)
    assert cai["version"] == 3 and cai["strides"] is None
    assert region.cuda_array("uint8", 16, offset=100).__cuda_array_interface__["data"][0] == 0x7000_0064
    with pytest.raises(CCOInvalidArgument):
        region.cuda_array("float64", 513)


def test_torch_cpu_view(comm):
    torch = pytest.importorskip("torch")
    mem = comm.alloc_mem(4096)
    t = mem.torch(torch.float32, (1024,))
    t[5] = 2.5
    assert mem.numpy("float32")[5] == 2.5
    bf = mem.torch(torch.bfloat16)
    assert bf.numel() == 2048
    with pytest.raises(CCOInvalidArgument):
        cco.torch.import_symmetric_tensor(comm, torch.zeros(4))
