/*
 * cco GDA device API: one-sided put / get / signal / counter to any peer,
 * issued from kernels, and the GDA and world barriers. Same conventions as
 * cco/cco_device.h (C11,
 * inline functions of their arguments, usable from CUDA C, NVPTX bitcode
 * and host-platform threads), which it includes.
 *
 *   __global__ void k(ccoDevComm dc, ccoWindow_t win, int peer, size_t n) {
 *     ccoGda gda = ccoGdaHandle(&dc, 0, ccoGdaDoorbellImmediate);
 *     ccoGdaPut(&gda, peer, win, 0, win, 0, n, ccoGdaSigInc(0), CCO_GDA_NO_COUNTER,
 *               ccoCoopBlock, ccoGdaThreadAggregate);
 *     ccoGdaFlush(&gda, ccoCoopBlock);                        // the put is at the peer
 *   }
 *   // on the peer:  ccoGdaWaitSignal(&gda, 0, 1, 0, ccoCoopBlock);  // data is here
 *
 * How it runs: a post writes a descriptor into the ring of (device
 * communicator, context) in host memory mapped for the GPU; this rank's
 * proxy thread executes it on the network engine (libfabric). See
 * docs/gda.md for the paths (direct, staged) and their costs.
 *
 * Peers are world ranks. ccoGdaTeamPeer(dc, i) turns an index of the GDA
 * team (the ranks the connection type gives endpoints, see ccoGdaTeamKind)
 * into one. A peer without an endpoint gives ccoDevNoPeer, at once.
 *
 * Ordering and completion:
 * - a put's signal is applied at the peer after the put's data is visible
 *   there; a standalone signal (ccoGdaSignal) after every operation posted
 *   before it on the context has completed;
 * - flush waits until every operation posted before it on the context is
 *   complete (a put's data and signal at the peer, a get's data here);
 *   ccoGdaFlushPeer(peer) is at least that strong for the peer (it waits
 *   for the whole context, in posting order);
 * - a counter counts local completion: a put's source may be reused, a
 *   get's data has arrived.
 *
 * Doorbell modes (per handle; every handle of a context shares its ring):
 * - Immediate: every post publishes itself (and every post before it).
 * - Deferred: a post is written but not published; the next Immediate post
 *   or flush on the context, by any thread, publishes it. Cheaper for
 *   bursts: the proxy takes the burst in one pass.
 * - CallerOrdered: like Deferred, and the caller promises every post
 *   happens before the flush of the same handle (same thread, or after a
 *   scope sync); that flush is the only publication point the caller may
 *   count on.
 * In every mode the proxy may take unpublished posts early when the ring
 * fills, so a burst longer than the queue never deadlocks; it never takes
 * them later than their publication point.
 *
 * Thread modes:
 * - Aggregate: the scope (thread, warp, block) issues one operation; its
 *   arguments must be the same in every thread. The scope syncs first, so
 *   every thread's writes to the source are ordered before the transfer.
 * - Independent: every thread of the scope issues its own operation with
 *   its own arguments (no sync, no broadcast; each gets its own status).
 *
 * Every waiting call returns ccoDevAborted once the host has set the
 * communicator's abort word (a failure anywhere, ccoCommAbort), so no wait
 * outlives a dead peer.
 */
#ifndef CCO_CCO_GDA_H_
#define CCO_CCO_GDA_H_

#include <stddef.h>
#include <stdint.h>

#include "cco/cco_device.h"
#include "cco/device/cco_gda_types.h"

#define CCO_GDA_NO_COUNTER 0xffffffffu

typedef enum {
  ccoGdaDoorbellImmediate = 0,
  ccoGdaDoorbellDeferred = 1,
  ccoGdaDoorbellCallerOrdered = 2,
} ccoGdaDoorbellMode_t;

typedef enum {
  ccoGdaThreadAggregate = 0,
  ccoGdaThreadIndependent = 1,
} ccoGdaThreadMode_t;

/* A remote signal bundled with a put (or posted alone). */
typedef struct {
  uint32_t op;    /* ccoGdaSignalOp_t */
  uint32_t index; /* signal slot at the peer */
  uint64_t value; /* amount for ccoGdaSignalOpAdd */
} ccoGdaSignalSpec;

