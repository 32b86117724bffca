/*
 * mp_gda steps "barrier" and "world": the GDA barrier over the rail team,
 * and the world barrier (LSA, rail GDA, LSA again), each checked by the
 * blocks written before it being there after it.
 *
 *  barrier  GDA barriers 0 and 1 over the rail team, warp and block scope
 *           alternately, 20 rounds: each rank puts a block to every rail
 *           peer, syncs, and finds the block of every rail peer of that
 *           round (double buffered); thread scope, a Deferred handle and a
 *           barrier index out of range are invalid. With one host the rail
 *           team has one member and sync returns at once.
 *  world    world barriers 0 and 1 over every rank, 20 rounds: each rank
 *           writes a block into every rank it reaches (LSA stores on its
 *           host, GDA puts to its peers elsewhere), syncs, and finds every
 *           block written to it that round; an index out of range is
 *           invalid; on several hosts a Deferred handle and thread scope are
 *           invalid, and without GDA the barrier is unsupported.
 */
#include "gda.h"

#define BAR_ROUNDS 20

static size_t bar_src(int r, int round) { return 8u * (size_t)(round * 131 + r * 7); }

void test_barrier(rank_ctx* c) {
  if (!has_gda(c) || !step_begin(c, "barrier", 90)) return;
  ccoTeam rail = c->dc.teams[ccoTeamRail];
  ccoGda g = ccoGdaHandle(&c->dc, 0, ccoGdaDoorbellImmediate);
  ccoGda deferred = ccoGdaHandle(&c->dc, 0, ccoGdaDoorbellDeferred);
  /* Misuse first (nothing is posted). */
  ccoGdaBarrierSession s = ccoGdaBarrierSessionInit(&c->dc, &g, 0, ccoCoopThread);
  CHECK(ccoGdaBarrierSyncTimeout(&s, WAIT_NS) == ccoDevInvalid, "rank %d: GDA barrier at thread scope", c->rank);
  s = ccoGdaBarrierSessionInit(&c->dc, &deferred, 0, ccoCoopWarp);
  CHECK(ccoGdaBarrierSyncTimeout(&s, WAIT_NS) == ccoDevInvalid, "rank %d: GDA barrier with a Deferred handle", c->rank);
  s = ccoGdaBarrierSessionInit(&c->dc, &g, RAIL_BARRIERS, ccoCoopWarp);
  CHECK(ccoGdaBarrierSyncTimeout(&s, WAIT_NS) == ccoDevInvalid, "rank %d: GDA barrier index out of range", c->rank);
  double t0 = mp_now();
  long wrong = 0;
  for (int round = 0; round < BAR_ROUNDS; round++) {
    int parity = round % 2;
    for (int i = 0; i < rail.nRanks; i++) {
      int q = ccoDevTeamRankToWorld(&c->dc, ccoTeamRail, i);
      if (q == c->rank) continue;
      DEV_OK(ccoGdaPut(&g, q, c->winB, c->L.bar + ((size_t)parity * (size_t)c->nRanks + (size_t)c->rank) * BAR_SLOT,
                       c->winA, bar_src(c->rank, round), BAR_SLOT, ccoGdaSigNone(), CCO_GDA_NO_COUNTER, ccoCoopBlock,
                       ccoGdaThreadAggregate),
             "ccoGdaPut (before the barrier)");
    }
    ccoCoop_t coop = parity ? ccoCoopBlock : ccoCoopWarp;
    s = ccoGdaBarrierSessionInit(&c->dc, &g, (uint32_t)parity, coop);
    if (!DEV_OK(ccoGdaBarrierSyncTimeout(&s, WAIT_NS), "ccoGdaBarrierSyncTimeout")) break;
    for (int i = 0; i < rail.nRanks; i++) {
      int q = ccoDevTeamRankToWorld(&c->dc, ccoTeamRail, i);
      if (q == c->rank) continue;
      const char* got = c->b + c->L.bar + ((size_t)parity * (size_t)c->nRanks + (size_t)q) * BAR_SLOT;
      size_t d = first_diff(got, BAR_SLOT, seed_at(q, bar_src(q, round)));
      if (d != BAR_SLOT && wrong++ < 3)
        CHECK(0, "rank %d: barrier round %d: block of rail peer %d differs at byte %zu after the barrier", c->rank,
              round, q, d);
    }
  }
  double took = elapsed(t0);
  CHECK(wrong == 0, "rank %d: barrier: %ld blocks missing after a barrier", c->rank, wrong);
  DEV_OK(ccoGdaFlush(&g, ccoCoopBlock), "ccoGdaFlush");
  if (c->rank == 0)
    printf("barrier: %d rounds over a rail team of %d (warp and block scope, barriers 0 and 1): every rail peer's "
           "put there after each, %.0f us per round\n",
           BAR_ROUNDS, rail.nRanks, took * 1e6 / BAR_ROUNDS);
  barrier(c);
}

/* --------------------------------------------------------- world barrier */

/* Whether rank `from` writes to rank `to` in the world-barrier rounds: by
 * LSA stores on one host, by GDA puts where it has an endpoint. */
static int world_writes(const rank_ctx* c, int from, int to) {
  if (from == to) return 0;
  return c->nodeOf[from] == c->nodeOf[to] || (has_gda(c) && expect_peer(c, from, to));
}

