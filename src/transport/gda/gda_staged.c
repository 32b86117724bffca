/*
 * The staged GDA path: window memory the network engine cannot reach (GPU
 * memory under a provider without FI_HMEM) moves through pinned host
 * bounce buffers at both ends, and the target's proxy does its side.
 *
 * Each proxy owns one registered bounce region, the same layout on every
 * rank:
 *   inbox   [source][N] messages       written by sources
 *   counts  [source]    messages ready  remote-added by sources
 *   acks    [target]    messages done   remote-added by targets
 *   msgOut  [target][N] message sources of our writes
 *   landing [source]    put data        written by sources
 *   out                 data going out  (put sources, get replies we serve)
 *   reply               data coming back (our gets)
 *
 * A put chunk: copy out (GPU -> out), write out -> target's landing zone,
 * then write the message into the target's inbox, which announces itself
 * (a notified write: the target's engine reports it once placed) where the
 * provider carries remote completion data, and is otherwise followed by an
 * add to the target's count (each step after the previous one completed:
 * delivery complete, so nothing is read before it is there). With notified
 * writes, a put chunk's message instead goes in front of its data, into the
 * landing zone, and one notified write carries both. A small put skips the
 * landing zone: its data is copied into the inbox slots after its message
 * and goes with the message write (an inline put). The target takes
 * messages in order, copies landing (or inbox) -> window on its stream,
 * applies the signal once the copy is done (so never before the data), and
 * adds to our ack word; acks free the landing space and complete the chunk.
 * A get sends a message; the target copies out and writes the reply, then
 * acks; we copy the reply in.
 * Messages of one source are taken, finished and acknowledged in order.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/env.h"
#include "base/error.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/tsan.h"
#include "transport/gda/gda_internal.h"

#define GDA_INBOX_SLOTS 256u /* messages in flight per (source, target) */

enum { MSG_PUT = 1, MSG_PUT_VALUE = 2, MSG_SIGNAL = 3, MSG_GET = 4, MSG_ADD_VALUE = 5, MSG_PUT_INLINE = 6 };

/* A small put travels inside the inbox: its message, then its data in the
 * slots after it (one write, no landing zone, no round trip before the
 * message). At most this many bytes (CCO_GDA_INLINE_BYTES caps it lower). */
#define GDA_INLINE_MAX 4096u

typedef struct {
  uint32_t kind;
  uint32_t signal;
  uint64_t stateId;
  uint64_t addr;    /* slot offset at the target: put destination, get source */
  uint64_t bytes;   /* put/get length; put-value size */
  uint64_t zoneOff; /* put: offset in the target's landing zone for us; get: in our reply area */
  uint64_t value;   /* put-value */
  uint64_t signalValue;
  uint32_t signalOp;
  uint32_t pad;
} gda_msg;
_Static_assert(sizeof(gda_msg) == 64, "gda_msg layout");

/* Bytes handed out in order, given back in any order: space is reclaimed
 * from the oldest allocation on. */
typedef struct {
  uint64_t off, len;
  bool freed;
} fifo_block;

typedef struct {
  uint64_t size, head, tail; /* bytes, monotonic */
  fifo_block* blocks;
  uint32_t cap, first, count;
} fifo_alloc;

enum { CH_PUT, CH_PUT_INLINE, CH_PUT_VALUE, CH_SIGNAL, CH_GET, CH_RX_PUT, CH_RX_GET };
enum { ST_COPYING, ST_SEND_DATA, ST_DATA, ST_SEND_MSG, ST_MSG, ST_WRITTEN, ST_SEND_REPLY, ST_REPLY };

typedef struct cco_gda_chunk {
  int kind, state, peer;
  bool signals; /* rx: apply the message's signal when the copy is done */
  uint64_t msg; /* message number (ours to peer, or peer's to us): its first inbox slot */
  uint32_t slots; /* inbox slots the message takes: 1, or 1 + its data's for an inline put */
  uint32_t run;   /* tx: slots this chunk's message write carries (its own and the next messages') */
  uint32_t runMessages; /* tx: and how many messages those are */
  bool withData; /* tx put chunk: its message goes in front of its data (one notified write) */
  cco_gda_op* op;   /* tx */
  uint64_t len;
  uint64_t outOff;  /* piece of the out area, or UINT64_MAX */
  uint64_t zoneOff; /* landing offset at the target (put), reply offset (get) */
  uint64_t local;   /* tx get: local slot offset of the data */
  gda_msg m;        /* rx: the message */
  uint64_t jobSeq;
  struct cco_gda_chunk* next;
} cco_gda_chunk;

/* Copies in stream order, issued in batches: a pass's copies go out in
 * one driver call, its 8-byte values in one batch of stream writes that
 * ends with the batch's number written to a host-mapped word, which the
 * proxy polls instead of blocking. Every job of a batch completes with it. */
#define GDA_BATCH 64

typedef struct {
  void* stream;
  uint64_t* doneHost;
  uint64_t doneDev;
  uint64_t issued; /* batches issued; the open batch is issued + 1 */
  cco_gda_chunk *first, *last;
  int nCopies, nValues, nJobs;
  uint64_t copyDst[GDA_BATCH], copySrc[GDA_BATCH];
  size_t copyBytes[GDA_BATCH];
  uint64_t valueAddr[GDA_BATCH + 1], value[GDA_BATCH + 1];
} gda_fifo;

typedef struct {
  uint64_t msgSeq, published, ackSeen;
  uint64_t probeAt; /* when to probe the peer (ns); 0 while it owes no acks */
  bool written[GDA_INBOX_SLOTS];
  cco_gda_chunk* meta[GDA_INBOX_SLOTS];
  fifo_alloc land;
} gda_tx;

typedef struct {
  uint64_t taken, donePrefix, ackPosted;
  bool done[GDA_INBOX_SLOTS];
  /* Notified messages: announced in any order, taken in order; `arrived`
   * is the announced prefix (the count word's counterpart). */
  uint64_t arrived;
  bool announced[GDA_INBOX_SLOTS];
  /* A message that came in front of its data in the landing zone: its
   * offset there + 1 (0: the message is in the inbox slot). */
  uint64_t landingMsg[GDA_INBOX_SLOTS];
} gda_rx;

