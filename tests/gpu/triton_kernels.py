"""Triton kernels that call every binding of cco.ir.triton, for
tests/gpu/test_triton_gpu.py (which launches them and checks each result)
and for the compile check of CI (tests/scripts/triton_compile_check.py, which
compiles every entry of COMPILE_SPECS for a fixed GPU without one).

Each kernel writes what it saw into `out` (int64 words, -1 where nothing was
written) for the host to check. Calls with a side effect run in every thread
of the program, so kernels of one thread's work (signals, thread scope) run
them under a leader: `if cco.Coop.rank(cco.CoopScope.BLOCK) == 0:`.
"""
import triton
import triton.language as tl

from cco.ir.triton import cco

MS = tl.constexpr(1_000_000)
TIMEOUT_NS = tl.constexpr(5_000_000_000)  # a lost peer or a wrong count fails the check in 5 s instead of hanging it


@triton.jit
def queries(dev_comm, win, out):
    tl.store(out + 0, cco.DevComm.rank(dev_comm).to(tl.int64))
    tl.store(out + 1, cco.DevComm.world_size(dev_comm).to(tl.int64))
    tl.store(out + 2, cco.DevComm.lsa_rank(dev_comm).to(tl.int64))
    tl.store(out + 3, cco.DevComm.lsa_size(dev_comm).to(tl.int64))
    tl.store(out + 4, cco.DevComm.node(dev_comm).to(tl.int64))
    tl.store(out + 5, cco.DevComm.node_count(dev_comm).to(tl.int64))
    tl.store(out + 6, cco.DevComm.lsa_barrier_count(dev_comm).to(tl.int64))
    tl.store(out + 7, cco.DevComm.barrier_count(dev_comm).to(tl.int64))
    tl.store(out + 8, cco.DevComm.sdma_queue_count(dev_comm).to(tl.int64))
    tl.store(out + 9, cco.DevComm.gda_context_count(dev_comm).to(tl.int64))
    tl.store(out + 10, cco.DevComm.gda_signal_count(dev_comm).to(tl.int64))
    tl.store(out + 11, cco.DevComm.gda_counter_count(dev_comm).to(tl.int64))
    tl.store(out + 12, cco.DevComm.gda_connection_type(dev_comm).to(tl.int64))
    tl.store(out + 13, cco.DevComm.aborted(dev_comm).to(tl.int64))
    rank = cco.DevComm.rank(dev_comm)
    for t in tl.static_range(5):  # WORLD, LSA, CROSS_NODE, RAIL, GDA
        tr = cco.DevComm.team_rank(dev_comm, t)
        tl.store(out + 14 + 5 * t, cco.DevComm.team_size(dev_comm, t).to(tl.int64))
        tl.store(out + 15 + 5 * t, tr.to(tl.int64))
        tl.store(out + 16 + 5 * t, cco.DevComm.team_rank_to_world(dev_comm, t, tr).to(tl.int64))
        tl.store(out + 17 + 5 * t, cco.DevComm.team_rank_from_world(dev_comm, t, rank).to(tl.int64))
        tl.store(out + 18 + 5 * t, cco.DevComm.team_is_member(dev_comm, t, rank).to(tl.int64))
    tl.store(out + 39, cco.Window.size(win).to(tl.int64))
    me = cco.DevComm.lsa_rank(dev_comm)
    nxt = (me + 1) % cco.DevComm.lsa_size(dev_comm)
    base = cco.Window.lsa_ptr(win, me, 0)
    tl.store(out + 40, (cco.Window.local_ptr(win, 8) - base).to(tl.int64))
    flat = cco.DevComm.lsa_ptr(dev_comm, base, nxt)
    tl.store(out + 41, (flat == cco.Window.lsa_ptr(win, nxt, 0)).to(tl.int64))
    tl.store(out + 42, cco.DevComm.team_size(dev_comm, 7).to(tl.int64))  # no such team: -1
    tl.store(out + 43, cco.Gda.has_peer(dev_comm, rank).to(tl.int64))
    tl.store(out + 44, cco.Gda.team_peer(dev_comm, 0).to(tl.int64))
    for s in tl.static_range(3):  # THREAD, WARP, BLOCK as thread 0 sees them
        tl.store(out + 45 + 2 * s, cco.Coop.rank(s).to(tl.int64))
        tl.store(out + 46 + 2 * s, cco.Coop.size(s).to(tl.int64))
        tl.store(out + 51 + s, cco.Coop.sync(s).to(tl.int64))


