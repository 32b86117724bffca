/*
 * cco device API: what kernels call. C11, no templates, no module-scope
 * globals: every function is an inline function of its arguments, so the
 * same header serves CUDA C kernels (nvcc), C compiled to NVPTX bitcode
 * (clang --target=nvptx64-nvidia-cuda -std=c11, for Triton) and host code
 * on the host platform (a CPU thread is a warp and a block of one thread).
 *
 *   __global__ void k(ccoDevComm dc, ccoWindow_t win) {
 *     ccoLsaBarrierSession b = ccoLsaBarrierSessionInit(&dc, 0, ccoCoopBlock);
 *     int peer = (dc.lsaRank + 1) % dc.lsaSize;
 *     float* p = (float*)ccoGetLsaPeerPtr(win, peer, 0);
 *     ... store into p ...
 *     ccoLsaBarrierSync(&b);          // peers' stores are visible after this
 *     ccoLsaBarrierSessionEnd(&b);
 *   }
 *
 * Cooperation scope, like every other variant, is an enum argument that
 * the compiler folds when it is a constant.
 */
#ifndef CCO_CCO_DEVICE_H_
#define CCO_CCO_DEVICE_H_

#include <stddef.h>
#include <stdint.h>

#include "cco/cco_devcomm.h"
#include "cco/cco_window.h"
#include "cco/device/cco_arch.h"
#include "cco/device/cco_sdma_types.h"

/* The name of a device status ("ccoDevSuccess", ...), for messages. */
CCO_HOST_DEVICE_INLINE const char* ccoDevStatusName(ccoDevStatus_t st) {
  switch (st) {
    case ccoDevSuccess: return "ccoDevSuccess";
    case ccoDevAborted: return "ccoDevAborted";
    case ccoDevTimeout: return "ccoDevTimeout";
    case ccoDevUnsupported: return "ccoDevUnsupported";
    case ccoDevInvalid: return "ccoDevInvalid";
    case ccoDevNoPeer: return "ccoDevNoPeer";
  }
  return "unknown status";
}

/* ------------------------------------------------------ cooperation scopes */

typedef enum {
  ccoCoopThread = 0, /* one thread acts alone */
  ccoCoopWarp = 1,   /* all 32 lanes of the warp call together */
  ccoCoopBlock = 2,  /* every thread of the block calls together */
} ccoCoop_t;

CCO_DEVICE_INLINE uint32_t ccoCoopSize(ccoCoop_t coop) {
  return coop == ccoCoopThread ? 1u : coop == ccoCoopWarp ? cco_warp_size() : cco_block_size();
}

CCO_DEVICE_INLINE uint32_t ccoCoopRank(ccoCoop_t coop) {
  return coop == ccoCoopThread ? 0u : coop == ccoCoopWarp ? cco_lane() : cco_thread_in_block();
}

CCO_DEVICE_INLINE void ccoCoopSync(ccoCoop_t coop) {
  if (coop == ccoCoopWarp) cco_sync_warp();
  else if (coop == ccoCoopBlock) cco_sync_block();
}

/* ------------------------------------------------------------------- teams */

CCO_DEVICE_INLINE ccoTeam_t ccoDevTeam(const ccoDevComm* dc, ccoTeamKind_t kind) {
  return dc->teams[kind];
}

/* World rank of member teamRank of the team (-1 when out of range). */
CCO_DEVICE_INLINE int ccoDevTeamRankToWorld(const ccoDevComm* dc, ccoTeamKind_t kind, int teamRank) {
  ccoTeam_t t = dc->teams[kind];
  if (teamRank < 0 || teamRank >= t.nRanks) return -1;
  if (t.stride != 0) return dc->rank + (teamRank - t.rank) * t.stride;
  const int32_t* members = (const int32_t*)(uintptr_t)dc->teamMembers[kind];
  return members[teamRank];
}