CCO_DEVICE_INLINE ccoGdaSignalSpec ccoGdaSigNone(void) {
  ccoGdaSignalSpec s;
  s.op = ccoGdaSignalOpNone, s.index = 0, s.value = 0;
  return s;
}
CCO_DEVICE_INLINE ccoGdaSignalSpec ccoGdaSigInc(uint32_t index) {
  ccoGdaSignalSpec s;
  s.op = ccoGdaSignalOpInc, s.index = index, s.value = 1;
  return s;
}
CCO_DEVICE_INLINE ccoGdaSignalSpec ccoGdaSigAdd(uint32_t index, uint64_t value) {
  ccoGdaSignalSpec s;
  s.op = ccoGdaSignalOpAdd, s.index = index, s.value = value;
  return s;
}

/* A handle: one context of a device communicator, in one doorbell mode.
 * Cheap to build; build it once per kernel. */
typedef struct {
  const ccoGdaDev* dev; /* NULL: no GDA on this device communicator */
  const ccoGdaContextDev* ctx;
  const uint32_t* abortFlag;
  uint32_t mode; /* ccoGdaDoorbellMode_t */
  uint32_t context;
  int32_t rank;
  uint32_t pad;
} ccoGda;

/* A flushAsync request: complete once the context's head passes it. */
typedef struct {
  uint64_t ticket;
  uint32_t context;
  uint32_t valid;
} ccoGdaRequest;

/* A session on a GDA barrier (see "GDA barrier" below). */
typedef struct {
  ccoGda gda;
  const ccoDevComm* dc;
  uint64_t* inbox;      /* this rank's inbox of the barrier */
  uint64_t* epochHome;  /* where the epoch lives between sessions */
  uint64_t epoch;
  uint32_t slotBase;    /* signal index of the barrier's slot 0 */
  int32_t railSize;
  int32_t railRank;
  ccoCoop_t coop;
} ccoGdaBarrierSession;

#include "cco/device/impl/gda_impl.h"

CCO_DEVICE_INLINE ccoGda ccoGdaHandle(const ccoDevComm* dc, uint32_t context, ccoGdaDoorbellMode_t mode) {
  ccoGda g;
  g.dev = (const ccoGdaDev*)(uintptr_t)dc->gda;
  g.ctx = g.dev && context < g.dev->contextCount
              ? &((const ccoGdaContextDev*)(uintptr_t)g.dev->contexts)[context]
              : (const ccoGdaContextDev*)0;
  g.abortFlag = (const uint32_t*)(uintptr_t)dc->abortFlag;
  g.mode = (uint32_t)mode;
  g.context = context;
  g.rank = dc->rank;
  g.pad = 0;
  return g;
}

/* The team whose members have endpoints under the connection type
 * (ccoGdaConnectionCrossNode: ccoTeamCrossNode, ccoGdaConnectionFull:
 * ccoTeamWorld, ccoGdaConnectionRail: ccoTeamRail). */
CCO_DEVICE_INLINE ccoTeamKind_t ccoGdaTeamKind(const ccoDevComm* dc) {
  return dc->gdaConnectionType == ccoGdaConnectionFull   ? ccoTeamWorld
         : dc->gdaConnectionType == ccoGdaConnectionRail ? ccoTeamRail
                                                         : ccoTeamCrossNode;
}

/* World rank of GDA-team member i (-1 when out of range). */
CCO_DEVICE_INLINE int ccoGdaTeamPeer(const ccoDevComm* dc, int teamIndex) {
  return ccoDevTeamRankToWorld(dc, ccoGdaTeamKind(dc), teamIndex);
}

/* Whether the peer has an endpoint (ops to it can be posted). */
CCO_DEVICE_INLINE int ccoGdaHasPeer(const ccoGda* g, int peer) {
  if (!g->dev || peer < 0 || peer >= g->dev->worldSize) return 0;
  return ((const uint8_t*)(uintptr_t)g->dev->peers)[peer] != 0;
}

/* ------------------------------------------------------------ operations */

/* Copies bytes from this rank's copy of srcWin at srcOff to the peer's copy
 * of dstWin at dstOff; then applies `sig` at the peer (ccoGdaSigNone for
 * none); counts local completion in `counter` (CCO_GDA_NO_COUNTER: none). */
CCO_DEVICE_INLINE ccoDevStatus_t ccoGdaPut(const ccoGda* g, int peer, ccoWindow_t dstWin, size_t dstOff,
                                           ccoWindow_t srcWin, size_t srcOff, size_t bytes, ccoGdaSignalSpec sig,
                                           uint32_t counter, ccoCoop_t coop, ccoGdaThreadMode_t tm) {
  int valid = cco_impl_window_has_range(dstWin, dstOff, bytes) && cco_impl_window_has_range(srcWin, srcOff, bytes);
  return cco_impl_gda_issue(g, peer, ccoGdaOpPut, dstWin->offset + dstOff, srcWin->offset + srcOff,
                            (uint64_t)bytes, sig, counter, valid, coop, tm);
}

