"""Triton kernels of the fused GEMM + communication operators
(:mod:`cco.ops.fused`, docs/fused_ops.md).

Every kernel takes the op's device communicator (``dc``) and its window
(``win``). The window holds, at the same offsets on every rank:

    ctrl   uint64 words: the LSA ready counters, the panel counters, the
           SDMA signal bases of this call, the sticky error word
    send   what this rank hands to its peers: the staged GEMM input
           (consumer ops) or the GEMM's own output (producer ops over SDMA)
    recv   what the peers hand to this rank: W slots of rows x N (producer
           ops), or W slots of rows x K (consumer ops over SDMA)

Two families:

- **producer** (``gemm_push``: GEMM -> reduce-scatter, all-reduce,
  all-gather, all-to-all): the epilogue of every tile writes the tile into
  the receiving ranks' ``recv`` over LSA and counts it there, or writes it
  into ``send`` and, when its row panel is complete, posts one SDMA put of
  the panel to each receiver. ``finish_reduce`` / ``finish_wait`` then wait
  for the tiles sent to this rank (one small program), and ``reduce_slots``
  sums the slots for the reducing ops.
- **consumer** (``gemm_pull``: all-gather -> GEMM, all-to-all -> GEMM): the
  GEMM reads the A rows of source s straight from s's ``send`` over LSA. Over
  SDMA every rank posts its rows to its peers (``sdma_post_rows``, in
  chunks), computes its own rows while the copy engines move them, waits
  (``wait_rows``) and computes the peers' rows from its ``recv``.

Each call starts with ``entry``: reset the counters, read the SDMA signal
bases, LSA barrier 0 (every rank has finished the previous call, so its
buffers may be overwritten). Waits time out (TIMEOUT_NS) and record their
status in the error word, which the host reads with ``fused_status``.
"""
import triton
import triton.language as tl

from ..ir.triton import cco

TIMEOUT_NS = tl.constexpr(20_000_000_000)  # a lost peer fails the call in 20 s instead of hanging it

# ctrl word indexes (uint64) -- kept in step with fused.py's Layout
ERR_WORD = tl.constexpr(0)        # sticky: the first failing status of any wait
BASE_WORD = tl.constexpr(8)       # [W] SDMA signal count of each source at entry
COUNTER_WORD = tl.constexpr(264)  # [rows tiles] LSA ready counters, then [panels] panel counters

# modes of gemm_push
SCATTER = tl.constexpr(0)    # row block d of C goes to rank d (reduce-scatter, all-to-all)
BROADCAST = tl.constexpr(1)  # all of C goes to every rank (all-reduce, all-gather)


@triton.jit
def _record(ctrl, st):
    """Keeps the first nonzero status in the error word."""
    if st != 0:
        tl.atomic_max(ctrl + ERR_WORD, st.to(tl.int64), sem="relaxed")


@triton.jit
def entry(dc, ctrl, n_reset, W, SDMA: tl.constexpr, BLOCK: tl.constexpr):
    """One program: zero the counters, read every source's SDMA signal count
    (before the barrier: no peer posts this call's puts until it has passed
    it), then LSA barrier 0."""
    offs = tl.arange(0, BLOCK)
    for start in range(0, n_reset, BLOCK):
        idx = start + offs
        tl.store(ctrl + COUNTER_WORD + idx, tl.zeros([BLOCK], tl.int64), mask=idx < n_reset)
    if SDMA:
        for s in range(0, W):
            tl.store(ctrl + BASE_WORD + s, cco.Sdma.read_signal(dc, s, 0).to(tl.int64, bitcast=True))
    st = cco.LsaBarrier.sync(dc, 0, coop=cco.CoopScope.BLOCK, timeout_ns=TIMEOUT_NS)
    _record(ctrl, st)


@triton.jit
def _tile_of(pid, tiles_m, tiles_n, GROUP_M: tl.constexpr):
    """Grouped order inside one block of tiles_m x tiles_n tiles: GROUP_M row
    tiles share their columns of B while they are in L2."""
    per_group = GROUP_M * tiles_n
    group = pid // per_group
    first = group * GROUP_M
    rows = tl.minimum(tiles_m - first, GROUP_M)
    tm = first + (pid % per_group) % rows
    tn = (pid % per_group) // rows
    return tm, tn