@triton.jit
def lsa_put(dev_comm, win, out, value, WORDS: tl.constexpr, SCOPE: tl.constexpr, SPLIT: tl.constexpr,
            LEADER: tl.constexpr):
    """Stores `value` into slot lsa_rank of every LSA peer's window, then LSA
    barrier 0 (sync, or arrive + wait); out[0] = its status."""
    me = cco.DevComm.lsa_rank(dev_comm)
    n = cco.DevComm.lsa_size(dev_comm)
    for p in range(0, n):
        dst = cco.Window.lsa_ptr(win, p, me * WORDS * 4).to(tl.pointer_type(tl.int32), bitcast=True)
        offs = tl.arange(0, WORDS)
        tl.store(dst + offs, tl.full([WORDS], 0, tl.int32) + value)
    if LEADER:  # thread scope: one thread of the program, after every thread's stores
        cco.Coop.sync(cco.CoopScope.BLOCK)
        if cco.Coop.rank(cco.CoopScope.BLOCK) == 0:
            tl.store(out, cco.LsaBarrier.sync(dev_comm, 0, coop=cco.CoopScope.THREAD, timeout_ns=TIMEOUT_NS))
        cco.Coop.sync(cco.CoopScope.BLOCK)
    elif SPLIT:
        st = cco.LsaBarrier.arrive(dev_comm, 0, coop=SCOPE)
        st = tl.maximum(st, cco.LsaBarrier.wait(dev_comm, 0, coop=SCOPE, timeout_ns=TIMEOUT_NS))
        tl.store(out, st)
    else:
        tl.store(out, cco.LsaBarrier.sync(dev_comm, 0, coop=SCOPE, timeout_ns=TIMEOUT_NS))


@triton.jit
def lsa_statuses(dev_comm, out, UNUSED: tl.constexpr):
    """A barrier no peer arrives at times out; an index past the count is
    invalid (touches nothing)."""
    tl.store(out + 0, cco.LsaBarrier.sync(dev_comm, UNUSED, timeout_ns=MS).to(tl.int64))
    tl.store(out + 1, cco.LsaBarrier.sync(dev_comm, 100000, timeout_ns=MS).to(tl.int64))
    tl.store(out + 2, cco.LsaBarrier.arrive(dev_comm, 100000).to(tl.int64))


@triton.jit
def signals(dev_comm, win, out, value, OFF: tl.constexpr):
    """One thread: system-scope and LSA-scope signal calls on its own words,
    then a ping to the next LSA peer's word and a wait for the previous."""
    if cco.Coop.rank(cco.CoopScope.BLOCK) == 0:
        mine = cco.Window.local_ptr(win, OFF)
        tl.store(out + 0, cco.Signal.store(mine + 8, 5).to(tl.int64))
        tl.store(out + 1, cco.Signal.add(mine + 8, 2).to(tl.int64))
        tl.store(out + 2, cco.Signal.load(mine + 8).to(tl.int64))
        tl.store(out + 3, cco.LsaSignal.store(dev_comm, mine + 16, 9).to(tl.int64))
        tl.store(out + 4, cco.LsaSignal.add(dev_comm, mine + 16, 1).to(tl.int64))
        tl.store(out + 5, cco.LsaSignal.load(dev_comm, mine + 16).to(tl.int64))
        tl.store(out + 6, cco.Signal.wait_until(dev_comm, mine + 8, 7, timeout_ns=MS).to(tl.int64))
        tl.store(out + 7, cco.Signal.wait_until(dev_comm, mine + 8, 8, timeout_ns=MS).to(tl.int64))
        me = cco.DevComm.lsa_rank(dev_comm)
        nxt = (me + 1) % cco.DevComm.lsa_size(dev_comm)
        cco.LsaSignal.store(dev_comm, cco.Window.lsa_ptr(win, nxt, OFF), value)
        tl.store(out + 8, cco.Signal.wait_until(dev_comm, mine, value, timeout_ns=TIMEOUT_NS).to(tl.int64))
        tl.store(out + 9, cco.Signal.load(mine).to(tl.int64))


