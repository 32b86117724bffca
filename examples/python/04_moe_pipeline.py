"""04: the blog's zero-copy MoE pipeline, dispatch -> expert -> combine.

Every intermediate tensor is a view of the op's arena (symmetric memory):
dispatch writes each token straight into the receiving ranks' arenas, the
expert reads them there and writes its rows into op.combine_in_view(), and
combine reads them back from the owners. No staging buffer, no extra copy:
op.combine_copies stays 0 (it counts combines whose input was not the view).

- cuda platform: torch tensors on the GPU, bf16.
- host platform (no GPU, CI): numpy arrays (bf16 rows as uint16).

The "expert" scales its rows by (rank + 1); each rank checks that every
token comes back as its row times the sum of (d + 1) over the ranks d it
went to, with the weights of its kept choices. Needs numpy, and torch on a
GPU.

    build/bin/ccorun -n 4 python3 examples/python/04_moe_pipeline.py [--tokens N] [--hidden H] [--iters N]
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
from cco.ops import EpDispatchCombineConfig, EpDispatchCombineOp

import numpy as np


def bf16_bits(values):
    """bf16 bits of float32 values that bf16 holds exactly (small integers here)."""
    return (np.asarray(values, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=64, help="tokens per rank")
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--experts-per-rank", type=int, default=4)
    parser.add_argument("--topk", type=int, default=4)
    parser.add_argument("--iters", type=int, default=3)
    args = parser.parse_args()
    with init_communicator(per_rank_vmm=1 << 30) as comm:
        gpu = comm.platform == "cuda"
        if gpu:
            import torch

            torch.cuda.set_device(comm.cuda_device)
        n_experts = comm.size * args.experts_per_rank
        config = EpDispatchCombineConfig(hidden_dim=args.hidden, max_num_inp_token_per_rank=args.tokens,
                                         num_experts_per_rank=args.experts_per_rank, num_experts_per_token=args.topk)
        op = EpDispatchCombineOp(config, comm)
        rng = np.random.default_rng(comm.rank)
        bad = 0
        for _ in range(args.iters):
            x = rng.integers(-8, 9, size=(args.tokens, args.hidden)).astype(np.float32)
            w = rng.random((args.tokens, args.topk), dtype=np.float32)
            idx = np.stack([rng.choice(n_experts, args.topk, replace=False) for _ in range(args.tokens)]).astype(np.int32)
            if gpu:
                tokens = torch.from_numpy(x).to("cuda", torch.bfloat16)
                weights, indices = torch.from_numpy(w).cuda(), torch.from_numpy(idx).cuda()
            else:
                tokens, weights, indices = bf16_bits(x), w, idx
            # Step 1: dispatch. recv_x is a view of this rank's arena, written by the senders.
            recv_x, recv_w, recv_s, recv_i, total_recv, routing = op.dispatch(tokens, weights, None, indices,
                                                                               return_routing=True)
            if gpu:
                torch.cuda.synchronize()
            total = int(total_recv[0])
            # Step 2: the expert, reading the arena and writing into combine_in_view (no copy).
            expert_input = recv_x[:total]
            expert_output = op.combine_in_view()[:total]
            if gpu:
                torch.mul(expert_input, comm.rank + 1, out=expert_output)
            else:
                expert_output[:] = bf16_bits(
                    (expert_input.astype(np.uint32) << 16).view(np.float32) * (comm.rank + 1))
            # Step 3: combine, gathering every token's rows from the ranks that hold them.
            out, out_weights = op.combine(expert_output, weights, routing=routing)
            if gpu:
                torch.cuda.synchronize()
                out, out_weights = out.float().cpu().numpy(), out_weights.cpu().numpy()
            else:
                out = (out.astype(np.uint32) << 16).view(np.float32)
            owners = idx // args.experts_per_rank
            factor = np.array([sum(d + 1 for d in set(row.tolist())) for row in owners], dtype=np.float32)
            bad += int((out != x * factor[:, None]).sum()) + int((out_weights != w).sum())
            comm.barrier()
        copies = op.combine_copies
        op.release()
        where = "cuda" if gpu else "host"
        print(f"rank {comm.rank}: {args.iters} rounds of {args.tokens} tokens, {bad} wrong, {copies} copies "
              f"({where}) " + ("ok" if bad == 0 and copies == 0 else "FAILED"), flush=True)
    finalize()
    return 0 if bad == 0 and copies == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
