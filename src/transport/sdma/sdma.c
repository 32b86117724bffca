/* SDMA rings and the engine thread that drains them. */
#include "transport/sdma/sdma.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cco/device/cco_sdma_types.h"
#include "base/clock.h"
#include "base/env.h"
#include "base/error.h"
#include "base/log.h"

/* Counters on their own cache lines: producers hammer the tails while the
 * engine's stream writes land on the completion counts. */
#define CCO_SDMA_LINE 64
#define CCO_SDMA_MAX_STREAMS 8

/* A descriptor as the engine reads it from the tagged words of a slot. */
typedef struct {
  uint64_t dst, src, bytes;
  uint32_t op, flags;
} descriptor;

typedef struct {
  ccoSdmaSlot* slots;          /* host view */
  uint64_t* headHost;          /* host view of the credit word */
  const uint64_t* quietHost;   /* host view of the waiters' completion request */
  void* stream;                /* one of the engine's streams, always the same for this ring */
  uint64_t head;               /* next ticket to read */
  uint64_t completedDev;       /* device address of the completion count */
  uint64_t completed;          /* operations issued */
  uint64_t completedWritten;   /* the last count a stream write was issued for */
  uint64_t quietWanted;        /* the largest count a waiter asked for */
  uint64_t remoteSignal;       /* device address of the peer's slot for (this rank, queue) */
  uint64_t signalled;          /* remote signals issued */
  int peer, queue;
} ring;

struct cco_sdma_state {
  int nRings;
  ring* rings;
  void* slotsHost;
  void* headsHost;
  void* counters; /* device: tail and completed per ring, one line each */
  void* queuesDev;
  void* dev;      /* ccoSdmaDev */
  uint64_t flatLo, flatHi;
  bool failed;
  struct cco_sdma_state* next;
};

/* The engine's streams are few and shared by every ring of every device
 * communicator: a GPU context has few hardware queues
 * (CUDA_DEVICE_MAX_CONNECTIONS, 8 by default) and streams beyond them share
 * one round-robin. A copy stream sharing a hardware queue with a kernel
 * that spins on the copy's signal waits behind that kernel forever. */
struct cco_sdma_engine {
  cco_sdma_transport* t;
  pthread_t thread;
  pthread_mutex_t lock; /* the list of states */
  cco_sdma_state* states;
  int nStreams;
  void* streams[CCO_SDMA_MAX_STREAMS];
  ccoResult_t failure; /* found under `lock`, reported after it is dropped */
  bool lazyCompletion; /* CCO_SDMA_LAZY_COMPLETION */
  uint64_t spinMaxNs;  /* CCO_PROGRESS_SPIN_MAX_US */
  uint64_t busyNs;     /* CCO_PROGRESS_BUSY_US, 0 on the host platform */
  atomic_bool stop;
  /* The profile, logged at INFO when the engine stops (docs/sdma.md). */
  struct {
    uint64_t passes, descriptors, copies, completionWrites;
    uint64_t copyNs, writeNs; /* time in the two driver calls */
    uint64_t maxPass;
  } prof;
};

bool cco_sdma_enabled(void) { return cco_env_bool(CCO_ENV_ID_CCO_ENABLE_SDMA); }

size_t cco_sdma_signal_bytes(int lsaSize, uint32_t queues) {
  return (size_t)lsaSize * queues * sizeof(uint64_t);
}

/* ------------------------------------------------------------------ engine */


static bool in_flat(const cco_sdma_state* st, uint64_t addr, uint64_t bytes) {
  return addr >= st->flatLo && addr <= st->flatHi && bytes <= st->flatHi - addr;
}

/* Descriptors read from one ring in one pass, issued with two driver calls:
 * one batch of copies, then one batch of stream writes (the peer's signal
 * count and the ring's completion count). The remote signal is a count per
 * (source, queue), so a single write of the final count covers every
 * signalled descriptor of the pass; being behind every copy of the pass in
 * stream order, it never overtakes its data. */
#define CCO_SDMA_PASS 64