/* Team rank of worldRank (-1 when it is not a member). */
CCO_DEVICE_INLINE int ccoDevTeamRankFromWorld(const ccoDevComm* dc, ccoTeamKind_t kind, int worldRank) {
  ccoTeam_t t = dc->teams[kind];
  if (t.stride != 0) {
    int delta = worldRank - dc->rank;
    if (delta % t.stride != 0) return -1;
    int r = t.rank + delta / t.stride;
    return r >= 0 && r < t.nRanks ? r : -1;
  }
  const int32_t* members = (const int32_t*)(uintptr_t)dc->teamMembers[kind];
  int lo = 0, hi = t.nRanks - 1; /* members are sorted by world rank */
  while (lo <= hi) {
    int mid = (lo + hi) / 2;
    if (members[mid] == worldRank) return mid;
    if (members[mid] < worldRank) lo = mid + 1;
    else hi = mid - 1;
  }
  return -1;
}

CCO_DEVICE_INLINE int ccoDevTeamIsMember(const ccoDevComm* dc, ccoTeamKind_t kind, int worldRank) {
  return ccoDevTeamRankFromWorld(dc, kind, worldRank) >= 0;
}

/* ---------------------------------------------------------- peer pointers */

/* Address of byte `offset` of LSA peer peerLsaRank's copy of the window:
 * winBase + peerLsaRank * (stride4G << 32) + offset. */
CCO_DEVICE_INLINE void* ccoGetLsaPeerPtr(ccoWindow_t win, int peerLsaRank, size_t offset) {
  uint64_t stride = (uint64_t)win->stride4G << 32;
  return (void*)(uintptr_t)(win->winBase + (uint64_t)peerLsaRank * stride + offset);
}

/* This rank's own copy of byte `offset` of the window. */
CCO_DEVICE_INLINE void* ccoGetLocalPtr(ccoWindow_t win, size_t offset) {
  return ccoGetLsaPeerPtr(win, win->lsaRank, offset);
}

/* Same, for the flat VA as a whole (any symmetric address). */
CCO_DEVICE_INLINE void* ccoGetLsaPeerPtrFlat(const ccoDevComm* dc, const void* localPtr, int peerLsaRank) {
  uint64_t mine = dc->flatBase + (uint64_t)dc->lsaRank * dc->slotSize;
  uint64_t off = (uint64_t)(uintptr_t)localPtr - mine;
  return (void*)(uintptr_t)(dc->flatBase + (uint64_t)peerLsaRank * dc->slotSize + off);
}

/* ------------------------------------------------------ signalling helpers */

/* Release store / acquire load / release add at system scope: what a peer
 * needs to see the data written before a signal once it sees the signal. */
CCO_DEVICE_INLINE void ccoSignalStore(uint64_t* signal, uint64_t value) {
  cco_st_release_u64(signal, value);
}
CCO_DEVICE_INLINE uint64_t ccoSignalLoad(const uint64_t* signal) { return cco_ld_acquire_u64(signal); }
CCO_DEVICE_INLINE uint64_t ccoSignalAdd(uint64_t* signal, uint64_t value) {
  return cco_atomic_add_release_u64(signal, value);
}

/* The same through LSA memory of a device communicator, at the narrowest
 * scope that still orders the data for every LSA peer (GPU scope when all
 * of them run on this GPU, system scope otherwise). */
CCO_DEVICE_INLINE void ccoLsaSignalStore(const ccoDevComm* dc, uint64_t* signal, uint64_t value) {
  cco_st_release_scoped_u64(signal, value, (int)dc->lsaScopeGpu);
}
CCO_DEVICE_INLINE uint64_t ccoLsaSignalLoad(const ccoDevComm* dc, const uint64_t* signal) {
  return cco_ld_acquire_scoped_u64(signal, (int)dc->lsaScopeGpu);
}
CCO_DEVICE_INLINE uint64_t ccoLsaSignalAdd(const ccoDevComm* dc, uint64_t* signal, uint64_t value) {
  return cco_atomic_add_release_scoped_u64(signal, value, (int)dc->lsaScopeGpu);
}

CCO_DEVICE_INLINE int ccoDevCommAborted(const ccoDevComm* dc) {
  const uint32_t* flag = (const uint32_t*)(uintptr_t)dc->abortFlag;
  return flag && cco_ld_relaxed_u32(flag) != 0;
}

/* Waits until *signal >= value (wrapping 64-bit compare), the abort word is
 * set, or timeoutNs passes (0: no timeout). One thread. */
