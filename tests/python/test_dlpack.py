"""DLPack export of regions and CUDA array views (host platform; the cuda
side is checked without a GPU down to the capsule's fields, and with torch
and cupy in tests/gpu/test_python_gpu.py)."""
import ctypes
import gc
import weakref

import numpy as np
import pytest

import cco
from cco import CCOInvalidArgument, CCOInvalidUsage, Communicator
from cco.dlpack import (DLManagedTensor, DLManagedTensorVersioned, DLTensor, DLPackArray,
                        live_exports)

_capsule_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(
    ("PyCapsule_GetName", ctypes.pythonapi))
_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))
_capsule_set_name = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_SetName", ctypes.pythonapi))
USED = ctypes.create_string_buffer(b"used_dltensor")  # outlives every capsule renamed to it


def managed_of(capsule):
    """(name, managed structure) of an unconsumed capsule; the structure is
    freed with the capsule, so keep the capsule while reading it."""
    name = _capsule_name(capsule)
    cls = DLManagedTensorVersioned if name == b"dltensor_versioned" else DLManagedTensor
    return name, cls.from_address(_capsule_pointer(capsule, name))


def tensor_fields(t: DLTensor):
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = tuple(t.strides[i] for i in range(t.ndim))
    return (t.data, (t.device.device_type, t.device.device_id), shape, strides,
            (t.dtype.code, t.dtype.bits, t.dtype.lanes), t.byte_offset)


def test_struct_layouts_match_dlpack_h():
    # Sizes and offsets of dlpack.h on an LP64 machine.
    assert ctypes.sizeof(DLTensor) == 48
    assert [getattr(DLTensor, f).offset for f in
            ("data", "device", "ndim", "dtype", "shape", "strides", "byte_offset")] == \
        [0, 8, 16, 20, 24, 32, 40]
    assert ctypes.sizeof(DLManagedTensor) == 64
    assert (DLManagedTensor.manager_ctx.offset, DLManagedTensor.deleter.offset) == (48, 56)
    assert ctypes.sizeof(DLManagedTensorVersioned) == 80
    assert [getattr(DLManagedTensorVersioned, f).offset for f in
            ("version", "manager_ctx", "deleter", "flags", "dl_tensor")] == [0, 8, 16, 24, 32]


def test_numpy_reads_what_another_view_wrote(comm):
    mem = comm.alloc_mem(4096)
    mem.numpy("uint32")[:] = np.arange(1024, dtype=np.uint32)
    assert mem.__dlpack_device__() == (1, 0)
    flat = np.from_dlpack(mem)  # the region itself: flat uint8
    assert flat.dtype == np.uint8 and flat.shape == (4096,)
    assert flat.ctypes.data == mem.ptr and flat[4:8].tolist() == [1, 0, 0, 0]
    grid = np.from_dlpack(mem.dlpack("uint32", (32, 32)))
    assert grid[3, 5] == 3 * 32 + 5 and grid.strides == (128, 4)
    grid[0, 0] = 0xdeadbeef  # and the other way: written through DLPack, read by numpy
    assert mem.numpy("uint32")[0] == 0xdeadbeef
    tail = np.from_dlpack(mem.dlpack("uint16", 4, offset=4088))
    assert tail.tolist() == [1022, 0, 1023, 0]


def test_windows_and_peer_regions(comm):
    win = comm.register_window_alloc(1 << 16)
    win.numpy("int64")[:] = -7
    assert (np.from_dlpack(win.dlpack("int64")) == -7).all()
    peer = win.peer(0)  # this rank's own copy, seen as a peer's
    assert np.from_dlpack(peer.dlpack("int64", (8, 1024)))[7, 1023] == -7


