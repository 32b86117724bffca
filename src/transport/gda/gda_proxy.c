/*
 * The GDA proxy thread: takes published descriptors from every ring of
 * every device communicator of its communicator, runs them on the network
 * engine (directly, or through the staged path), progresses the engine
 * without pause (the target side of a manual-progress provider moves only
 * while someone calls it) and hands completion back to the rings in
 * ticket order.
 */
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "base/clock.h"
#include "base/log.h"
#include "transport/gda/gda_internal.h"

void cco_gda_proxy_fail(cco_gda_proxy* px, ccoResult_t res) {
  px->everFailed = true;
  if (px->failure == ccoSuccess) px->failure = res;
}

/* tcp;ofi_rxm answers -FI_EAGAIN (CCO_NET_BUSY) to every post toward a
 * peer whose process died while nothing was in flight to it, forever and
 * without an error completion (it keeps reconnecting), so the ring would
 * wait forever. A peer that refuses every post this long is taken for dead. */
#define GDA_REFUSED_NS (5ull * 1000000000ull)

ccoResult_t cco_gda_post_result(cco_gda_proxy* px, int peer, ccoResult_t res) {
  if (!px->watch || peer < 0 || peer >= px->nRanks) return res;
  uint64_t* since = &px->watch[peer].refusedSince;
  if (*since == UINT64_MAX) return res; /* reported already */
  if (res != CCO_NET_BUSY) {
    *since = 0;
    return res;
  }
  uint64_t now = cco_now_ns();
  if (!*since) {
    *since = now;
  } else if (now - *since > GDA_REFUSED_NS) {
    *since = UINT64_MAX;
    cco_gda_proxy_fail(px, cco_error(px->ctx->err, ccoRemoteError, CCO_SUBSYS_GDA,
                                 "rank %d: rank %d refused every network operation for %llu s: its "
                                 "connection is gone (did it exit?)",
                                 px->rank, peer, GDA_REFUSED_NS / 1000000000ull));
  }
  return res;
}

cco_gda_win* cco_gda_find_win(cco_gda_proxy* px, uint64_t offset, uint64_t bytes) {
  for (cco_gda_win* w = px->wins; w; w = w->next)
    if (offset >= w->offset && offset - w->offset <= w->size && bytes <= w->size - (offset - w->offset))
      return w;
  return NULL;
}

void cco_gda_apply_signal(cco_gda_proxy* px, uint64_t stateId, uint32_t index, uint64_t value) {
  for (cco_gda_state* st = px->states; st; st = st->next) {
    if (st->id != stateId) continue;
    if (index < st->signalTotal) {
      uint64_t now = __atomic_add_fetch(&st->signalsHost[index], value, __ATOMIC_RELEASE);
      CCO_TRACE(GDA, "rank %d: signal %u of device communicator %llu += %llu: %llu", px->rank, index,
                (unsigned long long)stateId, (unsigned long long)value, (unsigned long long)now);
      return;
    }
    break;
  }
  cco_gda_proxy_fail(px, cco_error(px->ctx->err, ccoInvalidUsage, CCO_SUBSYS_GDA,
                               "rank %d: a signal arrived for slot %u of device communicator %llu, "
                               "which does not exist here",
                               px->rank, index, (unsigned long long)stateId));
}

/* Counts local completion once, then marks the op done (the ring's head
 * passes it when every earlier op is done too). */
void cco_gda_op_complete(cco_gda_proxy* px, cco_gda_op* op) {
  if (op->d.counter && !op->counted) {
    uint32_t c = op->d.counter - 1;
    __atomic_fetch_add(&op->ring->st->countersHost[c], 1, __ATOMIC_RELEASE);
    op->counted = true;
  }
  op->done = true;
}

static void op_fail(cco_gda_proxy* px, cco_gda_op* op, ccoResult_t res) {
  cco_gda_proxy_fail(px, res);
  op->outstanding = 0;
  op->issued = op->d.bytes;
  cco_gda_op_complete(px, op);
}

/* ---------------------------------------------------------- direct path */

