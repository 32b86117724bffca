/*
 * Private: internals of the SDMA device API (cco/cco_sdma.h): the ring of
 * (peer, queue) and posting into it. Names start with cco_impl_ and may
 * change in any release; kernels call the public functions instead.
 *
 * Included by cco/cco_sdma.h once its types are defined; included on its
 * own, it brings in that header first.
 */
#include "cco/cco_sdma.h"

#ifndef CCO_DEVICE_IMPL_SDMA_IMPL_H_
#define CCO_DEVICE_IMPL_SDMA_IMPL_H_

#include <stdint.h>

#include "cco/cco_device.h"
#include "cco/device/cco_sdma_types.h"
#include "cco/device/impl/arch_impl.h"

CCO_DEVICE_INLINE const ccoSdmaDev* cco_impl_sdma_state(const ccoDevComm* dc) {
  return (const ccoSdmaDev*)(uintptr_t)dc->sdma;
}

CCO_DEVICE_INLINE const ccoSdmaQueueDev* cco_impl_sdma_queue(const ccoDevComm* dc, int peer, uint32_t queue) {
  const ccoSdmaDev* sd = cco_impl_sdma_state(dc);
  return &((const ccoSdmaQueueDev*)(uintptr_t)sd->queues)[(uint32_t)peer * sd->queueCount + queue];
}

CCO_DEVICE_INLINE ccoDevStatus_t cco_impl_sdma_check(const ccoDevComm* dc, int peer, uint32_t queue) {
  const ccoSdmaDev* sd = cco_impl_sdma_state(dc);
  if (!sd) return ccoDevUnsupported;
  if (peer < 0 || peer >= (int)sd->lsaSize || queue >= sd->queueCount) return ccoDevInvalid;
  return ccoDevSuccess;
}

/* One thread: takes a ticket, waits for a free slot (credits), orders the
 * data before the descriptor with one system fence, then writes the
 * descriptor's tagged words with plain stores. */
CCO_DEVICE_INLINE ccoDevStatus_t cco_impl_sdma_post(const ccoDevComm* dc, int peer, uint32_t queue, uint32_t op,
                                                    uint32_t flags, uint64_t dst, uint64_t src, uint64_t bytes) {
  ccoDevStatus_t st = cco_impl_sdma_check(dc, peer, queue);
  if (st != ccoDevSuccess) return st;
  const ccoSdmaQueueDev* q = cco_impl_sdma_queue(dc, peer, queue);
  /* The ticket orders nothing: only this rank's kernels touch the tail
   * (device memory), so a relaxed GPU-scope atomic. */
  uint64_t ticket = cco_impl_atomic_add_relaxed_scoped_u64((uint64_t*)(uintptr_t)q->tail, 1, 1);
  /* Credits: the engine's head lives in host memory, a bus round trip away;
   * producers share a copy in device memory and read the host word only
   * when that copy says the ring is full. A stale (lower) copy only costs
   * an extra host read. */
  uint64_t* cached = (uint64_t*)(uintptr_t)(q->tail + CCO_SDMA_CACHED_HEAD_OFFSET);
  /* The fence below orders this read before the slot's stores. */
  if (ticket - cco_impl_ld_before_fence_scoped_u64(cached, 1) >= CCO_SDMA_DEPTH) {
    /* The ring is full: wait for the engine's credits (as GDA's producers do). */
    if (cco_impl_wait_for_credit(cached, (const uint64_t*)(uintptr_t)q->head, ticket, CCO_SDMA_DEPTH,
                                 (const uint32_t*)(uintptr_t)dc->abortFlag))
      return ccoDevAborted;
  }
  ccoSdmaSlot* slot = &((ccoSdmaSlot*)(uintptr_t)q->slots)[ticket & (CCO_SDMA_DEPTH - 1)];
  /* The fence comes before the descriptor, so it waits only for the data
   * (and the last post's words, long gone); a release store after the words
   * waited for the words themselves to cross the bus. Each word carries
   * the tag, so their order does not matter. */
  cco_impl_release_fence_scoped((int)cco_impl_sdma_state(dc)->postFenceGpu);
  /* In the order of the CCO_SDMA_WORD_* indices (no designated initializers:
   * this header is also compiled as C++). */
  const uint32_t payload[CCO_SDMA_WORDS_USED] = {(uint32_t)dst,         (uint32_t)(dst >> 32),  (uint32_t)src,
                                                 (uint32_t)(src >> 32), (uint32_t)bytes,        (uint32_t)(bytes >> 32),
                                                 CCO_SDMA_PACK_OP_FLAGS(op, flags)};
  for (int i = 0; i < CCO_SDMA_WORDS_USED; i++)
    cco_impl_st_after_fence_scoped_u64(&slot->word[i], CCO_SDMA_TAGGED_WORD(ticket, payload[i]), 0);
  return ccoDevSuccess;
}

/* A waiter in ccoSdmaQuiet asks the engine to write the ring's completion
 * count once `issued` operations are on their way (a plain store to host
 * memory, repeated while it waits: a later waiter may have stored a
 * smaller count over it, and the engine keeps the largest it reads). */
CCO_DEVICE_INLINE void cco_impl_sdma_request_completion(const ccoSdmaQueueDev* q, uint64_t issued) {
  cco_impl_st_relaxed_scoped_u64((uint64_t*)(uintptr_t)q->quietRequest, issued, 0);
}

/* The scope posts once (its rank 0), every thread gets the status. */
CCO_DEVICE_INLINE ccoDevStatus_t cco_impl_sdma_post_coop(const ccoDevComm* dc, int peer, uint32_t queue, uint32_t op,
                                                         uint32_t flags, uint64_t dst, uint64_t src, uint64_t bytes,
                                                         ccoCoop_t coop) {
  uint32_t rank = ccoCoopRank(coop);
  ccoDevStatus_t st = ccoDevSuccess;
  ccoCoopSync(coop);
  if (rank == 0) st = cco_impl_sdma_post(dc, peer, queue, op, flags, dst, src, bytes);
  return (ccoDevStatus_t)cco_impl_coop_broadcast3((int)coop, rank, (uint32_t)st);
}

#endif /* CCO_DEVICE_IMPL_SDMA_IMPL_H_ */