struct cco_gda_staged {
  char* mem;
  uint64_t memDev;
  size_t memBytes;
  void* wordsMem; /* hostmap: the two fifos' done words */
  uint64_t wordsDev;
  cco_net_mr* mr;
  cco_net_rkey* rkeys; /* [nRanks] */
  uint64_t inboxOff, countOff, ackOff, msgOutOff, landOff, outOff, replyOff;
  uint64_t landBytes, outBytes, chunk;
  fifo_alloc out, reply;
  gda_fifo txq, rxq;
  gda_tx* tx;
  gda_rx* rx;
  cco_gda_chunk* pool;
  cco_gda_chunk* freeList;
  cco_gda_chunk *readyFirst, *readyLast;
  /* Message writes announce themselves (cco_net_write_notify): one network
   * operation per run of messages instead of a write and, after its
   * completion, an atomic add to the target's count word. */
  bool notify;
  uint64_t inlineMax; /* puts of at most this many bytes go inline (0: none) */
};

/* 64-byte slots a message and `bytes` of data after it take: an inline put
 * in the inbox, a put chunk with its message in front in the landing zone. */
static uint32_t inline_slots(uint64_t bytes) { return 1u + (uint32_t)((bytes + sizeof(gda_msg) - 1) / sizeof(gda_msg)); }

/* A notified write's data. A run of messages into the inbox: the source
 * rank, the run's length - 1 and the low 32 bits of its first message
 * number (the target knows the rest: a message in flight is within
 * GDA_INBOX_SLOTS of what it took). A put chunk with its message in front
 * (NOTE_IN_LANDING): the source rank, the low 8 bits of the message number
 * and the message's offset in the landing zone in 64-byte units. */
#define NOTE_IN_LANDING (1ull << 63)
#define NOTE_RANK_SHIFT 40
#define NOTE_RANK_MASK 0x7fffffu
#define NOTE_RUN_SHIFT 32
#define NOTE_MAX_RANKS (1 << 23)
static uint64_t note_encode(int rank, uint64_t msg, uint32_t run) {
  return ((uint64_t)rank << NOTE_RANK_SHIFT) | ((uint64_t)(run - 1) << NOTE_RUN_SHIFT) | (msg & 0xffffffffu);
}
static uint64_t note_encode_landing(int rank, uint64_t msg, uint64_t zoneOff) {
  return NOTE_IN_LANDING | ((uint64_t)rank << NOTE_RANK_SHIFT) | ((msg & 0xffu) << NOTE_RUN_SHIFT) |
         (zoneOff / sizeof(gda_msg));
}

/* ------------------------------------------------------------ allocators */

static bool fifo_init(fifo_alloc* f, uint64_t size, uint32_t cap) {
  memset(f, 0, sizeof(*f));
  f->size = size;
  f->cap = cap;
  f->blocks = calloc(cap, sizeof(fifo_block));
  return f->blocks != NULL;
}

static void fifo_push(fifo_alloc* f, uint64_t off, uint64_t len, bool freed) {
  fifo_block* b = &f->blocks[(f->first + f->count++) % f->cap];
  b->off = off, b->len = len, b->freed = freed;
  f->tail += len;
}

/* Offset of len contiguous bytes, or UINT64_MAX when there is no room. */
static uint64_t fifo_alloc_bytes(fifo_alloc* f, uint64_t len) {
  uint64_t pos = f->tail % f->size;
  uint64_t pad = pos + len > f->size ? f->size - pos : 0;
  if (len == 0 || len > f->size || f->count + 2 > f->cap || f->size - (f->tail - f->head) < pad + len)
    return UINT64_MAX;
  if (pad) fifo_push(f, pos, pad, true);
  uint64_t off = (f->tail % f->size);
  fifo_push(f, off, len, false);
  return off;
}

static void fifo_free(fifo_alloc* f, uint64_t off) {
  for (uint32_t i = 0; i < f->count; i++) {
    fifo_block* b = &f->blocks[(f->first + i) % f->cap];
    if (!b->freed && b->off == off) {
      b->freed = true;
      break;
    }
  }
  while (f->count && f->blocks[f->first].freed) {
    f->head += f->blocks[f->first].len;
    f->first = (f->first + 1) % f->cap;
    f->count--;
  }
}

/* ------------------------------------------------------------------ jobs */

static cco_gda_chunk* chunk_new(cco_gda_staged* s) {
  cco_gda_chunk* c = s->freeList;
  if (!c) return NULL;
  s->freeList = c->next;
  memset(c, 0, sizeof(*c));
  c->outOff = UINT64_MAX;
  c->slots = 1;
  return c;
}

static void chunk_free(cco_gda_staged* s, cco_gda_chunk* c) {
  c->next = s->freeList;
  s->freeList = c;
}

static void ready_push(cco_gda_staged* s, cco_gda_chunk* c) {
  c->next = NULL;
  if (s->readyLast) s->readyLast->next = c;
  else s->readyFirst = c;
  s->readyLast = c;
}

/* Issues the open batch: its copies (which may run in any order among
 * themselves), then its values and its number, in stream order. */
static ccoResult_t batch_issue(cco_gda_proxy* px, gda_fifo* q) {
  if (!q->nJobs) return ccoSuccess;
  cco_platform* p = px->ctx->platform;
  ccoResult_t res = ccoSuccess;
  /* The receive side's copies move a peer's data into the window (and a
   * get's out of it) on the peer's behalf (base/tsan.h). On the host
   * platform they run here, in this thread. */
  bool peers = q == &px->staged->rxq;
  if (peers) CCO_TSAN_PEER_ACCESS_BEGIN();
  if (q->nCopies == 1)
    res = p->ops->copy_async(p, q->stream, q->copyDst[0], q->copySrc[0], q->copyBytes[0]);
  else if (q->nCopies > 1)
    res = p->ops->copy_batch_async(p, q->stream, (size_t)q->nCopies, q->copyDst, q->copySrc, q->copyBytes);
  q->valueAddr[q->nValues] = q->doneDev;
  q->value[q->nValues] = q->issued + 1;
  if (res == ccoSuccess)
    res = p->ops->write_values_async(p, q->stream, (unsigned)q->nValues + 1, q->valueAddr, q->value);
  if (peers) CCO_TSAN_PEER_ACCESS_END();
  q->issued++;
  q->nCopies = q->nValues = q->nJobs = 0;
  return res;
}

static bool overlaps(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen) { return a < b + blen && b < a + alen; }

/* Adds a job to the open batch: a copy of `bytes` (0: a pure ordering
 * point), or, with `value` set, an 8-byte store. A job whose destination
 * overlaps one already in the batch starts a new batch, so later writes to
 * the same bytes land later. */
