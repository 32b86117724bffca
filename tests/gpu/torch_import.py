"""Imports a torch symmetric-memory tensor into cco as an external window.

Run as ranks of a cco job on one GPU (MPS):
    ccorun -n 4 -x CCO_LIBRARY=build/lib/libcco.so python3 tests/gpu/torch_import.py

Each rank allocates a tensor with torch.distributed._symmetric_memory,
registers it with ccoWindowRegisterExternal (zero copy), writes its rank
into its block of every peer's copy through the flat VA (cupy views of the
addresses ccoGetPeerPtr returns), and checks the torch tensor itself holds
every peer's block. Uses only ctypes: the Python package comes later.
"""
import ctypes
import os
import sys

import cupy as cp
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem

lib = ctypes.CDLL(os.environ.get("CCO_LIBRARY", "libcco.so"))
lib.ccoGetLastError.restype = ctypes.c_char_p
lib.ccoGetErrorString.restype = ctypes.c_char_p


def ok(result, what, comm=None):
    if result != 0:
        detail = lib.ccoGetLastError(comm).decode()
        raise SystemExit(f"{what}: {lib.ccoGetErrorString(result).decode()}: {detail}")


def main():
    rank, nranks = int(os.environ["CCO_RANK"]), int(os.environ["CCO_NRANKS"])
    # One GPU per rank where there are several (several ranks share one under MPS).
    torch.cuda.set_device(int(os.environ.get("CCO_LOCAL_RANK", "0")) % torch.cuda.device_count())
    store = os.environ.get("CCO_TORCH_STORE", "/tmp/cco-torch-store")
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=nranks)
    block = 1 << 20  # int32 elements per rank
    t = symm_mem.empty(block * nranks, dtype=torch.int32, device="cuda")
    t.fill_(-1)
    torch.cuda.synchronize()

    comm = ctypes.c_void_p()
    ok(lib.ccoCommCreateFromEnv(ctypes.c_size_t(0), ctypes.byref(comm)), "create")
    win, local = ctypes.c_void_p(), ctypes.c_void_p()
    # The tensor's allocation is larger than the tensor (torch adds a signal pad
    # and rounds up): cco maps the whole allocation and registers t.nbytes.
    ok(lib.ccoWindowRegisterExternal(comm, ctypes.c_void_p(t.data_ptr()), ctypes.c_size_t(t.nbytes),
                                     ctypes.byref(win), ctypes.byref(local)), "register external", comm)
    lsa_size = ctypes.c_int()
    ok(lib.ccoCommLsaSize(comm, ctypes.byref(lsa_size)), "lsa size", comm)
    mine = local.value + rank * block * 4
    for p in range(nranks):
        peer = ctypes.c_void_p()
        ok(lib.ccoGetPeerPtr(comm, ctypes.c_void_p(mine), p, ctypes.byref(peer)), "peer ptr", comm)
        mem = cp.cuda.UnownedMemory(peer.value, block * 4, None)
        view = cp.ndarray((block,), dtype=cp.int32, memptr=cp.cuda.MemoryPointer(mem, 0))
        view[:] = rank + 1
    cp.cuda.Device().synchronize()
    ok(lib.ccoBarrierAll(comm), "barrier", comm)
    expect = torch.arange(nranks, device="cuda", dtype=torch.int32).repeat_interleave(block) + 1
    wrong = int((t != expect).sum().item())
    ok(lib.ccoBarrierAll(comm), "barrier", comm)
    ok(lib.ccoWindowDeregister(comm, win), "deregister", comm)
    ok(lib.ccoCommDestroy(comm), "destroy")
    dist.destroy_process_group()
    print(f"torch_import rank {rank}: tensor of {t.nbytes} bytes imported; {wrong} wrong elements; "
          f"{1 if wrong == 0 else 0} passed, {0 if wrong == 0 else 1} failed")
    return 0 if wrong == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
