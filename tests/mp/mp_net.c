/*
 * The libfabric network engine (src/transport/net) between processes on this
 * host, over tcp;ofi_rxm (or CCO_NET_PROVIDER). Ranks are fork()ed; each
 * creates a communicator only to exchange endpoint addresses and rkeys with
 * ccoBootstrapAllGather and to meet in barriers.
 *
 *   mp_net            2 and 4 ranks, then the killed-peer case
 *
 * Each rank runs a progress thread: the engine is not thread safe, so every
 * engine call of the test takes the rank's lock. The thread keeps calling
 * cco_net_progress also while the main thread sits in a barrier, because with
 * manual progress (tcp;ofi_rxm) a target moves incoming data only then.
 *
 * Cases, every rank, with barriers in between:
 *  - writes of 0 B, 8 B, 1 MiB and 3.5 MiB + 5 to every rank (itself too);
 *    CCO_NET_MAX_MSG is set to 1 MiB, so the last is split by the caller into
 *    max_msg pieces; each is read back and compared, and the target checks the
 *    final block; a write of max_msg + 1 is refused (ccoInvalidArgument);
 *  - atomic add: every rank adds (rank+1) 500 times to one slot of rank 0
 *    concurrently: the final value is exact;
 *  - fetch-add: every rank fetch-adds 1, 200 times, to one slot of the last
 *    rank: the old values gathered from all ranks are exactly 0..N*200-1;
 *  - ordering: 20 rounds of a 1 MiB write to the next rank, then, after its
 *    completion, an atomic add on a flag there: the target that sees the flag
 *    checks at once that the whole block is there;
 *  - notified writes (where the provider carries remote completion data):
 *    20 rounds of 1 MiB written to the next rank with a notification, which
 *    the target's progress thread checks the whole block against as it is
 *    reported, then 64 zero- and 8-byte notified writes back to back, each
 *    value reported exactly once; without the capability (CCO_NET_NOTIFY=0)
 *    the call is refused with ccoUnsupported;
 *  - backpressure: 5000 writes and 5000 atomic adds posted back to back (the
 *    op pool is smaller): CCO_NET_BUSY is answered by progressing, and every
 *    operation completes;
 *  - a peer without an endpoint (all-zero address) and peers out of range:
 *    ccoInvalidArgument;
 *  - no leaked fds: /proc/self/fd counted after a warm-up open/close (libfabric
 *    is loaded once per process) and again after the engine is closed.
 * Killed peer (2 ranks): rank 1 is SIGKILLed while rank 0 keeps 32 writes of
 * 64 KiB in flight to it; rank 0 must get an error completion (or an error
 * from a post) within KILL_BOUND_S, never hang; it prints how long it took.
 * Signal handlers: a process with its own SIGTERM handler opens the engine
 * and finds it, and its crash signals' handlers, as they were; its abort()
 * ends it by SIGABRT.
 * Also, in rank 0: cco_net_open with a provider that does not exist returns
 * ccoUnsupported naming it, a domain filter that matches nothing likewise.
 *
 * Without libfabric (not built in, or not installed) the test prints that it
 * did not run and why, and exits 77 (skipped), or 1 when
 * CCO_TEST_REQUIRE_NET=1.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>

#include "mp_util.h"
#include "mp_net_probe.h"
#include "transport/net/net.h"

#define MAX_RANKS 8
#define MAX_MSG (1u << 20)
#define CTRL_BYTES 65536u      /* slots and flags at the start of the region */
#define AREA_BYTES (4u << 20)  /* one data area per source rank */
#define SLOT_ADD 0             /* atomic add target (rank 0) */
#define SLOT_FADD 8            /* fetch-add target (last rank) */
#define SLOT_FLOOD 16          /* backpressure atomics (next rank) */
#define FLAG_OFF(src) (64u + 8u * (unsigned)(src)) /* ordering flags */
#define ADD_ITERS 500
#define FADD_ITERS 200
#define ORDER_ROUNDS 20
#define FLOOD 5000
#define WAIT_S 30.0
#define KILL_BOUND_S 20.0

typedef struct {
  cco_net* net;
  pthread_mutex_t lock;
  pthread_t thread;
  atomic_int stop;
  atomic_long ok, failed; /* completions seen by the progress thread */
  atomic_int lastError;
  long posted, busy;
  /* Notifications (peers' write_notify), handled in the progress thread as
   * they come, before its next progress call: on_notify sees the target's
   * memory exactly as the engine left it when it reported the write. */
  void (*on_notify)(void* arg, uint64_t data);
  void* notifyArg;
  atomic_long notes;
} tnet;

