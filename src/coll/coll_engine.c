/*
 * The collectives' engine: its life beside the transports (registry entry),
 * its part of the per-communicator state (status word, CPU workers or
 * kernel module), and one call's run or launch.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "cco/cco_device.h"
#include "coll/coll_internal.h"

/* ------------------------------------------------------------ life */

static ccoResult_t engine_start(const cco_transport_ctx* ctx, void** state) {
  cco_coll_engine* e = calloc(1, sizeof(*e));
  if (!e) return cco_error(ctx->err, ccoOutOfMemory, CCO_SUBSYS_COLL, "no memory for the collectives' engine");
  e->ctx = ctx;
  pthread_mutex_init(&e->lock, NULL);
  atomic_init(&e->failureNoted, false);
  atomic_init(&e->failureReady, false);
  *state = e;
  return ccoSuccess;
}

/* First step of the communicator's teardown: the workers go before the
 * memory they work on. */
static void engine_stop(void* state) {
  cco_coll_engine* e = state;
  cco_coll_pool_stop(e->pool);
  e->pool = NULL;
}

static void engine_destroy(void* state) {
  cco_coll_engine* e = state;
  cco_coll_engine_reset(e);
  cco_coll_cuda_release(e);
  pthread_mutex_destroy(&e->lock);
  free(e);
}

/* Nothing at device communicator creation or window registration: the
 * engine's device communicator and scratch window are made through the
 * communicator, like a user's. */
const cco_transport_ops cco_coll_transport_ops = {
    .name = "coll",
    .start = engine_start,
    .stop = engine_stop,
    .destroy = engine_destroy,
};

/* ------------------------------------------------------------ setup */

ccoResult_t cco_coll_engine_prepare(cco_coll_engine* e, uint32_t wanted, uint32_t* nParts) {
  if (e->ctx->platform->kind == CCO_PLATFORM_CUDA) return cco_coll_cuda_prepare(e, wanted, nParts);
  *nParts = wanted;
  return ccoSuccess;
}

ccoResult_t cco_coll_engine_setup(cco_coll_engine* e, const cco_coll_setup* s) {
  cco_platform* p = e->ctx->platform;
  void* host = NULL;
  ccoResult_t res = p->ops->hostmap_alloc(p, sizeof(cco_coll_status), &host, &e->statusDev);
  if (res != ccoSuccess) return res;
  e->status = host;
  if (p->kind == CCO_PLATFORM_HOST) res = cco_coll_pool_start(s->nParts, &e->pool);
  if (res != ccoSuccess) {
    cco_coll_engine_reset(e);
    return res;
  }
  e->s = *s;
  e->ready = true;
  CCO_INFO(COLL, "rank %d: collectives ready: %u parts per call, %llu bytes of scratch", e->ctx->rank, s->nParts,
           (unsigned long long)s->scratchBytes);
  return ccoSuccess;
}

bool cco_coll_engine_ready(const cco_coll_engine* e) { return e->ready; }

const cco_coll_setup* cco_coll_engine_config(const cco_coll_engine* e) { return &e->s; }

void cco_coll_engine_reset(cco_coll_engine* e) {
  cco_platform* p = e->ctx->platform;
  cco_coll_pool_stop(e->pool);
  e->pool = NULL;
  if (e->status) p->ops->hostmap_free(p, e->status);
  e->status = NULL;
  e->statusDev = 0;
  e->ready = false;
  memset(&e->s, 0, sizeof(e->s));
}

/* ------------------------------------------------------------ status */

cco_coll_status cco_coll_engine_status(const cco_coll_engine* e) {
  cco_coll_status st;
  memset(&st, 0, sizeof(st));
  if (!e->status) return st;
  /* Written by the device or by the workers while the host reads: status
   * first, the rest once `ready` says so. */
  st.status = __atomic_load_n(&e->status->status, __ATOMIC_ACQUIRE);
  st.ready = __atomic_load_n(&e->status->ready, __ATOMIC_ACQUIRE);
  if (st.ready) {
    st.kind = e->status->kind;
    st.algo = e->status->algo;
    st.part = e->status->part;
  }
  return st;
}

/* The host platform's blocks report like the kernels do (coll_kernels.cu). */
static void record_status(cco_coll_engine* e, ccoDevStatus_t st, cco_coll_kind kind, ccoAlgo_t algo,
                          uint32_t part) {
  uint32_t zero = 0;
  if (!__atomic_compare_exchange_n(&e->status->status, &zero, (uint32_t)st, false, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE))
    return;
  e->status->kind = (uint32_t)kind;
  e->status->algo = (uint32_t)algo;
  e->status->part = part;
  __atomic_store_n(&e->status->ready, 1u, __ATOMIC_RELEASE);
}

/* One writer (the compare-and-swap's winner), then readers: the text is
 * complete before failureReady says so. */
bool cco_coll_engine_note_failure(cco_coll_engine* e, ccoResult_t res, const char* text) {
  bool expected = false;
  if (!atomic_compare_exchange_strong(&e->failureNoted, &expected, true)) return false;
  snprintf(e->failure, sizeof(e->failure), "%s", text);
  e->failureResult = res;
  atomic_store(&e->failureReady, true);
  return true;
}

const char* cco_coll_engine_failure(const cco_coll_engine* e, ccoResult_t* res) {
  if (!atomic_load(&((cco_coll_engine*)e)->failureReady)) return NULL;
  if (res) *res = e->failureResult;
  return e->failure;
}

ccoResult_t cco_coll_status_result(ccoDevStatus_t st) {
  switch (st) {
    case ccoDevSuccess: return ccoSuccess;
    case ccoDevAborted: return ccoRemoteError;
    case ccoDevTimeout: return ccoTimeout;
    case ccoDevUnsupported: return ccoUnsupported;
    case ccoDevInvalid: return ccoInvalidUsage;
    default: return ccoInternalError;
  }
}

