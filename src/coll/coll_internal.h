/*
 * The engine object, shared by the files of src/coll: coll_engine.c (its
 * life, setup and the status word), coll_host.c (the host platform's CPU
 * workers) and coll_cuda.c (the CUDA platform's kernels).
 */
#ifndef CCO_COLL_COLL_INTERNAL_H_
#define CCO_COLL_COLL_INTERNAL_H_

#include <pthread.h>
#include <stdatomic.h>

#include "coll/coll.h"

typedef struct cco_coll_pool cco_coll_pool;

struct cco_coll_engine {
  const cco_transport_ctx* ctx;
  pthread_mutex_t lock; /* one call at a time: the workers run one job */
  bool ready;           /* setup done on every rank */
  cco_coll_setup s;
  cco_coll_status* status; /* host view of the status word */
  uint64_t statusDev;      /* its device address */
  cco_coll_pool* pool;     /* host platform */
  void* module;            /* CUDA platform: the fatbin's module, and its kernels */
  void* kernels[CCO_COLL_BLOCKS];
  /* The typed kernels (coll_kernels.h) by block, type and operator; NULL
   * for blocks that have none. */
  void* typed[CCO_COLL_BLOCKS][CCO_COLL_TYPED_NDTYPES][CCO_COLL_TYPED_NOPS];
  void* barrierKernel; /* ccoBarrierOnStream's */
  void* gdaKernel;     /* the stream calls' to peers on other hosts */
  atomic_bool failureNoted, failureReady;
  ccoResult_t failureResult;
  char failure[CCO_ERROR_TEXT_BYTES];
};

/* Host platform (coll_host.c). start: nThreads workers, one per part.
 * run: every worker runs part (its index) of `block`; waits for them up to
 * timeoutSeconds (0: no limit) and returns false when that passed, the
 * parts still running (then call wait). status: the first failing part's
 * status and index. */
ccoResult_t cco_coll_pool_start(uint32_t nThreads, cco_coll_pool** pool);
void cco_coll_pool_stop(cco_coll_pool* pool);
void cco_coll_pool_post(cco_coll_pool* pool, cco_coll_block_fn block, const ccoDevComm* dc, const ccoCollArgs* a);
bool cco_coll_pool_wait(cco_coll_pool* pool, double timeoutSeconds);
ccoDevStatus_t cco_coll_pool_result(cco_coll_pool* pool, uint32_t* part);

/* CUDA platform (coll_cuda.c). load: the module and every kernel, once. */
ccoResult_t cco_coll_cuda_load(cco_coll_engine* e);
ccoResult_t cco_coll_cuda_prepare(cco_coll_engine* e, uint32_t wanted, uint32_t* nParts);
ccoResult_t cco_coll_cuda_stream_barrier(cco_coll_engine* e, void* stream);
ccoResult_t cco_coll_cuda_stream_gda(cco_coll_engine* e, const cco_stream_gda_args* a, void* stream);
ccoResult_t cco_coll_cuda_launch(cco_coll_engine* e, int block, const ccoCollArgs* a, void* stream);
void cco_coll_cuda_release(cco_coll_engine* e);

#endif /* CCO_COLL_COLL_INTERNAL_H_ */
