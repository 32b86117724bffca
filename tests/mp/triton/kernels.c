/*
 * The Triton kernels of tests/gpu/triton_kernels.py (queries, gda_all,
 * gda_local, world_barrier, sdma_all) and the SDMA kernel of
 * examples/ir/test_triton_cco.py, line by line, as calls of the wrappers
 * the bindings of python/cco/ir/triton/ pick, with the arguments they pass:
 *
 * - the symbol: cco_ir_<family>[_<doorbell>][_<scope>][_<thread mode>],
 *   from coop=, thread_mode= and the namespace (Gda, GdaDeferred,
 *   GdaCallerOrdered);
 * - the arguments in the table's order: the context (0) right after the
 *   device communicator for GDA calls, signal_op / signal_id / signal_val
 *   (INC 1, ADD 2; defaults INC for a signal, NONE for a put, value 1),
 *   the counter (None: -1), the queue before `expected` for SDMA waits;
 * - team=T: the peer goes through cco_ir_devcomm_team_rank_to_world first.
 *
 * Each runs in every thread of the program (coop.c), as Triton runs it,
 * and stores into the thread's own row of `out`.
 */
#include "triton.h"

#define OUT(i) a->out[tk_thread() * TK_OUT + (i)]
enum { NONE = 0, INC = 1, ADD = 2, NO_COUNTER = -1, REMOTE = 1 };

/* tl.maximum: a function, so that each call it wraps runs once. */
static int32_t max32(int32_t x, int32_t y) { return x > y ? x : y; }

/* The symbol coop=s picks (0 thread, 1 warp, 2 block); `mode` is empty or
 * the thread mode's suffix. */
