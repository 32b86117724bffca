/*
 * GDA on the host platform, through the GDA device API itself
 * (cco_gda.h compiled for the host: "kernels" are CPU threads, a
 * thread is a warp and a block of one). The proxy thread of each rank runs
 * the posts on the network engine (libfabric, tcp;ofi_rxm by default), on
 * the direct or the staged path (CCO_GDA_PATH). One process per rank.
 *
 *   ccorun -n N mp_gda [--conn full|crossnode|rail|none] [--only STEP]
 *                      [--iters I] [--flood M]
 *   ccorun ... mp_gda --conn C --kill host|rank [--idle]   (see "Kill mode")
 *   mp_gda --probe       0 when the network engine opens here, else 77
 *
 * Hosts are simulated with CCO_HOSTID (one launcher per host, --id-file).
 * The peers with endpoints follow --conn (default crossnode): CROSSNODE the
 * ranks on other hosts, FULL every rank (this one too), RAIL the rail team
 * minus this rank, NONE nobody (dc.gda == 0). The test computes the same
 * table from the topology and checks it against ccoGdaHasPeer. Steps, in
 * this order, each between host barriers with every signal and counter of
 * this rank reset to 0 (--only runs the steps whose name contains STEP):
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
 *  sad      signal after data: a sender thread puts random sizes (0..64 KiB)
 *           to every peer with a signal increment (two slots per pair, each
 *           with its own signal, so a count names one put); every third
 *           block goes as three puts without a signal followed by a
 *           standalone ccoGdaSignal instead; a receiver thread waits for
 *           each signal and checks the whole block at once (a signal ahead
 *           of its data shows as a torn block), then acks with a standalone
 *           signal on another context; I iterations.
 *  get      gets of 0 B .. 5 MiB + 11 (more than one staged chunk, at most
 *           1 MiB, so the staged path splits them) from every peer into
 *           an unaligned destination with guard bytes after it: the counter
 *           says the data is here, checked before the flush; a 1 MiB get
 *           followed by a standalone ccoGdaCounter: once the counter moves
 *           the get's data is here; then a 5 MiB + 11 put to every peer,
 *           checked by the peer at its signal: bundled with the put, then a
 *           standalone ccoGdaSignal posted after it.
 *  flush    ccoGdaFlushAsync + ccoGdaWait (over every peer, over one peer,
 *           two requests waited in reverse order), ccoGdaFlushPeer, on a
 *           Deferred handle: afterwards the counters are exact, and after a
 *           host barrier the peers find data and signals without waiting;
 *           a request of another context, or never started, is invalid.
 *  barrier  GDA barriers 0 and 1 over the rail team, warp and block scope
 *           alternately, 20 rounds: each rank puts a block to every rail
 *           peer, syncs, and finds the block of every rail peer of that
 *           round (double buffered); thread scope, a Deferred handle and a
 *           barrier index out of range are invalid. With one host the rail
 *           team has one member and sync returns at once.
 *  flood    a second device communicator with gdaQueueDepth 16: 4 threads
 *           (Immediate, Deferred, CallerOrdered, Immediate independent) post
 *           M ops each on context 0 (puts with signals, put-values, gets,
 *           zero-byte puts with counters, standalone signals): wrap-around,
 *           credits, the ring filling with unpublished posts; per-thread
 *           counters and per-source signal totals exact.
 *  conn     the endpoint table (ccoGdaHasPeer, ccoGdaTeamPeer) against the
 *           topology; ops of every kind to a rank without an endpoint return
 *           ccoDevNoPeer at once; bad peers, window ranges, put-value sizes
 *           and alignment, signal and counter indices, contexts and requests
 *           return ccoDevInvalid at every scope and thread mode, and post
 *           nothing; NONE (or CROSSNODE / RAIL on one host): dc.gda == 0 and
 *           every call returns ccoDevUnsupported.
 *  async    ccoCommGetAsyncError is still ccoSuccess.
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
 *
 * Every device wait has a timeout (WAIT_NS), and a watchdog thread aborts
 * the communicator when a step outlives its limit (so calls without a
 * timeout, flushes, return ccoDevAborted), then exits the rank. Each rank
 * ends with "mp_gda rank R: N passed, N failed".
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>

#include "cco/cco_gda.h"
#include "mp_pattern.h"
#include "mp_util.h"
#include "transport/net/net.h"

#define MAX_RANKS 16
#define NS_PER_S 1000000000ull
#define WAIT_NS (30ull * NS_PER_S) /* device waits: a lost signal fails instead of hanging */
#define KILL_BOUND_S 20.0          /* survivors notice a dead peer within this */
#define KILL_AFTER_S 0.5           /* victims die this long after the start */

