"""torch symmetric-memory backend "CCO" on the GPU, and torch's "NVSHMEM"
backend through the same checks, side by side.

Run as the ranks of a job on one GPU under MPS (or one GPU per rank), with
torch.distributed over gloo (a file store):

    ccorun -n 2 -x CCO_LIBRARY=build/lib/libcco.so -x CCO_TORCH_STORE=/tmp/store.X \\
        python3 tests/gpu/test_torch_backend.py --backend CCO [--digests FILE]
    ... --backend NVSHMEM          (with NVSHMEM_* set for MPS: run_torch_backend.sh)
    ... --part timeout             (rank 0 waits for a signal rank 1 never sends)
    ... --part shutdown            (exits with tensors, handles and windows alive)

Every rank runs the checks in the same order. Rank 0 prints "ok"/"FAIL"
per check and "test_torch_backend[BACKEND, N ranks]: N passed, N failed";
each rank appends a JSON line with sha256 digests of the ops' outputs to
--digests, so the caller can show that both backends compute the same bytes.
"""
import argparse
import gc
import hashlib
import json
import os
import sys
import time
import traceback
import warnings
from pathlib import Path
from typing import Callable, Dict, List, Optional

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.distributed._symmetric_memory as symm_mem  # noqa: E402
from torch._C._distributed_c10d import _SymmetricMemory  # noqa: E402

PUT_KERNEL = r"""
#include "cco/cco_device.h"
// Block lsaRank of every LSA peer's copy of the window, from byte `off`:
// `words` ints of `value`; then the ranks meet at LSA barrier 0.
extern "C" __global__ void put(const ccoDevComm* dcp, ccoWindow_t win, unsigned long long off,
                               unsigned long long words, int value, int* status) {
  ccoDevComm dc = *dcp;
  for (int p = 0; p < win->lsaSize; p++) {
    int* dst = (int*)ccoGetLsaPeerPtr(win, p, off + (unsigned long long)win->lsaRank * words * 4);
    for (unsigned long long i = threadIdx.x; i < words; i += blockDim.x) dst[i] = value;
  }
  ccoLsaBarrierSession b = ccoLsaBarrierSessionInit(&dc, 0, ccoCoopBlock);
  ccoDevStatus_t st = ccoLsaBarrierSync(&b);
  ccoLsaBarrierSessionEnd(&b);
  if (threadIdx.x == 0) *status = (int)st;
}
"""


class Job:
    """This rank's view of the job, and the results of its checks."""

    def __init__(self, backend: str) -> None:
        self.backend = backend
        self.rank = dist.get_rank()
        self.world = dist.get_world_size()
        self.group = dist.group.WORLD.group_name
        self.device = torch.device("cuda", torch.cuda.current_device())
        self.passed = 0
        self.failed: List[str] = []
        self.digests: Dict[str, str] = {}
        self.only = ""  # run only the checks whose name contains this

    def digest(self, name: str, t: torch.Tensor) -> None:
        self.digests[name] = hashlib.sha256(t.detach().contiguous().cpu().view(torch.uint8)
                                            .numpy().tobytes()).hexdigest()[:16]

    def check(self, name: str, fn: Callable[[], object]) -> None:
        """Runs one check: a False result or an exception fails it. Ends with
        a barrier so the ranks enter the next check together."""
        if self.only and self.only not in name:
            return
        t0 = time.perf_counter()
        try:
            result = fn()
            why = "" if result is None or result is True else f"returned {result!r}"
            torch.cuda.synchronize()
        except Exception:  # noqa: BLE001
            why = traceback.format_exc(limit=8)
        dist.barrier()
        if why:
            self.failed.append(f"{name}: {why}")
            print(f"[{self.rank}] FAIL {name}: {why}", flush=True)
        else:
            self.passed += 1
            if self.rank == 0:
                print(f"ok   {name} ({(time.perf_counter() - t0) * 1e3:.0f} ms)", flush=True)