static ccoResult_t job_add(cco_gda_proxy* px, gda_fifo* q, cco_gda_chunk* c, uint64_t dst, uint64_t src, uint64_t bytes,
                           const uint64_t* value) {
  bool clash = q->nCopies == GDA_BATCH || q->nValues == GDA_BATCH;
  for (int i = 0; !clash && bytes && i < q->nCopies; i++) clash = overlaps(dst, bytes, q->copyDst[i], q->copyBytes[i]);
  for (int i = 0; !clash && bytes && i < q->nValues; i++) clash = overlaps(dst, bytes, q->valueAddr[i], 8);
  if (clash) CCO_CHECK(batch_issue(px, q));
  if (value) {
    q->valueAddr[q->nValues] = dst;
    q->value[q->nValues++] = *value;
  } else if (bytes) {
    q->copyDst[q->nCopies] = dst;
    q->copySrc[q->nCopies] = src;
    q->copyBytes[q->nCopies++] = (size_t)bytes;
  }
  q->nJobs++;
  c->jobSeq = q->issued + 1;
  c->state = ST_COPYING;
  c->next = NULL;
  if (q->last) q->last->next = c;
  else q->first = c;
  q->last = c;
  return ccoSuccess;
}

static ccoResult_t job(cco_gda_proxy* px, gda_fifo* q, cco_gda_chunk* c, uint64_t dst, uint64_t src, uint64_t bytes) {
  return job_add(px, q, c, dst, src, bytes, NULL);
}

static uint64_t local_addr(cco_gda_proxy* px, uint64_t slotOff) {
  return (uint64_t)(uintptr_t)(px->slotBase + slotOff);
}

static uint64_t bounce(cco_gda_staged* s, uint64_t off) { return (uint64_t)(uintptr_t)(s->mem + off); }

static uint64_t inbox_slot(cco_gda_staged* s, int source, uint64_t msg) {
  return s->inboxOff + ((uint64_t)source * GDA_INBOX_SLOTS + (msg % GDA_INBOX_SLOTS)) * sizeof(gda_msg);
}

/* Offset `off` of the landing zone for `source` (in every rank's region). */
static uint64_t landing(cco_gda_staged* s, int source, uint64_t off) {
  return s->landOff + (uint64_t)source * s->landBytes + off;
}

/* ------------------------------------------------------------ initiator */

/* An op is complete once every message it needs exists (allSent) and
 * each has finished. */
static void tx_chunk_done(cco_gda_proxy* px, cco_gda_chunk* c) {
  cco_gda_op* op = c->op;
  chunk_free(px->staged, c);
  if (op->outstanding) op->outstanding--;
  if (!op->outstanding && op->allSent && !op->done) cco_gda_op_complete(px, op);
}

/* A new message of `slots` inbox slots to `peer` (ours to fill), or NULL
 * when its inbox has no room for it. */
static cco_gda_chunk* tx_open(cco_gda_proxy* px, cco_gda_op* op, int kind, uint32_t slots) {
  cco_gda_staged* s = px->staged;
  gda_tx* t = &s->tx[op->d.peer];
  if (t->msgSeq + slots - t->ackSeen > GDA_INBOX_SLOTS) return NULL;
  cco_gda_chunk* c = chunk_new(s);
  if (!c) return NULL;
  c->kind = kind;
  c->peer = op->d.peer;
  c->op = op;
  c->slots = slots;
  return c;
}

/* Whether an inline put of `bytes` to peer fits in its inbox's next slots
 * without wrapping around the inbox's end (message and data are one run). */
static bool inline_fits(cco_gda_staged* s, int peer, uint64_t bytes) {
  return bytes && bytes <= s->inlineMax &&
         s->tx[peer].msgSeq % GDA_INBOX_SLOTS + inline_slots(bytes) <= GDA_INBOX_SLOTS;
}

/* Message slot `msg` to peer in our outgoing copy of its inbox. */
static uint64_t msg_out(cco_gda_staged* s, int peer, uint64_t msg) {
  return s->msgOutOff + ((uint64_t)peer * GDA_INBOX_SLOTS + msg % GDA_INBOX_SLOTS) * sizeof(gda_msg);
}

static gda_msg* tx_commit(cco_gda_proxy* px, cco_gda_chunk* c) {
  cco_gda_staged* s = px->staged;
  gda_tx* t = &s->tx[c->peer];
  c->msg = t->msgSeq;
  t->msgSeq += c->slots;
  for (uint32_t i = 0; i < c->slots; i++) { /* an inline put's data slots have no chunk */
    t->meta[(c->msg + i) % GDA_INBOX_SLOTS] = i ? NULL : c;
    t->written[(c->msg + i) % GDA_INBOX_SLOTS] = false;
  }
  c->op->outstanding++;
  gda_msg* m = (gda_msg*)(s->mem + msg_out(s, c->peer, c->msg));
  memset(m, 0, sizeof(*m));
  m->stateId = c->op->ring->st->id;
  return m;
}

static void tx_fail(cco_gda_proxy* px, cco_gda_op* op, ccoResult_t res) {
  cco_gda_proxy_fail(px, res);
  op->issued = op->d.bytes;
  op->allSent = true;
  if (!op->outstanding) cco_gda_op_complete(px, op);
}

