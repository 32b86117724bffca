/*
 * mp_gda steps "ops" and "atomic": every operation of the device API at
 * every scope, thread mode and doorbell mode, and the atomicity of signal
 * adds from several threads and ranks into one slot.
 *
 *  ops      every op (put, putValue of 1/2/4/8 bytes, get, standalone
 *           ccoGdaSignal, ccoGdaCounter) to every peer at each scope (thread,
 *           warp, block) x thread mode (aggregate, independent) x doorbell
 *           mode (Immediate; Deferred and CallerOrdered, then flush): after
 *           each flush the local counters are exact and the gets verified;
 *           the receivers then check every block, value and signal exactly,
 *           without waiting (the senders' flushes came before the barrier).
 *           Deferred and CallerOrdered posts must not run before their
 *           flush (the ring is far from full): the counters stay put for
 *           20 ms. Puts go from a window registered before the device
 *           communicator into one registered after it.
 *  atomic   every rank with rank 0 as a peer adds to signal slot 0 of rank 0
 *           from 3 threads on different contexts (ccoGdaSigAdd with
 *           distinct values, ccoGdaSigInc, zero-byte puts with an add): the
 *           slot reaches the exact total and does not pass it.
 */
#include "gda.h"

static const char* kCoopName[3] = {"thread", "warp", "block"};
static const ccoGdaDoorbellMode_t kModes[3] = {ccoGdaDoorbellImmediate, ccoGdaDoorbellDeferred,
                                               ccoGdaDoorbellCallerOrdered};
static const char* kModeName[3] = {"Immediate", "Deferred", "CallerOrdered"};

typedef struct {
  ccoCoop_t coop;
  ccoGdaThreadMode_t tm;
  int mode;
} combo;

static combo combo_of(int k) {
  combo m = {kCoops[k % 3], (k / 3) % 2 ? ccoGdaThreadIndependent : ccoGdaThreadAggregate, k / 6};
  return m;
}

static size_t ops_put_src(int k, int dst) { return 8u * (size_t)((k * 61 + dst * 17) % 4096); }
static size_t ops_put_bytes(int k, int dst) { return 1024u + 8u * (size_t)k + (size_t)dst; }
static size_t ops_put_dst(const rank_ctx* c, int k, int src) {
  return c->L.opsRecv + ((size_t)k * (size_t)c->nRanks + (size_t)src) * OPS_SLOT + (size_t)(k % 8);
}
static size_t ops_val_dst(const rank_ctx* c, int k, int src, int j) {
  return c->L.opsVals + (((size_t)k * (size_t)c->nRanks + (size_t)src) * 4 + (size_t)j) * 8;
}
static uint64_t ops_value(int src, int k, int j) { return key4(0x7a1, (uint64_t)src, (uint64_t)k, (uint64_t)j); }
static size_t ops_get_src(int k, int getter) { return 8u * (size_t)((k * 29 + getter * 7) % 4096); }
static size_t ops_get_bytes(int k, int getter) { return 515u + 8u * (size_t)k + (size_t)getter; }