#define SCOPED(fam, mode, s, ...)                                              \
  ((s) == 0   ? cco_ir_##fam##_thread##mode(__VA_ARGS__)                      \
   : (s) == 1 ? cco_ir_##fam##_warp##mode(__VA_ARGS__)                        \
              : cco_ir_##fam##_block##mode(__VA_ARGS__))
/* ... and thread_mode=m (0 aggregate, 1 independent). */
#define MODED(fam, s, m, ...) \
  ((m) == 0 ? SCOPED(fam, _aggregate, s, __VA_ARGS__) : SCOPED(fam, _independent, s, __VA_ARGS__))

void tk_queries(void* args) {
  tk_args* a = (tk_args*)args;
  uint64_t dc = a->dc, win = a->win;
  OUT(0) = cco_ir_devcomm_rank(dc);
  OUT(1) = cco_ir_devcomm_world_size(dc);
  OUT(2) = cco_ir_devcomm_lsa_rank(dc);
  OUT(3) = cco_ir_devcomm_lsa_size(dc);
  OUT(4) = cco_ir_devcomm_node(dc);
  OUT(5) = cco_ir_devcomm_node_count(dc);
  OUT(6) = cco_ir_devcomm_lsa_barrier_count(dc);
  OUT(7) = cco_ir_devcomm_barrier_count(dc);
  OUT(8) = cco_ir_devcomm_sdma_queue_count(dc);
  OUT(9) = cco_ir_devcomm_gda_context_count(dc);
  OUT(10) = cco_ir_devcomm_gda_signal_count(dc);
  OUT(11) = cco_ir_devcomm_gda_counter_count(dc);
  OUT(12) = cco_ir_devcomm_gda_connection_type(dc);
  OUT(13) = cco_ir_devcomm_aborted(dc);
  int32_t rank = cco_ir_devcomm_rank(dc);
  for (int32_t t = 0; t < 5; t++) { /* WORLD, LSA, CROSS_NODE, RAIL, GDA */
    int32_t tr = cco_ir_devcomm_team_rank(dc, t);
    OUT(14 + 5 * t) = cco_ir_devcomm_team_size(dc, t);
    OUT(15 + 5 * t) = tr;
    OUT(16 + 5 * t) = cco_ir_devcomm_team_rank_to_world(dc, t, tr);
    OUT(17 + 5 * t) = cco_ir_devcomm_team_rank_from_world(dc, t, rank);
    OUT(18 + 5 * t) = cco_ir_devcomm_team_is_member(dc, t, rank);
  }
  OUT(39) = (int64_t)cco_ir_window_size(win);
  int32_t me = cco_ir_devcomm_lsa_rank(dc);
  int32_t nxt = (me + 1) % cco_ir_devcomm_lsa_size(dc);
  uint64_t base = cco_ir_window_lsa_ptr(win, me, 0);
  OUT(40) = (int64_t)(cco_ir_window_local_ptr(win, 8) - base);
  uint64_t flat = cco_ir_devcomm_lsa_ptr_flat(dc, base, nxt);
  OUT(41) = flat == cco_ir_window_lsa_ptr(win, nxt, 0);
  OUT(42) = cco_ir_devcomm_team_size(dc, 7); /* no such team: -1 */
  OUT(43) = cco_ir_gda_has_peer(dc, rank);
  OUT(44) = cco_ir_gda_team_peer(dc, 0);
  OUT(45) = cco_ir_coop_rank_thread(), OUT(46) = cco_ir_coop_size_thread(), OUT(51) = cco_ir_coop_sync_thread();
  OUT(47) = cco_ir_coop_rank_warp(), OUT(48) = cco_ir_coop_size_warp(), OUT(52) = cco_ir_coop_sync_warp();
  OUT(49) = cco_ir_coop_rank_block(), OUT(50) = cco_ir_coop_size_block(), OUT(53) = cco_ir_coop_sync_block();
}

/* _gda_post: put (signal 0 +1, counter 0), put-value (signal 1 +2, counter
 * 1), a signal (2 +1) and a counter bump (counter 2) on the handle
 * DOORBELL; caller-ordered: a zero-byte put carries the signal, its own
 * flush releases them. */
static int32_t gda_post(const tk_args* a, int32_t peer) {
  uint64_t dc = a->dc, win = a->win, nb = (uint64_t)a->nbytes, v = (uint64_t)a->value;
  int s = a->scope, m = a->mode;
  int32_t st;
  if (a->doorbell == 0) {
    st = MODED(gda_put_immediate, s, m, dc, 0, peer, win, nb, win, 0, nb, INC, 0, 1, 0);
    st = max32(st, MODED(gda_put_value_immediate, s, m, dc, 0, peer, win, 3 * nb, v, 8, ADD, 1, 2, 1));
    st = max32(st, SCOPED(gda_signal_immediate, , s, dc, 0, peer, INC, 2, 1));
    st = max32(st, SCOPED(gda_counter_immediate, , s, dc, 0, peer, 2));
  } else if (a->doorbell == 1) {
    st = MODED(gda_put_deferred, s, m, dc, 0, peer, win, nb, win, 0, nb, INC, 0, 1, 0);
    st = max32(st, MODED(gda_put_value_deferred, s, m, dc, 0, peer, win, 3 * nb, v, 8, ADD, 1, 2, 1));
    st = max32(st, SCOPED(gda_signal_deferred, , s, dc, 0, peer, INC, 2, 1));
    st = max32(st, SCOPED(gda_counter_deferred, , s, dc, 0, peer, 2));
  } else {
    st = MODED(gda_put_caller_ordered, s, m, dc, 0, peer, win, nb, win, 0, nb, INC, 0, 1, 0);
    st = max32(st, MODED(gda_put_value_caller_ordered, s, m, dc, 0, peer, win, 3 * nb, v, 8, ADD, 1, 2, 1));
    st = max32(st, MODED(gda_put_caller_ordered, s, 0, dc, 0, peer, win, 0, win, 0, 0, INC, 2, 1, NO_COUNTER));
    st = max32(st, SCOPED(gda_counter_caller_ordered, , s, dc, 0, peer, 2));
    st = max32(st, SCOPED(gda_flush, , s, dc, 0));
  }
  return st;
}

/* Window: [src][from prev (put)][from next (get)][value from prev]. */
void tk_gda_all(void* args) {
  tk_args* a = (tk_args*)args;
  uint64_t dc = a->dc, win = a->win, nb = (uint64_t)a->nbytes;
  int s = a->scope, m = a->mode;
  int32_t size = cco_ir_devcomm_team_size(dc, a->team);
  int32_t me = cco_ir_devcomm_team_rank(dc, a->team);
  int32_t nxt = cco_ir_devcomm_team_rank_to_world(dc, a->team, (me + 1) % size);
  OUT(0) = gda_post(a, nxt);
  OUT(1) = SCOPED(gda_flush, , s, dc, 0);
  for (int32_t i = 0; i < 3; i++) {
    OUT(2 + i) = SCOPED(gda_wait_signal, , s, dc, i, (uint64_t)a->exp[i], TK_TIMEOUT_NS);
    OUT(5 + i) = SCOPED(gda_wait_counter, , s, dc, i, (uint64_t)a->exp[3 + i], TK_TIMEOUT_NS);
    OUT(8 + i) = (int64_t)cco_ir_gda_read_signal(dc, i);
    OUT(11 + i) = (int64_t)cco_ir_gda_read_counter(dc, i);
  }
  OUT(14) = (int64_t)cco_ir_signal_load(cco_ir_gda_signal_ptr(dc, 0));
  OUT(15) = (int64_t)cco_ir_signal_load(cco_ir_gda_counter_ptr(dc, 0));
  OUT(16) = MODED(gda_get_immediate, s, m, dc, 0, nxt, win, 2 * nb, win, 0, nb, 3);
  int64_t req = SCOPED(gda_flush_async, , s, dc, 0, nxt);
  OUT(17) = req < 0;
  OUT(18) = SCOPED(gda_wait, , s, dc, 0, req);
  int32_t peer = cco_ir_devcomm_team_rank_to_world(dc, a->team, (me + 1) % size); /* team=TEAM */
  OUT(19) = SCOPED(gda_flush_peer, , s, dc, 0, peer);
  OUT(20) = cco_ir_gda_has_peer(dc, nxt);
  if (s == 1) /* the GDA barrier takes warp or block scope */
    OUT(21) = cco_ir_gda_barrier_sync_warp(dc, 0, 0, TK_TIMEOUT_NS);
  else
    OUT(21) = cco_ir_gda_barrier_sync_block(dc, 0, 0, TK_TIMEOUT_NS);
}

/* Signal and counter slots of this rank alone, under a leader. */
void tk_gda_local(void* args) {
  tk_args* a = (tk_args*)args;
  uint64_t dc = a->dc;
  int32_t slot = a->slot;
  if (cco_ir_coop_rank_block() != 0) return;
  cco_ir_signal_store(cco_ir_gda_signal_ptr(dc, slot), 5);
  cco_ir_signal_store(cco_ir_gda_counter_ptr(dc, slot), 6);
  OUT(0) = (int64_t)cco_ir_gda_read_signal(dc, slot);
  OUT(1) = (int64_t)cco_ir_gda_read_counter(dc, slot);
  OUT(2) = cco_ir_gda_reset_signal(dc, slot);
  OUT(3) = cco_ir_gda_reset_counter(dc, slot);
  OUT(4) = (int64_t)cco_ir_gda_read_signal(dc, slot);
  OUT(5) = (int64_t)cco_ir_gda_read_counter(dc, slot);
  int32_t rank = cco_ir_devcomm_rank(dc);
  OUT(6) = cco_ir_gda_has_peer(dc, rank);
  OUT(7) = cco_ir_gda_put_value_immediate_thread_aggregate(dc, 0, rank, a->win, 0, 1, 8, NONE, 0, 1, NO_COUNTER);
  OUT(8) = cco_ir_gda_wait_signal_thread(dc, 100000, 1, 0);
}

void tk_world_barrier(void* args) {
  tk_args* a = (tk_args*)args;
  if (a->scope == 0) { /* thread scope: one thread of the program */
    if (cco_ir_coop_rank_block() == 0) OUT(0) = cco_ir_barrier_sync_thread(a->dc, 0, 0, TK_TIMEOUT_NS);
    cco_ir_coop_sync_block();
  } else {
    OUT(0) = SCOPED(barrier_sync, , a->scope, a->dc, 0, 0, TK_TIMEOUT_NS);
  }
}

/* Window: [src][from prev (put)][from next (get)]. */
void tk_sdma_all(void* args) {
  tk_args* a = (tk_args*)args;
  uint64_t dc = a->dc, win = a->win, nb = (uint64_t)a->nbytes, e = (uint64_t)a->expected;
  int s = a->scope;
  int32_t me = cco_ir_devcomm_lsa_rank(dc);
  int32_t n = cco_ir_devcomm_lsa_size(dc);
  int32_t nxt = (me + 1) % n, prv = (me + n - 1) % n;
  OUT(0) = SCOPED(sdma_put, , s, dc, nxt, win, nb, win, 0, nb, 0, REMOTE);
  OUT(1) = SCOPED(sdma_commit, , s, dc, nxt, 1);
  OUT(2) = SCOPED(sdma_wait_signal, , s, dc, prv, 0, e, TK_TIMEOUT_NS);
  OUT(3) = SCOPED(sdma_wait_signal, , s, dc, prv, 1, e, TK_TIMEOUT_NS);
  OUT(4) = (int64_t)cco_ir_sdma_read_signal(dc, prv, 0);
  OUT(5) = (int64_t)cco_ir_signal_load(cco_ir_sdma_signal_ptr(dc, prv, 1));
  OUT(6) = SCOPED(sdma_get, , s, dc, nxt, win, 2 * nb, win, 0, nb, 0);
  OUT(7) = SCOPED(sdma_quiet, , s, dc, nxt);
  OUT(8) = SCOPED(sdma_quiet_queue, , s, dc, nxt, 1);
  uint64_t size = cco_ir_window_size(win);
  OUT(9) = SCOPED(sdma_put, , s, dc, nxt, win, size, win, 0, 1, 0, NONE); /* past the window: INVALID */
}

/* examples/ir/test_triton_cco.py's sdma_put (block scope, num_warps 4):
 * window [src][dst: world_size x NBYTES]. */
void tk_sdma_put(void* args) {
  tk_args* a = (tk_args*)args;
  uint64_t dc = a->dc, win = a->win, nb = (uint64_t)a->nbytes;
  int32_t me = cco_ir_devcomm_lsa_rank(dc);
  int32_t n = cco_ir_devcomm_lsa_size(dc);
  int32_t rank = cco_ir_devcomm_rank(dc);
  int32_t bad = 0;
  for (int32_t k = 1; k < n; k++) {
    int32_t st = cco_ir_sdma_put_block(dc, (me + k) % n, win, (uint64_t)(1 + rank) * nb, win, 0, nb, 0, REMOTE);
    bad = max32(bad, st);
  }
  for (int32_t k = 1; k < n; k++) {
    int32_t st = cco_ir_sdma_wait_signal_block(dc, (me + n - k) % n, 0, (uint64_t)a->expected, TK_EX_TIMEOUT_NS);
    bad = max32(bad, st);
  }
  for (int32_t k = 1; k < n; k++) bad = max32(bad, cco_ir_sdma_quiet_timeout_block(dc, (me + k) % n, TK_EX_TIMEOUT_NS));
  OUT(0) = bad;
}

/* coll: one program, part 0 of 1; the input at offset 0, the output at
 * recvOff, the scratch at scratchOff, all in `win`; broadcast from LSA
 * rank 0. */
void tk_coll(void* args) {
  tk_args* a = (tk_args*)args;
  uint64_t dc = a->dc, w = a->win, ro = a->recvOff, so = a->scratchOff, sb = a->scratchBytes, n = a->count;
  int32_t st;
  switch (a->algo) {
    case 0: st = cco_ir_coll_all_reduce_one_shot(dc, w, 0, w, ro, n, a->dtype, a->op, 0, w, so, sb, 0, 0, 0, 1); break;
    case 1: st = cco_ir_coll_all_reduce_ll(dc, w, 0, w, ro, n, a->dtype, a->op, 0, w, so, sb, 0, 0, 0, 1); break;
    case 2: st = cco_ir_coll_all_reduce_two_shot(dc, w, 0, w, ro, n, a->dtype, a->op, 0, w, so, sb, 0, 0, 0, 1); break;
    case 3: st = cco_ir_coll_all_gather(dc, w, 0, w, ro, n, a->dtype, 0, 0, w, so, sb, 0, 0, 0, 1); break;
    case 4: st = cco_ir_coll_reduce_scatter(dc, w, 0, w, ro, n, a->dtype, a->op, 0, w, so, sb, 0, 0, 0, 1); break;
    default: st = cco_ir_coll_broadcast(dc, w, 0, w, ro, n, a->dtype, 0, 0, w, so, sb, 0, 0, 0, 1); break;
  }
  OUT(0) = st;
  OUT(63) = (int64_t)cco_ir_coll_scratch_bytes(cco_ir_devcomm_lsa_size(dc), 1);
}
