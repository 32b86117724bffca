/*
 * LSA barrier stress on the host platform, through the device API itself
 * (cco_device.h compiled for the host: a CPU thread acts at thread scope).
 *
 *   ccorun -n N mp_lsa_barrier [--rounds R] [--indices K] [--multi-rounds M]
 *   mp_lsa_barrier --threads N [same options]    ranks are threads of this process
 *   ccorun -n N mp_lsa_barrier --die D [--rounds R]
 *   mp_lsa_barrier --abort
 *
 * Stress: R rounds of barrier 0. Before arriving, each rank stores the round
 * number into its slot of every peer's check area; after the wait, every
 * slot of its own area must hold this round. The areas alternate by round
 * parity: a peer can run at most one round ahead, and it can only get
 * there after this rank arrived, so a wrong slot means the barrier let a
 * rank through early or the stores were not visible. Sessions end and
 * restart every SESSION_ROUNDS rounds, as kernel launches would.
 *
 * Concurrent indices: K threads per rank, thread k on barrier 1+k with its
 * own check area, M rounds each, all at once.
 *
 * --die D: rank D _exits halfway through the stress; every survivor must
 * leave the barrier it is stuck in with ccoDevTimeout or ccoDevAborted
 * (2 s timeout) within 10 s, after exactly the rounds D completed.
 *
 * --abort: two thread-ranks; rank 0 waits in ccoLsaBarrierWait (no
 * timeout) for a rank that never arrives; ccoCommAbort on rank 0's
 * communicator must return it with ccoDevAborted at once. Rank 1, blocked
 * the same way, must follow once its next host collective sees the abort.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "cco/cco_device.h"
#include "mp_util.h"

#define MAX_RANKS 64
#define MAX_INDICES 16
#define SESSION_ROUNDS 1000 /* rounds per session, like one kernel launch */
#define NS_PER_S 1000000000ull

typedef struct {
  long rounds, multiRounds;
  int indices, threads, die;
  double timeoutS;
  int abortTest;
} options;

static options g_opt = {100000, 10000, 4, 0, -1, 60.0, 0};

#define CHECK(...) MP_CHECK_MT(__VA_ARGS__)

/* One rank's view: its communicator, device communicator and check window. */
typedef struct {
  ccoComm* comm;
  ccoDevComm dc;
  ccoWindow_t win;
  int rank, lsaRank, lsaSize;
} rank_ctx;

/* Byte offset of LSA rank `slot`'s entry in check area `area`, parity `parity`. */
static uint64_t slot_off(const rank_ctx* c, int area, uint32_t parity, int slot) {
  return ((uint64_t)(2 * area + (int)parity) * (uint64_t)c->lsaSize + (uint64_t)slot) * sizeof(uint32_t);
}

typedef struct {
  long done;           /* rounds completed */
  long badRounds;      /* rounds whose check failed */
  ccoDevStatus_t status;
  double seconds;      /* the whole loop */
  double failSeconds;  /* the call that failed, if one did */
} stress_result;

/* Stores `value` into this rank's slot of every peer's area. */
static void publish(const rank_ctx* c, int area, uint32_t parity, uint32_t value) {
  for (int p = 0; p < c->lsaSize; p++) {
    uint32_t* slot = (uint32_t*)ccoGetLsaPeerPtr(c->win, p, slot_off(c, area, parity, c->lsaRank));
    __atomic_store_n(slot, value, __ATOMIC_RELAXED);
  }
}

/* Number of slots of this rank's own area that do not hold `value`. */
static int count_stale(const rank_ctx* c, int area, uint32_t parity, uint32_t value) {
  int stale = 0;
  for (int p = 0; p < c->lsaSize; p++) {
    const uint32_t* slot = (const uint32_t*)ccoGetLocalPtr(c->win, slot_off(c, area, parity, p));
    stale += __atomic_load_n(slot, __ATOMIC_RELAXED) != value;
  }
  return stale;
}

/* `rounds` checked rounds on barrier `index` at thread scope. Rank `die`
 * leaves the process before arriving at round rounds / 2. */
