/*
 * mp_gda step "flood": a 16-slot ring posted into from 4 threads at once.
 *
 *  flood    a second device communicator with gdaQueueDepth 16: 4 threads
 *           (Immediate, Deferred, CallerOrdered, Immediate independent) post
 *           M ops each on context 0 (puts with signals, put-values, gets,
 *           zero-byte puts with counters, standalone signals): wrap-around,
 *           credits, the ring filling with unpublished posts; per-thread
 *           counters and per-source signal totals exact.
 */
#include "gda.h"

#define FLOOD_DEPTH 16

typedef struct {
  rank_ctx* c;
  const ccoDevComm* dc;
  int t;
  uint64_t sig[MAX_RANKS]; /* signal total sent to each rank */
  uint64_t counted;        /* ops with counter t */
  ccoDevStatus_t st;
} flood_arg;

static void* flood_thread(void* arg) {
  flood_arg* a = arg;
  rank_ctx* c = a->c;
  static const ccoGdaDoorbellMode_t modes[FLOOD_T] = {ccoGdaDoorbellImmediate, ccoGdaDoorbellDeferred,
                                                      ccoGdaDoorbellCallerOrdered, ccoGdaDoorbellImmediate};
  static const ccoCoop_t coops[FLOOD_T] = {ccoCoopThread, ccoCoopWarp, ccoCoopBlock, ccoCoopBlock};
  int t = a->t;
  ccoGda g = ccoGdaHandle(a->dc, 0, modes[t]);
  ccoCoop_t coop = coops[t];
  ccoGdaThreadMode_t tm = t == 3 ? ccoGdaThreadIndependent : ccoGdaThreadAggregate;
  uint32_t me = (uint32_t)c->rank, cnt = (uint32_t)t;
  ccoDevStatus_t st = ccoDevSuccess;
  size_t slot = ((size_t)c->rank * FLOOD_T + (size_t)t);
  for (long j = 0; j < g_opt.flood && st == ccoDevSuccess; j++) {
    int p = c->peers[(j + t) % c->nPeers];
    size_t src = 8u * (size_t)(j % 1000);
    if (j % 50 == 49) {
      st = ccoGdaSignal(&g, p, ccoGdaSigInc(me), coop);
      a->sig[p] += 1;
    } else if (j % 4 == 0) {
      st = ccoGdaPut(&g, p, c->winB, c->L.flood + slot * 64, c->winA, src, 64, ccoGdaSigInc(me), CCO_GDA_NO_COUNTER,
                     coop, tm);
      a->sig[p] += 1;
    } else if (j % 4 == 1) {
      st = ccoGdaPutValue(&g, p, c->winB, c->L.floodVal + slot * 8, (uint64_t)j, 8, ccoGdaSigAdd(me, 3), cnt, coop,
                          tm);
      a->sig[p] += 3, a->counted++;
    } else if (j % 4 == 2) {
      st = ccoGdaGet(&g, p, c->winB, c->L.floodGet + (size_t)t * 64, c->winA, src, 64, cnt, coop, tm);
      a->counted++;
    } else {
      st = ccoGdaPut(&g, p, c->winB, c->L.flood + slot * 64, c->winA, src, 0, ccoGdaSigNone(), cnt, coop, tm);
      a->counted++;
    }
  }
  if (st == ccoDevSuccess) st = ccoGdaFlush(&g, coop);
  /* This thread's ops are all complete, so all counted. */
  if (st == ccoDevSuccess) {
    uint64_t got = ccoGdaReadCounter(&g, cnt);
    CHECK(got == a->counted, "rank %d: flood thread %d: counter %llu after its flush, expected %llu", c->rank, t,
          (unsigned long long)got, (unsigned long long)a->counted);
  }
  a->st = st;
  return NULL;
}

void test_flood(rank_ctx* c) {
  if (!has_gda(c) || !step_selected("flood")) return;
  watchdog_arm("flood", 120);
  ccoDevCommRequirements reqs = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.gdaConnectionType = g_opt.conn;
  reqs.gdaQueueDepth = FLOOD_DEPTH;
  reqs.gdaSignalCount = MAX_RANKS;
  reqs.gdaCounterCount = FLOOD_T;
  ccoDevComm dc16;
  memset(&dc16, 0, sizeof(dc16));
  ccoResult_t r = ccoDevCommCreate(c->comm, &reqs, &dc16);
  CHECK(r == ccoSuccess, "rank %d: ccoDevCommCreate (depth %d): %s (%s)", c->rank, FLOOD_DEPTH, ccoGetErrorString(r),
        ccoGetLastError(c->comm));
  if (r != ccoSuccess) return;
  barrier(c); /* every rank's slots exist before anyone posts */
  flood_arg args[FLOOD_T];
  pthread_t th[FLOOD_T];
  double t0 = mp_now();
  for (int t = 0; t < FLOOD_T && c->nPeers; t++) {
    memset(&args[t], 0, sizeof(args[t]));
    args[t].c = c, args[t].dc = &dc16, args[t].t = t;
    pthread_create(&th[t], NULL, flood_thread, &args[t]);
  }
  uint64_t mine[MAX_RANKS] = {0};
  for (int t = 0; t < FLOOD_T && c->nPeers; t++) {
    pthread_join(th[t], NULL);
    DEV_OK(args[t].st, "flood thread");
    for (int p = 0; p < c->nRanks; p++) mine[p] += args[t].sig[p];
  }
  double took = elapsed(t0);
  /* Everyone's totals, then each source's slot here must match. */
  uint64_t all[MAX_RANKS * MAX_RANKS];
  MUST(ccoBootstrapAllGather(c->comm, mine, all, sizeof(mine)));
  barrier(c);
  ccoGda g = ccoGdaHandle(&dc16, 0, ccoGdaDoorbellImmediate);
  long wrong = 0;
  for (int s = 0; s < c->nRanks; s++) {
    uint64_t want = all[(size_t)s * MAX_RANKS + (size_t)c->rank], got = ccoGdaReadSignal(&g, (uint32_t)s);
    if (got != want && wrong++ < 3)
      CHECK(0, "rank %d: flood: signal from rank %d is %llu, expected %llu", c->rank, s, (unsigned long long)got,
            (unsigned long long)want);
  }
  CHECK(wrong == 0, "rank %d: flood: %ld signal slots wrong", c->rank, wrong);
  if (c->rank == 0)
    printf("flood: %d threads x %ld ops through a %d-slot ring to %d peers in %.2f s (%.0f ops/s), counters and "
           "signals exact\n",
           FLOOD_T, g_opt.flood, FLOOD_DEPTH, c->nPeers, took, took > 0 ? FLOOD_T * (double)g_opt.flood / took : 0.0);
  barrier(c); /* nobody still signals dc16 */
  MUST(ccoDevCommDestroy(c->comm, &dc16));
  barrier(c);
}
