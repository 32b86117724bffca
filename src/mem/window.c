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
 *
 * The communicator then tells the transports (src/comm/window_api.c) and
 * publishes the window, or discards it if a transport refused it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "base/log.h"
#include "mem/mem.h"

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

void cco_mem_window_free_rec(cco_mem* m, cco_window_rec* w) {
  cco_alloc* a = w->alloc;
  if (w->dev) m->platform->ops->desc_free(m->platform, w->dev);
  if (a && --a->windows == 0) cco_mem_unmap_peers(m, a);
  if (a && w->ownsAlloc) cco_mem_free_alloc(m, a);
  free(w);
}

/* Step 1: this rank's record (mem lock held). */
static reg_record describe(cco_mem* m, void* ptr, size_t size, cco_alloc** allocOut,
                           char* why, size_t whySize) {
  reg_record r;
  memset(&r, 0, sizeof(r));
  r.seq = m->regSeq;
  r.platform = (uint32_t)m->platform->kind;
  cco_alloc* a = (ptr && size) ? cco_mem_find_alloc(m, ptr, size) : NULL;
  if (!a) {
    r.status = ccoInvalidArgument;
    snprintf(why, whySize,
             "[%p, +%zu) is not inside one allocation of this communicator (use ccoMemAlloc or "
             "ccoMemImport)",
             ptr, size);
    return r;
  }
  r.status = ccoSuccess;
  r.offset = (uint64_t)((char*)ptr - cco_mem_slot_base(m, m->lsaRank));
  r.size = size;
  r.allocOffset = a->offset;
  r.allocSize = a->chunk.size;
  r.allocId = a->id;
  r.needPeers = a->windows == 0 && m->lsaSize > 1;
  *allocOut = a;
  return r;
}