/* Retries on CCO_NET_BUSY happen on the next pass; returns false then. */
static bool direct_progress(cco_gda_proxy* px, cco_gda_op* op) {
  cco_gda_state* st = op->ring->st;
  ccoGdaSlot* d = &op->d;
  ccoResult_t res = ccoSuccess;
  if (d->op == ccoGdaOpPut || d->op == ccoGdaOpGet || d->op == ccoGdaOpPutValue) {
    if (!op->remoteWin) {
      op->remoteWin = cco_gda_find_win(px, d->remote, d->bytes);
      if (d->op != ccoGdaOpPutValue) op->localWin = cco_gda_find_win(px, d->local, d->bytes);
      if (!op->remoteWin || (d->op != ccoGdaOpPutValue && !op->localWin) ||
          !op->remoteWin->has[d->peer]) {
        op_fail(px, op, cco_error(px->ctx->err, ccoInvalidUsage, CCO_SUBSYS_GDA,
                                  "rank %d: GDA op %u to rank %d: slot offsets %#llx / %#llx (+%llu "
                                  "bytes) are not inside windows registered here and there",
                                  px->rank, d->op, d->peer, (unsigned long long)d->remote,
                                  (unsigned long long)d->local, (unsigned long long)d->bytes));
        return true;
      }
    }
    cco_gda_win* rw = op->remoteWin;
    cco_net_rkey rkey = rw->rkeys[d->peer];
    while (op->issued < d->bytes) {
      uint64_t len = d->bytes - op->issued;
      if (len > px->maxMsg) len = px->maxMsg;
      uint64_t roff = d->remote - rw->offset + op->issued;
      if (d->op == ccoGdaOpPutValue) {
        uint64_t* src = &st->values[(size_t)(op->ring - st->rings) * st->depth + (op->ticket & (st->depth - 1))];
        *src = d->local;
        res = cco_net_write(px->net, d->peer, src, st->valuesMr, d->bytes, rkey, roff, CCO_GDA_TAG(op, 0));
        len = d->bytes;
      } else {
        char* local = op->localWin->local + (d->local - op->localWin->offset) + op->issued;
        res = d->op == ccoGdaOpPut
                  ? cco_net_write(px->net, d->peer, local, op->localWin->mr, len, rkey, roff, CCO_GDA_TAG(op, 0))
                  : cco_net_read(px->net, d->peer, local, op->localWin->mr, len, rkey, roff, CCO_GDA_TAG(op, 0));
      }
      if (cco_gda_post_result(px, d->peer, res) == CCO_NET_BUSY) return false;
      if (res != ccoSuccess) {
        op_fail(px, op, res);
        return true;
      }
      op->outstanding++;
      op->issued += len;
      if (px->watch) px->watch[d->peer].inFlight++;
    }
    if (op->outstanding) return true;
  } else if (d->op == ccoGdaOpAddValue) {
    if (!op->remoteWin) {
      op->remoteWin = cco_gda_find_win(px, d->remote, 8);
      if (!op->remoteWin || !op->remoteWin->has[d->peer]) {
        op_fail(px, op, cco_error(px->ctx->err, ccoInvalidUsage, CCO_SUBSYS_GDA,
                                  "rank %d: GDA add to rank %d: slot offset %#llx is not inside a window "
                                  "registered here and there",
                                  px->rank, d->peer, (unsigned long long)d->remote));
        return true;
      }
    }
    if (!op->issued) {
      cco_gda_win* rw = op->remoteWin;
      res = cco_net_atomic_add(px->net, d->peer, d->local, rw->rkeys[d->peer], d->remote - rw->offset,
                               CCO_GDA_TAG(op, 0));
      if (cco_gda_post_result(px, d->peer, res) == CCO_NET_BUSY) return false;
      if (res != ccoSuccess) {
        op_fail(px, op, res);
        return true;
      }
      op->outstanding++;
      op->issued = d->bytes;
      if (px->watch) px->watch[d->peer].inFlight++;
    }
    if (op->outstanding) return true;
  } else if (op->ring->head != op->ticket) {
    return true; /* signal, counter, fence: after every earlier op of the ring */
  }
  if ((d->op == ccoGdaOpPut || d->op == ccoGdaOpPutValue || d->op == ccoGdaOpAddValue || d->op == ccoGdaOpSignal) &&
      d->signalOp != ccoGdaSignalOpNone) {
    if (!op->signalSent) {
      res = cco_net_atomic_add(px->net, d->peer, d->signalValue, st->signalRkeys[d->peer],
                               (uint64_t)d->signal * sizeof(uint64_t), CCO_GDA_TAG(op, CCO_GDA_TAG_DIRECT_SIGNAL));
      if (cco_gda_post_result(px, d->peer, res) == CCO_NET_BUSY) return false;
      if (res != ccoSuccess) {
        op_fail(px, op, res);
        return true;
      }
      op->signalSent = true;
      op->outstanding++;
      if (px->watch) px->watch[d->peer].inFlight++;
    }
    if (op->outstanding) return true;
  }
  cco_gda_op_complete(px, op);
  return true;
}

