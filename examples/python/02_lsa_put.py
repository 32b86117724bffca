"""02: an LSA put through peer pointers.

Every rank owns a window laid out as [src: BYTES][dst: lsa_size * BYTES].
Each rank fills src with a pattern of its own, stores it into block
`lsa_rank` of every LSA peer's dst (its own included), meets the peers at
a barrier, and checks that block p of its dst holds peer p's pattern.

- cuda platform: a CUDA C kernel compiled at run time (cupy.RawKernel via
  cco.cuda, NVRTC) does the stores through ccoGetLsaPeerPtr on the window
  handle, then an LSA barrier of the device communicator (ccoLsaBarrierSync)
  makes them visible: no host round trip.
- host platform (no GPU, CI): numpy views of the peers' windows
  (win.peer(p).numpy()) take the stores, and comm.barrier() orders them.

Needs numpy, and cupy on a GPU. mpirun needs mpi4py, and --allow-run-as-root
when run as root.

    build/bin/ccorun -n 4 python3 examples/python/02_lsa_put.py [--bytes N] [--iters N]
    mpirun -np 4 python3 examples/python/02_lsa_put.py
"""
import argparse
import os
import sys

try:
    import cco
except ImportError:  # running from a checkout without `pip install .`
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import cco
import cco.cuda  # NVRTC options for kernels that include cco/cco_device.h

from cco import CCODevCommRequirements, GDA_CONNECTION_NONE, TEAM_LSA
from cco.launch import finalize, init_communicator


def need(module: str, install: str) -> None:
    """Exits with a line saying what to install when `module` is missing."""
    try:
        __import__(module)
    except ImportError:
        sys.exit(f"02_lsa_put: needs {module}, which is not installed here ({install})")


KERNEL = r"""
#include "cco/cco_device.h"

// One block: its threads copy this rank's src into block lsaRank of every
// LSA peer's dst, starting with the next peer so the ranks spread their
// stores, then the block meets the peers at LSA barrier 0.
extern "C" __global__ void lsa_put(const ccoDevComm* dcp, ccoWindow_t win,
                                   unsigned long long bytes, int* status) {
  ccoDevComm dc = *dcp;
  ccoWindowDevice w = *win;
  const unsigned long long* src = (const unsigned long long*)ccoGetLocalPtr(&w, 0);
  unsigned long long words = bytes / 8;
  for (int k = 0; k < w.lsaSize; k++) {
    int peer = (w.lsaRank + 1 + k) % w.lsaSize;
    unsigned long long* dst = (unsigned long long*)ccoGetLsaPeerPtr(
        &w, peer, bytes + (unsigned long long)w.lsaRank * bytes);
    for (unsigned long long i = threadIdx.x; i < words; i += blockDim.x) dst[i] = src[i];
  }
  ccoLsaBarrierSession b = ccoLsaBarrierSessionInit(&dc, 0, ccoCoopBlock);
  ccoDevStatus_t st = ccoLsaBarrierSync(&b);  // peers' stores are visible after this
  ccoLsaBarrierSessionEnd(&b);
  if (threadIdx.x == 0) *status = (int)st;
}
"""


def pattern(np, world_rank: int, it: int, nbytes: int):
    """Bytes rank `world_rank` sends in iteration `it`."""
    return ((np.arange(nbytes, dtype=np.uint32) * 7 + world_rank * 31 + it * 3) & 0xFF).astype(np.uint8)


def run_cuda(comm, win, dc, nbytes: int, iters: int) -> int:
    need("cupy", "pip install cupy-cuda12x, or the wheel of your CUDA version")
    import cupy as cp
    import numpy as np

    kernel = cco.cuda.raw_kernel(KERNEL, "lsa_put")
    kernel.compile()  # NVRTC once, up front
    status = cp.zeros(1, dtype=cp.int32)
    src = win.cupy("uint8", nbytes)  # a cupy view of this rank's src, no copy
    dst = win.cupy("uint8", comm.lsa_size * nbytes, offset=nbytes)
    wrong = 0
    for it in range(iters):
        src[:] = cp.asarray(pattern(np, comm.rank, it, nbytes))
        cp.cuda.Device().synchronize()
        # No barrier before the put: a rank reads only its own src, and peers
        # write only into its dst, which the barrier below covers.
        kernel((1,), (256,), (np.uint64(dc.ptr), np.uint64(win.handle), np.uint64(nbytes), status))
        cp.cuda.Device().synchronize()
        if int(status[0]) != 0:
            print(f"rank {comm.rank}: device barrier status {int(status[0])}", flush=True)
            return 1
        got = cp.asnumpy(dst).reshape(comm.lsa_size, nbytes)
        for p in range(comm.lsa_size):
            world = comm.team_rank_to_world(TEAM_LSA, p)
            wrong += int((got[p] != pattern(np, world, it, nbytes)).sum())
        comm.barrier()  # nobody starts the next put while a peer still checks this one
    return wrong


def run_host(comm, win, nbytes: int, iters: int) -> int:
    import numpy as np

    src = win.numpy("uint8", nbytes)
    dst = win.numpy("uint8", (comm.lsa_size, nbytes), offset=nbytes)
    # Each LSA peer's dst, as a numpy view of its memory (mapped here).
    peers = []
    for p in range(comm.lsa_size):
        world = comm.team_rank_to_world(TEAM_LSA, p)
        peers.append(win.peer(world).numpy("uint8", nbytes, offset=nbytes + comm.lsa_rank * nbytes))
    wrong = 0
    for it in range(iters):
        src[:] = pattern(np, comm.rank, it, nbytes)
        for k in range(comm.lsa_size):
            peers[(comm.lsa_rank + 1 + k) % comm.lsa_size][:] = src  # the put
        comm.barrier()  # every peer's stores are done (and visible) after this
        for p in range(comm.lsa_size):
            wrong += int((dst[p] != pattern(np, comm.team_rank_to_world(TEAM_LSA, p), it, nbytes)).sum())
        comm.barrier()
    return wrong


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bytes", type=int, default=1 << 16, help="bytes each rank puts (multiple of 8)")
    ap.add_argument("--iters", type=int, default=3)
    args = ap.parse_args()
    need("numpy", "pip install numpy")
    nbytes = (args.bytes + 7) // 8 * 8
    with init_communicator(per_rank_vmm=256 << 20) as comm:
        win = comm.register_window_alloc(nbytes * (1 + comm.lsa_size))
        reqs = CCODevCommRequirements(gda_connection_type=GDA_CONNECTION_NONE, lsa_barrier_count=1)
        dc = comm.create_dev_comm(reqs)
        if comm.platform == "cuda":
            wrong = run_cuda(comm, win, dc, nbytes, args.iters)
        else:
            wrong = run_host(comm, win, nbytes, args.iters)
        verdicts = comm.allgather(wrong.to_bytes(8, "little"))
        total = sum(int.from_bytes(v, "little") for v in verdicts)
        # One write per line: the ranks share ccorun's stdout, and print() writes the text
        # and its newline apart when Python runs unbuffered, so lines of ranks could join.
        sys.stdout.write(f"02_lsa_put rank {comm.rank}/{comm.size} ({comm.platform}): {nbytes} B to "
                         f"{comm.lsa_size} LSA peers x {args.iters}: {wrong} wrong here, {total} in the job; "
                         f"{'ok' if total == 0 else 'FAILED'}" "\n")
        sys.stdout.flush()
    finalize()
    return 0 if total == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
