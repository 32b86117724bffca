/*
 * Create/destroy churn: thousands of 4-rank communicators (ranks as threads),
 * one after the other, as fast as they go. Every cycle opens listening
 * sockets on kernel-chosen ports and connects between them; sockets that
 * linger in TIME_WAIT must not use up the port range, so no cycle may fail
 * (EADDRINUSE at listen, or ranks left waiting for one that could not
 * listen).
 *
 *   mp_churn [cycles] [seconds]   (defaults: 10000 cycles, at most 90 s)
 */
#include <pthread.h>

#include "mp_util.h"

#define NRANKS 4

typedef struct {
  pthread_barrier_t* start;
  pthread_barrier_t* done;
  ccoUniqueId* id;
  int rank;
  volatile int* stop;
  int failures;
  char firstError[512];
} churn_rank;

static void* churn_thread(void* arg) {
  churn_rank* t = arg;
  for (;;) {
    pthread_barrier_wait(t->start);
    if (*t->stop) break;
    ccoComm* comm = NULL;
    ccoResult_t res = ccoCommCreate(*t->id, NRANKS, t->rank, 0, &comm);
    if (res == ccoSuccess) {
      if (ccoCommDestroy(comm) != ccoSuccess) res = ccoInternalError;
    }
    if (res != ccoSuccess) {
      if (t->failures++ == 0)
        snprintf(t->firstError, sizeof(t->firstError), "%s: %s", ccoGetErrorString(res),
                 ccoGetLastError(NULL));
    }
    pthread_barrier_wait(t->done);
  }
  return NULL;
}

int main(int argc, char** argv) {
  int cycles = argc > 1 ? atoi(argv[1]) : 10000;
  double limit = argc > 2 ? atof(argv[2]) : 90.0;
  /* A rank left waiting for another that failed must not hold the test up
   * for the default 120 s. */
  setenv("CCO_BOOTSTRAP_TIMEOUT", "10", 1);
  /* The bootstrap is under test, not a GPU: on a GPU machine the cuda
   * platform's start-up in every rank would blur the timings. */
  setenv("CCO_PLATFORM", "host", 1);
  pthread_barrier_t start, done;
  pthread_barrier_init(&start, NULL, NRANKS + 1);
  pthread_barrier_init(&done, NULL, NRANKS + 1);
  ccoUniqueId id;
  volatile int stop = 0;
  churn_rank ranks[NRANKS];
  pthread_t th[NRANKS];
  for (int r = 0; r < NRANKS; r++) {
    ranks[r] = (churn_rank){&start, &done, &id, r, &stop, 0, ""};
    pthread_create(&th[r], NULL, churn_thread, &ranks[r]);
  }
  double t0 = mp_now();
  int done_cycles = 0, failedCycles = 0, idFailures = 0;
  while (done_cycles < cycles && mp_now() - t0 < limit && failedCycles < 3) {
    if (ccoGetUniqueId(&id) != ccoSuccess) {
      idFailures++;
      if (idFailures > 3) break;
      continue;
    }
    int before = 0, after = 0;
    for (int r = 0; r < NRANKS; r++) before += ranks[r].failures;
    pthread_barrier_wait(&start);
    pthread_barrier_wait(&done);
    for (int r = 0; r < NRANKS; r++) after += ranks[r].failures;
    if (after > before) {
      failedCycles++;
      fprintf(stderr, "cycle %d failed after %.1f s\n", done_cycles, mp_now() - t0);
    }
    done_cycles++;
    if (done_cycles % 1000 == 0)
      printf("%d cycles in %.1f s\n", done_cycles, mp_now() - t0);
  }
  double took = mp_now() - t0;
  stop = 1;
  pthread_barrier_wait(&start);
  for (int r = 0; r < NRANKS; r++) pthread_join(th[r], NULL);
  pthread_barrier_destroy(&start);
  pthread_barrier_destroy(&done);
  for (int r = 0; r < NRANKS; r++)
    if (ranks[r].failures) fprintf(stderr, "rank %d first failure: %s\n", r, ranks[r].firstError);
  MP_CHECK(idFailures == 0, "%d ccoGetUniqueId failures: %s", idFailures, ccoGetLastError(NULL));
  MP_CHECK(failedCycles == 0, "%d failed cycles", failedCycles);
  MP_CHECK(done_cycles == cycles, "only %d of %d cycles in %.0f s", done_cycles, cycles, limit);
  printf("%d create/destroy cycles of %d ranks in %.1f s (%.2f ms each)\n", done_cycles, NRANKS,
         took, 1e3 * took / (done_cycles ? done_cycles : 1));
  return mp_finish("mp_churn");
}
