/*
 * cco device API, the core: cooperation scopes, teams, peer pointers,
 * signals and LSA barriers; what kernels call. C11, no templates, no
 * module-scope globals: every function is an inline function of its
 * arguments, so the same header serves CUDA C kernels (nvcc), C compiled to
 * NVPTX bitcode (clang --target=nvptx64-nvidia-cuda -std=c11, for Triton)
 * and host code on the host platform (a CPU thread is a warp and a block of
 * one thread).
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
 *
 * The transports have their own headers, each including this one:
 * cco/cco_sdma.h (copy engines) and cco/cco_gda.h (network, and the world
 * barrier); cco/cco_device_all.h includes all three. Names starting with
 * cco_impl_ (cco/device/impl/) are internals: do not call them.
 */
#ifndef CCO_CCO_DEVICE_H_
#define CCO_CCO_DEVICE_H_

#include <stddef.h>
#include <stdint.h>

#include "cco/cco_devcomm.h"
#include "cco/cco_window.h"
#include "cco/device/impl/arch_impl.h"

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
  return coop == ccoCoopThread ? 1u : coop == ccoCoopWarp ? cco_impl_warp_size() : cco_impl_block_size();
}

CCO_DEVICE_INLINE uint32_t ccoCoopRank(ccoCoop_t coop) {
  return coop == ccoCoopThread ? 0u : coop == ccoCoopWarp ? cco_impl_lane() : cco_impl_thread_in_block();
}

CCO_DEVICE_INLINE void ccoCoopSync(ccoCoop_t coop) {
  if (coop == ccoCoopWarp) cco_impl_sync_warp();
  else if (coop == ccoCoopBlock) cco_impl_sync_block();
}

/* The internals below need the scopes above. */
#include "cco/device/impl/lsa_impl.h"

/* ------------------------------------------------------------------- teams */

CCO_DEVICE_INLINE ccoTeam ccoDevTeam(const ccoDevComm* dc, ccoTeamKind_t kind) {
  return dc->teams[kind];
}

/* World rank of member teamRank of the team (-1 when out of range). */
CCO_DEVICE_INLINE int ccoDevTeamRankToWorld(const ccoDevComm* dc, ccoTeamKind_t kind, int teamRank) {
  ccoTeam t = dc->teams[kind];
  if (teamRank < 0 || teamRank >= t.nRanks) return -1;
  if (t.stride != 0) return dc->rank + (teamRank - t.rank) * t.stride;
  const int32_t* members = (const int32_t*)(uintptr_t)dc->teamMembers[kind];
  return members[teamRank];
}

/* Team rank of worldRank (-1 when it is not a member). */
CCO_DEVICE_INLINE int ccoDevTeamRankFromWorld(const ccoDevComm* dc, ccoTeamKind_t kind, int worldRank) {
  ccoTeam t = dc->teams[kind];
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
  cco_impl_st_release_u64(signal, value);
}
CCO_DEVICE_INLINE uint64_t ccoSignalLoad(const uint64_t* signal) { return cco_impl_ld_acquire_u64(signal); }
CCO_DEVICE_INLINE uint64_t ccoSignalAdd(uint64_t* signal, uint64_t value) {
  return cco_impl_atomic_add_release_u64(signal, value);
}

/* The same through LSA memory of a device communicator, at the narrowest
 * scope that still orders the data for every LSA peer (GPU scope when all
 * of them run on this GPU, system scope otherwise). */
CCO_DEVICE_INLINE void ccoLsaSignalStore(const ccoDevComm* dc, uint64_t* signal, uint64_t value) {
  cco_impl_st_release_scoped_u64(signal, value, (int)dc->lsaScopeGpu);
}
CCO_DEVICE_INLINE uint64_t ccoLsaSignalLoad(const ccoDevComm* dc, const uint64_t* signal) {
  return cco_impl_ld_acquire_scoped_u64(signal, (int)dc->lsaScopeGpu);
}
CCO_DEVICE_INLINE uint64_t ccoLsaSignalAdd(const ccoDevComm* dc, uint64_t* signal, uint64_t value) {
  return cco_impl_atomic_add_release_scoped_u64(signal, value, (int)dc->lsaScopeGpu);
}

/* The same signals without ordering anything before them: flags that
 * carry no data of their own (NVSHMEM's signal_op, which orders nothing
 * either), without the fence a release costs. A peer that must see what
 * this thread wrote before the signal needs ccoLsaSignalStore / Add. */
CCO_DEVICE_INLINE void ccoLsaSignalStoreRelaxed(const ccoDevComm* dc, uint64_t* signal, uint64_t value) {
  cco_impl_st_relaxed_scoped_u64(signal, value, (int)dc->lsaScopeGpu);
}
CCO_DEVICE_INLINE uint64_t ccoLsaSignalAddRelaxed(const ccoDevComm* dc, uint64_t* signal, uint64_t value) {
  return cco_impl_atomic_add_relaxed_scoped_u64(signal, value, (int)dc->lsaScopeGpu);
}