const char* cco_coll_status_meaning(ccoDevStatus_t st) {
  switch (st) {
    case ccoDevSuccess: return "success";
    case ccoDevAborted: return "the communicator was aborted while the blocks waited (a failure or ccoCommAbort)";
    case ccoDevTimeout: return "a wait of the blocks timed out";
    case ccoDevUnsupported: return "the building block does not support this call";
    case ccoDevInvalid:
      return "the ranks disagree on the call (collective, count, type, operator, root, algorithm or buffer "
             "offsets), or a buffer does not fit its window";
    default: return "unknown device status";
  }
}

/* ------------------------------------------------------------ calls */

ccoResult_t cco_coll_engine_capturing(cco_coll_engine* e, void* stream, bool* capturing) {
  cco_platform* p = e->ctx->platform;
  return p->ops->stream_capturing(p, stream, capturing);
}

/* Runs the call on the workers and waits. Past the timeout the ranks
 * cannot meet any more (one called another collective): the communicator
 * fails, its abort word stops the blocks, and they are waited for. */
static ccoResult_t run_on_host(cco_coll_engine* e, const cco_coll_block* b, const ccoCollArgs* a) {
  cco_coll_pool_post(e->pool, b->host, &e->s.dcHost, a);
  if (!cco_coll_pool_wait(e->pool, e->s.timeout)) {
    cco_error(NULL, ccoTimeout, CCO_SUBSYS_COLL,
              "rank %d: %s (algorithm %s) did not finish within %g s (CCO_COLL_TIMEOUT): the ranks probably "
              "called different collectives, or with counts that chose different algorithms",
              e->ctx->rank, cco_coll_api_name(b->kind), cco_coll_algo_name(b->algo), e->s.timeout);
    e->ctx->fail(e->ctx->owner, ccoTimeout);
    cco_coll_pool_wait(e->pool, 0);
    uint32_t part = 0;
    ccoDevStatus_t st = cco_coll_pool_result(e->pool, &part);
    record_status(e, st != ccoDevSuccess ? st : ccoDevTimeout, b->kind, b->algo, part);
    return ccoTimeout;
  }
  uint32_t part = 0;
  ccoDevStatus_t st = cco_coll_pool_result(e->pool, &part);
  if (st == ccoDevSuccess) return ccoSuccess;
  record_status(e, st, b->kind, b->algo, part);
  return cco_coll_status_result(st);
}

ccoResult_t cco_coll_engine_launch(cco_coll_engine* e, cco_coll_kind kind, ccoAlgo_t algo, const ccoCollArgs* a,
                                   void* stream) {
  int index = cco_coll_block_index(kind, algo);
  const cco_coll_block* b = cco_coll_block_at(index);
  if (!b)
    return cco_error(NULL, ccoInternalError, CCO_SUBSYS_COLL, "%s has no building block for algorithm %s",
                     cco_coll_api_name(kind), cco_coll_algo_name(algo));
  pthread_mutex_lock(&e->lock);
  ccoResult_t res = e->ctx->platform->kind == CCO_PLATFORM_CUDA ? cco_coll_cuda_launch(e, index, a, stream)
                                                               : run_on_host(e, b, a);
  pthread_mutex_unlock(&e->lock);
  return res;
}

/* ------------------------------------------------------------ stream calls */

/* On the host platform the barrier runs here, on the calling thread (a
 * block of one), so it can take the timeout a CPU wait needs. */
static ccoResult_t host_stream_barrier(cco_coll_engine* e) {
  uint64_t limit = e->s.timeout > 0 ? (uint64_t)(e->s.timeout * 1e9) : 0;
  ccoDevStatus_t st = cco_stream_barrier_run(&e->s.dcHost, limit);
  if (st == ccoDevSuccess) return ccoSuccess;
  if (st == ccoDevTimeout) {
    cco_error(NULL, ccoTimeout, CCO_SUBSYS_COLL,
              "rank %d: ccoBarrierOnStream: the peers did not arrive within %g s (CCO_COLL_TIMEOUT)", e->ctx->rank,
              e->s.timeout);
    e->ctx->fail(e->ctx->owner, ccoTimeout);
  }
  record_status(e, st, (cco_coll_kind)CCO_COLL_STREAM_KIND, ccoAlgoAuto, 0);
  return cco_coll_status_result(st);
}

ccoResult_t cco_coll_engine_stream_barrier(cco_coll_engine* e, void* stream) {
  pthread_mutex_lock(&e->lock);
  ccoResult_t res = e->ctx->platform->kind == CCO_PLATFORM_CUDA ? cco_coll_cuda_stream_barrier(e, stream)
                                                               : host_stream_barrier(e);
  pthread_mutex_unlock(&e->lock);
  return res;
}

/* No lock: this uses none of the workers, and the ring takes posts from
 * any thread. The host platform waits here for the flush, which ends when
 * the proxy completes the ops or the communicator aborts. */
ccoResult_t cco_coll_engine_stream_gda(cco_coll_engine* e, const cco_stream_gda_args* a, void* stream) {
  if (e->ctx->platform->kind == CCO_PLATFORM_CUDA) return cco_coll_cuda_stream_gda(e, a, stream);
  ccoDevStatus_t st = cco_stream_gda_run(&e->s.dcHost, a);
  if (st == ccoDevSuccess) return ccoSuccess;
  record_status(e, st, (cco_coll_kind)CCO_COLL_STREAM_KIND, ccoAlgoAuto, 0);
  return cco_coll_status_result(st);
}
