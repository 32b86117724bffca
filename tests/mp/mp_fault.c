/*
 * Fault test: a random rank is SIGKILLed in each phase of a job's life, over
 * many runs, and every survivor must fail with the real cause (ccoRemoteError,
 * a detail that names the dead rank as closed or dead) within the bound (1 s
 * by default) of the death, then destroy its communicator promptly and leave
 * nothing behind: no process, fd, thread or mapping more than before the
 * communicator was created, no new file in /dev/shm.
 *
 *   mp_fault [--phase NAME[,NAME...]] [--runs R] [--ranks N] [--seed S] [--bound SECONDS]
 *
 * Phases (ranks are processes forked by this program, on the host platform):
 *
 *   create   the victim dies at a random one of the socket sends it makes
 *            while it creates its communicator (counted in a clean run first),
 *            so always after it joined; survivors fail in ccoCommCreate, or in
 *            the host barrier that follows when they had finished creating.
 *            Its bound needs creation itself to notice a dead rank (the root
 *            watching the ranks that joined, link setup giving up on a peer
 *            that is gone): the bootstrap's work, not the liveness
 *            monitor's, which starts once the communicator exists.
 *   barrier  host barriers in a loop; the victim dies before or inside one.
 *   window   ccoWindowRegisterAlloc / ccoWindowDeregister in a loop; the
 *            victim dies inside a registration. Also needs an allgather
 *            that never takes an ABORT written after a data header for data
 *            (otherwise "bad magic" or "bad arguments there" blame the
 *            wrong rank).
 *   devwait  a CPU thread plays a kernel that waits without a timeout: LSA
 *            barriers in a loop (even runs) or one ccoSignalWaitUntil for a
 *            signal nobody sends (odd runs); it must return ccoDevAborted,
 *            with the async error ccoRemoteError. Only the liveness monitor
 *            can tell these waits.
 *   sdma     a ring of ccoSdmaPutAsync signals and ccoStreamWaitSignal waits
 *            (the host platform waits on the calling thread).
 *   gda      two virtual hosts (CCO_HOSTID), a CPU thread streaming GDA puts
 *            with signals to its cross-host peers and flushing; the victim
 *            dies mid-stream. Skipped when the network engine does not open
 *            here (a failure with CCO_TEST_REQUIRE_NET=1).
 *
 * The victim writes the time of its death (CLOCK_MONOTONIC, shared by every
 * process) into shared memory just before it raises SIGKILL; each survivor
 * writes when it saw the error. Each phase prints the death-to-error times
 * of every survivor of every run: median and max.
 *
 * The bound is the library's part of that time. A killed process's sockets
 * close only once the kernel has torn its memory down (do_exit releases the
 * address space before the files), and only then can any peer tell it is
 * gone. Under TSan that teardown is most of the death-to-error time (the
 * survivors see the error within a few ms of the victim being reaped); a
 * CI run whose survivors all erred 3.3 s after the death fits a teardown
 * that slow. So the bound counts from the later of the death and the moment
 * the launcher reaped the victim, and each run prints both.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include "base/env.h"
#include "cco/cco_gda.h"
#include "cco/cco_moe.h"
#include "comm/comm.h"
#include "mp_util.h"
#include "mp_net_probe.h"
#include "transport/net/net.h"

#define MAX_RANKS 8
#define RUN_LIMIT_S 30.0    /* a run that outlives this has ranks left behind */
#define DESTROY_BOUND_S 3.0 /* ccoCommDestroy after the failure */
#define GDA_BYTES (64u << 10)

/* --------------------------------------------------------- shared state */

typedef struct {
  int done;          /* the survivor got as far as recording its result */
  double errAt;      /* when it saw the error (0: it saw none) */
  int res;           /* result of the failing host call (ccoSuccess for a device status) */
  int dev;           /* device status that failed, -1 when a host call failed */
  int async;         /* ccoCommGetAsyncError after the failure (-1: no communicator) */
  char where[40];    /* which call failed */
  char detail[480];  /* ccoGetLastError right after */
  int fds, threads, maps; /* after destroy minus before create */
  int destroyRes;
  double destroySeconds;
} rank_result;

typedef struct {
  double deathAt; /* set by the victim just before it dies */
  long createSends[MAX_RANKS]; /* clean run: socket sends of each rank's ccoCommCreate */
  rank_result r[MAX_RANKS];
} shared_state;

static shared_state* g_sh;

/* ------------------------------------------------- death at a given send */

/* The library's socket sends come here (this program links the static
 * library, so its `send` wins over libc's): the victim dies right after its
 * k-th send from the moment it was armed, in the middle of a bootstrap step. */
static atomic_long g_sends;
static atomic_long g_killAt; /* 0: not armed */