@triton.jit
def world_barrier(dev_comm, out, SCOPE: tl.constexpr):
    if SCOPE == 0:  # thread scope: one thread of the program
        if cco.Coop.rank(cco.CoopScope.BLOCK) == 0:
            tl.store(out, cco.Barrier.sync(dev_comm, 0, coop=SCOPE, timeout_ns=TIMEOUT_NS).to(tl.int64))
        cco.Coop.sync(cco.CoopScope.BLOCK)
    else:
        tl.store(out, cco.Barrier.sync(dev_comm, 0, coop=SCOPE, timeout_ns=TIMEOUT_NS).to(tl.int64))


@triton.jit
def sdma_all(dev_comm, win, out, expected, NBYTES: tl.constexpr, SCOPE: tl.constexpr):
    """Window: [src][from prev (put)][from next (get)]. Put src to the next
    LSA peer with a signal, commit on queue 1, wait for the previous peer's
    signals, get the next peer's src, quiet; and a put out of range."""
    me = cco.DevComm.lsa_rank(dev_comm)
    n = cco.DevComm.lsa_size(dev_comm)
    nxt = (me + 1) % n
    prv = (me + n - 1) % n
    tl.store(out + 0, cco.Sdma.put(dev_comm, nxt, win, NBYTES, win, 0, NBYTES, queue=0,
                                   signal=cco.SdmaSignal.REMOTE, coop=SCOPE).to(tl.int64))
    tl.store(out + 1, cco.Sdma.commit(dev_comm, nxt, queue=1, coop=SCOPE).to(tl.int64))
    tl.store(out + 2, cco.Sdma.wait_signal(dev_comm, prv, expected, queue=0, coop=SCOPE,
                                           timeout_ns=TIMEOUT_NS).to(tl.int64))
    tl.store(out + 3, cco.Sdma.wait_signal(dev_comm, prv, expected, queue=1, coop=SCOPE,
                                           timeout_ns=TIMEOUT_NS).to(tl.int64))
    tl.store(out + 4, cco.Sdma.read_signal(dev_comm, prv, queue=0).to(tl.int64))
    tl.store(out + 5, cco.Signal.load(cco.Sdma.signal_ptr(dev_comm, prv, queue=1)).to(tl.int64))
    tl.store(out + 6, cco.Sdma.get(dev_comm, nxt, win, 2 * NBYTES, win, 0, NBYTES, queue=0, coop=SCOPE).to(tl.int64))
    tl.store(out + 7, cco.Sdma.quiet(dev_comm, nxt, coop=SCOPE).to(tl.int64))
    tl.store(out + 8, cco.Sdma.quiet(dev_comm, nxt, queue=1, coop=SCOPE).to(tl.int64))
    size = cco.Window.size(win)
    tl.store(out + 9, cco.Sdma.put(dev_comm, nxt, win, size, win, 0, 1, signal=cco.SdmaSignal.NONE,
                                   coop=SCOPE).to(tl.int64))  # past the window: INVALID


