/*
 * cco SDMA device API: copy-engine puts and gets to LSA peers, issued from
 * kernels. Same conventions as cco/cco_device.h (C11, inline functions of
 * their arguments, usable from CUDA C, NVPTX bitcode and host-platform
 * threads), which it includes.
 *
 *   __global__ void k(ccoDevComm dc, ccoWindow_t win, int peer, size_t n) {
 *     ccoSdmaPut(&dc, peer, win, 0, win, 0, n, 0, ccoSdmaSignalRemote, ccoCoopBlock);
 *   }
 *   // on the peer: ccoSdmaWaitSignal(&dc, srcLsaRank, 0, 1, 0, ccoCoopBlock);  // data is here
 *
 * A kernel posts a descriptor into the ring of (peer, queue); the engine
 * thread of this rank issues it on the copy engines (cuMemcpyAsync on one
 * stream per ring), then, in stream order, bumps the peer's signal slot (if
 * asked) and the ring's completion count. Nothing is copied by the SMs.
 *
 * Peers are LSA ranks. Windows and offsets name both ends; the destination
 * of a put (the source of a get) is the peer's copy of the window. Within a
 * ring, operations complete in posting order. A scope (warp, block) posts
 * one operation together: its rank 0 posts after the scope has synced, so
 * the whole scope's writes to the source are ordered before the copy.
 *
 * Signals: rank r's signal slot (srcLsa, queue) counts the puts with
 * ccoSdmaSignalRemote (and ccoSdmaCommit calls) that srcLsa posted on that
 * queue to r, each counted once its data is visible at r. docs/sdma.md
 * describes the engine and its costs.
 */
#ifndef CCO_CCO_SDMA_H_
#define CCO_CCO_SDMA_H_

#include <stddef.h>
#include <stdint.h>

#include "cco/cco_device.h"
#include "cco/device/cco_sdma_types.h"

typedef enum {
  ccoSdmaSignalNone = 0,   /* no remote signal: aggregate with ccoSdmaCommit */
  ccoSdmaSignalRemote = 1, /* bump the peer's signal slot after this copy */
} ccoSdmaSignal_t;

#include "cco/device/impl/sdma_impl.h"

/* Copies bytes from this rank's copy of srcWin at srcOff to LSA peer's copy
 * of dstWin at dstOff. A range outside either window is ccoDevInvalid
 * (nothing posted). */
CCO_DEVICE_INLINE ccoDevStatus_t ccoSdmaPut(const ccoDevComm* dc, int peerLsaRank, ccoWindow_t dstWin, size_t dstOff,
                                            ccoWindow_t srcWin, size_t srcOff, size_t bytes, uint32_t queue,
                                            ccoSdmaSignal_t signal, ccoCoop_t coop) {
  if (!cco_impl_window_has_range(dstWin, dstOff, bytes) || !cco_impl_window_has_range(srcWin, srcOff, bytes))
    return ccoDevInvalid;
  uint64_t dst = (uint64_t)(uintptr_t)ccoGetLsaPeerPtr(dstWin, peerLsaRank, dstOff);
  uint64_t src = (uint64_t)(uintptr_t)ccoGetLocalPtr(srcWin, srcOff);
  return cco_impl_sdma_post_coop(dc, peerLsaRank, queue, ccoSdmaOpPut,
                                 signal == ccoSdmaSignalRemote ? CCO_SDMA_FLAG_REMOTE_SIGNAL : 0u, dst, src,
                                 (uint64_t)bytes, coop);
}

/* Copies bytes from LSA peer's copy of srcWin at srcOff to this rank's copy
 * of dstWin at dstOff. Completion shows in ccoSdmaQuiet. A range outside
 * either window is ccoDevInvalid. */
CCO_DEVICE_INLINE ccoDevStatus_t ccoSdmaGet(const ccoDevComm* dc, int peerLsaRank, ccoWindow_t dstWin, size_t dstOff,
                                            ccoWindow_t srcWin, size_t srcOff, size_t bytes, uint32_t queue,
                                            ccoCoop_t coop) {
  if (!cco_impl_window_has_range(dstWin, dstOff, bytes) || !cco_impl_window_has_range(srcWin, srcOff, bytes))
    return ccoDevInvalid;
  uint64_t dst = (uint64_t)(uintptr_t)ccoGetLocalPtr(dstWin, dstOff);
  uint64_t src = (uint64_t)(uintptr_t)ccoGetLsaPeerPtr(srcWin, peerLsaRank, srcOff);
  return cco_impl_sdma_post_coop(dc, peerLsaRank, queue, ccoSdmaOpGet, 0u, dst, src, (uint64_t)bytes, coop);
}

/* Aggregated signalling: one bump of the peer's signal slot once every
 * operation posted before it on this ring has landed. */
CCO_DEVICE_INLINE ccoDevStatus_t ccoSdmaCommit(const ccoDevComm* dc, int peerLsaRank, uint32_t queue, ccoCoop_t coop) {
  return cco_impl_sdma_post_coop(dc, peerLsaRank, queue, ccoSdmaOpSignal, CCO_SDMA_FLAG_REMOTE_SIGNAL, 0, 0, 0, coop);
}

