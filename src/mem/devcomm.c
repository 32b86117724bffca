/*
 * Device communicators: the resources kernels use, described by a
 * ccoDevComm they take by value.
 *
 * Resource window layout (the same offsets in every rank's slot):
 *   [lsaBarrierOffset] uint32_t inbox[barriers][lsaSize]  written by peers
 *   [lsaEpochOffset]   uint32_t epoch[barriers]           this rank's own
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "core/error.h"
#include "mem/symm.h"
#include "transport/gda/gda.h"
#include "transport/sdma/sdma.h"

#define CCO_MAX_BARRIERS 4096u

typedef struct cco_devcomm_copy {
  void* ptr;
  struct cco_devcomm_copy* next;
} cco_devcomm_copy;

struct cco_devcomm_rec {
  uint64_t id;
  ccoWindow_t resourceWindow;
  void* abortHost; /* the abort word, host side */
  void* teamTables[ccoNumTeams];
  cco_devcomm_copy* copies;
  cco_sdma_state* sdma;
  gda_state* gda;
  struct cco_devcomm_rec* next;
};

/* Checks one rank's requirements; writes why on failure. */
static ccoResult_t validate(const ccoDevCommRequirements* r, char* why, size_t size) {
#define CCO_REQ_FAIL(...) return (snprintf(why, size, __VA_ARGS__), ccoInvalidArgument)
  if (!r) CCO_REQ_FAIL("requirements are NULL");
  if (r->magic != CCO_DEV_COMM_REQUIREMENTS_MAGIC)
    CCO_REQ_FAIL("bad magic %#x: start from CCO_DEV_COMM_REQUIREMENTS_INITIALIZER", r->magic);
  if (r->size != sizeof(ccoDevCommRequirements))
    CCO_REQ_FAIL("size %u, this library expects %zu (built against another cco?)", r->size,
                 sizeof(ccoDevCommRequirements));
  if (r->version != CCO_DEV_COMM_REQUIREMENTS_VERSION)
    CCO_REQ_FAIL("version %u, this library expects %u", r->version, CCO_DEV_COMM_REQUIREMENTS_VERSION);
  if (r->gdaConnectionType > CCO_GDA_CONNECTION_RAIL)
    CCO_REQ_FAIL("gdaConnectionType %u is not NONE, CROSSNODE, FULL or RAIL", r->gdaConnectionType);
  if (r->gdaContextCount < 1 || r->gdaContextCount > 64)
    CCO_REQ_FAIL("gdaContextCount %u out of range 1..64", r->gdaContextCount);
  if (r->gdaSignalCount > (1u << 20)) CCO_REQ_FAIL("gdaSignalCount %u over 1048576", r->gdaSignalCount);
  if (r->gdaCounterCount > (1u << 20))
    CCO_REQ_FAIL("gdaCounterCount %u over 1048576", r->gdaCounterCount);
  if (r->gdaQueueDepth < 16 || r->gdaQueueDepth > 65536 || (r->gdaQueueDepth & (r->gdaQueueDepth - 1)))
    CCO_REQ_FAIL("gdaQueueDepth %u is not a power of two in 16..65536", r->gdaQueueDepth);
  if (r->gdaTrafficClass > 255) CCO_REQ_FAIL("gdaTrafficClass %u over 255", r->gdaTrafficClass);
  if (r->lsaBarrierCount > CCO_MAX_BARRIERS || r->barrierCount > CCO_MAX_BARRIERS ||
      r->railGdaBarrierCount > CCO_MAX_BARRIERS)
    CCO_REQ_FAIL("barrier counts (lsa %u, world %u, rail %u) over %u", r->lsaBarrierCount,
                 r->barrierCount, r->railGdaBarrierCount, CCO_MAX_BARRIERS);
  if (r->sdmaQueueCount > 8) CCO_REQ_FAIL("sdmaQueueCount %u over 8", r->sdmaQueueCount);
  if (r->reserved[0] || r->reserved[1] || r->reserved[2]) CCO_REQ_FAIL("reserved fields are not zero");
  return ccoSuccess;
#undef CCO_REQ_FAIL
}

typedef struct {
  int32_t status;
  uint32_t pad;
  ccoDevCommRequirements reqs;
} req_record;