@triton.jit
def _elems_to(win, rank, offset, me, esize: tl.constexpr, ALIGNED: tl.constexpr):
    """Elements from this rank's window base (the kernel's win_ptr) to byte
    `offset` of rank's copy of the window. Triton vectorizes loads and stores
    only through pointers it can prove 16-byte aligned: an address made from
    an integer proves nothing, an aligned tensor argument plus a multiple of
    8 elements does (ALIGNED: every offset the op uses is one, K and N % 8 == 0)."""
    there = cco.Window.lsa_ptr(win, rank, offset).to(tl.int64, bitcast=True)
    here = cco.Window.lsa_ptr(win, me, 0).to(tl.int64, bitcast=True)
    e = (there - here) // esize
    if ALIGNED:
        e = (e // 8) * 8
    return e


@triton.jit
def _matmul_tile(a_rows, a_mask_m, stride_ak, b_ptr, stride_bk, stride_bn, cols, mask_n, K,
                 BLOCK_K: tl.constexpr, acc):
    """acc += A[rows, :] @ B[:, cols]; a_rows points at column 0 of each row."""
    ks = tl.arange(0, BLOCK_K)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        kk = k * BLOCK_K + ks
        a = tl.load(a_rows[:, None] + kk[None, :] * stride_ak, mask=a_mask_m[:, None] & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * stride_bk + cols[None, :] * stride_bn,
                    mask=(kk[:, None] < K) & mask_n[None, :], other=0.0)
        acc = tl.dot(a, b, acc)
    return acc


@triton.jit
def _panel_done(dc, win, ctrl, panel, tiles_m, tiles_n, tm, block, rows_per_slot, N, esize, send_off, recv_off,
                TO_ALL: tl.constexpr, BLOCK_M: tl.constexpr):
    """Counts this tile on its row panel (local); the tile that completes the
    panel posts one SDMA put of it, to rank `block` or (TO_ALL) every peer."""
    me = cco.DevComm.lsa_rank(dc)
    W = cco.DevComm.lsa_size(dc)
    cco.Coop.sync(cco.CoopScope.BLOCK)  # every thread's stores before the count
    done = tl.atomic_add(ctrl + COUNTER_WORD + tiles_m + panel, tl.full((), 1, tl.int64), sem="acq_rel", scope="sys")
    if done + 1 == tiles_n:  # uniform: the copy engine takes the panel from here
        first = tm * BLOCK_M
        n_rows = tl.minimum(rows_per_slot - first, BLOCK_M)
        nbytes = (n_rows.to(tl.int64) * N * esize).to(tl.uint64)
        src = send_off + ((block * rows_per_slot + first).to(tl.int64) * N * esize).to(tl.uint64)
        dst = recv_off + ((me * rows_per_slot + first).to(tl.int64) * N * esize).to(tl.uint64)
        if TO_ALL:
            for i in range(1, W):
                st = cco.Sdma.put(dc, (me + i) % W, win, dst, win, src, nbytes, 0, coop=cco.CoopScope.BLOCK)
                _record(ctrl, st)
        else:
            st = cco.Sdma.put(dc, block, win, dst, win, src, nbytes, 0, coop=cco.CoopScope.BLOCK)
            _record(ctrl, st)


@triton.jit
def gemm_push(dc, win, ctrl, win_ptr, a_ptr, b_ptr, M_A, N, K, stride_am, stride_ak, stride_bk, stride_bn,
              rows_per_slot, send_off, recv_off, MODE: tl.constexpr, SDMA: tl.constexpr, ALIGNED: tl.constexpr,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    """C = A @ B (A: M_A x K, B: K x N), every tile handed to its receivers.

    SCATTER: C's row block d (rows_per_slot rows) goes to rank d, slot me.
    BROADCAST: all of C (rows_per_slot = M_A) goes to every rank, slot me.
    Receivers' slot layout: recv + (slot * rows_per_slot + row) * N, row major.
    LSA: stores into the receivers' recv, then +1 on their counter of the
    row tile. SDMA: stores into send (rows of C, row major; the own block
    straight into recv), +1 on the local panel counter; the program that
    completes a panel posts one put of it to each receiver."""
    me = cco.DevComm.lsa_rank(dc)
    W = cco.DevComm.lsa_size(dc)
    tiles_m = tl.cdiv(rows_per_slot, BLOCK_M)  # row tiles of one slot (tiles never straddle two ranks' rows)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_block = tiles_m * tiles_n
    pid = tl.program_id(0)
    if MODE == SCATTER:
        j = pid // per_block
        block = (me + 1 + j) % W  # the own block last: the others' transfers start first
    else:
        j = 0
        block = 0
    tm, tn = _tile_of(pid % per_block, tiles_m, tiles_n, GROUP_M)
    slot_rows = tm * BLOCK_M + tl.arange(0, BLOCK_M)  # rows within the slot
    rows = block * rows_per_slot + slot_rows           # rows of C (and of A)
    mask_m = slot_rows < rows_per_slot
    cols = tn * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_n = cols < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc = _matmul_tile(a_ptr + rows.to(tl.int64) * stride_am, mask_m, stride_ak, b_ptr, stride_bk, stride_bn, cols,
                       mask_n, K, BLOCK_K, acc)
    elt: tl.constexpr = a_ptr.dtype.element_ty
    c = acc.to(elt)
    esize: tl.constexpr = elt.primitive_bitwidth // 8
    mask = mask_m[:, None] & mask_n[None, :]
    # element offset of the tile in slot `me` of a receiver
    in_slot = (me * rows_per_slot + slot_rows).to(tl.int64)[:, None] * N + cols[None, :]
    if SDMA:
        own = win_ptr + _elems_to(win, me, recv_off, me, esize, ALIGNED)
        send = win_ptr + _elems_to(win, me, send_off, me, esize, ALIGNED)
        if MODE == SCATTER:
            if block == me:  # the own block: straight into the own slot
                tl.store(own + in_slot, c, mask=mask)
            else:
                tl.store(send + rows.to(tl.int64)[:, None] * N + cols[None, :], c, mask=mask)
                _panel_done(dc, win, ctrl, j * tiles_m + tm, tiles_m, tiles_n, tm, block, rows_per_slot, N, esize,
                            send_off, recv_off, False, BLOCK_M)
        else:
            tl.store(own + in_slot, c, mask=mask)
            tl.store(send + rows.to(tl.int64)[:, None] * N + cols[None, :], c, mask=mask)
            _panel_done(dc, win, ctrl, tm, tiles_m, tiles_n, tm, 0, rows_per_slot, N, esize, send_off, recv_off,
                        True, BLOCK_M)
    else:
        if MODE == SCATTER:
            dst = win_ptr + _elems_to(win, block, recv_off, me, esize, ALIGNED)
            tl.store(dst + in_slot, c, mask=mask)
            cco.Coop.sync(cco.CoopScope.BLOCK)
            if cco.Coop.rank(cco.CoopScope.BLOCK) == 0:
                counter = cco.Window.lsa_ptr(win, block, ((COUNTER_WORD + tm) * 8).to(tl.uint64))
                cco.LsaSignal.add(dc, counter, 1)
            cco.Coop.sync(cco.CoopScope.BLOCK)
        else:
            for i in range(1, W + 1):  # the peers first, the own copy last
                peer = (me + i) % W
                dst = win_ptr + _elems_to(win, peer, recv_off, me, esize, ALIGNED)
                tl.store(dst + in_slot, c, mask=mask)
            cco.Coop.sync(cco.CoopScope.BLOCK)
            if cco.Coop.rank(cco.CoopScope.BLOCK) == 0:
                for i in range(1, W + 1):
                    counter = cco.Window.lsa_ptr(win, (me + i) % W, ((COUNTER_WORD + tm) * 8).to(tl.uint64))
                    cco.LsaSignal.add(dc, counter, 1)
            cco.Coop.sync(cco.CoopScope.BLOCK)


@triton.jit
def _wait_arrivals(dc, win, ctrl, tm, tiles_n, panels_per_source, SDMA: tl.constexpr):
    """Waits until every source's part of row tile tm of this rank's slots
    has arrived: over LSA its counter reaches W x tiles_n; over SDMA every
    other source's puts of this call have landed (counts per source)."""
    W = cco.DevComm.lsa_size(dc)
    me = cco.DevComm.lsa_rank(dc)
    if SDMA:
        for i in range(1, W):
            s = (me + i) % W
            need = tl.load(ctrl + BASE_WORD + s).to(tl.uint64, bitcast=True) + tl.cast(panels_per_source, tl.uint64)
            st = cco.Sdma.wait_signal(dc, s, need, 0, coop=cco.CoopScope.BLOCK,
                                      timeout_ns=TIMEOUT_NS)
            _record(ctrl, st)
    else:
        counter = cco.Window.lsa_ptr(win, me, ((COUNTER_WORD + tm) * 8).to(tl.uint64))
        st = cco.Signal.wait_until(dc, counter, tl.cast(W * tiles_n, tl.uint64), TIMEOUT_NS)
        _record(ctrl, st)


@triton.jit
def _quiet_outgoing(dc, ctrl):
    """Waits until every SDMA copy this rank posted has landed at its peer,
    so that a call's stream work ends only when its transfers have: once
    the host has synchronized, this rank's engine has nothing left to issue,
    and a synchronous CUDA call the host makes next cannot hold up a copy
    that a peer still waits for (docs/fused_ops.md)."""
    W = cco.DevComm.lsa_size(dc)
    me = cco.DevComm.lsa_rank(dc)
    for i in range(1, W):
        st = cco.Sdma.quiet(dc, (me + i) % W, queue=0, coop=cco.CoopScope.BLOCK, timeout_ns=TIMEOUT_NS)
        _record(ctrl, st)


@triton.jit
def finish_wait(dc, win, ctrl, rows_per_slot, push_tiles_n, panels_per_source, SDMA: tl.constexpr,
                PUSH_BLOCK_M: tl.constexpr):
    """One program of one warp: waits until every tile sent to this rank has
    arrived, row tile by row tile (over SDMA, then until this rank's own
    copies have landed too). It is small on purpose: ranks that share
    a GPU (MPS) must not fill its SMs with waiting programs while a peer's
    GEMM, which they wait for, still needs them."""
    if SDMA:
        _wait_arrivals(dc, win, ctrl, 0, push_tiles_n, panels_per_source, SDMA)
        _quiet_outgoing(dc, ctrl)
    else:
        for tm in range(0, tl.cdiv(rows_per_slot, PUSH_BLOCK_M)):
            _wait_arrivals(dc, win, ctrl, tm, push_tiles_n, panels_per_source, SDMA)


@triton.jit
def reduce_slots(recv_ptr, out_ptr, rows_per_slot, N, W, stride_om, stride_on, BLOCK_M: tl.constexpr,
                 BLOCK_N: tl.constexpr):
    """out = sum over the W slots of recv (rows_per_slot x N each), in fp32,
    the slots in rank order on every rank (after finish_wait)."""
    col_chunks = tl.cdiv(N, BLOCK_N)
    rows = (tl.program_id(0) // col_chunks) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = (tl.program_id(0) % col_chunks) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows < rows_per_slot)[:, None] & (cols < N)[None, :]
    at = rows.to(tl.int64)[:, None] * N + cols[None, :]
    slot_elems = tl.cast(rows_per_slot, tl.int64) * N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for s in range(0, W):
        acc += tl.load(recv_ptr + s * slot_elems + at, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + rows.to(tl.int64)[:, None] * stride_om + cols[None, :] * stride_on,
             acc.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def sdma_post_rows(dc, win, ctrl, rows_per_block, row_bytes, send_off, recv_off, chunk_rows, PER_DEST: tl.constexpr):
    """One program: posts the staged rows to every peer in chunks of
    chunk_rows, in order, one signal per chunk. PER_DEST (all-to-all): peer p
    gets block p of send; else (all-gather) every peer gets block 0. Peer p
    receives them in slot me of its recv."""
    me = cco.DevComm.lsa_rank(dc)
    W = cco.DevComm.lsa_size(dc)
    chunks = tl.cdiv(rows_per_block, chunk_rows)
    for c in range(0, chunks):  # chunk-major: every peer's first chunk before anyone's second
        first = c * chunk_rows
        n = tl.minimum(rows_per_block - first, chunk_rows)
        nbytes = (n * row_bytes).to(tl.uint64)
        dst = recv_off + ((me * rows_per_block + first) * row_bytes).to(tl.uint64)
        for i in range(1, W):
            p = (me + i) % W
            if PER_DEST:
                src = send_off + ((p * rows_per_block + first) * row_bytes).to(tl.uint64)
            else:
                src = send_off + (first * row_bytes).to(tl.uint64)
            st = cco.Sdma.put(dc, p, win, dst, win, src, nbytes, 0, coop=cco.CoopScope.BLOCK)
            _record(ctrl, st)


@triton.jit
def wait_rows(dc, ctrl, chunks):
    """One program of one warp: waits until every peer's `chunks` SDMA puts
    of this call's rows have landed in this rank's recv (the consumer ops
    over SDMA, between the GEMM of the own rows and that of the peers'),
    then until this rank's own puts have landed at the peers."""
    me = cco.DevComm.lsa_rank(dc)
    W = cco.DevComm.lsa_size(dc)
    for i in range(1, W):
        s = (me + i) % W
        need = tl.load(ctrl + BASE_WORD + s).to(tl.uint64, bitcast=True) + tl.cast(chunks, tl.uint64)
        st = cco.Sdma.wait_signal(dc, s, need, 0, coop=cco.CoopScope.BLOCK, timeout_ns=TIMEOUT_NS)
        _record(ctrl, st)
    _quiet_outgoing(dc, ctrl)


@triton.jit
def gemm_pull(dc, win, ctrl, win_ptr, b_ptr, out_ptr, rows_per_block, N, K, stride_bk, stride_bn, stride_om,
              stride_on, send_off, recv_off, first_block, PER_DEST: tl.constexpr, SDMA: tl.constexpr,
              ALIGNED: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
              GROUP_M: tl.constexpr):
    """out = A @ B over the row blocks first_block, first_block + 1, ... of
    the rotation (block j comes from source (me + j) % W; the grid says how
    many), where source s's block (rows_per_block x K, row major) is block 0
    of its send (all-gather) or block me (all-to-all, PER_DEST). LSA: loads
    straight from the source's window (every rank staged its rows before the
    barrier that precedes this kernel). SDMA: loads from slot s of the own
    recv (wait_rows ran before), or the own send for the own block. No
    program of this kernel waits: on a GPU that ranks share, a waiting
    program holds an SM the peer may need to deliver what it waits for."""
    me = cco.DevComm.lsa_rank(dc)
    W = cco.DevComm.lsa_size(dc)
    tiles_m = tl.cdiv(rows_per_block, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_block = tiles_m * tiles_n
    pid = tl.program_id(0)
    s = (me + first_block + pid // per_block) % W
    tm, tn = _tile_of(pid % per_block, tiles_m, tiles_n, GROUP_M)
    local_rows = tm * BLOCK_M + tl.arange(0, BLOCK_M)
    mask_m = local_rows < rows_per_block
    cols = tn * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_n = cols < N
    elt: tl.constexpr = out_ptr.dtype.element_ty
    esize: tl.constexpr = elt.primitive_bitwidth // 8
    block_bytes = (rows_per_block * K * esize).to(tl.uint64)
    if PER_DEST:
        src_block = me
    else:
        src_block = 0
    if SDMA:
        if s == me:
            base = _elems_to(win, me, send_off + src_block.to(tl.uint64) * block_bytes, me, esize, ALIGNED)
        else:
            base = _elems_to(win, me, recv_off + s.to(tl.uint64) * block_bytes, me, esize, ALIGNED)
    else:
        base = _elems_to(win, s, send_off + src_block.to(tl.uint64) * block_bytes, me, esize, ALIGNED)
    a_rows = win_ptr + base + local_rows.to(tl.int64) * K
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc = _matmul_tile(a_rows, mask_m, 1, b_ptr, stride_bk, stride_bn, cols, mask_n, K, BLOCK_K, acc)
    rows = s * rows_per_block + local_rows
    tl.store(out_ptr + rows.to(tl.int64)[:, None] * stride_om + cols[None, :] * stride_on,
             acc.to(out_ptr.dtype.element_ty), mask=mask_m[:, None] & mask_n[None, :])