/* Signal slots of the main device communicator (gdaSignalCount = NSIGNALS);
 * "+ s" is the source rank, so every pair has slots of its own. */
#define NSIGNALS 192
#define SIG_OPS 0              /* ops: +1 per put */
#define SIG_VAL 16             /* ops: put-value adds */
#define SIG_STAND 32           /* ops: standalone signals */
#define SIG_FLUSH 48           /* flush */
#define SIG_BIG 64             /* get step: the large put */
#define SIG_ACK 80             /* sad: acks from receiver s */
#define SIG_SAD 96             /* sad: [source][SAD_W] */
#define SIG_KILL 160           /* kill mode: signals of the streamed puts */
#define SIG_NEVER 176          /* nobody signals it */
#define NCOUNTERS 16
#define CNT_PUT 0
#define CNT_VAL 1
#define CNT_GET 2
#define CNT_OP 3
#define CNT_FLUSH 4
#define CNT_BIG 5
#define NCONTEXTS 4
#define RAIL_BARRIERS 2
#define WORLD_BARRIERS 2

#define SRC_BYTES (8u << 20) /* window A: this rank's pattern, read-only */
#define NCOMBOS 18           /* scope x thread mode x doorbell mode */
#define OPS_SLOT 4096u
#define SAD_W 2              /* puts in flight per (source, target) */
#define SAD_SLOT 65536u      /* random sizes 0..SAD_SLOT inclusive */
#define BIG_BYTES ((5u << 20) + 11u)
#define BIG_SLOT ((5u << 20) + 4096u)
#define BAR_SLOT 4096u
#define BAR_ROUNDS 20
#define FLOOD_T 4
#define FLOOD_DEPTH 16
#define ATOM_T 3

typedef struct {
  const char* only;
  const char* kill; /* NULL, "host" or "rank" */
  int idle;         /* kill mode: nothing in flight when the victims die */
  uint32_t conn;
  long iters; /* sad iterations per peer */
  long flood; /* ops per flood thread */
  int probe;
} options;

static options g_opt = {NULL, NULL, 0, ccoGdaConnectionCrossNode, 300, 1000, 0};

#define CHECK(...) MP_CHECK_MT(__VA_ARGS__)

