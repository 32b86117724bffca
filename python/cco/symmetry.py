"""Checking that memory is symmetric: the same blocks at the same offsets of
every rank's slot, so that a peer's copy of a block is where the formula
says it is.

Memory that torch's caching allocator hands out (``cco.torch.SymmetricMemPool``)
is symmetric only while every rank allocates and frees in the same order,
and torch frees tensors when they are collected, which can differ by rank.
Nothing would notice: a peer pointer into a block placed differently on
another rank reads or writes the wrong memory. :func:`check_symmetric` is
the collective that notices: every rank describes its blocks, and every
rank raises :class:`~cco.errors.CCOInvalidUsage` with the first difference
when they disagree. It costs one allgather of 40 bytes when they agree.

:func:`new_blocks` turns two states of a torch memory pool (what
``MemPool.snapshot()`` returns) into the blocks made in between, which is
what ``SymmetricMemPool.use()`` checks on leaving its ``with`` block.
"""
from __future__ import annotations

import hashlib
import struct
from typing import Any, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Set, Tuple

from .communicator import Communicator
from .errors import CCOInvalidUsage

# Blocks shown per rank when the digests differ.
SHOWN = 16


class Block(NamedTuple):
    """A block of memory: its offset in this rank's slot and its size."""

    offset: int
    nbytes: int


def slot_offset(comm: Communicator, address: int) -> int:
    """`address` as an offset of this rank's slot of comm's flat VA."""
    base, slot = comm.flat_va
    mine = base + comm.lsa_rank * slot
    if not mine <= address < mine + slot:
        raise CCOInvalidUsage(f"address {address:#x} is not in this rank's slot of the communicator")
    return address - mine


def _digest(blocks: Sequence[Block]) -> bytes:
    h = hashlib.sha256()
    for b in blocks:
        h.update(struct.pack("<QQ", b.offset, b.nbytes))
    return h.digest()


def _pack_head(blocks: Sequence[Block]) -> bytes:
    head = list(blocks[:SHOWN]) + [Block(0, 0)] * (SHOWN - min(len(blocks), SHOWN))
    return b"".join(struct.pack("<QQ", b.offset, b.nbytes) for b in head)


def _unpack_head(raw: bytes, count: int) -> List[Block]:
    pairs = [struct.unpack_from("<QQ", raw, 16 * i) for i in range(SHOWN)]
    return [Block(o, n) for o, n in pairs[:min(count, SHOWN)]]


def _difference(mine: List[Block], theirs: List[Block], count_mine: int, count_theirs: int) -> str:
    for i, (a, b) in enumerate(zip(mine, theirs)):
        if a != b:
            return (f"block {i}: offset {a.offset:#x} size {a.nbytes} on rank 0, "
                    f"offset {b.offset:#x} size {b.nbytes} there")
    if count_mine != count_theirs:
        return f"{count_mine} blocks on rank 0, {count_theirs} there"
    return f"a block past the first {SHOWN} differs"


def check_symmetric(comm: Communicator, blocks: Iterable[Tuple[int, int]], what: str = "memory") -> None:
    """Collective over `comm`: raises CCOInvalidUsage on every rank unless
    every rank passes the same blocks (slot offset, size), in any order."""
    mine = sorted(Block(int(o), int(n)) for o, n in blocks)
    first = comm.allgather(struct.pack("<Q", len(mine)) + _digest(mine))
    if all(f == first[0] for f in first):
        return
    heads = comm.allgather(_pack_head(mine))
    counts = [struct.unpack_from("<Q", f)[0] for f in first]
    reference = _unpack_head(heads[0], counts[0])
    for r in range(1, comm.size):
        if first[r] != first[0]:
            theirs = _unpack_head(heads[r], counts[r])
            raise CCOInvalidUsage(
                f"{what} is no longer symmetric: rank {r} differs from rank 0 "
                f"({_difference(reference, theirs, counts[0], counts[r])}). Every rank must create "
                "and free the same tensors in the same order (torch frees a tensor when it is "
                "collected: drop references with del, or allocate with symm_mem.empty under "
                "backend \"CCO\", whose tensors are symmetric whatever the order)")


# ------------------------------------------------------------- torch pools


def _blocks_of(snapshot: Iterable[Mapping[str, Any]]) -> List[Tuple[int, int, str]]:
    """(address, size, state) of every block of a pool snapshot; a block
    without an address lies right after the previous one of its segment."""
    out = []
    for segment in snapshot:
        address = int(segment["address"])
        for block in segment.get("blocks", []):
            size = int(block["size"])
            at = int(block.get("address", address))
            out.append((at, size, str(block.get("state", ""))))
            address = at + size
    return out


def active_addresses(snapshot: Iterable[Mapping[str, Any]]) -> Set[int]:
    """Addresses of the blocks of a pool snapshot that hold tensors."""
    return {a for a, _, state in _blocks_of(snapshot) if state == "active_allocated"}


def new_blocks(before: Optional[Set[int]], snapshot: Iterable[Mapping[str, Any]]) -> List[Tuple[int, int]]:
    """(address, size) of the blocks that hold tensors in `snapshot` and did
    not in `before` (the active addresses of an earlier snapshot)."""
    seen = before or set()
    return sorted((a, n) for a, n, state in _blocks_of(snapshot)
                  if state == "active_allocated" and a not in seen)