void cco_gda_staged_progress_op(cco_gda_proxy* px, cco_gda_op* op) {
  cco_gda_staged* s = px->staged;
  ccoGdaSlot* d = &op->d;
  if (op->done) return;
  if (d->op == ccoGdaOpCounter || d->op == ccoGdaOpFence) {
    if (op->ring->head == op->ticket) cco_gda_op_complete(px, op);
    return;
  }
  if (op->allSent) return; /* every message of the op exists: acks finish it */
  if (d->op == ccoGdaOpSignal && op->ring->head != op->ticket) return;
  if (!op->localWin && (d->op == ccoGdaOpPut || d->op == ccoGdaOpGet)) {
    op->localWin = cco_gda_find_win(px, d->local, d->bytes);
    if (!op->localWin) {
      tx_fail(px, op, cco_error(px->ctx->err, ccoInvalidUsage, CCO_SUBSYS_GDA,
                                "rank %d: GDA op %u to rank %d: local slot offset %#llx (+%llu bytes) "
                                "is not inside a window of this rank",
                                px->rank, d->op, d->peer, (unsigned long long)d->local,
                                (unsigned long long)d->bytes));
      return;
    }
  }
  bool valueLike = d->op == ccoGdaOpPutValue || d->op == ccoGdaOpAddValue;
  bool putLike = d->op == ccoGdaOpPut || valueLike || d->op == ccoGdaOpSignal;
  if ((d->op == ccoGdaOpPut && d->bytes == 0 && d->signalOp == ccoGdaSignalOpNone) ||
      (d->op == ccoGdaOpGet && d->bytes == 0)) {
    op->allSent = true;
    cco_gda_op_complete(px, op); /* nothing to move */
    return;
  }
  for (;;) {
    uint64_t left = d->op == ccoGdaOpPut || d->op == ccoGdaOpGet ? d->bytes - op->issued : 0;
    uint64_t len = left < s->chunk ? left : s->chunk;
    bool inl = d->op == ccoGdaOpPut && op->issued == 0 && inline_fits(s, d->peer, d->bytes);
    cco_gda_chunk* c = tx_open(px, op,
                               inl                         ? CH_PUT_INLINE
                               : d->op == ccoGdaOpPut      ? CH_PUT
                               : d->op == ccoGdaOpGet      ? CH_GET
                               : valueLike                 ? CH_PUT_VALUE
                                                              : CH_SIGNAL,
                               inl ? inline_slots(len) : 1u);
    if (!c) return;
    c->len = len;
    if (d->op == ccoGdaOpPut && len && !inl) { /* inline: the data goes into the slots after the message */
      gda_tx* t = &s->tx[d->peer];
      /* With notified writes the message goes in front of the data; the
       * landing offsets stay multiples of 64 (the notification counts in
       * messages). */
      c->withData = s->notify && len + sizeof(gda_msg) <= cco_net_max_msg(px->net);
      uint64_t room = c->withData ? inline_slots(len) * sizeof(gda_msg) : len; /* message + data, whole slots */
      c->zoneOff = fifo_alloc_bytes(&t->land, room);
      c->outOff = c->zoneOff == UINT64_MAX ? UINT64_MAX : fifo_alloc_bytes(&s->out, room);
      if (c->outOff == UINT64_MAX) {
        if (c->zoneOff != UINT64_MAX) fifo_free(&t->land, c->zoneOff);
        chunk_free(s, c);
        return;
      }
    } else if (d->op == ccoGdaOpGet) {
      c->zoneOff = fifo_alloc_bytes(&s->reply, len);
      if (c->zoneOff == UINT64_MAX) {
        chunk_free(s, c);
        return;
      }
      c->local = d->local + op->issued;
    }
    gda_msg* m = tx_commit(px, c);
    m->kind = inl                        ? MSG_PUT_INLINE
              : d->op == ccoGdaOpPut ? MSG_PUT
              : d->op == ccoGdaOpGet ? MSG_GET
              : d->op == ccoGdaOpPutValue ? MSG_PUT_VALUE
              : d->op == ccoGdaOpAddValue ? MSG_ADD_VALUE
                                              : MSG_SIGNAL;
    m->addr = d->remote + op->issued;
    m->bytes = valueLike ? d->bytes : len;
    m->zoneOff = c->withData ? c->zoneOff + sizeof(gda_msg) : c->zoneOff; /* where the data lands */
    m->value = d->local;
    bool last = len == left;
    if (putLike && last) {
      m->signalOp = d->signalOp;
      m->signal = d->signal;
      m->signalValue = d->signalValue;
    }
    if (d->op == ccoGdaOpPut && len) {
      op->localLeft++;
      uint64_t dst = inl ? bounce(s, msg_out(s, c->peer, c->msg + 1))
                         : bounce(s, s->outOff + c->outOff + (c->withData ? sizeof(gda_msg) : 0));
      ccoResult_t res = job(px, &s->txq, c, dst, local_addr(px, d->local + op->issued), len);
      if (res != ccoSuccess) cco_gda_proxy_fail(px, res);
    } else {
      c->state = ST_SEND_MSG;
      ready_push(s, c);
    }
    op->issued += len;
    if (last) {
      op->allSent = true;
      return;
    }
  }
}

/* Writes bytes at srcOff of our region to remoteOff of the peer's: a
 * notified write carrying `note` where the message announces itself, a
 * plain one otherwise. */
static ccoResult_t write_region(cco_gda_proxy* px, int peer, uint64_t srcOff, uint64_t bytes, uint64_t remoteOff,
                                bool notified, uint64_t note, void* context) {
  cco_gda_staged* s = px->staged;
  return notified ? cco_net_write_notify(px->net, peer, s->mem + srcOff, s->mr, bytes, s->rkeys[peer], remoteOff, note,
                                         context)
                  : cco_net_write(px->net, peer, s->mem + srcOff, s->mr, bytes, s->rkeys[peer], remoteOff, context);
}

/* Posts what is ready; stops at the first busy engine. */
static int post_ready(cco_gda_proxy* px) {
  cco_gda_staged* s = px->staged;
  int n = 0;
  while (s->readyFirst) {
    cco_gda_chunk* c = s->readyFirst;
    ccoResult_t res;
    if (c->state == ST_SEND_DATA) { /* withData: message and data, one notified write */
      res = write_region(px, c->peer, s->outOff + c->outOff, (c->withData ? sizeof(gda_msg) : 0) + c->len,
                         landing(s, px->rank, c->zoneOff), c->withData,
                         note_encode_landing(px->rank, c->msg, c->zoneOff), CCO_GDA_TAG(c, CCO_GDA_TAG_CHUNK_DATA));
    } else if (c->state == ST_SEND_MSG) {
      /* Messages ready back to back for the same peer sit in consecutive
       * slots at both ends: one write carries the whole run (up to the
       * ring's wrap), which is what makes small ops cheap. */
      uint32_t messages = 1;
      c->run = c->slots;
      for (cco_gda_chunk* x = c->next; x && x->state == ST_SEND_MSG && x->peer == c->peer && x->msg == c->msg + c->run &&
                                   x->msg % GDA_INBOX_SLOTS != 0;
           x = x->next)
        c->run += x->slots, messages++;
      c->runMessages = messages;
      res = write_region(px, c->peer, msg_out(s, c->peer, c->msg), c->run * sizeof(gda_msg),
                         inbox_slot(s, px->rank, c->msg), s->notify, note_encode(px->rank, c->msg, c->run),
                         CCO_GDA_TAG(c, CCO_GDA_TAG_CHUNK_MSG));
    } else { /* ST_SEND_REPLY */
      res = write_region(px, c->peer, s->outOff + c->outOff, c->len, s->replyOff + c->m.zoneOff, false, 0,
                         CCO_GDA_TAG(c, CCO_GDA_TAG_REPLY));
    }
    if (cco_gda_post_result(px, c->peer, res) == CCO_NET_BUSY) break;
    uint32_t taken = c->state == ST_SEND_MSG ? c->runMessages : 1;
    int next = c->state == ST_SEND_DATA ? ST_DATA : c->state == ST_SEND_MSG ? ST_MSG : ST_REPLY;
    for (uint32_t i = 0; i < taken; i++) { /* the run's chunks leave the ready list together */
      cco_gda_chunk* x = s->readyFirst;
      s->readyFirst = x->next;
      x->state = next;
    }
    if (!s->readyFirst) s->readyLast = NULL;
    n++;
    if (res != ccoSuccess) cco_gda_proxy_fail(px, res);
  }
  return n;
}

