/*
 * Window registration: collective, checked, and all-or-nothing.
 *
 * 1. Each rank checks its own arguments and describes the window
 *    (offset, size, the allocation it lies in) in a fixed record.
 * 2. The records are allgathered. Every rank sees the same table, so every
 *    rank takes the same decision: a bad argument anywhere or any
 *    difference in offset or size fails the registration everywhere,
 *    before anything is mapped.
 * 3. Ranks that do not yet map their LSA peers' twins of the allocation
 *    receive their chunks (fds over the LSA exchange) and map them.
 * 4. A second allgather of the outcome: if any rank failed to map, every
 *    rank undoes what this registration mapped.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/comm.h"
#include "core/error.h"
#include "mem/symm.h"
#include "transport/gda/gda.h"

typedef struct {
  uint32_t seq;
  int32_t status; /* ccoResult_t of the local checks */
  uint64_t offset;
  uint64_t size;
  uint64_t allocOffset;
  uint64_t allocSize;
  uint64_t allocId;
  uint32_t needPeers; /* this rank does not map its peers' twins yet */
  uint32_t platform;
  uint64_t reserved;
} reg_record;
_Static_assert(sizeof(reg_record) == 64, "reg_record is a wire format");

void cco_window_free_rec(cco_symm* m, cco_window_rec* w) {
  cco_alloc* a = w->alloc;
  if (w->dev) m->platform.ops->desc_free(&m->platform, w->dev);
  if (a && --a->windows == 0) cco_symm_unmap_peers(m, a);
  if (a && w->ownsAlloc) cco_symm_free_alloc(m, a);
  free(w);
}

static cco_window_rec* find_window(cco_symm* m, ccoWindow_t handle) {
  for (cco_window_rec* w = m->windows; w; w = w->next)
    if (w->dev == handle) return w;
  return NULL;
}

/* Step 1: this rank's record (mem lock held). */
static reg_record describe(ccoComm* comm, void* ptr, size_t size, cco_alloc** allocOut,
                           char* why, size_t whySize) {
  cco_symm* m = &comm->mem;
  reg_record r;
  memset(&r, 0, sizeof(r));
  r.seq = m->regSeq;
  r.platform = (uint32_t)m->platform.kind;
  cco_alloc* a = (ptr && size) ? cco_symm_find_alloc(m, ptr, size) : NULL;
  if (!a) {
    r.status = ccoInvalidArgument;
    snprintf(why, whySize,
             "[%p, +%zu) is not inside one allocation of this communicator (use ccoMemAlloc or "
             "ccoMemImport)",
             ptr, size);
    return r;
  }
  r.status = ccoSuccess;
  r.offset = (uint64_t)((char*)ptr - cco_symm_slot_base(m, m->lsaRank));
  r.size = size;
  r.allocOffset = a->offset;
  r.allocSize = a->chunk.size;
  r.allocId = a->id;
  r.needPeers = a->windows == 0 && m->lsaSize > 1;
  *allocOut = a;
  return r;
}

/* Step 2: the common verdict. Returns ccoSuccess or the error of this rank. */
static ccoResult_t judge(ccoComm* comm, const reg_record* all, const char* why) {
  int n = comm->nRanks, me = comm->rank;
  for (int r = 0; r < n; r++) {
    if (all[r].status == ccoSuccess) continue;
    if (r == me)
      return cco_error(comm, (ccoResult_t)all[r].status, CCO_SUBSYS_MEM,
                       "rank %d: window registration: %s", me, why);
    return cco_error(comm, ccoInvalidUsage, CCO_SUBSYS_MEM,
                     "rank %d: window registration failed on rank %d (bad arguments there)", me, r);
  }
  for (int r = 1; r < n; r++) {
    const reg_record *a = &all[0], *b = &all[r];
    if (a->seq != b->seq || a->offset != b->offset || a->size != b->size ||
        a->allocOffset != b->allocOffset || a->allocSize != b->allocSize ||
        a->platform != b->platform)
      return cco_error(comm, ccoInvalidUsage, CCO_SUBSYS_MEM,
                       "rank %d: window registration mismatch: rank 0 registers #%u offset %#llx "
                       "size %llu (allocation %#llx+%llu), rank %d registers #%u offset %#llx size "
                       "%llu (allocation %#llx+%llu); register the same windows in the same order",
                       me, a->seq, (unsigned long long)a->offset, (unsigned long long)a->size,
                       (unsigned long long)a->allocOffset, (unsigned long long)a->allocSize, r,
                       b->seq, (unsigned long long)b->offset, (unsigned long long)b->size,
                       (unsigned long long)b->allocOffset, (unsigned long long)b->allocSize);
  }
  return ccoSuccess;
}

