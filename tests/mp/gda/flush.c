/*
 * mp_gda step "flush": the completion calls (ccoGdaFlushAsync,
 * ccoGdaWait, ccoGdaFlushPeer) on a Deferred handle.
 *
 *  flush    ccoGdaFlushAsync + ccoGdaWait (over every peer, over one peer,
 *           two requests waited in reverse order), ccoGdaFlushPeer, on a
 *           Deferred handle: afterwards the counters are exact, and after a
 *           host barrier the peers find data and signals without waiting;
 *           a request of another context, or never started, is invalid.
 */
#include "gda.h"

static size_t flush_dst(const rank_ctx* c, int src, int k) {
  return c->L.flushRecv + ((size_t)src * 3 + (size_t)k) * OPS_SLOT;
}
static size_t flush_src(int dst, int k) { return 8u * (size_t)(dst * 101 + k * 257); }

void test_flush(rank_ctx* c) {
  if (!has_gda(c) || !step_begin(c, "flush", 90)) return;
  ccoGda g = ccoGdaHandle(&c->dc, 2, ccoGdaDoorbellDeferred);
  ccoGda other = ccoGdaHandle(&c->dc, 3, ccoGdaDoorbellDeferred);
  const size_t n = 3000;
  /* Zeroed for the compiler alone: built as a function of its own, GCC
   * thinks ccoGdaWait may read a ticket ccoGdaFlushAsync did not set (it
   * reads the ticket of a valid request only). */
  ccoGdaRequest req = {0}, req2 = {0};
#define FLUSH_PUT(p, k)                                                                                           \
  DEV_OK(ccoGdaPut(&g, (p), c->winB, flush_dst(c, c->rank, (k)), c->winA, flush_src((p), (k)), n,                 \
                   ccoGdaSigInc(SIG_FLUSH + (uint32_t)c->rank), CNT_FLUSH, ccoCoopWarp, ccoGdaThreadAggregate), \
         "ccoGdaPut")
  /* 1. Puts to every peer, one flush over all of them. */
  for (int i = 0; i < c->nPeers; i++) FLUSH_PUT(c->peers[i], 0);
  DEV_OK(ccoGdaFlushAsync(&g, -1, &req, ccoCoopBlock), "ccoGdaFlushAsync(-1)");
  /* A request is tied to its context; one never started is no request. */
  CHECK(ccoGdaWait(&other, &req, ccoCoopBlock) == ccoDevInvalid, "rank %d: ccoGdaWait on another context", c->rank);
  ccoGdaRequest none;
  memset(&none, 0, sizeof(none));
  CHECK(ccoGdaWait(&g, &none, ccoCoopBlock) == ccoDevInvalid, "rank %d: ccoGdaWait on a zeroed request", c->rank);
  DEV_OK(ccoGdaWait(&g, &req, ccoCoopBlock), "ccoGdaWait");
  uint64_t cnt = ccoGdaReadCounter(&g, CNT_FLUSH);
  CHECK(cnt == (uint64_t)c->nPeers, "rank %d: flush: counter %llu after ccoGdaWait, expected %d", c->rank,
        (unsigned long long)cnt, c->nPeers);
  /* 2. A put and ccoGdaFlushPeer per peer. */
  for (int i = 0; i < c->nPeers; i++) {
    FLUSH_PUT(c->peers[i], 1);
    DEV_OK(ccoGdaFlushPeer(&g, c->peers[i], ccoCoopThread), "ccoGdaFlushPeer");
    cnt = ccoGdaReadCounter(&g, CNT_FLUSH);
    CHECK(cnt == (uint64_t)(c->nPeers + i + 1), "rank %d: flush: counter %llu after ccoGdaFlushPeer(%d)", c->rank,
          (unsigned long long)cnt, c->peers[i]);
  }
  /* 3. Per-peer requests, two outstanding, waited in reverse order. */
  for (int i = 0; i < c->nPeers; i++) {
    FLUSH_PUT(c->peers[i], 2);
    DEV_OK(ccoGdaFlushAsync(&g, c->peers[i], &req, ccoCoopWarp), "ccoGdaFlushAsync(peer)");
    DEV_OK(ccoGdaFlushAsync(&g, -1, &req2, ccoCoopWarp), "ccoGdaFlushAsync(-1)");
    DEV_OK(ccoGdaWait(&g, &req2, ccoCoopWarp), "ccoGdaWait(second)");
    DEV_OK(ccoGdaWait(&g, &req, ccoCoopWarp), "ccoGdaWait(first)");
  }
#undef FLUSH_PUT
  cnt = ccoGdaReadCounter(&g, CNT_FLUSH);
  CHECK(cnt == 3u * (uint64_t)c->nPeers, "rank %d: flush: counter %llu, expected %d", c->rank, (unsigned long long)cnt,
        3 * c->nPeers);
  barrier(c);
  /* No waiting: the senders' flushes put data and signals here. */
  long wrong = 0;
  for (int i = 0; i < c->nPeers; i++) {
    int s = c->peers[i];
    uint64_t sig = ccoGdaReadSignal(&g, SIG_FLUSH + (uint32_t)s);
    CHECK(sig == 3, "rank %d: flush: signal from rank %d is %llu right after the barrier, expected 3", c->rank, s,
          (unsigned long long)sig);
    for (int k = 0; k < 3; k++) {
      size_t d = first_diff(c->b + flush_dst(c, s, k), n, seed_at(s, flush_src(c->rank, k)));
      if (d != n && wrong++ < 3)
        CHECK(0, "rank %d: flush: put %d from rank %d differs at byte %zu right after the barrier", c->rank, k, s, d);
    }
  }
  CHECK(wrong == 0, "rank %d: flush: %ld blocks not there after their sender's flush", c->rank, wrong);
  if (c->rank == 0)
    printf("flush: FlushAsync+Wait, FlushPeer, per-peer requests: %d puts per rank complete at their flush\n",
           3 * c->nPeers);
  barrier(c);
}