static void* progress_main(void* arg) {
  tnet* t = arg;
  cco_net_completion c[64];
  while (!atomic_load(&t->stop)) {
    int n = 0;
    pthread_mutex_lock(&t->lock);
    ccoResult_t r = cco_net_progress(t->net, c, 64, &n);
    pthread_mutex_unlock(&t->lock);
    for (int i = 0; i < n; i++) {
      if (c[i].notify) {
        if (c[i].context || c[i].peer != -1 || c[i].result != ccoSuccess) atomic_fetch_add(&t->failed, 1);
        if (t->on_notify) t->on_notify(t->notifyArg, c[i].data);
        atomic_fetch_add(&t->notes, 1);
        continue;
      }
      if (c[i].result == ccoSuccess) {
        atomic_fetch_add(&t->ok, 1);
      } else {
        atomic_store(&t->lastError, (int)c[i].result);
        atomic_fetch_add(&t->failed, 1);
      }
      if (c[i].context) atomic_store((atomic_int*)c[i].context, c[i].result == ccoSuccess ? 1 : 2);
    }
    if (r != ccoSuccess) atomic_fetch_add(&t->failed, 1);
    if (n == 0) mp_sleep(20e-6); /* 2-core CI machines run 4 ranks x 2 threads */
  }
  return NULL;
}

/* Posts `call` (an engine call returning ccoResult_t) under the lock; on
 * CCO_NET_BUSY lets the progress thread run and posts again. */
#define POST(t, res, call)                       \
  do {                                           \
    for (;;) {                                   \
      pthread_mutex_lock(&(t)->lock);            \
      (res) = (call);                            \
      pthread_mutex_unlock(&(t)->lock);          \
      if ((res) != CCO_NET_BUSY) break;          \
      (t)->busy++;                               \
      sched_yield();                             \
    }                                            \
    if ((res) == ccoSuccess) (t)->posted++;      \
  } while (0)

/* Waits until every posted operation completed; returns 1 when all did
 * within the limit (failed ones included: callers check t->failed). */
static int wait_all(tnet* t, double limit) {
  double end = mp_now() + limit;
  while (atomic_load(&t->ok) + atomic_load(&t->failed) < t->posted) {
    if (mp_now() > end) return 0;
    mp_sleep(50e-6);
  }
  return 1;
}

static uint8_t pattern(int src, int dst, size_t i, int round) {
  return (uint8_t)(src * 37 + dst * 11 + round * 101 + i * 7 + (i >> 12) + 1);
}

typedef struct {
  int rank, nRanks;
  ccoComm* comm;
  tnet t;
  uint8_t* region; /* remote-accessible: ctrl + nRanks areas */
  uint8_t* src;    /* local source of writes */
  uint8_t* dst;    /* local destination of reads */
  uint64_t* results;
  cco_net_mr *regionMr, *srcMr, *dstMr, *resultsMr;
  cco_net_rkey rkeys[MAX_RANKS];
} rank_ctx;

/* aligned_alloc wants a size that is a multiple of the alignment. */
static void* alloc_pages(size_t bytes) { return aligned_alloc(4096, (bytes + 4095) & ~(size_t)4095); }

static ccoResult_t engine_open(cco_net** net) {
  cco_net_config cfg;
  cco_net_config_from_env(&cfg);
  return cco_net_open(&cfg, net);
}

/* Opens the engine, exchanges addresses (plus one extra peer with an all-zero
 * address) and registrations. Returns 0 on success. */
static int setup(rank_ctx* x) {
  memset(&x->t, 0, sizeof(x->t));
  pthread_mutex_init(&x->t.lock, NULL);
  if (!MP_OK(engine_open(&x->t.net))) {
    MP_CHECK(0, "rank %d: open: %s", x->rank, ccoGetLastError(NULL));
    return -1;
  }
  if (x->rank == 0) printf("  engine: %s\n", cco_net_describe(x->t.net));
  uint8_t mine[CCO_NET_ADDR_MAX];
  uint8_t* all = calloc((size_t)x->nRanks + 1, CCO_NET_ADDR_MAX);
  MP_CHECK(MP_OK(cco_net_local_addr(x->t.net, mine)), "local addr");
  MP_CHECK(MP_OK(ccoBootstrapAllGather(x->comm, mine, all, CCO_NET_ADDR_MAX)), "address allgather");
  /* peer nRanks: no endpoint (the extra, all-zero entry) */
  MP_CHECK(MP_OK(cco_net_connect(x->t.net, x->nRanks + 1, all)), "connect: %s", ccoGetLastError(NULL));
  MP_CHECK(cco_net_connect(x->t.net, x->nRanks + 1, all) == ccoInvalidUsage, "second connect accepted");
  free(all);

  size_t regionBytes = CTRL_BYTES + (size_t)x->nRanks * AREA_BYTES;
  x->region = alloc_pages(regionBytes);
  x->src = alloc_pages(AREA_BYTES);
  x->dst = alloc_pages(AREA_BYTES);
  x->results = alloc_pages(FADD_ITERS * sizeof(uint64_t));
  memset(x->region, 0, regionBytes);
  memset(x->dst, 0, AREA_BYTES);
  cco_net_rkey rk, unused;
  int ok = MP_OK(cco_net_mr_reg(x->t.net, x->region, regionBytes,
                                CCO_NET_ACCESS_LOCAL | CCO_NET_ACCESS_REMOTE, &x->regionMr, &rk)) &&
           MP_OK(cco_net_mr_reg(x->t.net, x->src, AREA_BYTES, CCO_NET_ACCESS_LOCAL, &x->srcMr, &unused)) &&
           MP_OK(cco_net_mr_reg(x->t.net, x->dst, AREA_BYTES, CCO_NET_ACCESS_LOCAL, &x->dstMr, &unused)) &&
           MP_OK(cco_net_mr_reg(x->t.net, x->results, FADD_ITERS * sizeof(uint64_t), CCO_NET_ACCESS_LOCAL,
                                &x->resultsMr, &unused));
  MP_CHECK(ok, "registration: %s", ccoGetLastError(NULL));
  MP_CHECK(cco_net_mr_reg(x->t.net, x->src, 0, CCO_NET_ACCESS_LOCAL, &x->srcMr, &unused) == ccoInvalidArgument,
           "zero-size registration accepted");
  cco_net_mr* cudaMr = NULL;
  MP_CHECK(cco_net_mr_reg(x->t.net, x->src, AREA_BYTES, CCO_NET_ACCESS_LOCAL | CCO_NET_MEMORY_CUDA, &cudaMr,
                          &unused) == ccoUnsupported && cudaMr == NULL,
           "GPU memory registered on an engine opened without FI_HMEM");
  MP_CHECK(MP_OK(ccoBootstrapAllGather(x->comm, &rk, x->rkeys, sizeof(rk))), "rkey allgather");
  pthread_create(&x->t.thread, NULL, progress_main, &x->t);
  return ok ? 0 : -1;
}

