"""03: a one-shot all-reduce (sum) over LSA, with barriers.

Each rank writes its input into its window; after a barrier every rank
reads every LSA peer's input straight from the peer's memory (peer
pointers, no copies into staging buffers), sums, and writes the result
locally; a second barrier keeps a rank from overwriting its input while a
peer may still read it. One shot: each rank moves (lsa_size - 1) x N
elements, the latency-optimal choice for small messages.

- cuda platform: one kernel (cupy.RawKernel via cco.cuda, NVRTC) with an
  LSA barrier session per block (ccoLsaBarrierSync) before and after the
  reads; no host round trip inside the all-reduce.
- host platform (no GPU, CI): numpy views of the peers' windows and
  comm.barrier().

The sum is checked against the expected values on every rank. With ranks
on several hosts it reduces within each host (the LSA team). Needs numpy, and
cupy on a GPU.

    build/bin/ccorun -n 4 python3 examples/python/03_lsa_allreduce.py [--count N] [--iters N]
"""
import argparse
import os
import sys
import time

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
        sys.exit(f"03_lsa_allreduce: needs {module}, which is not installed here ({install})")


BLOCKS = 8  # one LSA barrier per block

KERNEL = r"""
#include "cco/cco_device.h"

// Block b uses LSA barrier b. Inputs were written before the launch (on the
// stream), so the first barrier's release publishes them to the peers.
extern "C" __global__ void lsa_allreduce(const ccoDevComm* dcp, ccoWindow_t win,
                                         float* out, unsigned long long n, int* status) {
  ccoDevComm dc = *dcp;
  ccoWindowDevice w = *win;
  ccoLsaBarrierSession b = ccoLsaBarrierSessionInit(&dc, blockIdx.x, ccoCoopBlock);
  ccoDevStatus_t st = ccoLsaBarrierSync(&b);  // every peer's input is ready
  if (st == ccoDevSuccess) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
      float sum = 0.f;
      for (int k = 0; k < w.lsaSize; k++) {
        int peer = (w.lsaRank + k) % w.lsaSize;  // spread the loads over the peers
        sum += ((const float*)ccoGetLsaPeerPtr(&w, peer, 0))[i];
      }
      out[i] = sum;
    }
    st = ccoLsaBarrierSync(&b);  // every peer is done reading this rank's input
  }
  ccoLsaBarrierSessionEnd(&b);
  if (threadIdx.x == 0 && st != ccoDevSuccess) *status = (int)st;
}
"""


def rank_input(np, world_rank: int, it: int, count: int):
    """Small integers, so float32 sums are exact."""
    return ((np.arange(count) % 13) + world_rank * 3 + it).astype(np.float32)


def expected(np, comm, it: int, count: int):
    peers = [comm.team_rank_to_world(TEAM_LSA, p) for p in range(comm.lsa_size)]
    return sum(rank_input(np, r, it, count) for r in peers)


def run_cuda(comm, win, dc, count: int, iters: int):
    need("cupy", "pip install cupy-cuda12x, or the wheel of your CUDA version")
    import cupy as cp
    import numpy as np

    kernel = cco.cuda.raw_kernel(KERNEL, "lsa_allreduce")
    inp = win.cupy("float32", count)  # this rank's input: a cupy view of its window
    out = cp.empty(count, dtype=cp.float32)
    status = cp.zeros(1, dtype=cp.int32)
    kernel.compile()  # NVRTC now, not inside the first timed call
    wrong, seconds = 0, 0.0
    for it in range(iters):
        inp[:] = cp.asarray(rank_input(np, comm.rank, it, count))
        cp.cuda.Device().synchronize()
        comm.barrier()  # launch together: the time is then the all-reduce, not the skew
        t0 = time.perf_counter()
        kernel((BLOCKS,), (512,), (np.uint64(dc.ptr), np.uint64(win.handle), out, np.uint64(count), status))
        cp.cuda.Device().synchronize()
        seconds += time.perf_counter() - t0
        if int(status[0]) != 0:
            raise RuntimeError(f"device barrier status {int(status[0])}")
        wrong += int((cp.asnumpy(out) != expected(np, comm, it, count)).sum())
    return wrong, seconds / iters


def run_host(comm, win, count: int, iters: int):
    import numpy as np

    inp = win.numpy("float32", count)
    peers = [win.peer(comm.team_rank_to_world(TEAM_LSA, p)).numpy("float32", count)
             for p in range(comm.lsa_size)]
    wrong, seconds = 0, 0.0
    for it in range(iters):
        inp[:] = rank_input(np, comm.rank, it, count)
        t0 = time.perf_counter()
        comm.barrier()  # every peer's input is ready
        out = np.zeros(count, dtype=np.float32)
        for k in range(comm.lsa_size):
            out += peers[(comm.lsa_rank + k) % comm.lsa_size]  # reads the peer's memory
        comm.barrier()  # every peer is done reading this rank's input
        seconds += time.perf_counter() - t0
        wrong += int((out != expected(np, comm, it, count)).sum())
    return wrong, seconds / iters


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=1 << 16, help="float32 elements")
    ap.add_argument("--iters", type=int, default=5)
    args = ap.parse_args()
    need("numpy", "pip install numpy")
    with init_communicator(per_rank_vmm=256 << 20) as comm:
        win = comm.register_window_alloc(args.count * 4)
        reqs = CCODevCommRequirements(gda_connection_type=GDA_CONNECTION_NONE, lsa_barrier_count=BLOCKS)
        dc = comm.create_dev_comm(reqs)
        if comm.platform == "cuda":
            wrong, seconds = run_cuda(comm, win, dc, args.count, args.iters)
        else:
            wrong, seconds = run_host(comm, win, args.count, args.iters)
        total = sum(int.from_bytes(v, "little") for v in comm.allgather(wrong.to_bytes(8, "little")))
        # One write per line: the ranks share ccorun's stdout, and print() writes the text
        # and its newline apart when Python runs unbuffered, so lines of ranks could join.
        sys.stdout.write(f"03_lsa_allreduce rank {comm.rank}/{comm.size} ({comm.platform}): {args.count} floats "
                         f"over {comm.lsa_size} LSA ranks, {seconds * 1e6:.0f} us per all-reduce; {wrong} wrong "
                         f"here, {total} in the job; {'ok' if total == 0 else 'FAILED'}" "\n")
        sys.stdout.flush()
    finalize()
    return 0 if total == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