/* Adds delta to this rank's word of a per-rank array (counts, acks) in the
 * peer's bounce region; the result has been through cco_gda_post_result. */
static ccoResult_t add_to_peer_word(cco_gda_proxy* px, int peer, uint64_t delta, uint64_t arrayOff) {
  cco_gda_staged* s = px->staged;
  ccoResult_t res = cco_net_atomic_add(px->net, peer, delta, s->rkeys[peer],
                                       arrayOff + (uint64_t)px->rank * sizeof(uint64_t), CCO_GDA_TAG(NULL, CCO_GDA_TAG_COUNT));
  return cco_gda_post_result(px, peer, res);
}

/* Tells each target how many of our messages are written, in order. */
static int publish(cco_gda_proxy* px) {
  cco_gda_staged* s = px->staged;
  int n = 0;
  for (int p = 0; p < px->nRanks; p++) {
    gda_tx* t = &s->tx[p];
    uint64_t upto = t->published;
    while (upto != t->msgSeq && t->written[upto % GDA_INBOX_SLOTS]) upto++;
    if (upto == t->published) continue;
    ccoResult_t res = add_to_peer_word(px, p, upto - t->published, s->countOff);
    if (res == CCO_NET_BUSY) break;
    if (res != ccoSuccess) cco_gda_proxy_fail(px, res);
    for (uint64_t k = t->published; k != upto; k++) t->written[k % GDA_INBOX_SLOTS] = false;
    t->published = upto;
    n++;
  }
  return n;
}

/* Acks from targets: free landing space, finish put-like chunks, copy get
 * replies in. */
static int take_acks(cco_gda_proxy* px) {
  cco_gda_staged* s = px->staged;
  int n = 0;
  for (int p = 0; p < px->nRanks; p++) {
    gda_tx* t = &s->tx[p];
    uint64_t acked = __atomic_load_n((uint64_t*)(s->mem + s->ackOff) + p, __ATOMIC_ACQUIRE);
    if (acked != t->ackSeen) t->probeAt = 0; /* alive: restart its probe timer */
    for (; t->ackSeen != acked && t->ackSeen != t->msgSeq; t->ackSeen++, n++) {
      cco_gda_chunk* c = t->meta[t->ackSeen % GDA_INBOX_SLOTS];
      t->meta[t->ackSeen % GDA_INBOX_SLOTS] = NULL;
      if (!c) continue; /* a data slot of an inline put */
      if (c->kind == CH_PUT && c->len) fifo_free(&t->land, c->zoneOff);
      if (c->kind == CH_GET && c->len) {
        ccoResult_t res = job(px, &s->txq, c, local_addr(px, c->local), bounce(s, s->replyOff + c->zoneOff), c->len);
        if (res != ccoSuccess) cco_gda_proxy_fail(px, res);
      } else {
        tx_chunk_done(px, c);
      }
    }
  }
  return n;
}

/* --------------------------------------------------------------- target */

/* Message `msg` of `slots` inbox slots is finished: its slots may be acked. */
static void rx_done(cco_gda_proxy* px, int source, uint64_t msg, uint32_t slots) {
  gda_rx* r = &px->staged->rx[source];
  for (uint32_t i = 0; i < slots; i++) r->done[(msg + i) % GDA_INBOX_SLOTS] = true;
  while (r->donePrefix != r->taken && r->done[r->donePrefix % GDA_INBOX_SLOTS]) {
    r->done[r->donePrefix % GDA_INBOX_SLOTS] = false;
    r->donePrefix++;
  }
}

static bool rx_check(cco_gda_proxy* px, int source, const gda_msg* m, uint64_t bytes) {
  if (cco_gda_find_win(px, m->addr, bytes)) return true;
  cco_gda_proxy_fail(px, cco_error(px->ctx->err, ccoInvalidUsage, CCO_SUBSYS_GDA,
                               "rank %d: GDA message %u from rank %d names slot offset %#llx (+%llu "
                               "bytes), which is not inside a window of this rank",
                               px->rank, m->kind, source, (unsigned long long)m->addr,
                               (unsigned long long)bytes));
  return false;
}

/* Messages of `source` in our inbox: its count word, or the announced
 * prefix of its notified writes (a source uses one or the other; the unused
 * one stays 0, the probes add 0). */
static uint64_t rx_ready(cco_gda_staged* s, int source) {
  uint64_t count = __atomic_load_n((uint64_t*)(s->mem + s->countOff) + source, __ATOMIC_ACQUIRE);
  return count > s->rx[source].arrived ? count : s->rx[source].arrived;
}

void cco_gda_staged_on_notify(cco_gda_proxy* px, uint64_t data) {
  cco_gda_staged* s = px->staged;
  int source = (int)((data >> NOTE_RANK_SHIFT) & NOTE_RANK_MASK);
  bool inLanding = (data & NOTE_IN_LANDING) != 0;
  uint32_t run = inLanding ? 1u : (uint32_t)((data >> NOTE_RUN_SHIFT) & 0xff) + 1;
  if (!s || source >= px->nRanks) {
    cco_gda_proxy_fail(px, cco_error(px->ctx->err, ccoInternalError, CCO_SUBSYS_GDA,
                                     "rank %d: a notified write names rank %d, outside this communicator%s", px->rank,
                                     source, s ? "" : " (the direct path expects none)"));
    return;
  }
  gda_rx* r = &s->rx[source];
  uint64_t first = inLanding ? r->arrived + (uint8_t)((uint8_t)(data >> NOTE_RUN_SHIFT) - (uint8_t)r->arrived)
                             : r->arrived + (uint32_t)((uint32_t)data - (uint32_t)r->arrived);
  if (inLanding) {
    uint64_t off = (data & 0xffffffffu) * sizeof(gda_msg);
    if (off + sizeof(gda_msg) > s->landBytes) {
      cco_gda_proxy_fail(px, cco_error(px->ctx->err, ccoInternalError, CCO_SUBSYS_GDA,
                                       "rank %d: a message from rank %d at landing offset %llu, past its zone",
                                       px->rank, source, (unsigned long long)off));
      return;
    }
    r->landingMsg[first % GDA_INBOX_SLOTS] = off + 1;
  }
  for (uint32_t i = 0; i < run; i++) r->announced[(first + i) % GDA_INBOX_SLOTS] = true;
  while (r->announced[r->arrived % GDA_INBOX_SLOTS]) {
    r->announced[r->arrived % GDA_INBOX_SLOTS] = false;
    r->arrived++;
  }
}