static void teardown(rank_ctx* x) {
  if (x->t.thread) {
    atomic_store(&x->t.stop, 1);
    pthread_join(x->t.thread, NULL);
  }
  cco_net_mr_dereg(x->t.net, x->regionMr);
  cco_net_mr_dereg(x->t.net, x->srcMr);
  cco_net_mr_dereg(x->t.net, x->dstMr);
  cco_net_mr_dereg(x->t.net, x->resultsMr);
  cco_net_close(x->t.net);
  pthread_mutex_destroy(&x->t.lock);
  free(x->region);
  free(x->src);
  free(x->dst);
  free(x->results);
}

static uint64_t area_off(int src) { return CTRL_BYTES + (uint64_t)src * AREA_BYTES; }

/* A write of any size, split into max_msg pieces as callers must. */
static void write_split(rank_ctx* x, int peer, size_t size, uint64_t remoteOff) {
  size_t max = cco_net_max_msg(x->t.net);
  size_t off = 0;
  do {
    size_t n = size - off < max ? size - off : max;
    ccoResult_t r;
    POST(&x->t, r, cco_net_write(x->t.net, peer, x->src + off, x->srcMr, n, x->rkeys[peer], remoteOff + off, NULL));
    MP_CHECK(r == ccoSuccess, "write %zu@%zu to %d: %s", n, off, peer, ccoGetLastError(NULL));
    off += n;
  } while (off < size);
}

static void case_write_read(rank_ctx* x) {
  const size_t sizes[] = {0, 8, 1u << 20, (7u << 19) + 5};
  size_t max = cco_net_max_msg(x->t.net);
  MP_CHECK(max == MAX_MSG, "max_msg %zu (CCO_NET_MAX_MSG is %u)", max, MAX_MSG);
  ccoResult_t r;
  pthread_mutex_lock(&x->t.lock);
  r = cco_net_write(x->t.net, 0, x->src, x->srcMr, max + 1, x->rkeys[0], area_off(x->rank), NULL);
  pthread_mutex_unlock(&x->t.lock);
  MP_CHECK(r == ccoInvalidArgument, "write above max_msg: %d", r);
  for (int p = 0; p < x->nRanks; p++) {
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
      for (size_t i = 0; i < sizes[s]; i++) x->src[i] = pattern(x->rank, p, i, (int)s);
      write_split(x, p, sizes[s], area_off(x->rank));
      MP_CHECK(wait_all(&x->t, WAIT_S) && atomic_load(&x->t.failed) == 0, "writes of %zu to %d did not complete",
               sizes[s], p);
      /* read it back, also split */
      memset(x->dst, 0, sizes[s] + 1);
      for (size_t off = 0; off < sizes[s] || (off == 0 && sizes[s] == 0);) {
        size_t n = sizes[s] - off < max ? sizes[s] - off : max;
        POST(&x->t, r, cco_net_read(x->t.net, p, x->dst + off, x->dstMr, n, x->rkeys[p], area_off(x->rank) + off, NULL));
        MP_CHECK(r == ccoSuccess, "read %zu from %d: %s", n, p, ccoGetLastError(NULL));
        off += n;
        if (n == 0) break;
      }
      MP_CHECK(wait_all(&x->t, WAIT_S) && atomic_load(&x->t.failed) == 0, "reads from %d did not complete", p);
      MP_CHECK(!memcmp(x->dst, x->src, sizes[s]) && x->dst[sizes[s]] == 0, "read-back of %zu bytes from %d differs",
               sizes[s], p);
    }
  }
  MP_CHECK(MP_OK(ccoBarrierAll(x->comm)), "barrier");
  size_t last = sizeof(sizes) / sizeof(sizes[0]) - 1, bad = 0;
  for (int src = 0; src < x->nRanks; src++)
    for (size_t i = 0; i < sizes[last]; i++) bad += x->region[area_off(src) + i] != pattern(src, x->rank, i, (int)last);
  MP_CHECK(bad == 0, "%zu wrong bytes at the target after the writes", bad);
}

