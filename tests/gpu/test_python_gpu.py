"""The Python package on the GPU: run as the ranks of a cco job on one GPU
under MPS (or one GPU per rank):

    source tests/gpu/mps.sh; mps_start
    build/bin/ccorun -n 4 python3 tests/gpu/test_python_gpu.py
    (with another build: ccorun -n 4 -x CCO_LIBRARY=/path/to/libcco.so python3 ...)

Every rank runs the same checks in the same order (most are collective):
torch tensors and cupy arrays on windows and on peers' copies, the same
through DLPack (torch.from_dlpack and cupy.from_dlpack), the device
communicator's device copy, a cupy kernel doing an LSA put, a torch
symmetric-memory tensor imported as a window, torch allocations routed into
symmetric memory by the pluggable allocator pool, and the three examples
(rank 0 starts each as a job of its own while the others wait). Each rank
prints its failures; rank 0 prints "test_python_gpu: N passed, N failed"
for the whole job. Needs torch, cupy and numpy.
"""
import gc
import hashlib
import os
import re
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Callable, List

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

import cupy as cp  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

import cco  # noqa: E402
import cco.cuda  # noqa: E402
import cco.torch as cco_torch  # noqa: E402
from cco import CCODevCommRequirements, Communicator, GDA_CONNECTION_NONE, TEAM_LSA  # noqa: E402

PUT_KERNEL = r"""
#include "cco/cco_device.h"
// Thread i of the block stores `value` into word i of block lsaRank of every
// LSA peer's window, then the block meets the peers at LSA barrier 0.
extern "C" __global__ void put(const ccoDevComm* dcp, ccoWindow_t win, unsigned long long words,
                               int value, int* status) {
  ccoDevComm dc = *dcp;
  for (int p = 0; p < win->lsaSize; p++) {
    int* dst = (int*)ccoGetLsaPeerPtr(win, p, (unsigned long long)win->lsaRank * words * 4);
    for (unsigned long long i = threadIdx.x; i < words; i += blockDim.x) dst[i] = value;
  }
  ccoLsaBarrierSession b = ccoLsaBarrierSessionInit(&dc, 0, ccoCoopBlock);
  ccoDevStatus_t st = ccoLsaBarrierSync(&b);
  ccoLsaBarrierSessionEnd(&b);
  if (threadIdx.x == 0) *status = (int)st;
}
"""


class Runner:
    def __init__(self, comm: Communicator) -> None:
        self.comm = comm
        self.passed = 0
        self.failed: List[str] = []

    def check(self, name: str, fn: Callable[[], object]) -> None:
        """Runs one check; a False result or an exception fails it. Ends
        with a barrier so the ranks enter the next check together."""
        t0 = time.perf_counter()
        try:
            ok = fn()
            why = "" if ok is None or ok is True else f"returned {ok!r}"
        except Exception:  # noqa: BLE001
            why = traceback.format_exc(limit=6)
        torch.cuda.synchronize()
        self.comm.barrier()
        if why:
            self.failed.append(f"{name}: {why}")
            print(f"[{self.comm.rank}] FAIL {name}: {why}", flush=True)
        else:
            self.passed += 1
            if self.comm.rank == 0:
                print(f"ok   {name} ({time.perf_counter() - t0:.2f} s)", flush=True)


def lsa_peers(comm: Communicator) -> List[int]:
    return [comm.team_rank_to_world(TEAM_LSA, p) for p in range(comm.lsa_size)]


