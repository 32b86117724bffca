/*
 * Device communicators: the resources kernels use, described by a
 * ccoDevComm they take by value.
 *
 * This file owns what every device communicator has (the abort word, the
 * team member tables, the resource window, device copies) and composes the
 * transports: each says how much of the resource window it needs and fills
 * its part of the ccoDevComm (src/transport/transport.h). Resource window
 * layout (the same offsets in every rank's slot): the transports' parts in
 * registry order, each 64-byte aligned; LSA's barrier inboxes come first.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/log.h"
#include "comm/comm.h"

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
  void* transportState[CCO_MAX_TRANSPORTS]; /* each transport's devState */
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
  if (r->gdaConnectionType > ccoGdaConnectionRail)
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
  if (!all) return cco_error(&comm->err, ccoOutOfMemory, CCO_SUBSYS_MEM, "no memory");
  req_record* mine = &all[comm->rank];
  mine->status = validate(reqs, why, sizeof(why));
  if (mine->status == ccoSuccess) mine->reqs = *reqs;
  ccoResult_t res = cco_bootstrap_allgather(&comm->boot, &comm->err, all, sizeof(req_record));
  for (int r = 0; res == ccoSuccess && r < comm->nRanks; r++) {
    if (all[r].status != ccoSuccess)
      res = r == comm->rank ? cco_error(&comm->err, ccoInvalidArgument, CCO_SUBSYS_MEM,
                                        "ccoDevCommCreate: %s", why)
                            : cco_error(&comm->err, ccoInvalidUsage, CCO_SUBSYS_MEM,
                                        "rank %d: ccoDevCommCreate failed on rank %d (bad "
                                        "requirements there)", comm->rank, r);
    else if (memcmp(&all[r].reqs, &all[0].reqs, sizeof(ccoDevCommRequirements)) != 0)
      res = cco_error(&comm->err, ccoInvalidUsage, CCO_SUBSYS_MEM,
                      "rank %d: ranks 0 and %d pass different device communicator requirements",
                      comm->rank, r);
  }
  free(all);
  return res;
}

/* Transports in reverse order, then what this file made (mem lock held). */
static void free_rec_resources(ccoComm* comm, cco_devcomm_rec* d) {
  cco_platform* p = &comm->platform;
  for (int i = comm->nTransports - 1; i >= 0; i--) {
    cco_transport* t = &comm->transports[i];
    if (d->transportState[i] && t->ops->devcomm_destroy)
      t->ops->devcomm_destroy(t->state, d->transportState[i]);
    d->transportState[i] = NULL;
  }
  while (d->copies) {
    cco_devcomm_copy* c = d->copies;
    d->copies = c->next;
    p->ops->desc_free(p, c->ptr);
    free(c);
  }
  for (int k = 0; k < ccoNumTeams; k++)
    if (d->teamTables[k]) p->ops->desc_free(p, d->teamTables[k]);
  if (d->abortHost) p->ops->hostmap_free(p, d->abortHost);
}

/* Team member tables and the abort word (mem lock held). */
static ccoResult_t make_tables(ccoComm* comm, cco_devcomm_rec* d, ccoDevComm* dc) {
  cco_platform* p = &comm->platform;
  uint64_t dev = 0;
  CCO_CHECK(p->ops->hostmap_alloc(p, sizeof(uint32_t), &d->abortHost, &dev));
  dc->abortFlag = dev;
  for (int k = 0; k < ccoNumTeams; k++) {
    ccoTeam t = comm->topo.teams[k];
    size_t bytes = (size_t)t.nRanks * sizeof(int32_t);
    int32_t* host = malloc(bytes);
    if (!host) return cco_error(&comm->err, ccoOutOfMemory, CCO_SUBSYS_MEM, "no memory");
    for (int i = 0; i < t.nRanks; i++) host[i] = comm->topo.members[k][i];
    ccoResult_t res = p->ops->desc_alloc(p, bytes, &d->teamTables[k]);
    if (res == ccoSuccess) res = p->ops->copy_to_device(p, d->teamTables[k], host, bytes);
    free(host);
    CCO_CHECK(res);
    dc->teams[k] = t;
    dc->teamMembers[k] = (uint64_t)(uintptr_t)d->teamTables[k];
  }
  return ccoSuccess;
}

