/*
 * The launch of mp_coll_device: a block of the device API played by
 * several CPU threads, and the scope primitives the device headers call for
 * it under CCO_HOST_COOP (cco_host_coop_*): the block's thread rank and
 * size, its syncs and its reductions, which a GPU does with bar.sync and
 * bar.red. The warp is the whole block here (the blocks use block scope
 * only). Outside a launch a thread is a block of one.
 */
#include <pthread.h>

#include "coll_device_test.h"

uint64_t coll_timeout_ns;

typedef struct {
  int nThreads, iters;
  pthread_barrier_t bar;
  uint32_t vals[COLL_MAX_THREADS]; /* each thread's contribution to a reduction */
  coll_block_fn fn;
  const ccoDevComm* dc;
  const ccoCollArgs* a;
  uint32_t part, nParts;
  ccoDevStatus_t st[COLL_MAX_THREADS];
} coll_block;

typedef struct {
  coll_block* b;
  int thread;
} coll_thread;

static _Thread_local coll_thread* t_self;

uint32_t cco_host_coop_rank(int coop) {
  (void)coop;
  return t_self ? (uint32_t)t_self->thread : 0u;
}

uint32_t cco_host_coop_size(int coop) {
  (void)coop;
  return t_self ? (uint32_t)t_self->b->nThreads : 1u;
}

void cco_host_coop_sync(int coop) {
  if (t_self && (coop == 1 || coop == 2)) pthread_barrier_wait(&t_self->b->bar);
}

uint32_t cco_host_coop_reduce(int coop, uint32_t v, int op) {
  if (!t_self || (coop != 1 && coop != 2)) return op == 2 ? v != 0 : v;
  coll_block* b = t_self->b;
  b->vals[t_self->thread] = v;
  pthread_barrier_wait(&b->bar); /* every value is in */
  uint32_t r = op == 0 ? b->vals[0] : 0;
  for (int i = 0; op != 0 && i < b->nThreads; i++) {
    if (op == 1 && b->vals[i] > r) r = b->vals[i];
    if (op == 2 && b->vals[i] != 0) r = 1;
  }
  pthread_barrier_wait(&b->bar); /* nobody overwrites a value another still reads */
  return r;
}

static void* thread_main(void* arg) {
  t_self = (coll_thread*)arg;
  coll_block* b = t_self->b;
  ccoDevStatus_t st = ccoDevSuccess;
  for (int i = 0; i < (b->iters > 0 ? b->iters : 1) && st == ccoDevSuccess; i++) st = b->fn(b->dc, b->a, b->part, b->nParts);
  b->st[t_self->thread] = st;
  t_self = NULL;
  return NULL;
}

int coll_launch(coll_block_fn fn, const ccoDevComm* dc, const ccoCollArgs* a, int nParts, int nThreads, int iters) {
  enum { MAX_BLOCKS = 80 };
  static coll_block blocks[MAX_BLOCKS];
  static coll_thread selves[MAX_BLOCKS][COLL_MAX_THREADS];
  static pthread_t threads[MAX_BLOCKS][COLL_MAX_THREADS];
  if (nParts < 1 || nParts > MAX_BLOCKS || nThreads < 1 || nThreads > COLL_MAX_THREADS) {
    fprintf(stderr, "coll_launch: %d blocks of %d threads\n", nParts, nThreads);
    return -1;
  }
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256u << 10);
  for (int p = 0; p < nParts; p++) {
    coll_block* b = &blocks[p];
    b->nThreads = nThreads;
    b->iters = iters;
    b->fn = fn;
    b->dc = dc;
    b->a = a;
    b->part = (uint32_t)p;
    b->nParts = (uint32_t)nParts;
    pthread_barrier_init(&b->bar, NULL, (unsigned)nThreads);
    for (int t = 0; t < nThreads; t++) {
      selves[p][t] = (coll_thread){b, t};
      /* Blocks wait for each other: every one must run, so a thread that
       * cannot start is the end of this rank. */
      if (pthread_create(&threads[p][t], &attr, thread_main, &selves[p][t]) != 0) {
        fprintf(stderr, "coll_launch: cannot start thread %d of block %d\n", t, p);
        exit(1);
      }
    }
  }
  pthread_attr_destroy(&attr);
  int st = -2;
  for (int p = 0; p < nParts; p++) {
    for (int t = 0; t < nThreads; t++) {
      pthread_join(threads[p][t], NULL);
      int s = (int)blocks[p].st[t];
      if (st == -2) st = s;
      else if (s != st && st != -1) {
        fprintf(stderr, "coll_launch: block %d thread %d returned %s, block 0 thread 0 %s\n", p, t,
                ccoDevStatusName((ccoDevStatus_t)s), ccoDevStatusName(blocks[0].st[0]));
        st = -1;
      }
    }
    pthread_barrier_destroy(&blocks[p].bar);
  }
  return st;
}
