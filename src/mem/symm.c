/* Flat VA, symmetric allocations and imports. */
#include "mem/symm.h"

#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "core/env.h"
#include "core/error.h"

char* cco_symm_slot_base(const cco_symm* m, int lsaRank) {
  return m->flatBase + (size_t)lsaRank * m->slotSize;
}

ccoResult_t cco_symm_init(ccoComm* comm) {
  cco_symm* m = &comm->mem;
  m->lsaSize = comm->topo.lsaSize;
  m->lsaRank = comm->topo.lsaRank;
  m->lsaWorld = comm->topo.members[ccoTeamLsa];
  m->slotSize = comm->perRankVmmSize;
  m->granularity = m->platform.ops->granularity(&m->platform);
  if (m->granularity == 0 || (m->granularity & (m->granularity - 1)) ||
      m->slotSize % m->granularity)
    return cco_error(comm, ccoInternalError, CCO_SUBSYS_MEM,
                     "platform granularity %zu does not divide the slot size %zu", m->granularity,
                     m->slotSize);
  void* base = NULL;
  size_t total = (size_t)m->lsaSize * m->slotSize;
  CCO_CHECK(m->platform.ops->reserve(&m->platform, total, m->granularity, &base));
  m->flatBase = base;
  ccoResult_t res = cco_slot_alloc_create(m->slotSize, m->granularity, &m->slots);
  if (res != ccoSuccess) return res;
  if (m->lsaSize > 1) {
    CCO_CHECK(cco_lsa_exchange_open(&m->exchange, comm->boot.secret, comm->rank,
                                    comm->boot.timeout, comm->wakeFd));
    m->exchangeOpen = true;
  }
  CCO_INFO(MEM, "rank %d: %s platform, flat VA %p: %d slots of %zu GiB, granularity %zu",
           comm->rank, m->platform.ops->name, (void*)m->flatBase, m->lsaSize, m->slotSize >> 30,
           m->granularity);
  return ccoSuccess;
}

void cco_symm_unmap_peers(cco_symm* m, cco_alloc* a) {
  if (!a->peers) return;
  for (int p = 0; p < m->lsaSize; p++) {
    cco_peer_chunk* pc = &a->peers[p];
    if (!pc->mapped) continue;
    m->platform.ops->unmap(&m->platform, cco_symm_slot_base(m, p) + a->offset, pc->chunk.size);
    m->platform.ops->chunk_release(&m->platform, &pc->chunk);
    pc->mapped = false;
  }
  free(a->peers);
  a->peers = NULL;
}

/* Unlinks and releases an allocation (mem lock held). */
ccoResult_t cco_symm_free_alloc(cco_symm* m, cco_alloc* a) {
  cco_alloc** it = &m->allocs;
  while (*it && *it != a) it = &(*it)->next;
  if (*it) *it = a->next;
  cco_symm_unmap_peers(m, a);
  ccoResult_t res = m->platform.ops->unmap(&m->platform, cco_symm_slot_base(m, m->lsaRank) + a->offset,
                                           a->chunk.size);
  m->platform.ops->chunk_release(&m->platform, &a->chunk);
  cco_slot_alloc_give(m->slots, a->offset);
  free(a);
  return res;
}

void cco_symm_fini(ccoComm* comm) {
  cco_symm* m = &comm->mem;
  if (m->platformOpen) {
    pthread_mutex_lock(&m->lock);
    cco_devcomm_free_all(comm);
    while (m->windows) {
      cco_window_rec* w = m->windows;
      m->windows = w->next;
      cco_window_free_rec(m, w);
    }
    while (m->allocs) cco_symm_free_alloc(m, m->allocs);
    pthread_mutex_unlock(&m->lock);
    if (m->flatBase)
      m->platform.ops->unreserve(&m->platform, m->flatBase, (size_t)m->lsaSize * m->slotSize);
    cco_platform_close(&m->platform);
  }
  if (m->exchangeOpen) cco_lsa_exchange_close(&m->exchange);
  cco_slot_alloc_destroy(m->slots);
  pthread_mutex_destroy(&m->lock);
  memset(m, 0, sizeof(*m));
}

cco_alloc* cco_symm_find_alloc(cco_symm* m, const void* ptr, size_t size) {
  const char* mine = cco_symm_slot_base(m, m->lsaRank);
  const char* p = ptr;
  if (p < mine || p >= mine + m->slotSize) return NULL;
  size_t off = (size_t)(p - mine);
  for (cco_alloc* a = m->allocs; a; a = a->next)
    if (off >= a->offset && off - a->offset < a->chunk.size && size <= a->chunk.size - (off - a->offset))
      return a;
  return NULL;
}

/* Places `chunk` in this rank's slot: the slot range first, then the
 * mapping, so a failure leaves nothing behind. */
