"""06: GEMM -> all-to-all, fused: each rank multiplies its M rows and block d
of the product (M/W rows) goes to rank d, tile by tile from the GEMM's
epilogue; rank d receives block d of every rank's product, in rank order
(the layout of cco's all_to_all). Each rank checks what it received against
the products computed from every rank's seeded inputs. CUDA platform only.

    build/bin/ccorun -n 4 -p python3 examples/python/06_gemm_a2a.py [--rows M] [--k K] [--n N]
"""
import argparse
import os
import sys

try:
    import cco  # noqa: F401
except ImportError:  # running from a checkout without `pip install .`
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

from cco.launch import finalize, init_communicator
from cco.ops import gemm_a2a


def inputs(torch, rank, rows, k, n):
    g = torch.Generator().manual_seed(500 + rank)
    return (torch.randn((rows, k), generator=g) / k ** 0.5).bfloat16(), torch.randn((k, n), generator=g).bfloat16()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=4096)
    p.add_argument("--k", type=int, default=2048)
    p.add_argument("--n", type=int, default=1024)
    p.add_argument("--transport", default="auto")
    args = p.parse_args()
    import torch

    comm = init_communicator()
    torch.cuda.set_device(comm.cuda_device)
    world, me = comm.size, comm.rank
    M, K, N = args.rows, args.k, args.n
    a, b = (t.cuda() for t in inputs(torch, me, M, K, N))
    out = gemm_a2a(a, b, comm, transport=args.transport)      # [M, N]: block s from rank s
    torch.cuda.synchronize()
    blk = M // world
    want = torch.cat([(x.float().cuda() @ y.float().cuda())[me * blk:(me + 1) * blk]
                      for x, y in (inputs(torch, s, M, K, N) for s in range(world))])
    err = (out.float() - want).abs().max().item() / want.abs().max().item()
    ok = err < 2e-2
    print(f"rank {me}: gemm_a2a [{M}, {K}] @ [{K}, {N}] over {world} ranks: relative error {err:.3g} "
          f"{'ok' if ok else 'FAIL'}", flush=True)
    comm.destroy()
    finalize()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