/* Step 3: pass chunks to the peers that need them, map the ones we need.
 * On failure nothing new stays mapped. */
static ccoResult_t map_peers(ccoComm* comm, const reg_record* all, cco_alloc* a) {
  cco_symm* m = &comm->mem;
  int n = comm->nRanks, me = comm->rank;
  const reg_record* mine = &all[me];
  ccoResult_t res = ccoSuccess;
  /* Peers already mapped (an earlier window) must still be the same allocations. */
  if (!mine->needPeers && a->peers) {
    for (int p = 0; p < m->lsaSize; p++) {
      int w = m->lsaWorld[p];
      if (a->peers[p].mapped && a->peers[p].allocId != all[w].allocId)
        return cco_error(comm, ccoInvalidUsage, CCO_SUBSYS_MEM,
                         "rank %d: rank %d freed and reallocated the memory under a live window of "
                         "this rank; deregister windows before freeing their memory",
                         me, w);
    }
  }
  int* fds = NULL;
  uint64_t* infos = NULL;
  bool* expect = NULL;
  int exported = -1;
  bool anyoneNeeds = false;
  for (int p = 0; p < m->lsaSize; p++) anyoneNeeds |= all[m->lsaWorld[p]].needPeers != 0;
  if (!anyoneNeeds) return ccoSuccess;

  fds = malloc(sizeof(int) * (size_t)n);
  infos = calloc((size_t)n, sizeof(uint64_t));
  expect = calloc((size_t)n, sizeof(bool));
  if (!fds || !infos || !expect) {
    res = cco_error(comm, ccoOutOfMemory, CCO_SUBSYS_MEM, "no memory for the fd exchange");
    goto out;
  }
  for (int r = 0; r < n; r++) fds[r] = -1;
  CCO_CHECK_GOTO(m->platform.ops->chunk_export(&m->platform, &a->chunk, &exported), res, out);
  for (int p = 0; p < m->lsaSize; p++) {
    int w = m->lsaWorld[p];
    if (w == me || !all[w].needPeers) continue;
    CCO_CHECK_GOTO(cco_lsa_exchange_send(&m->exchange, w, m->regSeq, a->chunk.size, exported), res,
                   out);
  }
  if (!mine->needPeers) goto out;
  for (int p = 0; p < m->lsaSize; p++) expect[m->lsaWorld[p]] = m->lsaWorld[p] != me;
  CCO_CHECK_GOTO(cco_lsa_exchange_recv(&m->exchange, m->regSeq, expect, n, fds, infos), res, out);
  a->peers = calloc((size_t)m->lsaSize, sizeof(cco_peer_chunk));
  if (!a->peers) {
    res = cco_error(comm, ccoOutOfMemory, CCO_SUBSYS_MEM, "no memory for peer chunks");
    goto out;
  }
  for (int p = 0; p < m->lsaSize; p++) {
    int w = m->lsaWorld[p];
    if (w == me) continue;
    cco_peer_chunk* pc = &a->peers[p];
    int fd = fds[w];
    fds[w] = -1; /* import owns it from here, also on failure */
    CCO_CHECK_GOTO(m->platform.ops->chunk_import(&m->platform, fd, infos[w], &pc->chunk), res, out);
    res = m->platform.ops->map(&m->platform, cco_symm_slot_base(m, p) + a->offset, &pc->chunk);
    if (res != ccoSuccess) {
      m->platform.ops->chunk_release(&m->platform, &pc->chunk);
      goto out;
    }
    pc->mapped = true;
    pc->allocId = all[w].allocId;
  }
out:
  if (res != ccoSuccess && mine->needPeers) cco_symm_unmap_peers(m, a);
  if (exported >= 0) close(exported);
  if (fds)
    for (int r = 0; r < n; r++)
      if (fds[r] >= 0) close(fds[r]);
  free(fds);
  free(infos);
  free(expect);
  return res;
}