CCO_DEVICE_INLINE int ccoDevCommAborted(const ccoDevComm* dc) {
  const uint32_t* flag = (const uint32_t*)(uintptr_t)dc->abortFlag;
  return flag && cco_impl_ld_relaxed_u32(flag) != 0;
}

/* Waits until *signal >= value (wrapping 64-bit compare), the abort word is
 * set, or timeoutNs passes (0: no timeout). One thread. */
CCO_DEVICE_INLINE ccoDevStatus_t ccoSignalWaitUntil(const ccoDevComm* dc, const uint64_t* signal,
                                                    uint64_t value, uint64_t timeoutNs) {
  uint64_t start = timeoutNs ? cco_impl_clock_ns() : 0;
  for (uint32_t spins = 0;; spins++) {
    if ((int64_t)(cco_impl_ld_acquire_scoped_u64(signal, (int)dc->lsaScopeGpu) - value) >= 0)
      return ccoDevSuccess;
    if ((spins & 255) == 255) {
      if (ccoDevCommAborted(dc)) return ccoDevAborted;
      if (timeoutNs && cco_impl_clock_ns() - start > timeoutNs) return ccoDevTimeout;
    }
    cco_impl_spin_pause(spins);
  }
}

/* ------------------------------------------------------------ LSA barrier */

/*
 * LSA barrier b keeps, in the resource window of every rank, an inbox of
 * lsaSize uint32 slots: slot s holds the last epoch rank s arrived at. To
 * arrive, a rank stores its next epoch (released: one fence, then plain
 * strong stores, at the LSA scope) into its slot of every peer's inbox; to
 * wait, it loads (acquire) every slot of its own inbox until each has
 * reached that epoch. No atomics, one writer per
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
  s.epoch = valid ? cco_impl_ld_relaxed_u32(s.epochHome) : 0;
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
  /* The scope's writes happen before the stores below: one fence per
   * thread, however many peers it stores to (a st.release each would be a
   * fence each). */
  ccoCoopSync(s->coop);
  uint32_t p = ccoCoopRank(s->coop);
  if (p < (uint32_t)s->lsaSize) cco_impl_release_fence_scoped(s->gpuScope);
  for (; p < (uint32_t)s->lsaSize; p += ccoCoopSize(s->coop))
    cco_impl_st_after_fence_scoped_u32((uint32_t*)(uintptr_t)(s->peerSlot0 + p * s->stride), next, s->gpuScope);
  s->epoch = next;
}

/* Waits for every peer's arrival at this session's epoch, the abort word,
 * or the timeout (0: none). Every thread of the scope returns the same
 * status. */
CCO_DEVICE_INLINE ccoDevStatus_t ccoLsaBarrierWaitTimeout(ccoLsaBarrierSession* s, uint64_t timeoutNs) {
  if (!s->inbox) return ccoDevInvalid;
  ccoDevStatus_t st = ccoDevSuccess;
  uint64_t start = timeoutNs ? cco_impl_clock_ns() : 0;
  for (uint32_t p = ccoCoopRank(s->coop); p < (uint32_t)s->lsaSize && st == ccoDevSuccess;
       p += ccoCoopSize(s->coop)) {
    for (uint32_t spins = 0;; spins++) {
      if ((int32_t)(cco_impl_ld_acquire_scoped_u32(&s->inbox[p], s->gpuScope) - s->epoch) >= 0) break;
      if ((spins & 255) == 255) {
        if (s->abortFlag && cco_impl_ld_relaxed_u32(s->abortFlag)) {
          st = ccoDevAborted;
          break;
        }
        if (timeoutNs && cco_impl_clock_ns() - start > timeoutNs) {
          st = ccoDevTimeout;
          break;
        }
      }
      cco_impl_spin_pause(spins);
    }
  }
  /* One verdict for the whole scope: the worst status any thread saw (its
   * sync orders the other threads after this one's acquires). */
  return cco_impl_lsa_scope_status(s->coop, st);
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
  if (ccoCoopRank(s->coop) == 0 && s->epochHome) cco_impl_st_relaxed_u32(s->epochHome, s->epoch);
  ccoCoopSync(s->coop);
}

/* ------------------------------------------------------ names before 0.2 */
/* The 0.1 names of the arch primitives (cco_ld_acquire_u64, cco_clock_ns,
 * ...), which this header used to bring in; hidden when CCO_NO_COMPAT_NAMES
 * is defined. */
#ifndef CCO_NO_COMPAT_NAMES
#include "cco/device/cco_arch.h"
#endif

#endif /* CCO_CCO_DEVICE_H_ */