/* Calls that must work: counted only when they fail. */
#define MUST(call)                                                                                  \
  do {                                                                                              \
    ccoResult_t r_ = (call);                                                                        \
    if (r_ != ccoSuccess)                                                                           \
      CHECK(0, "rank %d: %s: %s (%s)", c->rank, #call, ccoGetErrorString(r_), ccoGetLastError(c->comm)); \
  } while (0)

/* A device status that must be ccoDevSuccess: a failure is counted and
 * printed with its line; returns whether it succeeded. */
#define DEV_OK(st, ...) dev_ok_((st), c->rank, __LINE__, __VA_ARGS__)

/* Window B, registered after the device communicator: offsets of its areas. */
typedef struct {
  size_t opsRecv;   /* [combo][source] OPS_SLOT: ops puts */
  size_t opsVals;   /* [combo][source][4] 8 B: put-values */
  size_t opsGet;    /* [combo][peer] OPS_SLOT: ops gets */
  size_t sadSend;   /* [peer][SAD_W] SAD_SLOT: sad sources */
  size_t sadRecv;   /* [source][SAD_W] SAD_SLOT */
  size_t big;       /* get destination with guard bytes */
  size_t bigPut;    /* [source] BIG_SLOT */
  size_t bar;       /* [parity][source] BAR_SLOT */
  size_t world;     /* [parity][source] BAR_SLOT, for the world barrier */
  size_t flushRecv; /* [source][3] OPS_SLOT */
  size_t flood;     /* [source][FLOOD_T] 64 B */
  size_t floodVal;  /* [source][FLOOD_T] 8 B */
  size_t floodGet;  /* [FLOOD_T] 64 B */
  size_t kill;      /* [source] 256 KiB */
  size_t total;
} layout;

typedef struct {
  ccoComm* comm;
  ccoDevComm dc;
  int rank, nRanks, nNodes;
  int nodeOf[MAX_RANKS], lsaOf[MAX_RANKS];
  int peers[MAX_RANKS], nPeers; /* ranks this one has endpoints to (itself too under FULL) */
  ccoWindow_t winA, winB;
  char *a, *b; /* local views */
  layout L;
} rank_ctx;

static rank_ctx* g_ctx;

/* ------------------------------------------------------------- patterns */

/* Window A of rank r holds fill(seed_a(r)) over SRC_BYTES. */
static uint64_t seed_a(int r) { return key4(0xa11, (uint64_t)r, 0, 0); }
/* Seed of the slice of rank r's window A at byte offset off (a multiple of 8). */
static uint64_t seed_at(int r, size_t off) { return seed_a(r) + off / 8; }

/* ------------------------------------------------------------- helpers */

static int dev_ok_(ccoDevStatus_t st, int rank, int line, const char* what) {
  if (st == ccoDevSuccess) return 1;
  CHECK(0, "rank %d: line %d: %s returned %s", rank, line, what, ccoDevStatusName(st));
  return 0;
}

static int barrier(rank_ctx* c) {
  ccoResult_t r = ccoBarrierAll(c->comm);
  if (r != ccoSuccess)
    CHECK(0, "rank %d: ccoBarrierAll: %s (%s)", c->rank, ccoGetErrorString(r), ccoGetLastError(c->comm));
  return r == ccoSuccess;
}

static int has_gda(const rank_ctx* c) { return c->dc.gda != 0; }

/* Whether rank a has an endpoint to rank b under the connection type. */
static int expect_peer(const rank_ctx* c, int a, int b) {
  switch (g_opt.conn) {
    case ccoGdaConnectionFull: return 1;
    case ccoGdaConnectionCrossNode: return c->nodeOf[a] != c->nodeOf[b];
    case ccoGdaConnectionRail: return a != b && c->lsaOf[a] == c->lsaOf[b];
    default: return 0;
  }
}

static void reset_slots(const ccoDevComm* dc) {
  ccoGda g = ccoGdaHandle(dc, 0, ccoGdaDoorbellImmediate);
  for (uint32_t i = 0; i < dc->gdaSignalCount; i++) ccoGdaResetSignal(&g, i);
  for (uint32_t i = 0; i < dc->gdaCounterCount; i++) ccoGdaResetCounter(&g, i);
}

static double elapsed(double t0) { return mp_now() - t0; }

/* ------------------------------------------------------------- watchdog */

static pthread_mutex_t g_wdLock = PTHREAD_MUTEX_INITIALIZER;
static ccoComm* g_wdComm; /* NULL once teardown destroys it */
static const char* g_wdStep = "setup";
static double g_wdDeadline;
static int g_wdStrikes;

static void watchdog_arm(const char* step, double limit) {
  pthread_mutex_lock(&g_wdLock);
  g_wdStep = step;
  g_wdDeadline = mp_now() + limit;
  g_wdStrikes = 0;
  pthread_mutex_unlock(&g_wdLock);
}

/* A step past its limit: abort the communicator (device waits and flushes
 * return ccoDevAborted, host calls fail), and exit if even that is stuck. */
static void* watchdog_main(void* arg) {
  (void)arg;
  for (;;) {
    mp_sleep(0.1);
    pthread_mutex_lock(&g_wdLock);
    int fire = mp_now() > g_wdDeadline;
    if (!fire) {
      pthread_mutex_unlock(&g_wdLock);
      continue;
    }
    const char* step = g_wdStep;
    int strikes = ++g_wdStrikes;
    g_wdDeadline = mp_now() + 15.0;
    int rank = g_ctx ? g_ctx->rank : -1;
    if (strikes == 1 && g_wdComm) {
      /* Under the lock: teardown clears g_wdComm under it before destroying. */
      fprintf(stderr, "FAIL rank %d: step %s is stuck: watchdog aborts the communicator\n", rank, step);
      ccoCommAbort(g_wdComm);
      pthread_mutex_unlock(&g_wdLock);
    } else {
      pthread_mutex_unlock(&g_wdLock);
      fprintf(stderr, "FAIL rank %d: step %s is still stuck: watchdog exits the rank\n", rank, step);
      fflush(stdout);
      _exit(3);
    }
  }
  return NULL;
}

static int step_selected(const char* name) { return !g_opt.only || strstr(name, g_opt.only) != NULL; }

/* Starts a step: every rank is past the previous one (whose operations are
 * all flushed), so nothing is in flight to this rank's slots. */
static int step_begin(rank_ctx* c, const char* name, double limit) {
  if (!step_selected(name)) return 0;
  watchdog_arm(name, limit);
  if (!barrier(c)) return 0;
  reset_slots(&c->dc);
  return barrier(c);
}

/* ------------------------------------------------------------------ ops */

static const ccoCoop_t kCoops[3] = {ccoCoopThread, ccoCoopWarp, ccoCoopBlock};
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

static void test_ops(rank_ctx* c) {
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

static void test_atomic(rank_ctx* c) {
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

/* ------------------------------------------------------------------- sad */

static size_t sad_len(int s, int d, long i) { return (size_t)(key4(0x5ad, (uint64_t)s, (uint64_t)d, (uint64_t)i) % (SAD_SLOT + 1)); }
static uint64_t sad_seed(int s, int d, long i) { return key4(0x5ee, (uint64_t)s, (uint64_t)d, (uint64_t)i); }

typedef struct {
  rank_ctx* c;
  long torn, checked, bytes;
  ccoDevStatus_t st;
} sad_arg;

static void* sad_sender(void* arg) {
  sad_arg* a = arg;
  rank_ctx* c = a->c;
  ccoGda g = ccoGdaHandle(&c->dc, 0, ccoGdaDoorbellImmediate);
  ccoDevStatus_t st = ccoDevSuccess;
  for (long i = 0; i < g_opt.iters && st == ccoDevSuccess; i++)
    for (int k = 0; k < c->nPeers && st == ccoDevSuccess; k++) {
      int p = c->peers[k], slot = (int)(i % SAD_W);
      /* The slot is free again once p acknowledged the put SAD_W before. */
      if (i >= SAD_W) st = ccoGdaWaitSignal(&g, SIG_ACK + (uint32_t)p, (uint64_t)(i - SAD_W + 1), WAIT_NS, ccoCoopBlock);
      if (st != ccoDevSuccess) break;
      size_t n = sad_len(c->rank, p, i);
      size_t src = c->L.sadSend + ((size_t)p * SAD_W + (size_t)slot) * SAD_SLOT;
      fill(c->b + src, n, sad_seed(c->rank, p, i));
      size_t dst = c->L.sadRecv + ((size_t)c->rank * SAD_W + (size_t)slot) * SAD_SLOT;
      ccoGdaSignalSpec sig = ccoGdaSigInc(SIG_SAD + (uint32_t)(c->rank * SAD_W + slot));
      if (i % 3 != 2) {
        st = ccoGdaPut(&g, p, c->winB, dst, c->winB, src, n, sig, CCO_GDA_NO_COUNTER, ccoCoopBlock,
                       ccoGdaThreadAggregate);
      } else {
        /* Three puts without a signal, then a standalone signal: it must
         * come after all three. */
        size_t cut1 = n / 3, cut2 = 2 * n / 3;
        st = ccoGdaPut(&g, p, c->winB, dst, c->winB, src, cut1, ccoGdaSigNone(), CCO_GDA_NO_COUNTER, ccoCoopWarp,
                       ccoGdaThreadAggregate);
        if (st == ccoDevSuccess)
          st = ccoGdaPut(&g, p, c->winB, dst + cut2, c->winB, src + cut2, n - cut2, ccoGdaSigNone(),
                         CCO_GDA_NO_COUNTER, ccoCoopThread, ccoGdaThreadIndependent);
        if (st == ccoDevSuccess)
          st = ccoGdaPut(&g, p, c->winB, dst + cut1, c->winB, src + cut1, cut2 - cut1, ccoGdaSigNone(),
                         CCO_GDA_NO_COUNTER, ccoCoopBlock, ccoGdaThreadAggregate);
        if (st == ccoDevSuccess) st = ccoGdaSignal(&g, p, sig, ccoCoopBlock);
      }
      a->bytes += (long)n;
    }
  if (st == ccoDevSuccess) st = ccoGdaFlush(&g, ccoCoopBlock);
  a->st = st;
  return NULL;
}

static void* sad_receiver(void* arg) {
  sad_arg* a = arg;
  rank_ctx* c = a->c;
  ccoGda data = ccoGdaHandle(&c->dc, 0, ccoGdaDoorbellImmediate);
  ccoGda acks = ccoGdaHandle(&c->dc, 1, ccoGdaDoorbellImmediate);
  ccoDevStatus_t st = ccoDevSuccess;
  for (long i = 0; i < g_opt.iters && st == ccoDevSuccess; i++)
    for (int k = 0; k < c->nPeers && st == ccoDevSuccess; k++) {
      int s = c->peers[k], slot = (int)(i % SAD_W);
      uint32_t sig = SIG_SAD + (uint32_t)(s * SAD_W + slot);
      uint64_t want = (uint64_t)(i / SAD_W) + 1;
      st = ccoGdaWaitSignal(&data, sig, want, WAIT_NS, ccoCoopWarp);
      if (st != ccoDevSuccess) break;
      /* At once: the signal must not be ahead of any byte of its block. */
      size_t n = sad_len(s, c->rank, i);
      const char* got = c->b + c->L.sadRecv + ((size_t)s * SAD_W + (size_t)slot) * SAD_SLOT;
      size_t d = first_diff(got, n, sad_seed(s, c->rank, i));
      uint64_t now = ccoGdaReadSignal(&data, sig);
      a->checked++;
      if (d != n || now != want) {
        if (a->torn++ < 3)
          CHECK(0, "rank %d: sad: iteration %ld from rank %d: %zu B block differs at byte %zu (signal %llu, want %llu)",
                c->rank, i, s, n, d, (unsigned long long)now, (unsigned long long)want);
      }
      st = ccoGdaSignal(&acks, s, ccoGdaSigInc(SIG_ACK + (uint32_t)c->rank), ccoCoopWarp);
    }
  if (st == ccoDevSuccess) st = ccoGdaFlush(&acks, ccoCoopBlock);
  a->st = st;
  return NULL;
}

static void test_sad(rank_ctx* c) {
  if (!has_gda(c) || !step_begin(c, "sad", 120)) return;
  double t0 = mp_now();
  sad_arg snd = {c, 0, 0, 0, ccoDevSuccess}, rcv = {c, 0, 0, 0, ccoDevSuccess};
  pthread_t ts, tr;
  pthread_create(&ts, NULL, sad_sender, &snd);
  pthread_create(&tr, NULL, sad_receiver, &rcv);
  pthread_join(ts, NULL);
  pthread_join(tr, NULL);
  double took = elapsed(t0);
  DEV_OK(snd.st, "sad sender");
  DEV_OK(rcv.st, "sad receiver");
  long expected = g_opt.iters * c->nPeers;
  CHECK(rcv.checked == expected && rcv.torn == 0, "rank %d: sad: %ld of %ld blocks checked, %ld torn", c->rank,
        rcv.checked, expected, rcv.torn);
  printf("sad: rank %d: %ld blocks (%.1f MiB, 0..64 KiB each) from %d peers checked at their signal, %ld torn, "
         "in %.2f s\n",
         c->rank, rcv.checked, (double)snd.bytes / 1048576.0, c->nPeers, rcv.torn, took);
  barrier(c);
}

/* ------------------------------------------------------------------- get */

static void test_get(rank_ctx* c) {
  if (!has_gda(c) || !step_begin(c, "get", 120)) return;
  static const size_t sizes[] = {0, 1, 8, 4093, 65536 + 5, (1u << 20) + 3, BIG_BYTES};
  const int nSizes = (int)(sizeof(sizes) / sizeof(sizes[0]));
  ccoGda g = ccoGdaHandle(&c->dc, 0, ccoGdaDoorbellImmediate);
  uint64_t count = 0;
  double bigTime = 0;
  long bigN = 0;
  for (int i = 0; i < c->nPeers; i++) {
    int p = c->peers[i];
    for (int z = 0; z < nSizes; z++) {
      size_t n = sizes[z], off = 8u * (size_t)((p * 131 + z * 977) % 1024), dst = c->L.big + (size_t)(z % 5);
      memset(c->b + c->L.big, 0xee, n + 64);
      double t = mp_now();
      ccoDevStatus_t st =
          ccoGdaGet(&g, p, c->winB, dst, c->winA, off, n, CNT_GET, kCoops[z % 3], ccoGdaThreadAggregate);
      if (!DEV_OK(st, "ccoGdaGet")) continue;
      count++;
      /* The counter counts arrival: the data is here before any flush. */
      if (!DEV_OK(ccoGdaWaitCounter(&g, CNT_GET, count, WAIT_NS, ccoCoopBlock), "ccoGdaWaitCounter")) continue;
      if (n == BIG_BYTES) bigTime += elapsed(t), bigN++;
      size_t d = first_diff(c->b + dst, n, seed_at(p, off));
      int guard = 1;
      for (size_t k = 0; k < 64 - (size_t)(z % 5); k++) guard &= (uint8_t)c->b[dst + n + k] == 0xee;
      CHECK(d == n && guard, "rank %d: get of %zu B from rank %d at offset %zu: differs at byte %zu%s", c->rank, n,
            p, off, d, guard ? "" : ", bytes after the end overwritten");
    }
  }
  DEV_OK(ccoGdaFlush(&g, ccoCoopBlock), "ccoGdaFlush");
  uint64_t got = ccoGdaReadCounter(&g, CNT_GET);
  CHECK(got == count, "rank %d: get counter %llu, expected %llu", c->rank, (unsigned long long)got,
        (unsigned long long)count);
  /* A standalone counter comes after every op before it on the context:
   * once it moves, a get posted before it (without a counter) is here. */
  for (int i = 0; i < c->nPeers; i++) {
    int p = c->peers[i];
    size_t n = (1u << 20) + 3, off = 8u * (size_t)(p * 53 + 5), dst = c->L.big + 1;
    memset(c->b + c->L.big, 0xee, n + 64);
    if (!DEV_OK(ccoGdaGet(&g, p, c->winB, dst, c->winA, off, n, CCO_GDA_NO_COUNTER, ccoCoopBlock,
                          ccoGdaThreadAggregate),
                "ccoGdaGet"))
      continue;
    DEV_OK(ccoGdaCounter(&g, p, CNT_OP, ccoCoopWarp), "ccoGdaCounter");
    if (!DEV_OK(ccoGdaWaitCounter(&g, CNT_OP, (uint64_t)i + 1, WAIT_NS, ccoCoopBlock), "ccoGdaWaitCounter")) continue;
    size_t d = first_diff(c->b + dst, n, seed_at(p, off));
    CHECK(d == n, "rank %d: get of %zu B from rank %d not there when the counter after it moved (byte %zu)", c->rank,
          n, p, d);
  }
  DEV_OK(ccoGdaFlush(&g, ccoCoopBlock), "ccoGdaFlush");
  barrier(c);
  /* A large put to every peer: first with its signal bundled, then (after
   * the peers checked it) without one, followed by a standalone signal,
   * which must wait for the whole put (chunked on the staged path). */
  double t0 = mp_now();
  for (int phase = 0; phase < 2; phase++) {
    for (int i = 0; i < c->nPeers; i++) {
      int p = c->peers[i];
      size_t off = 8u * (size_t)((c->rank * 37 + p * 11 + phase * 401) % 1024);
      ccoGdaSignalSpec sig = ccoGdaSigInc(SIG_BIG + (uint32_t)c->rank);
      DEV_OK(ccoGdaPut(&g, p, c->winB, c->L.bigPut + (size_t)c->rank * BIG_SLOT, c->winA, off, BIG_BYTES,
                       phase ? ccoGdaSigNone() : sig, CNT_BIG, ccoCoopBlock, ccoGdaThreadAggregate),
             "ccoGdaPut (large)");
      if (phase) DEV_OK(ccoGdaSignal(&g, p, sig, ccoCoopBlock), "ccoGdaSignal (after the large put)");
    }
    for (int i = 0; i < c->nPeers; i++) {
      int s = c->peers[i];
      if (!DEV_OK(ccoGdaWaitSignal(&g, SIG_BIG + (uint32_t)s, (uint64_t)phase + 1, WAIT_NS, ccoCoopBlock),
                  "ccoGdaWaitSignal (large)"))
        continue;
      size_t off = 8u * (size_t)((s * 37 + c->rank * 11 + phase * 401) % 1024);
      size_t d = first_diff(c->b + c->L.bigPut + (size_t)s * BIG_SLOT, BIG_BYTES, seed_at(s, off));
      CHECK(d == BIG_BYTES, "rank %d: large put from rank %d (signal %s) differs at byte %zu", c->rank, s,
            phase ? "standalone" : "bundled", d);
    }
    DEV_OK(ccoGdaWaitCounter(&g, CNT_BIG, (uint64_t)(phase + 1) * (uint64_t)c->nPeers, WAIT_NS, ccoCoopBlock),
           "ccoGdaWaitCounter (large)");
    DEV_OK(ccoGdaFlush(&g, ccoCoopBlock), "ccoGdaFlush");
    barrier(c); /* nobody overwrites a block its peer still checks */
  }
  double putTime = elapsed(t0);
  if (c->rank == 0)
    printf("get: sizes 0 B .. %u B from %d peers verified (counter %llu); %ld gets of %.1f MiB at %.0f MiB/s; "
           "%d large puts with signals (bundled, then standalone) verified in %.2f s\n",
           BIG_BYTES, c->nPeers, (unsigned long long)got, bigN, BIG_BYTES / 1048576.0,
           bigTime > 0 ? (double)bigN * BIG_BYTES / 1048576.0 / bigTime : 0.0, 2 * c->nPeers, putTime);
  barrier(c);
}

/* ----------------------------------------------------------------- flush */

static size_t flush_dst(const rank_ctx* c, int src, int k) {
  return c->L.flushRecv + ((size_t)src * 3 + (size_t)k) * OPS_SLOT;
}
static size_t flush_src(int dst, int k) { return 8u * (size_t)(dst * 101 + k * 257); }

static void test_flush(rank_ctx* c) {
  if (!has_gda(c) || !step_begin(c, "flush", 90)) return;
  ccoGda g = ccoGdaHandle(&c->dc, 2, ccoGdaDoorbellDeferred);
  ccoGda other = ccoGdaHandle(&c->dc, 3, ccoGdaDoorbellDeferred);
  const size_t n = 3000;
  ccoGdaRequest req, req2;
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

/* --------------------------------------------------------------- barrier */

static size_t bar_src(int r, int round) { return 8u * (size_t)(round * 131 + r * 7); }

static void test_barrier(rank_ctx* c) {
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
static void test_world_barrier(rank_ctx* c) {
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

/* ----------------------------------------------------------------- flood */

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

static void test_flood(rank_ctx* c) {
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

/* ------------------------------------------------------------------ conn */

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

static void test_conn(rank_ctx* c) {
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

/* -------------------------------------------------------------- kill mode */

#define KILL_BYTES (256u << 10)

static int is_victim(const rank_ctx* c, int r) {
  if (!strcmp(g_opt.kill, "rank")) return r == c->nRanks - 1;
  return c->nodeOf[r] == c->nodeOf[c->nRanks - 1];
}

static void run_kill(rank_ctx* c) {
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

/* ------------------------------------------------------------------ main */

static int parse(int argc, char** argv) {
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--probe")) {
      g_opt.probe = 1;
    } else if (!strcmp(a, "--conn") && v) {
      i++;
      if (!strcmp(v, "full")) g_opt.conn = ccoGdaConnectionFull;
      else if (!strcmp(v, "crossnode")) g_opt.conn = ccoGdaConnectionCrossNode;
      else if (!strcmp(v, "rail")) g_opt.conn = ccoGdaConnectionRail;
      else if (!strcmp(v, "none")) g_opt.conn = ccoGdaConnectionNone;
      else return 0;
    } else if (!strcmp(a, "--only") && v) {
      g_opt.only = argv[++i];
    } else if (!strcmp(a, "--kill") && v && (!strcmp(v, "host") || !strcmp(v, "rank"))) {
      g_opt.kill = argv[++i];
    } else if (!strcmp(a, "--idle")) {
      g_opt.idle = 1;
    } else if (!strcmp(a, "--iters") && v) {
      g_opt.iters = atol(argv[++i]);
    } else if (!strcmp(a, "--flood") && v) {
      g_opt.flood = atol(argv[++i]);
    } else {
      return 0;
    }
  }
  return g_opt.iters > 0 && g_opt.flood > 0;
}

/* Whether the network engine opens here (libfabric built in and present). */
static int probe(void) {
  cco_net_config cfg;
  cco_net_config_from_env(&cfg);
  cco_net* net = NULL;
  if (cco_net_open(&cfg, &net) != ccoSuccess) {
    printf("mp_gda: did not run: %s\n", ccoGetLastError(NULL));
    return 77;
  }
  printf("mp_gda: network engine: %s\n", cco_net_describe(net));
  cco_net_close(net);
  return 0;
}

static layout make_layout(int n) {
  layout L;
  size_t o = 0, N = (size_t)n;
#define AREA(field, bytes) (L.field = o, o += ((bytes) + 4095) & ~(size_t)4095)
  AREA(opsRecv, NCOMBOS * N * OPS_SLOT);
  AREA(opsVals, NCOMBOS * N * 32);
  AREA(opsGet, NCOMBOS * N * OPS_SLOT);
  AREA(sadSend, N * SAD_W * SAD_SLOT);
  AREA(sadRecv, N * SAD_W * SAD_SLOT);
  AREA(big, BIG_SLOT + 4096);
  AREA(bigPut, N * BIG_SLOT);
  AREA(bar, 2 * N * BAR_SLOT);
  AREA(world, 2 * N * BAR_SLOT);
  AREA(flushRecv, N * 3 * OPS_SLOT);
  AREA(flood, N * FLOOD_T * 64);
  AREA(floodVal, N * FLOOD_T * 8);
  AREA(floodGet, FLOOD_T * 64);
  AREA(kill, N * KILL_BYTES);
#undef AREA
  L.total = o;
  return L;
}

int main(int argc, char** argv) {
  if (!parse(argc, argv)) {
    fprintf(stderr,
            "usage: mp_gda [--conn full|crossnode|rail|none] [--only STEP] [--iters I] [--flood M] "
            "[--kill host|rank] | --probe\n");
    return 2;
  }
  if (g_opt.probe) return probe();
  static rank_ctx ctx;
  rank_ctx* c = &ctx;
  ccoResult_t r = ccoCommCreateFromEnv(0, &c->comm);
  if (r != ccoSuccess) {
    fprintf(stderr, "mp_gda: ccoCommCreateFromEnv: %s (%s)\n", ccoGetErrorString(r), ccoGetLastError(NULL));
    return 1;
  }
  ccoCommRank(c->comm, &c->rank);
  ccoCommSize(c->comm, &c->nRanks);
  ccoCommNodeCount(c->comm, &c->nNodes);
  if (c->nRanks > MAX_RANKS) {
    fprintf(stderr, "mp_gda: at most %d ranks\n", MAX_RANKS);
    ccoCommDestroy(c->comm);
    return 2;
  }
  g_ctx = c;
  g_wdComm = c->comm;
  watchdog_arm("setup", 60);
  pthread_t wd;
  pthread_create(&wd, NULL, watchdog_main, NULL);
  pthread_detach(wd);

  /* Every rank's host and LSA rank, for the expected endpoint table. */
  int mine[2] = {0, 0}, all[2 * MAX_RANKS];
  ccoCommNodeIndex(c->comm, &mine[0]);
  ccoCommLsaRank(c->comm, &mine[1]);
  MUST(ccoBootstrapAllGather(c->comm, mine, all, sizeof(mine)));
  for (int q = 0; q < c->nRanks; q++) c->nodeOf[q] = all[2 * q], c->lsaOf[q] = all[2 * q + 1];

  /* Window A before the device communicator (the proxy registers it when it
   * starts), window B after (registered as it is added). */
  void* pa = NULL;
  void* pb = NULL;
  c->L = make_layout(c->nRanks);
  MUST(ccoWindowRegisterAlloc(c->comm, SRC_BYTES, &c->winA, &pa));
  c->a = pa;
  if (c->a) fill(c->a, SRC_BYTES, seed_a(c->rank));
  ccoDevCommRequirements reqs = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.gdaConnectionType = g_opt.conn;
  reqs.gdaContextCount = NCONTEXTS;
  reqs.gdaSignalCount = NSIGNALS;
  reqs.gdaCounterCount = NCOUNTERS;
  reqs.railGdaBarrierCount = RAIL_BARRIERS;
  reqs.barrierCount = WORLD_BARRIERS;
  r = ccoDevCommCreate(c->comm, &reqs, &c->dc);
  CHECK(r == ccoSuccess, "rank %d: ccoDevCommCreate: %s (%s)", c->rank, ccoGetErrorString(r), ccoGetLastError(c->comm));
  if (r == ccoSuccess) MUST(ccoWindowRegisterAlloc(c->comm, c->L.total, &c->winB, &pb));
  c->b = pb;
  if (r == ccoSuccess && c->a && c->b) {
    memset(c->b, 0, c->L.total);
    ccoGda g = ccoGdaHandle(&c->dc, 0, ccoGdaDoorbellImmediate);
    for (int q = 0; q < c->nRanks; q++)
      if (ccoGdaHasPeer(&g, q)) c->peers[c->nPeers++] = q;
    if (c->rank == 0) {
      const char* path = getenv("CCO_GDA_PATH");
      printf("mp_gda: %d ranks on %d host(s), connection type %u, path %s, %d peers on rank 0\n", c->nRanks,
             c->nNodes, g_opt.conn, path ? path : "auto", c->nPeers);
    }
    if (barrier(c)) { /* every window B is zeroed before anyone writes */
      if (g_opt.kill) {
        run_kill(c);
      } else {
        test_ops(c);
        test_atomic(c);
        test_sad(c);
        test_get(c);
        test_flush(c);
        test_barrier(c);
        test_world_barrier(c);
        test_flood(c);
        test_conn(c);
        watchdog_arm("async", 30);
        ccoResult_t async = ccoSuccess;
        MUST(ccoCommGetAsyncError(c->comm, &async));
        CHECK(async == ccoSuccess, "rank %d: async error %s (%s)", c->rank, ccoGetErrorString(async),
              ccoGetLastError(c->comm));
        if (c->rank == 0 && async == ccoSuccess) printf("async: ccoCommGetAsyncError is ccoSuccess\n");
        barrier(c); /* nobody still posts to a state that goes away */
      }
    }
  }
  watchdog_arm("teardown", 30);
  if (c->dc.magic && !g_opt.kill) MUST(ccoDevCommDestroy(c->comm, &c->dc));
  if (c->winB && !g_opt.kill) MUST(ccoWindowDeregister(c->comm, c->winB));
  if (c->winA && !g_opt.kill) MUST(ccoWindowDeregister(c->comm, c->winA));
  pthread_mutex_lock(&g_wdLock);
  g_wdComm = NULL;
  pthread_mutex_unlock(&g_wdLock);
  ccoResult_t d = ccoCommDestroy(c->comm);
  CHECK(d == ccoSuccess, "rank %d: ccoCommDestroy: %s", c->rank, ccoGetErrorString(d));
  char name[32];
  snprintf(name, sizeof(name), "mp_gda rank %d", c->rank);
  return mp_finish(name);
}