/* Step 2: the common verdict. Returns ccoSuccess or the error of this rank. */
static ccoResult_t judge(cco_mem* m, const reg_record* all, const char* why) {
  int n = m->nRanks, me = m->rank;
  for (int r = 0; r < n; r++) {
    if (all[r].status == ccoSuccess) continue;
    if (r == me)
      return cco_error(m->err, (ccoResult_t)all[r].status, CCO_SUBSYS_MEM,
                       "rank %d: window registration: %s", me, why);
    return cco_error(m->err, ccoInvalidUsage, CCO_SUBSYS_MEM,
                     "rank %d: window registration failed on rank %d (bad arguments there)", me, r);
  }
  for (int r = 1; r < n; r++) {
    const reg_record *a = &all[0], *b = &all[r];
    if (a->seq != b->seq || a->offset != b->offset || a->size != b->size ||
        a->allocOffset != b->allocOffset || a->allocSize != b->allocSize ||
        a->platform != b->platform)
      return cco_error(m->err, ccoInvalidUsage, CCO_SUBSYS_MEM,
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
static ccoResult_t map_peers(cco_mem* m, const reg_record* all, cco_alloc* a) {
  int n = m->nRanks, me = m->rank;
  const reg_record* mine = &all[me];
  ccoResult_t res = ccoSuccess;
  /* Peers already mapped (an earlier window) must still be the same allocations. */
  if (!mine->needPeers && a->peers) {
    for (int p = 0; p < m->lsaSize; p++) {
      int w = m->lsaWorld[p];
      if (a->peers[p].mapped && a->peers[p].allocId != all[w].allocId)
        return cco_error(m->err, ccoInvalidUsage, CCO_SUBSYS_MEM,
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
    res = cco_error(m->err, ccoOutOfMemory, CCO_SUBSYS_MEM, "no memory for the fd exchange");
    goto out;
  }
  for (int r = 0; r < n; r++) fds[r] = -1;
  CCO_CHECK_GOTO(m->platform->ops->chunk_export(m->platform, &a->chunk, &exported), res, out);
  for (int p = 0; p < m->lsaSize; p++) {
    int w = m->lsaWorld[p];
    if (w == me || !all[w].needPeers) continue;
    CCO_CHECK_GOTO(cco_fd_exchange_send(&m->exchange, w, m->regSeq, a->chunk.size, exported), res,
                   out);
  }
  if (!mine->needPeers) goto out;
  for (int p = 0; p < m->lsaSize; p++) expect[m->lsaWorld[p]] = m->lsaWorld[p] != me;
  CCO_CHECK_GOTO(cco_fd_exchange_recv(&m->exchange, m->regSeq, expect, n, fds, infos), res, out);
  a->peers = calloc((size_t)m->lsaSize, sizeof(cco_peer_chunk));
  if (!a->peers) {
    res = cco_error(m->err, ccoOutOfMemory, CCO_SUBSYS_MEM, "no memory for peer chunks");
    goto out;
  }
  for (int p = 0; p < m->lsaSize; p++) {
    int w = m->lsaWorld[p];
    if (w == me) continue;
    cco_peer_chunk* pc = &a->peers[p];
    int fd = fds[w];
    fds[w] = -1; /* import owns it from here, also on failure */
    CCO_CHECK_GOTO(m->platform->ops->chunk_import(m->platform, fd, infos[w], &pc->chunk), res, out);
    res = m->platform->ops->map(m->platform, cco_mem_slot_base(m, p) + a->offset, &pc->chunk);
    if (res != ccoSuccess) {
      m->platform->ops->chunk_release(m->platform, &pc->chunk);
      goto out;
    }
    pc->mapped = true;
    pc->allocId = all[w].allocId;
  }
out:
  if (res != ccoSuccess && mine->needPeers) cco_mem_unmap_peers(m, a);
  if (exported >= 0) close(exported);
  if (fds)
    for (int r = 0; r < n; r++)
      if (fds[r] >= 0) close(fds[r]);
  free(fds);
  free(infos);
  free(expect);
  return res;
}

static ccoResult_t make_descriptor(cco_mem* m, cco_window_rec* w, const reg_record* r) {
  ccoWindowDevice* d = &w->desc;
  memset(d, 0, sizeof(*d));
  d->winBase = (uint64_t)(uintptr_t)(m->flatBase + r->offset);
  d->stride4G = (uint32_t)(m->slotSize >> 32);
  d->lsaRank = m->lsaRank;
  d->lsaSize = m->lsaSize;
  d->magic = CCO_WINDOW_MAGIC;
  d->size = r->size;
  d->offset = r->offset;
  d->rank = m->rank;
  void* dev = NULL;
  CCO_CHECK(m->platform->ops->desc_alloc(m->platform, sizeof(*d), &dev));
  ccoResult_t res = m->platform->ops->copy_to_device(m->platform, dev, d, sizeof(*d));
  if (res != ccoSuccess) {
    m->platform->ops->desc_free(m->platform, dev);
    return res;
  }
  w->dev = dev;
  return ccoSuccess;
}

static ccoResult_t allgather_status(cco_mem* m, ccoResult_t mine, int* failedRank) {
  int32_t* all = calloc((size_t)m->nRanks, sizeof(int32_t));
  if (!all) return cco_error(m->err, ccoOutOfMemory, CCO_SUBSYS_MEM, "no memory");
  all[m->rank] = (int32_t)mine;
  ccoResult_t res = cco_bootstrap_allgather(m->boot, m->err, all, sizeof(int32_t));
  *failedRank = -1;
  for (int r = 0; res == ccoSuccess && r < m->nRanks && *failedRank < 0; r++)
    if (all[r] != ccoSuccess) *failedRank = r;
  free(all);
  return res;
}

/* Drops a window record this registration made: a complete one (mapped,
 * descriptor made) is unwound, a bare one freed. The allocation stays. */
static void discard_window(cco_mem* m, cco_window_rec* w, bool complete) {
  if (!w) return;
  pthread_mutex_lock(&m->lock);
  if (complete) {
    w->ownsAlloc = false;
    cco_mem_window_free_rec(m, w);
  } else {
    free(w);
  }
  pthread_mutex_unlock(&m->lock);
}

ccoResult_t cco_mem_window_register(cco_mem* m, void* ptr, size_t size, bool ownsAlloc,
                                    cco_window_rec** out) {
  char why[256] = "";
  cco_alloc* a = NULL;
  reg_record* all = calloc((size_t)m->nRanks, sizeof(reg_record));
  if (!all) return cco_error(m->err, ccoOutOfMemory, CCO_SUBSYS_MEM, "no memory");
  pthread_mutex_lock(&m->lock);
  all[m->rank] = describe(m, ptr, size, &a, why, sizeof(why));
  pthread_mutex_unlock(&m->lock);
  m->regSeq++; /* every rank counts every attempt, so sequences stay equal */

  ccoResult_t res = cco_bootstrap_allgather(m->boot, m->err, all, sizeof(reg_record));
  if (res == ccoSuccess) res = judge(m, all, why);
  if (res != ccoSuccess) {
    free(all);
    return res;
  }
  cco_window_rec* w = calloc(1, sizeof(*w));
  pthread_mutex_lock(&m->lock);
  ccoResult_t local = w ? map_peers(m, all, a) : ccoOutOfMemory;
  char localWhy[512];
  snprintf(localWhy, sizeof(localWhy), "%s", cco_thread_last_error());
  if (local == ccoSuccess) {
    a->windows++;
    w->alloc = a;
    w->localPtr = ptr;
    w->ownsAlloc = ownsAlloc;
    local = make_descriptor(m, w, &all[m->rank]);
    if (local != ccoSuccess) {
      snprintf(localWhy, sizeof(localWhy), "%s", cco_thread_last_error());
      w->ownsAlloc = false; /* the caller frees it on failure */
      cco_mem_window_free_rec(m, w);
      w = NULL;
    }
  }
  pthread_mutex_unlock(&m->lock);

  int failedRank = -1;
  res = allgather_status(m, local, &failedRank);
  if (res != ccoSuccess || failedRank >= 0) {
    /* A rank failed to map, or the job broke: no rank keeps this window. */
    discard_window(m, w, local == ccoSuccess);
    w = NULL;
    if (res == ccoSuccess)
      res = failedRank == m->rank
                ? cco_error(m->err, local, CCO_SUBSYS_MEM, "rank %d: window registration: %s",
                            m->rank, localWhy)
                : cco_error(m->err, ccoRemoteError, CCO_SUBSYS_MEM,
                            "rank %d: window registration failed on rank %d", m->rank,
                            failedRank);
  }
  free(all);
  if (res != ccoSuccess) return res;
  *out = w;
  return ccoSuccess;
}

void cco_mem_window_publish(cco_mem* m, cco_window_rec* w) {
  pthread_mutex_lock(&m->lock);
  w->next = m->windows;
  m->windows = w;
  pthread_mutex_unlock(&m->lock);
  CCO_INFO(MEM, "rank %d: window #%u at offset %#llx, %llu bytes, descriptor %p", m->rank,
           m->regSeq, (unsigned long long)w->desc.offset, (unsigned long long)w->desc.size,
           (void*)w->dev);
}

void cco_mem_window_discard(cco_mem* m, cco_window_rec* w) { discard_window(m, w, true); }

cco_window_rec* cco_mem_window_find(cco_mem* m, ccoWindow_t handle) {
  for (cco_window_rec* w = m->windows; w; w = w->next)
    if (w->dev == handle) return w;
  return NULL;
}

void cco_mem_window_remove(cco_mem* m, cco_window_rec* w, bool park) {
  cco_window_rec** it = &m->windows;
  while (*it && *it != w) it = &(*it)->next;
  if (*it) *it = w->next;
  if (!park) {
    cco_mem_window_free_rec(m, w);
    return;
  }
  if (w->alloc) w->alloc->parkedWindows++;
  w->next = m->parked;
  m->parked = w;
}

cco_window_info cco_mem_window_info(const cco_window_rec* w) {
  cco_window_info info = {w->desc.offset, w->desc.size, w->localPtr};
  return info;
}

ccoResult_t cco_mem_window_foreach(cco_mem* m, ccoResult_t (*fn)(void* arg, const cco_window_info* win),
                                   void* arg) {
  ccoResult_t res = ccoSuccess;
  pthread_mutex_lock(&m->lock);
  for (cco_window_rec* w = m->windows; res == ccoSuccess && w; w = w->next) {
    cco_window_info info = cco_mem_window_info(w);
    res = fn(arg, &info);
  }
  pthread_mutex_unlock(&m->lock);
  return res;
}

cco_window_rec* cco_mem_window_covering(cco_mem* m, const void* ptr, uint64_t bytes, cco_window_rec** start) {
  const char* p = ptr;
  *start = NULL;
  for (cco_window_rec* w = m->windows; w; w = w->next) {
    if (p < w->localPtr || (uint64_t)(p - w->localPtr) > w->desc.size) continue;
    uint64_t off = (uint64_t)(p - w->localPtr);
    if (off == w->desc.size && bytes) continue; /* one past the end holds only an empty range */
    if (bytes <= w->desc.size - off) return w;
    if (!*start) *start = w;
  }
  return NULL;
}

bool cco_mem_in_own_slot(const cco_mem* m, const void* ptr) {
  const char* mine = cco_mem_slot_base(m, m->lsaRank);
  return m->flatBase && (const char*)ptr >= mine && (size_t)((const char*)ptr - mine) < m->slotSize;
}

ccoResult_t cco_mem_peer_ptr(cco_mem* m, const void* localPtr, int peerLsa, void** peerPtr) {
  const char* mine = cco_mem_slot_base(m, m->lsaRank);
  const char* p = localPtr;
  bool covered = false;
  pthread_mutex_lock(&m->lock);
  for (cco_window_rec* w = m->windows; w && !covered; w = w->next)
    covered = p >= w->localPtr && (size_t)(p - w->localPtr) < w->desc.size;
  pthread_mutex_unlock(&m->lock);
  if (!covered)
    return cco_error(m->err, ccoInvalidArgument, CCO_SUBSYS_MEM,
                     "ccoGetPeerPtr: %p is not inside a registered window", localPtr);
  *peerPtr = cco_mem_slot_base(m, peerLsa) + (p - mine);
  return ccoSuccess;
}