static cco_devcomm_rec* find_rec(ccoComm* comm, uint64_t id, cco_devcomm_rec*** link) {
  for (cco_devcomm_rec** it = &comm->devcomms; *it; it = &(*it)->next)
    if ((*it)->id == id) {
      if (link) *link = it;
      return *it;
    }
  return NULL;
}

/* Where each transport's part of the resource window starts, and the
 * window's size (a page at least). */
static size_t layout(ccoComm* comm, const ccoDevCommRequirements* reqs, size_t* offsets) {
  size_t end = 0;
  for (int i = 0; i < comm->nTransports; i++) {
    cco_transport* t = &comm->transports[i];
    offsets[i] = (end + 63) & ~(size_t)63;
    end = offsets[i] + (t->ops->devcomm_bytes ? t->ops->devcomm_bytes(t->state, reqs) : 0);
  }
  return end ? (end + 4095) & ~(size_t)4095 : 4096;
}

/* Each transport fills its part of dc. Collective transports take part on
 * every rank, also after a local failure, so their collectives stay
 * matched; what they made then goes with the rest. */
static ccoResult_t create_transport_parts(ccoComm* comm, cco_devcomm_rec* d, const size_t* offsets,
                                          cco_devcomm_setup setup, ccoResult_t res, ccoDevComm* dc) {
  for (int i = 0; i < comm->nTransports; i++) {
    cco_transport* t = &comm->transports[i];
    if (!t->ops->devcomm_create || (res != ccoSuccess && !t->ops->devcomm_collective)) continue;
    setup.resourceOffset = offsets[i];
    void* devState = NULL;
    ccoResult_t r = t->ops->devcomm_create(t->state, &setup, dc, &devState);
    if (r == ccoSuccess && d) d->transportState[i] = devState;
    else if (r == ccoSuccess && devState && t->ops->devcomm_destroy) {
      pthread_mutex_lock(&comm->mem.lock);
      t->ops->devcomm_destroy(t->state, devState);
      pthread_mutex_unlock(&comm->mem.lock);
    }
    if (res == ccoSuccess) res = r;
  }
  return res;
}

ccoResult_t ccoDevCommCreate(ccoComm* comm, const ccoDevCommRequirements* reqs, ccoDevComm* devComm) {
  CCO_VALIDATE_COMM(comm);
  /* A NULL output is a local mistake; report it through the common
   * verdict so the other ranks do not wait for this one. */
  CCO_CHECK(cco_comm_begin_collective(comm, "ccoDevCommCreate"));
  ccoResult_t res = agree(comm, devComm ? reqs : NULL);
  cco_comm_end_collective(comm, ccoSuccess);
  if (res != ccoSuccess) return res;

  cco_mem* m = &comm->mem;
  size_t offsets[CCO_MAX_TRANSPORTS];
  size_t winBytes = layout(comm, reqs, offsets);
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
    res = cco_error(&comm->err, ccoOutOfMemory, CCO_SUBSYS_MEM, "no memory");
  if (res == ccoSuccess) res = comm->platform.ops->copy_to_device(&comm->platform, local, zeros, winBytes);
  if (res == ccoSuccess) res = make_tables(comm, d, &dc);
  /* Ids advance alike on every rank (the GDA proxy matches states by id). */
  uint64_t id = ++comm->nextDevCommId;
  pthread_mutex_unlock(&m->lock);
  free(zeros);
  cco_devcomm_setup setup = {reqs, id, wd.winBase, 0};
  res = create_transport_parts(comm, d, offsets, setup, res, &dc);
  pthread_mutex_lock(&m->lock);
  if (res == ccoSuccess) {
    d->id = id;
    d->resourceWindow = win;
    d->next = comm->devcomms;
    comm->devcomms = d;
  }
  pthread_mutex_unlock(&m->lock);
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
      if (find_rec(comm, d->id, &link)) *link = d->next;
    }
    if (d) free_rec_resources(comm, d);
    pthread_mutex_unlock(&m->lock);
    free(d);
    ccoWindowDeregister(comm, win);
    if (res != ccoSuccess) return res;
    if (agreed != ccoSuccess) return agreed;
    return cco_error(&comm->err, ccoRemoteError, CCO_SUBSYS_MEM,
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
  dc.handle = d->id;
  *devComm = dc;
  CCO_INFO(MEM, "rank %d: device communicator %llu: %u LSA barriers, resource window %p",
           comm->rank, (unsigned long long)d->id, dc.lsaBarrierCount, (void*)win);
  return ccoSuccess;
}