/* Every rank must agree before anything is allocated. */
static ccoResult_t agree(ccoComm* comm, const ccoDevCommRequirements* reqs) {
  char why[256] = "";
  req_record* all = calloc((size_t)comm->nRanks, sizeof(req_record));
  if (!all) return cco_error(comm, ccoOutOfMemory, CCO_SUBSYS_MEM, "no memory");
  req_record* mine = &all[comm->rank];
  mine->status = validate(reqs, why, sizeof(why));
  if (mine->status == ccoSuccess) mine->reqs = *reqs;
  ccoResult_t res = cco_bootstrap_allgather(&comm->boot, comm, all, sizeof(req_record));
  for (int r = 0; res == ccoSuccess && r < comm->nRanks; r++) {
    if (all[r].status != ccoSuccess)
      res = r == comm->rank ? cco_error(comm, ccoInvalidArgument, CCO_SUBSYS_MEM,
                                        "ccoDevCommCreate: %s", why)
                            : cco_error(comm, ccoInvalidUsage, CCO_SUBSYS_MEM,
                                        "rank %d: ccoDevCommCreate failed on rank %d (bad "
                                        "requirements there)", comm->rank, r);
    else if (memcmp(&all[r].reqs, &all[0].reqs, sizeof(ccoDevCommRequirements)) != 0)
      res = cco_error(comm, ccoInvalidUsage, CCO_SUBSYS_MEM,
                      "rank %d: ranks 0 and %d pass different device communicator requirements",
                      comm->rank, r);
  }
  free(all);
  return res;
}

static void free_rec_resources(ccoComm* comm, cco_devcomm_rec* d) {
  cco_symm* m = &comm->mem;
  cco_sdma_state_destroy(comm, d->sdma);
  d->sdma = NULL;
  cco_gda_state_destroy(comm, d->gda);
  d->gda = NULL;
  while (d->copies) {
    cco_devcomm_copy* c = d->copies;
    d->copies = c->next;
    m->platform.ops->desc_free(&m->platform, c->ptr);
    free(c);
  }
  for (int k = 0; k < ccoNumTeams; k++)
    if (d->teamTables[k]) m->platform.ops->desc_free(&m->platform, d->teamTables[k]);
  if (d->abortHost) m->platform.ops->hostmap_free(&m->platform, d->abortHost);
}

/* Team member tables and the abort word (mem lock held). */
static ccoResult_t make_tables(ccoComm* comm, cco_devcomm_rec* d, ccoDevComm* dc) {
  cco_symm* m = &comm->mem;
  uint64_t dev = 0;
  CCO_CHECK(m->platform.ops->hostmap_alloc(&m->platform, sizeof(uint32_t), &d->abortHost, &dev));
  dc->abortFlag = dev;
  for (int k = 0; k < ccoNumTeams; k++) {
    ccoTeam_t t = comm->topo.teams[k];
    size_t bytes = (size_t)t.nRanks * sizeof(int32_t);
    int32_t* host = malloc(bytes);
    if (!host) return cco_error(comm, ccoOutOfMemory, CCO_SUBSYS_MEM, "no memory");
    for (int i = 0; i < t.nRanks; i++) host[i] = comm->topo.members[k][i];
    ccoResult_t res = m->platform.ops->desc_alloc(&m->platform, bytes, &d->teamTables[k]);
    if (res == ccoSuccess) res = m->platform.ops->copy_to_device(&m->platform, d->teamTables[k], host, bytes);
    free(host);
    CCO_CHECK(res);
    dc->teams[k] = t;
    dc->teamMembers[k] = (uint64_t)(uintptr_t)d->teamTables[k];
  }
  return ccoSuccess;
}

static cco_devcomm_rec* find_rec(cco_symm* m, uint64_t id, cco_devcomm_rec*** link) {
  for (cco_devcomm_rec** it = &m->devcomms; *it; it = &(*it)->next)
    if ((*it)->id == id) {
      if (link) *link = it;
      return *it;
    }
  return NULL;
}

