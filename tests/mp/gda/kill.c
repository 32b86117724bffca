/*
 * mp_gda --kill host|rank [--idle], run instead of the steps: a dead peer,
 * which every survivor must notice, and every call then return, within
 * KILL_BOUND_S.
 *
 * Kill mode (--kill host: every rank of the last rank's host; --kill rank:
 * the last rank alone; start the victims under launchers of their own, as
 * ccorun stops a job's other ranks when one dies). After a barrier the
 * victims stream puts to their peers and SIGKILL themselves after 0.5 s,
 * while the survivors stream 256 KiB puts with signals to every victim that
 * is their peer, flushing every 8. Each survivor must see a flush or put
 * fail, or the async error set, within KILL_BOUND_S; then
 * ccoCommGetAsyncError reports an error, a signal wait returns
 * ccoDevAborted at once, a flush returns, and ccoCommDestroy returns.
 * Survivors without a victim among their peers learn it from a host barrier
 * that must fail. Each survivor prints how long it took to notice. With
 * --idle nothing is in flight at the kill: the victims die without posting
 * and the survivors' first post comes 0.5 s after the death.
 */
#include <signal.h>

#include "gda.h"

#define KILL_BOUND_S 20.0 /* survivors notice a dead peer within this */
#define KILL_AFTER_S 0.5  /* victims die this long after the start */

static int is_victim(const rank_ctx* c, int r) {
  if (!strcmp(g_opt.kill, "rank")) return r == c->nRanks - 1;
  return c->nodeOf[r] == c->nodeOf[c->nRanks - 1];
}

void run_kill(rank_ctx* c) {
  watchdog_arm("kill", KILL_BOUND_S + 40);
  if (!strcmp(g_opt.kill, "host") && c->nNodes < 2) {
    CHECK(0, "rank %d: --kill host needs two hosts or more (CCO_HOSTID)", c->rank);
    return;
  }
  int victims[MAX_RANKS], nVictims = 0;
  for (int i = 0; i < c->nPeers; i++)
    if (is_victim(c, c->peers[i])) victims[nVictims++] = c->peers[i];
  ccoGda g = ccoGdaHandle(&c->dc, 0, ccoGdaDoorbellImmediate);
  if (!barrier(c)) return;
  double t0 = mp_now();
  if (is_victim(c, c->rank)) {
    /* Stream to the peers (unless idle), then die mid-transfer. */
    if (g_opt.idle) mp_sleep(KILL_AFTER_S);
    for (long i = 0; mp_now() - t0 < KILL_AFTER_S; i++)
      for (int k = 0; k < c->nPeers; k++) {
        ccoGdaPut(&g, c->peers[k], c->winB, c->L.kill + (size_t)c->rank * KILL_BYTES, c->winA, 0, KILL_BYTES,
                  ccoGdaSigInc(SIG_KILL + (uint32_t)c->rank), CCO_GDA_NO_COUNTER, ccoCoopBlock,
                  ccoGdaThreadAggregate);
        if (i % 8 == 7) ccoGdaFlush(&g, ccoCoopBlock);
      }
    fflush(stdout);
    raise(SIGKILL);
  }
  /* Survivors. */
  ccoDevStatus_t st = ccoDevSuccess;
  ccoResult_t async = ccoSuccess, hostRes = ccoSuccess;
  long puts = 0;
  const char* how = "";
  /* Idle: the first post toward a victim comes after its death. */
  if (g_opt.idle) mp_sleep(KILL_AFTER_S + 0.5);
  if (nVictims) {
    while (st == ccoDevSuccess && async == ccoSuccess && mp_now() - t0 < KILL_AFTER_S + KILL_BOUND_S) {
      for (int k = 0; k < nVictims && st == ccoDevSuccess; k++, puts++)
        st = ccoGdaPut(&g, victims[k], c->winB, c->L.kill + (size_t)c->rank * KILL_BYTES, c->winA, 0, KILL_BYTES,
                       ccoGdaSigInc(SIG_KILL + (uint32_t)c->rank), CCO_GDA_NO_COUNTER, ccoCoopBlock,
                       ccoGdaThreadAggregate);
      if (st == ccoDevSuccess && puts % 8 < (long)nVictims) st = ccoGdaFlush(&g, ccoCoopBlock);
      ccoCommGetAsyncError(c->comm, &async);
    }
    how = st != ccoDevSuccess ? ccoDevStatusName(st) : async != ccoSuccess ? "async error set" : "nothing";
  } else {
    /* No endpoint to a victim: the host barrier tells. */
    hostRes = ccoBarrierAll(c->comm);
    how = hostRes != ccoSuccess ? "host barrier failed" : "host barrier succeeded";
    CHECK(hostRes != ccoSuccess, "rank %d: kill: a host barrier with a dead rank succeeded", c->rank);
  }
  double noticed = elapsed(t0) - KILL_AFTER_S;
  /* The failure reaches the async error (the proxy sets it, with the abort
   * word, from its thread). */
  while (async == ccoSuccess && elapsed(t0) < KILL_AFTER_S + KILL_BOUND_S) {
    ccoCommGetAsyncError(c->comm, &async);
    if (async == ccoSuccess) mp_sleep(0.01);
  }
  CHECK(async != ccoSuccess, "rank %d: kill: no async error %.1f s after the kill", c->rank, elapsed(t0) - KILL_AFTER_S);
  CHECK(noticed < KILL_BOUND_S, "rank %d: kill: noticed only after %.1f s", c->rank, noticed);
  double w = mp_now();
  ccoDevStatus_t ws = ccoGdaWaitSignal(&g, SIG_NEVER, 1, (uint64_t)(KILL_BOUND_S * 1e9), ccoCoopBlock);
  double waited = elapsed(w);
  CHECK(ws == ccoDevAborted && waited < 1.0, "rank %d: kill: a signal wait returned %s after %.2f s, not ccoDevAborted",
        c->rank, ccoDevStatusName(ws), waited);
  double f = mp_now();
  ccoDevStatus_t fs = ccoGdaFlush(&g, ccoCoopBlock);
  double flushed = elapsed(f);
  CHECK(flushed < KILL_BOUND_S, "rank %d: kill: a flush took %.1f s", c->rank, flushed);
  printf("kill: rank %d (%d victim peers, %ld puts) noticed %.2f s after the kill: %s; async error %s; "
         "signal wait %s; flush %s after %.3f s\n",
         c->rank, nVictims, puts, noticed, how, ccoGetErrorString(async), ccoDevStatusName(ws), ccoDevStatusName(fs),
         flushed);
}