ccoResult_t ccoDevCommDestroy(ccoComm* comm, ccoDevComm* devComm) {
  CCO_VALIDATE_COMM(comm);
  cco_mem* m = &comm->mem;
  pthread_mutex_lock(&m->lock);
  cco_devcomm_rec** link = NULL;
  cco_devcomm_rec* d = devComm && devComm->magic == CCO_DEV_COMM_MAGIC
                           ? find_rec(comm, devComm->handle, &link)
                           : NULL;
  if (d) {
    *link = d->next;
    free_rec_resources(comm, d);
  }
  pthread_mutex_unlock(&m->lock);
  if (!d)
    return cco_error(&comm->err, ccoInvalidArgument, CCO_SUBSYS_MEM,
                     "ccoDevCommDestroy: not a live device communicator of this communicator");
  ccoResult_t res = ccoWindowDeregister(comm, d->resourceWindow);
  free(d);
  devComm->magic = 0;
  return res;
}

ccoResult_t ccoDevCommCopyToDevice(ccoComm* comm, const ccoDevComm* devComm, ccoDevComm** devicePtr) {
  CCO_VALIDATE_COMM(comm);
  if (!devComm || !devicePtr)
    return cco_error(&comm->err, ccoInvalidArgument, CCO_SUBSYS_MEM, "ccoDevCommCopyToDevice: NULL argument");
  cco_mem* m = &comm->mem;
  cco_platform* p = &comm->platform;
  pthread_mutex_lock(&m->lock);
  cco_devcomm_rec* d = devComm->magic == CCO_DEV_COMM_MAGIC ? find_rec(comm, devComm->handle, NULL) : NULL;
  cco_devcomm_copy* c = d ? calloc(1, sizeof(*c)) : NULL;
  ccoResult_t res = !d ? cco_error(&comm->err, ccoInvalidArgument, CCO_SUBSYS_MEM,
                                   "ccoDevCommCopyToDevice: not a live device communicator")
                  : !c ? cco_error(&comm->err, ccoOutOfMemory, CCO_SUBSYS_MEM, "no memory")
                       : p->ops->desc_alloc(p, sizeof(ccoDevComm), &c->ptr);
  if (res == ccoSuccess) {
    res = p->ops->copy_to_device(p, c->ptr, devComm, sizeof(ccoDevComm));
    if (res != ccoSuccess) p->ops->desc_free(p, c->ptr);
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

const cco_devcomm_rec* cco_devcomm_using_window(ccoComm* comm, ccoWindow_t win) {
  for (const cco_devcomm_rec* d = comm->devcomms; d; d = d->next)
    if (d->resourceWindow == win) return d;
  return NULL;
}

uint64_t cco_devcomm_id(const cco_devcomm_rec* d) { return d->id; }

void cco_devcomm_abort_all(ccoComm* comm) {
  pthread_mutex_lock(&comm->mem.lock);
  for (cco_devcomm_rec* d = comm->devcomms; d; d = d->next)
    if (d->abortHost) __atomic_store_n((uint32_t*)d->abortHost, 1u, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&comm->mem.lock);
}

void cco_devcomm_free_all(ccoComm* comm) {
  while (comm->devcomms) {
    cco_devcomm_rec* d = comm->devcomms;
    comm->devcomms = d->next;
    free_rec_resources(comm, d); /* its window goes with the other windows */
    free(d);
  }
}
