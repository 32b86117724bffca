/*
 * Public entry points of symmetric memory: allocations, windows and peer
 * pointers. The work is memory's (src/mem); this layer validates the
 * handle, runs registration as a collective of the communicator, and tells
 * the transports about windows.
 */
#include "base/error.h"
#include "comm/comm.h"

ccoResult_t ccoMemAlloc(ccoComm* comm, size_t size, void** ptr) {
  CCO_VALIDATE_COMM(comm);
  return cco_mem_alloc(&comm->mem, size, ptr);
}

ccoResult_t ccoMemImport(ccoComm* comm, void* extPtr, size_t size, void** localPtr) {
  CCO_VALIDATE_COMM(comm);
  return cco_mem_import(&comm->mem, extPtr, size, localPtr);
}

ccoResult_t ccoMemFree(ccoComm* comm, void* ptr) {
  CCO_VALIDATE_COMM(comm);
  return cco_mem_free(&comm->mem, ptr);
}

/* Memory maps the window on every rank (all or nothing), then every
 * transport learns of it (collective too, so a refusal is everyone's), and
 * only then is it published. */
static ccoResult_t register_locked(ccoComm* comm, void* ptr, size_t size, bool ownsAlloc,
                                   ccoWindow_t* win) {
  cco_window_rec* w = NULL;
  CCO_CHECK(cco_mem_window_register(&comm->mem, ptr, size, ownsAlloc, &w));
  cco_window_info info = cco_mem_window_info(w);
  ccoResult_t res = cco_transports_window_added(comm, &info);
  if (res != ccoSuccess) {
    cco_mem_window_discard(&comm->mem, w);
    return res;
  }
  cco_mem_window_publish(&comm->mem, w);
  *win = w->dev;
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

/* The owning forms make their memory inside the collective, at an offset
 * free on every rank (src/mem/placement.c), so they do not depend on the
 * order earlier memory was freed in. A rank whose memory could not be made
 * still takes part in the registration, as a bad window, so every rank
 * fails it; the memory's own failure is the one returned. */
static ccoResult_t register_owned(ccoComm* comm, bool external, void* extPtr, size_t size,
                                  ccoWindow_t* win, void** localPtr) {
  bool argsOk = size && win && localPtr;
  if (!argsOk)
    cco_error(&comm->err, ccoInvalidArgument, CCO_SUBSYS_MEM, "window registration: %s",
              !size ? "size is 0" : !win ? "win is NULL" : "localPtr is NULL");
  CCO_CHECK(cco_comm_begin_collective(comm, "window registration"));
  void* ptr = NULL;
  ccoResult_t made = external ? cco_mem_import_placed(&comm->mem, argsOk, extPtr, size, &ptr)
                            : cco_mem_alloc_placed(&comm->mem, argsOk, size, &ptr);
  ccoResult_t res = register_locked(comm, ptr, win ? size : 0, true, win);
  if (res != ccoSuccess && ptr) cco_mem_free(&comm->mem, ptr);
  if (made != ccoSuccess) res = made;
  res = cco_comm_end_collective(comm, res);
  if (res == ccoSuccess) *localPtr = ptr;
  return res;
}

ccoResult_t ccoWindowRegisterAlloc(ccoComm* comm, size_t size, ccoWindow_t* win, void** localPtr) {
  CCO_VALIDATE_COMM(comm);
  return register_owned(comm, false, NULL, size, win, localPtr);
}

ccoResult_t ccoWindowRegisterExternal(ccoComm* comm, void* extPtr, size_t size, ccoWindow_t* win,
                                      void** localPtr) {
  CCO_VALIDATE_COMM(comm);
  return register_owned(comm, true, extPtr, size, win, localPtr);
}

ccoResult_t ccoWindowDeregister(ccoComm* comm, ccoWindow_t win) {
  CCO_VALIDATE_COMM(comm);
  cco_mem* m = &comm->mem;
  pthread_mutex_lock(&m->lock);
  cco_window_rec* w = win ? cco_mem_window_find(m, win) : NULL;
  const cco_devcomm_rec* owner = w ? cco_devcomm_using_window(comm, win) : NULL;
  if (owner) {
    /* Kernels of that device communicator still use it (barriers, signals). */
    uint64_t id = cco_devcomm_id(owner);
    pthread_mutex_unlock(&m->lock);
    return cco_error(&comm->err, ccoInvalidUsage, CCO_SUBSYS_MEM,
                     "ccoWindowDeregister: %p is the resource window of live device communicator "
                     "%llu; ccoDevCommDestroy releases it",
                     (void*)win, (unsigned long long)id);
  }
  if (w) {
    cco_window_info info = cco_mem_window_info(w);
    cco_transports_window_removed(comm, &info); /* before the memory goes */
    /* On a failed communicator the peers are not in step: one that has not
     * seen the failure yet may still be writing into this memory over the
     * network, and this rank's engine may still hold ops on it. Its memory
     * then stays mapped until ccoCommDestroy has closed the engines. */
    cco_mem_window_remove(m, w, atomic_load(&comm->asyncError) != ccoSuccess);
  }
  pthread_mutex_unlock(&m->lock);
  if (!w)
    return cco_error(&comm->err, ccoInvalidArgument, CCO_SUBSYS_MEM,
                     "ccoWindowDeregister: %p is not a window of this communicator (or was "
                     "deregistered already)",
                     (void*)win);
  return ccoSuccess;
}

ccoResult_t ccoWindowGetInfo(ccoComm* comm, ccoWindow_t win, ccoWindowDevice* desc, void** localPtr) {
  CCO_VALIDATE_COMM(comm);
  cco_mem* m = &comm->mem;
  pthread_mutex_lock(&m->lock);
  cco_window_rec* w = win ? cco_mem_window_find(m, win) : NULL;
  if (w) {
    if (desc) *desc = w->desc;
    if (localPtr) *localPtr = w->localPtr;
  }
  pthread_mutex_unlock(&m->lock);
  if (!w)
    return cco_error(&comm->err, ccoInvalidArgument, CCO_SUBSYS_MEM,
                     "ccoWindowGetInfo: %p is not a window of this communicator", (void*)win);
  return ccoSuccess;
}

ccoResult_t ccoGetPeerPtr(ccoComm* comm, const void* localPtr, int peer, void** peerPtr) {
  CCO_VALIDATE_COMM(comm);
  if (!peerPtr) return cco_error(&comm->err, ccoInvalidArgument, CCO_SUBSYS_MEM, "peerPtr is NULL");
  int peerLsa = cco_topology_world_to_team(&comm->topo, ccoTeamLsa, peer);
  if (peerLsa < 0)
    return cco_error(&comm->err, ccoInvalidArgument, CCO_SUBSYS_MEM,
                     "ccoGetPeerPtr: rank %d is not on this rank's host (not in the LSA team)", peer);
  return cco_mem_peer_ptr(&comm->mem, localPtr, peerLsa, peerPtr);
}