static ccoResult_t make_descriptor(ccoComm* comm, cco_window_rec* w, const reg_record* r) {
  cco_symm* m = &comm->mem;
  ccoWindowDevice* d = &w->desc;
  memset(d, 0, sizeof(*d));
  d->winBase = (uint64_t)(uintptr_t)(m->flatBase + r->offset);
  d->stride4G = (uint32_t)(m->slotSize >> 32);
  d->lsaRank = m->lsaRank;
  d->lsaSize = m->lsaSize;
  d->magic = CCO_WINDOW_MAGIC;
  d->size = r->size;
  d->offset = r->offset;
  d->rank = comm->rank;
  void* dev = NULL;
  CCO_CHECK(m->platform.ops->desc_alloc(&m->platform, sizeof(*d), &dev));
  ccoResult_t res = m->platform.ops->copy_to_device(&m->platform, dev, d, sizeof(*d));
  if (res != ccoSuccess) {
    m->platform.ops->desc_free(&m->platform, dev);
    return res;
  }
  w->dev = dev;
  return ccoSuccess;
}

static ccoResult_t allgather_status(ccoComm* comm, ccoResult_t mine, int* failedRank) {
  int32_t* all = calloc((size_t)comm->nRanks, sizeof(int32_t));
  if (!all) return cco_error(comm, ccoOutOfMemory, CCO_SUBSYS_MEM, "no memory");
  all[comm->rank] = (int32_t)mine;
  ccoResult_t res = cco_bootstrap_allgather(&comm->boot, comm, all, sizeof(int32_t));
  *failedRank = -1;
  for (int r = 0; res == ccoSuccess && r < comm->nRanks && *failedRank < 0; r++)
    if (all[r] != ccoSuccess) *failedRank = r;
  free(all);
  return res;
}

/* Drops a window record this registration made: a complete one (mapped,
 * descriptor made) is unwound, a bare one freed. The allocation stays. */
static void discard_window(cco_symm* m, cco_window_rec* w, bool complete) {
  if (!w) return;
  pthread_mutex_lock(&m->lock);
  if (complete) {
    w->ownsAlloc = false;
    cco_window_free_rec(m, w);
  } else {
    free(w);
  }
  pthread_mutex_unlock(&m->lock);
}

