/*
 * mp_gda step "conn": which peers have endpoints, and the calls that must
 * be refused (toward a rank without an endpoint, with bad arguments, or
 * without GDA at all) and must post nothing.
 *
 *  conn     the endpoint table (ccoGdaHasPeer, ccoGdaTeamPeer) against the
 *           topology; ops of every kind to a rank without an endpoint return
 *           ccoDevNoPeer at once; bad peers, window ranges, put-value sizes
 *           and alignment, signal and counter indices, contexts and requests
 *           return ccoDevInvalid at every scope and thread mode, and post
 *           nothing; NONE (or CROSSNODE / RAIL on one host): dc.gda == 0 and
 *           every call returns ccoDevUnsupported.
 */
#include "gda.h"

/* Every call on handle g toward `peer` must return `want`. */
static long expect_all(rank_ctx* c, const ccoGda* g, int peer, ccoDevStatus_t want, char* first, size_t firstSize) {
  long wrong = 0;
  ccoWindow_t A = c->winA, B = c->winB;
#define EXPECT(call)                                                                           \
  do {                                                                                         \
    ccoDevStatus_t st_ = (call);                                                               \
    if (st_ != want) {                                                                         \
      if (!wrong) snprintf(first, firstSize, "%s -> %s", #call, ccoDevStatusName(st_));       \
      wrong++;                                                                                 \
    }                                                                                          \
  } while (0)
  for (int k = 0; k < 6; k++) {
    ccoCoop_t coop = kCoops[k % 3];
    ccoGdaThreadMode_t tm = k / 3 ? ccoGdaThreadIndependent : ccoGdaThreadAggregate;
    EXPECT(ccoGdaPut(g, peer, B, 0, A, 0, 64, ccoGdaSigInc(0), 0, coop, tm));
    EXPECT(ccoGdaPutValue(g, peer, B, 8, 1, 8, ccoGdaSigNone(), CCO_GDA_NO_COUNTER, coop, tm));
    EXPECT(ccoGdaGet(g, peer, B, 0, A, 0, 64, 0, coop, tm));
    EXPECT(ccoGdaSignal(g, peer, ccoGdaSigInc(0), coop));
    EXPECT(ccoGdaCounter(g, peer, 0, coop));
    if (peer != -1) EXPECT(ccoGdaFlushPeer(g, peer, coop)); /* -1 there means every peer */
  }
#undef EXPECT
  return wrong;
}

void test_conn(rank_ctx* c) {
  if (!step_selected("conn")) return;
  watchdog_arm("conn", 60);
  barrier(c);
  const ccoDevComm* dc = &c->dc;
  ccoGda g = ccoGdaHandle(dc, 0, ccoGdaDoorbellImmediate);
  int wantGda = g_opt.conn == ccoGdaConnectionFull || (g_opt.conn != ccoGdaConnectionNone && c->nNodes > 1);
  CHECK(has_gda(c) == wantGda, "rank %d: conn: dc.gda is %s with %d hosts and connection type %u", c->rank,
        has_gda(c) ? "set" : "0", c->nNodes, g_opt.conn);
  CHECK(dc->gdaConnectionType == g_opt.conn, "rank %d: dc.gdaConnectionType %u, asked for %u", c->rank,
        dc->gdaConnectionType, g_opt.conn);
  char first[200] = "";
  if (!has_gda(c)) {
    /* No GDA: every call says so, nothing waits. */
    long wrong = 0;
    for (int q = -1; q <= c->nRanks; q++) wrong += expect_all(c, &g, q, ccoDevUnsupported, first, sizeof(first));
    CHECK(wrong == 0, "rank %d: without GDA %ld calls did not return ccoDevUnsupported (first: %s)", c->rank, wrong,
          first);
    ccoGdaRequest req;
    CHECK(ccoGdaFlush(&g, ccoCoopBlock) == ccoDevUnsupported, "rank %d: ccoGdaFlush without GDA", c->rank);
    CHECK(ccoGdaFlushAsync(&g, -1, &req, ccoCoopWarp) == ccoDevUnsupported && !req.valid,
          "rank %d: ccoGdaFlushAsync without GDA", c->rank);
    CHECK(ccoGdaWait(&g, &req, ccoCoopWarp) == ccoDevUnsupported, "rank %d: ccoGdaWait without GDA", c->rank);
    CHECK(ccoGdaWaitSignal(&g, 0, 1, WAIT_NS, ccoCoopBlock) == ccoDevUnsupported, "rank %d: ccoGdaWaitSignal", c->rank);
    CHECK(ccoGdaWaitCounter(&g, 0, 1, WAIT_NS, ccoCoopBlock) == ccoDevUnsupported, "rank %d: ccoGdaWaitCounter",
          c->rank);
    CHECK(!ccoGdaSignalPtr(&g, 0) && !ccoGdaCounterPtr(&g, 0) && ccoGdaReadSignal(&g, 0) == 0,
          "rank %d: signal / counter pointers without GDA", c->rank);
    int peers = 0;
    for (int q = 0; q < c->nRanks; q++) peers += ccoGdaHasPeer(&g, q);
    CHECK(peers == 0, "rank %d: %d peers without GDA", c->rank, peers);
    ccoGdaBarrierSession s = ccoGdaBarrierSessionInit(dc, &g, 0, ccoCoopBlock);
    CHECK(ccoGdaBarrierSyncTimeout(&s, WAIT_NS) == ccoDevUnsupported, "rank %d: GDA barrier without GDA", c->rank);
    if (c->rank == 0)
      printf("conn: connection type %u on %d host(s): dc.gda == 0, every GDA call returns ccoDevUnsupported\n",
             g_opt.conn, c->nNodes);
    barrier(c);
    return;
  }
  /* The endpoint table and the GDA team. */
  long tableWrong = 0;
  for (int q = 0; q < c->nRanks; q++)
    if (ccoGdaHasPeer(&g, q) != expect_peer(c, c->rank, q)) tableWrong++;
  CHECK(tableWrong == 0, "rank %d: %ld entries of the endpoint table differ from the topology", c->rank, tableWrong);
  ccoTeam team = dc->teams[ccoGdaTeamKind(dc)];
  int inTeam = 0;
  for (int i = 0; i < team.nRanks; i++) {
    int q = ccoGdaTeamPeer(dc, i);
    CHECK(q >= 0 && q < c->nRanks && (q == c->rank || ccoGdaHasPeer(&g, q)),
          "rank %d: GDA team member %d (rank %d) has no endpoint", c->rank, i, q);
    inTeam += q >= 0 && ccoGdaHasPeer(&g, q);
  }
  CHECK(inTeam == c->nPeers && ccoGdaTeamPeer(dc, team.nRanks) == -1 && ccoGdaTeamPeer(dc, -1) == -1,
        "rank %d: GDA team of %d has %d members with endpoints, this rank has %d peers", c->rank, team.nRanks, inTeam,
        c->nPeers);
  /* Ranks without an endpoint: ccoDevNoPeer, at once. */
  long noPeerWrong = 0, noPeerRanks = 0;
  double t0 = mp_now();
  for (int q = 0; q < c->nRanks; q++) {
    if (expect_peer(c, c->rank, q)) continue;
    noPeerRanks++;
    noPeerWrong += expect_all(c, &g, q, ccoDevNoPeer, first, sizeof(first));
    ccoGdaRequest req;
    CHECK(ccoGdaFlushAsync(&g, q, &req, ccoCoopBlock) == ccoDevNoPeer && !req.valid,
          "rank %d: ccoGdaFlushAsync toward rank %d without an endpoint", c->rank, q);
  }
  double noPeerTime = elapsed(t0);
  CHECK(noPeerWrong == 0 && noPeerTime < 1.0,
        "rank %d: %ld calls toward ranks without an endpoint did not return ccoDevNoPeer (first: %s), in %.3f s",
        c->rank, noPeerWrong, first, noPeerTime);
  /* Invalid arguments, toward a real peer when there is one. */
  long invalidWrong = 0;
  uint64_t countersBefore[NCOUNTERS];
  for (int i = 0; i < NCOUNTERS; i++) countersBefore[i] = ccoGdaReadCounter(&g, (uint32_t)i);
  invalidWrong += expect_all(c, &g, -1, ccoDevInvalid, first, sizeof(first));
  invalidWrong += expect_all(c, &g, c->nRanks, ccoDevInvalid, first, sizeof(first));
  ccoGda noCtx = ccoGdaHandle(dc, NCONTEXTS, ccoGdaDoorbellImmediate);
  if (c->nPeers) invalidWrong += expect_all(c, &noCtx, c->peers[0], ccoDevInvalid, first, sizeof(first));
  if (c->nPeers) {
    int p = c->peers[0];
    ccoWindow_t A = c->winA, B = c->winB;
    size_t aSize = (size_t)A->size, bSize = (size_t)B->size; /* as registered (maybe rounded up) */
    ccoGdaSignalSpec badOp = ccoGdaSigInc(0);
    badOp.op = 7;
#define EXPECT_INVALID(call)                                                                  \
  do {                                                                                        \
    ccoDevStatus_t st_ = (call);                                                              \
    if (st_ != ccoDevInvalid) {                                                               \
      if (!invalidWrong) snprintf(first, sizeof(first), "%s -> %s", #call, ccoDevStatusName(st_)); \
      invalidWrong++;                                                                         \
    }                                                                                         \
  } while (0)
    for (int k = 0; k < 6; k++) {
      ccoCoop_t coop = kCoops[k % 3];
      ccoGdaThreadMode_t tm = k / 3 ? ccoGdaThreadIndependent : ccoGdaThreadAggregate;
      /* window ranges */
      EXPECT_INVALID(ccoGdaPut(&g, p, B, bSize - 4, A, 0, 8, ccoGdaSigNone(), CCO_GDA_NO_COUNTER, coop, tm));
      EXPECT_INVALID(ccoGdaPut(&g, p, B, 0, A, aSize - 4, 8, ccoGdaSigNone(), CCO_GDA_NO_COUNTER, coop, tm));
      EXPECT_INVALID(ccoGdaPut(&g, p, B, bSize + 1, A, 0, 0, ccoGdaSigNone(), CCO_GDA_NO_COUNTER, coop, tm));
      EXPECT_INVALID(ccoGdaPut(&g, p, B, 64, A, 64, (size_t)-32, ccoGdaSigNone(), CCO_GDA_NO_COUNTER, coop, tm));
      EXPECT_INVALID(ccoGdaGet(&g, p, B, bSize - 4, A, 0, 8, CCO_GDA_NO_COUNTER, coop, tm));
      EXPECT_INVALID(ccoGdaGet(&g, p, B, 0, A, aSize, 1, CCO_GDA_NO_COUNTER, coop, tm));
      EXPECT_INVALID(ccoGdaGet(&g, p, B, 8, A, 8, (size_t)-1, CCO_GDA_NO_COUNTER, coop, tm));
      /* put-value sizes, alignment, range */
      EXPECT_INVALID(ccoGdaPutValue(&g, p, B, 0, 1, 3, ccoGdaSigNone(), CCO_GDA_NO_COUNTER, coop, tm));
      EXPECT_INVALID(ccoGdaPutValue(&g, p, B, 0, 1, 16, ccoGdaSigNone(), CCO_GDA_NO_COUNTER, coop, tm));
      EXPECT_INVALID(ccoGdaPutValue(&g, p, B, 0, 1, 0, ccoGdaSigNone(), CCO_GDA_NO_COUNTER, coop, tm));
      EXPECT_INVALID(ccoGdaPutValue(&g, p, B, 2, 1, 4, ccoGdaSigNone(), CCO_GDA_NO_COUNTER, coop, tm));
      EXPECT_INVALID(ccoGdaPutValue(&g, p, B, 12, 1, 8, ccoGdaSigNone(), CCO_GDA_NO_COUNTER, coop, tm));
      EXPECT_INVALID(ccoGdaPutValue(&g, p, B, bSize, 1, 8, ccoGdaSigNone(), CCO_GDA_NO_COUNTER, coop, tm));
      /* signal and counter indices, signal ops */
      EXPECT_INVALID(ccoGdaPut(&g, p, B, 0, A, 0, 8, ccoGdaSigInc(NSIGNALS), CCO_GDA_NO_COUNTER, coop, tm));
      EXPECT_INVALID(ccoGdaPut(&g, p, B, 0, A, 0, 8, ccoGdaSigAdd(0xffffffffu, 1), CCO_GDA_NO_COUNTER, coop, tm));
      EXPECT_INVALID(ccoGdaPut(&g, p, B, 0, A, 0, 8, badOp, CCO_GDA_NO_COUNTER, coop, tm));
      EXPECT_INVALID(ccoGdaPut(&g, p, B, 0, A, 0, 8, ccoGdaSigNone(), NCOUNTERS, coop, tm));
      EXPECT_INVALID(ccoGdaPutValue(&g, p, B, 0, 1, 8, ccoGdaSigInc(NSIGNALS + 5), CCO_GDA_NO_COUNTER, coop, tm));
      EXPECT_INVALID(ccoGdaPutValue(&g, p, B, 0, 1, 8, ccoGdaSigNone(), NCOUNTERS + 100, coop, tm));
      EXPECT_INVALID(ccoGdaGet(&g, p, B, 0, A, 0, 8, NCOUNTERS, coop, tm));
      EXPECT_INVALID(ccoGdaSignal(&g, p, ccoGdaSigInc(NSIGNALS), coop));
      EXPECT_INVALID(ccoGdaSignal(&g, p, ccoGdaSigNone(), coop));
      EXPECT_INVALID(ccoGdaSignal(&g, p, badOp, coop));
      EXPECT_INVALID(ccoGdaCounter(&g, p, NCOUNTERS, coop));
      EXPECT_INVALID(ccoGdaCounter(&g, p, CCO_GDA_NO_COUNTER, coop));
      /* waits and flushes */
      EXPECT_INVALID(ccoGdaWaitSignal(&g, NSIGNALS, 1, WAIT_NS, coop));
      EXPECT_INVALID(ccoGdaWaitCounter(&g, NCOUNTERS, 1, WAIT_NS, coop));
      EXPECT_INVALID(ccoGdaFlushPeer(&g, -2, coop));
      EXPECT_INVALID(ccoGdaFlushPeer(&g, c->nRanks, coop));
      EXPECT_INVALID(ccoGdaFlush(&noCtx, coop));
    }
#undef EXPECT_INVALID
  }
  /* Nothing was posted: no counter moved, a flush completes at once, and the
   * proxy found nothing to complain about. */
  int moved = 0;
  for (int i = 0; i < NCOUNTERS; i++) moved += ccoGdaReadCounter(&g, (uint32_t)i) != countersBefore[i];
  DEV_OK(ccoGdaFlush(&g, ccoCoopBlock), "ccoGdaFlush after invalid calls");
  ccoResult_t async = ccoSuccess;
  MUST(ccoCommGetAsyncError(c->comm, &async));
  CHECK(invalidWrong == 0 && moved == 0 && async == ccoSuccess,
        "rank %d: %ld invalid calls did not return ccoDevInvalid (first: %s); %d counters moved; async error %s",
        c->rank, invalidWrong, first, moved, ccoGetErrorString(async));
  if (c->rank == 0)
    printf("conn: connection type %u on %d host(s): endpoint table matches the topology (%d peers here); "
           "%ld ranks without an endpoint answer ccoDevNoPeer in %.1f ms; invalid arguments refused\n",
           g_opt.conn, c->nNodes, c->nPeers, noPeerRanks, noPeerTime * 1e3);
  barrier(c);
}