static stress_result stress(const rank_ctx* c, uint32_t index, int area, long rounds, double timeoutS, int die) {
  stress_result res = {0, 0, ccoDevSuccess, 0, 0};
  uint64_t timeoutNs = (uint64_t)(timeoutS * (double)NS_PER_S);
  double t0 = mp_now();
  ccoLsaBarrierSession s = ccoLsaBarrierSessionInit(&c->dc, index, ccoCoopThread);
  for (long r = 0; r < rounds; r++) {
    if (r > 0 && r % SESSION_ROUNDS == 0) {
      ccoLsaBarrierSessionEnd(&s);
      s = ccoLsaBarrierSessionInit(&c->dc, index, ccoCoopThread);
    }
    if (c->rank == die && r == rounds / 2) {
      fflush(stdout);
      /* Status 0: ccorun stops the whole job when a rank fails, and this
       * test is about the survivors noticing by themselves. */
      _exit(0);
    }
    uint32_t parity = (uint32_t)(r & 1), value = (uint32_t)r + 1;
    publish(c, area, parity, value);
    double t1 = mp_now();
    res.status = ccoLsaBarrierSyncTimeout(&s, timeoutNs);
    if (res.status != ccoDevSuccess) {
      res.failSeconds = mp_now() - t1;
      break;
    }
    res.badRounds += count_stale(c, area, parity, value) != 0;
    res.done = r + 1;
  }
  ccoLsaBarrierSessionEnd(&s);
  res.seconds = mp_now() - t0;
  return res;
}

/* -------------------------------------------------------------- rank setup */

#define CHECK_OK(call) CHECK((call) == ccoSuccess, "%s: %s", #call, ccoGetLastError(c->comm))

/* Device communicator with 1 + indices barriers and a check window. */
static int setup_rank(rank_ctx* c) {
  ccoCommRank(c->comm, &c->rank);
  ccoCommLsaRank(c->comm, &c->lsaRank);
  ccoCommLsaSize(c->comm, &c->lsaSize);
  ccoDevCommRequirements reqs = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.lsaBarrierCount = 1 + (uint32_t)g_opt.indices;
  reqs.gdaConnectionType = ccoGdaConnectionNone;
  void* local = NULL;
  size_t bytes = (size_t)(1 + g_opt.indices) * 2 * (size_t)c->lsaSize * sizeof(uint32_t);
  ccoResult_t res = ccoDevCommCreate(c->comm, &reqs, &c->dc);
  CHECK(res == ccoSuccess, "rank %d: ccoDevCommCreate: %s", c->rank, ccoGetLastError(c->comm));
  if (res == ccoSuccess) {
    res = ccoWindowRegisterAlloc(c->comm, bytes, &c->win, &local);
    CHECK(res == ccoSuccess, "rank %d: ccoWindowRegisterAlloc: %s", c->rank, ccoGetLastError(c->comm));
  }
  return res == ccoSuccess;
}

static void teardown_rank(rank_ctx* c) {
  if (c->win) CHECK_OK(ccoWindowDeregister(c->comm, c->win));
  if (c->dc.magic == CCO_DEV_COMM_MAGIC) CHECK_OK(ccoDevCommDestroy(c->comm, &c->dc));
  CHECK_OK(ccoCommDestroy(c->comm));
}

/* ----------------------------------------------------- the three exercises */

static void check_stress(const rank_ctx* c) {
  stress_result r = stress(c, 0, 0, g_opt.rounds, g_opt.timeoutS, -1);
  CHECK(r.status == ccoDevSuccess && r.done == g_opt.rounds, "rank %d: barrier 0 stopped at round %ld with status %d",
           c->rank, r.done, (int)r.status);
  CHECK(r.badRounds == 0, "rank %d: %ld of %ld rounds saw a peer's slot not at this round", c->rank, r.badRounds,
           r.done);
  if (c->rank == 0)
    printf("stress: %d ranks, %ld rounds of barrier 0 (thread scope) in %.2f s, %.2f us per round\n", c->lsaSize,
           r.done, r.seconds, r.seconds * 1e6 / (double)(r.done ? r.done : 1));
}