static ccoResult_t register_locked(ccoComm* comm, void* ptr, size_t size, bool ownsAlloc,
                                   ccoWindow_t* win) {
  cco_symm* m = &comm->mem;
  char why[256] = "";
  cco_alloc* a = NULL;
  reg_record* all = calloc((size_t)comm->nRanks, sizeof(reg_record));
  if (!all) return cco_error(comm, ccoOutOfMemory, CCO_SUBSYS_MEM, "no memory");
  pthread_mutex_lock(&m->lock);
  all[comm->rank] = describe(comm, ptr, size, &a, why, sizeof(why));
  pthread_mutex_unlock(&m->lock);
  m->regSeq++; /* every rank counts every attempt, so sequences stay equal */

  ccoResult_t res = cco_bootstrap_allgather(&comm->boot, comm, all, sizeof(reg_record));
  if (res == ccoSuccess) res = judge(comm, all, why);
  if (res != ccoSuccess) {
    free(all);
    return res;
  }
  cco_window_rec* w = calloc(1, sizeof(*w));
  pthread_mutex_lock(&m->lock);
  ccoResult_t local = w ? map_peers(comm, all, a) : ccoOutOfMemory;
  char localWhy[512];
  snprintf(localWhy, sizeof(localWhy), "%s", cco_thread_last_error());
  if (local == ccoSuccess) {
    a->windows++;
    w->alloc = a;
    w->localPtr = ptr;
    w->ownsAlloc = ownsAlloc;
    local = make_descriptor(comm, w, &all[comm->rank]);
    if (local != ccoSuccess) {
      snprintf(localWhy, sizeof(localWhy), "%s", cco_thread_last_error());
      w->ownsAlloc = false; /* the caller frees it on failure */
      cco_window_free_rec(m, w);
      w = NULL;
    }
  }
  pthread_mutex_unlock(&m->lock);

  int failedRank = -1;
  res = allgather_status(comm, local, &failedRank);
  if (res != ccoSuccess || failedRank >= 0) {
    /* A rank failed to map, or the job broke: no rank keeps this window. */
    discard_window(m, w, local == ccoSuccess);
    w = NULL;
    if (res == ccoSuccess)
      res = failedRank == comm->rank
                ? cco_error(comm, local, CCO_SUBSYS_MEM, "rank %d: window registration: %s",
                            comm->rank, localWhy)
                : cco_error(comm, ccoRemoteError, CCO_SUBSYS_MEM,
                            "rank %d: window registration failed on rank %d", comm->rank,
                            failedRank);
  }
  free(all);
  if (res != ccoSuccess) return res;
  /* The GDA proxy learns of the window (and registers it with the network
   * engine on the direct path); collective, so a failure is everyone's. */
  res = cco_gda_window_added(comm, w->desc.offset, w->desc.size, w->localPtr);
  if (res != ccoSuccess) {
    discard_window(m, w, true);
    return res;
  }
  pthread_mutex_lock(&m->lock);
  w->next = m->windows;
  m->windows = w;
  pthread_mutex_unlock(&m->lock);
  *win = w->dev;
  CCO_INFO(MEM, "rank %d: window #%u at offset %#llx, %zu bytes, descriptor %p", comm->rank,
           m->regSeq, (unsigned long long)w->desc.offset, size, (void*)w->dev);
  return ccoSuccess;
}

static ccoResult_t register_window(ccoComm* comm, void* ptr, size_t size, bool ownsAlloc,
                                   ccoWindow_t* win) {
  /* win == NULL is a local mistake but the registration is collective:
   * report it through the common verdict by describing an empty window. */
  CCO_CHECK(cco_comm_begin_collective(comm, "window registration"));
  ccoResult_t res = register_locked(comm, win ? ptr : NULL, win ? size : 0, ownsAlloc, win);
  return cco_comm_end_collective(comm, res);
}

ccoResult_t ccoWindowRegister(ccoComm* comm, void* ptr, size_t size, ccoWindow_t* win) {
  CCO_VALIDATE_COMM(comm);
  return register_window(comm, ptr, size, false, win);
}

ccoResult_t ccoWindowRegisterAlloc(ccoComm* comm, size_t size, ccoWindow_t* win, void** localPtr) {
  CCO_VALIDATE_COMM(comm);
  void* ptr = NULL;
  /* A failed allocation still takes part in the collective, as a bad window. */
  ccoResult_t allocRes = (size && localPtr) ? ccoMemAlloc(comm, size, &ptr) : ccoInvalidArgument;
  ccoResult_t res = register_window(comm, allocRes == ccoSuccess ? ptr : NULL, size, true, win);
  if (res != ccoSuccess) {
    if (ptr) ccoMemFree(comm, ptr);
    return allocRes != ccoSuccess ? allocRes : res;
  }
  *localPtr = ptr;
  return ccoSuccess;
}