def pattern(n: int, rank: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """Small integers that depend on the rank: sums over ranks are exact in
    bf16 and fp32, so every rank knows the reference without communicating."""
    return ((torch.arange(n, device=device) % 13) + 3 * rank).to(dtype)


def new_tensor(job: Job, nbytes: int, dtype: torch.dtype = torch.uint8) -> torch.Tensor:
    """A tensor of the backend straight from its allocator (no caching pool):
    freeing it frees the allocation."""
    n = nbytes // torch.tensor([], dtype=dtype).element_size()
    return _SymmetricMemory.empty_strided_p2p((n,), (1,), dtype, job.device)


# ----------------------------------------------------------------- checks


def check_alloc_and_peers(job: Job) -> None:
    blk = 64 << 10
    t = symm_mem.empty(blk * job.world, dtype=torch.uint8, device=job.device)
    t.fill_(job.rank + 1)
    torch.cuda.synchronize()
    hdl = symm_mem.rendezvous(t, job.group)
    assert hdl.rank == job.rank and hdl.world_size == job.world, (hdl.rank, hdl.world_size)
    assert hdl.buffer_size >= t.nbytes, hdl.buffer_size
    assert len(hdl.buffer_ptrs) == job.world and all(hdl.buffer_ptrs), hdl.buffer_ptrs
    assert symm_mem.rendezvous(t, job.group).buffer_ptrs == hdl.buffer_ptrs, "rendezvous is cached"
    dist.barrier()
    for p in range(job.world):  # read every peer's buffer
        got = hdl.get_buffer(p, (t.numel(),), torch.uint8)
        assert bool((got == p + 1).all()), f"peer {p}'s buffer"
    dist.barrier()
    for p in range(job.world):  # write my block into every peer's buffer
        hdl.get_buffer(p, (t.numel(),), torch.uint8)[job.rank * blk:(job.rank + 1) * blk].fill_(100 + job.rank)
    torch.cuda.synchronize()
    dist.barrier()
    expect = (torch.arange(job.world, device=job.device) + 100).to(torch.uint8).repeat_interleave(blk)
    assert bool((t == expect).all()), "peers' writes landed in my tensor"


def check_signal_pads(job: Job) -> None:
    t = symm_mem.empty(4096, dtype=torch.uint8, device=job.device)
    hdl = symm_mem.rendezvous(t, job.group)
    pad = hdl.get_signal_pad(job.rank)
    assert pad.dtype == torch.uint32 and pad.numel() * 4 == symm_mem.get_signal_pad_size(), pad.shape
    assert int(pad.to(torch.int64).abs().sum()) == 0, "the signal pad starts zeroed"
    assert len(hdl.signal_pad_ptrs) == job.world and all(hdl.signal_pad_ptrs)
    # My pad seen by a peer is the pad I see.
    peer = (job.rank + 1) % job.world
    assert hdl.get_signal_pad(peer).data_ptr() == hdl.signal_pad_ptrs[peer]


def check_barrier_put_wait(job: Job) -> None:
    n = 1024
    t = symm_mem.empty(n, dtype=torch.int32, device=job.device)
    t.fill_(-1)
    hdl = symm_mem.rendezvous(t, job.group)
    for _ in range(100):
        hdl.barrier(channel=0, timeout_ms=10000)
    for channel in (0, 3):
        hdl.barrier(channel=channel)
    # A ring: write into the next rank's buffer, signal it, wait for mine.
    nxt, prv = (job.rank + 1) % job.world, (job.rank - 1) % job.world
    for step in range(20):
        hdl.get_buffer(nxt, (n,), torch.int32).fill_(job.rank * 1000 + step)
        hdl.put_signal(nxt, channel=1, timeout_ms=10000)
        hdl.wait_signal(prv, channel=1, timeout_ms=10000)
        got = int(t[n - 1].item())
        assert got == prv * 1000 + step, (step, got)
        hdl.barrier(channel=2, timeout_ms=10000)  # nobody overwrites before it is read
    torch.cuda.synchronize()
    pad = hdl.get_signal_pad(job.rank).to(torch.int64)
    assert int(pad.abs().sum()) == 0, "the pad is zero again after the signals are consumed"


def check_one_shot(job: Job) -> None:
    for dtype in (torch.float32, torch.bfloat16):
        for nbytes in (4 << 10, 256 << 10, 4 << 20):
            n = nbytes // torch.tensor([], dtype=dtype).element_size()
            t = symm_mem.empty(n, dtype=dtype, device=job.device)
            t.copy_(pattern(n, job.rank, dtype, job.device))
            symm_mem.rendezvous(t, job.group)
            out = torch.ops.symm_mem.one_shot_all_reduce(t, "sum", job.group)
            ref = sum(pattern(n, r, torch.float32, job.device) for r in range(job.world)).to(dtype)
            assert torch.equal(out, ref), f"one_shot_all_reduce {dtype} {nbytes} bytes"
            job.digest(f"one_shot_{dtype}_{nbytes}", out)


def check_two_shot(job: Job) -> None:
    for dtype in (torch.float32, torch.bfloat16):
        n = (1 << 20) // torch.tensor([], dtype=dtype).element_size()
        t = symm_mem.empty(n, dtype=dtype, device=job.device)
        t.copy_(pattern(n, job.rank, dtype, job.device))
        symm_mem.rendezvous(t, job.group)
        torch.ops.symm_mem.two_shot_all_reduce_(t, "sum", job.group)
        ref = sum(pattern(n, r, torch.float32, job.device) for r in range(job.world)).to(dtype)
        assert torch.equal(t, ref), f"two_shot_all_reduce_ {dtype}"
        job.digest(f"two_shot_{dtype}", t)


def _operand(rows: int, cols: int, seed: int, device: torch.device) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-3, 4, (rows, cols), generator=g).to(torch.float32).to(device)