typedef struct {
  const rank_ctx* c;
  int k;
  stress_result r;
} index_job;

static void* index_thread(void* arg) {
  index_job* j = arg;
  j->r = stress(j->c, 1 + (uint32_t)j->k, 1 + j->k, g_opt.multiRounds, g_opt.timeoutS, -1);
  return NULL;
}

static void check_concurrent_indices(const rank_ctx* c) {
  index_job jobs[MAX_INDICES];
  pthread_t th[MAX_INDICES];
  double t0 = mp_now();
  for (int k = 0; k < g_opt.indices; k++) {
    jobs[k] = (index_job){c, k, {0, 0, ccoDevSuccess, 0, 0}};
    pthread_create(&th[k], NULL, index_thread, &jobs[k]);
  }
  for (int k = 0; k < g_opt.indices; k++) {
    pthread_join(th[k], NULL);
    stress_result* r = &jobs[k].r;
    CHECK(r->status == ccoDevSuccess && r->done == g_opt.multiRounds && r->badRounds == 0,
             "rank %d: barrier %d: %ld rounds done, %ld bad, status %d", c->rank, 1 + k, r->done, r->badRounds,
             (int)r->status);
  }
  if (c->rank == 0)
    printf("concurrent: %d ranks x %d threads, each on its own barrier, %ld rounds each in %.2f s\n", c->lsaSize,
           g_opt.indices, g_opt.multiRounds, mp_now() - t0);
}

/* Survivors must give up on the dead rank by themselves, promptly. */
static void check_dying_rank(const rank_ctx* c) {
  const double timeoutS = 2.0, limitS = 10.0;
  stress_result r = stress(c, 0, 0, g_opt.rounds, timeoutS, g_opt.die);
  long diedAt = g_opt.rounds / 2;
  CHECK(r.status == ccoDevTimeout || r.status == ccoDevAborted,
           "rank %d: status %d after %ld rounds; rank %d died at round %ld", c->rank, (int)r.status, r.done,
           g_opt.die, diedAt);
  CHECK(r.done == diedAt, "rank %d: %ld rounds completed, the dead rank completed %ld", c->rank, r.done, diedAt);
  CHECK(r.failSeconds <= limitS, "rank %d: left the barrier after %.2f s (limit %.0f s)", c->rank, r.failSeconds,
           limitS);
  CHECK(r.badRounds == 0, "rank %d: %ld bad rounds before the death", c->rank, r.badRounds);
  printf("die: rank %d left its barrier %.2f s after entering it, with %s (timeout %.0f s), after %ld rounds\n",
         c->rank, r.failSeconds, r.status == ccoDevTimeout ? "ccoDevTimeout" : r.status == ccoDevAborted ? "ccoDevAborted" : "success",
         timeoutS, r.done);
}

/* Everything one rank does, as a process or as a thread. */
static void run_rank(rank_ctx* c) {
  if (setup_rank(c)) {
    if (g_opt.die >= 0) {
      check_dying_rank(c);
    } else {
      check_stress(c);
      if (g_opt.indices > 0) check_concurrent_indices(c);
    }
  }
  teardown_rank(c);
}

/* ---------------------------------------------------------- ranks as threads */

/* rank_ctx is large: on the heap, not the thread's stack. */
static void thread_rank_body(ccoComm* comm, int rank, int nRanks) {
  (void)rank, (void)nRanks;
  rank_ctx* c = (rank_ctx*)calloc(1, sizeof(*c));
  CHECK(c != NULL, "thread rank %d: no memory for its context", rank);
  if (!c) {
    ccoCommDestroy(comm);
    return;
  }
  c->comm = comm;
  run_rank(c);
  free(c);
}

static void run_thread_ranks(int nRanks) {
  int failed = mp_run_thread_ranks(nRanks, thread_rank_body);
  CHECK(failed == 0, "%d of %d thread ranks could not create their communicator", failed, nRanks);
}