static uint64_t load64(rank_ctx* x, uint64_t off) {
  return __atomic_load_n((uint64_t*)(x->region + off), __ATOMIC_ACQUIRE);
}

static void case_atomics(rank_ctx* x) {
  ccoResult_t r;
  for (int i = 0; i < ADD_ITERS; i++) {
    POST(&x->t, r, cco_net_atomic_add(x->t.net, 0, (uint64_t)x->rank + 1, x->rkeys[0], SLOT_ADD, NULL));
    MP_CHECK(r == ccoSuccess, "atomic add: %s", ccoGetLastError(NULL));
  }
  int last = x->nRanks - 1;
  for (int i = 0; i < FADD_ITERS; i++) {
    x->results[i] = UINT64_MAX;
    POST(&x->t, r, cco_net_fetch_add(x->t.net, last, 1, &x->results[i], x->resultsMr, x->rkeys[last], SLOT_FADD, NULL));
    MP_CHECK(r == ccoSuccess, "fetch-add: %s", ccoGetLastError(NULL));
  }
  pthread_mutex_lock(&x->t.lock);
  r = cco_net_atomic_add(x->t.net, 0, 1, x->rkeys[0], SLOT_ADD + 4, NULL);
  pthread_mutex_unlock(&x->t.lock);
  MP_CHECK(r == ccoInvalidArgument, "unaligned atomic accepted: %d", r);
  MP_CHECK(wait_all(&x->t, WAIT_S) && atomic_load(&x->t.failed) == 0, "atomics did not complete");
  MP_CHECK(MP_OK(ccoBarrierAll(x->comm)), "barrier");
  uint64_t want = (uint64_t)ADD_ITERS * (uint64_t)x->nRanks * (uint64_t)(x->nRanks + 1) / 2;
  if (x->rank == 0) MP_CHECK(load64(x, SLOT_ADD) == want, "atomic sum %llu, want %llu",
                             (unsigned long long)load64(x, SLOT_ADD), (unsigned long long)want);
  if (x->rank == last)
    MP_CHECK(load64(x, SLOT_FADD) == (uint64_t)FADD_ITERS * (uint64_t)x->nRanks, "fetch-add total %llu",
             (unsigned long long)load64(x, SLOT_FADD));
  uint64_t* all = malloc(sizeof(uint64_t) * FADD_ITERS * (size_t)x->nRanks);
  MP_CHECK(MP_OK(ccoBootstrapAllGather(x->comm, x->results, all, FADD_ITERS * sizeof(uint64_t))), "allgather");
  size_t total = (size_t)FADD_ITERS * (size_t)x->nRanks, bad = 0;
  uint8_t* seen = calloc(total, 1);
  for (size_t i = 0; i < total; i++) {
    if (all[i] >= total || seen[all[i]]) bad++;
    else seen[all[i]] = 1;
  }
  MP_CHECK(bad == 0, "fetch-add: %zu old values repeated or out of range", bad);
  free(seen);
  free(all);
}

static void case_ordering(rank_ctx* x) {
  int to = (x->rank + 1) % x->nRanks, from = (x->rank + x->nRanks - 1) % x->nRanks;
  size_t bytes = 1u << 20, torn = 0, late = 0;
  ccoResult_t r;
  for (int round = 0; round < ORDER_ROUNDS; round++) {
    for (size_t i = 0; i < bytes; i++) x->src[i] = pattern(x->rank, to, i, round + 1000);
    write_split(x, to, bytes, area_off(x->rank));
    MP_CHECK(wait_all(&x->t, WAIT_S) && atomic_load(&x->t.failed) == 0, "ordering write did not complete");
    POST(&x->t, r, cco_net_atomic_add(x->t.net, to, 1, x->rkeys[to], FLAG_OFF(x->rank), NULL));
    MP_CHECK(r == ccoSuccess, "flag add: %s", ccoGetLastError(NULL));
    /* the target: wait for the flag, then look at the data at once */
    double end = mp_now() + WAIT_S;
    while (load64(x, FLAG_OFF(from)) < (uint64_t)round + 1 && mp_now() < end) sched_yield();
    if (load64(x, FLAG_OFF(from)) < (uint64_t)round + 1) late++;
    for (size_t i = 0; i < bytes; i++) torn += x->region[area_off(from) + i] != pattern(from, x->rank, i, round + 1000);
    MP_CHECK(wait_all(&x->t, WAIT_S), "flag add did not complete");
    MP_CHECK(MP_OK(ccoBarrierAll(x->comm)), "barrier");
  }
  MP_CHECK(late == 0 && torn == 0, "ordering: %zu flags never came, %zu bytes not there when the flag was", late, torn);
}