/* The parent reads the shared state after waitpid, which orders it. */
static void die_now(void) {
  g_sh->deathAt = mp_now();
  raise(SIGKILL);
}

ssize_t send(int fd, const void* buf, size_t len, int flags) {
  ssize_t n = sendto(fd, buf, len, flags, NULL, 0);
  int err = errno;
  long count = atomic_fetch_add(&g_sends, 1) + 1;
  long at = atomic_load(&g_killAt);
  if (at > 0 && count >= at) die_now();
  errno = err;
  return n;
}

static void arm_kill(long k) {
  if (k <= 0) die_now();
  atomic_store(&g_killAt, atomic_load(&g_sends) + k);
}

/* ------------------------------------------------------------- options */

typedef enum { PH_CREATE, PH_BARRIER, PH_WINDOW, PH_DEVWAIT, PH_SDMA, PH_GDA, PH_COLL, PH_MOE, PH_COUNT } phase_id;
static const char* const kPhaseNames[PH_COUNT] = {"create", "barrier", "window", "devwait", "sdma", "gda", "coll", "moe"};
static const char* const kPhaseWhat[PH_COUNT] = {
    "create (needs the bootstrap to notice a dead rank during creation)",
    "host barrier",
    "window registration (needs the allgather to never take an ABORT for data)",
    "device wait without timeout (LSA barrier / signal wait)",
    "SDMA stream wait (ccoStreamWaitSignal)",
    "GDA transfer, two virtual hosts",
    "collectives (ccoAllReduce LL and one-shot, ccoAllGather) while the peers wait in their blocks",
    "MoE dispatch and combine over two virtual hosts (GDA between them) while the peers wait for the dead rank",
};

typedef struct {
  int phase;
  int victim;
  long iter;   /* iteration (or round) at which the victim dies */
  long k;      /* sends into that iteration (0: before it) */
  double delay; /* devwait signal variant: seconds before the death */
  int variant;
} run_cfg;

static uint64_t g_rng;
static uint64_t rnd(void) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return g_rng;
}
static long rnd_in(long lo, long hi) { return lo + (long)(rnd() % (uint64_t)(hi - lo + 1)); }

/* ------------------------------------------------------- rank helpers */

/* What the communicator maps: its memory chunks (memfds named cco-chunk)
 * and its flat VA reservation (gigabytes). Thread stacks and malloc arenas
 * that glibc keeps after a join are neither. Returns the chunks plus one
 * per GiB of address space. */
static int count_maps(void) {
  FILE* f = fopen("/proc/self/maps", "r");
  if (!f) return -1;
  /* The range communicator handles come from is reserved once per process
   * and kept (src/comm/handles.c): not a leak of one communicator. */
  const void* arena = NULL;
  size_t arenaBytes = 0;
  cco_comm_handle_arena(&arena, &arenaBytes);
  unsigned long long arenaLo = (unsigned long long)(uintptr_t)arena, arenaHi = arenaLo + arenaBytes;
  char line[512];
  int chunks = 0;
  unsigned long long bytes = 0;
  while (fgets(line, sizeof(line), f)) {
    unsigned long long lo, hi;
    if (sscanf(line, "%llx-%llx", &lo, &hi) == 2 && !(lo >= arenaLo && hi <= arenaHi)) bytes += hi - lo;
    chunks += strstr(line, "cco-chunk") != NULL;
  }
  fclose(f);
  return chunks + (int)(bytes >> 30);
}

typedef struct {
  int rank, nRanks;
  ccoComm* comm;
  rank_result* out;
  int fds0, threads0, maps0;
} rank_state;

/* The first failure this rank sees: its time first, then what it says. */
static void record_host(rank_state* s, const char* where, ccoResult_t res) {
  rank_result* o = s->out;
  o->errAt = mp_now();
  o->res = res;
  o->dev = -1;
  snprintf(o->where, sizeof(o->where), "%s", where);
  /* The async error first: its detail is written before it is set. */
  ccoResult_t a = ccoSuccess;
  o->async = s->comm && ccoCommGetAsyncError(s->comm, &a) == ccoSuccess ? (int)a : -1;
  snprintf(o->detail, sizeof(o->detail), "%s", ccoGetLastError(s->comm));
}

/* A device status that failed: the kernel stamped the time; the host adds
 * the async error and its detail. */
static void record_dev(rank_state* s, const char* where, ccoDevStatus_t st, double at) {
  rank_result* o = s->out;
  o->errAt = at;
  o->res = ccoSuccess;
  o->dev = (int)st;
  snprintf(o->where, sizeof(o->where), "%s", where);
  ccoResult_t a = ccoSuccess;
  /* The abort word is set right after the async error, from another thread. */
  for (int i = 0; i < 100 && ccoCommGetAsyncError(s->comm, &a) == ccoSuccess && a == ccoSuccess; i++) mp_sleep(0.001);
  o->async = (int)a;
  snprintf(o->detail, sizeof(o->detail), "%s", ccoGetLastError(s->comm));
}