void test_ops(rank_ctx* c) {
  if (!has_gda(c) || !step_begin(c, "ops", 90)) return;
  double t0 = mp_now();
  const ccoDevComm* dc = &c->dc;
  long posted = 0, deferredHeld = 0;
  uint64_t expPut = 0, expVal = 0, expGet = 0, expOp = 0;
  for (int k = 0; k < NCOMBOS; k++) {
    combo m = combo_of(k);
    ccoGda g = ccoGdaHandle(dc, (uint32_t)(k % NCONTEXTS), kModes[m.mode]);
    char what[96];
    snprintf(what, sizeof(what), "%s scope, %s, %s", kCoopName[k % 3],
             m.tm == ccoGdaThreadAggregate ? "aggregate" : "independent", kModeName[m.mode]);
    uint64_t before[4];
    for (int i = 0; i < 4; i++) before[i] = ccoGdaReadCounter(&g, (uint32_t)i);
    for (int i = 0; i < c->nPeers; i++) {
      int p = c->peers[i];
      ccoDevStatus_t st;
      st = ccoGdaPut(&g, p, c->winB, ops_put_dst(c, k, c->rank), c->winA, ops_put_src(k, p), ops_put_bytes(k, p),
                     ccoGdaSigInc(SIG_OPS + (uint32_t)c->rank), CNT_PUT, m.coop, m.tm);
      DEV_OK(st, "ccoGdaPut");
      for (int j = 0; j < 4; j++) {
        st = ccoGdaPutValue(&g, p, c->winB, ops_val_dst(c, k, c->rank, j), ops_value(c->rank, k, j), 1u << j,
                            ccoGdaSigAdd(SIG_VAL + (uint32_t)c->rank, (uint64_t)(k + 1) * (uint64_t)(j + 1)),
                            CNT_VAL, m.coop, m.tm);
        DEV_OK(st, "ccoGdaPutValue");
      }
      st = ccoGdaGet(&g, p, c->winB, c->L.opsGet + ((size_t)k * (size_t)c->nRanks + (size_t)p) * OPS_SLOT,
                     c->winA, ops_get_src(k, c->rank), ops_get_bytes(k, c->rank), CNT_GET, m.coop, m.tm);
      DEV_OK(st, "ccoGdaGet");
      DEV_OK(ccoGdaSignal(&g, p, ccoGdaSigAdd(SIG_STAND + (uint32_t)c->rank, 7), m.coop), "ccoGdaSignal(add)");
      DEV_OK(ccoGdaSignal(&g, p, ccoGdaSigInc(SIG_STAND + (uint32_t)c->rank), m.coop), "ccoGdaSignal(inc)");
      DEV_OK(ccoGdaCounter(&g, p, CNT_OP, m.coop), "ccoGdaCounter");
      posted += 9;
    }
    expPut += (uint64_t)c->nPeers, expVal += 4u * (uint64_t)c->nPeers;
    expGet += (uint64_t)c->nPeers, expOp += (uint64_t)c->nPeers;
    /* Deferred / CallerOrdered: nothing is published before the flush. */
    if (m.mode != 0 && k % 6 == 0 && c->nPeers) {
      mp_sleep(0.02);
      int held = 1;
      for (int i = 0; i < 4; i++) held &= ccoGdaReadCounter(&g, (uint32_t)i) == before[i];
      CHECK(held, "rank %d: ops (%s): counters moved before the flush published the posts", c->rank, what);
      deferredHeld += held;
    }
    DEV_OK(ccoGdaFlush(&g, m.coop), "ccoGdaFlush");
    uint64_t got[4];
    for (int i = 0; i < 4; i++) got[i] = ccoGdaReadCounter(&g, (uint32_t)i);
    CHECK(got[CNT_PUT] == expPut && got[CNT_VAL] == expVal && got[CNT_GET] == expGet && got[CNT_OP] == expOp,
          "rank %d: ops (%s): counters after flush put %llu/%llu value %llu/%llu get %llu/%llu counter %llu/%llu",
          c->rank, what, (unsigned long long)got[CNT_PUT], (unsigned long long)expPut,
          (unsigned long long)got[CNT_VAL], (unsigned long long)expVal, (unsigned long long)got[CNT_GET],
          (unsigned long long)expGet, (unsigned long long)got[CNT_OP], (unsigned long long)expOp);
    /* The gets are complete: their data is here. */
    for (int i = 0; i < c->nPeers; i++) {
      int p = c->peers[i];
      size_t n = ops_get_bytes(k, c->rank);
      const char* dst = c->b + c->L.opsGet + ((size_t)k * (size_t)c->nRanks + (size_t)p) * OPS_SLOT;
      size_t d = first_diff(dst, n, seed_at(p, ops_get_src(k, c->rank)));
      CHECK(d == n, "rank %d: ops (%s): get of %zu B from rank %d differs at byte %zu", c->rank, what, n, p, d);
    }
  }
  barrier(c);
  /* What the peers sent: every sender flushed before the barrier. */
  long wrong = 0;
  for (int i = 0; i < c->nPeers; i++) {
    int s = c->peers[i];
    ccoGda g = ccoGdaHandle(dc, 0, ccoGdaDoorbellImmediate);
    uint64_t valSum = 0;
    for (int k = 0; k < NCOMBOS; k++) {
      size_t n = ops_put_bytes(k, c->rank);
      size_t d = first_diff(c->b + ops_put_dst(c, k, s), n, seed_at(s, ops_put_src(k, c->rank)));
      if (d != n && wrong++ < 4)
        CHECK(0, "rank %d: ops: put %d from rank %d (%zu B) differs at byte %zu", c->rank, k, s, n, d);
      for (int j = 0; j < 4; j++) {
        uint64_t cell = 0, want = ops_value(s, k, j);
        memcpy(&cell, c->b + ops_val_dst(c, k, s, j), 8);
        if (j < 3) want &= (1ull << (8u << j)) - 1;
        if (cell != want && wrong++ < 4)
          CHECK(0, "rank %d: ops: put-value %d of %u B from rank %d in combo %d is %#llx, expected %#llx", c->rank,
                j, 1u << j, s, k, (unsigned long long)cell, (unsigned long long)want);
        valSum += (uint64_t)(k + 1) * (uint64_t)(j + 1);
      }
    }
    uint64_t sOps = ccoGdaReadSignal(&g, SIG_OPS + (uint32_t)s), sVal = ccoGdaReadSignal(&g, SIG_VAL + (uint32_t)s);
    uint64_t sStand = ccoGdaReadSignal(&g, SIG_STAND + (uint32_t)s);
    CHECK(sOps == NCOMBOS && sVal == valSum && sStand == 8u * NCOMBOS,
          "rank %d: ops: signals from rank %d: puts %llu (want %d), put-values %llu (want %llu), standalone %llu "
          "(want %d)",
          c->rank, s, (unsigned long long)sOps, NCOMBOS, (unsigned long long)sVal, (unsigned long long)valSum,
          (unsigned long long)sStand, 8 * NCOMBOS);
    DEV_OK(ccoGdaWaitSignal(&g, SIG_OPS + (uint32_t)s, NCOMBOS, WAIT_NS, ccoCoopBlock), "ccoGdaWaitSignal");
  }
  CHECK(wrong == 0, "rank %d: ops: %ld blocks or values wrong", c->rank, wrong);
  if (c->rank == 0)
    printf("ops: %ld posts to %d peers (18 scope/thread/doorbell combinations) verified in %.2f s; "
           "deferred posts held until their flush: %ld of 2 checks\n",
           posted, c->nPeers, elapsed(t0), deferredHeld);
  barrier(c);
}