def test_versioned_and_legacy_capsules(comm):
    mem = comm.alloc_mem(4096)
    before = live_exports()
    cap = mem.dlpack("float32", (4, 256), offset=0).__dlpack__(max_version=(1, 0))
    name, managed = managed_of(cap)
    assert name == b"dltensor_versioned"
    assert (managed.version.major, managed.version.minor, managed.flags) == (1, 0, 0)
    assert tensor_fields(managed.dl_tensor) == (mem.ptr, (1, 0), (4, 256), (256, 1), (2, 32, 1), 0)
    legacy = mem.__dlpack__()
    name, managed = managed_of(legacy)
    assert name == b"dltensor"
    assert tensor_fields(managed.dl_tensor) == (mem.ptr, (1, 0), (4096,), (1,), (1, 8, 1), 0)
    assert mem.__dlpack__(max_version=(0, 8)) is not None  # a pre-1.0 consumer: legacy
    assert _capsule_name(mem.__dlpack__(max_version=(2, 0))) == b"dltensor_versioned"
    assert live_exports() == before + 2  # the two capsules still held
    del cap, legacy
    gc.collect()
    assert live_exports() == before  # never consumed: freed by the capsule


def test_numpy_consumes_both_kinds(comm):
    mem = comm.alloc_mem(4096)
    mem.numpy("uint8")[:] = 9
    names = []

    class Spy:
        """Forwards to the region and records the capsule numpy got."""

        def __dlpack_device__(self):
            return mem.__dlpack_device__()

        def __dlpack__(self, **kwargs):
            cap = mem.__dlpack__(**kwargs)
            names.append(_capsule_name(cap))
            return cap

    class LegacyOnly(Spy):
        """A producer from before DLPack 1.0: only `stream`."""

        def __dlpack__(self, stream=None):
            return Spy.__dlpack__(self, stream=stream)

    before = live_exports()
    a = np.from_dlpack(LegacyOnly())
    assert names == [b"dltensor"] and (a == 9).all()
    if tuple(int(v) for v in np.__version__.split(".")[:2]) >= (2, 1):
        b = np.from_dlpack(Spy())  # numpy >= 2.1 asks for DLPack 1.x
        assert names[-1] == b"dltensor_versioned" and (b == 9).all()
        del b
    assert live_exports() == before + 1
    del a
    gc.collect()
    assert live_exports() == before  # numpy called the deleter


def test_consumer_owns_a_renamed_capsule(comm):
    mem = comm.alloc_mem(4096)
    before = live_exports()
    cap = mem.__dlpack__()
    _, managed = managed_of(cap)
    address = ctypes.addressof(managed)
    assert _capsule_set_name(cap, USED) == 0  # what a consumer does when it takes the tensor
    del cap
    gc.collect()
    assert live_exports() == before + 1  # taken: the capsule leaves it to the consumer
    DLManagedTensor.from_address(address).deleter(address)
    assert live_exports() == before


def test_consumer_array_keeps_the_memory_alive():
    comm = Communicator.init(1, 0, Communicator.get_unique_id(), per_rank_vmm=1 << 30)
    mem = comm.alloc_mem(1 << 20)
    mem.numpy("uint64")[:] = np.arange(1 << 17, dtype=np.uint64)
    arr = np.from_dlpack(mem.dlpack("uint64"))
    comm_ref, mem_ref = weakref.ref(comm), weakref.ref(mem)
    del comm, mem
    gc.collect()
    # Without the export's reference the communicator would have been
    # destroyed here and arr would read unmapped memory.
    assert comm_ref() is not None and mem_ref() is not None and mem_ref().alive
    assert int(arr[(1 << 17) - 1]) == (1 << 17) - 1
    del arr
    gc.collect()
    assert comm_ref() is None  # released with the last consumer array


def test_request_checks(comm):
    mem = comm.alloc_mem(4096)
    before = live_exports()
    with pytest.raises(BufferError, match="copy"):
        mem.__dlpack__(copy=True)
    assert mem.__dlpack__(copy=False, dl_device=(1, 0)) is not None
    with pytest.raises(BufferError, match="device"):
        mem.__dlpack__(dl_device=(2, 0))
    with pytest.raises(CCOInvalidArgument, match="stream"):
        mem.__dlpack__(stream=1)  # the CPU has no streams
    for bad in [(1,), "1.0", (1, "0"), 1]:
        with pytest.raises(CCOInvalidArgument, match="max_version"):
            mem.__dlpack__(max_version=bad)
    with pytest.raises(CCOInvalidArgument, match="copy"):
        mem.__dlpack__(copy="yes")
    with pytest.raises(TypeError):
        mem.__dlpack__(None)  # keyword-only, as the standard has it
    for dtype in ["datetime64[s]", ">f4", "U4"]:
        with pytest.raises(CCOInvalidArgument):
            mem.dlpack(dtype)
    with pytest.raises(CCOInvalidArgument):
        mem.dlpack("float64", 513)
    mem.free()
    with pytest.raises(CCOInvalidUsage):
        mem.__dlpack__()
    gc.collect()
    assert live_exports() == before  # no refused request left a tensor behind


