/*
 * Private: internals of the GDA device API (cco/cco_gda.h): tickets and
 * credits of a context's ring, posting descriptors, waits. Names start with
 * cco_impl_ and may change in any release; kernels call the public
 * functions instead.
 *
 * Included by cco/cco_gda.h once its types are defined; included on its
 * own, it brings in that header first.
 */
#include "cco/cco_gda.h"

#ifndef CCO_DEVICE_IMPL_GDA_IMPL_H_
#define CCO_DEVICE_IMPL_GDA_IMPL_H_

#include <stddef.h>
#include <stdint.h>

#include "cco/cco_device.h"
#include "cco/device/cco_gda_types.h"
#include "cco/device/impl/arch_impl.h"

CCO_DEVICE_INLINE int cco_impl_gda_aborted(const ccoGda* g) {
  return g->abortFlag && cco_impl_ld_relaxed_u32(g->abortFlag) != 0;
}

CCO_DEVICE_INLINE ccoDevStatus_t cco_impl_gda_check_peer(const ccoGda* g, int peer) {
  if (!g->dev) return ccoDevUnsupported;
  if (!g->ctx || peer < 0 || peer >= g->dev->worldSize) return ccoDevInvalid;
  return ((const uint8_t*)(uintptr_t)g->dev->peers)[peer] ? ccoDevSuccess : ccoDevNoPeer;
}

/* Takes a ticket and waits for its slot to be free (credits). */
CCO_DEVICE_INLINE ccoDevStatus_t cco_impl_gda_ticket(const ccoGda* g, uint64_t* ticket) {
  const ccoGdaContextDev* c = g->ctx;
  uint64_t depth = g->dev->queueDepth;
  /* Relaxed, GPU scope: the descriptor's sequence store publishes it (see
   * cco_impl_sdma_post). */
  uint64_t t = cco_impl_atomic_add_relaxed_scoped_u64((uint64_t*)(uintptr_t)c->tail, 1, 1);
  /* The head lives in host memory, a bus round trip away; producers share
   * a copy in device memory and read the host word only when that copy
   * says the ring is full. */
  uint64_t* cached = (uint64_t*)(uintptr_t)(c->tail + CCO_GDA_CACHED_HEAD_OFFSET);
  /* Leaving leaves the ticket unwritten, which stalls the ring: only an
   * aborted communicator (which never runs the ring again) may. */
  if (t - cco_impl_ld_acquire_u64(cached) >= depth &&
      cco_impl_wait_for_credit(cached, (const uint64_t*)(uintptr_t)c->head, t, depth, g->abortFlag))
    return ccoDevAborted;
  *ticket = t;
  return ccoDevSuccess;
}

/* One thread: writes and publishes one descriptor. */
CCO_DEVICE_INLINE ccoDevStatus_t cco_impl_gda_post(const ccoGda* g, int peer, uint32_t op, uint64_t remote,
                                                   uint64_t local, uint64_t bytes, ccoGdaSignalSpec sig,
                                                   uint32_t counter, int ring, uint64_t* ticketOut) {
  uint64_t t = 0;
  ccoDevStatus_t st = cco_impl_gda_ticket(g, &t);
  if (st != ccoDevSuccess) return st;
  ccoGdaSlot* s = &((ccoGdaSlot*)(uintptr_t)g->ctx->slots)[t & (g->dev->queueDepth - 1)];
  s->remote = remote;
  s->local = local;
  s->bytes = bytes;
  s->signalValue = sig.op == ccoGdaSignalOpInc ? 1u : sig.value;
  s->peer = peer;
  s->op = (uint16_t)op;
  s->signalOp = (uint8_t)sig.op;
  s->flags = ring ? (uint8_t)CCO_GDA_FLAG_RING : (uint8_t)0;
  s->signal = sig.index;
  s->counter = counter == CCO_GDA_NO_COUNTER ? 0u : counter + 1u;
  cco_impl_st_release_u64(&s->seq, t + 1);
  if (ticketOut) *ticketOut = t;
  return ccoDevSuccess;
}

CCO_DEVICE_INLINE ccoDevStatus_t cco_impl_gda_check_sig_counter(const ccoGda* g, ccoGdaSignalSpec sig,
                                                                uint32_t counter) {
  if (sig.op > ccoGdaSignalOpAdd) return ccoDevInvalid;
  if (sig.op != ccoGdaSignalOpNone && sig.index >= g->dev->signalCount) return ccoDevInvalid;
  if (counter != CCO_GDA_NO_COUNTER && counter >= g->dev->counterCount) return ccoDevInvalid;
  return ccoDevSuccess;
}

/* Checks and posts in the given thread mode and scope. Aggregate: rank 0
 * posts after a scope sync, every thread gets its status. */
