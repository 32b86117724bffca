"""01: the guide's Quick Reference as a program (full lifecycle, no kernel).

Rank 0 mints the unique id, every rank receives it over the launcher's own
channel, the ranks create a communicator, allocate symmetric memory,
register a window over it, create a device communicator and meet at a host
barrier. Leaving the `with` block releases everything in reverse order.

Runs under any launcher; it picks by environment:

    build/bin/ccorun -n 4 python3 examples/python/01_barrier.py          # id from CCO_UNIQUE_ID
    mpirun -np 4 python3 examples/python/01_barrier.py                    # mpi4py bcast
    torchrun --standalone --nproc_per_node=4 examples/python/01_barrier.py  # gloo broadcast
    python3 examples/python/01_barrier.py                                 # one rank

Needs nothing but the cco package; under mpirun it needs mpi4py (and
--allow-run-as-root when run as root), under torchrun torch. Prints one line
per rank and exits 0 when every check holds.
"""
import os
import sys
import time

try:
    import cco  # noqa: F401
except ImportError:  # running from a checkout without `pip install .`
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

from cco import CCODevCommRequirements, Communicator, GDA_CONNECTION_NONE, UniqueId
from cco.launch import detect


def get_rank_and_uid():
    """(nranks, rank, uid): rank 0 mints the id, the launcher broadcasts it."""
    launcher = detect()
    if launcher == "ccorun":
        # ccorun minted the id and put it in every rank's environment.
        env = os.environ
        return int(env["CCO_NRANKS"]), int(env["CCO_RANK"]), UniqueId.from_env(), launcher
    if launcher == "mpi":
        from mpi4py import MPI

        comm_mpi = MPI.COMM_WORLD
        rank, nranks = comm_mpi.Get_rank(), comm_mpi.Get_size()
        uid = Communicator.get_unique_id() if rank == 0 else None
        uid = comm_mpi.bcast(uid, root=0)  # UniqueId pickles
        return nranks, rank, uid, launcher
    if launcher == "torchrun":
        import torch.distributed as dist

        dist.init_process_group("gloo")
        rank, nranks = dist.get_rank(), dist.get_world_size()
        box = [Communicator.get_unique_id() if rank == 0 else None]
        dist.broadcast_object_list(box, src=0)
        return nranks, rank, box[0], launcher
    return 1, 0, Communicator.get_unique_id(), launcher


def main() -> int:
    nranks, rank, uid, launcher = get_rank_and_uid()
    with Communicator.init(nranks, rank, uid, per_rank_vmm=256 * 1024 * 1024) as comm:
        mem = comm.alloc_mem(4096)  # AllocatedMemory: .ptr, .size
        win = comm.register_window(mem.ptr, mem.size)  # RegisteredWindow: .handle, .local_ptr
        reqs = CCODevCommRequirements()
        reqs.gda_connection_type = GDA_CONNECTION_NONE
        reqs.lsa_barrier_count = 1
        dc = comm.create_dev_comm(reqs)  # .ptr, .rank, .world_size, .lsa_size, .lsa_rank
        comm.barrier()

        checks = [
            dc.rank == comm.rank == rank,
            dc.world_size == comm.size == nranks,
            dc.lsa_rank == comm.lsa_rank and dc.lsa_size == comm.lsa_size,
            win.local_ptr == mem.ptr and win.handle != 0 and dc.ptr != 0,
            comm.in_flat_va(mem.ptr),
        ]
        iters = 200
        t0 = time.perf_counter()
        for _ in range(iters):
            comm.barrier()
        us = (time.perf_counter() - t0) / iters * 1e6
        # Every rank learns every rank's verdict, so all exit alike.
        verdicts = comm.allgather(bytes([all(checks)]))
        ok = all(v == b"\x01" for v in verdicts)
        # One write per line: the ranks share ccorun's stdout, and print() writes the text
        # and its newline apart when Python runs unbuffered, so lines of ranks could join.
        sys.stdout.write(f"01_barrier rank {rank}/{nranks} ({launcher}, {comm.platform}, lsa {comm.lsa_rank}/"
                         f"{comm.lsa_size}): window {win.size} B, host barrier {us:.1f} us; "
                         f"{'ok' if ok else 'FAILED ' + str(checks)}" "\n")
        sys.stdout.flush()
    # Leaving the block released dc, win and mem (in that order), then comm.
    assert not (win.alive or mem.alive or dc.alive or comm.alive)
    if launcher == "torchrun":
        import torch.distributed as dist

        dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
