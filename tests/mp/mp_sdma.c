/*
 * SDMA on the host platform, through the device API itself (cco_sdma.h
 * compiled for the host: "kernels" are CPU threads, a thread is a warp and a
 * block of one) and through the host API (ccoSdmaPutAsync,
 * ccoStreamWaitSignal). The engine thread copies with memcpy there.
 *
 *   ccorun -n N mp_sdma [--iters I] [--flood M] [--issuers T] [--large-mib L] [--only STEP]
 *   mp_sdma --threads N [same options]          ranks are threads of this process
 *   ccorun -n N mp_sdma --engine-error          (or --threads N --engine-error)
 *   ccorun -n N mp_sdma --no-sdma               (or --threads N --no-sdma)
 *
 * Default run, every rank, in this order (host barriers in between):
 *  - invalid peer / queue: every device call returns ccoDevInvalid;
 *  - every queue index: a second device communicator with 8 queues, a signalled
 *    put to every peer on each queue; 9 queues refused, 0 means 2;
 *  - zero-byte puts: the signal still arrives, the counts are exact;
 *  - signal after data: an issuer thread puts random sizes (0..32 KiB) to every
 *    peer on every queue with remote signals, a receiver thread waits for each
 *    signal with ccoSdmaWaitSignal and checks right away that the whole block
 *    is there (a signal overtaking its data shows as a torn block), then
 *    acknowledges through LSA memory so the slot can be reused; I iterations;
 *  - flood: T issuer threads post M puts each on queue 0 to one peer, far more
 *    than the ring depth (256): wrap-around, credits, many producers on one
 *    ring; the receiver watches the signal climb and checks every block;
 *  - gets from every peer over every queue, then ccoSdmaQuiet, then verified;
 *  - ccoSdmaCommit: puts without signal then one commit: the signal goes up by
 *    exactly 1 and every block is there when it does; two bare commits: +2;
 *  - quiet: after ccoSdmaQuietQueue the data is at the peer (a get of it
 *    returns it, and the peer reads it after a host barrier);
 *  - a large put (L MiB, default 64) with a signal;
 *  - host API: ccoSdmaPutAsync + ccoStreamWaitSignal (stream NULL), rounds to
 *    the next rank, a put without signal, bad peers refused;
 *  - the communicator's async error is still ccoSuccess at the end.
 *
 * --engine-error: LSA rank 0 posts puts whose destination lies outside the
 * flat VA, with remote signals, to itself and to LSA rank 1. The engine must
 * fail the communicator: rank 0's waiter on that signal and its
 * ccoSdmaQuietQueue return ccoDevAborted within 2 s, ccoCommGetAsyncError
 * reports an error, and the next ccoSdmaPutAsync fails. LSA rank 1's wait
 * on the signal it will never get must not return success (it reports
 * whether it was aborted or timed out).
 *
 * --no-sdma: CCO_ENABLE_SDMA=0 (unless CCO_ENABLE_SDMA or MORI_ENABLE_SDMA is
 * already set): dc.sdma == 0, every device SDMA call returns
 * ccoDevUnsupported, ccoSdmaPutAsync returns ccoUnsupported, and the LSA
 * barrier of the same device communicator still works.
 *
 * Ends with "mp_sdma: N passed, N failed".
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "cco/cco_sdma.h"
#include "mp_pattern.h"
#include "mp_util.h"

#define MAX_RANKS 64
#define NS_PER_S 1000000000ull
#define WAIT_NS (30ull * NS_PER_S) /* device waits: a lost signal fails instead of hanging */
#define SPIN_LIMIT_S 60.0          /* host-side spins (acks, the flood watch) */

typedef struct {
  int threads;
  long iters;    /* signal-after-data iterations */
  long flood;    /* puts per issuer thread in the flood */
  int issuers;   /* issuer threads in the flood */
  long largeMiB; /* the large put */
  int engineError, noSdma;
  const char* only; /* run only the steps whose name contains this */
} options;

static options g_opt = {0, 2000, 4096, 4, 64, 0, 0, NULL};

#define CHECK(...) MP_CHECK_MT(__VA_ARGS__)

/* Calls that must work: counted only when they fail. */
#define MUST(call)                                                                                     \
  do {                                                                                                 \
    ccoResult_t r_ = (call);                                                                           \
    if (r_ != ccoSuccess) CHECK(0, "rank %d: %s: %s (%s)", c->rank, #call, ccoGetErrorString(r_),    \
                                ccoGetLastError(c->comm));                                             \
  } while (0)

typedef struct {
  ccoComm* comm;
  ccoDevComm dc; /* default requirements: sdmaQueueCount 0, meaning 2 */
  int rank, nRanks, lsaRank, lsaSize;
  uint32_t nq;
  int sdma; /* dc.sdma != 0 */
} rank_ctx;

typedef struct {
  ccoWindow_t win;
  char* local;
  size_t bytes;
} test_win;

static const char* status_name(ccoDevStatus_t st) { return ccoDevStatusName(st); }

/* ------------------------------------------------------------- helpers */

static int barrier(rank_ctx* c) {
  ccoResult_t r = ccoBarrierAll(c->comm);
  if (r != ccoSuccess) CHECK(0, "rank %d: ccoBarrierAll: %s (%s)", c->rank, ccoGetErrorString(r), ccoGetLastError(c->comm));
  return r == ccoSuccess;
}

/* Collective: a zeroed window of `bytes` on every rank. Peers may post as
 * soon as it returns, so signal bases are read before. Every test ends with
 * its puts quiet and a barrier, so bases read then are stable. */
static int win_open(rank_ctx* c, size_t bytes, test_win* w) {
  void* local = NULL;
  memset(w, 0, sizeof(*w));
  ccoResult_t r = ccoWindowRegisterAlloc(c->comm, bytes, &w->win, &local);
  if (r != ccoSuccess) {
    CHECK(0, "rank %d: ccoWindowRegisterAlloc(%zu): %s (%s)", c->rank, bytes, ccoGetErrorString(r),
          ccoGetLastError(c->comm));
    w->win = NULL;
    return 0;
  }
  w->local = (char*)local;
  w->bytes = bytes;
  memset(local, 0, bytes);
  return barrier(c); /* nobody writes into a peer's window before it is zeroed */
}

static void win_close(rank_ctx* c, test_win* w) {
  barrier(c); /* nobody still reads or copies into this window */
  if (w->win) MUST(ccoWindowDeregister(c->comm, w->win));
  w->win = NULL;
}

/* Every signal slot of this rank (src, q) of dc, into base[src * nq + q]. */
static void read_signals(const rank_ctx* c, const ccoDevComm* dc, uint32_t nq, uint64_t* base) {
  for (int s = 0; s < c->lsaSize; s++)
    for (uint32_t q = 0; q < nq; q++) base[(size_t)s * nq + q] = ccoSdmaReadSignal(dc, s, q);
}

/* Checks that every slot (src, q) stands at base + delta exactly. */
static void check_signals_exact(const rank_ctx* c, const ccoDevComm* dc, uint32_t nq, const uint64_t* base,
                                uint64_t delta, const char* what) {
  long wrong = 0;
  int firstSrc = -1;
  uint32_t firstQ = 0;
  uint64_t firstGot = 0;
  for (int s = 0; s < c->lsaSize; s++)
    for (uint32_t q = 0; q < nq; q++) {
      uint64_t v = ccoSdmaReadSignal(dc, s, q) - base[(size_t)s * nq + q];
      if (v != delta) {
        if (!wrong) firstSrc = s, firstQ = q, firstGot = v;
        wrong++;
      }
    }
  CHECK(wrong == 0, "rank %d: %s: %ld signal slots are not at +%llu (first: from %d queue %u at +%llu)", c->rank,
        what, wrong, (unsigned long long)delta, firstSrc, firstQ, (unsigned long long)firstGot);
}

/* Quiet on every peer; returns the number of non-success statuses. */
static long quiet_all(const rank_ctx* c, const ccoDevComm* dc, ccoCoop_t coop) {
  long bad = 0;
  for (int p = 0; p < c->lsaSize; p++) bad += ccoSdmaQuiet(dc, p, coop) != ccoDevSuccess;
  return bad;
}

static void spin_yield(void) { sched_yield(); }