def check_torch_on_windows(comm: Communicator) -> bool:
    n = comm.lsa_size
    win = comm.register_window_alloc(n * 1024 * 4)
    mine = win.torch(torch.int32)
    assert mine.is_cuda and mine.data_ptr() == win.local_ptr and mine.numel() == n * 1024
    mine.fill_(-1)
    torch.cuda.synchronize()
    comm.barrier()
    for world in lsa_peers(comm):
        peer = win.peer(world).torch(torch.int32, (n, 1024))  # the peer's memory
        peer[comm.lsa_rank].fill_(comm.rank + 1)
    # Also through __cuda_array_interface__ directly.
    direct = torch.as_tensor(win.cuda_array("int32"), device="cuda")
    assert direct.data_ptr() == mine.data_ptr()
    torch.cuda.synchronize()
    comm.barrier()
    expect = torch.tensor([w + 1 for w in lsa_peers(comm)], dtype=torch.int32,
                          device="cuda").repeat_interleave(1024)
    ok = bool(torch.equal(mine, expect))
    bf = win.torch(torch.bfloat16, (n, 2048))  # any dtype, reinterpreted bytes
    ok = ok and bf.dtype == torch.bfloat16 and bf.data_ptr() == win.local_ptr
    comm.barrier()
    win.deregister()
    return ok


def check_cupy_on_windows(comm: Communicator) -> bool:
    mem = comm.alloc_mem(1 << 20)
    win = comm.register_window(mem)
    a = win.cupy("float32")
    assert a.data.ptr == win.local_ptr and a.size == (1 << 18)
    a[:] = 0
    cp.cuda.Device().synchronize()
    comm.barrier()
    right = lsa_peers(comm)[(comm.lsa_rank + 1) % comm.lsa_size]
    win.peer(right).cupy("float32")[comm.rank] = comm.rank + 0.5
    cp.cuda.Device().synchronize()
    comm.barrier()
    left = lsa_peers(comm)[(comm.lsa_rank - 1) % comm.lsa_size]
    ok = float(a[left]) == left + 0.5 and float(cp.asarray(cco.to_cupy(mem, "float32"))[left]) == left + 0.5
    comm.barrier()
    win.deregister()
    mem.free()
    return ok


