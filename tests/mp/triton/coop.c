/*
 * A Triton program on the host: the block of 32 * num_warps GPU threads
 * played by as many CPU threads, and the scope primitives of the device headers
 * (cco_host_coop_*, which they call when compiled with CCO_HOST_COOP) for
 * that block: ranks, sizes, syncs and the reductions a GPU does with
 * bar.red, shfl.sync and redux.sync. Without these a CPU thread is a block
 * of one, and a wrapper that needs its block's threads to agree (a value
 * only the leader computed, a sync every thread must reach) could not go
 * wrong here.
 */
#include <pthread.h>

#include "cco/cco_device.h" /* declares the cco_host_coop_* functions under CCO_HOST_COOP */
#include "triton.h"

typedef struct {
  int nThreads;
  pthread_barrier_t block;
  pthread_barrier_t warps[TK_MAX_WARPS];
  uint32_t vals[TK_MAX_THREADS]; /* each thread's contribution to a reduction */
  tk_program fn;
  void* arg;
} tk_block;

typedef struct {
  tk_block* b;
  int thread;
} tk_self;

static _Thread_local tk_self* t_self; /* NULL outside a program: a block of one */

int tk_thread(void) { return t_self ? t_self->thread : 0; }

uint32_t cco_host_coop_rank(int coop) {
  if (!t_self) return 0;
  return (uint32_t)(coop == 1 ? t_self->thread % TK_WARP : t_self->thread);
}

uint32_t cco_host_coop_size(int coop) {
  if (!t_self) return 1;
  return (uint32_t)(coop == 1 ? TK_WARP : t_self->b->nThreads);
}

static pthread_barrier_t* barrier_of(int coop) {
  return coop == 1 ? &t_self->b->warps[t_self->thread / TK_WARP] : &t_self->b->block;
}

void cco_host_coop_sync(int coop) {
  if (t_self && (coop == 1 || coop == 2)) pthread_barrier_wait(barrier_of(coop));
}

uint32_t cco_host_coop_reduce(int coop, uint32_t v, int op) {
  if (!t_self) return op == 2 ? v != 0 : v;
  tk_block* b = t_self->b;
  int first = coop == 1 ? t_self->thread / TK_WARP * TK_WARP : 0;
  int n = coop == 1 ? TK_WARP : b->nThreads;
  b->vals[t_self->thread] = v;
  pthread_barrier_wait(barrier_of(coop)); /* every value is in */
  uint32_t r = op == 0 ? b->vals[first] : 0;
  for (int i = first; op != 0 && i < first + n; i++) {
    if (op == 1 && b->vals[i] > r) r = b->vals[i];
    if (op == 2 && b->vals[i] != 0) r = 1;
  }
  pthread_barrier_wait(barrier_of(coop)); /* nobody overwrites a value another still reads */
  return r;
}

static void* thread_main(void* arg) {
  t_self = (tk_self*)arg;
  t_self->b->fn(t_self->b->arg);
  t_self = NULL;
  return NULL;
}

void tk_launch(int numWarps, tk_program fn, void* arg) {
  static tk_block b; /* one program at a time per rank, as the tests launch them */
  static tk_self selves[TK_MAX_THREADS];
  pthread_t threads[TK_MAX_THREADS];
  if (numWarps < 1 || numWarps > TK_MAX_WARPS) {
    CHECK(0, "tk_launch: %d warps (1..%d)", numWarps, TK_MAX_WARPS);
    return;
  }
  b.nThreads = numWarps * TK_WARP;
  b.fn = fn;
  b.arg = arg;
  pthread_barrier_init(&b.block, NULL, (unsigned)b.nThreads);
  for (int w = 0; w < numWarps; w++) pthread_barrier_init(&b.warps[w], NULL, TK_WARP);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 1u << 20);
  int started = 0;
  for (; started < b.nThreads; started++) {
    selves[started] = (tk_self){&b, started};
    if (pthread_create(&threads[started], &attr, thread_main, &selves[started]) != 0) break;
  }
  pthread_attr_destroy(&attr);
  if (started < b.nThreads) { /* the started ones wait for the rest forever: nothing to recover */
    fprintf(stderr, "tk_launch: cannot start thread %d of %d\n", started, b.nThreads);
    exit(1);
  }
  for (int i = 0; i < b.nThreads; i++) pthread_join(threads[i], NULL);
  pthread_barrier_destroy(&b.block);
  for (int w = 0; w < numWarps; w++) pthread_barrier_destroy(&b.warps[w]);
}