def check_fused_all_gather_matmul(job: Job) -> None:
    m, k, n = 64, 128, 96
    a_shard = _operand(m, k, 10 + job.rank, job.device)
    b = _operand(k, n, 1, job.device)
    a, outs = torch.ops.symm_mem.fused_all_gather_matmul(a_shard, [b], 0, job.group)
    a_ref = torch.cat([_operand(m, k, 10 + r, job.device) for r in range(job.world)])
    assert torch.equal(a, a_ref), "the gathered A"
    assert torch.allclose(outs[0], a_ref @ b), "A @ B"
    job.digest("fused_all_gather_matmul", outs[0])


def check_fused_matmul_reduce_scatter(job: Job) -> None:
    m, k, n = 64 * job.world, 128, 96
    a = _operand(m, k, 20 + job.rank, job.device)
    b = _operand(k, n, 2, job.device)
    out = torch.ops.symm_mem.fused_matmul_reduce_scatter(a, b, "sum", 0, job.group)
    full = sum(_operand(m, k, 20 + r, job.device) @ b for r in range(job.world))
    ref = full.chunk(job.world)[job.rank]
    assert torch.allclose(out, ref), "reduce_scatter(A @ B)"
    job.digest("fused_matmul_reduce_scatter", out)


def check_multicast_refused(job: Job) -> None:
    t = symm_mem.empty(4096, dtype=torch.float32, device=job.device)
    hdl = symm_mem.rendezvous(t, job.group)
    assert hdl.multicast_ptr == 0, "no multicast object behind the tensor"
    for op in ("multimem_all_reduce_", "multimem_one_shot_all_reduce"):
        try:
            getattr(torch.ops.symm_mem, op)(t, "sum", job.group)
            torch.cuda.synchronize()
        except RuntimeError as exc:
            assert "multicast" in str(exc), f"{op}: {exc}"
            continue
        raise AssertionError(f"{op} ran without multicast support")


