"""Triton kernels over LSA, SDMA and GDA (the guide's test_triton_cco.py).

Every rank owns a window [src: NBYTES][dst: world_size x NBYTES] and fills
src with a pattern of its own; per round, one Triton kernel delivers it into
slot `rank` of its peers' dst, and the host checks what arrived.

- lsa: stores through LSA peer pointers into every LSA peer, then an LSA
  barrier (block scope): the peers' stores are visible after it;
- sdma: copy-engine puts to every other LSA peer with a remote signal, a
  wait for each peer's signal, then quiet;
- gda: a put with a signal increment to the next rank of the ring (the rail
  team over hosts, every rank on one host), a wait for the previous one's
  signal, then a flush.

    build/bin/ccorun -n 4 python3 examples/ir/test_triton_cco.py --transport lsa
    build/bin/ccorun -n 4 python3 examples/ir/test_triton_cco.py --transport sdma
    build/bin/ccorun -n 4 --virtual-hosts 2 python3 examples/ir/test_triton_cco.py --transport gda
    torchrun --standalone --nproc_per_node=2 examples/ir/test_triton_cco.py --transport lsa

Needs torch and Triton; several ranks on one GPU need MPS. Prints one line
per rank ending in OK or FAILED.
"""
import argparse
import os
import sys

# A module load waits for kernels already running (docs/triton.md).
os.environ.setdefault("CUDA_MODULE_LOADING", "EAGER")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from cco import (CCODevCommRequirements, GDA_CONNECTION_CROSSNODE, GDA_CONNECTION_FULL,  # noqa: E402
                 GDA_CONNECTION_NONE, TEAM_LSA, TEAM_RAIL, TEAM_WORLD)
from cco.ir.triton import cco  # noqa: E402
from cco.launch import finalize, init_communicator  # noqa: E402

NBYTES = 1 << 16
WORDS = NBYTES // 4
TIMEOUT_NS = tl.constexpr(60 * 10**9)  # a lost peer fails the round instead of hanging it


@triton.jit
def lsa_put(dev_comm, win, status, WORDS: tl.constexpr, BLOCK: tl.constexpr):
    me = cco.DevComm.lsa_rank(dev_comm)
    n = cco.DevComm.lsa_size(dev_comm)
    rank = cco.DevComm.rank(dev_comm)
    src = cco.Window.local_ptr(win, 0).to(tl.pointer_type(tl.int32), bitcast=True)
    for k in range(0, n):
        peer = (me + 1 + k) % n  # the ranks start at different peers
        dst_off = (1 + rank) * WORDS * 4
        dst = cco.Window.lsa_ptr(win, peer, dst_off).to(tl.pointer_type(tl.int32), bitcast=True)
        for i in range(0, WORDS, BLOCK):
            offs = i + tl.arange(0, BLOCK)
            tl.store(dst + offs, tl.load(src + offs))
    st = cco.LsaBarrier.sync(dev_comm, 0, coop=cco.CoopScope.BLOCK, timeout_ns=TIMEOUT_NS)
    tl.store(status, st)


@triton.jit
def sdma_put(dev_comm, win, status, expected, NBYTES: tl.constexpr):
    me = cco.DevComm.lsa_rank(dev_comm)
    n = cco.DevComm.lsa_size(dev_comm)
    rank = cco.DevComm.rank(dev_comm)
    bad = tl.cast(0, tl.int32)
    for k in range(1, n):
        peer = (me + k) % n
        st = cco.Sdma.put(dev_comm, peer, win, (1 + rank) * NBYTES, win, 0, NBYTES, queue=0,
                          signal=cco.SdmaSignal.REMOTE, coop=cco.CoopScope.BLOCK)
        bad = tl.maximum(bad, st)
    for k in range(1, n):
        src = (me + n - k) % n
        st = cco.Sdma.wait_signal(dev_comm, src, expected, queue=0, coop=cco.CoopScope.BLOCK,
                                  timeout_ns=TIMEOUT_NS)
        bad = tl.maximum(bad, st)
    for k in range(1, n):
        bad = tl.maximum(bad, cco.Sdma.quiet(dev_comm, (me + k) % n, coop=cco.CoopScope.BLOCK))
    tl.store(status, bad)