/* Writes the low `size` bytes (1, 2, 4 or 8) of value, carried in the
 * descriptor itself, to the peer's copy of dstWin at dstOff (aligned to
 * size); then `sig`. */
CCO_DEVICE_INLINE ccoDevStatus_t ccoGdaPutValue(const ccoGda* g, int peer, ccoWindow_t dstWin, size_t dstOff,
                                                uint64_t value, uint32_t size, ccoGdaSignalSpec sig, uint32_t counter,
                                                ccoCoop_t coop, ccoGdaThreadMode_t tm) {
  int valid = (size == 1 || size == 2 || size == 4 || size == 8) && (dstOff % size) == 0 &&
              cco_impl_window_has_range(dstWin, dstOff, size);
  return cco_impl_gda_issue(g, peer, ccoGdaOpPutValue, dstWin->offset + dstOff, value, size, sig, counter, valid,
                            coop, tm);
}

/* Adds value atomically to the uint64_t at the peer's copy of dstWin at
 * dstOff (8-byte aligned); then `sig` (NVSHMEM's signal_op ADD on a word
 * of a window, or atomic_add). Several ranks may add to one word. Not
 * ordered after this context's earlier puts: flush first when the word
 * announces them. Who does the add: on the staged path the peer's proxy,
 * with a GPU atomic (atomic also with the peer's own GPU atomics on the
 * word); on the direct path the network engine, which is atomic with the
 * other network adds but, on RDMA NICs, not with the peer's own atomics on
 * that word (the rule of RDMA atomics). */
CCO_DEVICE_INLINE ccoDevStatus_t ccoGdaAtomicAdd(const ccoGda* g, int peer, ccoWindow_t dstWin, size_t dstOff,
                                                 uint64_t value, ccoGdaSignalSpec sig, uint32_t counter,
                                                 ccoCoop_t coop, ccoGdaThreadMode_t tm) {
  int valid = (dstOff % 8) == 0 && cco_impl_window_has_range(dstWin, dstOff, 8);
  return cco_impl_gda_issue(g, peer, ccoGdaOpAddValue, dstWin->offset + dstOff, value, 8, sig, counter, valid, coop,
                            tm);
}

/* Copies bytes from the peer's copy of srcWin at srcOff to this rank's copy
 * of dstWin at dstOff. Done (and counted) once the data is here. */
CCO_DEVICE_INLINE ccoDevStatus_t ccoGdaGet(const ccoGda* g, int peer, ccoWindow_t dstWin, size_t dstOff,
                                           ccoWindow_t srcWin, size_t srcOff, size_t bytes, uint32_t counter,
                                           ccoCoop_t coop, ccoGdaThreadMode_t tm) {
  int valid = cco_impl_window_has_range(dstWin, dstOff, bytes) && cco_impl_window_has_range(srcWin, srcOff, bytes);
  return cco_impl_gda_issue(g, peer, ccoGdaOpGet, srcWin->offset + srcOff, dstWin->offset + dstOff,
                            (uint64_t)bytes, ccoGdaSigNone(), counter, valid, coop, tm);
}

/* Applies sig at the peer once every operation posted before it on this
 * context is complete (aggregated signalling). */
CCO_DEVICE_INLINE ccoDevStatus_t ccoGdaSignal(const ccoGda* g, int peer, ccoGdaSignalSpec sig, ccoCoop_t coop) {
  return cco_impl_gda_issue(g, peer, ccoGdaOpSignal, 0, 0, 0, sig, CCO_GDA_NO_COUNTER,
                            sig.op != ccoGdaSignalOpNone, coop, ccoGdaThreadAggregate);
}

/* Bumps the local counter once every operation posted before it on this
 * context is complete. */
CCO_DEVICE_INLINE ccoDevStatus_t ccoGdaCounter(const ccoGda* g, int peer, uint32_t counter, ccoCoop_t coop) {
  return cco_impl_gda_issue(g, peer, ccoGdaOpCounter, 0, 0, 0, ccoGdaSigNone(), counter,
                            counter != CCO_GDA_NO_COUNTER, coop, ccoGdaThreadAggregate);
}

/* ------------------------------------------------------------ completion */