def _free_bytes() -> int:
    """Free device memory, read while every rank is between steps (MPS
    ranks share the GPU)."""
    torch.cuda.synchronize()
    dist.barrier()
    free = torch.cuda.mem_get_info()[0]
    dist.barrier()
    return free


def check_cycles(job: Job) -> None:
    before_stats = _stats(job)
    free0 = _free_bytes()
    for i in range(100):
        t = new_tensor(job, 1 << 20)
        hdl = symm_mem.rendezvous(t, job.group)
        hdl.barrier(channel=0, timeout_ms=10000)
        del hdl, t
    gc.collect()
    free1 = _free_bytes()
    assert free1 + (64 << 20) >= free0, f"device memory free {free0 >> 20} -> {free1 >> 20} MiB"
    assert _stats(job) == before_stats, (before_stats, _stats(job))
    # Through torch's symmetric pool: segments are reused, nothing grows.
    for i in range(100):
        t = symm_mem.empty(1 << 20, dtype=torch.uint8, device=job.device)
        symm_mem.rendezvous(t, job.group).barrier(channel=0, timeout_ms=10000)
        del t
        if i == 0:
            gc.collect()
            free_pool = _free_bytes()
    gc.collect()
    free2 = _free_bytes()
    assert free2 + (64 << 20) >= free_pool, f"pool: {free_pool >> 20} -> {free2 >> 20} MiB free"


def _stats(job: Job) -> Optional[Dict[str, int]]:
    if job.backend != "CCO":
        return None
    import cco.allocator

    return cco.allocator.stats()


