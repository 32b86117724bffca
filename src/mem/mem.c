/* Flat VA, symmetric allocations and imports. */
#include "mem/mem.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/log.h"

char* cco_mem_slot_base(const cco_mem* m, int lsaRank) {
  return m->flatBase + (size_t)lsaRank * m->slotSize;
}

ccoResult_t cco_mem_init(cco_mem* m, const cco_mem_config* cfg) {
  memset(m, 0, sizeof(*m));
  pthread_mutex_init(&m->lock, NULL);
  m->lockReady = true;
  m->platform = cfg->platform;
  m->boot = cfg->boot;
  m->err = cfg->err;
  m->rank = cfg->topo->rank;
  m->nRanks = cfg->topo->nRanks;
  m->lsaSize = cfg->topo->lsaSize;
  m->lsaRank = cfg->topo->lsaRank;
  m->lsaWorld = cfg->topo->members[ccoTeamLsa];
  m->slotSize = cfg->slotSize;
  m->granularity = m->platform->ops->granularity(m->platform);
  if (m->granularity == 0 || (m->granularity & (m->granularity - 1)) ||
      m->slotSize % m->granularity)
    return cco_error(m->err, ccoInternalError, CCO_SUBSYS_MEM,
                     "platform granularity %zu does not divide the slot size %zu", m->granularity,
                     m->slotSize);
  void* base = NULL;
  size_t total = (size_t)m->lsaSize * m->slotSize;
  CCO_CHECK(m->platform->ops->reserve(m->platform, total, m->granularity, &base));
  m->flatBase = base;
  CCO_CHECK(cco_slot_alloc_create(m->slotSize, m->granularity, &m->slots));
  if (m->lsaSize > 1) {
    CCO_CHECK(cco_fd_exchange_open(&m->exchange, cfg->boot->secret, m->rank, cfg->boot->timeout,
                                   cfg->wakeFd, cfg->boot));
    m->exchangeOpen = true;
  }
  CCO_INFO(MEM, "rank %d: %s platform, flat VA %p: %d slots of %zu GiB, granularity %zu", m->rank,
           m->platform->ops->name, (void*)m->flatBase, m->lsaSize, m->slotSize >> 30,
           m->granularity);
  return ccoSuccess;
}

void cco_mem_unmap_peers(cco_mem* m, cco_alloc* a) {
  if (!a->peers) return;
  for (int p = 0; p < m->lsaSize; p++) {
    cco_peer_chunk* pc = &a->peers[p];
    if (!pc->mapped) continue;
    m->platform->ops->unmap(m->platform, cco_mem_slot_base(m, p) + a->offset, pc->chunk.size);
    m->platform->ops->chunk_release(m->platform, &pc->chunk);
    pc->mapped = false;
  }
  free(a->peers);
  a->peers = NULL;
}

/* Unlinks and releases an allocation (lock held). */
ccoResult_t cco_mem_free_alloc(cco_mem* m, cco_alloc* a) {
  cco_alloc** it = &m->allocs;
  while (*it && *it != a) it = &(*it)->next;
  if (*it) *it = a->next;
  cco_mem_unmap_peers(m, a);
  ccoResult_t res = m->platform->ops->unmap(m->platform, cco_mem_slot_base(m, m->lsaRank) + a->offset,
                                            a->chunk.size);
  m->platform->ops->chunk_release(m->platform, &a->chunk);
  cco_slot_alloc_give(m->slots, a->offset);
  free(a);
  return res;
}

static void free_windows(cco_mem* m, cco_window_rec** list) {
  while (*list) {
    cco_window_rec* w = *list;
    *list = w->next;
    cco_mem_window_free_rec(m, w);
  }
}

void cco_mem_fini(cco_mem* m) {
  if (!m->lockReady) return;
  pthread_mutex_lock(&m->lock);
  free_windows(m, &m->parked);
  free_windows(m, &m->windows);
  while (m->allocs) cco_mem_free_alloc(m, m->allocs);
  pthread_mutex_unlock(&m->lock);
  if (m->flatBase)
    m->platform->ops->unreserve(m->platform, m->flatBase, (size_t)m->lsaSize * m->slotSize);
  if (m->exchangeOpen) cco_fd_exchange_close(&m->exchange);
  cco_slot_alloc_destroy(m->slots);
  pthread_mutex_destroy(&m->lock);
  memset(m, 0, sizeof(*m));
}

cco_alloc* cco_mem_find_alloc(cco_mem* m, const void* ptr, size_t size) {
  const char* mine = cco_mem_slot_base(m, m->lsaRank);
  const char* p = ptr;
  if (p < mine || p >= mine + m->slotSize) return NULL;
  size_t off = (size_t)(p - mine);
  for (cco_alloc* a = m->allocs; a; a = a->next)
    if (!a->freed && off >= a->offset && off - a->offset < a->chunk.size && size <= a->chunk.size - (off - a->offset))
      return a;
  return NULL;
}