static ccoResult_t place_chunk(ccoComm* comm, cco_chunk* chunk, bool external, void** ptr) {
  cco_symm* m = &comm->mem;
  cco_alloc* a = calloc(1, sizeof(*a));
  if (!a) return cco_error(comm, ccoOutOfMemory, CCO_SUBSYS_MEM, "no memory for an allocation record");
  size_t offset = 0, block = 0;
  ccoResult_t res = cco_slot_alloc_take(m->slots, chunk->size, &offset, &block);
  if (res != ccoSuccess) {
    free(a);
    return cco_error(comm, res, CCO_SUBSYS_MEM, "rank %d: %s", comm->rank, cco_thread_last_error());
  }
  char* addr = cco_symm_slot_base(m, m->lsaRank) + offset;
  res = m->platform.ops->map(&m->platform, addr, chunk);
  if (res != ccoSuccess) {
    cco_slot_alloc_give(m->slots, offset);
    free(a);
    return cco_error_quiet(comm, res, "rank %d: %s", comm->rank, cco_thread_last_error());
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

ccoResult_t ccoMemAlloc(ccoComm* comm, size_t size, void** ptr) {
  CCO_VALIDATE_COMM(comm);
  if (!ptr || size == 0)
    return cco_error(comm, ccoInvalidArgument, CCO_SUBSYS_MEM, "ccoMemAlloc: %s",
                     ptr ? "size is 0" : "ptr is NULL");
  cco_symm* m = &comm->mem;
  if (size > m->slotSize)
    return cco_error(comm, ccoOutOfMemory, CCO_SUBSYS_MEM,
                     "rank %d: %zu bytes do not fit a slot of %zu bytes (perRankVmmSize)",
                     comm->rank, size, m->slotSize);
  size_t rounded = (size + m->granularity - 1) & ~(m->granularity - 1);
  pthread_mutex_lock(&m->lock);
  cco_chunk chunk;
  ccoResult_t res = m->platform.ops->chunk_create(&m->platform, rounded, &chunk);
  if (res == ccoSuccess) {
    res = place_chunk(comm, &chunk, false, ptr);
    if (res != ccoSuccess) m->platform.ops->chunk_release(&m->platform, &chunk);
  } else {
    res = cco_error_quiet(comm, res, "rank %d: %s", comm->rank, cco_thread_last_error());
  }
  pthread_mutex_unlock(&m->lock);
  return res;
}

ccoResult_t ccoMemImport(ccoComm* comm, void* extPtr, size_t size, void** localPtr) {
  CCO_VALIDATE_COMM(comm);
  if (!extPtr || !localPtr || size == 0)
    return cco_error(comm, ccoInvalidArgument, CCO_SUBSYS_MEM, "ccoMemImport: NULL pointer or size 0");
  cco_symm* m = &comm->mem;
  pthread_mutex_lock(&m->lock);
  cco_chunk chunk;
  ccoResult_t res = m->platform.ops->chunk_from_pointer(&m->platform, extPtr, size, &chunk);
  if (res == ccoSuccess) {
    res = place_chunk(comm, &chunk, true, localPtr);
    if (res != ccoSuccess) m->platform.ops->chunk_release(&m->platform, &chunk);
  } else {
    res = cco_error_quiet(comm, res, "rank %d: %s", comm->rank, cco_thread_last_error());
  }
  pthread_mutex_unlock(&m->lock);
  return res;
}

ccoResult_t ccoMemFree(ccoComm* comm, void* ptr) {
  CCO_VALIDATE_COMM(comm);
  cco_symm* m = &comm->mem;
  pthread_mutex_lock(&m->lock);
  cco_alloc* a = ptr ? cco_symm_find_alloc(m, ptr, 0) : NULL;
  ccoResult_t res;
  if (!a || (char*)ptr != cco_symm_slot_base(m, m->lsaRank) + a->offset)
    res = cco_error(comm, ccoInvalidArgument, CCO_SUBSYS_MEM,
                    "ccoMemFree: %p is not an allocation of this communicator (foreign pointer, "
                    "interior pointer or double free)",
                    ptr);
  else if (a->windows > 0)
    res = cco_error(comm, ccoInvalidUsage, CCO_SUBSYS_MEM,
                    "ccoMemFree: %p still has %d registered window(s); deregister them first", ptr,
                    a->windows);
  else
    res = cco_symm_free_alloc(m, a);
  pthread_mutex_unlock(&m->lock);
  return res;
}

ccoResult_t ccoCommPlatform(const ccoComm* comm, ccoPlatform_t* platform) {
  CCO_VALIDATE_COMM(comm);
  if (!platform) return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_MEM, "platform is NULL");
  *platform = comm->mem.platform.kind == CCO_PLATFORM_CUDA ? ccoPlatformCuda : ccoPlatformHost;
  return ccoSuccess;
}

ccoResult_t ccoCommCudaDevice(const ccoComm* comm, int* device) {
  CCO_VALIDATE_COMM(comm);
  if (!device) return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_MEM, "device is NULL");
  *device = comm->mem.platform.kind == CCO_PLATFORM_CUDA ? comm->mem.platform.identity.device : -1;
  return ccoSuccess;
}

ccoResult_t ccoCommFlatVa(const ccoComm* comm, void** base, size_t* slotSize) {
  CCO_VALIDATE_COMM(comm);
  if (!base || !slotSize)
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_MEM, "base or slotSize is NULL");
  *base = comm->mem.flatBase;
  *slotSize = comm->mem.slotSize;
  return ccoSuccess;
}