@triton.jit
def gda_ring(dev_comm, win, status, expected, TEAM: tl.constexpr, NBYTES: tl.constexpr):
    size = cco.DevComm.team_size(dev_comm, TEAM)
    me = cco.DevComm.team_rank(dev_comm, TEAM)
    rank = cco.DevComm.rank(dev_comm)
    nxt = cco.DevComm.team_rank_to_world(dev_comm, TEAM, (me + 1) % size)
    st = cco.Gda.put(dev_comm, nxt, win, (1 + rank) * NBYTES, win, 0, NBYTES, signal_op=cco.SignalOp.INC,
                     signal_id=0, coop=cco.CoopScope.BLOCK, thread_mode=cco.ThreadMode.AGGREGATE)
    bad = st
    st = cco.Gda.wait_signal(dev_comm, 0, expected, coop=cco.CoopScope.BLOCK, timeout_ns=TIMEOUT_NS)
    bad = tl.maximum(bad, st)
    bad = tl.maximum(bad, cco.Gda.flush(dev_comm, coop=cco.CoopScope.BLOCK))
    tl.store(status, bad)


def pattern(rank: int, it: int):
    import torch

    return torch.arange(WORDS, dtype=torch.int32, device="cuda") * 3 + rank * 100003 + it * 7


def main() -> int:
    import torch

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--transport", choices=("lsa", "sdma", "gda"), default="lsa")
    ap.add_argument("--iters", type=int, default=4)
    args = ap.parse_args()
    with init_communicator(per_rank_vmm=256 * 1024 * 1024) as comm:
        torch.cuda.set_device(comm.cuda_device)
        reqs = CCODevCommRequirements(gda_connection_type=GDA_CONNECTION_NONE)
        team = TEAM_LSA
        if args.transport == "gda":
            multi = comm.node_count > 1
            reqs.gda_connection_type = GDA_CONNECTION_CROSSNODE if multi else GDA_CONNECTION_FULL
            reqs.gda_signal_count = 1
            team = TEAM_RAIL if multi else TEAM_WORLD
        win = comm.register_window_alloc(NBYTES * (1 + comm.size))
        dc = comm.create_dev_comm(reqs)
        src = win.torch(torch.int32, (WORDS,))
        dst = win.torch(torch.int32, (comm.size, WORDS), offset=NBYTES)
        status = torch.zeros(1, dtype=torch.int32, device="cuda")
        libs = cco.get_extern_libs()
        if args.transport == "lsa":
            kernel, consts = lsa_put, dict(WORDS=WORDS, BLOCK=1024)
            args_of = lambda it: (dc.ptr, win.handle, status)  # noqa: E731
            senders = [comm.team_rank_to_world(TEAM_LSA, p) for p in range(comm.lsa_size)]
        elif args.transport == "sdma":
            kernel, consts = sdma_put, dict(NBYTES=NBYTES)
            args_of = lambda it: (dc.ptr, win.handle, status, it + 1)  # noqa: E731
            senders = [comm.team_rank_to_world(TEAM_LSA, p) for p in range(comm.lsa_size) if p != comm.lsa_rank]
        else:
            kernel, consts = gda_ring, dict(TEAM=team, NBYTES=NBYTES)
            args_of = lambda it: (dc.ptr, win.handle, status, it + 1)  # noqa: E731
            me = comm.team(team)
            senders = [comm.team_rank_to_world(team, (me.rank + me.n_ranks - 1) % me.n_ranks)]
        # Load the kernel before any rank's kernel waits (docs/triton.md).
        cco.preload(kernel, *args_of(0), extern_libs=libs, **consts)
        wrong = bad = 0
        for it in range(args.iters):
            src.copy_(pattern(comm.rank, it))
            torch.cuda.synchronize()
            comm.barrier()  # every peer is done reading the last round
            kernel[(1,)](*args_of(it), extern_libs=libs, **consts)
            torch.cuda.synchronize()
            bad += int(status.item()) != 0
            for s in senders:
                wrong += int((dst[s] != pattern(s, it)).sum())
        comm.barrier()
        ok = bad == 0 and wrong == 0 and len(senders) > 0
        print(f"test_triton_cco --transport {args.transport} rank {comm.rank}/{comm.size}: {args.iters} rounds "
              f"from ranks {senders}: {bad} bad statuses, {wrong} wrong words; {'OK' if ok else 'FAILED'}",
              flush=True)
    finalize()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