/* Starts a flush toward peer (-1: every peer); ccoGdaWait completes it. */
CCO_DEVICE_INLINE ccoDevStatus_t ccoGdaFlushAsync(const ccoGda* g, int peer, ccoGdaRequest* req, ccoCoop_t coop) {
  uint32_t rank = ccoCoopRank(coop);
  ccoDevStatus_t st = !g->dev ? ccoDevUnsupported : !g->ctx ? ccoDevInvalid : ccoDevSuccess;
  if (st == ccoDevSuccess && peer != -1) st = cco_impl_gda_check_peer(g, peer);
  /* Only rank 0 fills it in; the others hold a complete, invalid one. */
  req->ticket = 0, req->context = g->context, req->valid = 0;
  ccoCoopSync(coop);
  if (rank == 0 && st == ccoDevSuccess) st = cco_impl_gda_fence(g, peer, req);
  return (ccoDevStatus_t)cco_impl_coop_broadcast3((int)coop, rank, (uint32_t)st);
}

/* Waits for a request of ccoGdaFlushAsync (rank 0 of the scope holds it). */
CCO_DEVICE_INLINE ccoDevStatus_t ccoGdaWait(const ccoGda* g, const ccoGdaRequest* req, ccoCoop_t coop) {
  uint32_t rank = ccoCoopRank(coop);
  ccoDevStatus_t st = ccoDevSuccess;
  if (rank == 0) {
    if (!g->dev) st = ccoDevUnsupported;
    else if (!g->ctx || !req->valid || req->context != g->context) st = ccoDevInvalid;
    else st = cco_impl_gda_wait_head(g, req->ticket);
  }
  return (ccoDevStatus_t)cco_impl_coop_broadcast3((int)coop, rank, (uint32_t)st);
}

/* Every operation posted on this context before the call is complete. */
CCO_DEVICE_INLINE ccoDevStatus_t ccoGdaFlush(const ccoGda* g, ccoCoop_t coop) {
  ccoGdaRequest req;
  ccoDevStatus_t st = ccoGdaFlushAsync(g, -1, &req, coop);
  return st == ccoDevSuccess ? ccoGdaWait(g, &req, coop) : st;
}

/* Every operation posted to peer on this context before the call is
 * complete (in practice: every operation of the context). */
CCO_DEVICE_INLINE ccoDevStatus_t ccoGdaFlushPeer(const ccoGda* g, int peer, ccoCoop_t coop) {
  ccoGdaRequest req;
  ccoDevStatus_t st = ccoGdaFlushAsync(g, peer, &req, coop);
  return st == ccoDevSuccess ? ccoGdaWait(g, &req, coop) : st;
}

/* ---------------------------------------------------- signals, counters */

/* This rank's signal slot `index` (host memory mapped for the device). */
CCO_DEVICE_INLINE uint64_t* ccoGdaSignalPtr(const ccoGda* g, uint32_t index) {
  if (!g->dev || index >= g->dev->signalCount) return (uint64_t*)0;
  return (uint64_t*)(uintptr_t)g->dev->signals + index;
}

CCO_DEVICE_INLINE uint64_t ccoGdaReadSignal(const ccoGda* g, uint32_t index) {
  const uint64_t* p = ccoGdaSignalPtr(g, index);
  return p ? cco_impl_ld_acquire_u64(p) : 0;
}

/* Sets the slot back to 0. Only safe while no signal to it is in flight. */
CCO_DEVICE_INLINE void ccoGdaResetSignal(const ccoGda* g, uint32_t index) {
  uint64_t* p = ccoGdaSignalPtr(g, index);
  if (p) cco_impl_st_release_u64(p, 0);
}

/* Waits until signal slot `index` reaches expected (wrapping compare), the
 * abort word, or timeoutNs (0: none). The data of every put whose signal
 * counted is visible once this returns. */
CCO_DEVICE_INLINE ccoDevStatus_t ccoGdaWaitSignal(const ccoGda* g, uint32_t index, uint64_t expected,
                                                  uint64_t timeoutNs, ccoCoop_t coop) {
  return cco_impl_gda_wait_scoped(g, ccoGdaSignalPtr(g, index), expected, timeoutNs, coop);
}

CCO_DEVICE_INLINE uint64_t* ccoGdaCounterPtr(const ccoGda* g, uint32_t index) {
  if (!g->dev || index >= g->dev->counterCount) return (uint64_t*)0;
  return (uint64_t*)(uintptr_t)g->dev->counters + index;
}