/* Places `chunk` in this rank's slot, at *at or (at == NULL) at the first
 * fit: the slot range first, then the mapping, so a failure leaves nothing
 * behind (lock held). */
static ccoResult_t place_chunk(cco_mem* m, cco_chunk* chunk, bool external, const size_t* at,
                               void** ptr) {
  cco_alloc* a = calloc(1, sizeof(*a));
  if (!a) return cco_error(m->err, ccoOutOfMemory, CCO_SUBSYS_MEM, "no memory for an allocation record");
  size_t offset = at ? *at : 0, block = 0;
  ccoResult_t res = at ? cco_slot_alloc_take_at(m->slots, offset, chunk->size, &block)
                       : cco_slot_alloc_take(m->slots, chunk->size, &offset, &block);
  if (res != ccoSuccess) {
    free(a);
    return cco_error(m->err, res, CCO_SUBSYS_MEM, "rank %d: %s", m->rank, cco_thread_last_error());
  }
  char* addr = cco_mem_slot_base(m, m->lsaRank) + offset;
  res = m->platform->ops->map(m->platform, addr, chunk);
  if (res != ccoSuccess) {
    cco_slot_alloc_give(m->slots, offset);
    free(a);
    return cco_error_quiet(m->err, res, "rank %d: %s", m->rank, cco_thread_last_error());
  }
  a->offset = offset;
  a->blockSize = block;
  a->chunk = *chunk;
  a->id = ++m->nextAllocId;
  a->external = external;
  a->next = m->allocs;
  m->allocs = a;
  *ptr = addr;
  return ccoSuccess;
}

ccoResult_t cco_mem_adopt_chunk(cco_mem* m, ccoResult_t made, cco_chunk* chunk, bool external,
                                const size_t* at, void** ptr) {
  if (made != ccoSuccess)
    return cco_error_quiet(m->err, made, "rank %d: %s", m->rank, cco_thread_last_error());
  ccoResult_t res = place_chunk(m, chunk, external, at, ptr);
  if (res != ccoSuccess) m->platform->ops->chunk_release(m->platform, chunk);
  return res;
}

ccoResult_t cco_mem_alloc(cco_mem* m, size_t size, void** ptr) {
  if (!ptr || size == 0)
    return cco_error(m->err, ccoInvalidArgument, CCO_SUBSYS_MEM, "ccoMemAlloc: %s",
                     ptr ? "size is 0" : "ptr is NULL");
  if (size > m->slotSize)
    return cco_error(m->err, ccoOutOfMemory, CCO_SUBSYS_MEM,
                     "rank %d: %zu bytes do not fit a slot of %zu bytes (perRankVmmSize)", m->rank,
                     size, m->slotSize);
  size_t rounded = (size + m->granularity - 1) & ~(m->granularity - 1);
  pthread_mutex_lock(&m->lock);
  cco_chunk chunk;
  ccoResult_t res = cco_mem_adopt_chunk(m, m->platform->ops->chunk_create(m->platform, rounded, &chunk),
                                        &chunk, false, NULL, ptr);
  pthread_mutex_unlock(&m->lock);
  return res;
}

ccoResult_t cco_mem_import(cco_mem* m, void* extPtr, size_t size, void** localPtr) {
  if (!extPtr || !localPtr || size == 0)
    return cco_error(m->err, ccoInvalidArgument, CCO_SUBSYS_MEM,
                     "ccoMemImport: NULL pointer or size 0");
  pthread_mutex_lock(&m->lock);
  cco_chunk chunk;
  ccoResult_t res = cco_mem_adopt_chunk(
      m, m->platform->ops->chunk_from_pointer(m->platform, extPtr, size, &chunk), &chunk, true, NULL,
      localPtr);
  pthread_mutex_unlock(&m->lock);
  return res;
}

ccoResult_t cco_mem_free(cco_mem* m, void* ptr) {
  pthread_mutex_lock(&m->lock);
  cco_alloc* a = ptr ? cco_mem_find_alloc(m, ptr, 0) : NULL;
  ccoResult_t res;
  if (!a || (char*)ptr != cco_mem_slot_base(m, m->lsaRank) + a->offset)
    res = cco_error(m->err, ccoInvalidArgument, CCO_SUBSYS_MEM,
                    "ccoMemFree: %p is not an allocation of this communicator (foreign pointer, "
                    "interior pointer or double free)",
                    ptr);
  else if (a->windows > a->parkedWindows)
    res = cco_error(m->err, ccoInvalidUsage, CCO_SUBSYS_MEM,
                    "ccoMemFree: %p still has %d registered window(s); deregister them first", ptr,
                    a->windows - a->parkedWindows);
  else if (a->windows > 0) { /* only parked windows: gone for the caller, released by ccoCommDestroy */
    a->freed = true;
    res = ccoSuccess;
  } else
    res = cco_mem_free_alloc(m, a);
  pthread_mutex_unlock(&m->lock);
  return res;
}