CCO_DEVICE_INLINE ccoDevStatus_t ccoSignalWaitUntil(const ccoDevComm* dc, const uint64_t* signal,
                                                    uint64_t value, uint64_t timeoutNs) {
  uint64_t start = timeoutNs ? cco_clock_ns() : 0;
  for (uint32_t spins = 0;; spins++) {
    if ((int64_t)(cco_ld_acquire_scoped_u64(signal, (int)dc->lsaScopeGpu) - value) >= 0)
      return ccoDevSuccess;
    if ((spins & 255) == 255) {
      if (ccoDevCommAborted(dc)) return ccoDevAborted;
      if (timeoutNs && cco_clock_ns() - start > timeoutNs) return ccoDevTimeout;
    }
    cco_spin_pause(spins);
  }
}

/* ------------------------------------------------------------ LSA barrier */

/*
 * LSA barrier b keeps, in the resource window of every rank, an inbox of
 * lsaSize uint32 slots: slot s holds the last epoch rank s arrived at. To
 * arrive, a rank stores its next epoch (release, system scope) into its
 * slot of every peer's inbox; to wait, it loads (acquire) every slot of its
 * own inbox until each has reached that epoch. No atomics, one writer per
 * slot, and the epochs only grow (compared with wrap-around), so sessions
 * can follow each other without resetting anything. A session keeps the
 * epoch in registers and stores it back at ccoLsaBarrierSessionEnd.
 *
 * Use one barrier index per concurrent session (for example per block).
 */
typedef struct {
  uint32_t* inbox;     /* this rank's inbox of the barrier */
  uint64_t peerSlot0;  /* this rank's slot in LSA rank 0's inbox */
  uint64_t stride;     /* slot size of the flat VA */
  uint32_t* epochHome; /* where the epoch lives between sessions */
  const uint32_t* abortFlag;
  uint32_t epoch;
  int32_t lsaSize;
  int32_t lsaRank;
  int32_t gpuScope; /* see ccoDevComm.lsaScopeGpu */
  ccoCoop_t coop;
} ccoLsaBarrierSession;

CCO_DEVICE_INLINE ccoLsaBarrierSession ccoLsaBarrierSessionInit(const ccoDevComm* dc, uint32_t index,
                                                                ccoCoop_t coop) {
  ccoLsaBarrierSession s;
  uint64_t mySlot = dc->resourceBase + (uint64_t)dc->lsaRank * dc->slotSize;
  uint64_t inboxOff = dc->lsaBarrierOffset + (uint64_t)index * (uint64_t)dc->lsaSize * 4u;
  /* An index out of range touches nothing: its waits return ccoDevInvalid. */
  int valid = index < dc->lsaBarrierCount;
  s.inbox = valid ? (uint32_t*)(uintptr_t)(mySlot + inboxOff) : (uint32_t*)0;
  s.peerSlot0 = dc->resourceBase + inboxOff + (uint64_t)dc->lsaRank * 4u;
  s.stride = dc->slotSize;
  s.epochHome = valid ? (uint32_t*)(uintptr_t)(mySlot + dc->lsaEpochOffset + (uint64_t)index * 4u) : (uint32_t*)0;
  s.abortFlag = (const uint32_t*)(uintptr_t)dc->abortFlag;
  s.epoch = valid ? cco_ld_relaxed_u32(s.epochHome) : 0;
  s.lsaSize = dc->lsaSize;
  s.lsaRank = dc->lsaRank;
  s.gpuScope = (int32_t)dc->lsaScopeGpu;
  s.coop = coop;
  return s;
}

/* Everything this scope wrote before arriving is visible to every peer
 * once that peer's wait returns. */
CCO_DEVICE_INLINE void ccoLsaBarrierArrive(ccoLsaBarrierSession* s) {
  if (!s->inbox) return; /* index out of range: the wait says so */
  uint32_t next = s->epoch + 1;
  /* The scope's writes happen before the release stores below. */
  ccoCoopSync(s->coop);
  for (uint32_t p = ccoCoopRank(s->coop); p < (uint32_t)s->lsaSize; p += ccoCoopSize(s->coop))
    cco_st_release_scoped_u32((uint32_t*)(uintptr_t)(s->peerSlot0 + p * s->stride), next, s->gpuScope);
  s->epoch = next;
}