CCO_DEVICE_INLINE uint64_t ccoGdaReadCounter(const ccoGda* g, uint32_t index) {
  const uint64_t* p = ccoGdaCounterPtr(g, index);
  return p ? cco_impl_ld_acquire_u64(p) : 0;
}

CCO_DEVICE_INLINE void ccoGdaResetCounter(const ccoGda* g, uint32_t index) {
  uint64_t* p = ccoGdaCounterPtr(g, index);
  if (p) cco_impl_st_release_u64(p, 0);
}

CCO_DEVICE_INLINE ccoDevStatus_t ccoGdaWaitCounter(const ccoGda* g, uint32_t index, uint64_t expected,
                                                   uint64_t timeoutNs, ccoCoop_t coop) {
  return cco_impl_gda_wait_scoped(g, ccoGdaCounterPtr(g, index), expected, timeoutNs, coop);
}

/* ------------------------------------------------------------ GDA barrier */

/*
 * GDA barrier b over the rail team (one rank per host): each member keeps
 * an inbox of railSize signal slots; to arrive, a rank signals (+1) its
 * slot in every other member's inbox, each signal ordered after everything
 * it posted before on the context; to wait, it waits for every slot of its
 * inbox to reach the session's epoch. Like the LSA barrier, epochs only
 * grow, so sessions follow each other without a reset. Warp or block
 * scope; the handle must be Immediate. Indexes are 0..railGdaBarrierCount-1;
 * the GDA barriers of the world barriers (barrierCount) are not reachable
 * from here.
 */

/* Barrier `index` of the railGdaBarrierCount users' ones. */
CCO_DEVICE_INLINE ccoGdaBarrierSession ccoGdaBarrierSessionInit(const ccoDevComm* dc, const ccoGda* gda,
                                                                uint32_t index, ccoCoop_t coop) {
  uint32_t users = gda->dev && gda->dev->barrierCount > dc->barrierCount ? gda->dev->barrierCount - dc->barrierCount
                                                                         : 0;
  return cco_impl_gda_barrier_init(dc, gda, index < users ? index : 0xffffffffu, coop);
}

/* Arrive and wait. Every thread of the scope returns the same status. */
CCO_DEVICE_INLINE ccoDevStatus_t ccoGdaBarrierSyncTimeout(ccoGdaBarrierSession* s, uint64_t timeoutNs) {
  uint32_t rank = ccoCoopRank(s->coop);
  ccoDevStatus_t st = !s->gda.dev ? ccoDevUnsupported
                      : !s->inbox || s->gda.mode != ccoGdaDoorbellImmediate || s->coop == ccoCoopThread
                          ? ccoDevInvalid
                          : ccoDevSuccess;
  ccoCoopSync(s->coop);
  if (rank == 0 && st == ccoDevSuccess) {
    uint64_t next = s->epoch + 1;
    for (int i = 0; i < s->railSize && st == ccoDevSuccess; i++) {
      if (i == s->railRank) continue;
      int peer = ccoDevTeamRankToWorld(s->dc, ccoTeamRail, i);
      st = cco_impl_gda_check_peer(&s->gda, peer);
      ccoGdaSignalSpec sig;
      sig.op = ccoGdaSignalOpInc, sig.index = s->slotBase + (uint32_t)s->railRank, sig.value = 1;
      if (st == ccoDevSuccess)
        st = cco_impl_gda_post(&s->gda, peer, ccoGdaOpSignal, 0, 0, 0, sig, CCO_GDA_NO_COUNTER, 1, 0);
    }
    for (int i = 0; i < s->railSize && st == ccoDevSuccess; i++)
      if (i != s->railRank) st = cco_impl_gda_wait_word(&s->gda, &s->inbox[i], next, timeoutNs);
    if (st == ccoDevSuccess) {
      s->epoch = next;
      cco_impl_st_release_u64(s->epochHome, next);
    }
  }
  return (ccoDevStatus_t)cco_impl_coop_broadcast3((int)s->coop, rank, (uint32_t)st);
}

CCO_DEVICE_INLINE ccoDevStatus_t ccoGdaBarrierSync(ccoGdaBarrierSession* s) {
  return ccoGdaBarrierSyncTimeout(s, 0);
}

/* ---------------------------------------------------------- world barrier */