def check_dlpack(comm: Communicator) -> bool:
    """torch.from_dlpack and cupy.from_dlpack of a window, and of a peer's
    copy, alias the device memory; the exported tensors are released with
    the arrays."""
    words = 1 << 16
    before = cco.dlpack.live_exports()
    win = comm.register_window_alloc(words * 4)
    assert win.__dlpack_device__() == (2, comm.cuda_device)
    raw = torch.from_dlpack(win)  # the window itself: flat uint8
    t = torch.from_dlpack(win.dlpack("int32"))
    c = cp.from_dlpack(win.dlpack("int32"))
    via_cai = torch.from_dlpack(win.cuda_array("int32", (words // 2, 2)))
    ok = raw.dtype == torch.uint8 and raw.numel() == words * 4
    ptrs = {raw.data_ptr(), t.data_ptr(), c.data.ptr, via_cai.data_ptr()}
    ok = ok and ptrs == {win.local_ptr}
    ok = ok and t.device.index == comm.cuda_device and c.device.id == comm.cuda_device
    t.fill_(comm.rank + 7)
    torch.cuda.synchronize()
    ok = ok and bool((c == comm.rank + 7).all())  # torch's stores, read by cupy
    c[:] = -1
    cp.cuda.Device().synchronize()
    ok = ok and int(t.sum()) == -words and int(via_cai[0, 1]) == -1
    comm.barrier()
    peers = lsa_peers(comm)
    right = peers[(comm.lsa_rank + 1) % comm.lsa_size]
    to_right = torch.from_dlpack(win.peer(right).dlpack("int32"))
    to_right[comm.rank] = comm.rank + 100  # into the right neighbour's memory
    torch.cuda.synchronize()
    comm.barrier()
    left = peers[(comm.lsa_rank - 1) % comm.lsa_size]
    ok = ok and int(t[left]) == left + 100
    comm.barrier()
    del raw, t, c, via_cai, to_right
    gc.collect()
    ok = ok and cco.dlpack.live_exports() == before  # every consumer called the deleter
    win.deregister()
    return ok


def check_dev_comm_copy(comm: Communicator) -> bool:
    dc = comm.create_dev_comm(CCODevCommRequirements(gda_connection_type=GDA_CONNECTION_NONE))
    dev = cco.from_pointer(dc.ptr, 256, "cuda").cupy("uint8")
    ok = bytes(cp.asnumpy(dev)) == dc.to_bytes() and dc.lsa_size == comm.lsa_size
    dc.destroy()
    return ok


def check_cupy_kernel_lsa_put(comm: Communicator) -> bool:
    words = 4096
    win = comm.register_window_alloc(comm.lsa_size * words * 4)
    dc = comm.create_dev_comm(CCODevCommRequirements(gda_connection_type=GDA_CONNECTION_NONE,
                                                     lsa_barrier_count=1))
    kernel = cco.cuda.raw_kernel(PUT_KERNEL, "put")
    status = cp.zeros(1, dtype=cp.int32)
    view = win.cupy("int32", (comm.lsa_size, words))
    ok = True
    for it in range(3):
        kernel((1,), (512,), (np.uint64(dc.ptr), np.uint64(win.handle), np.uint64(words),
                              np.int32(comm.rank * 10 + it), status))
        cp.cuda.Device().synchronize()
        got = cp.asnumpy(view)
        for p, world in enumerate(lsa_peers(comm)):
            ok = ok and bool((got[p] == world * 10 + it).all())
        ok = ok and int(status[0]) == 0
        comm.barrier()
    dc.destroy()
    win.deregister()
    return ok


def check_symmetric_tensor_import(comm: Communicator) -> bool:
    import torch.distributed as dist
    import torch.distributed._symmetric_memory as symm_mem

    tag = hashlib.sha256(os.environ.get("CCO_UNIQUE_ID", "x").encode()).hexdigest()[:16]
    store = f"/tmp/cco-python-gpu-store-{tag}"
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=comm.rank,
                            world_size=comm.size)
    try:
        block = 1 << 16
        t = symm_mem.empty(block * comm.size, dtype=torch.int32, device="cuda")
        t.fill_(-1)
        torch.cuda.synchronize()
        win = cco_torch.import_symmetric_tensor(comm, t)
        assert win.owns == "external" and comm.in_flat_va(win.local_ptr)
        for world in lsa_peers(comm):
            peer = win.peer(world).torch(torch.int32)
            peer[comm.rank * block:(comm.rank + 1) * block].fill_(comm.rank + 1)
        torch.cuda.synchronize()
        comm.barrier()
        expect = torch.full_like(t, -1)
        for world in lsa_peers(comm):
            expect[world * block:(world + 1) * block] = world + 1
        ok = bool(torch.equal(t, expect))  # the torch tensor itself holds the peers' stores
        comm.barrier()
        win.deregister()
        del t
        return ok
    finally:
        dist.destroy_process_group()
        if comm.rank == 0:
            Path(store).unlink(missing_ok=True)


def check_pluggable_allocator_pool(comm: Communicator) -> bool:
    pool = cco_torch.SymmetricMemPool(comm)
    base, slot = comm.flat_va
    with pool.use():
        x = torch.empty(1 << 20, dtype=torch.float32, device="cuda")
        y = torch.empty(1000, dtype=torch.int64, device="cuda")
    z = torch.empty(1000, device="cuda")  # outside the pool: ordinary memory
    mine = base + comm.lsa_rank * slot
    ok = mine <= x.data_ptr() < mine + slot and mine <= y.data_ptr() < mine + slot
    ok = ok and not comm.in_flat_va(z.data_ptr())
    # Symmetric: a window over the tensor, then peers reach it by peer_ptr.
    win = comm.register_window(x.data_ptr(), x.nbytes)
    x.fill_(float(comm.rank))
    torch.cuda.synchronize()
    comm.barrier()
    for world in lsa_peers(comm):
        peer_addr = comm.peer_ptr(x.data_ptr(), world)
        peer_x = cco.from_pointer(peer_addr, x.nbytes, "cuda").torch(torch.float32)
        ok = ok and float(peer_x[12345].item()) == float(world)
    comm.barrier()
    win.deregister()
    x_ptr = x.data_ptr()
    del x, y, z, peer_x
    pool.release()  # empty_cache hands the segments back through cco_torch_free
    ok = ok and cco.communicator.torch_allocator_comm() is None
    # The freed range is reused: the pool's segments went back to cco.
    probe = comm.alloc_mem(2 << 20)
    reused = probe.ptr == x_ptr
    probe.free()
    if not reused:
        print(f"[{comm.rank}] pool segments were not handed back by empty_cache", flush=True)
    return ok and reused


def check_examples(comm: Communicator) -> bool:
    """Rank 0 runs each example as a job of its own; the others wait."""
    ok = True
    if comm.rank == 0:
        ccorun = Path(cco.library_path()).resolve().parent.parent / "bin" / "ccorun"
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "python"), env.get("PYTHONPATH")]))
        env.setdefault("CCO_LIBRARY", cco.library_path())
        for name, args in [("01_barrier.py", []), ("02_lsa_put.py", []), ("03_lsa_allreduce.py", [])]:
            cmd = [str(ccorun), "-t", "100", "-p", "-n", str(comm.size), sys.executable,
                   str(REPO / "examples" / "python" / name)] + args
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=110)
            lines = [ln for ln in proc.stdout.splitlines() if ln.endswith("; ok")]
            good = proc.returncode == 0 and len(lines) == comm.size
            good = good and all(re.search(r"\((\w+, )?cuda", ln) for ln in lines)
            print(("ok   " if good else "FAIL ") + f"example {name}\n" +
                  "".join("     " + line + "\n" for line in proc.stdout.splitlines()) +
                  ("" if good else proc.stderr[-3000:]), flush=True)
            ok = ok and good
    verdict = comm.allgather(bytes([ok]))[0]
    return verdict == b"\x01"