/* ---------------------------------------------------------------- atomic */

#define ATOM_T 3
#define ATOM_K 240 /* ops per thread */
#define ATOM_TARGET 0

static uint64_t atom_value(int r, int t, int j) {
  return j % 3 == 0 ? (uint64_t)(r + 1) * 100000u + (uint64_t)t * 1000u + (uint64_t)j
         : j % 3 == 1 ? 1u
                      : 3u + (uint64_t)t;
}

typedef struct {
  rank_ctx* c;
  int t;
  ccoDevStatus_t st;
} atom_arg;

static void* atom_thread(void* arg) {
  atom_arg* a = arg;
  rank_ctx* c = a->c;
  ccoGda g = ccoGdaHandle(&c->dc, (uint32_t)(a->t % NCONTEXTS), ccoGdaDoorbellImmediate);
  ccoCoop_t coop = kCoops[a->t % 3];
  ccoDevStatus_t st = ccoDevSuccess;
  for (int j = 0; j < ATOM_K && st == ccoDevSuccess; j++) {
    uint64_t v = atom_value(c->rank, a->t, j);
    if (j % 3 == 0) st = ccoGdaSignal(&g, ATOM_TARGET, ccoGdaSigAdd(0, v), coop);
    else if (j % 3 == 1) st = ccoGdaSignal(&g, ATOM_TARGET, ccoGdaSigInc(0), coop);
    else
      st = ccoGdaPut(&g, ATOM_TARGET, c->winB, c->L.opsRecv, c->winA, 0, 0, ccoGdaSigAdd(0, v), CCO_GDA_NO_COUNTER,
                     coop, ccoGdaThreadAggregate);
  }
  if (st == ccoDevSuccess) st = ccoGdaFlush(&g, coop);
  a->st = st;
  return NULL;
}

void test_atomic(rank_ctx* c) {
  if (!has_gda(c) || !step_begin(c, "atomic", 90)) return;
  double t0 = mp_now();
  ccoGda g = ccoGdaHandle(&c->dc, 0, ccoGdaDoorbellImmediate);
  int participants = 0;
  uint64_t expected = 0;
  for (int r = 0; r < c->nRanks; r++) {
    if (!expect_peer(c, r, ATOM_TARGET)) continue;
    participants++;
    for (int t = 0; t < ATOM_T; t++)
      for (int j = 0; j < ATOM_K; j++) expected += atom_value(r, t, j);
  }
  if (ccoGdaHasPeer(&g, ATOM_TARGET)) {
    atom_arg args[ATOM_T];
    pthread_t th[ATOM_T];
    for (int t = 0; t < ATOM_T; t++) {
      args[t] = (atom_arg){c, t, ccoDevSuccess};
      pthread_create(&th[t], NULL, atom_thread, &args[t]);
    }
    for (int t = 0; t < ATOM_T; t++) {
      pthread_join(th[t], NULL);
      DEV_OK(args[t].st, "atomic signal thread");
    }
  }
  if (c->rank == ATOM_TARGET) {
    ccoDevStatus_t st = ccoGdaWaitSignal(&g, 0, expected, WAIT_NS, ccoCoopBlock);
    DEV_OK(st, "ccoGdaWaitSignal (atomic total)");
  }
  barrier(c);
  if (c->rank == ATOM_TARGET) {
    uint64_t got = ccoGdaReadSignal(&g, 0);
    CHECK(got == expected, "rank %d: atomic: slot 0 is %llu, expected %llu", c->rank, (unsigned long long)got,
          (unsigned long long)expected);
    printf("atomic: slot 0 of rank 0 = %llu (expected %llu) from %d ranks x %d threads x %d adds/incs in %.2f s\n",
           (unsigned long long)got, (unsigned long long)expected, participants, ATOM_T, ATOM_K, elapsed(t0));
  }
  barrier(c);
}