/* Every round each rank writes a block into every rank it reaches (LSA
 * stores to its host, GDA puts to the others), passes world barrier
 * round % 2, and checks every block written to it that round: a barrier
 * that let a rank through early shows up as last round's block. */
void test_world_barrier(rank_ctx* c) {
  if (!step_begin(c, "world", 90)) return;
  const ccoDevComm* dc = &c->dc;
  ccoGda g = ccoGdaHandle(dc, 0, ccoGdaDoorbellImmediate);
  const ccoGda* gp = has_gda(c) ? &g : NULL;
  ccoBarrierSession s = ccoBarrierSessionInit(dc, gp, WORLD_BARRIERS, ccoCoopWarp);
  CHECK(ccoBarrierSyncTimeout(&s, WAIT_NS) == ccoDevInvalid, "rank %d: world barrier index out of range", c->rank);
  if (c->nNodes > 1 && !has_gda(c)) {
    /* Several hosts without GDA: every rank is told at once. */
    s = ccoBarrierSessionInit(dc, NULL, 0, ccoCoopBlock);
    ccoDevStatus_t st = ccoBarrierSyncTimeout(&s, WAIT_NS);
    ccoBarrierSessionEnd(&s);
    CHECK(st == ccoDevUnsupported, "rank %d: world barrier over %d hosts without GDA: %s", c->rank, c->nNodes,
          ccoDevStatusName(st));
    barrier(c);
    return;
  }
  if (c->nNodes > 1) {
    /* Misuse on several hosts is refused before any step, so no rank waits. */
    ccoGda deferred = ccoGdaHandle(dc, 0, ccoGdaDoorbellDeferred);
    s = ccoBarrierSessionInit(dc, &deferred, 0, ccoCoopWarp);
    CHECK(ccoBarrierSyncTimeout(&s, WAIT_NS) == ccoDevInvalid, "rank %d: world barrier with a Deferred handle",
          c->rank);
    s = ccoBarrierSessionInit(dc, gp, 0, ccoCoopThread);
    CHECK(ccoBarrierSyncTimeout(&s, WAIT_NS) == ccoDevInvalid, "rank %d: world barrier at thread scope", c->rank);
  }
  double t0 = mp_now();
  long wrong = 0, written = 0;
  int round = 0;
  for (; round < BAR_ROUNDS; round++) {
    int parity = round % 2;
    size_t mySlot = c->L.world + ((size_t)parity * (size_t)c->nRanks + (size_t)c->rank) * BAR_SLOT;
    for (int q = 0; q < c->nRanks; q++) {
      if (!world_writes(c, c->rank, q)) continue;
      if (c->nodeOf[q] == c->nodeOf[c->rank]) {
        void* peer = NULL;
        ccoResult_t pr = ccoGetPeerPtr(c->comm, c->b + mySlot, q, &peer);
        if (pr != ccoSuccess) {
          CHECK(0, "rank %d: ccoGetPeerPtr(rank %d): %s (%s)", c->rank, q, ccoGetErrorString(pr),
                ccoGetLastError(c->comm));
          break;
        }
        memcpy(peer, c->a + bar_src(c->rank, round), BAR_SLOT);
      } else {
        DEV_OK(ccoGdaPut(&g, q, c->winB, mySlot, c->winA, bar_src(c->rank, round), BAR_SLOT, ccoGdaSigNone(),
                         CCO_GDA_NO_COUNTER, ccoCoopThread, ccoGdaThreadAggregate),
               "ccoGdaPut (before the world barrier)");
      }
      written++;
    }
    s = ccoBarrierSessionInit(dc, gp, (uint32_t)parity, parity ? ccoCoopBlock : ccoCoopWarp);
    ccoDevStatus_t st = ccoBarrierSyncTimeout(&s, WAIT_NS);
    ccoBarrierSessionEnd(&s);
    if (!DEV_OK(st, "ccoBarrierSyncTimeout")) break;
    for (int q = 0; q < c->nRanks; q++) {
      if (!world_writes(c, q, c->rank)) continue;
      const char* got = c->b + c->L.world + ((size_t)parity * (size_t)c->nRanks + (size_t)q) * BAR_SLOT;
      size_t d = first_diff(got, BAR_SLOT, seed_at(q, bar_src(q, round)));
      if (d != BAR_SLOT && wrong++ < 3)
        CHECK(0, "rank %d: world barrier round %d: block of rank %d (host %d) differs at byte %zu after the barrier",
              c->rank, round, q, c->nodeOf[q], d);
    }
  }
  double took = elapsed(t0);
  CHECK(round == BAR_ROUNDS && wrong == 0, "rank %d: world barrier: %d of %d rounds, %ld blocks missing after one",
        c->rank, round, BAR_ROUNDS, wrong);
  if (has_gda(c)) DEV_OK(ccoGdaFlush(&g, ccoCoopBlock), "ccoGdaFlush");
  if (c->rank == 0)
    printf("world barrier: %d rounds over %d ranks on %d host(s) (warp and block scope, barriers 0 and 1), every "
           "block written before it (%ld on rank 0, LSA stores and GDA puts) there after it, %.0f us per round\n",
           BAR_ROUNDS, c->nRanks, c->nNodes, written, took * 1e6 / BAR_ROUNDS);
  barrier(c);
}