/*
 * World barrier w (0..barrierCount-1 of the requirements) over every rank
 * of the communicator, built from the two barriers it reserves:
 *
 *   1. its LSA barrier: every rank of this host has arrived;
 *   2. its GDA barrier over the rail team: the rail peers on the other
 *      hosts have passed step 1 there;
 *   3. its LSA barrier again: what the LSA peers learned in step 2 reaches
 *      this rank.
 *
 * Step 3 is what makes it whole when hosts have different numbers of ranks
 * (a rank whose rail has no peer on some host learns about that host from
 * LSA rank 0, whose rail spans every host). A rank whose rail misses a
 * host flushes its context before step 1, since no rail signal of its own
 * reaches that host to order its puts. On one host it is step 1 alone.
 *
 * Once a rank's sync returns, it sees everything each scope stored into LSA
 * windows before arriving, and everything posted on the handle's context to
 * ranks on other hosts before arriving (the rail signals are ordered after
 * the context's earlier operations). GDA operations to ranks of the same
 * host (FULL connections) are not ordered by it: flush them first.
 *
 * On several hosts: warp or block scope and an Immediate handle (the GDA
 * barrier's rules), else ccoDevInvalid; no GDA (`gda` NULL or a device
 * communicator without it), ccoDevUnsupported. Both come at once, before
 * any step, on every rank alike. On one host any scope, and `gda` may be
 * NULL.
 */
typedef struct {
  ccoLsaBarrierSession lsa;
  ccoGdaBarrierSession rail;
  int32_t nNodes;
  int32_t valid; /* index in range */
} ccoBarrierSession;

CCO_DEVICE_INLINE ccoBarrierSession ccoBarrierSessionInit(const ccoDevComm* dc, const ccoGda* gda, uint32_t index,
                                                          ccoCoop_t coop) {
  ccoBarrierSession s;
  s.valid = index < dc->barrierCount;
  s.nNodes = dc->nNodes;
  /* The world barriers are the last barrierCount of each kind. */
  uint32_t lsaIndex = s.valid ? dc->lsaBarrierCount - dc->barrierCount + index : 0;
  s.lsa = ccoLsaBarrierSessionInit(dc, lsaIndex, coop);
  ccoGda none = ccoGdaHandle(dc, 0, ccoGdaDoorbellImmediate);
  none.dev = (const ccoGdaDev*)0; /* no GDA: the sync reports ccoDevUnsupported */
  none.ctx = (const ccoGdaContextDev*)0;
  const ccoGda* g = gda ? gda : &none;
  uint32_t railSlot = s.valid && g->dev ? g->dev->barrierCount - dc->barrierCount + index : 0xffffffffu;
  s.rail = cco_impl_gda_barrier_init(dc, g, railSlot, coop);
  return s;
}

/* Every thread of the scope returns the same status; on a failure the
 * session is spent (open a new one after ccoBarrierSessionEnd). */
CCO_DEVICE_INLINE ccoDevStatus_t ccoBarrierSyncTimeout(ccoBarrierSession* s, uint64_t timeoutNs) {
  if (!s->valid) return ccoDevInvalid;
  if (s->nNodes > 1) {
    if (!s->rail.gda.dev) return ccoDevUnsupported;
    if (s->rail.gda.mode != ccoGdaDoorbellImmediate || s->lsa.coop == ccoCoopThread) return ccoDevInvalid;
  }
  ccoDevStatus_t st = ccoDevSuccess;
  /* A rank whose rail misses a host (its host has more ranks than that
   * one) sends no rail signal there that would carry its puts: it completes
   * them before it arrives, and its LSA peers' rail signals carry them. */
  if (s->nNodes > 1 && s->rail.railSize < s->nNodes && s->rail.gda.dev) st = ccoGdaFlush(&s->rail.gda, s->lsa.coop);
  if (st != ccoDevSuccess) return st;
  st = ccoLsaBarrierSyncTimeout(&s->lsa, timeoutNs);
  if (st != ccoDevSuccess || s->nNodes <= 1) return st;
  if (s->rail.railSize > 1) {
    st = ccoGdaBarrierSyncTimeout(&s->rail, timeoutNs);
    if (st != ccoDevSuccess) return st;
  }
  return ccoLsaBarrierSyncTimeout(&s->lsa, timeoutNs);
}

CCO_DEVICE_INLINE ccoDevStatus_t ccoBarrierSync(ccoBarrierSession* s) { return ccoBarrierSyncTimeout(s, 0); }

/* Stores the LSA epoch back (the GDA part stores its own at each sync). */
CCO_DEVICE_INLINE void ccoBarrierSessionEnd(ccoBarrierSession* s) { ccoLsaBarrierSessionEnd(&s->lsa); }

#endif /* CCO_CCO_GDA_H_ */