/* ------------------------------------------------------ abort wakes a wait */

typedef struct {
  const ccoDevComm* dc;
  uint32_t index;
  atomic_int finished;
  ccoDevStatus_t status;
  double endTime;
} blocked_wait;

/* Arrives at barrier `index` and waits, with no timeout, for peers that
 * never come. */
static void* blocked_wait_thread(void* arg) {
  blocked_wait* w = arg;
  ccoLsaBarrierSession s = ccoLsaBarrierSessionInit(w->dc, w->index, ccoCoopThread);
  ccoLsaBarrierArrive(&s);
  w->status = ccoLsaBarrierWait(&s);
  ccoLsaBarrierSessionEnd(&s);
  w->endTime = mp_now();
  atomic_store(&w->finished, 1);
  return NULL;
}

/* Waits up to `limit` seconds for the waiter to return; 1 if it did. */
static int wait_finished(blocked_wait* w, double limit) {
  double end = mp_now() + limit;
  while (!atomic_load(&w->finished) && mp_now() < end) mp_sleep(0.001);
  return atomic_load(&w->finished);
}

/* The abort test keeps its two thread-ranks' contexts after setup. */
typedef struct {
  ccoUniqueId id;
  int nRanks, rank;
  rank_ctx ctx;
} thread_rank;

static void* setup_thread(void* arg) {
  thread_rank* t = arg;
  memset(&t->ctx, 0, sizeof(t->ctx));
  if (ccoCommCreate(t->id, t->nRanks, t->rank, 0, &t->ctx.comm) != ccoSuccess) {
    CHECK(0, "thread rank %d: create: %s", t->rank, ccoGetLastError(NULL));
    return NULL;
  }
  if (!setup_rank(&t->ctx)) {
    teardown_rank(&t->ctx);
    t->ctx.comm = NULL;
  }
  return NULL;
}

/* Rank 1's waiter on barrier 1, where rank 0 never arrives: the host
 * aborting rank 0 is news to rank 1 only when a host collective of its own
 * fails, which must then stop its device waits too. */
static void check_abort_reaches_peer(rank_ctx* c1) {
  blocked_wait w = {&c1->dc, 1, 0, ccoDevSuccess, 0};
  pthread_t th;
  pthread_create(&th, NULL, blocked_wait_thread, &w);
  mp_sleep(0.2);
  ccoResult_t res = ccoBarrierAll(c1->comm);
  if (res == ccoSuccess) res = ccoBarrierAll(c1->comm);
  double failedAt = mp_now();
  CHECK(res == ccoRemoteError, "rank 1: host barrier after the peer's abort: %s", ccoGetErrorString(res));
  int returned = wait_finished(&w, 2.0);
  CHECK(returned && w.status == ccoDevAborted && w.endTime - failedAt < 1.0,
        "rank 1: device wait %s with status %d %.3f s after its host barrier failed",
        returned ? "returned" : "still blocked", (int)w.status, returned ? w.endTime - failedAt : 2.0);
  if (!returned) ccoCommAbort(c1->comm); /* let the thread go */
  pthread_join(th, NULL);
  printf("abort: rank 1's blocked wait returned %s %.3f s after its host barrier failed (%s)\n",
         w.status == ccoDevAborted ? "ccoDevAborted" : "something else", w.endTime - failedAt, ccoGetErrorString(res));
}