/* Notified writes: every rank writes 1 MiB to the next one with the round
 * and its rank as data, then NOTE_BURST zero-byte and 8-byte notified
 * writes back to back. The target checks each 1 MiB block in full when its
 * notification is reported, and that every burst value came exactly once. */
#define NOTE_BURST 64
typedef struct {
  rank_ctx* x;
  int from;
  atomic_long torn, wrong, big;
  atomic_uchar seen[NOTE_BURST];
} note_check;

static void check_note(void* arg, uint64_t data) {
  note_check* k = arg;
  rank_ctx* x = k->x;
  int src = (int)(data >> 48), kind = (int)((data >> 32) & 0xffff), value = (int)(data & 0xffffffffu);
  if (src != k->from) {
    atomic_fetch_add(&k->wrong, 1);
    return;
  }
  if (kind == 1) { /* the 1 MiB block of round `value` */
    long bad = 0;
    for (size_t i = 0; i < (1u << 20); i++) bad += x->region[area_off(src) + i] != pattern(src, x->rank, i, value + 2000);
    atomic_fetch_add(&k->torn, bad);
    atomic_fetch_add(&k->big, 1);
  } else if (kind == 2 && value >= 0 && value < NOTE_BURST) {
    atomic_fetch_add(&k->seen[value], 1);
  } else {
    atomic_fetch_add(&k->wrong, 1);
  }
}

static void case_notify(rank_ctx* x) {
  int to = (x->rank + 1) % x->nRanks, from = (x->rank + x->nRanks - 1) % x->nRanks;
  ccoResult_t r;
  if (!cco_net_can_notify(x->t.net)) {
    pthread_mutex_lock(&x->t.lock);
    r = cco_net_write_notify(x->t.net, to, x->src, x->srcMr, 8, x->rkeys[to], area_off(x->rank), 1, NULL);
    pthread_mutex_unlock(&x->t.lock);
    MP_CHECK(r == ccoUnsupported, "write_notify without the capability: %d", r);
    /* tcp;ofi_rxm carries remote completion data: losing it is a regression */
    const char* prov = getenv("CCO_NET_PROVIDER");
    const char* off = getenv("CCO_NET_NOTIFY");
    MP_CHECK((prov && prov[0] && strcmp(prov, "tcp;ofi_rxm")) || (off && !strcmp(off, "0")),
             "tcp;ofi_rxm reported no remote completion data");
    if (x->rank == 0) printf("  notified writes: not offered (%s)\n", ccoGetLastError(NULL));
    return;
  }
  static note_check k; /* one rank per process */
  memset(&k, 0, sizeof(k));
  k.x = x;
  k.from = from;
  pthread_mutex_lock(&x->t.lock);
  x->t.notifyArg = &k;
  x->t.on_notify = check_note;
  pthread_mutex_unlock(&x->t.lock);
  MP_CHECK(MP_OK(ccoBarrierAll(x->comm)), "barrier");
  uint64_t me = (uint64_t)x->rank << 48;
  for (int round = 0; round < ORDER_ROUNDS; round++) {
    for (size_t i = 0; i < (1u << 20); i++) x->src[i] = pattern(x->rank, to, i, round + 2000);
    POST(&x->t, r, cco_net_write_notify(x->t.net, to, x->src, x->srcMr, 1u << 20, x->rkeys[to], area_off(x->rank),
                                        me | (1ull << 32) | (uint64_t)round, NULL));
    MP_CHECK(r == ccoSuccess, "notified write: %s", ccoGetLastError(NULL));
    double end = mp_now() + WAIT_S;
    while (atomic_load(&k.big) < round + 1 && mp_now() < end) sched_yield();
    MP_CHECK(atomic_load(&k.big) == round + 1, "round %d: %ld notifications of 1 MiB blocks", round,
             atomic_load(&k.big));
    MP_CHECK(wait_all(&x->t, WAIT_S), "notified write did not complete");
    MP_CHECK(MP_OK(ccoBarrierAll(x->comm)), "barrier");
  }
  for (int i = 0; i < NOTE_BURST; i++) {
    POST(&x->t, r, cco_net_write_notify(x->t.net, to, x->src, x->srcMr, i % 2 ? 8 : 0, x->rkeys[to],
                                        FLAG_OFF(x->rank), me | (2ull << 32) | (uint64_t)i, NULL));
    MP_CHECK(r == ccoSuccess, "notified write %d: %s", i, ccoGetLastError(NULL));
  }
  double end = mp_now() + WAIT_S;
  long want = ORDER_ROUNDS + NOTE_BURST;
  while (atomic_load(&x->t.notes) < want && mp_now() < end) sched_yield();
  MP_CHECK(wait_all(&x->t, WAIT_S) && atomic_load(&x->t.failed) == 0, "notified writes did not complete");
  MP_CHECK(MP_OK(ccoBarrierAll(x->comm)), "barrier");
  int missing = 0;
  for (int i = 0; i < NOTE_BURST; i++) missing += atomic_load(&k.seen[i]) != 1;
  MP_CHECK(atomic_load(&x->t.notes) == want && missing == 0 && atomic_load(&k.wrong) == 0,
           "notifications: %ld of %ld, %d burst values not seen exactly once, %ld unexpected", atomic_load(&x->t.notes),
           want, missing, atomic_load(&k.wrong));
  MP_CHECK(atomic_load(&k.torn) == 0, "notified writes: %ld bytes not there when the notification was reported",
           atomic_load(&k.torn));
  pthread_mutex_lock(&x->t.lock);
  x->t.on_notify = NULL;
  pthread_mutex_unlock(&x->t.lock);
  if (x->rank == 0) printf("  notified writes: %d x 1 MiB and %d small ones, every byte there when announced\n",
                           ORDER_ROUNDS, NOTE_BURST);
}