def main() -> int:
    local = int(os.environ.get("CCO_LOCAL_RANK", "0"))
    torch.cuda.set_device(local % torch.cuda.device_count())
    torch.zeros(1, device="cuda")  # the primary context cco will use too
    with Communicator.from_env(per_rank_vmm=1 << 32) as comm:
        if comm.platform != "cuda":
            print(f"rank {comm.rank}: platform {comm.platform}, not cuda; 0 passed, 1 failed")
            return 1
        r = Runner(comm)
        r.check("the communicator's GPU is the one torch set (cuda_device)",
                lambda: comm.cuda_device == torch.cuda.current_device())
        r.check("torch tensors on a window and on peers' copies", lambda: check_torch_on_windows(comm))
        r.check("cupy arrays on a window and on peers' copies", lambda: check_cupy_on_windows(comm))
        r.check("DLPack: torch.from_dlpack and cupy.from_dlpack alias windows and peers' copies",
                lambda: check_dlpack(comm))
        r.check("device communicator copy (dc.ptr) equals the struct", lambda: check_dev_comm_copy(comm))
        r.check("cupy kernel: LSA put + device LSA barrier", lambda: check_cupy_kernel_lsa_put(comm))
        r.check("torch symmetric-memory tensor as an external window",
                lambda: check_symmetric_tensor_import(comm))
        r.check("pluggable allocator pool: torch.empty lands in the flat VA",
                lambda: check_pluggable_allocator_pool(comm))
        r.check("examples 01, 02, 03 (cuda)", lambda: check_examples(comm))
        counts = comm.allgather(bytes([r.passed, len(r.failed)]))
        passed = sum(c[0] for c in counts)
        failed = sum(c[1] for c in counts)
        if comm.rank == 0:
            print(f"test_python_gpu: {passed} passed, {failed} failed "
                  f"({comm.size} ranks x {r.passed + len(r.failed)} checks)", flush=True)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