@triton.jit
def _gda_post(dev_comm, win, peer, value, NBYTES: tl.constexpr, DOORBELL: tl.constexpr, SCOPE: tl.constexpr,
              MODE: tl.constexpr):
    """Put (signal 0 +1, counter 0), put-value (signal 1 +2, counter 1), a
    signal (2 +1) and a counter bump (counter 2), on the handle DOORBELL."""
    if DOORBELL == 0:
        st = cco.Gda.put(dev_comm, peer, win, NBYTES, win, 0, NBYTES, signal_op=cco.SignalOp.INC, signal_id=0,
                         counter=0, coop=SCOPE, thread_mode=MODE)
        st = tl.maximum(st, cco.Gda.put_value(dev_comm, peer, win, 3 * NBYTES, value, size=8,
                                              signal_op=cco.SignalOp.ADD, signal_id=1, signal_val=2, counter=1,
                                              coop=SCOPE, thread_mode=MODE))
        st = tl.maximum(st, cco.Gda.signal(dev_comm, peer, 2, coop=SCOPE))
        st = tl.maximum(st, cco.Gda.counter(dev_comm, peer, 2, coop=SCOPE))
    elif DOORBELL == 1:
        st = cco.GdaDeferred.put(dev_comm, peer, win, NBYTES, win, 0, NBYTES, signal_op=cco.SignalOp.INC,
                                 signal_id=0, counter=0, coop=SCOPE, thread_mode=MODE)
        st = tl.maximum(st, cco.GdaDeferred.put_value(dev_comm, peer, win, 3 * NBYTES, value, size=8,
                                                      signal_op=cco.SignalOp.ADD, signal_id=1, signal_val=2,
                                                      counter=1, coop=SCOPE, thread_mode=MODE))
        st = tl.maximum(st, cco.GdaDeferred.signal(dev_comm, peer, 2, coop=SCOPE))
        st = tl.maximum(st, cco.GdaDeferred.counter(dev_comm, peer, 2, coop=SCOPE))
    else:  # caller-ordered: no standalone signal, a zero-byte put carries it
        st = cco.GdaCallerOrdered.put(dev_comm, peer, win, NBYTES, win, 0, NBYTES, signal_op=cco.SignalOp.INC,
                                      signal_id=0, counter=0, coop=SCOPE, thread_mode=MODE)
        st = tl.maximum(st, cco.GdaCallerOrdered.put_value(dev_comm, peer, win, 3 * NBYTES, value, size=8,
                                                           signal_op=cco.SignalOp.ADD, signal_id=1, signal_val=2,
                                                           counter=1, coop=SCOPE, thread_mode=MODE))
        st = tl.maximum(st, cco.GdaCallerOrdered.put(dev_comm, peer, win, 0, win, 0, 0, signal_op=cco.SignalOp.INC,
                                                     signal_id=2, coop=SCOPE))
        st = tl.maximum(st, cco.GdaCallerOrdered.counter(dev_comm, peer, 2, coop=SCOPE))
        st = tl.maximum(st, cco.GdaCallerOrdered.flush(dev_comm, coop=SCOPE))  # its own flush releases them
    return st


@triton.jit
def gda_all(dev_comm, win, out, value, exp_ptr, TEAM: tl.constexpr, NBYTES: tl.constexpr,
            DOORBELL: tl.constexpr, SCOPE: tl.constexpr, MODE: tl.constexpr):
    """Window: [src][from prev (put)][from next (get)][value from prev].
    Posts to the next rank of the ring, then waits for the previous one's
    signals (exp_ptr[0..2]) and its own counters (exp_ptr[3..5]), gets the
    next rank's src, and runs every completion call."""
    size = cco.DevComm.team_size(dev_comm, TEAM)
    me = cco.DevComm.team_rank(dev_comm, TEAM)
    nxt = cco.DevComm.team_rank_to_world(dev_comm, TEAM, (me + 1) % size)
    st = _gda_post(dev_comm, win, nxt, value, NBYTES, DOORBELL, SCOPE, MODE)
    tl.store(out + 0, st.to(tl.int64))
    tl.store(out + 1, cco.Gda.flush(dev_comm, coop=SCOPE).to(tl.int64))
    for i in tl.static_range(3):
        tl.store(out + 2 + i, cco.Gda.wait_signal(dev_comm, i, tl.load(exp_ptr + i), coop=SCOPE,
                                                  timeout_ns=TIMEOUT_NS).to(tl.int64))
        tl.store(out + 5 + i, cco.Gda.wait_counter(dev_comm, i, tl.load(exp_ptr + 3 + i), coop=SCOPE,
                                                   timeout_ns=TIMEOUT_NS).to(tl.int64))
        tl.store(out + 8 + i, cco.Gda.read_signal(dev_comm, i).to(tl.int64))
        tl.store(out + 11 + i, cco.Gda.read_counter(dev_comm, i).to(tl.int64))
    tl.store(out + 14, cco.Signal.load(cco.Gda.signal_ptr(dev_comm, 0)).to(tl.int64))
    tl.store(out + 15, cco.Signal.load(cco.Gda.counter_ptr(dev_comm, 0)).to(tl.int64))
    tl.store(out + 16, cco.Gda.get(dev_comm, nxt, win, 2 * NBYTES, win, 0, NBYTES, counter=3, coop=SCOPE,
                                   thread_mode=MODE).to(tl.int64))
    req = cco.Gda.flush_async(dev_comm, nxt, coop=SCOPE)
    tl.store(out + 17, (req < 0).to(tl.int64))
    tl.store(out + 18, cco.Gda.wait(dev_comm, req, coop=SCOPE).to(tl.int64))
    tl.store(out + 19, cco.Gda.flush_peer(dev_comm, (me + 1) % size, coop=SCOPE, team=TEAM).to(tl.int64))
    tl.store(out + 20, cco.Gda.has_peer(dev_comm, nxt).to(tl.int64))
    if SCOPE == 1:  # the GDA barrier takes warp or block scope
        bst = cco.GdaBarrier.sync(dev_comm, 0, coop=cco.CoopScope.WARP, timeout_ns=TIMEOUT_NS)
    else:
        bst = cco.GdaBarrier.sync(dev_comm, 0, coop=cco.CoopScope.BLOCK, timeout_ns=TIMEOUT_NS)
    tl.store(out + 21, bst.to(tl.int64))