static void case_backpressure(rank_ctx* x) {
  int to = (x->rank + 1) % x->nRanks, from = (x->rank + x->nRanks - 1) % x->nRanks;
  long busyBefore = x->t.busy;
  ccoResult_t r = ccoSuccess;
  /* Backpressure for certain: with the progress thread held off (its lock),
   * nothing gives op records back to the pool, so posting meets
   * CCO_NET_BUSY within the pool's size (at most 65536) or earlier, when the
   * provider's queue is full. Without this the progress thread can keep up
   * with the flood below and the pool never empties. */
  pthread_mutex_lock(&x->t.lock);
  for (int i = 0; i <= 65536; i++) {
    r = cco_net_write(x->t.net, to, x->src + 8 * (i % 64), x->srcMr, 8, x->rkeys[to],
                      area_off(x->rank) + 8 * (uint64_t)(i % 64), NULL);
    if (r != ccoSuccess) break;
    x->t.posted++;
  }
  pthread_mutex_unlock(&x->t.lock);
  MP_CHECK(r == CCO_NET_BUSY, "held-off posts ended with %d, not CCO_NET_BUSY", (int)r);
  if (r == CCO_NET_BUSY) x->t.busy++;
  r = ccoSuccess;
  for (int i = 0; i < FLOOD && r == ccoSuccess; i++) {
    POST(&x->t, r, cco_net_write(x->t.net, to, x->src + 8 * (i % 64), x->srcMr, 8, x->rkeys[to],
                                 area_off(x->rank) + 8 * (uint64_t)(i % 64), NULL));
    if (r == ccoSuccess)
      POST(&x->t, r, cco_net_atomic_add(x->t.net, to, 1, x->rkeys[to], SLOT_FLOOD, NULL));
  }
  MP_CHECK(r == ccoSuccess, "flood post: %s", ccoGetLastError(NULL));
  double t0 = mp_now();
  MP_CHECK(wait_all(&x->t, 120.0) && atomic_load(&x->t.failed) == 0, "flood did not complete");
  MP_CHECK(MP_OK(ccoBarrierAll(x->comm)), "barrier");
  MP_CHECK(load64(x, SLOT_FLOOD) == FLOOD, "flood atomics from %d: %llu", from,
           (unsigned long long)load64(x, SLOT_FLOOD));
  MP_CHECK(x->t.busy > busyBefore, "never saw CCO_NET_BUSY in %d posts", 2 * FLOOD);
  if (x->rank == 0)
    printf("  backpressure: %d ops, CCO_NET_BUSY answered %ld times, drained in %.3f s\n", 2 * FLOOD,
           x->t.busy - busyBefore, mp_now() - t0);
}

static void case_bad_peers(rank_ctx* x) {
  int bad[] = {x->nRanks /* no endpoint */, x->nRanks + 1, -1};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    int p = bad[i];
    cco_net_rkey rk = x->rkeys[0];
    pthread_mutex_lock(&x->t.lock);
    ccoResult_t w = cco_net_write(x->t.net, p, x->src, x->srcMr, 8, rk, 0, NULL);
    ccoResult_t rd = cco_net_read(x->t.net, p, x->dst, x->dstMr, 8, rk, 0, NULL);
    ccoResult_t a = cco_net_atomic_add(x->t.net, p, 1, rk, 0, NULL);
    ccoResult_t f = cco_net_fetch_add(x->t.net, p, 1, x->results, x->resultsMr, rk, 0, NULL);
    pthread_mutex_unlock(&x->t.lock);
    MP_CHECK(w == ccoInvalidArgument && rd == ccoInvalidArgument && a == ccoInvalidArgument &&
                 f == ccoInvalidArgument, "peer %d: %d %d %d %d", p, w, rd, a, f);
  }
  MP_CHECK(strstr(ccoGetLastError(NULL), "peer") != NULL, "detail: %s", ccoGetLastError(NULL));
}