/* Waits for every peer's arrival at this session's epoch, the abort word,
 * or the timeout (0: none). Every thread of the scope returns the same
 * status. */
CCO_DEVICE_INLINE ccoDevStatus_t ccoLsaBarrierWaitTimeout(ccoLsaBarrierSession* s, uint64_t timeoutNs) {
  if (!s->inbox) return ccoDevInvalid;
  ccoDevStatus_t st = ccoDevSuccess;
  uint64_t start = timeoutNs ? cco_clock_ns() : 0;
  for (uint32_t p = ccoCoopRank(s->coop); p < (uint32_t)s->lsaSize && st == ccoDevSuccess;
       p += ccoCoopSize(s->coop)) {
    for (uint32_t spins = 0;; spins++) {
      if ((int32_t)(cco_ld_acquire_scoped_u32(&s->inbox[p], s->gpuScope) - s->epoch) >= 0) break;
      if ((spins & 255) == 255) {
        if (s->abortFlag && cco_ld_relaxed_u32(s->abortFlag)) {
          st = ccoDevAborted;
          break;
        }
        if (timeoutNs && cco_clock_ns() - start > timeoutNs) {
          st = ccoDevTimeout;
          break;
        }
      }
      cco_spin_pause(spins);
    }
  }
#if CCO_ARCH_GPU
  /* One verdict for the whole scope: the worst status any thread saw. */
  if (s->coop == ccoCoopWarp) {
    uint32_t worst;
    __asm__ volatile("redux.sync.max.u32 %0, %1, -1;" : "=r"(worst) : "r"((uint32_t)st));
    st = (ccoDevStatus_t)worst;
  } else if (s->coop == ccoCoopBlock) {
    int32_t any;
    __asm__ volatile("{ .reg .pred p; setp.ne.u32 p, %1, 0; bar.red.or.pred p, 0, p; selp.s32 %0, 1, 0, p; }"
                     : "=r"(any)
                     : "r"((uint32_t)st)
                     : "memory");
    if (any && st == ccoDevSuccess) {
      /* Another thread failed; report abort if the word is set, else timeout. */
      st = (s->abortFlag && cco_ld_relaxed_u32(s->abortFlag)) ? ccoDevAborted : ccoDevTimeout;
    }
    return st; /* bar.red synchronized the block */
  }
#endif
  ccoCoopSync(s->coop);
  return st;
}

CCO_DEVICE_INLINE ccoDevStatus_t ccoLsaBarrierWait(ccoLsaBarrierSession* s) {
  return ccoLsaBarrierWaitTimeout(s, 0);
}

CCO_DEVICE_INLINE ccoDevStatus_t ccoLsaBarrierSync(ccoLsaBarrierSession* s) {
  ccoLsaBarrierArrive(s);
  return ccoLsaBarrierWaitTimeout(s, 0);
}

CCO_DEVICE_INLINE ccoDevStatus_t ccoLsaBarrierSyncTimeout(ccoLsaBarrierSession* s, uint64_t timeoutNs) {
  ccoLsaBarrierArrive(s);
  return ccoLsaBarrierWaitTimeout(s, timeoutNs);
}

/* Stores the epoch back for the next session on this barrier. The scope
 * syncs after the store, so a session opened right after by any thread of
 * the scope reads the new epoch. */
CCO_DEVICE_INLINE void ccoLsaBarrierSessionEnd(ccoLsaBarrierSession* s) {
  if (ccoCoopRank(s->coop) == 0 && s->epochHome) cco_st_relaxed_u32(s->epochHome, s->epoch);
  ccoCoopSync(s->coop);
}

/* ------------------------------------------------------------------ SDMA */