static ccoResult_t check_descriptor(cco_sdma_transport* t, const cco_sdma_state* st, const ring* r,
                                    const descriptor* d) {
  if (d->op == ccoSdmaOpSignal) return ccoSuccess;
  if ((d->op == ccoSdmaOpPut || d->op == ccoSdmaOpGet) && in_flat(st, d->dst, d->bytes) &&
      in_flat(st, d->src, d->bytes))
    return ccoSuccess;
  return cco_error(t->ctx->err, ccoInvalidUsage, CCO_SUBSYS_SDMA,
                   "rank %d: SDMA descriptor to LSA peer %d queue %d: op %u of %llu bytes "
                   "from %#llx to %#llx is outside the flat VA",
                   t->ctx->rank, r->peer, r->queue, d->op, (unsigned long long)d->bytes,
                   (unsigned long long)d->src, (unsigned long long)d->dst);
}

/* Whether operations finished since the count was last written. */
static bool completion_behind(const ring* r) { return r->completed != r->completedWritten; }

/* Whether the ring's completion count should be written now: always
 * without lazy completion, else once a waiter asked for more than was
 * written. */
static bool completion_due(const cco_sdma_engine* e, ring* r) {
  uint64_t asked = __atomic_load_n(r->quietHost, __ATOMIC_RELAXED);
  if ((int64_t)(asked - r->quietWanted) > 0) r->quietWanted = asked;
  if (!completion_behind(r)) return false;
  return !e->lazyCompletion || (int64_t)(r->quietWanted - r->completedWritten) > 0;
}

static ccoResult_t issue_pass(cco_sdma_engine* e, ring* r, const descriptor* d, int n) {
  cco_platform* p = e->t->ctx->platform;
  uint64_t dsts[CCO_SDMA_PASS], srcs[CCO_SDMA_PASS];
  size_t sizes[CCO_SDMA_PASS], copies = 0;
  uint64_t signalled = r->signalled;
  for (int i = 0; i < n; i++) {
    if (d[i].op != ccoSdmaOpSignal && d[i].bytes) {
      dsts[copies] = d[i].dst;
      srcs[copies] = d[i].src;
      sizes[copies++] = (size_t)d[i].bytes;
    }
    if (d[i].flags & CCO_SDMA_FLAG_REMOTE_SIGNAL) signalled++;
  }
  uint64_t t0 = cco_now_ns();
  if (copies) CCO_CHECK(p->ops->copy_batch_async(p, r->stream, copies, dsts, srcs, sizes));
  uint64_t t1 = cco_now_ns();
  e->prof.copyNs += t1 - t0;
  e->prof.passes++;
  e->prof.descriptors += (uint64_t)n;
  e->prof.copies += copies;
  if ((uint64_t)n > e->prof.maxPass) e->prof.maxPass = (uint64_t)n;
  r->completed += (uint64_t)n;
  uint64_t addrs[2], values[2];
  unsigned writes = 0;
  if (signalled != r->signalled) {
    addrs[writes] = r->remoteSignal;
    values[writes++] = signalled;
  }
  bool complete = completion_due(e, r);
  if (complete) {
    addrs[writes] = r->completedDev;
    values[writes++] = r->completed;
  }
  if (writes) CCO_CHECK(p->ops->write_values_async(p, r->stream, writes, addrs, values));
  e->prof.writeNs += cco_now_ns() - t1;
  e->prof.completionWrites += complete;
  r->signalled = signalled;
  if (complete) r->completedWritten = r->completed;
  return ccoSuccess;
}

/* The completion count alone, behind every copy issued on the ring. */
static ccoResult_t write_completion(cco_sdma_engine* e, ring* r) {
  cco_platform* p = e->t->ctx->platform;
  uint64_t t0 = cco_now_ns();
  CCO_CHECK(p->ops->write_values_async(p, r->stream, 1, &r->completedDev, &r->completed));
  e->prof.writeNs += cco_now_ns() - t0;
  e->prof.completionWrites++;
  r->completedWritten = r->completed;
  return ccoSuccess;
}

static void note_failure(cco_sdma_engine* e, cco_sdma_state* st, ccoResult_t res) {
  if (res == ccoSuccess) return;
  st->failed = true;
  e->failure = res;
}