static int rank_main(int rank, int nRanks, ccoUniqueId id, void* arg) {
  rank_ctx x = {.rank = rank, .nRanks = nRanks};
  if (!MP_OK(ccoCommCreate(id, nRanks, rank, 0, &x.comm))) {
    fprintf(stderr, "rank %d: create: %s\n", rank, ccoGetLastError(NULL));
    return 1;
  }
  /* Warm-up: loads libfabric and whatever it keeps per process. */
  cco_net* warm = NULL;
  MP_CHECK(MP_OK(engine_open(&warm)), "warm-up open: %s", ccoGetLastError(NULL));
  cco_net_close(warm);
  int fds0 = mp_count_fds();
  if (setup(&x) == 0) {
    case_write_read(&x);
    case_atomics(&x);
    case_ordering(&x);
    case_notify(&x);
    case_backpressure(&x);
    case_bad_peers(&x);
  }
  MP_CHECK(MP_OK(ccoBarrierAll(x.comm)), "final barrier");
  teardown(&x);
  int fds1 = mp_count_fds();
  MP_CHECK(fds1 == fds0, "fds: %d before the engine, %d after closing it", fds0, fds1);
  MP_CHECK(MP_OK(ccoCommDestroy(x.comm)), "destroy");
  char name[48];
  snprintf(name, sizeof(name), "  mp_net %d ranks, rank %d", nRanks, rank);
  return mp_finish(name);
}

/* rank 0 checks the refusals; both then meet, rank 1 dies while rank 0 writes. */
static int kill_main(int rank, int nRanks, ccoUniqueId id, void* arg) {
  rank_ctx x = {.rank = rank, .nRanks = nRanks};
  if (!MP_OK(ccoCommCreate(id, nRanks, rank, 0, &x.comm))) return 1;
  if (rank == 0) {
    cco_net_config cfg;
    cco_net_config_from_env(&cfg);
    cfg.provider = "no-such-provider";
    cco_net* net = NULL;
    ccoResult_t r = cco_net_open(&cfg, &net);
    MP_CHECK(r == ccoUnsupported && net == NULL && strstr(ccoGetLastError(NULL), "no-such-provider"),
             "unknown provider: %d, %s", r, ccoGetLastError(NULL));
    printf("  unknown provider: %s\n", ccoGetLastError(NULL));
    cco_net_config_from_env(&cfg);
    cfg.domains = "no-such-domain";
    r = cco_net_open(&cfg, &net);
    MP_CHECK(r == ccoUnsupported && strstr(ccoGetLastError(NULL), "no-such-domain"), "domain filter: %d, %s", r,
             ccoGetLastError(NULL));
    printf("  unknown domain: %s\n", ccoGetLastError(NULL));
    cco_net_config_from_env(&cfg);
    cfg.trafficClass = 10; /* DSCP */
    cfg.serviceLevel = 3;  /* logs a warning once */
    r = cco_net_open(&cfg, &net);
    MP_CHECK(r == ccoSuccess, "traffic class 10: %s", ccoGetLastError(NULL));
    if (r == ccoSuccess) {
      /* The provider may drop the class (with a warning); when it takes the
       * hint, the hint is DSCP 10 in libfabric's form (FI_TC_DSCP | 10). */
      const char* d = cco_net_describe(net);
      MP_CHECK(strstr(d, "tclass asked 0x10a ") || strstr(d, "tclass asked 0x0 "),
               "traffic class 10 asked as something else: %s", d);
      printf("  with traffic class 10: %s\n", d);
      cco_net_close(net);
    }
  }
  if (setup(&x) != 0) return mp_finish("  mp_net kill");
  MP_CHECK(MP_OK(ccoBarrierAll(x.comm)), "barrier");
  if (rank == 1) {
    mp_sleep(0.3); /* serving rank 0's writes through the progress thread */
    raise(SIGKILL);
  }
  double t0 = mp_now(), end = t0 + KILL_BOUND_S;
  ccoResult_t r = ccoSuccess;
  long posted = 0;
  while (mp_now() < end && atomic_load(&x.t.failed) == 0) {
    if (x.t.posted - atomic_load(&x.t.ok) - atomic_load(&x.t.failed) >= 32) {
      mp_sleep(100e-6);
      continue;
    }
    pthread_mutex_lock(&x.t.lock);
    r = cco_net_write(x.t.net, 1, x.src, x.srcMr, 65536, x.rkeys[1], area_off(0), NULL);
    pthread_mutex_unlock(&x.t.lock);
    if (r == ccoSuccess) x.t.posted++, posted++;
    else if (r != CCO_NET_BUSY) break;
  }
  double took = mp_now() - t0;
  int sawError = atomic_load(&x.t.failed) > 0 || (r != ccoSuccess && r != CCO_NET_BUSY);
  printf("  killed peer: %s after %.3f s (peer killed at ~0.3 s; %ld writes posted, %ld completed): %s\n",
         sawError ? "error" : "NO error", took, posted, (long)atomic_load(&x.t.ok),
         r != ccoSuccess && r != CCO_NET_BUSY ? ccoGetErrorString(r)
                                              : ccoGetErrorString((ccoResult_t)atomic_load(&x.t.lastError)));
  MP_CHECK(sawError, "no error within %.0f s of writing to a killed peer", KILL_BOUND_S);
  int lastErr = atomic_load(&x.t.lastError);
  MP_CHECK(!sawError || r == ccoRemoteError || r == ccoNetError || lastErr == ccoRemoteError || lastErr == ccoNetError,
           "error kind %d / %d", r, lastErr);
  /* Outstanding writes must all end (error completions), none may hang. */
  MP_CHECK(wait_all(&x.t, KILL_BOUND_S), "%ld writes never completed after the peer died",
           x.t.posted - atomic_load(&x.t.ok) - atomic_load(&x.t.failed));
  teardown(&x);
  ccoCommDestroy(x.comm); /* the peer is gone: its result is not the point here */
  return mp_finish("  mp_net kill, rank 0");
}

