"""The blog's Triton example: a GDA put with a signal from a Triton kernel
(gda_put_kernel) and the peer's wait for that signal (gda_wait_kernel), as
written there but for the import line.

World rank 0 puts NBYTES of its window into rank 1's window; rank 1 waits
for signal 0 and checks the bytes. Rank 1 must have a GDA endpoint: on two
hosts (or two virtual ones) the default CROSSNODE connection gives it, on
one host the example asks for FULL.

    build/bin/ccorun -n 2 --virtual-hosts 2 python3 examples/ir/gda_put.py
    torchrun --standalone --nproc_per_node=2 examples/ir/gda_put.py

Needs torch and Triton; several ranks on one GPU need MPS.
"""
import os
import sys

# A module load waits for kernels already running (docs/triton.md).
os.environ.setdefault("CUDA_MODULE_LOADING", "EAGER")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from cco import CCODevCommRequirements, GDA_CONNECTION_CROSSNODE, GDA_CONNECTION_FULL  # noqa: E402
from cco.ir.triton import cco  # noqa: E402  (the blog: from mori.ir.triton import cco)
from cco.launch import finalize, init_communicator  # noqa: E402

NBYTES = 1 << 16


@triton.jit
def gda_put_kernel(
    dev_comm,
    window,
    peer: tl.constexpr,
    dst_off: tl.constexpr,
    src_off: tl.constexpr,
    nbytes: tl.constexpr,
):
    cco.Gda.put(
        dev_comm, peer,
        window, dst_off,
        window, src_off,
        nbytes,
        signal_op=cco.SignalOp.INC,
        signal_id=0,
        signal_val=1,
        coop=cco.CoopScope.BLOCK,
        thread_mode=cco.ThreadMode.INDEPENDENT,
    )
    cco.Gda.flush_peer(dev_comm, peer, coop=cco.CoopScope.BLOCK)


@triton.jit
def gda_wait_kernel(dev_comm):
    cco.Gda.wait_signal(dev_comm, 0, 1, coop=cco.CoopScope.BLOCK)


def main() -> int:
    import torch

    with init_communicator(per_rank_vmm=256 * 1024 * 1024) as comm:
        torch.cuda.set_device(comm.cuda_device)
        win = comm.register_window_alloc(NBYTES)
        reqs = CCODevCommRequirements()
        reqs.gda_connection_type = GDA_CONNECTION_CROSSNODE if comm.node_count > 1 else GDA_CONNECTION_FULL
        dc = comm.create_dev_comm(reqs)
        data = win.torch(torch.uint8, (NBYTES,))
        data.copy_((torch.arange(NBYTES, device="cuda") * 7 + 3 * comm.rank).to(torch.uint8))
        torch.cuda.synchronize()
        libs = cco.get_extern_libs()
        # Load both kernels before either runs: a load waits for the kernels
        # already running, a peer's too under MPS, and the receiver's wait
        # runs until the sender's put arrives.
        if comm.rank == 0:
            cco.preload(gda_put_kernel, dc.ptr, win.handle, peer=1, dst_off=0, src_off=0, nbytes=NBYTES,
                        extern_libs=libs, num_warps=1)
        elif comm.rank == 1:
            cco.preload(gda_wait_kernel, dc.ptr, extern_libs=libs, num_warps=1)
        comm.barrier()
        wrong = 0
        if comm.rank == 0:
            # sender
            gda_put_kernel[(1,)](
                dc.ptr, win.handle,
                peer=1, dst_off=0, src_off=0, nbytes=NBYTES,
                extern_libs=cco.get_extern_libs(), num_warps=1,
            )
            torch.cuda.synchronize()
        elif comm.rank == 1:
            # receiver
            gda_wait_kernel[(1,)](
                dc.ptr,
                extern_libs=cco.get_extern_libs(), num_warps=1,
            )
            torch.cuda.synchronize()
            want = (torch.arange(NBYTES, device="cuda") * 7).to(torch.uint8)  # rank 0's bytes
            wrong = int((data != want).sum())
        comm.barrier()
        ok = comm.size > 1 and wrong == 0
        role = {0: "sent", 1: f"received {NBYTES} bytes, {wrong} wrong"}.get(comm.rank, "idle")
        print(f"gda_put rank {comm.rank}/{comm.size}: {role}; {'OK' if ok else 'FAILED'}", flush=True)
    finalize()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
