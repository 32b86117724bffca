"""The blog's "torch.SymmetricMemory x MORI" example on cco: backend "CCO"
registered by one import, then a Triton kernel pushes straight into the
peers' tensors through ``hdl.buffer_ptrs_dev``.

    torchrun --standalone --nproc-per-node 2 examples/python/torch_symm_mem_push.py
    (SYMM_MEM_BACKEND=NVSHMEM runs the same code on torch's NVSHMEM backend)

The part between the two rulers is the blog's code; it differs in the import
line and the backend's name, and in two lines marked "not the blog's"
(several ranks may share a GPU; what to send). Around it: the setup the
blog leaves out (torchrun's variables) and a check of what arrived.
"""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))  # the checkout's package

local_rank = int(os.environ["LOCAL_RANK"])
world_size = int(os.environ["WORLD_SIZE"])
rank_id = int(os.environ["RANK"])
chunk_elems = 1024
BACKEND = os.environ.get("SYMM_MEM_BACKEND", "CCO")

# ---------------------------------------------------------------- the blog
import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
import triton
import triton.language as tl
import cco.allocator  # noqa: F401  (importing registers the "CCO" backend)

# -- Setup ---------------------------------------------------------
dist.init_process_group("gloo")
local_rank %= torch.cuda.device_count()  # (not the blog's) ranks may share a GPU under MPS
torch.cuda.set_device(local_rank)
device = torch.device("cuda", local_rank)

symm_mem.set_backend(BACKEND)
symm_mem.enable_symm_mem_for_group(dist.group.WORLD.group_name)

# -- Allocate symmetric memory -------------------------------------
# recv is peer-writable; send is ordinary local memory.
recv = symm_mem.empty(world_size * chunk_elems, dtype=torch.int32, device=device)
send = torch.empty_like(recv)

# Rendezvous exchanges physical handles and returns peer pointers.
hdl = symm_mem.rendezvous(recv, dist.group.WORLD.group_name)


# -- Launch a Triton kernel that pushes directly into peer windows --
@triton.jit
def push_kernel(send_ptr, peer_ptrs, chunk_elems, rank_id, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    peer = pid  # one program per peer
    # Load the peer's base pointer from the device-side pointer array.
    dst = tl.load(peer_ptrs.to(tl.pointer_type(tl.uint64)) + peer)
    dst = dst.to(tl.pointer_type(tl.int32)) + rank_id * chunk_elems
    src = send_ptr + peer * chunk_elems
    offs = tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < chunk_elems), mask=offs < chunk_elems)


# (not the blog's) what each rank sends to peer p: 1000 * rank + p
send.copy_(torch.arange(world_size, device=device, dtype=torch.int32).repeat_interleave(chunk_elems)
           + 1000 * rank_id)
recv.fill_(-1)
torch.cuda.synchronize()
dist.barrier()

push_kernel[(world_size,)](send, hdl.buffer_ptrs_dev, chunk_elems, rank_id, BLOCK=1024)
# ---------------------------------------------------------- end of the blog

torch.cuda.synchronize()
dist.barrier()
expect = (torch.arange(world_size, device=device, dtype=torch.int32) * 1000 + rank_id).repeat_interleave(
    chunk_elems)
wrong = int((recv != expect).sum().item())
# One write per line: the ranks share ccorun's stdout, and print() writes the text
# and its newline apart when Python runs unbuffered, so lines of ranks could join.
sys.stdout.write(f"torch_symm_mem_push [{BACKEND}] rank {rank_id}/{world_size}: {wrong} wrong elements" "\n")
sys.stdout.flush()
dist.barrier()
dist.destroy_process_group()
sys.exit(1 if wrong else 0)