def test_dtypes_and_shapes(comm):
    mem = comm.alloc_mem(4096)
    codes = {"int8": (0, 8), "uint64": (1, 64), "float16": (2, 16), "bfloat16": (4, 16),
             "complex64": (5, 64), "bool": (6, 8)}
    for name, (code, bits) in codes.items():
        assert mem.dlpack(name).dtype == (code, bits, 1), name
    scalar = np.from_dlpack(mem.dlpack("int32", ()))
    assert scalar.shape == () and scalar.ndim == 0
    assert np.from_dlpack(mem.dlpack("int32", (0, 5))).shape == (0, 5)


def test_cuda_regions_without_a_gpu():
    # Only the capsule is made: nothing reads the (fake) device address.
    region = cco.from_pointer(0x7000_0000, 4096, "cuda", device=3)
    assert region.__dlpack_device__() == (2, 3)
    before = live_exports()
    for stream in (None, -1, 1, 2, 0x5555_0000):
        cap = region.__dlpack__(stream=stream, max_version=(1, 0))
        _, managed = managed_of(cap)
        assert tensor_fields(managed.dl_tensor)[:3] == (0x7000_0000, (2, 3), (4096,))
    for stream in (0, -2, 1.5, True, 1 << 64):
        with pytest.raises(CCOInvalidArgument, match="stream"):
            region.__dlpack__(stream=stream)
    with pytest.raises(BufferError, match="device"):
        region.__dlpack__(dl_device=(2, 0))
    with pytest.raises(BufferError, match="device="):
        cco.from_pointer(0x7000_0000, 4096, "cuda").__dlpack_device__()
    with pytest.raises(CCOInvalidArgument):
        cco.from_pointer(0x7000_0000, 4096, "cuda", device=-1)
    arr = region.cuda_array("float32", (15, 64), offset=256)  # the device comes from its region
    assert arr.__dlpack_device__() == (2, 3)
    cap = arr.__dlpack__(stream=1)
    _, managed = managed_of(cap)  # valid while cap lives
    assert tensor_fields(managed.dl_tensor) == (0x7000_0100, (2, 3), (15, 64), (64, 1),
                                                (2, 32, 1), 0)
    del cap, managed
    gc.collect()
    assert live_exports() == before


def test_cuda_array_interface_stream_and_read_only():
    arr = cco.CudaArray(0x7000_0000, (8,), "<i4", readonly=True, device=0)
    cai = arr.__cuda_array_interface__
    assert set(cai) == {"shape", "typestr", "data", "strides", "stream", "version"}
    assert cai["version"] == 3 and cai["stream"] is None and cai["data"] == (0x7000_0000, True)
    cap = arr.__dlpack__(max_version=(1, 0))
    assert managed_of(cap)[1].flags == 1  # DLPACK_FLAG_BITMASK_READ_ONLY
    with pytest.raises(BufferError, match="read-only"):
        arr.__dlpack__()  # a legacy tensor cannot say read-only
    with pytest.raises(BufferError, match="device="):
        cco.CudaArray(0x7000_0000, (8,), "<i4").__dlpack_device__()


def test_dlpack_array_repr():
    assert "shape=(2, 3)" in repr(DLPackArray(0x1000, (2, 3), (2, 32, 1), (1, 0)))


def test_torch_from_dlpack(comm):
    torch = pytest.importorskip("torch", reason="torch is not installed (CI has none)")
    mem = comm.alloc_mem(4096)
    mem.numpy("float32")[:] = 1.5
    t = torch.from_dlpack(mem.dlpack("float32", (4, 256)))
    assert t.dtype == torch.float32 and t.shape == (4, 256) and t.data_ptr() == mem.ptr
    t[3, 255] = 2.5
    assert mem.numpy("float32")[1023] == 2.5
    bf = torch.from_dlpack(mem.dlpack(torch.bfloat16))
    assert bf.dtype == torch.bfloat16 and bf.numel() == 2048
    assert torch.from_dlpack(mem).dtype == torch.uint8