static void on_completion(cco_gda_proxy* px, const cco_net_completion* c) {
  if (c->notify) { /* a peer's message write: not an op of ours */
    cco_gda_staged_on_notify(px, c->data);
    return;
  }
  int tag = CCO_GDA_TAG_OF(c->context);
  void* obj = CCO_GDA_PTR_OF(c->context);
  if (px->path == CCO_GDA_PATH_DIRECT && px->watch && c->peer >= 0 && c->peer < px->nRanks) {
    cco_gda_peer_watch* w = &px->watch[c->peer];
    w->probeAt = 0; /* heard from it: silence starts again */
    if (tag != CCO_GDA_TAG_COUNT && w->inFlight) w->inFlight--;
  }
  if (tag == CCO_GDA_TAG_COUNT && px->path == CCO_GDA_PATH_DIRECT) { /* a probe (direct_probe_silent) */
    if (c->result != ccoSuccess) cco_gda_proxy_fail(px, c->result);
    return;
  }
  if (tag == CCO_GDA_TAG_DIRECT_DATA || tag == CCO_GDA_TAG_DIRECT_SIGNAL) {
    cco_gda_op* op = obj;
    if (c->result != ccoSuccess) {
      op_fail(px, op, c->result);
      return;
    }
    if (op->outstanding) op->outstanding--;
    return; /* the next pass moves the op on */
  }
  cco_gda_staged_on_completion(px, tag, obj, c->result, c->peer);
}

/* A peer can die with engine operations of ours in flight that then never
 * complete: tcp;ofi_rxm loses an atomic (a put's signal) whose response the
 * dead peer never sent. So while a peer owes us something and stays
 * silent for GDA_PROBE_NS, an atomic add of 0 to a word of ours there goes
 * out: toward a dead peer it fails, or is refused until cco_gda_post_result
 * gives up on the peer; either fails the communicator. The direct path
 * probes through signal slot 0, the staged path through its count word. */
#define GDA_PROBE_NS 100000000ull

void cco_gda_probe_if_silent(cco_gda_proxy* px, int peer, bool owed, uint64_t* probeAt, cco_net_rkey rkey,
                         uint64_t off, uint64_t* now) {
  if (!owed) {
    *probeAt = 0;
    return;
  }
  if (!*now) *now = cco_now_ns();
  if (!*probeAt) *probeAt = *now + GDA_PROBE_NS;
  if (*now < *probeAt) return;
  ccoResult_t res = cco_net_atomic_add(px->net, peer, 0, rkey, off, CCO_GDA_TAG(NULL, CCO_GDA_TAG_COUNT));
  if (cco_gda_post_result(px, peer, res) == CCO_NET_BUSY) return;
  if (res != ccoSuccess) cco_gda_proxy_fail(px, res);
  *probeAt = *now + GDA_PROBE_NS;
}

static void direct_probe_silent(cco_gda_proxy* px) {
  if (!px->watch || !px->states) return;
  uint64_t now = 0;
  for (int p = 0; p < px->nRanks; p++)
    cco_gda_probe_if_silent(px, p, px->watch[p].inFlight != 0, &px->watch[p].probeAt, px->states->signalRkeys[p], 0,
                        &now);
}

/* ------------------------------------------------------------------ rings */

static ccoResult_t check_descriptor(cco_gda_proxy* px, const cco_gda_state* st, const ccoGdaSlot* d) {
  const char* why = NULL;
  bool needsPeer = d->op != ccoGdaOpFence && d->op != ccoGdaOpCounter;
  if (d->op < ccoGdaOpPut || d->op > ccoGdaOpAddValue) why = "unknown op";
  else if (needsPeer && (d->peer < 0 || d->peer >= px->nRanks || !st->peers[d->peer]))
    why = "peer without an endpoint";
  else if (d->signalOp > ccoGdaSignalOpAdd || (d->signalOp && d->signal >= st->signalTotal))
    why = "bad signal";
  else if (d->counter > st->counterCount) why = "bad counter";
  else if (d->op == ccoGdaOpPutValue && d->bytes != 1 && d->bytes != 2 && d->bytes != 4 && d->bytes != 8)
    why = "bad put-value size";
  else if (d->op == ccoGdaOpAddValue && (d->bytes != 8 || d->remote % 8))
    why = "add-value not of 8 aligned bytes";
  if (!why) return ccoSuccess;
  return cco_error(px->ctx->err, ccoInvalidUsage, CCO_SUBSYS_GDA,
                   "rank %d: GDA descriptor op %u to rank %d (signal %u, counter %u): %s", px->rank,
                   d->op, d->peer, d->signal, d->counter, why);
}