ccoResult_t ccoDevCommCreate(ccoComm* comm, const ccoDevCommRequirements* reqs, ccoDevComm* devComm) {
  if (!cco_comm_is_valid(comm))
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_MEM, "ccoDevCommCreate: invalid communicator");
  /* A NULL output is a local mistake; report it through the common
   * verdict so the other ranks do not wait for this one. */
  CCO_CHECK(cco_comm_begin_collective(comm, "ccoDevCommCreate"));
  ccoResult_t res = agree(comm, devComm ? reqs : NULL);
  cco_comm_end_collective(comm, ccoSuccess);
  if (res != ccoSuccess) return res;

  cco_symm* m = &comm->mem;
  uint32_t barriers = reqs->lsaBarrierCount + reqs->barrierCount;
  uint32_t sdmaQueues = cco_sdma_enabled() ? (reqs->sdmaQueueCount ? reqs->sdmaQueueCount : 2) : 0;
  size_t inboxBytes = (size_t)barriers * (size_t)m->lsaSize * sizeof(uint32_t);
  size_t signalsOffset = (inboxBytes + (size_t)barriers * sizeof(uint32_t) + 63) & ~(size_t)63;
  size_t layout = signalsOffset + cco_sdma_signal_bytes(m->lsaSize, sdmaQueues);
  size_t winBytes = layout ? (layout + 4095) & ~(size_t)4095 : 4096;
  ccoDevComm dc;
  memset(&dc, 0, sizeof(dc));
  void* local = NULL;
  ccoWindow_t win = NULL;
  CCO_CHECK(ccoWindowRegisterAlloc(comm, winBytes, &win, &local));

  cco_devcomm_rec* d = calloc(1, sizeof(*d));
  void* zeros = calloc(1, winBytes);
  ccoWindowDevice wd;
  res = ccoWindowGetInfo(comm, win, &wd, NULL);
  pthread_mutex_lock(&m->lock);
  if (res == ccoSuccess && (!d || !zeros))
    res = cco_error(comm, ccoOutOfMemory, CCO_SUBSYS_MEM, "no memory");
  if (res == ccoSuccess) res = m->platform.ops->copy_to_device(&m->platform, local, zeros, winBytes);
  if (res == ccoSuccess) res = make_tables(comm, d, &dc);
  pthread_mutex_unlock(&m->lock);
  /* Rings and the engine (which takes the mem lock to start). */
  if (res == ccoSuccess && sdmaQueues)
    res = cco_sdma_state_create(comm, sdmaQueues, wd.winBase, signalsOffset, &d->sdma, &dc.sdma);
  /* GDA: collective, so every rank takes part even after a local failure
   * (which it reports there); ids advance alike on every rank. */
  pthread_mutex_lock(&m->lock);
  uint64_t id = ++m->nextDevCommId;
  pthread_mutex_unlock(&m->lock);
  if (cco_gda_needed(comm, reqs->gdaConnectionType)) {
    gda_state* gda = NULL;
    ccoResult_t g = cco_gda_state_create(comm, id, reqs, &gda, &dc.gda);
    if (g == ccoSuccess && d) d->gda = gda;
    else if (g == ccoSuccess) cco_gda_state_destroy(comm, gda);
    if (res == ccoSuccess) res = g;
  }
  pthread_mutex_lock(&m->lock);
  if (res == ccoSuccess) {
    d->id = id;
    d->resourceWindow = win;
    d->next = m->devcomms;
    m->devcomms = d;
  }
  pthread_mutex_unlock(&m->lock);
  free(zeros);
  /* Nobody may arrive at a barrier in this window before every rank has
   * zeroed its inboxes; the barrier also makes a local failure collective. */
  int32_t ok = res == ccoSuccess, allOk = 1;
  int32_t* oks = calloc((size_t)comm->nRanks, sizeof(int32_t));
  ccoResult_t agreed = oks ? ccoSuccess : ccoOutOfMemory;
  if (oks) {
    oks[comm->rank] = ok;
    agreed = ccoBootstrapAllGather(comm, &oks[comm->rank], oks, sizeof(int32_t));
    for (int r = 0; agreed == ccoSuccess && r < comm->nRanks; r++) allOk &= oks[r];
    free(oks);
  }
  if (res != ccoSuccess || agreed != ccoSuccess || !allOk) {
    pthread_mutex_lock(&m->lock);
    if (d && d->id) {
      cco_devcomm_rec** link = NULL;
      if (find_rec(m, d->id, &link)) *link = d->next;
    }
    if (d) free_rec_resources(comm, d);
    pthread_mutex_unlock(&m->lock);
    free(d);
    ccoWindowDeregister(comm, win);
    if (res != ccoSuccess) return res;
    if (agreed != ccoSuccess) return agreed;
    return cco_error(comm, ccoRemoteError, CCO_SUBSYS_MEM,
                     "rank %d: ccoDevCommCreate failed on another rank", comm->rank);
  }
  dc.magic = CCO_DEV_COMM_MAGIC;
  dc.version = CCO_DEV_COMM_VERSION;
  dc.rank = comm->rank;
  dc.worldSize = comm->nRanks;
  dc.lsaRank = comm->topo.lsaRank;
  dc.lsaSize = comm->topo.lsaSize;
  dc.node = comm->topo.node;
  dc.nNodes = comm->topo.nNodes;
  dc.flatBase = (uint64_t)(uintptr_t)m->flatBase;
  dc.slotSize = m->slotSize;
  dc.resourceWindow = win;
  dc.resourceBase = wd.winBase;
  dc.lsaBarrierCount = barriers;
  dc.barrierCount = reqs->barrierCount;
  dc.lsaBarrierOffset = 0;
  dc.lsaEpochOffset = (uint32_t)inboxBytes;
  dc.sdmaQueueCount = sdmaQueues; /* 0 when CCO_ENABLE_SDMA=0 */
  dc.gdaConnectionType = reqs->gdaConnectionType;
  dc.gdaContextCount = reqs->gdaContextCount;
  dc.gdaSignalCount = reqs->gdaSignalCount;
  dc.gdaCounterCount = reqs->gdaCounterCount;
  dc.gdaQueueDepth = reqs->gdaQueueDepth;
  dc.handle = d->id;
  dc.lsaScopeGpu = m->lsaOneDevice;
  *devComm = dc;
  CCO_INFO(MEM, "rank %d: device communicator %llu: %u LSA barriers, resource window %p",
           comm->rank, (unsigned long long)d->id, barriers, (void*)win);
  return ccoSuccess;
}