static int run(int nRanks, mp_rank_fn fn, const char* what, int expectKilled) {
  ccoUniqueId id;
  if (!MP_OK(ccoGetUniqueId(&id))) {
    fprintf(stderr, "id: %s\n", ccoGetLastError(NULL));
    return 1;
  }
  pid_t pids[MAX_RANKS];
  int codes[MAX_RANKS], failed = 0;
  double t0 = mp_now();
  printf("%s\n", what);
  mp_spawn(pids, 0, nRanks, nRanks, id, fn, NULL);
  mp_wait(pids, nRanks, 280.0, codes);
  for (int r = 0; r < nRanks; r++) {
    int want = (expectKilled && r == 1) ? 128 + SIGKILL : 0;
    if (codes[r] != want) {
      fprintf(stderr, "FAIL %s: rank %d exited with %d\n", what, r, codes[r]);
      failed++;
    }
  }
  printf("%s: %s in %.2f s\n", what, failed ? "FAILED" : "ok", mp_now() - t0);
  return failed;
}

/* Loading libfabric must leave the process's signal handlers alone (the
 * PSM libraries it pulls in install their own, ofi_loader.c restores them):
 * a child with its own SIGTERM handler opens the engine, finds that handler
 * and those of the crash signals as they were before, then aborts, and must
 * die of SIGABRT (with the PSM handler it exited with status 1, and spun
 * forever under AddressSanitizer). Returns 0 when it did. */
static void on_term(int sig) { (void)sig; }

static int crash_case(void) {
  pid_t pid = fork();
  if (pid == 0) {
    alarm(60);
    signal(SIGTERM, on_term);
    /* What the process has before (the sanitizers install some of their own). */
    static const int watched[] = {SIGINT, SIGILL, SIGABRT, SIGBUS, SIGSEGV, SIGTERM};
    enum { NWATCHED = sizeof(watched) / sizeof(watched[0]) };
    struct sigaction before[NWATCHED], now;
    for (int i = 0; i < NWATCHED; i++) sigaction(watched[i], NULL, &before[i]);
    cco_net* net = NULL;
    if (!MP_OK(engine_open(&net))) _exit(3);
    int bad = sigaction(SIGTERM, NULL, &now) || now.sa_handler != on_term;
    for (int i = 0; i < NWATCHED; i++)
      bad += sigaction(watched[i], NULL, &now) || now.sa_handler != before[i].sa_handler;
    if (bad) {
      fprintf(stderr, "FAIL crash case: %d signal handlers changed by the engine's open\n", bad);
      _exit(4);
    }
    abort();
  }
  int st = 0;
  if (pid < 0 || waitpid(pid, &st, 0) != pid) return 1;
  int ok = WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT;
  printf("  crash after the engine's open: %s\n",
         ok ? "the handlers were the process's own, abort() ended it by SIGABRT" : "FAILED");
  if (!ok && WIFEXITED(st)) printf("  (the child exited with status %d instead)\n", WEXITSTATUS(st));
  return !ok;
}

int main(void) {
  setenv("CCO_NET_MAX_MSG", "1048576", 1); /* so 3.5 MiB writes are split */
  if (!mp_net_opens_in_child("mp_net: did not run")) {
    const char* req = getenv("CCO_TEST_REQUIRE_NET");
    int required = req && !strcmp(req, "1");
    printf("mp_net: skipped%s\n", required ? ", but CCO_TEST_REQUIRE_NET=1: failing" : "");
    return required ? 1 : 77;
  }
  int failed = 0;
  failed += run(2, rank_main, "mp_net: 2 ranks", 0);
  failed += run(4, rank_main, "mp_net: 4 ranks", 0);
  failed += run(2, kill_main, "mp_net: killed peer", 1);
  failed += crash_case();
  printf("mp_net: %s\n", failed ? "FAILED" : "all passed");
  return failed ? 1 : 0;
}