/*
 * Copy-engine transfers. A kernel posts a descriptor into the ring of
 * (peer, queue); the engine thread of this rank issues it on the copy
 * engines (cuMemcpyAsync on one stream per ring), then, in stream order,
 * bumps the peer's signal slot (if asked) and the ring's completion count.
 * Nothing is copied by the SMs.
 *
 * Peers are LSA ranks. Windows and offsets name both ends; the destination
 * of a put (the source of a get) is the peer's copy of the window. Within a
 * ring, operations complete in posting order. A scope (warp, block) posts
 * one operation together: its rank 0 posts after the scope has synced, so
 * the whole scope's writes to the source are ordered before the copy.
 *
 * Signals: rank r's signal slot (srcLsa, queue) counts the puts with
 * ccoSdmaSignalRemote (and ccoSdmaCommit calls) that srcLsa posted on that
 * queue to r, each counted once its data is visible at r.
 */
typedef enum {
  ccoSdmaSignalNone = 0,   /* no remote signal: aggregate with ccoSdmaCommit */
  ccoSdmaSignalRemote = 1, /* bump the peer's signal slot after this copy */
} ccoSdmaSignal_t;

CCO_DEVICE_INLINE const ccoSdmaDev* cco_sdma_state(const ccoDevComm* dc) {
  return (const ccoSdmaDev*)(uintptr_t)dc->sdma;
}

CCO_DEVICE_INLINE const ccoSdmaQueueDev* cco_sdma_queue(const ccoDevComm* dc, int peer, uint32_t queue) {
  const ccoSdmaDev* sd = cco_sdma_state(dc);
  return &((const ccoSdmaQueueDev*)(uintptr_t)sd->queues)[(uint32_t)peer * sd->queueCount + queue];
}

CCO_DEVICE_INLINE ccoDevStatus_t cco_sdma_check(const ccoDevComm* dc, int peer, uint32_t queue) {
  const ccoSdmaDev* sd = cco_sdma_state(dc);
  if (!sd) return ccoDevUnsupported;
  if (peer < 0 || peer >= (int)sd->lsaSize || queue >= sd->queueCount) return ccoDevInvalid;
  return ccoDevSuccess;
}

/* One thread: takes a ticket, waits for a free slot (credits), writes the
 * descriptor and publishes it with a release store of its sequence. */
CCO_DEVICE_INLINE ccoDevStatus_t cco_sdma_post(const ccoDevComm* dc, int peer, uint32_t queue, uint32_t op,
                                               uint32_t flags, uint64_t dst, uint64_t src, uint64_t bytes) {
  ccoDevStatus_t st = cco_sdma_check(dc, peer, queue);
  if (st != ccoDevSuccess) return st;
  const ccoSdmaQueueDev* q = cco_sdma_queue(dc, peer, queue);
  uint64_t ticket = cco_atomic_add_release_u64((uint64_t*)(uintptr_t)q->tail, 1);
  /* Credits: the engine's head lives in host memory, a bus round trip away;
   * producers share a copy in device memory and read the host word only
   * when that copy says the ring is full. A stale (lower) copy only costs
   * an extra host read. */
  uint64_t* cached = (uint64_t*)(uintptr_t)(q->tail + CCO_SDMA_CACHED_HEAD_OFFSET);
  if (ticket - cco_ld_acquire_u64(cached) >= CCO_SDMA_DEPTH) {
    const uint64_t* head = (const uint64_t*)(uintptr_t)q->head;
    uint64_t h;
    for (uint32_t spins = 0; ticket - (h = cco_ld_acquire_u64(head)) >= CCO_SDMA_DEPTH; spins++) {
      if ((spins & 255) == 255 && ccoDevCommAborted(dc)) return ccoDevAborted;
      cco_spin_pause(spins);
    }
    cco_st_release_u64(cached, h);
  }
  ccoSdmaSlot* slot = &((ccoSdmaSlot*)(uintptr_t)q->slots)[ticket & (CCO_SDMA_DEPTH - 1)];
  slot->dst = dst;
  slot->src = src;
  slot->bytes = bytes;
  slot->op = op;
  slot->flags = flags;
  cco_st_release_u64(&slot->seq, ticket + 1);
  return ccoDevSuccess;
}