/* Reads the descriptor of ticket `ticket` from its slot: false while one of
 * its words does not carry the ticket's tag yet. */
static bool read_slot(const ccoSdmaSlot* slot, uint64_t ticket, descriptor* d) {
  uint32_t v[CCO_SDMA_WORDS_USED];
  const uint32_t tag = CCO_SDMA_TAG(ticket);
  for (int i = 0; i < CCO_SDMA_WORDS_USED; i++) {
    uint64_t w = __atomic_load_n(&slot->word[i], __ATOMIC_ACQUIRE);
    if (CCO_SDMA_WORD_TAG(w) != tag) return false;
    v[i] = (uint32_t)w;
  }
  d->dst = (uint64_t)v[CCO_SDMA_WORD_DST_HI] << 32 | v[CCO_SDMA_WORD_DST_LO];
  d->src = (uint64_t)v[CCO_SDMA_WORD_SRC_HI] << 32 | v[CCO_SDMA_WORD_SRC_LO];
  d->bytes = (uint64_t)v[CCO_SDMA_WORD_BYTES_HI] << 32 | v[CCO_SDMA_WORD_BYTES_LO];
  d->op = CCO_SDMA_UNPACK_OP(v[CCO_SDMA_WORD_OP_FLAGS]);
  d->flags = CCO_SDMA_UNPACK_FLAGS(v[CCO_SDMA_WORD_OP_FLAGS]);
  return true;
}

/* Reads up to CCO_SDMA_PASS published descriptors of one ring and issues
 * them; returns how many it read (a completion write a waiter asked for
 * counts as one). */
static int drain(cco_sdma_engine* e, cco_sdma_state* st, ring* r) {
  descriptor pass[CCO_SDMA_PASS];
  int n = 0;
  while (n < CCO_SDMA_PASS && read_slot(&r->slots[r->head & (CCO_SDMA_DEPTH - 1)], r->head, &pass[n])) {
    r->head++;
    if (!st->failed) note_failure(e, st, check_descriptor(e->t, st, r, &pass[n]));
    n++;
  }
  if (!n) {
    if (st->failed || !completion_due(e, r)) return 0;
    note_failure(e, st, write_completion(e, r));
    return 1;
  }
  CCO_TRACE(SDMA, "rank %d: %d descriptors of LSA peer %d queue %d (tickets up to %llu)", e->t->ctx->rank, n, r->peer,
            r->queue, (unsigned long long)r->head);
  /* A failed state keeps returning credits so producers are not stuck; its
   * completions never come, and waiters leave through the abort word. */
  if (!st->failed) {
    uint64_t t0 = cco_now_ns();
    ccoResult_t res = issue_pass(e, r, pass, n);
    uint64_t took = cco_now_ns() - t0;
    /* The driver calls are asynchronous; one that blocks stalls every ring. */
    if (took > 1000000)
      CCO_INFO(SDMA, "rank %d: issuing %d descriptors of LSA peer %d queue %d took %.3f ms", e->t->ctx->rank, n,
               r->peer, r->queue, (double)took * 1e-6);
    note_failure(e, st, res);
  }
  __atomic_store_n(r->headHost, r->head, __ATOMIC_RELEASE); /* credits, in batches */
  return n;
}

/* Before the engine naps: every ring's completion count written, asked for
 * or not, so no count stays behind for a nap's length. */
static void write_pending_completions(cco_sdma_engine* e) {
  for (cco_sdma_state* st = e->states; st; st = st->next)
    for (int i = 0; i < st->nRings; i++) {
      ring* r = &st->rings[i];
      if (!st->failed && completion_behind(r)) note_failure(e, st, write_completion(e, r));
    }
}

static bool streams_busy(cco_sdma_engine* e) {
  cco_platform* p = e->t->ctx->platform;
  for (int i = 0; i < e->nStreams; i++) {
    bool busy = false;
    /* A failed query counts as quiet: the engine naps, nothing else changes. */
    if (p->ops->stream_busy(p, e->streams[i], &busy) == ccoSuccess && busy) return true;
  }
  return false;
}