/* Takes the source's new messages in order; returns how many. */
static int take_inbox(cco_gda_proxy* px, int source) {
  cco_gda_staged* s = px->staged;
  gda_rx* r = &s->rx[source];
  uint64_t count = rx_ready(s, source);
  int n = 0;
  while (r->taken != count) {
    uint64_t* inLanding = &r->landingMsg[r->taken % GDA_INBOX_SLOTS];
    const gda_msg* m =
        (const gda_msg*)(s->mem + (*inLanding ? landing(s, source, *inLanding - 1) : inbox_slot(s, source, r->taken)));
    cco_gda_chunk* c = chunk_new(s);
    if (!c) break;
    c->m = *m;
    c->peer = source;
    c->msg = r->taken;
    c->len = m->kind == MSG_SIGNAL ? 0 : m->bytes;
    c->signals = m->signalOp != ccoGdaSignalOpNone;
    bool inlineOk = true;
    if (m->kind == MSG_PUT_INLINE) { /* the message and its data slots came in one write */
      inlineOk = m->bytes && m->bytes <= GDA_INLINE_MAX &&
                 r->taken % GDA_INBOX_SLOTS + inline_slots(m->bytes) <= GDA_INBOX_SLOTS;
      if (inlineOk) c->slots = inline_slots(m->bytes);
      if (inlineOk && count - r->taken < c->slots) { /* cannot happen: announced together */
        chunk_free(s, c);
        break;
      }
    }
    CCO_TRACE(GDA, "rank %d: message %llu from rank %d: kind %u, %llu bytes at %#llx, signal %u op %u", px->rank,
              (unsigned long long)r->taken, source, m->kind, (unsigned long long)m->bytes,
              (unsigned long long)m->addr, m->signal, m->signalOp);
    ccoResult_t res = ccoSuccess;
    bool ok = m->kind >= MSG_PUT && m->kind <= MSG_PUT_INLINE && inlineOk &&
              (m->kind == MSG_SIGNAL || rx_check(px, source, m, c->len));
    if (ok && m->kind == MSG_GET) {
      c->kind = CH_RX_GET;
      c->outOff = c->len ? fifo_alloc_bytes(&s->out, c->len) : UINT64_MAX;
      if (c->len && c->outOff == UINT64_MAX) {
        chunk_free(s, c); /* no room: the next pass */
        break;
      }
      if (c->len) {
        res = job(px, &s->rxq, c, bounce(s, s->outOff + c->outOff), local_addr(px, m->addr), c->len);
      } else {
        c->state = ST_SEND_REPLY;
        ready_push(s, c);
      }
    } else if (ok && m->kind == MSG_ADD_VALUE) {
      /* A GPU atomic on the rx stream, behind the writes before it (the
       * open batch goes first); the message completes with the next batch,
       * which the stream runs after the add. */
      c->kind = CH_RX_PUT;
      cco_platform* p = px->ctx->platform;
      res = m->bytes == 8 && m->addr % 8 == 0
                ? batch_issue(px, &s->rxq)
                : cco_error(px->ctx->err, ccoInvalidUsage, CCO_SUBSYS_GDA,
                            "rank %d: GDA add from rank %d at slot offset %#llx: not 8 aligned bytes", px->rank,
                            source, (unsigned long long)m->addr);
      if (res == ccoSuccess) res = p->ops->add_value_async(p, s->rxq.stream, local_addr(px, m->addr), m->value);
      if (res == ccoSuccess) res = job(px, &s->rxq, c, 0, 0, 0);
    } else if (ok && m->kind == MSG_PUT_INLINE) {
      c->kind = CH_RX_PUT;
      res = job(px, &s->rxq, c, local_addr(px, m->addr), bounce(s, inbox_slot(s, source, r->taken + 1)), c->len);
    } else if (ok && m->kind == MSG_PUT_VALUE && m->bytes == 8) {
      c->kind = CH_RX_PUT; /* an aligned 8-byte value: a stream store, no copy */
      res = job_add(px, &s->rxq, c, local_addr(px, m->addr), 0, 8, &m->value);
    } else if (ok) {
      c->kind = CH_RX_PUT;
      uint64_t src = m->kind == MSG_PUT_VALUE
                         ? bounce(s, inbox_slot(s, source, r->taken) + offsetof(gda_msg, value))
                         : bounce(s, landing(s, source, m->zoneOff));
      res = job(px, &s->rxq, c, m->kind == MSG_SIGNAL ? 0 : local_addr(px, m->addr), src, c->len);
    } else {
      if (m->kind < MSG_PUT || m->kind > MSG_PUT_INLINE)
        cco_gda_proxy_fail(px, cco_error(px->ctx->err, ccoInvalidUsage, CCO_SUBSYS_GDA,
                                     "rank %d: unknown GDA message kind %u from rank %d", px->rank, m->kind,
                                     source));
      else if (!inlineOk)
        cco_gda_proxy_fail(px, cco_error(px->ctx->err, ccoInternalError, CCO_SUBSYS_GDA,
                                         "rank %d: inline GDA put of %llu bytes from rank %d at inbox slot %llu "
                                         "does not fit its inbox",
                                         px->rank, (unsigned long long)m->bytes, source,
                                         (unsigned long long)(r->taken % GDA_INBOX_SLOTS)));
      uint32_t slots = c->slots;
      chunk_free(s, c);
      *inLanding = 0;
      r->taken += slots;
      rx_done(px, source, r->taken - slots, slots);
      n++;
      continue;
    }
    if (res != ccoSuccess) cco_gda_proxy_fail(px, res);
    *inLanding = 0;
    r->taken += c->slots;
    n++;
  }
  return n;
}

/* Acknowledges each source's finished messages, in order, one add each. */
static int send_acks(cco_gda_proxy* px) {
  cco_gda_staged* s = px->staged;
  int n = 0;
  for (int p = 0; p < px->nRanks; p++) {
    gda_rx* r = &s->rx[p];
    if (r->donePrefix == r->ackPosted) continue;
    ccoResult_t res = add_to_peer_word(px, p, r->donePrefix - r->ackPosted, s->ackOff);
    if (res == CCO_NET_BUSY) break;
    if (res != ccoSuccess) cco_gda_proxy_fail(px, res);
    r->ackPosted = r->donePrefix;
    n++;
  }
  return n;
}