CCO_DEVICE_INLINE ccoDevStatus_t cco_impl_gda_issue(const ccoGda* g, int peer, uint32_t op, uint64_t remote,
                                                    uint64_t local, uint64_t bytes, ccoGdaSignalSpec sig,
                                                    uint32_t counter, int valid, ccoCoop_t coop,
                                                    ccoGdaThreadMode_t tm) {
  int ring = g->mode == ccoGdaDoorbellImmediate;
  ccoDevStatus_t st = cco_impl_gda_check_peer(g, peer);
  if (st == ccoDevSuccess && !valid) st = ccoDevInvalid;
  if (st == ccoDevSuccess) st = cco_impl_gda_check_sig_counter(g, sig, counter);
  if (tm == ccoGdaThreadIndependent || coop == ccoCoopThread) {
    if (st == ccoDevSuccess) st = cco_impl_gda_post(g, peer, op, remote, local, bytes, sig, counter, ring, 0);
    return st;
  }
  uint32_t rank = ccoCoopRank(coop);
  ccoCoopSync(coop);
  if (rank == 0 && st == ccoDevSuccess)
    st = cco_impl_gda_post(g, peer, op, remote, local, bytes, sig, counter, ring, 0);
  return (ccoDevStatus_t)cco_impl_coop_broadcast3((int)coop, rank, (uint32_t)st);
}

CCO_DEVICE_INLINE ccoDevStatus_t cco_impl_gda_wait_head(const ccoGda* g, uint64_t ticket) {
  const uint64_t* head = (const uint64_t*)(uintptr_t)g->ctx->head;
  for (uint32_t spins = 0; (int64_t)(cco_impl_ld_acquire_u64(head) - (ticket + 1)) < 0; spins++) {
    if ((spins & 255) == 255 && cco_impl_gda_aborted(g)) return ccoDevAborted;
    cco_impl_spin_pause(spins);
  }
  return ccoDevSuccess;
}

/* Posts a fence (a doorbell: it publishes every post before it) and returns
 * its request. One thread. The fence is its slot's seq word alone
 * (CCO_GDA_SEQ_FENCE), stored relaxed: it has nothing of its own to
 * publish, and the posts before it published themselves. It waits for every
 * peer, so a flush toward one peer (checked by the caller) may wait for more
 * than it asked, never less. */
CCO_DEVICE_INLINE ccoDevStatus_t cco_impl_gda_fence(const ccoGda* g, int peer, ccoGdaRequest* req) {
  (void)peer;
  uint64_t t = 0;
  ccoDevStatus_t st = cco_impl_gda_ticket(g, &t);
  if (st == ccoDevSuccess) {
    ccoGdaSlot* s = &((ccoGdaSlot*)(uintptr_t)g->ctx->slots)[t & (g->dev->queueDepth - 1)];
    cco_impl_st_relaxed_scoped_u64(&s->seq, (t + 1) | CCO_GDA_SEQ_FENCE, 0);
  }
  req->ticket = t;
  req->context = g->context;
  req->valid = st == ccoDevSuccess;
  return st;
}

CCO_DEVICE_INLINE ccoDevStatus_t cco_impl_gda_wait_word(const ccoGda* g, const uint64_t* p, uint64_t expected,
                                                        uint64_t timeoutNs) {
  uint64_t start = timeoutNs ? cco_impl_clock_ns() : 0;
  for (uint32_t spins = 0; (int64_t)(cco_impl_ld_acquire_u64(p) - expected) < 0; spins++) {
    if ((spins & 255) == 255) {
      if (cco_impl_gda_aborted(g)) return ccoDevAborted;
      if (timeoutNs && cco_impl_clock_ns() - start > timeoutNs) return ccoDevTimeout;
    }
    cco_impl_spin_pause(spins);
  }
  return ccoDevSuccess;
}

/* The scope's rank 0 waits for the word p (NULL: a bad index) to reach
 * expected; every thread of the scope gets the status. */
CCO_DEVICE_INLINE ccoDevStatus_t cco_impl_gda_wait_scoped(const ccoGda* g, const uint64_t* p, uint64_t expected,
                                                          uint64_t timeoutNs, ccoCoop_t coop) {
  uint32_t rank = ccoCoopRank(coop);
  ccoDevStatus_t st = !g->dev ? ccoDevUnsupported : !p ? ccoDevInvalid : ccoDevSuccess;
  if (rank == 0 && st == ccoDevSuccess) st = cco_impl_gda_wait_word(g, p, expected, timeoutNs);
  return (ccoDevStatus_t)cco_impl_coop_broadcast3((int)coop, rank, (uint32_t)st);
}

/* Session on GDA barrier `slot` of all the device communicator holds (the
 * users' ones, then the world barriers' ones); out of range: no inbox. */
CCO_DEVICE_INLINE ccoGdaBarrierSession cco_impl_gda_barrier_init(const ccoDevComm* dc, const ccoGda* gda, uint32_t slot,
                                                                 ccoCoop_t coop) {
  ccoGdaBarrierSession s;
  ccoTeam rail = dc->teams[ccoTeamRail];
  s.gda = *gda;
  s.dc = dc;
  s.railSize = rail.nRanks;
  s.railRank = rail.rank;
  s.coop = coop;
  s.inbox = (uint64_t*)0;
  s.epochHome = (uint64_t*)0;
  s.epoch = 0;
  s.slotBase = 0;
  if (gda->dev && slot < gda->dev->barrierCount) {
    s.slotBase = gda->dev->signalCount + slot * (uint32_t)rail.nRanks;
    s.inbox = (uint64_t*)(uintptr_t)gda->dev->signals + s.slotBase;
    s.epochHome = (uint64_t*)(uintptr_t)gda->dev->barrierEpochs + slot;
    s.epoch = cco_impl_ld_acquire_u64(s.epochHome);
  }
  return s;
}

#endif /* CCO_DEVICE_IMPL_GDA_IMPL_H_ */