/* The scope posts once (its rank 0), every thread gets the status. */
CCO_DEVICE_INLINE ccoDevStatus_t cco_sdma_post_coop(const ccoDevComm* dc, int peer, uint32_t queue, uint32_t op,
                                                    uint32_t flags, uint64_t dst, uint64_t src, uint64_t bytes,
                                                    ccoCoop_t coop) {
  uint32_t rank = ccoCoopRank(coop);
  ccoDevStatus_t st = ccoDevSuccess;
  ccoCoopSync(coop);
  if (rank == 0) st = cco_sdma_post(dc, peer, queue, op, flags, dst, src, bytes);
  return (ccoDevStatus_t)cco_coop_broadcast3((int)coop, rank, (uint32_t)st);
}

/* Whether [off, off + bytes) lies in the window (overflow-safe). */
CCO_DEVICE_INLINE int cco_sdma_in_window(ccoWindow_t win, size_t off, size_t bytes) {
  uint64_t size = win->size;
  return (uint64_t)off <= size && (uint64_t)bytes <= size - (uint64_t)off;
}

/* Copies bytes from this rank's copy of srcWin at srcOff to LSA peer's copy
 * of dstWin at dstOff. A range outside either window is ccoDevInvalid
 * (nothing posted). */
CCO_DEVICE_INLINE ccoDevStatus_t ccoSdmaPut(const ccoDevComm* dc, int peerLsaRank, ccoWindow_t dstWin, size_t dstOff,
                                            ccoWindow_t srcWin, size_t srcOff, size_t bytes, uint32_t queue,
                                            ccoSdmaSignal_t signal, ccoCoop_t coop) {
  if (!cco_sdma_in_window(dstWin, dstOff, bytes) || !cco_sdma_in_window(srcWin, srcOff, bytes))
    return ccoDevInvalid;
  uint64_t dst = (uint64_t)(uintptr_t)ccoGetLsaPeerPtr(dstWin, peerLsaRank, dstOff);
  uint64_t src = (uint64_t)(uintptr_t)ccoGetLocalPtr(srcWin, srcOff);
  return cco_sdma_post_coop(dc, peerLsaRank, queue, CCO_SDMA_OP_PUT,
                            signal == ccoSdmaSignalRemote ? CCO_SDMA_FLAG_REMOTE_SIGNAL : 0u, dst, src,
                            (uint64_t)bytes, coop);
}

/* Copies bytes from LSA peer's copy of srcWin at srcOff to this rank's copy
 * of dstWin at dstOff. Completion shows in ccoSdmaQuiet. A range outside
 * either window is ccoDevInvalid. */
CCO_DEVICE_INLINE ccoDevStatus_t ccoSdmaGet(const ccoDevComm* dc, int peerLsaRank, ccoWindow_t dstWin, size_t dstOff,
                                            ccoWindow_t srcWin, size_t srcOff, size_t bytes, uint32_t queue,
                                            ccoCoop_t coop) {
  if (!cco_sdma_in_window(dstWin, dstOff, bytes) || !cco_sdma_in_window(srcWin, srcOff, bytes))
    return ccoDevInvalid;
  uint64_t dst = (uint64_t)(uintptr_t)ccoGetLocalPtr(dstWin, dstOff);
  uint64_t src = (uint64_t)(uintptr_t)ccoGetLsaPeerPtr(srcWin, peerLsaRank, srcOff);
  return cco_sdma_post_coop(dc, peerLsaRank, queue, CCO_SDMA_OP_GET, 0u, dst, src, (uint64_t)bytes, coop);
}

/* Aggregated signalling: one bump of the peer's signal slot once every
 * operation posted before it on this ring has landed. */
CCO_DEVICE_INLINE ccoDevStatus_t ccoSdmaCommit(const ccoDevComm* dc, int peerLsaRank, uint32_t queue, ccoCoop_t coop) {
  return cco_sdma_post_coop(dc, peerLsaRank, queue, CCO_SDMA_OP_SIGNAL, CCO_SDMA_FLAG_REMOTE_SIGNAL, 0, 0, 0, coop);
}

