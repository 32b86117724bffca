"""05: a tensor-parallel MLP block with the fused ops, sequence parallel
between blocks (Megatron style):

    h = ag_gemm(x_shard, w1)      all-gather of the tokens fused into fc1
    a = silu(h_gate) * h_up       on each rank's columns
    y = gemm_rs(a, w2)            fc2 fused with the reduce-scatter of its sum

x_shard is this rank's T/W tokens; w1 holds its 2*I/W columns of fc1 (gate
and up), w2 its I/W rows of fc2. Each rank checks y against the same block
computed on one GPU from every rank's inputs (seeded, so every rank can make
them). CUDA platform only (torch tensors on the GPU).

    build/bin/ccorun -n 4 -p python3 examples/python/05_tp_mlp.py [--tokens T] [--hidden H] [--inter I]
"""
import argparse
import os
import sys

try:
    import cco
except ImportError:  # running from a checkout without `pip install .`
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import cco

from cco.launch import finalize, init_communicator
from cco.ops import ag_gemm, gemm_rs


def weights(torch, rank, hidden, inter, world):
    g = torch.Generator().manual_seed(1000 + rank)
    w1 = torch.randn((hidden, 2 * inter // world), generator=g) / hidden ** 0.5
    w2 = torch.randn((inter // world, hidden), generator=g) / inter ** 0.5
    return w1, w2


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tokens", type=int, default=2048)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--inter", type=int, default=2816)
    p.add_argument("--transport", default="auto")
    args = p.parse_args()
    import torch
    import torch.nn.functional as F

    comm = init_communicator()
    torch.cuda.set_device(comm.cuda_device)
    world, me = comm.size, comm.rank
    T, H, I = args.tokens, args.hidden, args.inter
    x = torch.randn((T, H), generator=torch.Generator().manual_seed(7)).bfloat16()  # every rank's tokens
    shard = x[me * T // world:(me + 1) * T // world].cuda()
    w1, w2 = (w.bfloat16().cuda() for w in weights(torch, me, H, I, world))

    h = ag_gemm(shard, w1, comm, transport=args.transport)           # [T, 2I/W]
    gate, up = h.chunk(2, dim=1)
    act = (F.silu(gate.float()) * up.float()).bfloat16()
    y = gemm_rs(act, w2, comm, transport=args.transport).clone()    # [T/W, H]; a view of the workspace until cloned
    torch.cuda.synchronize()

    # The reference: the whole MLP on one GPU, every rank's weights.
    xf = x.float().cuda()
    total = torch.zeros((T, H), device="cuda")
    for r in range(world):
        r1, r2 = (w.bfloat16().float().cuda() for w in weights(torch, r, H, I, world))
        g, u = (xf @ r1).chunk(2, dim=1)
        total += (F.silu(g) * u).bfloat16().float() @ r2
    want = total[me * T // world:(me + 1) * T // world]
    err = (y.float() - want).abs().max().item() / want.abs().max().item()
    ok = err < 3e-2
    print(f"rank {me}: tensor-parallel MLP, {T} tokens, hidden {H}, intermediate {I} over {world} ranks: "
          f"relative error {err:.3g} ({cco.ops.choose_transport('ag_gemm', T, 2 * I // world, H, world)}) "
          f"{'ok' if ok else 'FAIL'}", flush=True)
    comm.destroy()
    finalize()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
