/*
 * mp_gda step "drain": a device communicator destroyed right after its
 * kernel posted still delivers what it rang, and its destroy does not wait
 * for what it never rang.
 *
 *  drain    every rank makes a second device communicator. Senders (even
 *           ranks) put DRAIN_PUTS blocks with a signal each to every odd
 *           peer on an Immediate handle, then one put on a Deferred handle
 *           that no doorbell publishes, and destroy the device
 *           communicator at once, without a flush. The receivers (odd
 *           ranks) wait for every signal and find every block; a sender's
 *           destroy returns well before the 2 s the proxy gives a ring to
 *           drain, so the unrung put was not waited for. Freeing the state
 *           under ops the proxy had not run yet lost them (the receivers
 *           timed out) and left the engine with pointers into freed memory.
 */
#include "gda.h"

#define DRAIN_PUTS 4
#define DRAIN_BLOCK (KILL_BYTES / DRAIN_PUTS)
#define DRAIN_WAIT_NS (20ull * NS_PER_S)
/* Below the proxy's drain limit (GDA_DRAIN_NS, 2 s, gda_setup.c). */
#define DRAIN_DESTROY_LIMIT_S 1.5

static int is_sender(int r) { return r % 2 == 0; }

/* Block k from s to r: in r's kill area for s, from s's window A. */
static size_t drain_dst(const rank_ctx* c, int s, int k) {
  return c->L.kill + (size_t)s * KILL_BYTES + (size_t)k * DRAIN_BLOCK;
}
static size_t drain_src(int r, int k) { return 8u * (size_t)(r * 37 + k * 1031); }

static void send_and_destroy(rank_ctx* c, ccoDevComm* dc) {
  ccoGda g = ccoGdaHandle(dc, 0, ccoGdaDoorbellImmediate);
  ccoGda deferred = ccoGdaHandle(dc, 0, ccoGdaDoorbellDeferred);
  int posted = 0;
  for (int i = 0; i < c->nPeers; i++) {
    int p = c->peers[i];
    if (is_sender(p)) continue;
    for (int k = 0; k < DRAIN_PUTS; k++)
      DEV_OK(ccoGdaPut(&g, p, c->winB, drain_dst(c, c->rank, k), c->winA, drain_src(p, k), DRAIN_BLOCK,
                       ccoGdaSigInc((uint32_t)c->rank), CCO_GDA_NO_COUNTER, ccoCoopThread, ccoGdaThreadAggregate),
             "ccoGdaPut (Immediate)");
    posted++;
  }
  /* Last, so that no later doorbell publishes it. */
  if (posted) {
    int p = -1;
    for (int i = 0; i < c->nPeers && p < 0; i++)
      if (!is_sender(c->peers[i])) p = c->peers[i];
    DEV_OK(ccoGdaPut(&deferred, p, c->winB, c->L.flood, c->winA, 0, 8, ccoGdaSigNone(), CCO_GDA_NO_COUNTER,
                     ccoCoopThread, ccoGdaThreadAggregate),
           "ccoGdaPut (Deferred, never rung)");
  }
  double t0 = mp_now();
  MUST(ccoDevCommDestroy(c->comm, dc));
  double dt = elapsed(t0);
  CHECK(dt < DRAIN_DESTROY_LIMIT_S,
        "rank %d: drain: ccoDevCommDestroy took %.3f s after %d x %d puts and an unrung one (limit %.1f s): "
        "it waited for what no doorbell published",
        c->rank, dt, posted, DRAIN_PUTS, DRAIN_DESTROY_LIMIT_S);
  if (c->rank == 0)
    printf("drain: rank 0 put %d blocks of %u B to each of %d ranks, then destroyed its device communicator "
           "(no flush) in %.3f s\n",
           DRAIN_PUTS, (unsigned)DRAIN_BLOCK, posted, dt);
}

static void receive_and_destroy(rank_ctx* c, ccoDevComm* dc) {
  ccoGda g = ccoGdaHandle(dc, 0, ccoGdaDoorbellImmediate);
  long wrong = 0;
  int senders = 0;
  for (int s = 0; s < c->nRanks; s++) {
    if (!is_sender(s) || !expect_peer(c, s, c->rank)) continue;
    senders++;
    ccoDevStatus_t st = ccoGdaWaitSignal(&g, (uint32_t)s, DRAIN_PUTS, DRAIN_WAIT_NS, ccoCoopThread);
    if (!DEV_OK(st, "drain: waiting for a sender's signals (its destroy dropped its puts?)")) continue;
    for (int k = 0; k < DRAIN_PUTS; k++) {
      size_t d = first_diff(c->b + drain_dst(c, s, k), DRAIN_BLOCK, seed_at(s, drain_src(c->rank, k)));
      if (d != DRAIN_BLOCK && wrong++ < 3)
        CHECK(0, "rank %d: drain: block %d from rank %d differs at byte %zu", c->rank, k, s, d);
    }
  }
  CHECK(wrong == 0, "rank %d: drain: %ld blocks wrong from %d senders", c->rank, wrong, senders);
  MUST(ccoDevCommDestroy(c->comm, dc));
}

void test_drain(rank_ctx* c) {
  if (!has_gda(c) || !step_begin(c, "drain", 90)) return;
  ccoDevCommRequirements reqs = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.gdaConnectionType = g_opt.conn;
  reqs.gdaTrafficClass = g_opt.tc;
  reqs.gdaSignalCount = MAX_RANKS;
  reqs.gdaContextCount = 1;
  ccoDevComm dc;
  ccoResult_t r = ccoDevCommCreate(c->comm, &reqs, &dc);
  CHECK(r == ccoSuccess, "rank %d: drain: ccoDevCommCreate: %s (%s)", c->rank, ccoGetErrorString(r),
        ccoGetLastError(c->comm));
  if (r != ccoSuccess) return;
  memset(c->b + c->L.kill, 0, (size_t)c->nRanks * KILL_BYTES);
  barrier(c);
  if (is_sender(c->rank)) send_and_destroy(c, &dc);
  else receive_and_destroy(c, &dc);
  barrier(c);
}