static int create(rank_state* s, ccoUniqueId id) {
  ccoResult_t res = ccoCommCreate(id, s->nRanks, s->rank, 0, &s->comm);
  if (res != ccoSuccess) {
    s->comm = NULL;
    record_host(s, "ccoCommCreate (setup)", res);
  }
  return res == ccoSuccess;
}

/* --------------------------------------------------------------- phases */

static void phase_create(rank_state* s, ccoUniqueId id, const run_cfg* cfg) {
  int victim = s->rank == cfg->victim;
  if (victim) arm_kill(cfg->k);
  ccoResult_t res = ccoCommCreate(id, s->nRanks, s->rank, 0, &s->comm);
  if (victim) die_now(); /* creation was over before the k-th send */
  if (res != ccoSuccess) {
    s->comm = NULL;
    record_host(s, "ccoCommCreate", res);
    return;
  }
  if (cfg->k < 0) { /* clean run: count the sends, then leave together */
    g_sh->createSends[s->rank] = atomic_load(&g_sends);
    if ((res = ccoBarrierAll(s->comm)) != ccoSuccess) record_host(s, "ccoBarrierAll (clean run)", res);
    return;
  }
  res = ccoBarrierAll(s->comm);
  if (res != ccoSuccess) record_host(s, "ccoBarrierAll after create", res);
}

static void phase_barrier(rank_state* s, const run_cfg* cfg) {
  for (long i = 0;; i++) {
    if (s->rank == cfg->victim && i == cfg->iter) arm_kill(cfg->k);
    ccoResult_t res = ccoBarrierAll(s->comm);
    if (res != ccoSuccess) {
      record_host(s, "ccoBarrierAll", res);
      return;
    }
  }
}

static void phase_window(rank_state* s, const run_cfg* cfg) {
  for (long i = 0;; i++) {
    if (s->rank == cfg->victim && i == cfg->iter) arm_kill(cfg->k);
    ccoWindow_t w = NULL;
    void* p = NULL;
    ccoResult_t res = ccoWindowRegisterAlloc(s->comm, (size_t)(64 << 10) * (size_t)(1 + i % 4), &w, &p);
    if (res != ccoSuccess) {
      record_host(s, "ccoWindowRegisterAlloc", res);
      return;
    }
    res = ccoWindowDeregister(s->comm, w);
    if (res != ccoSuccess) {
      record_host(s, "ccoWindowDeregister", res);
      return;
    }
  }
}

/* The "kernel" of the devwait and gda phases: a CPU thread. */
typedef struct {
  rank_state* s;
  const run_cfg* cfg;
  ccoDevComm* dc;
  ccoWindow_t win;
  ccoDevStatus_t status;
  double at;
  const char* where;
} kernel_arg;

static void* devwait_kernel(void* arg) {
  kernel_arg* k = arg;
  int victim = k->s->rank == k->cfg->victim;
  if (k->cfg->variant == 0) {
    ccoLsaBarrierSession b = ccoLsaBarrierSessionInit(k->dc, 0, ccoCoopThread);
    k->where = "ccoLsaBarrierSync (no timeout)";
    for (long r = 0;; r++) {
      if (victim && r == k->cfg->iter) die_now();
      ccoDevStatus_t st = ccoLsaBarrierSync(&b);
      if (st != ccoDevSuccess) {
        k->at = mp_now();
        k->status = st;
        break;
      }
    }
    ccoLsaBarrierSessionEnd(&b);
  } else {
    k->where = "ccoSignalWaitUntil (no timeout)";
    if (victim) {
      mp_sleep(k->cfg->delay);
      die_now();
    }
    const uint64_t* sig = (const uint64_t*)ccoGetLocalPtr(k->win, 0);
    k->status = ccoSignalWaitUntil(k->dc, sig, 1, 0);
    k->at = mp_now();
  }
  return NULL;
}

static int devcomm(rank_state* s, ccoDevComm* dc, uint32_t gdaConn) {
  ccoDevCommRequirements reqs = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.gdaConnectionType = gdaConn;
  reqs.lsaBarrierCount = 1;
  if (gdaConn != ccoGdaConnectionNone) reqs.gdaSignalCount = MAX_RANKS;
  ccoResult_t res = ccoDevCommCreate(s->comm, &reqs, dc);
  if (res != ccoSuccess) record_host(s, "ccoDevCommCreate (setup)", res);
  return res == ccoSuccess;
}

/* A zeroed window of `bytes` every rank has before the victim may die (the
 * setup steps of the device phases); a failure is recorded. */