/* --------------------------------------------------------------- copies */

static void copy_done(cco_gda_proxy* px, cco_gda_chunk* c) {
  cco_gda_staged* s = px->staged;
  switch (c->kind) {
    case CH_PUT:          /* copied out: the source is free to reuse; send the data */
    case CH_PUT_INLINE: { /* copied behind the message: send both */
      cco_gda_op* op = c->op;
      if (--op->localLeft == 0 && op->issued >= op->d.bytes && op->d.counter && !op->counted) {
        __atomic_fetch_add(&op->ring->st->countersHost[op->d.counter - 1], 1, __ATOMIC_RELEASE);
        op->counted = true;
      }
      if (c->withData) /* the message goes in front of the data it announces */
        memcpy(s->mem + s->outOff + c->outOff, s->mem + msg_out(s, c->peer, c->msg), sizeof(gda_msg));
      c->state = c->kind == CH_PUT ? ST_SEND_DATA : ST_SEND_MSG;
      ready_push(s, c);
      break;
    }
    case CH_GET: /* the reply is in place */
      fifo_free(&s->reply, c->zoneOff);
      tx_chunk_done(px, c);
      break;
    case CH_RX_PUT: /* the data is in the window: the signal may follow */
      if (c->signals) {
        uint64_t v = c->m.signalOp == ccoGdaSignalOpInc ? 1u : c->m.signalValue;
        cco_gda_apply_signal(px, c->m.stateId, c->m.signal, v);
      }
      rx_done(px, c->peer, c->msg, c->slots);
      chunk_free(s, c);
      break;
    case CH_RX_GET:
      c->state = ST_SEND_REPLY;
      ready_push(s, c);
      break;
  }
}

static int poll_fifo(cco_gda_proxy* px, gda_fifo* q) {
  uint64_t done = __atomic_load_n(q->doneHost, __ATOMIC_ACQUIRE);
  int n = 0;
  while (q->first && (int64_t)(done - q->first->jobSeq) >= 0) {
    cco_gda_chunk* c = q->first;
    q->first = c->next;
    if (!q->first) q->last = NULL;
    copy_done(px, c);
    n++;
  }
  return n;
}

void cco_gda_staged_on_completion(cco_gda_proxy* px, int tag, void* obj, ccoResult_t res, int peer) {
  cco_gda_staged* s = px->staged;
  if (res != ccoSuccess) cco_gda_proxy_fail(px, res);
  cco_gda_chunk* c = obj;
  switch (tag) {
    case CCO_GDA_TAG_CHUNK_DATA: /* data is in the landing zone: now the message (unless it went along) */
      fifo_free(&s->out, c->outOff);
      c->outOff = UINT64_MAX;
      if (c->withData) {
        c->state = ST_WRITTEN;
        break;
      }
      c->state = ST_SEND_MSG;
      ready_push(s, c);
      break;
    case CCO_GDA_TAG_CHUNK_MSG: { /* the run of messages is in the peer's inbox */
      gda_tx* t = &s->tx[c->peer];
      for (uint32_t i = 0, run = c->run; i < run; i++) {
        cco_gda_chunk* x = t->meta[(c->msg + i) % GDA_INBOX_SLOTS];
        if (x) x->state = ST_WRITTEN; /* none on an inline put's data slots */
        t->written[(c->msg + i) % GDA_INBOX_SLOTS] = !s->notify; /* notified: nothing to publish */
      }
      break;
    }
    case CCO_GDA_TAG_REPLY:
      if (c->outOff != UINT64_MAX) fifo_free(&s->out, c->outOff);
      rx_done(px, c->peer, c->msg, 1);
      chunk_free(s, c);
      break;
    default: /* CCO_GDA_TAG_COUNT: nothing to do */
      break;
  }
}

/* A peer that dies after our writes to it completed, but before it acked
 * them, leaves nothing in flight here to fail: the ring would wait for its
 * acks forever. So a peer that owes acks and sends none is probed
 * (cco_gda_probe_if_silent) through our count word there. */
static void probe_silent(cco_gda_proxy* px) {
  cco_gda_staged* s = px->staged;
  uint64_t now = 0;
  for (int p = 0; p < px->nRanks; p++)
    cco_gda_probe_if_silent(px, p, s->tx[p].ackSeen != s->tx[p].msgSeq, &s->tx[p].probeAt, s->rkeys[p],
                        s->countOff + (uint64_t)px->rank * sizeof(uint64_t), &now);
}

bool cco_gda_staged_idle(cco_gda_proxy* px) {
  cco_gda_staged* s = px->staged;
  if (s->txq.first || s->rxq.first || s->readyFirst) return false;
  for (int p = 0; p < px->nRanks; p++) {
    if (s->tx[p].ackSeen != s->tx[p].msgSeq || s->rx[p].taken != rx_ready(s, p) ||
        s->rx[p].donePrefix != s->rx[p].ackPosted)
      return false;
  }
  return true;
}

int cco_gda_staged_poll(cco_gda_proxy* px) {
  cco_gda_staged* s = px->staged;
  int n = poll_fifo(px, &s->txq) + poll_fifo(px, &s->rxq);
  for (int p = 0; p < px->nRanks; p++) n += take_inbox(px, p);
  n += take_acks(px);
  /* Everything this pass and the ops before it queued goes out now. */
  ccoResult_t res = batch_issue(px, &s->txq);
  if (res == ccoSuccess) res = batch_issue(px, &s->rxq);
  if (res != ccoSuccess) cco_gda_proxy_fail(px, res);
  n += post_ready(px);
  n += publish(px);
  n += send_acks(px);
  probe_silent(px); /* not work: it must not keep the proxy from napping */
  return n;
}

/* ------------------------------------------------------------ lifecycle */

