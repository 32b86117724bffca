"""The guide's Triton example, lsa_copy, as written there but for the import
line: LSA rank 0 of each host copies N uint32 from its window into LSA rank
1's window through peer pointers; rank 1 checks them.

    build/bin/ccorun -n 2 python3 examples/ir/lsa_copy.py
    torchrun --standalone --nproc_per_node=2 examples/ir/lsa_copy.py

Needs torch and Triton, and two ranks per host (several on one GPU need MPS).
"""
import os
import sys

# A module load waits for kernels already running (docs/triton.md): load
# every module when it is created, not at its first launch.
os.environ.setdefault("CUDA_MODULE_LOADING", "EAGER")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from cco import CCODevCommRequirements, GDA_CONNECTION_NONE, TEAM_LSA  # noqa: E402
from cco.ir.triton import cco  # noqa: E402  (the guide: from mori.ir.triton import cco)
from cco.launch import finalize, init_communicator  # noqa: E402


@triton.jit
def lsa_copy(dev_comm, win, peer: tl.constexpr, N: tl.constexpr):
    me = cco.DevComm.lsa_rank(dev_comm)
    src_addr = cco.Window.lsa_ptr(win, me, 0)
    dst_addr = cco.Window.lsa_ptr(win, peer, 0)
    src = src_addr.to(tl.pointer_type(tl.uint32), bitcast=True)
    dst = dst_addr.to(tl.pointer_type(tl.uint32), bitcast=True)
    offs = tl.arange(0, N)
    tl.store(dst + offs, tl.load(src + offs))


def main() -> int:
    import torch

    N = 256
    with init_communicator(per_rank_vmm=256 * 1024 * 1024) as comm:
        torch.cuda.set_device(comm.cuda_device)  # Triton launches on torch's device
        mem = comm.alloc_mem(4096)
        win = comm.register_window(mem.ptr, mem.size)
        reqs = CCODevCommRequirements()
        reqs.gda_connection_type = GDA_CONNECTION_NONE  # LSA only
        dc = comm.create_dev_comm(reqs)
        words = win.torch(torch.int32, (N,))
        words.copy_(torch.arange(N, dtype=torch.int32, device="cuda") + 1000 * comm.rank)
        torch.cuda.synchronize()
        comm.barrier()
        if comm.lsa_rank == 0 and comm.lsa_size > 1:
            lsa_copy[(1,)](dc.ptr, win.handle, peer=1, N=256, extern_libs=cco.get_extern_libs())
            torch.cuda.synchronize()
        comm.barrier()
        wrong = 0
        if comm.lsa_rank == 1:
            sender = comm.team_rank_to_world(TEAM_LSA, 0)
            want = torch.arange(N, dtype=torch.int32, device="cuda") + 1000 * sender
            wrong = int((words != want).sum())
        ok = comm.lsa_size > 1 and wrong == 0
        print(f"lsa_copy rank {comm.rank}/{comm.size}: "
              f"{'received ' + str(N) + ' words, ' + str(wrong) + ' wrong' if comm.lsa_rank == 1 else 'sent'}; "
              f"{'OK' if ok else 'FAILED'}", flush=True)
        comm.barrier()
    finalize()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
