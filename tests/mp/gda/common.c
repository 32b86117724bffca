/*
 * The helpers every step of mp_gda uses: the check counters, checked host
 * barriers, the expected endpoint table, the watchdog, and the start of a
 * step (selected by --only, armed, every slot of this rank reset between
 * two barriers).
 *
 * Every device wait has a timeout (WAIT_NS), and a watchdog thread aborts
 * the communicator when a step outlives its limit (so calls without a
 * timeout, flushes, return ccoDevAborted), then exits the rank.
 */
#include "gda.h"

/* The counters of every file's checks (see MP_UTIL_SHARED_COUNTS). */
int mp_passed, mp_failed;
pthread_mutex_t mp_check_lock = PTHREAD_MUTEX_INITIALIZER;

const ccoCoop_t kCoops[3] = {ccoCoopThread, ccoCoopWarp, ccoCoopBlock};

int dev_ok_(ccoDevStatus_t st, int rank, int line, const char* what) {
  if (st == ccoDevSuccess) return 1;
  CHECK(0, "rank %d: line %d: %s returned %s", rank, line, what, ccoDevStatusName(st));
  return 0;
}

int barrier(rank_ctx* c) {
  ccoResult_t r = ccoBarrierAll(c->comm);
  if (r != ccoSuccess)
    CHECK(0, "rank %d: ccoBarrierAll: %s (%s)", c->rank, ccoGetErrorString(r), ccoGetLastError(c->comm));
  return r == ccoSuccess;
}

/* Whether rank a has an endpoint to rank b under the connection type. */
int expect_peer(const rank_ctx* c, int a, int b) {
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

/* ------------------------------------------------------------- watchdog */

static rank_ctx* g_ctx;
static pthread_mutex_t g_wdLock = PTHREAD_MUTEX_INITIALIZER;
static ccoComm* g_wdComm; /* NULL once teardown destroys it */
static const char* g_wdStep = "setup";
static double g_wdDeadline;
static int g_wdStrikes;

void watchdog_arm(const char* step, double limit) {
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

/* Starts the watchdog over c's communicator, armed for the setup. */
void watchdog_start(rank_ctx* c) {
  g_ctx = c;
  g_wdComm = c->comm;
  watchdog_arm("setup", 60);
  pthread_t wd;
  pthread_create(&wd, NULL, watchdog_main, NULL);
  pthread_detach(wd);
}

/* Before the communicator is destroyed: from then on a step past its limit
 * exits the rank (there is no communicator left to abort). */
void watchdog_forget_comm(void) {
  pthread_mutex_lock(&g_wdLock);
  g_wdComm = NULL;
  pthread_mutex_unlock(&g_wdLock);
}

/* ---------------------------------------------------------------- steps */

int step_selected(const char* name) { return !g_opt.only || strstr(name, g_opt.only) != NULL; }

/* Starts a step: every rank is past the previous one (whose operations are
 * all flushed), so nothing is in flight to this rank's slots. */
int step_begin(rank_ctx* c, const char* name, double limit) {
  if (!step_selected(name)) return 0;
  watchdog_arm(name, limit);
  if (!barrier(c)) return 0;
  reset_slots(&c->dc);
  return barrier(c);
}