@triton.jit
def gda_local(dev_comm, win, out, SLOT: tl.constexpr):
    """Signal and counter slots of this rank alone: set through their
    pointers, read, reset; a put to a rank without an endpoint."""
    if cco.Coop.rank(cco.CoopScope.BLOCK) == 0:
        cco.Signal.store(cco.Gda.signal_ptr(dev_comm, SLOT), 5)
        cco.Signal.store(cco.Gda.counter_ptr(dev_comm, SLOT), 6)
        tl.store(out + 0, cco.Gda.read_signal(dev_comm, SLOT).to(tl.int64))
        tl.store(out + 1, cco.Gda.read_counter(dev_comm, SLOT).to(tl.int64))
        tl.store(out + 2, cco.Gda.reset_signal(dev_comm, SLOT).to(tl.int64))
        tl.store(out + 3, cco.Gda.reset_counter(dev_comm, SLOT).to(tl.int64))
        tl.store(out + 4, cco.Gda.read_signal(dev_comm, SLOT).to(tl.int64))
        tl.store(out + 5, cco.Gda.read_counter(dev_comm, SLOT).to(tl.int64))
        rank = cco.DevComm.rank(dev_comm)
        tl.store(out + 6, cco.Gda.has_peer(dev_comm, rank).to(tl.int64))
        tl.store(out + 7, cco.Gda.put_value(dev_comm, rank, win, 0, 1, coop=cco.CoopScope.THREAD).to(tl.int64))
        tl.store(out + 8, cco.Gda.wait_signal(dev_comm, 100000, 1, coop=cco.CoopScope.THREAD).to(tl.int64))


@triton.jit
def coll(dev_comm, win, out, count, recv_off, scratch_off, scratch_bytes, DTYPE: tl.constexpr, OP: tl.constexpr,
         ALGO: tl.constexpr):
    """One collective of the blocks over the window: the input at offset 0,
    the output at recv_off, the scratch at scratch_off; this program is part
    program_id of the grid. ALGO: 0 one-shot, 1 LL, 2 two-shot all-reduce,
    3 all-gather, 4 reduce-scatter, 5 broadcast from LSA rank 0, 6 all-to-allv
    with its table at offset `count` of the window (compiled in CI only)."""
    part = tl.program_id(0)
    n = tl.num_programs(0)
    if ALGO == 0:
        st = cco.Coll.all_reduce(dev_comm, win, 0, win, recv_off, count, DTYPE, OP, win, scratch_off, scratch_bytes,
                                 part, n, algo="one_shot")
    elif ALGO == 1:
        st = cco.Coll.all_reduce(dev_comm, win, 0, win, recv_off, count, DTYPE, OP, win, scratch_off, scratch_bytes,
                                 part, n, algo="ll")
    elif ALGO == 2:
        st = cco.Coll.all_reduce(dev_comm, win, 0, win, recv_off, count, DTYPE, OP, win, scratch_off, scratch_bytes,
                                 part, n, algo="two_shot")
    elif ALGO == 3:
        st = cco.Coll.all_gather(dev_comm, win, 0, win, recv_off, count, DTYPE, win, scratch_off, scratch_bytes,
                                 part, n)
    elif ALGO == 4:
        st = cco.Coll.reduce_scatter(dev_comm, win, 0, win, recv_off, count, DTYPE, OP, win, scratch_off,
                                     scratch_bytes, part, n)
    elif ALGO == 5:
        st = cco.Coll.broadcast(dev_comm, win, 0, win, recv_off, count, DTYPE, 0, win, scratch_off, scratch_bytes,
                                part, n)
    else:
        st = cco.Coll.all_to_allv(dev_comm, win, 0, win, recv_off, count, DTYPE, win, scratch_off, scratch_bytes,
                                  part, n)
    tl.store(out + part, st.to(tl.int64))
    if part == 0:
        tl.store(out + 63, cco.Coll.scratch_bytes(cco.DevComm.lsa_size(dev_comm), n).to(tl.int64))