ccoResult_t ccoDevCommDestroy(ccoComm* comm, ccoDevComm* devComm) {
  if (!cco_comm_is_valid(comm))
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_MEM, "ccoDevCommDestroy: invalid communicator");
  cco_symm* m = &comm->mem;
  pthread_mutex_lock(&m->lock);
  cco_devcomm_rec** link = NULL;
  cco_devcomm_rec* d = devComm && devComm->magic == CCO_DEV_COMM_MAGIC
                           ? find_rec(m, devComm->handle, &link)
                           : NULL;
  if (d) {
    *link = d->next;
    free_rec_resources(comm, d);
  }
  pthread_mutex_unlock(&m->lock);
  if (!d)
    return cco_error(comm, ccoInvalidArgument, CCO_SUBSYS_MEM,
                     "ccoDevCommDestroy: not a live device communicator of this communicator");
  ccoResult_t res = ccoWindowDeregister(comm, d->resourceWindow);
  free(d);
  devComm->magic = 0;
  return res;
}

ccoResult_t ccoDevCommCopyToDevice(ccoComm* comm, const ccoDevComm* devComm, ccoDevComm** devicePtr) {
  if (!cco_comm_is_valid(comm))
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_MEM, "ccoDevCommCopyToDevice: invalid communicator");
  if (!devComm || !devicePtr)
    return cco_error(comm, ccoInvalidArgument, CCO_SUBSYS_MEM, "ccoDevCommCopyToDevice: NULL argument");
  cco_symm* m = &comm->mem;
  pthread_mutex_lock(&m->lock);
  cco_devcomm_rec* d = devComm->magic == CCO_DEV_COMM_MAGIC ? find_rec(m, devComm->handle, NULL) : NULL;
  cco_devcomm_copy* c = d ? calloc(1, sizeof(*c)) : NULL;
  ccoResult_t res = !d ? cco_error(comm, ccoInvalidArgument, CCO_SUBSYS_MEM,
                                   "ccoDevCommCopyToDevice: not a live device communicator")
                  : !c ? cco_error(comm, ccoOutOfMemory, CCO_SUBSYS_MEM, "no memory")
                       : m->platform.ops->desc_alloc(&m->platform, sizeof(ccoDevComm), &c->ptr);
  if (res == ccoSuccess) {
    res = m->platform.ops->copy_to_device(&m->platform, c->ptr, devComm, sizeof(ccoDevComm));
    if (res != ccoSuccess) m->platform.ops->desc_free(&m->platform, c->ptr);
  }
  if (res == ccoSuccess) {
    c->next = d->copies;
    d->copies = c;
    *devicePtr = c->ptr;
  } else {
    free(c);
  }
  pthread_mutex_unlock(&m->lock);
  return res;
}

void cco_devcomm_abort_all(cco_symm* m) {
  pthread_mutex_lock(&m->lock);
  for (cco_devcomm_rec* d = m->devcomms; d; d = d->next)
    if (d->abortHost) __atomic_store_n((uint32_t*)d->abortHost, 1u, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&m->lock);
}

void cco_devcomm_free_all(ccoComm* comm) {
  cco_symm* m = &comm->mem;
  while (m->devcomms) {
    cco_devcomm_rec* d = m->devcomms;
    m->devcomms = d->next;
    free_rec_resources(comm, d); /* its window goes with the other windows */
    free(d);
  }
  cco_gda_proxy_free(comm);
}