static int setup_window(rank_state* s, size_t bytes, ccoWindow_t* win, void** p) {
  ccoResult_t res;
  if ((res = ccoWindowRegisterAlloc(s->comm, bytes, win, p)) != ccoSuccess) {
    record_host(s, "ccoWindowRegisterAlloc (setup)", res);
    return 0;
  }
  memset(*p, 0, bytes);
  if ((res = ccoBarrierAll(s->comm)) != ccoSuccess) {
    record_host(s, "ccoBarrierAll (setup)", res);
    return 0;
  }
  return 1;
}

static void phase_devwait(rank_state* s, const run_cfg* cfg) {
  ccoDevComm dc;
  ccoWindow_t win = NULL;
  void* p = NULL;
  if (!devcomm(s, &dc, ccoGdaConnectionNone)) return;
  if (!setup_window(s, 4096, &win, &p)) return;
  kernel_arg k = {s, cfg, &dc, win, ccoDevSuccess, 0, ""};
  pthread_t t;
  pthread_create(&t, NULL, devwait_kernel, &k);
  pthread_join(t, NULL);
  record_dev(s, k.where, k.status, k.at);
}

static void phase_sdma(rank_state* s, const run_cfg* cfg) {
  ccoWindow_t win = NULL;
  void* p = NULL;
  ccoResult_t res;
  if (!setup_window(s, 4096, &win, &p)) return;
  int next = (s->rank + 1) % s->nRanks, prev = (s->rank + s->nRanks - 1) % s->nRanks;
  size_t mine = 8 * (size_t)s->rank, theirs = 8 * (size_t)prev;
  for (long i = 1;; i++) {
    if (s->rank == cfg->victim && i == cfg->iter) die_now();
    res = ccoSdmaPutAsync(s->comm, next, win, 0, win, 0, 0, win, mine, (uint64_t)i, NULL);
    if (res != ccoSuccess) {
      record_host(s, "ccoSdmaPutAsync", res);
      return;
    }
    res = ccoStreamWaitSignal(s->comm, win, theirs, (uint64_t)i, NULL);
    if (res != ccoSuccess) {
      record_host(s, "ccoStreamWaitSignal", res);
      return;
    }
  }
}

static void* gda_kernel(void* arg) {
  kernel_arg* k = arg;
  int victim = k->s->rank == k->cfg->victim;
  ccoGda g = ccoGdaHandle(k->dc, 0, ccoGdaDoorbellImmediate);
  int peers[MAX_RANKS], n = 0;
  for (int q = 0; q < k->s->nRanks; q++)
    if (ccoGdaHasPeer(&g, q)) peers[n++] = q;
  k->where = "GDA put / flush";
  for (long i = 0;; i++) {
    if (victim && i == k->cfg->iter) die_now();
    ccoDevStatus_t st = ccoDevSuccess;
    for (int j = 0; j < n && st == ccoDevSuccess; j++)
      st = ccoGdaPut(&g, peers[j], k->win, (size_t)k->s->rank * GDA_BYTES, k->win, 0, GDA_BYTES,
                     ccoGdaSigInc((uint32_t)k->s->rank), CCO_GDA_NO_COUNTER, ccoCoopThread, ccoGdaThreadAggregate);
    if (st == ccoDevSuccess && i % 8 == 7) st = ccoGdaFlush(&g, ccoCoopThread);
    /* A kernel between operations looks at the abort word. */
    if (st == ccoDevSuccess && ccoDevCommAborted(k->dc)) st = ccoDevAborted;
    if (st != ccoDevSuccess) {
      k->at = mp_now();
      k->status = st;
      return NULL;
    }
  }
}

static void phase_gda(rank_state* s, const run_cfg* cfg) {
  ccoDevComm dc;
  ccoWindow_t win = NULL;
  void* p = NULL;
  if (!devcomm(s, &dc, ccoGdaConnectionCrossNode)) return;
  if (!setup_window(s, (size_t)s->nRanks * GDA_BYTES, &win, &p)) return;
  kernel_arg k = {s, cfg, &dc, win, ccoDevSuccess, 0, ""};
  pthread_t t;
  pthread_create(&t, NULL, gda_kernel, &k);
  pthread_join(t, NULL);
  record_dev(s, k.where, k.status, k.at);
}

/* Collectives back to back; the victim dies between two of them, so the
 * others are inside the next one, waiting for it in the blocks' barriers or
 * LL polls, which only the abort word (the liveness monitor) ends. */