/* Takes the published descriptors of a ring: the written slots up to the
 * last doorbell, or every written slot when they fill the ring (then no
 * producer can ring, as they all wait for credits). */
static int take(cco_gda_proxy* px, cco_gda_ring* r) {
  uint32_t mask = r->depth - 1;
  while (r->scanned - r->head < r->depth) {
    ccoGdaSlot* s = &r->slots[r->scanned & mask];
    uint64_t seq = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
    if (!CCO_GDA_SLOT_WRITTEN(seq, r->scanned)) break;
    if ((seq & CCO_GDA_SEQ_FENCE) || (s->flags & CCO_GDA_FLAG_RING)) r->bell = r->scanned + 1;
    r->scanned++;
  }
  uint64_t upto = r->scanned - r->head == r->depth ? r->scanned : r->bell;
  int n = 0;
  for (; (int64_t)(upto - r->read) > 0; r->read++, n++) {
    cco_gda_op* op = &r->ops[r->read & mask];
    memset(op, 0, sizeof(*op));
    const ccoGdaSlot* s = &r->slots[r->read & mask];
    if (__atomic_load_n(&s->seq, __ATOMIC_RELAXED) & CCO_GDA_SEQ_FENCE) {
      op->d.op = ccoGdaOpFence; /* the rest of the slot is an earlier post's */
      op->d.peer = -1;
      op->d.flags = CCO_GDA_FLAG_RING;
    } else {
      op->d = *s;
    }
    op->ring = r;
    op->ticket = r->read;
    op->active = true;
    CCO_TRACE(GDA, "rank %d: took ticket %llu of ring %d: op %u to rank %d, %llu bytes, remote %#llx, signal %u op %u",
              px->rank, (unsigned long long)r->read, r->context, op->d.op, op->d.peer,
              (unsigned long long)op->d.bytes, (unsigned long long)op->d.remote, op->d.signal, op->d.signalOp);
    ccoResult_t bad = check_descriptor(px, r->st, &op->d);
    if (bad != ccoSuccess) op_fail(px, op, bad);
  }
  return n;
}

/* Moves every op of the ring on, oldest first. The completed prefix
 * advances as it goes, so an op waiting for its predecessors (signal,
 * counter, fence) completes in the same pass as they do. */
static int run_ring(cco_gda_proxy* px, cco_gda_ring* r) {
  int work = take(px, r);
  uint32_t mask = r->depth - 1;
  bool prefix = true;
  for (uint64_t t = r->head; t != r->read; t++) {
    cco_gda_op* op = &r->ops[t & mask];
    if (!op->done) {
      if (px->path == CCO_GDA_PATH_DIRECT) {
        if (!direct_progress(px, op)) break; /* the engine is full: next pass */
      } else {
        cco_gda_staged_progress_op(px, op);
      }
    }
    if (prefix && op->done) {
      op->active = false;
      r->head = t + 1;
    } else {
      prefix = false;
    }
  }
  return work;
}

/* Hands the completed prefix back: credits and flush, one store. */
static int retire(cco_gda_ring* r) {
  uint32_t mask = r->depth - 1;
  uint64_t h = r->head;
  while (h != r->read && r->ops[h & mask].done) {
    r->ops[h & mask].active = false;
    h++;
  }
  r->head = h;
  if (h == r->published) return 0;
  r->published = h;
  __atomic_store_n(r->headHost, h, __ATOMIC_RELEASE);
  return 1;
}

static int progress_engine(cco_gda_proxy* px) {
  cco_net_completion comps[64];
  int total = 0;
  for (;;) {
    int n = 0;
    ccoResult_t res = cco_net_progress(px->net, comps, 64, &n);
    if (res != ccoSuccess) {
      cco_gda_proxy_fail(px, res);
      return total;
    }
    for (int i = 0; i < n; i++) on_completion(px, &comps[i]);
    total += n;
    if (n < 64) return total;
  }
}

/* Progressing a socket provider is a system call; the rings are a load
 * each. So the rings are scanned on every pass and the engine at most every
 * this many nanoseconds while it has nothing to report: a kernel's flush
 * right after its post is seen within a ring scan, and the engine still
 * moves the peers' traffic within microseconds. */
#define GDA_ENGINE_INTERVAL_NS 2000

/* Whether every ring is drained: each posted descriptor taken and complete
 * (and, staged, every message exchanged). Under the lock. */