def check_cco_window(job: Job) -> None:
    """The same tensor in cco's kernels: an LSA put by a CUDA kernel
    (NVRTC) through the window, then an SDMA copy from the host API."""
    import cupy as cp
    import numpy as np

    import cco.cuda
    import cco.torch
    from cco import CCODevCommRequirements, GDA_CONNECTION_NONE

    words = 4096
    t = symm_mem.empty(words * job.world, dtype=torch.int32, device=job.device)
    t.fill_(-1)
    torch.cuda.synchronize()
    symm_mem.rendezvous(t, job.group)
    tw = cco.torch.window_of(t, job.group)
    assert tw.group == job.group and tw.communicator.rank == job.rank
    reqs = CCODevCommRequirements(lsa_barrier_count=1)
    reqs.gda_connection_type = GDA_CONNECTION_NONE
    dc = tw.communicator.create_dev_comm(reqs)
    kernel = cco.cuda.raw_kernel(PUT_KERNEL, "put")
    status = cp.full((1,), -1, dtype=cp.int32)
    kernel((1,), (256,), (np.uint64(dc.ptr), np.uint64(tw.window.handle), np.uint64(tw.offset),
                          np.uint64(words), np.int32(job.rank + 7), status))
    cp.cuda.Device().synchronize()
    assert int(status[0]) == 0, f"LSA barrier status {int(status[0])}"
    expect = (torch.arange(job.world, device=job.device, dtype=torch.int32) + 7).repeat_interleave(words)
    assert torch.equal(t, expect), "LSA puts through the window landed in the torch tensor"
    dist.barrier()
    # SDMA: my block to the next rank's copy, on torch's stream.
    nxt = (job.rank + 1) % job.world
    t[job.rank * words:(job.rank + 1) * words].fill_(500 + job.rank)
    torch.cuda.synchronize()
    dist.barrier()
    off = tw.offset + job.rank * words * 4
    tw.communicator.sdma_put_async(nxt, tw.window, off, tw.window, off, words * 4,
                                   stream=torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    dist.barrier()
    prv = (job.rank - 1) % job.world
    got = t[prv * words:(prv + 1) * words]
    assert bool((got == 500 + prv).all()), "SDMA copy from the previous rank"
    tw.communicator.destroy_dev_comm(dc)


def check_pool_symmetry(job: Job) -> None:
    """SymmetricMemPool notices when free order breaks symmetry: rank 0
    frees a tensor the others keep, then everyone allocates one more."""
    import cco
    import cco.torch

    uid = [cco.Communicator.get_unique_id() if job.rank == 0 else None]
    dist.broadcast_object_list(uid, src=0)
    with cco.Communicator.init(job.world, job.rank, uid[0]) as comm:
        pool = cco.torch.SymmetricMemPool(comm)
        with pool.use():
            a = torch.empty(1 << 20, device=job.device)
            b = torch.empty(1 << 20, device=job.device)
        pool.check_symmetry(a, b)
        if job.rank == 0:
            del a  # rank 0's collector ran; the others' did not yet
        raised = ""
        try:
            with pool.use():
                c = torch.empty(1 << 20, device=job.device)
        except cco.CCOInvalidUsage as exc:
            raised = str(exc)
        assert "no longer symmetric" in raised, f"divergence not reported: {raised!r}"
        del b, c
        a = None  # noqa: F841
        gc.collect()
        pool.release()


def check_any_order(job: Job) -> None:
    """Tensors made in a different order on each rank (so at different offsets
    of their segments): torch's pointers still reach the right tensor on
    every peer, and window_of, which needs one offset on all ranks, refuses
    with a message instead of giving a wrong window."""
    sizes = [(4 << 10) * (k + 1) for k in range(4)]
    # NVSHMEM's allocation is collective (same sizes, same order): one order there.
    order = sizes if job.rank % 2 == 0 or job.backend != "CCO" else sizes[::-1]
    made = {n: new_tensor(job, n, torch.int32) for n in order}
    for n in sizes:  # rendezvous in one order everywhere, as torch requires
        t = made[n]
        t.fill_(job.rank * 100 + n // 4096)
        hdl = symm_mem.rendezvous(t, job.group)
        hdl.barrier(channel=0, timeout_ms=10000)
        for p in range(job.world):
            got = hdl.get_buffer(p, (t.numel(),), torch.int32)
            assert bool((got == p * 100 + n // 4096).all()), f"rank {p}'s tensor of {n} bytes"
        hdl.barrier(channel=0, timeout_ms=10000)
    if job.backend == "CCO" and job.world > 1:
        import cco.torch

        first = made[sizes[0]]
        try:
            cco.torch.window_of(first, job.group)
            raised = ""
        except Exception as exc:  # noqa: BLE001
            raised = f"{type(exc).__name__}: {exc}"
        assert "CCOInvalidUsage" in raised and "different offsets" in raised, f"window_of did not refuse: {raised!r}"
    torch.cuda.synchronize()


def run_checks(job: Job) -> None:
    job.check("allocation, rendezvous, peers' buffers", lambda: check_alloc_and_peers(job))
    job.check("signal pads", lambda: check_signal_pads(job))
    job.check("barrier / put_signal / wait_signal with timeouts", lambda: check_barrier_put_wait(job))
    job.check("one_shot_all_reduce fp32/bf16 at 4 KiB, 256 KiB, 4 MiB", lambda: check_one_shot(job))
    job.check("two_shot_all_reduce_ fp32/bf16", lambda: check_two_shot(job))
    job.check("fused_all_gather_matmul", lambda: check_fused_all_gather_matmul(job))
    job.check("fused_matmul_reduce_scatter", lambda: check_fused_matmul_reduce_scatter(job))
    job.check("multicast ops refuse", lambda: check_multicast_refused(job))
    job.check("100 alloc/rendezvous/free cycles, memory back to baseline", lambda: check_cycles(job))
    job.check("tensors made in a different order on each rank", lambda: check_any_order(job))
    if job.backend == "CCO":
        job.check("window_of: LSA kernel and SDMA on the tensor", lambda: check_cco_window(job))
        job.check("SymmetricMemPool reports lost symmetry on every rank", lambda: check_pool_symmetry(job))


# ------------------------------------------------------------- other parts


def part_timeout(job: Job) -> int:
    """Rank 0 waits 500 ms for a signal rank 1 never sends: the kernel must
    say so and trap (the process cannot go on: its context is lost)."""
    t = symm_mem.empty(4096, dtype=torch.uint8, device=job.device)
    hdl = symm_mem.rendezvous(t, job.group)
    dist.barrier()
    if job.rank == 0:
        t0 = time.perf_counter()
        hdl.wait_signal(1, channel=0, timeout_ms=500)
        try:
            torch.cuda.synchronize()
        except RuntimeError as exc:
            waited = time.perf_counter() - t0
            # It must have waited for the timeout, not failed at once.
            verdict = "expired" if 0.4 <= waited < 30 else "out of bounds"
            print(f"timeout: rank 0 got {type(exc).__name__} after {waited:.2f} s ({verdict}): "
                  f"{str(exc).splitlines()[0]}", flush=True)
            os._exit(3)
        print("timeout: wait_signal returned without a signal", flush=True)
        os._exit(1)
    time.sleep(5)
    os._exit(0)


def part_shutdown(job: Job) -> int:
    """Leaves tensors (pooled and not), handles, a window and a device
    communicator alive at exit, and no destroy_process_group."""
    global KEEP
    t = symm_mem.empty(1 << 20, dtype=torch.float32, device=job.device)
    u = new_tensor(job, 3 << 20)
    hdl = symm_mem.rendezvous(t, job.group)
    symm_mem.rendezvous(u, job.group)
    out = torch.ops.symm_mem.one_shot_all_reduce(t.fill_(1), "sum", job.group)
    assert float(out[0]) == job.world
    KEEP = [t, u, hdl, out]
    if job.backend == "CCO":
        import cco.torch
        from cco import CCODevCommRequirements, GDA_CONNECTION_NONE

        tw = cco.torch.window_of(t, job.group)
        reqs = CCODevCommRequirements()
        reqs.gda_connection_type = GDA_CONNECTION_NONE
        KEEP += [tw, tw.communicator.create_dev_comm(reqs)]
    torch.cuda.synchronize()
    dist.barrier()
    print(f"shutdown: rank {job.rank} exits with {len(KEEP)} live objects", flush=True)
    return 0


KEEP: List[object] = []


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="CCO", choices=["CCO", "NVSHMEM"])
    ap.add_argument("--part", default="checks", choices=["checks", "timeout", "shutdown"])
    ap.add_argument("--digests", help="append this rank's output digests (JSON line) here")
    ap.add_argument("--only", default="", help="run only the checks whose name contains this")
    args = ap.parse_args()
    rank, world = int(os.environ["CCO_RANK"]), int(os.environ["CCO_NRANKS"])
    torch.cuda.set_device(int(os.environ.get("CCO_LOCAL_RANK", "0")) % torch.cuda.device_count())
    store = os.environ["CCO_TORCH_STORE"]
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    if args.backend == "CCO":
        import cco.allocator  # noqa: F401  (registers "CCO")
    symm_mem.set_backend(args.backend)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # deprecated, still what the blog calls
        symm_mem.enable_symm_mem_for_group(dist.group.WORLD.group_name)
    job = Job(args.backend)
    job.only = args.only
    if args.part == "timeout":
        return part_timeout(job)
    if args.part == "shutdown":
        return part_shutdown(job)
    run_checks(job)
    if args.digests:
        line = json.dumps({"backend": job.backend, "world": job.world, "rank": job.rank,
                           "digests": job.digests}, sort_keys=True)
        with open(args.digests, "a") as f:
            f.write(line + "\n")
    failed = [0]
    counts = [None] * job.world
    dist.all_gather_object(counts, (job.passed, len(job.failed)))
    if job.rank == 0:
        passed, failed[0] = sum(c[0] for c in counts), sum(c[1] for c in counts)
        print(f"test_torch_backend[{job.backend}, {job.world} ranks]: {passed} passed, {failed[0]} failed",
              flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return 1 if job.failed else 0


if __name__ == "__main__":
    sys.exit(main())
