/*
 * The transport registry: every transport a communicator runs, in the
 * order they start, and the engines built on them (collectives). Teardown
 * runs in reverse. A new transport is one folder under src/transport/ and
 * one line here; a new engine one folder under src/ and one line here.
 */
#include "base/error.h"
#include "base/log.h"
#include "coll/coll.h"
#include "comm/comm.h"
#include "transport/gda/gda.h"
#include "transport/lsa/lsa.h"
#include "transport/sdma/sdma.h"

static const cco_transport_ops* const registry[] = {
    &cco_lsa_transport_ops,  /* peers of this host: load/store */
    &cco_sdma_transport_ops, /* copy engines */
    &cco_gda_transport_ops,  /* any peer, over the network engine */
    &cco_coll_transport_ops, /* the collectives' engine (src/coll): lives and dies with the others */
};
#define REGISTRY_SIZE (sizeof(registry) / sizeof(registry[0]))
_Static_assert(REGISTRY_SIZE <= CCO_MAX_TRANSPORTS, "raise CCO_MAX_TRANSPORTS");

ccoResult_t cco_transports_start(ccoComm* comm) {
  comm->nTransports = (int)REGISTRY_SIZE;
  for (int i = 0; i < comm->nTransports; i++) {
    cco_transport* t = &comm->transports[i];
    t->ops = registry[i];
    ccoResult_t res = t->ops->start(&comm->transportCtx, &t->state);
    if (res != ccoSuccess) {
      t->state = NULL;
      cco_transports_destroy(comm);
      return res;
    }
    CCO_TRACE(INIT, "rank %d: transport %s started", comm->rank, t->ops->name);
  }
  return ccoSuccess;
}

void cco_transports_stop(ccoComm* comm) {
  for (int i = 0; i < comm->nTransports; i++) {
    cco_transport* t = &comm->transports[i];
    if (t->state && t->ops->stop) t->ops->stop(t->state);
  }
}

void cco_transports_destroy(ccoComm* comm) {
  for (int i = comm->nTransports - 1; i >= 0; i--) {
    cco_transport* t = &comm->transports[i];
    if (t->state) t->ops->destroy(t->state);
    t->state = NULL;
  }
}

/* Collective, in registry order on every rank; a transport that refuses
 * the window refuses it on every rank (its own collective says so), and the
 * ones that accepted it before are told it is gone. */
ccoResult_t cco_transports_window_added(ccoComm* comm, const cco_window_info* win) {
  for (int i = 0; i < comm->nTransports; i++) {
    cco_transport* t = &comm->transports[i];
    if (!t->state || !t->ops->window_added) continue;
    ccoResult_t res = t->ops->window_added(t->state, win);
    if (res == ccoSuccess) continue;
    pthread_mutex_lock(&comm->mem.lock);
    for (int k = i - 1; k >= 0; k--) {
      cco_transport* done = &comm->transports[k];
      if (done->state && done->ops->window_removed) done->ops->window_removed(done->state, win);
    }
    pthread_mutex_unlock(&comm->mem.lock);
    return res;
  }
  return ccoSuccess;
}

void cco_transports_window_removed(ccoComm* comm, const cco_window_info* win) {
  for (int i = comm->nTransports - 1; i >= 0; i--) {
    cco_transport* t = &comm->transports[i];
    if (t->state && t->ops->window_removed) t->ops->window_removed(t->state, win);
  }
}