static void phase_coll(rank_state* s, const run_cfg* cfg) {
  enum { SMALL = 1024, LARGE = 65536 }; /* floats: LL and one-shot all-reduce sizes */
  size_t bytes = (size_t)LARGE * sizeof(float) * (size_t)s->nRanks;
  ccoWindow_t win = NULL;
  void* p = NULL;
  if (!setup_window(s, 2 * bytes, &win, &p)) return;
  float* in = p;
  float* out = (float*)((char*)p + bytes);
  /* The first collective sets the state up (collective, before any death). */
  ccoResult_t res = ccoAllReduce(s->comm, in, out, SMALL, ccoFloat32, ccoSum, NULL);
  if (res != ccoSuccess) {
    record_host(s, "ccoAllReduce (setup)", res);
    return;
  }
  for (long i = 1;; i++) {
    if (s->rank == cfg->victim && i == cfg->iter) die_now();
    const char* where = i % 3 == 0 ? "ccoAllGather" : "ccoAllReduce";
    if (i % 3 == 0) res = ccoAllGather(s->comm, in, out, SMALL, ccoFloat32, NULL);
    else res = ccoAllReduce(s->comm, in, out, i % 3 == 1 ? SMALL : LARGE, ccoFloat32, ccoSum, NULL);
    if (res != ccoSuccess) {
      record_host(s, where, res);
      return;
    }
  }
}

/* MoE dispatch and combine back to back over two virtual hosts; the victim
 * dies between two calls, so the others wait for it inside the next one
 * (its counts, its rows or its combine-ready signal). Every rank sends
 * tokens to every rank, so every rank waits on every other. */
static void phase_moe(rank_state* s, const run_cfg* cfg) {
  enum { TOKENS = 8, HIDDEN = 64, TOPK = 2 };
  ccoMoeConfig c = ccoMoeConfigDefault();
  c.hidden = HIDDEN, c.maxTokensPerRank = TOKENS, c.expertsPerRank = 1, c.topk = TOPK;
  ccoMoeOp* op = NULL;
  ccoResult_t res = ccoMoeCreate(s->comm, &c, &op);
  if (res != ccoSuccess) {
    record_host(s, "ccoMoeCreate", res);
    return;
  }
  static _Alignas(16) uint16_t tokens[TOKENS * HIDDEN], out[TOKENS * HIDDEN];
  static float weights[TOKENS * TOPK], outWeights[TOKENS * TOPK];
  static int32_t ids[TOKENS * TOPK];
  for (int t = 0; t < TOKENS; t++)
    for (int j = 0; j < TOPK; j++) ids[t * TOPK + j] = (t + j * (s->nRanks / 2 > 0 ? s->nRanks / 2 : 1)) % s->nRanks;
  void* combIn = NULL;
  ccoMoeRegion(op, ccoMoeCombineInput, &combIn, NULL);
  for (long i = 1;; i++) {
    if (s->rank == cfg->victim && i == cfg->iter) die_now();
    const char* where = i % 2 ? "ccoMoeDispatch" : "ccoMoeCombine";
    res = i % 2 ? ccoMoeDispatch(op, tokens, weights, NULL, ids, TOKENS, NULL)
                : ccoMoeCombine(op, combIn, NULL, out, outWeights, NULL);
    if (res != ccoSuccess) {
      record_host(s, where, res);
      break;
    }
  }
  /* After the failure: the op still releases (its barrier fails at once). */
  ccoMoeDestroy(op);
}

static const char* env_lookup(const char* name, void* arg) {
  (void)arg;
  return getenv(name);
}

static void* warm_up(void* arg) {
  *(pid_t*)arg = (pid_t)syscall(SYS_gettid);
  return NULL;
}