static bool proxy_idle(cco_gda_proxy* px) {
  for (cco_gda_state* st = px->states; st; st = st->next)
    for (int i = 0; i < st->nRings; i++) {
      cco_gda_ring* r = &st->rings[i];
      const ccoGdaSlot* next = &r->slots[r->scanned & (r->depth - 1)];
      if (r->head != r->read || r->scanned != r->read ||
          CCO_GDA_SLOT_WRITTEN(__atomic_load_n(&next->seq, __ATOMIC_ACQUIRE), r->scanned))
        return false;
    }
  return px->path != CCO_GDA_PATH_STAGED || cco_gda_staged_idle(px);
}

/* A stop first drains, up to drainUntil: a barrier's last signal, or the
 * puts a kernel posted just before ccoCommDestroy, still reach their peers
 * (which may be waiting for them). Not on a failed communicator. */
static bool stop_now(cco_gda_proxy* px, bool failed) {
  if (!atomic_load(&px->stop)) return false;
  if (failed || px->failure != ccoSuccess || (px->ctx->failed && atomic_load(px->ctx->failed) != 0)) return true;
  return cco_now_ns() >= atomic_load(&px->drainUntil) || proxy_idle(px);
}

static void* proxy_main(void* arg) {
  cco_gda_proxy* px = arg;
  cco_platform_background_thread_start(px->ctx->platform, CCO_SUBSYS_GDA, "GDA proxy", px->ctx->rank);
  uint64_t lastEngine = 0, busyPasses = 0;
  cco_idle idle;
  cco_idle_init(&idle, px->spinMaxNs, px->busyNs, cco_now_ns());
  bool engineBusy = true;
  bool failed = false;
  for (;;) {
    int work = 0;
    pthread_mutex_lock(&px->lock);
    if (stop_now(px, failed)) {
      pthread_mutex_unlock(&px->lock);
      break;
    }
    /* Each ring's head is handed back as soon as it moves: a flush of ops
     * that needed no network (or finished last pass) is not held up by
     * the engine's progress call, a system call on socket providers. */
    for (cco_gda_state* st = px->states; st; st = st->next)
      for (int i = 0; i < st->nRings; i++) {
        work += run_ring(px, &st->rings[i]);
        work += retire(&st->rings[i]);
      }
    uint64_t t = cco_now_ns();
    if (engineBusy || t - lastEngine >= GDA_ENGINE_INTERVAL_NS) {
      int done = progress_engine(px);
      engineBusy = done > 0;
      lastEngine = t;
      work += done;
    }
    if (px->path == CCO_GDA_PATH_STAGED) work += cco_gda_staged_poll(px);
    else direct_probe_silent(px); /* not work: it must not keep the proxy from napping */
    for (cco_gda_state* st = px->states; st; st = st->next)
      for (int i = 0; i < st->nRings; i++) work += retire(&st->rings[i]);
    ccoResult_t failure = px->failure;
    px->failure = ccoSuccess;
    pthread_mutex_unlock(&px->lock);
    /* Outside the proxy lock: failing takes the memory lock, which window
     * and device-communicator teardown hold while they take this one. */
    if (failure != ccoSuccess && !failed) {
      failed = true;
      CCO_WARN(GDA, "rank %d: GDA proxy failed (%s); the communicator is aborted", px->rank,
               ccoGetErrorString(failure));
      px->ctx->fail(px->ctx->owner, failure);
    }
    uint64_t now = cco_now_ns();
    if (work) {
      busyPasses++;
      cco_idle_work(&idle, now);
      continue;
    }
    /* The engine is still progressed on every pass, so peers' transfers
     * move while this side naps. */
    cco_idle_step(&idle, now, 100000);
  }
  CCO_INFO(PROXY, "rank %d: GDA proxy profile: %llu passes with work, %llu naps, %llu of them ended by work; "
           "spin window %.0f us at the end", px->rank, (unsigned long long)busyPasses, (unsigned long long)idle.naps,
           (unsigned long long)idle.napWakes, (double)idle.spinNs * 1e-3);
  return NULL;
}

ccoResult_t cco_gda_proxy_start(cco_gda_proxy* px) {
  CCO_CHECK(cco_progress_spin_max(px->ctx->err, &px->spinMaxNs));
  CCO_CHECK(cco_progress_busy(px->ctx->err, px->ctx->platform->kind == CCO_PLATFORM_CUDA, &px->busyNs));
  atomic_init(&px->stop, false);
  atomic_init(&px->drainUntil, 0);
  if (pthread_create(&px->thread, NULL, proxy_main, px) != 0)
    return cco_error(px->ctx->err, ccoSystemError, CCO_SUBSYS_PROXY, "cannot start the GDA proxy thread");
  px->threadStarted = true;
  return ccoSuccess;
}