ccoResult_t cco_gda_staged_create(cco_gda_proxy* px) {
  const cco_transport_ctx* ctx = px->ctx;
  cco_platform* p = ctx->platform;
  int64_t land = cco_env_int(CCO_ENV_ID_CCO_GDA_STAGING_BYTES);
  if (land < 65536 || land > ((int64_t)1 << 30) || (land & 4095))
    return cco_error(ctx->err, ccoInvalidArgument, CCO_SUBSYS_GDA,
                     "CCO_GDA_STAGING_BYTES=%lld: must be a multiple of 4096 in 64 KiB..1 GiB", (long long)land);
  int64_t inlineMax = cco_env_int(CCO_ENV_ID_CCO_GDA_INLINE_BYTES);
  if (inlineMax < 0 || inlineMax > GDA_INLINE_MAX)
    return cco_error(ctx->err, ccoInvalidArgument, CCO_SUBSYS_GDA, "CCO_GDA_INLINE_BYTES=%lld: must be in 0..%u",
                     (long long)inlineMax, GDA_INLINE_MAX);
  cco_gda_staged* s = calloc(1, sizeof(*s));
  if (!s) return cco_error(ctx->err, ccoOutOfMemory, CCO_SUBSYS_GDA, "no memory");
  px->staged = s;
  s->inlineMax = (uint64_t)inlineMax;
  uint64_t n = (uint64_t)px->nRanks;
  s->landBytes = (uint64_t)land;
  s->outBytes = 2 * s->landBytes;
  /* Chunks of at most 1 MiB keep a put pipelined (copy out, send, copy
   * in overlap); a landing zone of several chunks keeps them in flight. */
  s->chunk = s->landBytes / 4 < (1u << 20) ? s->landBytes / 4 : (1u << 20);
  s->inboxOff = 0;
  s->countOff = n * GDA_INBOX_SLOTS * sizeof(gda_msg);
  s->ackOff = s->countOff + ((n * 8 + 63) & ~63ull);
  s->msgOutOff = s->ackOff + ((n * 8 + 63) & ~63ull);
  s->landOff = (s->msgOutOff + n * GDA_INBOX_SLOTS * sizeof(gda_msg) + 4095) & ~4095ull;
  s->outOff = s->landOff + n * s->landBytes;
  s->replyOff = s->outOff + s->outBytes;
  s->memBytes = s->replyOff + s->outBytes;
  uint32_t nChunks = (uint32_t)(4 * n * GDA_INBOX_SLOTS + 64);
  s->pool = calloc(nChunks, sizeof(cco_gda_chunk));
  s->tx = calloc(n, sizeof(gda_tx));
  s->rx = calloc(n, sizeof(gda_rx));
  s->rkeys = calloc(n, sizeof(cco_net_rkey));
  bool ok = s->pool && s->tx && s->rx && s->rkeys && fifo_init(&s->out, s->outBytes, 4 * nChunks) &&
            fifo_init(&s->reply, s->outBytes, 4 * nChunks);
  for (uint64_t i = 0; ok && i < n; i++) ok = fifo_init(&s->tx[i].land, s->landBytes, 2 * GDA_INBOX_SLOTS + 4);
  if (!ok) return cco_error(ctx->err, ccoOutOfMemory, CCO_SUBSYS_GDA, "no memory");
  for (uint32_t i = 0; i < nChunks; i++) chunk_free(s, &s->pool[i]);
  void* mem = NULL;
  CCO_CHECK(p->ops->hostmap_alloc(p, s->memBytes, &mem, &s->memDev));
  s->mem = mem;
  CCO_CHECK(p->ops->hostmap_alloc(p, 128, &s->wordsMem, &s->wordsDev));
  s->txq.doneHost = (uint64_t*)s->wordsMem;
  s->txq.doneDev = s->wordsDev;
  s->rxq.doneHost = (uint64_t*)((char*)s->wordsMem + 64);
  s->rxq.doneDev = s->wordsDev + 64;
  CCO_CHECK(p->ops->stream_create(p, &s->txq.stream));
  CCO_CHECK(p->ops->stream_create(p, &s->rxq.stream));
  cco_net_rkey mine;
  CCO_CHECK(cco_net_mr_reg(px->net, s->mem, s->memBytes, CCO_NET_ACCESS_LOCAL | CCO_NET_ACCESS_REMOTE, &s->mr, &mine));
  s->rkeys[px->rank] = mine;
  s->notify = cco_net_can_notify(px->net) && px->nRanks <= NOTE_MAX_RANKS;
  /* The proxy applies signal adds with a kernel of the platform's: loaded
   * here, since the proxy's first add may come while a kernel waits for it
   * (on the H200, a put+signal ring between two hosts replayed in a graph
   * hung in that load). */
  if (p->ops->add_value_prepare) CCO_CHECK(p->ops->add_value_prepare(p));
  CCO_INFO(GDA, "rank %d: staged GDA path: %.1f MiB pinned (landing %llu KiB per source, chunk %llu KiB, puts "
           "inline up to %llu bytes), messages announced by %s",
           px->rank, (double)s->memBytes / 1048576.0, (unsigned long long)(s->landBytes >> 10),
           (unsigned long long)(s->chunk >> 10), (unsigned long long)s->inlineMax,
           s->notify ? "their writes" : "count adds");
  /* Kernels that wait for GDA traffic here (the collectives across hosts,
   * GDA waits) need this thread's driver calls to go through while they
   * run; a lazy first launch elsewhere in the process blocks them until the
   * running kernels end, which these never do: a deadlock (seen on the
   * H200 with the hierarchical all-reduce). Said once per process. */
  static atomic_bool warned;
  if (p->ops->lazy_module_loading(p) && !atomic_exchange(&warned, true))
    CCO_WARN(GDA,
             "rank %d: CUDA loads kernels lazily (CUDA_MODULE_LOADING is LAZY or unset) and GDA takes the staged "
             "path: a kernel waiting for GDA (a collective across hosts, a GDA wait) deadlocks when another thread "
             "launches a kernel for the first time meanwhile; set CUDA_MODULE_LOADING=EAGER before CUDA starts "
             "(docs/gda.md)",
             px->rank);
  return ccoSuccess;
}

cco_net_rkey* cco_gda_staged_rkeys(cco_gda_proxy* px) { return px->staged ? px->staged->rkeys : NULL; }

void cco_gda_staged_destroy(cco_gda_proxy* px) {
  cco_gda_staged* s = px->staged;
  if (!s) return;
  cco_platform* p = px->ctx->platform;
  if (s->mr) cco_net_mr_dereg(px->net, s->mr);
  if (s->txq.stream) p->ops->stream_destroy(p, s->txq.stream);
  if (s->rxq.stream) p->ops->stream_destroy(p, s->rxq.stream);
  if (s->mem) p->ops->hostmap_free(p, s->mem);
  if (s->wordsMem) p->ops->hostmap_free(p, s->wordsMem);
  for (int i = 0; s->tx && i < px->nRanks; i++) free(s->tx[i].land.blocks);
  free(s->out.blocks);
  free(s->reply.blocks);
  free(s->tx);
  free(s->rx);
  free(s->rkeys);
  free(s->pool);
  free(s);
  px->staged = NULL;
}