static int rank_main(int rank, int nRanks, ccoUniqueId id, void* arg) {
  const run_cfg* cfg = arg;
  if (cfg->phase == PH_GDA || cfg->phase == PH_MOE) {
    /* Two virtual hosts; the environment was parsed before the fork. */
    setenv("CCO_HOSTID", rank < nRanks / 2 ? "fault-a" : "fault-b", 1);
    cco_env_reload_for_test(env_lookup, NULL);
  }
  rank_state s = {rank, nRanks, NULL, &g_sh->r[rank], 0, 0, 0};
  /* A first thread, so that runtimes that start one of their own with it
   * (TSan) have done so before the count. */
  pthread_t warm;
  pid_t warmTid = 0;
  if (pthread_create(&warm, NULL, warm_up, &warmTid) == 0) {
    pthread_join(warm, NULL);
    /* A joined thread can stay listed in /proc/self/task for a moment: the
     * count below must not include it, or the run ends one thread short. */
    char task[64];
    snprintf(task, sizeof(task), "/proc/self/task/%d", (int)warmTid);
    for (double t0 = mp_now(); warmTid && access(task, F_OK) == 0 && mp_now() - t0 < 1.0;) mp_sleep(0.001);
  }
  s.fds0 = mp_count_fds();
  s.threads0 = mp_count_threads();
  s.maps0 = count_maps();
  if (cfg->phase == PH_CREATE) phase_create(&s, id, cfg);
  else if (create(&s, id)) {
    switch (cfg->phase) {
      case PH_BARRIER: phase_barrier(&s, cfg); break;
      case PH_WINDOW: phase_window(&s, cfg); break;
      case PH_DEVWAIT: phase_devwait(&s, cfg); break;
      case PH_SDMA: phase_sdma(&s, cfg); break;
      case PH_GDA: phase_gda(&s, cfg); break;
      case PH_COLL: phase_coll(&s, cfg); break;
      case PH_MOE: phase_moe(&s, cfg); break;
      default: break;
    }
  }
  if (rank == cfg->victim && cfg->k >= 0) die_now(); /* never lives past its phase */
  rank_result* o = s.out;
  double t = mp_now();
  o->destroyRes = s.comm ? ccoCommDestroy(s.comm) : ccoSuccess;
  o->destroySeconds = mp_now() - t;
  o->fds = mp_count_fds() - s.fds0;
  /* A joined thread can stay listed in /proc/self/task for a moment. */
  for (t = mp_now(); mp_count_threads() != s.threads0 && mp_now() - t < 1.0;) mp_sleep(0.005);
  o->threads = mp_count_threads() - s.threads0;
  o->maps = count_maps() - s.maps0;
  o->done = 1;
  return 0;
}

/* --------------------------------------------------------------- parent */

typedef struct {
  double bound;
  int runs, ranks;
  int phases[PH_COUNT];
} options;

/* Whether the detail blames the dead rank: "rank V closed its connection"
 * (the bootstrap), "rank V died" (the liveness monitor), or the GDA
 * proxy's "rank V refused every network operation" and the network
 * engine's "operation to peer V failed". */
static int names_dead(const char* detail, int victim) {
  const char* const forms[] = {"rank %d closed", "rank %d died", "rank %d refused every network",
                               "operation to peer %d failed"};
  for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
    char pat[64];
    snprintf(pat, sizeof(pat), forms[i], victim);
    if (strstr(detail, pat)) return 1;
  }
  return 0;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

/* Names in /dev/shm, newline separated (empty when it does not exist). */
static void list_shm(char* out, size_t size) {
  out[0] = '\0';
  DIR* d = opendir("/dev/shm");
  if (!d) return;
  size_t o = 0;
  struct dirent* e;
  while ((e = readdir(d)))
    if (e->d_name[0] != '.' && o + strlen(e->d_name) + 2 < size)
      o += (size_t)snprintf(out + o, size - o, "%s\n", e->d_name);
  closedir(d);
}

/* The network engine opens here (in a child: libfabric may start threads). */
/* One job of n ranks; a victim < 0 is a clean run. Appends every
 * survivor's death-to-error time to dts. */
