/*
 * The host platform's "kernel launch": a persistent pool of CPU threads per
 * communicator, one per part, made at the first collective. A call posts
 * one job (a generation number under the pool's lock), every worker runs
 * its part of the building block, and the caller waits for the last one.
 * All parts run at once, as the blocks require (they meet at LSA barriers
 * with the same part of every peer); the caller runs none, so it can watch
 * the time.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll/coll_internal.h"

typedef struct {
  cco_coll_pool* pool;
  uint32_t index;
  pthread_t thread;
  bool started;
} worker;

struct cco_coll_pool {
  pthread_mutex_t lock;
  pthread_cond_t go;   /* a job was posted, or stop */
  pthread_cond_t done; /* the last part of the job finished */
  uint64_t generation; /* of the current job */
  bool stop;
  uint32_t nWorkers;
  uint32_t remaining; /* parts of the current job still running */
  /* The job, stable while remaining > 0. */
  cco_coll_block_fn block;
  ccoDevComm dc;
  ccoCollArgs args;
  ccoDevStatus_t* statuses; /* [nWorkers] */
  worker* workers;          /* [nWorkers] */
};

static void* worker_main(void* arg) {
  worker* w = arg;
  cco_coll_pool* p = w->pool;
  uint64_t seen = 0;
  pthread_mutex_lock(&p->lock);
  for (;;) {
    while (p->generation == seen && !p->stop) pthread_cond_wait(&p->go, &p->lock);
    if (p->stop) break;
    seen = p->generation;
    pthread_mutex_unlock(&p->lock);
    /* The job's fields do not change until every part reported. */
    ccoDevStatus_t st = p->block(&p->dc, &p->args, w->index, p->nWorkers);
    pthread_mutex_lock(&p->lock);
    p->statuses[w->index] = st;
    if (--p->remaining == 0) pthread_cond_broadcast(&p->done);
  }
  pthread_mutex_unlock(&p->lock);
  return NULL;
}

void cco_coll_pool_stop(cco_coll_pool* p) {
  if (!p) return;
  pthread_mutex_lock(&p->lock);
  p->stop = true;
  pthread_cond_broadcast(&p->go);
  pthread_mutex_unlock(&p->lock);
  for (uint32_t i = 0; i < p->nWorkers; i++)
    if (p->workers[i].started) pthread_join(p->workers[i].thread, NULL);
  pthread_cond_destroy(&p->go);
  pthread_cond_destroy(&p->done);
  pthread_mutex_destroy(&p->lock);
  free(p->statuses);
  free(p->workers);
  free(p);
}

ccoResult_t cco_coll_pool_start(uint32_t nThreads, cco_coll_pool** out) {
  cco_coll_pool* p = calloc(1, sizeof(*p));
  if (!p) return cco_error(NULL, ccoOutOfMemory, CCO_SUBSYS_COLL, "no memory for the collectives' workers");
  pthread_mutex_init(&p->lock, NULL);
  pthread_cond_init(&p->go, NULL);
  pthread_cond_init(&p->done, NULL);
  p->nWorkers = nThreads;
  p->statuses = calloc(nThreads, sizeof(ccoDevStatus_t));
  p->workers = calloc(nThreads, sizeof(worker));
  if (!p->statuses || !p->workers) {
    cco_coll_pool_stop(p);
    return cco_error(NULL, ccoOutOfMemory, CCO_SUBSYS_COLL, "no memory for the collectives' workers");
  }
  for (uint32_t i = 0; i < nThreads; i++) {
    worker* w = &p->workers[i];
    w->pool = p;
    w->index = i;
    int err = pthread_create(&w->thread, NULL, worker_main, w);
    if (err != 0) {
      cco_coll_pool_stop(p);
      return cco_error(NULL, ccoSystemError, CCO_SUBSYS_COLL, "cannot start collective worker %u of %u: %s", i,
                       nThreads, strerror(err));
    }
    w->started = true;
  }
  *out = p;
  return ccoSuccess;
}

void cco_coll_pool_post(cco_coll_pool* p, cco_coll_block_fn block, const ccoDevComm* dc, const ccoCollArgs* a) {
  pthread_mutex_lock(&p->lock);
  p->block = block;
  p->dc = *dc;
  p->args = *a;
  memset(p->statuses, 0, p->nWorkers * sizeof(ccoDevStatus_t));
  p->remaining = p->nWorkers;
  p->generation++;
  pthread_cond_broadcast(&p->go);
  pthread_mutex_unlock(&p->lock);
}

bool cco_coll_pool_wait(cco_coll_pool* p, double timeoutSeconds) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  if (timeoutSeconds > 0) {
    double whole = (double)(time_t)timeoutSeconds;
    until.tv_sec += (time_t)whole;
    until.tv_nsec += (long)((timeoutSeconds - whole) * 1e9);
    if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&p->lock);
  int err = 0;
  while (p->remaining > 0 && err != ETIMEDOUT)
    err = timeoutSeconds > 0 ? pthread_cond_timedwait(&p->done, &p->lock, &until)
                             : pthread_cond_wait(&p->done, &p->lock);
  bool finished = p->remaining == 0;
  pthread_mutex_unlock(&p->lock);
  return finished;
}

ccoDevStatus_t cco_coll_pool_result(cco_coll_pool* p, uint32_t* part) {
  ccoDevStatus_t st = ccoDevSuccess;
  pthread_mutex_lock(&p->lock);
  for (uint32_t i = 0; i < p->nWorkers && st == ccoDevSuccess; i++) {
    st = p->statuses[i];
    *part = i;
  }
  pthread_mutex_unlock(&p->lock);
  return st;
}