/* This rank's signal slot for puts from srcLsaRank on queue. */
CCO_DEVICE_INLINE uint64_t* ccoSdmaSignalPtr(const ccoDevComm* dc, int srcLsaRank, uint32_t queue) {
  const ccoSdmaDev* sd = cco_impl_sdma_state(dc);
  if (cco_impl_sdma_check(dc, srcLsaRank, queue) != ccoDevSuccess) return NULL;
  uint64_t mine = dc->resourceBase + (uint64_t)dc->lsaRank * dc->slotSize + sd->signalsOffset;
  return (uint64_t*)(uintptr_t)(mine + ((uint64_t)srcLsaRank * sd->queueCount + queue) * 8u);
}

/* 0 when SDMA is off or the source/queue is out of range. */
CCO_DEVICE_INLINE uint64_t ccoSdmaReadSignal(const ccoDevComm* dc, int srcLsaRank, uint32_t queue) {
  const uint64_t* sig = ccoSdmaSignalPtr(dc, srcLsaRank, queue);
  return sig ? cco_impl_ld_acquire_u64(sig) : 0;
}

/* Waits until the signal slot (srcLsaRank, queue) reaches `expected`, the
 * abort word is set, or timeoutNs passes (0: none). */
CCO_DEVICE_INLINE ccoDevStatus_t ccoSdmaWaitSignal(const ccoDevComm* dc, int srcLsaRank, uint32_t queue,
                                                   uint64_t expected, uint64_t timeoutNs, ccoCoop_t coop) {
  uint32_t rank = ccoCoopRank(coop);
  ccoDevStatus_t st = cco_impl_sdma_check(dc, srcLsaRank, queue);
  if (rank == 0 && st == ccoDevSuccess) {
    uint64_t* sig = ccoSdmaSignalPtr(dc, srcLsaRank, queue);
    uint64_t start = timeoutNs ? cco_impl_clock_ns() : 0;
    for (uint32_t spins = 0; (int64_t)(cco_impl_ld_acquire_u64(sig) - expected) < 0; spins++) {
      if ((spins & 255) == 255) {
        if (ccoDevCommAborted(dc)) { st = ccoDevAborted; break; }
        if (timeoutNs && cco_impl_clock_ns() - start > timeoutNs) { st = ccoDevTimeout; break; }
      }
      cco_impl_spin_pause(spins);
    }
  }
  return (ccoDevStatus_t)cco_impl_coop_broadcast3((int)coop, rank, (uint32_t)st);
}

/* Waits until every operation posted so far on (peer, queue) has finished
 * (for a get: its data is here; for a put: at the peer), the abort word is
 * set, or timeoutNs passes (0: none; a stalled engine then waits forever). */
CCO_DEVICE_INLINE ccoDevStatus_t ccoSdmaQuietQueueTimeout(const ccoDevComm* dc, int peerLsaRank, uint32_t queue,
                                                          uint64_t timeoutNs, ccoCoop_t coop) {
  uint32_t rank = ccoCoopRank(coop);
  ccoCoopSync(coop);
  ccoDevStatus_t st = cco_impl_sdma_check(dc, peerLsaRank, queue);
  if (rank == 0 && st == ccoDevSuccess) {
    const ccoSdmaQueueDev* q = cco_impl_sdma_queue(dc, peerLsaRank, queue);
    uint64_t issued = cco_impl_ld_acquire_u64((const uint64_t*)(uintptr_t)q->tail);
    const uint64_t* done = (const uint64_t*)(uintptr_t)q->completed;
    uint64_t start = timeoutNs ? cco_impl_clock_ns() : 0;
    for (uint32_t spins = 0; (int64_t)(cco_impl_ld_acquire_u64(done) - issued) < 0; spins++) {
      if ((spins & 255) == 0) cco_impl_sdma_request_completion(q, issued);
      if ((spins & 255) == 255) {
        if (ccoDevCommAborted(dc)) { st = ccoDevAborted; break; }
        if (timeoutNs && cco_impl_clock_ns() - start > timeoutNs) { st = ccoDevTimeout; break; }
      }
      cco_impl_spin_pause(spins);
    }
  }
  return (ccoDevStatus_t)cco_impl_coop_broadcast3((int)coop, rank, (uint32_t)st);
}

/* ccoSdmaQuietQueueTimeout on every queue of the peer, each with its own
 * timeoutNs; the first status that is not success ends it. */
CCO_DEVICE_INLINE ccoDevStatus_t ccoSdmaQuietTimeout(const ccoDevComm* dc, int peerLsaRank, uint64_t timeoutNs,
                                                     ccoCoop_t coop) {
  const ccoSdmaDev* sd = cco_impl_sdma_state(dc);
  if (!sd) return ccoDevUnsupported;
  ccoDevStatus_t st = ccoDevSuccess;
  for (uint32_t q = 0; q < sd->queueCount && st == ccoDevSuccess; q++)
    st = ccoSdmaQuietQueueTimeout(dc, peerLsaRank, q, timeoutNs, coop);
  return st;
}

/* The same without a timeout. */
CCO_DEVICE_INLINE ccoDevStatus_t ccoSdmaQuietQueue(const ccoDevComm* dc, int peerLsaRank, uint32_t queue, ccoCoop_t coop) {
  return ccoSdmaQuietQueueTimeout(dc, peerLsaRank, queue, 0, coop);
}
CCO_DEVICE_INLINE ccoDevStatus_t ccoSdmaQuiet(const ccoDevComm* dc, int peerLsaRank, ccoCoop_t coop) {
  return ccoSdmaQuietTimeout(dc, peerLsaRank, 0, coop);
}

#endif /* CCO_CCO_SDMA_H_ */