static void run_job(const options* o, run_cfg* cfg, int run, double* dts, int* ndt, double* libMax) {
  int n = o->ranks;
  long sends[MAX_RANKS];
  memcpy(sends, g_sh->createSends, sizeof(sends));
  memset(g_sh, 0, sizeof(*g_sh));
  memcpy(g_sh->createSends, sends, sizeof(sends));
  ccoUniqueId id;
  if (ccoGetUniqueId(&id) != ccoSuccess) {
    MP_CHECK(0, "ccoGetUniqueId: %s", ccoGetLastError(NULL));
    return;
  }
  pid_t pids[MAX_RANKS];
  int codes[MAX_RANKS];
  double reapedAt[MAX_RANKS];
  atomic_store(&g_sends, 0);
  mp_spawn(pids, 0, n, n, id, rank_main, cfg);
  mp_wait_timed(pids, n, RUN_LIMIT_S, codes, reapedAt);
  const char* name = kPhaseNames[cfg->phase];
  char line[512];
  int o_ = snprintf(line, sizeof(line), "  %s run %d: victim %d", name, run, cfg->victim);
  if (cfg->phase == PH_CREATE || cfg->phase == PH_BARRIER || cfg->phase == PH_WINDOW)
    o_ += snprintf(line + o_, sizeof(line) - (size_t)o_, " (iteration %ld, send %ld)", cfg->iter, cfg->k);
  else if (cfg->phase == PH_DEVWAIT)
    o_ += snprintf(line + o_, sizeof(line) - (size_t)o_, " (%s)", cfg->variant ? "signal wait" : "LSA barriers");
  if (cfg->victim >= 0 && g_sh->deathAt > 0)
    o_ += snprintf(line + o_, sizeof(line) - (size_t)o_, " (reaped %.3f s after the death)",
                   reapedAt[cfg->victim] - g_sh->deathAt);
  o_ += snprintf(line + o_, sizeof(line) - (size_t)o_, ":");
  for (int r = 0; r < n; r++) {
    const rank_result* res = &g_sh->r[r];
    if (cfg->victim < 0) { /* clean run */
      MP_CHECK(codes[r] == 0 && res->done && res->errAt == 0, "%s clean run: rank %d exit %d, error in %s: %s", name, r,
               codes[r], res->where, res->detail);
      continue;
    }
    if (r == cfg->victim) {
      MP_CHECK(codes[r] == 128 + SIGKILL, "%s run %d: victim rank %d exit %d (%s: %s)", name, run, r, codes[r],
               res->where, res->detail);
      continue;
    }
    MP_CHECK(codes[r] == 0, "%s run %d: survivor rank %d %s (exit %d)", name, run, r,
             codes[r] == -1 ? "still running at the run's limit: killed" : "crashed", codes[r]);
    if (!res->done) continue;
    double dt = res->errAt - g_sh->deathAt;
    /* The library's part: from when the victim could be seen gone at the
     * latest (reaped; its links closed before that). */
    double gone = reapedAt[cfg->victim] > g_sh->deathAt ? reapedAt[cfg->victim] : g_sh->deathAt;
    double libDt = res->errAt - gone;
    int hostCall = res->dev < 0;
    MP_CHECK(res->errAt > 0, "%s run %d: survivor rank %d saw no error", name, run, r);
    if (res->errAt <= 0) continue;
    MP_CHECK(hostCall ? res->res == ccoRemoteError : (res->dev == ccoDevAborted && res->async == ccoRemoteError),
             "%s run %d: rank %d: %s returned %s (async error %s), not ccoRemoteError / ccoDevAborted: %s", name, run,
             r, res->where, hostCall ? ccoGetErrorString((ccoResult_t)res->res) : ccoDevStatusName((ccoDevStatus_t)res->dev),
             res->async < 0 ? "-" : ccoGetErrorString((ccoResult_t)res->async), res->detail);
    MP_CHECK(names_dead(res->detail, cfg->victim), "%s run %d: rank %d: %s: the detail does not blame dead rank %d: %s",
             name, run, r, res->where, cfg->victim, res->detail);
    MP_CHECK(libDt <= o->bound,
             "%s run %d: rank %d: %s failed %.3f s after the death, %.3f s after the victim was reaped (bound %.1f s): "
             "%s",
             name, run, r, res->where, dt, libDt, o->bound, res->detail);
    MP_CHECK(res->destroyRes == ccoSuccess && res->destroySeconds < DESTROY_BOUND_S,
             "%s run %d: rank %d: ccoCommDestroy returned %s after %.2f s", name, run, r,
             ccoGetErrorString((ccoResult_t)res->destroyRes), res->destroySeconds);
    MP_CHECK(res->fds == 0 && res->threads == 0 && res->maps == 0,
             "%s run %d: rank %d left behind %d fds, %d threads, %d mappings", name, run, r, res->fds, res->threads,
             res->maps);
    dts[(*ndt)++] = dt;
    if (libDt > *libMax) *libMax = libDt;
    o_ += snprintf(line + o_, sizeof(line) - (size_t)o_, " %.3f", dt);
  }
  if (cfg->victim >= 0) printf("%s s\n", line);
  fflush(stdout);
}

