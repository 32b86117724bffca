/* SDMA behind the transport interface: queues of device communicators. */
#include <stdlib.h>

#include "base/error.h"
#include "transport/sdma/sdma.h"

/* 0 when CCO_ENABLE_SDMA=0: the device communicator then has no queues. */
static uint32_t queues_of(const ccoDevCommRequirements* reqs) {
  if (!cco_sdma_enabled()) return 0;
  return reqs->sdmaQueueCount ? reqs->sdmaQueueCount : 2;
}

static ccoResult_t sdma_start(const cco_transport_ctx* ctx, void** state) {
  cco_sdma_transport* t = calloc(1, sizeof(*t));
  if (!t) return cco_error(ctx->err, ccoOutOfMemory, CCO_SUBSYS_SDMA, "no memory");
  t->ctx = ctx;
  pthread_mutex_init(&t->lock, NULL);
  *state = t;
  return ccoSuccess;
}

static size_t sdma_devcomm_bytes(void* state, const ccoDevCommRequirements* reqs) {
  cco_sdma_transport* t = state;
  return cco_sdma_signal_bytes(t->ctx->topo->lsaSize, queues_of(reqs));
}

static ccoResult_t sdma_devcomm_create(void* state, const cco_devcomm_setup* setup, ccoDevComm* dc,
                                       void** devState) {
  uint32_t queues = queues_of(setup->reqs);
  dc->sdmaQueueCount = queues;
  *devState = NULL;
  if (!queues) return ccoSuccess;
  cco_sdma_state* st = NULL;
  /* The LSA transport came first and set the scope of this GPU's peers. */
  CCO_CHECK(cco_sdma_state_create(state, queues, setup->resourceBase, setup->resourceOffset,
                                  dc->lsaScopeGpu != 0, &st, &dc->sdma));
  *devState = st;
  return ccoSuccess;
}

static void sdma_devcomm_destroy(void* state, void* devState) {
  cco_sdma_state_destroy(state, devState);
}

static void sdma_stop(void* state) { cco_sdma_engine_stop(state); }

static void sdma_destroy(void* state) {
  cco_sdma_transport* t = state;
  cco_sdma_engine_stop(t);
  pthread_mutex_destroy(&t->lock);
  free(t);
}

const cco_transport_ops cco_sdma_transport_ops = {
    .name = "sdma",
    .start = sdma_start,
    .devcomm_bytes = sdma_devcomm_bytes,
    .devcomm_create = sdma_devcomm_create,
    .devcomm_destroy = sdma_devcomm_destroy,
    .stop = sdma_stop,
    .destroy = sdma_destroy,
};