# name -> (kernel, signature, constexprs, num_warps): what CI compiles.
_I64, _P64, _P32 = "i64", "*i64", "*i32"
COMPILE_SPECS = {
    "queries": (queries, {"dev_comm": _I64, "win": _I64, "out": _P64}, {}, 4),
    "lsa_statuses": (lsa_statuses, {"dev_comm": _I64, "out": _P64, "UNUSED": "constexpr"}, {"UNUSED": 1}, 4),
    "signals": (signals, {"dev_comm": _I64, "win": _I64, "out": _P64, "value": _I64, "OFF": "constexpr"},
                {"OFF": 4096}, 1),
    "gda_local": (gda_local, {"dev_comm": _I64, "win": _I64, "out": _P64, "SLOT": "constexpr"}, {"SLOT": 3}, 1),
}
_COLL_SIG = {"dev_comm": _I64, "win": _I64, "out": _P64, "count": _I64, "recv_off": _I64, "scratch_off": _I64,
             "scratch_bytes": _I64, "DTYPE": "constexpr", "OP": "constexpr", "ALGO": "constexpr"}
for _algo in range(7):
    for _dtype, _op in ((0, 0), (1, 1), (3, 2)):  # fp32 sum, bf16 max, int32 min
        COMPILE_SPECS[f"coll_{_algo}_{_dtype}_{_op}"] = (coll, _COLL_SIG, {"DTYPE": _dtype, "OP": _op, "ALGO": _algo}, 4)
for _scope, _nw in ((0, 1), (1, 1), (2, 4)):
    COMPILE_SPECS[f"world_barrier_{_scope}"] = (world_barrier, {"dev_comm": _I64, "out": _P64, "SCOPE": "constexpr"},
                                                {"SCOPE": _scope}, _nw)
    COMPILE_SPECS[f"sdma_all_{_scope}"] = (
        sdma_all, {"dev_comm": _I64, "win": _I64, "out": _P64, "expected": _I64, "NBYTES": "constexpr",
                   "SCOPE": "constexpr"}, {"NBYTES": 4096, "SCOPE": _scope}, _nw)
for _split, _leader, _scope, _nw in ((0, 0, 2, 4), (1, 0, 2, 4), (0, 0, 1, 1), (1, 0, 1, 1), (0, 1, 0, 4)):
    COMPILE_SPECS[f"lsa_put_{_scope}_{_split}_{_leader}"] = (
        lsa_put, {"dev_comm": _I64, "win": _I64, "out": _P32, "value": "i32", "WORDS": "constexpr",
                  "SCOPE": "constexpr", "SPLIT": "constexpr", "LEADER": "constexpr"},
        {"WORDS": 1024, "SCOPE": _scope, "SPLIT": _split, "LEADER": _leader}, _nw)
for _db in (0, 1, 2):
    for _scope, _mode, _nw in ((2, 0, 4), (1, 0, 1), (2, 1, 1), (0, 0, 1)):
        COMPILE_SPECS[f"gda_all_{_db}_{_scope}_{_mode}"] = (
            gda_all, {"dev_comm": _I64, "win": _I64, "out": _P64, "value": _I64, "exp_ptr": _P64,
                      "TEAM": "constexpr", "NBYTES": "constexpr", "DOORBELL": "constexpr", "SCOPE": "constexpr",
                      "MODE": "constexpr"},
            {"TEAM": 3, "NBYTES": 4096, "DOORBELL": _db, "SCOPE": _scope, "MODE": _mode}, _nw)