/* Runs one phase; returns 0 when it was skipped. */
static int run_phase(const options* o, int phase) {
  int n = o->ranks;
  const char* name = kPhaseNames[phase];
  if ((phase == PH_GDA || phase == PH_MOE) && !mp_net_opens_in_child("  the network engine does not open here")) {
    const char* req = getenv("CCO_TEST_REQUIRE_NET");
    MP_CHECK(!(req && !strcmp(req, "1")), "%s: the network engine does not open, and CCO_TEST_REQUIRE_NET=1", name);
    printf("phase %s: skipped (no network engine)\n", name);
    return 0;
  }
  static char shmBefore[1 << 16], shmAfter[1 << 16];
  list_shm(shmBefore, sizeof(shmBefore));
  double dts[64 * MAX_RANKS];
  int ndt = 0;
  double libMax = -1e30; /* negative: every error came before the reap */
  if (phase == PH_CREATE) { /* count each rank's sends while it creates */
    run_cfg clean = {PH_CREATE, -1, 0, -1, 0, 0};
    run_job(o, &clean, 0, dts, &ndt, &libMax);
  }
  for (int run = 1; run <= o->runs; run++) {
    run_cfg cfg = {phase, (int)rnd_in(0, n - 1), 0, 0, 0, 0};
    switch (phase) {
      case PH_CREATE: {
        long total = g_sh->createSends[cfg.victim];
        cfg.k = rnd_in(1, total > 1 ? total : 1);
        break;
      }
      case PH_BARRIER: cfg.iter = rnd_in(1, 300), cfg.k = rnd_in(0, 2); break;
      case PH_WINDOW: cfg.iter = rnd_in(1, 10), cfg.k = rnd_in(0, 12); break;
      case PH_DEVWAIT:
        cfg.variant = run % 2;
        cfg.iter = rnd_in(100, 3000);
        cfg.delay = 0.05 + 0.01 * (double)rnd_in(0, 20);
        break;
      case PH_SDMA: cfg.iter = rnd_in(10, 500); break;
      case PH_GDA: cfg.iter = rnd_in(8, 200); break;
      case PH_COLL: cfg.iter = rnd_in(2, 200); break;
      case PH_MOE: cfg.iter = rnd_in(1, 60); break;
      default: break;
    }
    run_job(o, &cfg, run, dts, &ndt, &libMax);
  }
  list_shm(shmAfter, sizeof(shmAfter));
  for (char* line = strtok(shmAfter, "\n"); line; line = strtok(NULL, "\n")) {
    char pat[300];
    snprintf(pat, sizeof(pat), "%s\n", line);
    MP_CHECK(strstr(shmBefore, pat) != NULL, "%s: /dev/shm/%s was left behind", name, line);
  }
  qsort(dts, (size_t)ndt, sizeof(double), cmp_double);
  if (ndt)
    printf("phase %s [%s]: %d runs, %d survivors, death to error: median %.3f s, max %.3f s; victim reaped to "
           "error: max %.3f s (bound %.1f s)\n",
           name, kPhaseWhat[phase], o->runs, ndt, ndt % 2 ? dts[ndt / 2] : (dts[ndt / 2 - 1] + dts[ndt / 2]) / 2,
           dts[ndt - 1], libMax, o->bound);
  else
    printf("phase %s [%s]: no survivor measured\n", name, kPhaseWhat[phase]);
  fflush(stdout);
  return 1;
}

static int parse(int argc, char** argv, options* o, uint64_t* seed) {
  for (int i = 1; i + 1 < argc; i += 2) { /* every option takes a value */
    const char* v = argv[i + 1];
    if (!strcmp(argv[i], "--phase")) {
      memset(o->phases, 0, sizeof(o->phases));
      char buf[256];
      snprintf(buf, sizeof(buf), "%s", v);
      for (char* t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
        int found = 0;
        for (int p = 0; p < PH_COUNT; p++)
          if (!strcmp(t, kPhaseNames[p]) || !strcmp(t, "all")) o->phases[p] = found = 1;
        if (!found) return 0;
      }
    } else if (!strcmp(argv[i], "--runs")) {
      o->runs = atoi(v);
    } else if (!strcmp(argv[i], "--ranks")) {
      o->ranks = atoi(v);
    } else if (!strcmp(argv[i], "--seed")) {
      *seed = strtoull(v, NULL, 0);
    } else if (!strcmp(argv[i], "--bound")) {
      o->bound = atof(v);
    } else {
      return 0;
    }
  }
  if (argc % 2 == 0) return 0; /* an option without its value */
  return o->runs > 0 && o->runs <= 64 && o->ranks >= 2 && o->ranks <= MAX_RANKS && o->bound > 0;
}

int main(int argc, char** argv) {
  options o = {1.0, 6, 4, {1, 1, 1, 1, 1, 1}};
  uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
  if (!parse(argc, argv, &o, &seed)) {
    fprintf(stderr, "usage: mp_fault [--phase create,barrier,window,devwait,sdma,gda,coll|all] [--runs R] "
                    "[--ranks N] [--seed S] [--bound SECONDS]\n");
    return 2;
  }
  g_rng = seed ? seed : 1;
  /* Before the first cco call: the environment is parsed once. A bootstrap
   * step waits at most 5 s, so a survivor that is not told still ends. */
  setenv("CCO_PLATFORM", "host", 1);
  setenv("CCO_BOOTSTRAP_TIMEOUT", "5", 1);
  setenv("CCO_DEBUG", "NONE", 0);
  g_sh = mmap(NULL, sizeof(*g_sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (g_sh == MAP_FAILED) return 2;
  memset(g_sh, 0, sizeof(*g_sh));
  printf("mp_fault: %d ranks, %d runs per phase, seed %llu, bound %.1f s\n", o.ranks, o.runs,
         (unsigned long long)seed, o.bound);
  int ran = 0;
  for (int p = 0; p < PH_COUNT; p++)
    if (o.phases[p]) ran += run_phase(&o, p);
  munmap(g_sh, sizeof(*g_sh));
  int rc = mp_finish("mp_fault");
  return rc == 0 && ran == 0 ? 77 : rc; /* every phase asked for was skipped */
}