/* This rank's signal slot for puts from srcLsaRank on queue. */
CCO_DEVICE_INLINE uint64_t* ccoSdmaSignalPtr(const ccoDevComm* dc, int srcLsaRank, uint32_t queue) {
  const ccoSdmaDev* sd = cco_sdma_state(dc);
  if (cco_sdma_check(dc, srcLsaRank, queue) != ccoDevSuccess) return NULL;
  uint64_t mine = dc->resourceBase + (uint64_t)dc->lsaRank * dc->slotSize + sd->signalsOffset;
  return (uint64_t*)(uintptr_t)(mine + ((uint64_t)srcLsaRank * sd->queueCount + queue) * 8u);
}

/* 0 when SDMA is off or the source/queue is out of range. */
CCO_DEVICE_INLINE uint64_t ccoSdmaReadSignal(const ccoDevComm* dc, int srcLsaRank, uint32_t queue) {
  const uint64_t* sig = ccoSdmaSignalPtr(dc, srcLsaRank, queue);
  return sig ? cco_ld_acquire_u64(sig) : 0;
}

/* Waits until the signal slot (srcLsaRank, queue) reaches `expected`, the
 * abort word is set, or timeoutNs passes (0: none). */
CCO_DEVICE_INLINE ccoDevStatus_t ccoSdmaWaitSignal(const ccoDevComm* dc, int srcLsaRank, uint32_t queue,
                                                   uint64_t expected, uint64_t timeoutNs, ccoCoop_t coop) {
  uint32_t rank = ccoCoopRank(coop);
  ccoDevStatus_t st = cco_sdma_check(dc, srcLsaRank, queue);
  if (rank == 0 && st == ccoDevSuccess) {
    uint64_t* sig = ccoSdmaSignalPtr(dc, srcLsaRank, queue);
    uint64_t start = timeoutNs ? cco_clock_ns() : 0;
    for (uint32_t spins = 0; (int64_t)(cco_ld_acquire_u64(sig) - expected) < 0; spins++) {
      if ((spins & 255) == 255) {
        if (ccoDevCommAborted(dc)) { st = ccoDevAborted; break; }
        if (timeoutNs && cco_clock_ns() - start > timeoutNs) { st = ccoDevTimeout; break; }
      }
      cco_spin_pause(spins);
    }
  }
  return (ccoDevStatus_t)cco_coop_broadcast3((int)coop, rank, (uint32_t)st);
}

/* Waits until every operation posted so far on (peer, queue) has finished
 * (for a get: its data is here; for a put: at the peer). */
CCO_DEVICE_INLINE ccoDevStatus_t ccoSdmaQuietQueue(const ccoDevComm* dc, int peerLsaRank, uint32_t queue, ccoCoop_t coop) {
  uint32_t rank = ccoCoopRank(coop);
  ccoCoopSync(coop);
  ccoDevStatus_t st = cco_sdma_check(dc, peerLsaRank, queue);
  if (rank == 0 && st == ccoDevSuccess) {
    const ccoSdmaQueueDev* q = cco_sdma_queue(dc, peerLsaRank, queue);
    uint64_t issued = cco_ld_acquire_u64((const uint64_t*)(uintptr_t)q->tail);
    const uint64_t* done = (const uint64_t*)(uintptr_t)q->completed;
    for (uint32_t spins = 0; (int64_t)(cco_ld_acquire_u64(done) - issued) < 0; spins++) {
      if ((spins & 255) == 255 && ccoDevCommAborted(dc)) { st = ccoDevAborted; break; }
      cco_spin_pause(spins);
    }
  }
  return (ccoDevStatus_t)cco_coop_broadcast3((int)coop, rank, (uint32_t)st);
}

/* ccoSdmaQuietQueue on every queue of the peer. */
CCO_DEVICE_INLINE ccoDevStatus_t ccoSdmaQuiet(const ccoDevComm* dc, int peerLsaRank, ccoCoop_t coop) {
  const ccoSdmaDev* sd = cco_sdma_state(dc);
  if (!sd) return ccoDevUnsupported;
  ccoDevStatus_t st = ccoDevSuccess;
  for (uint32_t q = 0; q < sd->queueCount && st == ccoDevSuccess; q++)
    st = ccoSdmaQuietQueue(dc, peerLsaRank, q, coop);
  return st;
}

#endif /* CCO_CCO_DEVICE_H_ */