static void check_abort(void) {
  thread_rank ts[2];
  pthread_t th[2];
  if (!MP_OK(ccoGetUniqueId(&ts[0].id))) {
    CHECK(0, "ccoGetUniqueId: %s", ccoGetLastError(NULL));
    return;
  }
  for (int r = 0; r < 2; r++) {
    ts[r].id = ts[0].id;
    ts[r].nRanks = 2;
    ts[r].rank = r;
    pthread_create(&th[r], NULL, setup_thread, &ts[r]);
  }
  for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
  if (!ts[0].ctx.comm || !ts[1].ctx.comm) {
    for (int r = 0; r < 2; r++)
      if (ts[r].ctx.comm) teardown_rank(&ts[r].ctx);
    return;
  }
  rank_ctx* c0 = &ts[0].ctx;
  blocked_wait w = {&c0->dc, 0, 0, ccoDevSuccess, 0};
  pthread_t waiter;
  pthread_create(&waiter, NULL, blocked_wait_thread, &w);
  mp_sleep(0.2);
  CHECK(!atomic_load(&w.finished), "rank 0's wait returned (status %d) though rank 1 never arrived", (int)w.status);
  double abortAt = mp_now();
  CHECK(MP_OK(ccoCommAbort(c0->comm)), "ccoCommAbort: %s", ccoGetLastError(c0->comm));
  int returned = wait_finished(&w, 5.0);
  double took = returned ? w.endTime - abortAt : 5.0;
  CHECK(returned && w.status == ccoDevAborted && took < 1.0,
        "rank 0: blocked wait %s with status %d %.3f s after ccoCommAbort", returned ? "returned" : "still blocked",
        (int)w.status, took);
  CHECK(ccoDevCommAborted(&c0->dc), "ccoDevCommAborted is false after ccoCommAbort");
  if (returned) pthread_join(waiter, NULL);
  else pthread_detach(waiter); /* cannot be stopped; the process exits soon */
  printf("abort: rank 0's blocked ccoLsaBarrierWait returned %s %.3f s after ccoCommAbort\n",
         w.status == ccoDevAborted ? "ccoDevAborted" : "something else", took);
  check_abort_reaches_peer(&ts[1].ctx);
  for (int r = 0; r < 2; r++) teardown_rank(&ts[r].ctx);
}

/* ------------------------------------------------------------------- main */

static int parse_options(int argc, char** argv) {
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--abort")) g_opt.abortTest = 1;
    else if (!v) return 0;
    else if (!strcmp(a, "--rounds")) g_opt.rounds = atol(v), i++;
    else if (!strcmp(a, "--multi-rounds")) g_opt.multiRounds = atol(v), i++;
    else if (!strcmp(a, "--indices")) g_opt.indices = atoi(v), i++;
    else if (!strcmp(a, "--threads")) g_opt.threads = atoi(v), i++;
    else if (!strcmp(a, "--die")) g_opt.die = atoi(v), i++;
    else if (!strcmp(a, "--timeout")) g_opt.timeoutS = atof(v), i++;
    else return 0;
  }
  return g_opt.rounds >= 2 && g_opt.multiRounds >= 1 && g_opt.indices >= 0 && g_opt.indices <= MAX_INDICES &&
         g_opt.threads >= 0 && g_opt.threads <= MAX_RANKS && !(g_opt.threads && g_opt.die >= 0) &&
         g_opt.timeoutS > 0;
}

int main(int argc, char** argv) {
  if (!parse_options(argc, argv)) {
    fprintf(stderr,
            "usage: [ccorun -n N] %s [--rounds R] [--multi-rounds M] [--indices K] [--timeout S]\n"
            "       %s --threads N [options]   ranks as threads of this process\n"
            "       ccorun -n N %s --die RANK [--rounds R]\n"
            "       %s --abort\n",
            argv[0], argv[0], argv[0], argv[0]);
    return 2;
  }
  /* The stress stores into peers' windows from CPU threads. */
  setenv("CCO_PLATFORM", "host", 1);
  if (g_opt.abortTest) {
    check_abort();
  } else if (g_opt.threads > 0) {
    run_thread_ranks(g_opt.threads);
  } else {
    rank_ctx c;
    memset(&c, 0, sizeof(c));
    ccoResult_t res = ccoCommCreateFromEnv(0, &c.comm);
    CHECK(res == ccoSuccess, "ccoCommCreateFromEnv: %s", ccoGetLastError(NULL));
    if (res == ccoSuccess) run_rank(&c);
  }
  return mp_finish("mp_lsa_barrier");
}