/* -------------------------------------------------- invalid peer / queue */

static void test_invalid(rank_ctx* c) {
  const ccoDevComm* dc = &c->dc;
  ccoWindow_t w = dc->resourceWindow; /* any window: nothing is posted */
  int n = c->lsaSize;
  int badPeers[3] = {-1, n, n + 100};
  uint32_t badQueues[3] = {c->nq, CCO_SDMA_MAX_QUEUES, 0xffffffffu};
  long wrong = 0;
  char first[160] = "";
#define EXPECT_INVALID(call)                                                         \
  do {                                                                               \
    ccoDevStatus_t st_ = (call);                                                     \
    if (st_ != ccoDevInvalid) {                                                      \
      if (!wrong) snprintf(first, sizeof(first), "%s -> %s", #call, status_name(st_)); \
      wrong++;                                                                       \
    }                                                                                \
  } while (0)
  for (int i = 0; i < 3; i++) {
    int p = badPeers[i];
    for (int coop = 0; coop < 3; coop++) {
      ccoCoop_t k = (ccoCoop_t)coop;
      EXPECT_INVALID(ccoSdmaPut(dc, p, w, 0, w, 0, 8, 0, ccoSdmaSignalRemote, k));
      EXPECT_INVALID(ccoSdmaGet(dc, p, w, 0, w, 0, 8, 0, k));
      EXPECT_INVALID(ccoSdmaCommit(dc, p, 0, k));
      EXPECT_INVALID(ccoSdmaWaitSignal(dc, p, 0, 1, 1000, k));
      EXPECT_INVALID(ccoSdmaQuietQueue(dc, p, 0, k));
      EXPECT_INVALID(ccoSdmaQuiet(dc, p, k));
    }
  }
  for (int i = 0; i < 3; i++) {
    uint32_t q = badQueues[i];
    EXPECT_INVALID(ccoSdmaPut(dc, 0, w, 0, w, 0, 8, q, ccoSdmaSignalNone, ccoCoopThread));
    EXPECT_INVALID(ccoSdmaGet(dc, 0, w, 0, w, 0, 8, q, ccoCoopWarp));
    EXPECT_INVALID(ccoSdmaCommit(dc, 0, q, ccoCoopBlock));
    EXPECT_INVALID(ccoSdmaWaitSignal(dc, 0, q, 1, 1000, ccoCoopThread));
    EXPECT_INVALID(ccoSdmaQuietQueue(dc, 0, q, ccoCoopThread));
  }
#undef EXPECT_INVALID
  CHECK(wrong == 0, "rank %d: %ld device calls with a bad peer or queue did not return ccoDevInvalid (first: %s)",
        c->rank, wrong, first);
  /* Nothing was posted: every ring is quiet at once. */
  double t0 = mp_now();
  long bad = quiet_all(c, dc, ccoCoopThread);
  CHECK(bad == 0 && mp_now() - t0 < 5.0, "rank %d: quiet after refused calls: %ld bad statuses, %.2f s", c->rank,
        bad, mp_now() - t0);
}

/* ---------------------------------------------- every queue, zero bytes */

/* A second device communicator with 8 queues: one signalled 1 KiB put to
 * every peer on every queue; each block lands where (sender, queue) says. */
static void test_every_queue(rank_ctx* c) {
  const size_t blk = 1024;
  const uint32_t nq = CCO_SDMA_MAX_QUEUES;
  int n = c->lsaSize, me = c->lsaRank;
  ccoDevCommRequirements reqs = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.gdaConnectionType = ccoGdaConnectionNone;
  reqs.sdmaQueueCount = nq + 1;
  ccoDevComm dc8;
  memset(&dc8, 0, sizeof(dc8));
  ccoResult_t r = ccoDevCommCreate(c->comm, &reqs, &dc8);
  /* ccoInvalidArgument where the bad field is seen first, ccoInvalidUsage on
   * ranks that see another rank's first. */
  CHECK(r == ccoInvalidArgument || r == ccoInvalidUsage,
        "rank %d: sdmaQueueCount %u: %s, expected ccoInvalidArgument or ccoInvalidUsage", c->rank, nq + 1,
        ccoGetErrorString(r));
  if (r == ccoSuccess) ccoDevCommDestroy(c->comm, &dc8);
  reqs.sdmaQueueCount = nq;
  r = ccoDevCommCreate(c->comm, &reqs, &dc8);
  CHECK(r == ccoSuccess && dc8.sdma != 0, "rank %d: ccoDevCommCreate with %u SDMA queues: %s (%s), sdma %#llx",
        c->rank, nq, ccoGetErrorString(r), ccoGetLastError(c->comm), (unsigned long long)dc8.sdma);
  if (r != ccoSuccess || !dc8.sdma) return;
  const ccoSdmaDev* sd = cco_impl_sdma_state(&dc8);
  CHECK(sd->queueCount == nq && sd->lsaSize == (uint32_t)n && dc8.sdmaQueueCount == nq,
        "rank %d: 8-queue device communicator: state says %u queues, %u peers; dc.sdmaQueueCount %u", c->rank,
        sd->queueCount, sd->lsaSize, dc8.sdmaQueueCount);

  test_win w;
  /* src[peer][q], dst[sender][q] */
  size_t dstBase = (size_t)n * nq * blk;
  /* Signal bases are read before the barrier in win_open: after it, peers post. */
  uint64_t base[MAX_RANKS * CCO_SDMA_MAX_QUEUES];
  read_signals(c, &dc8, nq, base);
  if (!win_open(c, 2 * dstBase, &w)) {
    ccoDevCommDestroy(c->comm, &dc8);
    return;
  }
  long badPost = 0, badWait = 0, badData = 0;
  for (int k = 0; k < n; k++) {
    int p = (me + k) % n;
    for (uint32_t q = 0; q < nq; q++) {
      size_t src = ((size_t)p * nq + q) * blk, dst = dstBase + ((size_t)me * nq + q) * blk;
      fill(w.local + src, blk, key4(10, (uint64_t)me, (uint64_t)p, q));
      badPost += ccoSdmaPut(&dc8, p, w.win, dst, w.win, src, blk, q, ccoSdmaSignalRemote,
                            (ccoCoop_t)(q % 3)) != ccoDevSuccess;
    }
  }
  for (int s = 0; s < n; s++)
    for (uint32_t q = 0; q < nq; q++) {
      ccoDevStatus_t st = ccoSdmaWaitSignal(&dc8, s, q, base[(size_t)s * nq + q] + 1, WAIT_NS, ccoCoopThread);
      if (st != ccoDevSuccess) {
        badWait++;
        continue;
      }
      size_t dst = dstBase + ((size_t)s * nq + q) * blk;
      badData += first_diff(w.local + dst, blk, key4(10, (uint64_t)s, (uint64_t)me, q)) != blk;
    }
  badPost += quiet_all(c, &dc8, ccoCoopThread);
  barrier(c);
  check_signals_exact(c, &dc8, nq, base, 1, "every queue");
  CHECK(badPost == 0 && badWait == 0 && badData == 0,
        "rank %d: every queue (0..%u) to every peer: %ld bad post/quiet statuses, %ld failed waits, %ld wrong blocks",
        c->rank, nq - 1, badPost, badWait, badData);
  win_close(c, &w);
  MUST(ccoDevCommDestroy(c->comm, &dc8));
  if (c->rank == 0) printf("every queue: %d ranks x 8 queues, signalled 1 KiB puts checked\n", n);
}

/* Zero-byte puts with a signal, Z to every peer on every queue. */
static void test_zero_bytes(rank_ctx* c) {
  const int Z = 8;
  int n = c->lsaSize;
  test_win w;
  uint64_t base[MAX_RANKS * CCO_SDMA_MAX_QUEUES];
  read_signals(c, &c->dc, c->nq, base);
  if (!win_open(c, 4096, &w)) return;
  /* A canary the zero-byte copies must not touch. */
  memset(w.local, 0x5a, 64);
  barrier(c);
  long badPost = 0, badWait = 0;
  for (int z = 0; z < Z; z++)
    for (int p = 0; p < n; p++)
      for (uint32_t q = 0; q < c->nq; q++)
        badPost += ccoSdmaPut(&c->dc, p, w.win, 0, w.win, 64, 0, q, ccoSdmaSignalRemote, (ccoCoop_t)(z % 3)) !=
                   ccoDevSuccess;
  for (int s = 0; s < n; s++)
    for (uint32_t q = 0; q < c->nq; q++)
      badWait += ccoSdmaWaitSignal(&c->dc, s, q, base[(size_t)s * c->nq + q] + (uint64_t)Z, WAIT_NS,
                                   ccoCoopThread) != ccoDevSuccess;
  badPost += quiet_all(c, &c->dc, ccoCoopBlock);
  barrier(c);
  check_signals_exact(c, &c->dc, c->nq, base, (uint64_t)Z, "zero-byte puts");
  int canary = 1;
  for (int i = 0; i < 64; i++) canary &= (uint8_t)w.local[i] == 0x5a;
  CHECK(badPost == 0 && badWait == 0 && canary,
        "rank %d: %d zero-byte signalled puts per peer and queue: %ld bad post/quiet statuses, %ld failed waits, "
        "destination %s",
        c->rank, Z, badPost, badWait, canary ? "untouched" : "WRITTEN");
  win_close(c, &w);
}

/* ---------------------------------------------------- signal after data */

#define SAD_SLOTS 4u
#define SAD_MAX (32u << 10)

typedef struct {
  rank_ctx* c;
  test_win* w;
  const uint64_t* base;
  long iters;
  /* results */
  long posted, badStatus, ackTimeouts, torn, extra, checked;
  char firstTorn[200];
  double seconds;
} sad_job;

static size_t sad_src(const rank_ctx* c, int peer, uint32_t q, uint32_t slot) {
  return (((size_t)peer * c->nq + q) * SAD_SLOTS + slot) * SAD_MAX;
}
static size_t sad_dst(const rank_ctx* c, int sender, uint32_t q, uint32_t slot) {
  return (size_t)c->lsaSize * c->nq * SAD_SLOTS * SAD_MAX + sad_src(c, sender, q, slot);
}
/* In the sender's window: how many iterations receiver has checked. */
static size_t sad_ack(const rank_ctx* c, int receiver, uint32_t q) {
  return 2 * (size_t)c->lsaSize * c->nq * SAD_SLOTS * SAD_MAX + ((size_t)receiver * c->nq + q) * 8;
}
static size_t sad_bytes(const rank_ctx* c) { return sad_ack(c, c->lsaSize, 0); }

/* Size of iteration `it` from sender to receiver on q: 1 in 16 empty, 1 in 8
 * up to 32 KiB, the rest up to 4 KiB (any length). */
static size_t sad_size(int sender, int receiver, uint32_t q, long it) {
  uint64_t h = key4(1, (uint64_t)sender, (uint64_t)receiver * 8 + q, (uint64_t)it);
  uint32_t r = (uint32_t)(h & 15);
  if (r == 0) return 0;
  if (r <= 2) return (size_t)((h >> 8) % (SAD_MAX + 1));
  return (size_t)((h >> 8) % 4097);
}
static uint64_t sad_seed(int sender, int receiver, uint32_t q, long it) {
  return key4(2, (uint64_t)sender, (uint64_t)receiver * 8 + q, (uint64_t)it);
}

static void* sad_issuer(void* arg) {
  sad_job* j = (sad_job*)arg;
  rank_ctx* c = j->c;
  int n = c->lsaSize, me = c->lsaRank;
  double t0 = mp_now();
  for (long it = 0; it < j->iters; it++) {
    uint32_t slot = (uint32_t)(it % SAD_SLOTS);
    for (int k = 0; k < n; k++) {
      int p = (me + 1 + k) % n;
      for (uint32_t q = 0; q < c->nq; q++) {
        if (it >= (long)SAD_SLOTS) { /* the receiver is done with this slot */
          const uint64_t* ack = (const uint64_t*)(j->w->local + sad_ack(c, p, q));
          uint64_t need = (uint64_t)(it - SAD_SLOTS + 1);
          double end = mp_now() + SPIN_LIMIT_S;
          while (__atomic_load_n(ack, __ATOMIC_ACQUIRE) < need) {
            if (mp_now() > end) {
              j->ackTimeouts++;
              goto out;
            }
            spin_yield();
          }
        }
        size_t size = sad_size(me, p, q, it);
        fill(j->w->local + sad_src(c, p, q, slot), size, sad_seed(me, p, q, it));
        ccoDevStatus_t st = ccoSdmaPut(&c->dc, p, j->w->win, sad_dst(c, me, q, slot), j->w->win,
                                       sad_src(c, p, q, slot), size, q, ccoSdmaSignalRemote,
                                       (ccoCoop_t)((it + q) % 3));
        if (st != ccoDevSuccess) {
          j->badStatus++;
          goto out;
        }
        j->posted++;
      }
    }
  }
out:
  j->badStatus += quiet_all(c, &c->dc, ccoCoopThread);
  j->seconds = mp_now() - t0;
  return NULL;
}

static void* sad_receiver(void* arg) {
  sad_job* j = (sad_job*)arg;
  rank_ctx* c = j->c;
  int n = c->lsaSize, me = c->lsaRank;
  for (long it = 0; it < j->iters; it++) {
    uint32_t slot = (uint32_t)(it % SAD_SLOTS);
    for (int k = 0; k < n; k++) {
      int s = (me - 1 - k + 2 * n) % n;
      for (uint32_t q = 0; q < c->nq; q++) {
        uint64_t base = j->base[(size_t)s * c->nq + q];
        ccoDevStatus_t st = ccoSdmaWaitSignal(&c->dc, s, q, base + (uint64_t)it + 1, WAIT_NS, (ccoCoop_t)(it % 3));
        if (st != ccoDevSuccess) {
          j->badStatus++;
          if (!j->firstTorn[0])
            snprintf(j->firstTorn, sizeof(j->firstTorn), "wait for iteration %ld from %d queue %u: %s", it, s, q,
                     status_name(st));
          return NULL;
        }
        /* The signal is up: the whole block must be here already. */
        size_t size = sad_size(s, me, q, it);
        size_t d = first_diff(j->w->local + sad_dst(c, s, q, slot), size, sad_seed(s, me, q, it));
        if (d != size) {
          if (!j->torn)
            snprintf(j->firstTorn, sizeof(j->firstTorn),
                     "iteration %ld from %d queue %u: %zu-byte block wrong from byte %zu when its signal was seen",
                     it, s, q, size, d);
          j->torn++;
        }
        /* The sender is at most SAD_SLOTS iterations ahead. */
        uint64_t v = ccoSdmaReadSignal(&c->dc, s, q) - base;
        j->extra += v > (uint64_t)it + SAD_SLOTS;
        j->checked++;
        uint64_t* ack = (uint64_t*)ccoGetLsaPeerPtr(j->w->win, s, sad_ack(c, me, q));
        __atomic_store_n(ack, (uint64_t)it + 1, __ATOMIC_RELEASE);
      }
    }
  }
  return NULL;
}

static void test_signal_after_data(rank_ctx* c) {
  test_win w;
  uint64_t base[MAX_RANKS * CCO_SDMA_MAX_QUEUES];
  read_signals(c, &c->dc, c->nq, base);
  if (!win_open(c, sad_bytes(c), &w)) return;
  sad_job iss, rcv;
  memset(&iss, 0, sizeof(iss));
  iss.c = c;
  iss.w = &w;
  iss.base = base;
  iss.iters = g_opt.iters;
  rcv = iss;
  pthread_t ti, tr;
  pthread_create(&tr, NULL, sad_receiver, &rcv);
  pthread_create(&ti, NULL, sad_issuer, &iss);
  pthread_join(ti, NULL);
  pthread_join(tr, NULL);
  barrier(c);
  long expect = g_opt.iters * c->lsaSize * (long)c->nq;
  CHECK(iss.badStatus == 0 && iss.ackTimeouts == 0 && iss.posted == expect,
        "rank %d: signal after data, issuer: %ld of %ld puts posted, %ld bad statuses, %ld ack timeouts", c->rank,
        iss.posted, expect, iss.badStatus, iss.ackTimeouts);
  CHECK(rcv.badStatus == 0 && rcv.torn == 0 && rcv.checked == expect,
        "rank %d: signal after data, receiver: %ld of %ld blocks checked, %ld torn, %ld bad waits%s%s", c->rank,
        rcv.checked, expect, rcv.torn, rcv.badStatus, rcv.firstTorn[0] ? "; first: " : "", rcv.firstTorn);
  CHECK(rcv.extra == 0, "rank %d: signal after data: %ld times a signal slot was ahead of what was posted", c->rank,
        rcv.extra);
  check_signals_exact(c, &c->dc, c->nq, base, (uint64_t)g_opt.iters, "signal after data");
  if (c->rank == 0)
    printf("signal after data: %d ranks x %u queues, %ld iterations, %ld signalled puts per rank of 0..32 KiB in "
           "%.2f s (%.1f us per put)\n",
           c->lsaSize, c->nq, g_opt.iters, iss.posted, iss.seconds, iss.seconds * 1e6 / (double)(iss.posted ? iss.posted : 1));
  win_close(c, &w);
}

/* ----------------------------------------------------------------- flood */

#define FLOOD_BLK 64u

typedef struct {
  rank_ctx* c;
  test_win* w;
  int t, peer;
  long posted, bad;
} flood_job;

static size_t flood_off(long t, long k) { return ((size_t)t * (size_t)g_opt.flood + (size_t)k) * FLOOD_BLK; }

static void* flood_issuer(void* arg) {
  flood_job* j = (flood_job*)arg;
  size_t dstBase = flood_off(g_opt.issuers, 0);
  for (long k = 0; k < g_opt.flood; k++) {
    ccoDevStatus_t st = ccoSdmaPut(&j->c->dc, j->peer, j->w->win, dstBase + flood_off(j->t, k), j->w->win,
                                   flood_off(j->t, k), FLOOD_BLK, 0, ccoSdmaSignalRemote, (ccoCoop_t)(k % 3));
    if (st != ccoDevSuccess) {
      j->bad++;
      break;
    }
    j->posted++;
  }
  j->bad += ccoSdmaQuietQueue(&j->c->dc, j->peer, 0, ccoCoopThread) != ccoDevSuccess;
  return NULL;
}

static void test_flood(rank_ctx* c) {
  int n = c->lsaSize, me = c->lsaRank, next = (me + 1) % n, prev = (me + n - 1) % n;
  int T = g_opt.issuers;
  long M = g_opt.flood, total = (long)T * M;
  test_win w;
  if (!win_open(c, 2 * flood_off(T, 0), &w)) return;
  for (int t = 0; t < T; t++)
    for (long k = 0; k < M; k++) fill(w.local + flood_off(t, k), FLOOD_BLK, key4(3, (uint64_t)me, (uint64_t)t, (uint64_t)k));
  uint64_t base = ccoSdmaReadSignal(&c->dc, prev, 0);
  barrier(c);
  flood_job jobs[64];
  pthread_t th[64];
  double t0 = mp_now();
  for (int t = 0; t < T; t++) {
    memset(&jobs[t], 0, sizeof(jobs[t]));
    jobs[t].c = c;
    jobs[t].w = &w;
    jobs[t].t = t;
    jobs[t].peer = next;
    pthread_create(&th[t], NULL, flood_issuer, &jobs[t]);
  }
  /* Watch the signal from prev climb: never down, never past what was posted. */
  uint64_t last = 0, seen = 0;
  long backwards = 0, beyond = 0;
  double end = mp_now() + SPIN_LIMIT_S;
  while (seen < (uint64_t)total && mp_now() < end) {
    seen = ccoSdmaReadSignal(&c->dc, prev, 0) - base;
    backwards += seen < last;
    beyond += seen > (uint64_t)total;
    last = seen;
    spin_yield();
  }
  double dt = mp_now() - t0;
  ccoDevStatus_t st = ccoSdmaWaitSignal(&c->dc, prev, 0, base + (uint64_t)total, 1000, ccoCoopThread);
  long badBlocks = 0;
  size_t dstBase = flood_off(T, 0);
  for (int t = 0; t < T; t++)
    for (long k = 0; k < M; k++)
      badBlocks += first_diff(w.local + dstBase + flood_off(t, k), FLOOD_BLK, key4(3, (uint64_t)prev, (uint64_t)t, (uint64_t)k)) != FLOOD_BLK;
  long posted = 0, bad = 0;
  for (int t = 0; t < T; t++) {
    pthread_join(th[t], NULL);
    posted += jobs[t].posted;
    bad += jobs[t].bad;
  }
  CHECK(posted == total && bad == 0, "rank %d: flood: %ld of %ld puts posted by %d threads on one ring, %ld bad statuses",
        c->rank, posted, total, T, bad);
  CHECK(st == ccoDevSuccess && seen == (uint64_t)total && backwards == 0 && beyond == 0 && badBlocks == 0,
        "rank %d: flood from %d: signal at +%llu of %ld (%s), went down %ld times, past the posted count %ld times, "
        "%ld wrong blocks",
        c->rank, prev, (unsigned long long)seen, total, status_name(st), backwards, beyond, badBlocks);
  barrier(c);
  uint64_t fin = ccoSdmaReadSignal(&c->dc, prev, 0) - base;
  CHECK(fin == (uint64_t)total, "rank %d: flood: signal at +%llu after quiet, expected +%ld", c->rank,
        (unsigned long long)fin, total);
  if (c->rank == 0)
    printf("flood: %d ranks, %d issuer threads x %ld signalled 64-byte puts on one ring (depth %d) in %.2f s, "
           "%.2f us per put\n",
           n, T, M, CCO_SDMA_DEPTH, dt, dt * 1e6 / (double)total);
  win_close(c, &w);
}

/* ------------------------------------------------------------------- gets */

#define GET_BYTES (128u << 10)

static void test_gets(rank_ctx* c) {
  int n = c->lsaSize, me = c->lsaRank;
  test_win w;
  /* [0, GET_BYTES): this rank's data; then one area per peer for its data */
  if (!win_open(c, (size_t)(n + 1) * GET_BYTES, &w)) return;
  fill(w.local, GET_BYTES, key4(4, (uint64_t)me, 0, 0));
  barrier(c);
  long bad = 0, pieces = 0;
  for (int k = 0; k < n; k++) {
    int p = (me + 1 + k) % n;
    size_t off = 0;
    for (long i = 0; off < GET_BYTES; i++) {
      uint64_t h = key4(5, (uint64_t)me, (uint64_t)p, (uint64_t)i);
      size_t len = (size_t)(h % (16u << 10));
      if (len > GET_BYTES - off) len = GET_BYTES - off;
      bad += ccoSdmaGet(&c->dc, p, w.win, (size_t)(p + 1) * GET_BYTES + off, w.win, off, len,
                        (uint32_t)(i % c->nq), (ccoCoop_t)(i % 3)) != ccoDevSuccess;
      off += len;
      pieces++;
    }
  }
  for (int p = 0; p < n; p++) bad += ccoSdmaQuiet(&c->dc, p, (ccoCoop_t)(p % 3)) != ccoDevSuccess;
  long wrong = 0;
  for (int p = 0; p < n; p++) {
    size_t d = first_diff(w.local + (size_t)(p + 1) * GET_BYTES, GET_BYTES, key4(4, (uint64_t)p, 0, 0));
    if (d != GET_BYTES) {
      if (!wrong) CHECK(0, "rank %d: get from %d: wrong from byte %zu after ccoSdmaQuiet", c->rank, p, d);
      wrong++;
    }
  }
  CHECK(bad == 0 && wrong == 0, "rank %d: gets: %ld pieces (0..16 KiB, every queue) from %d peers, %ld bad statuses, "
        "%ld peers' data wrong", c->rank, pieces, n, bad, wrong);
  win_close(c, &w);
}

/* ----------------------------------------------------------------- commit */

#define COMMIT_N 32
#define COMMIT_MAX 2048u

static size_t commit_src(const rank_ctx* c, int peer, uint32_t q, int k) {
  return (((size_t)peer * c->nq + q) * COMMIT_N + (size_t)k) * COMMIT_MAX;
}
static size_t commit_dst(const rank_ctx* c, int sender, uint32_t q, int k) {
  return (size_t)c->lsaSize * c->nq * COMMIT_N * COMMIT_MAX + commit_src(c, sender, q, k);
}
static size_t commit_size(int s, int r, uint32_t q, int k) {
  return (size_t)(key4(6, (uint64_t)s, (uint64_t)r * 8 + q, (uint64_t)k) % (COMMIT_MAX + 1));
}

static void test_commit(rank_ctx* c) {
  int n = c->lsaSize, me = c->lsaRank;
  uint32_t nq = c->nq;
  test_win w;
  uint64_t base[MAX_RANKS * CCO_SDMA_MAX_QUEUES];
  read_signals(c, &c->dc, nq, base);
  if (!win_open(c, commit_dst(c, n, 0, 0), &w)) return;
  long bad = 0;
  for (int k = 0; k < n; k++) {
    int p = (me + 1 + k) % n;
    for (uint32_t q = 0; q < nq; q++) {
      for (int i = 0; i < COMMIT_N; i++) {
        size_t size = commit_size(me, p, q, i);
        fill(w.local + commit_src(c, p, q, i), size, key4(7, (uint64_t)me, (uint64_t)p * 8 + q, (uint64_t)i));
        bad += ccoSdmaPut(&c->dc, p, w.win, commit_dst(c, me, q, i), w.win, commit_src(c, p, q, i), size, q,
                          ccoSdmaSignalNone, (ccoCoop_t)(i % 3)) != ccoDevSuccess;
      }
      bad += ccoSdmaCommit(&c->dc, p, q, (ccoCoop_t)(q % 3)) != ccoDevSuccess;
    }
  }
  long badWait = 0, wrong = 0;
  for (int s = 0; s < n; s++)
    for (uint32_t q = 0; q < nq; q++) {
      if (ccoSdmaWaitSignal(&c->dc, s, q, base[(size_t)s * nq + q] + 1, WAIT_NS, ccoCoopThread) != ccoDevSuccess) {
        badWait++;
        continue;
      }
      for (int i = 0; i < COMMIT_N; i++) {
        size_t size = commit_size(s, me, q, i);
        wrong += first_diff(w.local + commit_dst(c, s, q, i), size, key4(7, (uint64_t)s, (uint64_t)me * 8 + q, (uint64_t)i)) != size;
      }
    }
  bad += quiet_all(c, &c->dc, ccoCoopThread);
  barrier(c);
  CHECK(bad == 0 && badWait == 0 && wrong == 0,
        "rank %d: commit: %d puts without signal + 1 commit per peer and queue: %ld bad statuses, %ld failed waits, "
        "%ld blocks not there when the commit's signal was",
        c->rank, COMMIT_N, bad, badWait, wrong);
  check_signals_exact(c, &c->dc, nq, base, 1, "N puts without signal + 1 commit");
  barrier(c); /* every rank has checked before anyone commits again */
  /* Two bare commits in a row: +2. */
  bad = 0;
  for (int p = 0; p < n; p++)
    for (uint32_t q = 0; q < nq; q++) {
      bad += ccoSdmaCommit(&c->dc, p, q, ccoCoopWarp) != ccoDevSuccess;
      bad += ccoSdmaCommit(&c->dc, p, q, ccoCoopBlock) != ccoDevSuccess;
    }
  badWait = 0;
  for (int s = 0; s < n; s++)
    for (uint32_t q = 0; q < nq; q++)
      badWait += ccoSdmaWaitSignal(&c->dc, s, q, base[(size_t)s * nq + q] + 3, WAIT_NS, ccoCoopBlock) != ccoDevSuccess;
  bad += quiet_all(c, &c->dc, ccoCoopWarp);
  barrier(c);
  CHECK(bad == 0 && badWait == 0, "rank %d: two bare commits: %ld bad statuses, %ld failed waits", c->rank, bad, badWait);
  check_signals_exact(c, &c->dc, nq, base, 3, "two bare commits after the first");
  win_close(c, &w);
}

/* ------------------------------------------------------------------ quiet */

#define QUIET_N 16
#define QUIET_MAX (8u << 10)

static void test_quiet(rank_ctx* c) {
  int n = c->lsaSize, me = c->lsaRank;
  /* src[peer][k], dst[sender][k], back[peer][k] */
  size_t area = (size_t)n * QUIET_N * QUIET_MAX;
#define QOFF(which, who, k) ((size_t)(which) * area + ((size_t)(who) * QUIET_N + (size_t)(k)) * QUIET_MAX)
  test_win w;
  if (!win_open(c, 3 * area, &w)) return;
  long bad = 0;
  uint32_t used[MAX_RANKS] = {0}; /* queues used per peer, a bit each */
  for (int k = 0; k < n; k++) {
    int p = (me + 1 + k) % n;
    for (int i = 0; i < QUIET_N; i++) {
      uint64_t h = key4(8, (uint64_t)me, (uint64_t)p, (uint64_t)i);
      size_t size = (size_t)(h % (QUIET_MAX + 1));
      uint32_t q = (uint32_t)((h >> 32) % c->nq);
      used[p] |= 1u << q;
      fill(w.local + QOFF(0, p, i), size, h);
      bad += ccoSdmaPut(&c->dc, p, w.win, QOFF(1, me, i), w.win, QOFF(0, p, i), size, q, ccoSdmaSignalNone,
                        (ccoCoop_t)(i % 3)) != ccoDevSuccess;
    }
  }
  /* Quiet only the queues used: afterwards the data must be at the peer. */
  for (int p = 0; p < n; p++)
    for (uint32_t q = 0; q < c->nq; q++)
      if (used[p] & (1u << q)) bad += ccoSdmaQuietQueue(&c->dc, p, q, (ccoCoop_t)(q % 3)) != ccoDevSuccess;
  /* 1. Read it back with gets (on the other queues too), which see the peer's memory. */
  for (int p = 0; p < n; p++)
    for (int i = 0; i < QUIET_N; i++) {
      uint64_t h = key4(8, (uint64_t)me, (uint64_t)p, (uint64_t)i);
      size_t size = (size_t)(h % (QUIET_MAX + 1));
      bad += ccoSdmaGet(&c->dc, p, w.win, QOFF(2, p, i), w.win, QOFF(1, me, i), size, (uint32_t)(i % c->nq),
                        ccoCoopThread) != ccoDevSuccess;
    }
  for (int p = 0; p < n; p++) bad += ccoSdmaQuiet(&c->dc, p, ccoCoopThread) != ccoDevSuccess;
  long wrongBack = 0;
  for (int p = 0; p < n; p++)
    for (int i = 0; i < QUIET_N; i++) {
      uint64_t h = key4(8, (uint64_t)me, (uint64_t)p, (uint64_t)i);
      size_t size = (size_t)(h % (QUIET_MAX + 1));
      wrongBack += first_diff(w.local + QOFF(2, p, i), size, h) != size;
    }
  /* 2. The peers read what they received after a host barrier. */
  barrier(c);
  long wrongHere = 0;
  for (int s = 0; s < n; s++)
    for (int i = 0; i < QUIET_N; i++) {
      uint64_t h = key4(8, (uint64_t)s, (uint64_t)me, (uint64_t)i);
      size_t size = (size_t)(h % (QUIET_MAX + 1));
      wrongHere += first_diff(w.local + QOFF(1, s, i), size, h) != size;
    }
  CHECK(bad == 0 && wrongBack == 0 && wrongHere == 0,
        "rank %d: quiet: %d unsignalled puts per peer, ccoSdmaQuietQueue: %ld bad statuses, %ld blocks wrong when read "
        "back with a get, %ld wrong at the receiver after a host barrier",
        c->rank, QUIET_N, bad, wrongBack, wrongHere);
#undef QOFF
  win_close(c, &w);
}

/* ------------------------------------------------------ completion count */

#define LAZY_N 32
#define LAZY_BLK 4096

/* With no waiter the engine may leave a ring's completion count behind its
 * copies (CCO_SDMA_LAZY_COMPLETION); it must still catch up, at the latest
 * before the engine naps, and never run ahead of its data. No quiet here:
 * the test reads the count the quiet would poll. */
static void test_completion_count(rank_ctx* c) {
  int n = c->lsaSize, me = c->lsaRank, next = (me + 1) % n;
  uint32_t q = 0;
  test_win w;
  if (!win_open(c, 2 * LAZY_N * LAZY_BLK, &w)) return;
  const ccoSdmaQueueDev* qd = cco_impl_sdma_queue(&c->dc, next, q);
  const uint64_t* completed = (const uint64_t*)(uintptr_t)qd->completed;
  const uint64_t* tail = (const uint64_t*)(uintptr_t)qd->tail;
  barrier(c);
  long bad = 0;
  for (int i = 0; i < LAZY_N; i++) {
    fill(w.local + (size_t)i * LAZY_BLK, LAZY_BLK, key4(10, (uint64_t)me, (uint64_t)i, 0));
    bad += ccoSdmaPut(&c->dc, next, w.win, (size_t)(LAZY_N + i) * LAZY_BLK, w.win, (size_t)i * LAZY_BLK, LAZY_BLK, q,
                      ccoSdmaSignalNone, ccoCoopThread) != ccoDevSuccess;
  }
  uint64_t issued = __atomic_load_n(tail, __ATOMIC_ACQUIRE);
  double t0 = mp_now();
  while (__atomic_load_n(completed, __ATOMIC_ACQUIRE) < issued && mp_now() - t0 < 5.0) spin_yield();
  double caughtUp = mp_now() - t0;
  uint64_t done = __atomic_load_n(completed, __ATOMIC_ACQUIRE);
  barrier(c); /* the sender's count is up: its data is at the receiver */
  long wrong = 0;
  int prev = (me + n - 1) % n;
  for (int i = 0; i < LAZY_N; i++)
    wrong += first_diff(w.local + (size_t)(LAZY_N + i) * LAZY_BLK, LAZY_BLK, key4(10, (uint64_t)prev, (uint64_t)i, 0)) !=
             LAZY_BLK;
  CHECK(bad == 0 && done >= issued && wrong == 0,
        "rank %d: completion count: %d unsignalled puts, no quiet: %ld bad statuses, count %llu of %llu after %.3f s "
        "(bound 5 s), %ld blocks wrong at the receiver",
        c->rank, LAZY_N, bad, (unsigned long long)done, (unsigned long long)issued, caughtUp, wrong);
  barrier(c);
  win_close(c, &w);
}

/* ------------------------------------------------------------------ large */

static void test_large(rank_ctx* c) {
  int n = c->lsaSize, me = c->lsaRank, next = (me + 1) % n, prev = (me + n - 1) % n;
  size_t L = (size_t)g_opt.largeMiB << 20;
  uint32_t q = c->nq - 1;
  test_win w;
  if (!win_open(c, 2 * L, &w)) return;
  fill(w.local, L, key4(9, (uint64_t)me, 0, 0));
  uint64_t base = ccoSdmaReadSignal(&c->dc, prev, q);
  barrier(c);
  double t0 = mp_now();
  ccoDevStatus_t put = ccoSdmaPut(&c->dc, next, w.win, L, w.win, 0, L, q, ccoSdmaSignalRemote, ccoCoopBlock);
  ccoDevStatus_t wait = ccoSdmaWaitSignal(&c->dc, prev, q, base + 1, WAIT_NS, ccoCoopThread);
  double dt = mp_now() - t0;
  size_t d = wait == ccoDevSuccess ? first_diff(w.local + L, L, key4(9, (uint64_t)prev, 0, 0)) : 0;
  ccoDevStatus_t quiet = ccoSdmaQuiet(&c->dc, next, ccoCoopThread);
  CHECK(put == ccoDevSuccess && wait == ccoDevSuccess && quiet == ccoDevSuccess && d == L,
        "rank %d: %ld MiB put from %d with a signal: put %s, wait %s, quiet %s, data %s (first wrong byte %zu)",
        c->rank, g_opt.largeMiB, prev, status_name(put), status_name(wait), status_name(quiet),
        d == L ? "right" : "WRONG", d);
  if (c->rank == 0)
    printf("large: %d ranks, %ld MiB put to the next rank, signal seen after %.1f ms (%.2f GB/s each, host memcpy)\n",
           n, g_opt.largeMiB, dt * 1e3, (double)L / dt / 1e9);
  win_close(c, &w);
}

/* --------------------------------------------------------------- host API */

#define HOST_BLK (16u << 10)
#define HOST_ROUNDS 20

static void test_host_api(rank_ctx* c) {
  int N = c->nRanks, next = (c->rank + 1) % N, prev = (c->rank + N - 1) % N;
  /* [0, 8): signal word (one sender: prev); [64, 64 + HOST_BLK): received; then the source */
  const size_t dataOff = 64, srcOff = 64 + HOST_BLK;
  test_win w;
  if (!win_open(c, srcOff + HOST_BLK, &w)) return;
  long badPut = 0, badWait = 0, wrong = 0;
  for (int r = 0; r < HOST_ROUNDS; r++) {
    size_t size = r == 0 ? 0 : (size_t)(key4(11, (uint64_t)r, 0, 0) % (HOST_BLK + 1));
    fill(w.local + srcOff, size, key4(12, (uint64_t)c->rank, (uint64_t)r, 0));
    ccoResult_t pr = ccoSdmaPutAsync(c->comm, next, w.win, dataOff, w.win, srcOff, size, w.win, 0,
                                     (uint64_t)r + 1, NULL);
    if (pr != ccoSuccess) {
      if (!badPut)
        CHECK(0, "rank %d: ccoSdmaPutAsync round %d: %s (%s)", c->rank, r, ccoGetErrorString(pr),
              ccoGetLastError(c->comm));
      badPut++;
    }
    ccoResult_t wr = ccoStreamWaitSignal(c->comm, w.win, 0, (uint64_t)r + 1, NULL);
    if (wr != ccoSuccess) {
      if (!badWait)
        CHECK(0, "rank %d: ccoStreamWaitSignal round %d: %s (%s)", c->rank, r, ccoGetErrorString(wr),
              ccoGetLastError(c->comm));
      badWait++;
    } else {
      wrong += first_diff(w.local + dataOff, size, key4(12, (uint64_t)prev, (uint64_t)r, 0)) != size;
    }
    if (!barrier(c)) break; /* prev may overwrite the block only after this check */
  }
  uint64_t sig = __atomic_load_n((const uint64_t*)w.local, __ATOMIC_ACQUIRE);
  CHECK(badPut == 0 && badWait == 0 && wrong == 0 && sig == HOST_ROUNDS,
        "rank %d: host API: %d rounds of ccoSdmaPutAsync (0..16 KiB + signal) to rank %d and ccoStreamWaitSignal "
        "(stream NULL): %ld failed puts, %ld failed waits, %ld wrong blocks, signal word %llu",
        c->rank, HOST_ROUNDS, next, badPut, badWait, wrong, (unsigned long long)sig);
  /* Without a signal: the host platform copies before returning. */
  fill(w.local + srcOff, HOST_BLK, key4(13, (uint64_t)c->rank, 0, 0));
  ccoResult_t pr = ccoSdmaPutAsync(c->comm, next, w.win, dataOff, w.win, srcOff, HOST_BLK, NULL, 0, 0, NULL);
  barrier(c);
  size_t d = first_diff(w.local + dataOff, HOST_BLK, key4(13, (uint64_t)prev, 0, 0));
  CHECK(pr == ccoSuccess && d == HOST_BLK, "rank %d: ccoSdmaPutAsync without a signal: %s, data %s after a barrier",
        c->rank, ccoGetErrorString(pr), d == HOST_BLK ? "right" : "WRONG");
  /* A value already reached: returns at once. */
  double t0 = mp_now();
  ccoResult_t wr = ccoStreamWaitSignal(c->comm, w.win, 0, HOST_ROUNDS, NULL);
  CHECK(wr == ccoSuccess && mp_now() - t0 < 1.0, "rank %d: ccoStreamWaitSignal on a reached value: %s in %.3f s",
        c->rank, ccoGetErrorString(wr), mp_now() - t0);
  /* Bad peers are refused, and do not fail the communicator. */
  ccoResult_t b1 = ccoSdmaPutAsync(c->comm, -1, w.win, dataOff, w.win, srcOff, 8, NULL, 0, 0, NULL);
  ccoResult_t b2 = ccoSdmaPutAsync(c->comm, N, w.win, dataOff, w.win, srcOff, 8, NULL, 0, 0, NULL);
  CHECK(b1 != ccoSuccess && b2 != ccoSuccess, "rank %d: ccoSdmaPutAsync to rank -1: %s, to rank %d: %s", c->rank,
        ccoGetErrorString(b1), N, ccoGetErrorString(b2));
  win_close(c, &w);
}

/* -------------------------------------------------------- rank lifecycle */

static int setup_rank(rank_ctx* c) {
  ccoCommRank(c->comm, &c->rank);
  ccoCommSize(c->comm, &c->nRanks);
  ccoCommLsaRank(c->comm, &c->lsaRank);
  ccoCommLsaSize(c->comm, &c->lsaSize);
  ccoDevCommRequirements reqs = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.gdaConnectionType = ccoGdaConnectionNone;
  reqs.lsaBarrierCount = 1;
  ccoResult_t r = ccoDevCommCreate(c->comm, &reqs, &c->dc);
  CHECK(r == ccoSuccess, "rank %d: ccoDevCommCreate: %s (%s)", c->rank, ccoGetErrorString(r), ccoGetLastError(c->comm));
  if (r != ccoSuccess) return 0;
  c->sdma = c->dc.sdma != 0;
  c->nq = c->sdma ? cco_impl_sdma_state(&c->dc)->queueCount : 0;
  return 1;
}

static void teardown_rank(rank_ctx* c) {
  if (c->dc.magic == CCO_DEV_COMM_MAGIC) MUST(ccoDevCommDestroy(c->comm, &c->dc));
  MUST(ccoCommDestroy(c->comm));
}

static void run_default(rank_ctx* c) {
  CHECK(c->sdma && c->nq == 2 && c->dc.sdmaQueueCount == 2 && c->lsaSize == c->nRanks,
        "rank %d: default device communicator: sdma %#llx, %u queues (sdmaQueueCount 0 means 2), "
        "dc.sdmaQueueCount %u, %d of %d ranks in the LSA team",
        c->rank, (unsigned long long)c->dc.sdma, c->nq, c->dc.sdmaQueueCount, c->lsaSize, c->nRanks);
  if (!c->sdma || c->lsaSize > MAX_RANKS) return;
  const ccoSdmaDev* sd = cco_impl_sdma_state(&c->dc);
  CHECK(sd->lsaSize == (uint32_t)c->lsaSize, "rank %d: SDMA state for %u peers, LSA team of %d", c->rank, sd->lsaSize,
        c->lsaSize);
  double t0 = mp_now(), t;
#define STEP(fn, name)                                                                \
  do {                                                                                \
    if (g_opt.only && !strstr(name, g_opt.only)) break;                               \
    t = mp_now();                                                                     \
    fn(c);                                                                            \
    if (c->rank == 0) printf("  %-18s %.2f s\n", name, mp_now() - t);                 \
  } while (0)
  STEP(test_invalid, "invalid");
  STEP(test_every_queue, "every queue");
  STEP(test_zero_bytes, "zero bytes");
  STEP(test_signal_after_data, "signal after data");
  STEP(test_flood, "flood");
  STEP(test_gets, "gets");
  STEP(test_commit, "commit");
  STEP(test_quiet, "quiet");
  STEP(test_completion_count, "completion count");
  STEP(test_large, "large");
  STEP(test_host_api, "host API");
#undef STEP
  ccoResult_t asyncErr = ccoInternalError;
  MUST(ccoCommGetAsyncError(c->comm, &asyncErr));
  CHECK(asyncErr == ccoSuccess && !ccoDevCommAborted(&c->dc),
        "rank %d: after every test the async error is %s, abort word %d", c->rank, ccoGetErrorString(asyncErr),
        ccoDevCommAborted(&c->dc));
  if (c->rank == 0) printf("all SDMA tests: %d ranks in %.2f s\n", c->lsaSize, mp_now() - t0);
}

/* ----------------------------------------------------------- no SDMA */

static void run_no_sdma(rank_ctx* c) {
  CHECK(c->dc.sdma == 0, "rank %d: SDMA disabled, yet dc.sdma = %#llx", c->rank, (unsigned long long)c->dc.sdma);
  if (c->dc.sdma) return;
  const ccoDevComm* dc = &c->dc;
  test_win w;
  if (!win_open(c, 4096, &w)) return;
  long wrong = 0;
  char first[160] = "";
#define EXPECT_UNSUPPORTED(call)                                                        \
  do {                                                                                  \
    ccoDevStatus_t st_ = (call);                                                        \
    if (st_ != ccoDevUnsupported) {                                                     \
      if (!wrong) snprintf(first, sizeof(first), "%s -> %s", #call, status_name(st_)); \
      wrong++;                                                                          \
    }                                                                                   \
  } while (0)
  for (int coop = 0; coop < 3; coop++) {
    ccoCoop_t k = (ccoCoop_t)coop;
    int p = (c->lsaRank + 1) % c->lsaSize;
    EXPECT_UNSUPPORTED(ccoSdmaPut(dc, p, w.win, 0, w.win, 64, 8, 0, ccoSdmaSignalRemote, k));
    EXPECT_UNSUPPORTED(ccoSdmaGet(dc, p, w.win, 0, w.win, 64, 8, 0, k));
    EXPECT_UNSUPPORTED(ccoSdmaCommit(dc, p, 0, k));
    EXPECT_UNSUPPORTED(ccoSdmaWaitSignal(dc, p, 0, 1, 0, k)); /* no timeout: must not wait */
    EXPECT_UNSUPPORTED(ccoSdmaQuietQueue(dc, p, 0, k));
    EXPECT_UNSUPPORTED(ccoSdmaQuiet(dc, p, k));
  }
#undef EXPECT_UNSUPPORTED
  CHECK(wrong == 0, "rank %d: SDMA disabled: %ld device calls did not return ccoDevUnsupported (first: %s)", c->rank,
        wrong, first);
  int next = (c->rank + 1) % c->nRanks;
  ccoResult_t pr = ccoSdmaPutAsync(c->comm, next, w.win, 0, w.win, 64, 8, w.win, 8, 1, NULL);
  CHECK(pr == ccoUnsupported, "rank %d: SDMA disabled: ccoSdmaPutAsync returned %s, expected ccoUnsupported",
        c->rank, ccoGetErrorString(pr));
  ccoResult_t wr = ccoStreamWaitSignal(c->comm, w.win, 0, 0, NULL);
  CHECK(wr == ccoSuccess || wr == ccoUnsupported,
        "rank %d: SDMA disabled: ccoStreamWaitSignal on a reached value returned %s", c->rank, ccoGetErrorString(wr));
  /* The rest of the device communicator works. */
  ccoLsaBarrierSession s = ccoLsaBarrierSessionInit(dc, 0, ccoCoopThread);
  ccoDevStatus_t bs = ccoLsaBarrierSyncTimeout(&s, WAIT_NS);
  ccoLsaBarrierSessionEnd(&s);
  CHECK(bs == ccoDevSuccess, "rank %d: SDMA disabled: the LSA barrier returned %s", c->rank, status_name(bs));
  ccoResult_t asyncErr = ccoInternalError;
  MUST(ccoCommGetAsyncError(c->comm, &asyncErr));
  CHECK(asyncErr == ccoSuccess, "rank %d: SDMA disabled: async error %s after refused calls", c->rank,
        ccoGetErrorString(asyncErr));
  if (c->rank == 0)
    printf("no sdma: %d ranks: dc.sdma == 0, device calls ccoDevUnsupported, ccoSdmaPutAsync %s, "
           "ccoStreamWaitSignal %s\n",
           c->lsaSize, ccoGetErrorString(pr), ccoGetErrorString(wr));
  win_close(c, &w);
}

/* ------------------------------------------------------- engine error */

typedef struct {
  const ccoDevComm* dc;
  int src;
  uint64_t expected, timeoutNs;
  ccoDevStatus_t status;
  double endTime;
  atomic_int finished;
} signal_waiter;

static void* signal_waiter_thread(void* arg) {
  signal_waiter* sw = (signal_waiter*)arg;
  sw->status = ccoSdmaWaitSignal(sw->dc, sw->src, 0, sw->expected, sw->timeoutNs, ccoCoopThread);
  sw->endTime = mp_now();
  atomic_store(&sw->finished, 1);
  return NULL;
}

static void run_engine_error(rank_ctx* c) {
  if (!c->sdma || c->lsaSize < 1) {
    CHECK(0, "rank %d: engine error: no SDMA (sdma %#llx)", c->rank, (unsigned long long)c->dc.sdma);
    return;
  }
  test_win w;
  if (!win_open(c, 64 << 10, &w)) return;
  void* flat = NULL;
  size_t slotSize = 0;
  MUST(ccoCommFlatVa(c->comm, &flat, &slotSize));
  /* winBase + peer * stride + bad is past the end of the flat VA for every peer. */
  size_t bad = (size_t)(c->lsaSize + 1) * slotSize + 4096;
  uint64_t base = ccoSdmaReadSignal(&c->dc, 0, 0);
  if (!barrier(c)) return; /* the last collective: after this, rank 0's communicator fails */
  if (c->lsaRank == 0) {
    signal_waiter sw;
    memset(&sw, 0, sizeof(sw));
    sw.dc = &c->dc;
    sw.src = 0;
    sw.expected = base + 1;
    sw.timeoutNs = 20ull * NS_PER_S;
    pthread_t th;
    pthread_create(&th, NULL, signal_waiter_thread, &sw);
    /* ccoSdmaPut refuses a range outside its windows before posting ... */
    ccoDevStatus_t refused = ccoSdmaPut(&c->dc, 0, w.win, bad, w.win, 0, 4096, 0, ccoSdmaSignalRemote, ccoCoopThread);
    CHECK(refused == ccoDevInvalid, "rank %d: engine error: a put outside its window returned %s, want ccoDevInvalid",
          c->rank, status_name(refused));
    /* ... so forge the descriptors a faulty kernel could still post. */
    uint64_t src = (uint64_t)(uintptr_t)w.local;
    uint64_t badDst0 = (uint64_t)(uintptr_t)flat + bad, badDst1 = badDst0 + slotSize;
    double t0 = mp_now();
    ccoDevStatus_t p0 = cco_impl_sdma_post(&c->dc, 0, 0, ccoSdmaOpPut, CCO_SDMA_FLAG_REMOTE_SIGNAL, badDst0, src, 4096);
    ccoDevStatus_t p1 = c->lsaSize > 1 ? cco_impl_sdma_post(&c->dc, 1, 0, ccoSdmaOpPut, CCO_SDMA_FLAG_REMOTE_SIGNAL,
                                                            badDst1, src, 4096)
                                       : ccoDevSuccess;
    CHECK(p0 == ccoDevSuccess && p1 == ccoDevSuccess,
          "rank %d: engine error: posting the forged puts: %s, %s (the engine, not the post, finds the address)",
          c->rank, status_name(p0), status_name(p1));
    ccoDevStatus_t qs = ccoSdmaQuietQueue(&c->dc, 0, 0, ccoCoopThread);
    double tq = mp_now() - t0;
    while (!atomic_load(&sw.finished) && mp_now() - t0 < 25.0) mp_sleep(0.001);
    int returned = atomic_load(&sw.finished);
    double tw = returned ? sw.endTime - t0 : 25.0;
    CHECK(returned && sw.status == ccoDevAborted && tw < 2.0,
          "rank %d: engine error: the waiter on the bad put's signal %s with %s after %.3f s (want ccoDevAborted "
          "within 2 s)",
          c->rank, returned ? "returned" : "still waits", status_name(sw.status), tw);
    CHECK(qs == ccoDevAborted && tq < 2.0, "rank %d: engine error: ccoSdmaQuietQueue returned %s after %.3f s",
          c->rank, status_name(qs), tq);
    if (returned) pthread_join(th, NULL);
    else pthread_detach(th);
    ccoResult_t asyncErr = ccoSuccess;
    MUST(ccoCommGetAsyncError(c->comm, &asyncErr));
    CHECK(asyncErr != ccoSuccess && ccoDevCommAborted(&c->dc),
          "rank %d: engine error: ccoCommGetAsyncError reports %s, abort word %d", c->rank,
          ccoGetErrorString(asyncErr), ccoDevCommAborted(&c->dc));
    ccoResult_t after = ccoSdmaPutAsync(c->comm, c->rank, w.win, 0, w.win, 4096, 8, NULL, 0, 0, NULL);
    CHECK(after != ccoSuccess, "rank %d: engine error: a later ccoSdmaPutAsync returned %s (%s)", c->rank,
          ccoGetErrorString(after), ccoGetLastError(c->comm));
    printf("engine error: rank %d: waiter %s after %.3f s, quiet %s, async error %s, next ccoSdmaPutAsync %s\n",
           c->rank, status_name(sw.status), tw, status_name(qs), ccoGetErrorString(asyncErr),
           ccoGetErrorString(after));
  } else if (c->lsaRank == 1) {
    /* The bad put to this rank never lands: its signal must not come. */
    double t0 = mp_now();
    ccoDevStatus_t st = ccoSdmaWaitSignal(&c->dc, 0, 0, base + 1, 2ull * NS_PER_S, ccoCoopThread);
    double dt = mp_now() - t0;
    CHECK(st == ccoDevAborted || st == ccoDevTimeout,
          "rank %d: engine error on rank 0: the wait for its bad put's signal returned %s after %.3f s", c->rank,
          status_name(st), dt);
    printf("engine error: rank %d (the bad put's target): wait returned %s after %.3f s\n", c->rank,
           status_name(st), dt);
  }
  /* No collective after the failure: local teardown only. */
  if (w.win) MUST(ccoWindowDeregister(c->comm, w.win));
}

/* ------------------------------------------------------ ranks as threads */

static void run_rank(rank_ctx* c) {
  if (setup_rank(c)) {
    if (g_opt.engineError) run_engine_error(c);
    else if (g_opt.noSdma) run_no_sdma(c);
    else run_default(c);
  }
  teardown_rank(c);
}

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

/* ------------------------------------------------------------------- main */

static int parse_options(int argc, char** argv) {
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--engine-error")) g_opt.engineError = 1;
    else if (!strcmp(a, "--no-sdma")) g_opt.noSdma = 1;
    else if (!v) return 0;
    else if (!strcmp(a, "--threads")) g_opt.threads = atoi(v), i++;
    else if (!strcmp(a, "--iters")) g_opt.iters = atol(v), i++;
    else if (!strcmp(a, "--flood")) g_opt.flood = atol(v), i++;
    else if (!strcmp(a, "--issuers")) g_opt.issuers = atoi(v), i++;
    else if (!strcmp(a, "--large-mib")) g_opt.largeMiB = atol(v), i++;
    else if (!strcmp(a, "--only")) g_opt.only = v, i++;
    else return 0;
  }
  return g_opt.threads >= 0 && g_opt.threads <= MAX_RANKS && g_opt.iters >= 1 && g_opt.flood >= 1 &&
         g_opt.issuers >= 1 && g_opt.issuers <= 64 && g_opt.largeMiB >= 1 && g_opt.largeMiB <= 1024 &&
         !(g_opt.engineError && g_opt.noSdma);
}

int main(int argc, char** argv) {
  if (!parse_options(argc, argv)) {
    fprintf(stderr,
            "usage: [ccorun -n N] %s [--iters I] [--flood M] [--issuers T] [--large-mib L] [--only STEP]\n"
            "       %s --threads N [options]   ranks as threads of this process\n"
            "       [ccorun -n N] %s [--threads N] --engine-error | --no-sdma\n",
            argv[0], argv[0], argv[0]);
    return 2;
  }
  /* CPU threads stand in for kernels: the windows must be host memory. */
  setenv("CCO_PLATFORM", "host", 1);
  if (g_opt.noSdma && !getenv("CCO_ENABLE_SDMA") && !getenv("MORI_ENABLE_SDMA")) setenv("CCO_ENABLE_SDMA", "0", 1);
  if (g_opt.threads > 0) {
    run_thread_ranks(g_opt.threads);
  } else {
    rank_ctx c;
    memset(&c, 0, sizeof(c));
    ccoResult_t res = ccoCommCreateFromEnv(0, &c.comm);
    CHECK(res == ccoSuccess, "ccoCommCreateFromEnv: %s", ccoGetLastError(NULL));
    if (res == ccoSuccess) run_rank(&c);
  }
  return mp_finish("mp_sdma");
}