ccoResult_t ccoWindowRegisterExternal(ccoComm* comm, void* extPtr, size_t size, ccoWindow_t* win,
                                      void** localPtr) {
  CCO_VALIDATE_COMM(comm);
  void* ptr = NULL;
  ccoResult_t impRes = localPtr ? ccoMemImport(comm, extPtr, size, &ptr) : ccoInvalidArgument;
  ccoResult_t res = register_window(comm, impRes == ccoSuccess ? ptr : NULL, size, true, win);
  if (res != ccoSuccess) {
    if (ptr) ccoMemFree(comm, ptr);
    return impRes != ccoSuccess ? impRes : res;
  }
  *localPtr = ptr;
  return ccoSuccess;
}

ccoResult_t ccoWindowDeregister(ccoComm* comm, ccoWindow_t win) {
  CCO_VALIDATE_COMM(comm);
  cco_symm* m = &comm->mem;
  pthread_mutex_lock(&m->lock);
  cco_window_rec* w = win ? find_window(m, win) : NULL;
  if (w) {
    cco_gda_window_removed(comm, w->desc.offset); /* before the memory goes */
    cco_window_rec** it = &m->windows;
    while (*it != w) it = &(*it)->next;
    *it = w->next;
    cco_window_free_rec(m, w);
  }
  pthread_mutex_unlock(&m->lock);
  if (!w)
    return cco_error(comm, ccoInvalidArgument, CCO_SUBSYS_MEM,
                     "ccoWindowDeregister: %p is not a window of this communicator (or was "
                     "deregistered already)",
                     (void*)win);
  return ccoSuccess;
}

ccoResult_t ccoWindowGetInfo(ccoComm* comm, ccoWindow_t win, ccoWindowDevice* desc, void** localPtr) {
  CCO_VALIDATE_COMM(comm);
  cco_symm* m = &comm->mem;
  pthread_mutex_lock(&m->lock);
  cco_window_rec* w = win ? find_window(m, win) : NULL;
  if (w) {
    if (desc) *desc = w->desc;
    if (localPtr) *localPtr = w->localPtr;
  }
  pthread_mutex_unlock(&m->lock);
  if (!w)
    return cco_error(comm, ccoInvalidArgument, CCO_SUBSYS_MEM,
                     "ccoWindowGetInfo: %p is not a window of this communicator", (void*)win);
  return ccoSuccess;
}

ccoResult_t ccoGetPeerPtr(ccoComm* comm, const void* localPtr, int peer, void** peerPtr) {
  CCO_VALIDATE_COMM(comm);
  if (!peerPtr) return cco_error(comm, ccoInvalidArgument, CCO_SUBSYS_MEM, "peerPtr is NULL");
  int peerLsa = cco_topology_world_to_team(&comm->topo, ccoTeamLsa, peer);
  if (peerLsa < 0)
    return cco_error(comm, ccoInvalidArgument, CCO_SUBSYS_MEM,
                     "ccoGetPeerPtr: rank %d is not on this rank's host (not in the LSA team)", peer);
  cco_symm* m = &comm->mem;
  const char* mine = cco_symm_slot_base(m, m->lsaRank);
  const char* p = localPtr;
  bool covered = false;
  pthread_mutex_lock(&m->lock);
  for (cco_window_rec* w = m->windows; w && !covered; w = w->next)
    covered = p >= w->localPtr && (size_t)(p - w->localPtr) < w->desc.size;
  pthread_mutex_unlock(&m->lock);
  if (!covered)
    return cco_error(comm, ccoInvalidArgument, CCO_SUBSYS_MEM,
                     "ccoGetPeerPtr: %p is not inside a registered window", localPtr);
  *peerPtr = cco_symm_slot_base(m, peerLsa) + (p - mine);
  return ccoSuccess;
}