static void log_profile(const cco_sdma_engine* e, const cco_idle* idle) {
  const double passes = e->prof.passes ? (double)e->prof.passes : 1.0;
  CCO_INFO(SDMA,
           "rank %d: SDMA engine profile: %llu passes, %llu descriptors (%.2f per pass, at most %llu), "
           "%llu copies; copy issue %.2f us per pass, %llu completion writes, stream writes %.2f us per pass; "
           "%llu naps, %llu of them ended by work; spin window %.0f us at the end",
           e->t->ctx->rank, (unsigned long long)e->prof.passes, (unsigned long long)e->prof.descriptors,
           (double)e->prof.descriptors / passes, (unsigned long long)e->prof.maxPass,
           (unsigned long long)e->prof.copies, (double)e->prof.copyNs * 1e-3 / passes,
           (unsigned long long)e->prof.completionWrites, (double)e->prof.writeNs * 1e-3 / passes,
           (unsigned long long)idle->naps, (unsigned long long)idle->napWakes, (double)idle->spinNs * 1e-3);
}

static void* engine_main(void* arg) {
  cco_sdma_engine* e = arg;
  cco_platform_background_thread_start(e->t->ctx->platform, CCO_SUBSYS_SDMA, "SDMA engine", e->t->ctx->rank);
  cco_idle idle;
  cco_idle_init(&idle, e->spinMaxNs, e->busyNs, cco_now_ns());
  while (!atomic_load(&e->stop)) {
    int work = 0;
    bool napsNext = cco_idle_past_window(&idle, cco_now_ns()); /* if this scan finds nothing */
    pthread_mutex_lock(&e->lock);
    for (cco_sdma_state* st = e->states; st; st = st->next)
      for (int i = 0; i < st->nRings; i++) work += drain(e, st, &st->rings[i]);
    if (!work && napsNext) write_pending_completions(e);
    ccoResult_t failure = e->failure;
    e->failure = ccoSuccess;
    pthread_mutex_unlock(&e->lock);
    /* Outside the engine lock: failing the communicator takes the memory
     * lock, which destroy holds while it takes the engine lock. */
    if (failure != ccoSuccess) e->t->ctx->fail(e->t->ctx->owner, failure);
    uint64_t now = cco_now_ns();
    if (work) {
      cco_idle_work(&idle, now);
      continue;
    }
    /* Copies still running are not quiet: the kernel that waits for them
     * posts its next burst right after, which an engine that started
     * napping when it issued them would pick up a nap late. Asked only when
     * the engine is about to nap, so at most once per half window. */
    if (cco_idle_past_window(&idle, now) && streams_busy(e)) cco_idle_keep_awake(&idle, now);
    cco_idle_step(&idle, now, 200000);
  }
  log_profile(e, &idle);
  return NULL;
}

static ccoResult_t engine_get(cco_sdma_transport* t, cco_sdma_engine** out) {
  pthread_mutex_lock(&t->lock);
  ccoResult_t res = ccoSuccess;
  if (!t->engine) {
    cco_sdma_engine* e = calloc(1, sizeof(*e));
    if (!e) {
      res = cco_error(t->ctx->err, ccoOutOfMemory, CCO_SUBSYS_SDMA, "no memory for the SDMA engine");
    } else {
      e->t = t;
      e->lazyCompletion = cco_env_bool(CCO_ENV_ID_CCO_SDMA_LAZY_COMPLETION);
      res = cco_progress_spin_max(t->ctx->err, &e->spinMaxNs);
      if (res == ccoSuccess)
        res = cco_progress_busy(t->ctx->err, t->ctx->platform->kind == CCO_PLATFORM_CUDA, &e->busyNs);
      pthread_mutex_init(&e->lock, NULL);
      atomic_init(&e->stop, false);
      cco_platform* p = t->ctx->platform;
      int want = (int)cco_env_int(CCO_ENV_ID_CCO_SDMA_STREAMS);
      if (res == ccoSuccess && (want < 1 || want > CCO_SDMA_MAX_STREAMS))
        res = cco_error(t->ctx->err, ccoInvalidArgument, CCO_SUBSYS_SDMA,
                        "CCO_SDMA_STREAMS=%d: must be 1..%d", want, CCO_SDMA_MAX_STREAMS);
      for (int i = 0; res == ccoSuccess && i < want; i++) {
        res = p->ops->stream_create(p, &e->streams[i]);
        if (res == ccoSuccess) e->nStreams = i + 1;
      }
      if (res == ccoSuccess && pthread_create(&e->thread, NULL, engine_main, e) != 0)
        res = cco_error(t->ctx->err, ccoSystemError, CCO_SUBSYS_SDMA, "cannot start the SDMA engine thread");
      if (res == ccoSuccess) {
        t->engine = e;
      } else {
        for (int i = 0; i < e->nStreams; i++) p->ops->stream_destroy(p, e->streams[i]);
        pthread_mutex_destroy(&e->lock);
        free(e);
      }
    }
  }
  *out = t->engine;
  pthread_mutex_unlock(&t->lock);
  return res;
}

