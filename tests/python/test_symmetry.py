"""The symmetry check of SymmetricMemPool (cco.symmetry), on the host
platform: ranks as threads with real communicators, torch's pool snapshots
as the dicts torch returns."""
import pytest

from test_ranks import run_threads

from cco import CCOInvalidUsage, symmetry


def _blocks(comm, mems):
    return [(symmetry.slot_offset(comm, m.ptr), m.size) for m in mems]


def test_same_blocks_pass_in_any_order():
    def body(comm):
        mems = [comm.alloc_mem(n) for n in (4096, 3 * 4096, 8192)]
        blocks = _blocks(comm, mems)
        if comm.rank % 2:
            blocks.reverse()  # the order of the list does not matter
        symmetry.check_symmetric(comm, blocks, "test blocks")
        symmetry.check_symmetric(comm, [], "nothing")
        return "ok"

    assert run_threads(4, body) == ["ok"] * 4


def test_divergence_fails_on_every_rank_with_the_first_difference():
    """Rank 2 allocated one more block first, as a rank does when its
    garbage collector freed a tensor later than the others did: its next
    blocks sit elsewhere, and every rank is told so."""

    def body(comm):
        extra = comm.alloc_mem(4096) if comm.rank == 2 else None
        mems = [comm.alloc_mem(4096), comm.alloc_mem(8192)]
        try:
            symmetry.check_symmetric(comm, _blocks(comm, mems), "the pool's tensors")
        except CCOInvalidUsage as exc:
            return str(exc)
        finally:
            if extra is not None:
                extra.free()
        return "no error"

    messages = run_threads(4, body)
    for m in messages:
        assert isinstance(m, str) and m != "no error", messages
        assert "the pool's tensors is no longer symmetric" in m
        assert "rank 2 differs from rank 0" in m
        assert "block 0: offset 0x0 size 4096 on rank 0, offset 0x1000 size 4096 there" in m
    assert len(set(messages)) == 1, "every rank raises the same error"


def test_a_missing_block_is_named():
    def body(comm):
        mems = [comm.alloc_mem(4096) for _ in range(3 if comm.rank == 0 else 2)]
        try:
            symmetry.check_symmetric(comm, _blocks(comm, mems))
        except CCOInvalidUsage as exc:
            return str(exc)
        return "no error"

    for m in run_threads(2, body):
        assert "3 blocks on rank 0, 2 there" in m, m


def test_slot_offset_refuses_foreign_addresses(comm):
    mem = comm.alloc_mem(4096)
    base, _ = comm.flat_va
    assert symmetry.slot_offset(comm, mem.ptr) == mem.ptr - base
    with pytest.raises(CCOInvalidUsage):
        symmetry.slot_offset(comm, base - 4096)


# torch.cuda.MemPool.snapshot(): one dict per segment, its blocks in order.
SNAPSHOT = [
    {"address": 0x10000, "total_size": 0x3000, "blocks": [
        {"address": 0x10000, "size": 0x1000, "state": "active_allocated"},
        {"address": 0x11000, "size": 0x1000, "state": "inactive"},
        {"address": 0x12000, "size": 0x1000, "state": "active_allocated"},
    ]},
    # Older torch: blocks without addresses follow each other.
    {"address": 0x20000, "total_size": 0x2000, "blocks": [
        {"size": 0x800, "state": "active_pending_free"},
        {"size": 0x1800, "state": "active_allocated"},
    ]},
]


def test_pool_snapshot_blocks():
    assert symmetry.active_addresses(SNAPSHOT) == {0x10000, 0x12000, 0x20800}
    assert symmetry.new_blocks(None, SNAPSHOT) == [(0x10000, 0x1000), (0x12000, 0x1000),
                                                   (0x20800, 0x1800)]
    # Blocks alive before the with block are not the block's tensors.
    assert symmetry.new_blocks({0x10000, 0x20800}, SNAPSHOT) == [(0x12000, 0x1000)]
    assert symmetry.new_blocks(set(), []) == []