void cco_sdma_engine_stop(cco_sdma_transport* t) {
  cco_sdma_engine* e = t->engine;
  if (!e) return;
  atomic_store(&e->stop, true);
  pthread_join(e->thread, NULL);
  cco_platform* p = t->ctx->platform;
  for (int i = 0; i < e->nStreams; i++) p->ops->stream_destroy(p, e->streams[i]);
  pthread_mutex_destroy(&e->lock);
  free(e);
  t->engine = NULL;
}

/* ------------------------------------------------------------------ rings */

static void free_state(cco_sdma_transport* t, cco_sdma_state* st) {
  cco_platform* p = t->ctx->platform;
  if (st->dev) p->ops->desc_free(p, st->dev);
  if (st->queuesDev) p->ops->desc_free(p, st->queuesDev);
  if (st->counters) p->ops->desc_free(p, st->counters);
  if (st->headsHost) p->ops->hostmap_free(p, st->headsHost);
  if (st->slotsHost) p->ops->hostmap_free(p, st->slotsHost);
  free(st->rings);
  free(st);
}

ccoResult_t cco_sdma_state_create(cco_sdma_transport* t, uint32_t queues, uint64_t resourceBase,
                                  uint64_t signalsOffset, bool oneDevice, cco_sdma_state** out,
                                  uint64_t* devAddr) {
  cco_platform* p = t->ctx->platform;
  int lsaSize = t->ctx->mem->lsaSize, me = t->ctx->mem->lsaRank;
  cco_sdma_state* st = calloc(1, sizeof(*st));
  if (!st) return cco_error(t->ctx->err, ccoOutOfMemory, CCO_SUBSYS_SDMA, "no memory");
  st->nRings = lsaSize * (int)queues;
  st->flatLo = (uint64_t)(uintptr_t)t->ctx->mem->flatBase;
  st->flatHi = st->flatLo + (uint64_t)lsaSize * t->ctx->mem->slotSize;
  st->rings = calloc((size_t)st->nRings, sizeof(ring));
  ccoSdmaQueueDev* table = calloc((size_t)st->nRings, sizeof(ccoSdmaQueueDev));
  uint64_t slotsDev = 0, headsDev = 0;
  ccoResult_t res = st->rings && table ? ccoSuccess
                                       : cco_error(t->ctx->err, ccoOutOfMemory, CCO_SUBSYS_SDMA, "no memory");
  size_t slotBytes = (size_t)st->nRings * CCO_SDMA_DEPTH * sizeof(ccoSdmaSlot);
  size_t lineBytes = (size_t)st->nRings * CCO_SDMA_LINE;
  if (res == ccoSuccess) res = p->ops->hostmap_alloc(p, slotBytes, &st->slotsHost, &slotsDev);
  /* Credits in the first half, the waiters' requests in the second. */
  if (res == ccoSuccess) res = p->ops->hostmap_alloc(p, 2 * lineBytes, &st->headsHost, &headsDev);
  if (res == ccoSuccess) res = cco_platform_desc_alloc_zeroed(p, 2 * lineBytes, &st->counters);
  cco_sdma_engine* e = NULL;
  if (res == ccoSuccess) res = engine_get(t, &e);
  for (int i = 0; res == ccoSuccess && i < st->nRings; i++) {
    ring* r = &st->rings[i];
    r->peer = i / (int)queues;
    r->queue = i % (int)queues;
    r->slots = (ccoSdmaSlot*)st->slotsHost + (size_t)i * CCO_SDMA_DEPTH;
    r->headHost = (uint64_t*)((char*)st->headsHost + (size_t)i * CCO_SDMA_LINE);
    r->quietHost = (const uint64_t*)((char*)st->headsHost + lineBytes + (size_t)i * CCO_SDMA_LINE);
    uint64_t tailDev = (uint64_t)(uintptr_t)st->counters + (uint64_t)i * CCO_SDMA_LINE;
    r->completedDev = tailDev + lineBytes;
    r->remoteSignal = resourceBase + (uint64_t)r->peer * t->ctx->mem->slotSize + signalsOffset +
                      ((uint64_t)me * queues + (uint64_t)r->queue) * sizeof(uint64_t);
    table[i] = (ccoSdmaQueueDev){slotsDev + (uint64_t)i * CCO_SDMA_DEPTH * sizeof(ccoSdmaSlot), tailDev,
                                 headsDev + (uint64_t)i * CCO_SDMA_LINE, r->completedDev,
                                 headsDev + lineBytes + (uint64_t)i * CCO_SDMA_LINE, {0, 0, 0}};
    r->stream = e->streams[i % e->nStreams];
  }
  if (res == ccoSuccess) res = p->ops->desc_alloc(p, (size_t)st->nRings * sizeof(ccoSdmaQueueDev), &st->queuesDev);
  if (res == ccoSuccess)
    res = p->ops->copy_to_device(p, st->queuesDev, table, (size_t)st->nRings * sizeof(ccoSdmaQueueDev));
  ccoSdmaDev dev;
  memset(&dev, 0, sizeof(dev));
  dev.queueCount = queues;
  dev.lsaSize = (uint32_t)lsaSize;
  dev.queues = (uint64_t)(uintptr_t)st->queuesDev;
  dev.signalsOffset = signalsOffset;
  /* "auto,sys,gpu". With every LSA peer on this GPU the whole flat VA is
   * this GPU's memory, which its copy engines read through the same L2 a
   * GPU-scope fence publishes to (the rule of the LSA signals' scope);
   * with peers on other GPUs a source or an earlier store may sit behind
   * NVLink, and only a system fence covers it. */
  int fence = (int)cco_env_enum(CCO_ENV_ID_CCO_SDMA_POST_FENCE);
  dev.postFenceGpu = fence == 2 || (fence == 0 && oneDevice);
  if (res == ccoSuccess) res = p->ops->desc_alloc(p, sizeof(dev), &st->dev);
  if (res == ccoSuccess) res = p->ops->copy_to_device(p, st->dev, &dev, sizeof(dev));
  free(table);
  if (res != ccoSuccess) {
    free_state(t, st);
    return res;
  }
  pthread_mutex_lock(&e->lock);
  st->next = e->states;
  e->states = st;
  pthread_mutex_unlock(&e->lock);
  *out = st;
  *devAddr = (uint64_t)(uintptr_t)st->dev;
  CCO_INFO(SDMA, "rank %d: %d SDMA rings (%u queues x %d LSA peers) of %d slots, posts fenced at %s scope",
           t->ctx->rank, st->nRings, queues, lsaSize, CCO_SDMA_DEPTH, dev.postFenceGpu ? "GPU" : "system");
  return ccoSuccess;
}

void cco_sdma_state_destroy(cco_sdma_transport* t, cco_sdma_state* st) {
  if (!st) return;
  cco_sdma_engine* e = t->engine;
  if (e) {
    pthread_mutex_lock(&e->lock);
    for (cco_sdma_state** it = &e->states; *it; it = &(*it)->next)
      if (*it == st) {
        *it = st->next;
        break;
      }
    pthread_mutex_unlock(&e->lock);
  }
  free_state(t, st);
}
