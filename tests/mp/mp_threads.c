/*
 * Ranks as threads of one process: two communicators used at once from
 * different threads, ccoCommAbort waking a thread blocked in a barrier, the
 * liveness monitor (a device wait without timeout returns when a peer
 * aborts; ranks that leave one by one are not taken for dead), and no
 * leaked fds or threads after many create/destroy cycles, also after
 * failed creations and aborts.
 */
#include <pthread.h>

#include "base/env.h"
#include "cco/cco_device.h"
#include "mp_util.h"

#define MAX_THREADS 16

typedef struct {
  ccoUniqueId id;
  int nRanks, rank, rounds;
  int failures;
  ccoComm* comm; /* kept when keep != 0 */
  int keep;
} rank_thread;

static void* run_rank(void* arg) {
  rank_thread* t = arg;
  ccoComm* comm = NULL;
  if (ccoCommCreate(t->id, t->nRanks, t->rank, 0, &comm) != ccoSuccess) {
    fprintf(stderr, "  thread rank %d: create failed: %s\n", t->rank, ccoGetLastError(NULL));
    t->failures++;
    return NULL;
  }
  for (int i = 0; i < t->rounds; i++) {
    int mine[2] = {t->rank, i}, all[2 * MAX_THREADS];
    if (ccoBootstrapAllGather(comm, mine, all, sizeof(mine)) != ccoSuccess) t->failures++;
    for (int r = 0; r < t->nRanks; r++)
      if (all[2 * r] != r || all[2 * r + 1] != i) t->failures++;
    if (ccoBarrierAll(comm) != ccoSuccess) t->failures++;
  }
  if (t->keep) t->comm = comm;
  else if (ccoCommDestroy(comm) != ccoSuccess) t->failures++;
  return NULL;
}

/* Runs `nJobs` independent jobs of `nRanks` thread-ranks, all at once. */
static int run_jobs(int nJobs, int nRanks, int rounds) {
  pthread_t th[MAX_THREADS];
  rank_thread ts[MAX_THREADS];
  ccoUniqueId ids[4];
  for (int j = 0; j < nJobs; j++)
    if (ccoGetUniqueId(&ids[j]) != ccoSuccess) return -1;
  for (int j = 0; j < nJobs; j++)
    for (int r = 0; r < nRanks; r++) {
      rank_thread* t = &ts[j * nRanks + r];
      *t = (rank_thread){ids[j], nRanks, r, rounds, 0, NULL, 0};
      pthread_create(&th[j * nRanks + r], NULL, run_rank, t);
    }
  int failures = 0;
  for (int i = 0; i < nJobs * nRanks; i++) {
    pthread_join(th[i], NULL);
    failures += ts[i].failures;
  }
  return failures;
}

typedef struct {
  ccoComm* comm;
  ccoResult_t result;
  double took;
} blocked_call;

static void* barrier_thread(void* arg) {
  blocked_call* b = arg;
  double t0 = mp_now();
  b->result = ccoBarrierAll(b->comm);
  b->took = mp_now() - t0;
  return NULL;
}

/* Rank 0 blocks in a barrier rank 1 never joins; another thread aborts rank
 * 0's communicator: the barrier returns at once, rank 1 then sees the peer's
 * failure, and both destroy cleanly. */
static void test_abort_wakes_blocked_barrier(void) {
  ccoUniqueId id;
  MP_CHECK(MP_OK(ccoGetUniqueId(&id)), "id");
  pthread_t th[2];
  rank_thread ts[2] = {{id, 2, 0, 0, 0, NULL, 1}, {id, 2, 1, 0, 0, NULL, 1}};
  for (int r = 0; r < 2; r++) pthread_create(&th[r], NULL, run_rank, &ts[r]);
  for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
  MP_CHECK(ts[0].comm && ts[1].comm, "create");
  if (!ts[0].comm || !ts[1].comm) return;
  blocked_call b = {ts[0].comm, ccoSuccess, 0};
  pthread_t waiter;
  pthread_create(&waiter, NULL, barrier_thread, &b);
  mp_sleep(0.2);
  MP_CHECK(MP_OK(ccoCommAbort(ts[0].comm)), "abort");
  pthread_join(waiter, NULL);
  MP_CHECK(b.result == ccoInvalidUsage && b.took < 1.0, "blocked barrier: %s after %.3f s",
           ccoGetErrorString(b.result), b.took);
  ccoResult_t async = ccoSuccess;
  MP_CHECK(MP_OK(ccoCommGetAsyncError(ts[0].comm, &async)) && async != ccoSuccess,
           "async error after abort");
  MP_CHECK(ccoBarrierAll(ts[0].comm) == ccoInvalidUsage, "barrier on an aborted comm");
  /* Rank 0 had sent its token before it aborted, so rank 1's first barrier
   * may legitimately complete; the next one must fail at once. */
  (void)ccoBarrierAll(ts[1].comm);
  double t0 = mp_now();
  ccoResult_t r1 = ccoBarrierAll(ts[1].comm);
  MP_CHECK(r1 == ccoRemoteError && mp_now() - t0 < 1.0, "peer of the aborted rank: %s (%s)",
           ccoGetErrorString(r1), ccoGetLastError(ts[1].comm));
  MP_CHECK(strstr(ccoGetLastError(ts[1].comm), "aborted") != NULL, "reason carried: %s",
           ccoGetLastError(ts[1].comm));
  MP_CHECK(MP_OK(ccoCommDestroy(ts[0].comm)) && MP_OK(ccoCommDestroy(ts[1].comm)), "destroy");
}

/* Creates a job of n thread-ranks and keeps their communicators. */
static int create_job(int n, ccoComm** comms) {
  ccoUniqueId id;
  if (ccoGetUniqueId(&id) != ccoSuccess) return 0;
  pthread_t th[MAX_THREADS];
  rank_thread ts[MAX_THREADS];
  for (int r = 0; r < n; r++) {
    ts[r] = (rank_thread){id, n, r, 0, 0, NULL, 1};
    pthread_create(&th[r], NULL, run_rank, &ts[r]);
  }
  int ok = 1;
  for (int r = 0; r < n; r++) {
    pthread_join(th[r], NULL);
    comms[r] = ts[r].comm;
    ok &= ts[r].comm != NULL;
  }
  return ok;
}

typedef struct {
  const ccoDevComm* dc;
  ccoDevStatus_t status;
  double took;
} kernel_wait;

/* A "kernel" (a CPU thread) in an LSA barrier without a timeout. */
static void* lsa_barrier_kernel(void* arg) {
  kernel_wait* k = arg;
  double t0 = mp_now();
  ccoLsaBarrierSession b = ccoLsaBarrierSessionInit(k->dc, 0, ccoCoopThread);
  k->status = ccoLsaBarrierSync(&b);
  ccoLsaBarrierSessionEnd(&b);
  k->took = mp_now() - t0;
  return NULL;
}

typedef struct {
  ccoComm* comm;
  ccoDevComm dc;
  ccoResult_t res;
} devcomm_make;

static void* devcomm_thread(void* arg) {
  devcomm_make* m = arg;
  ccoDevCommRequirements reqs = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.gdaConnectionType = ccoGdaConnectionNone;
  reqs.lsaBarrierCount = 1;
  m->res = ccoDevCommCreate(m->comm, &reqs, &m->dc);
  if (m->res == ccoSuccess) m->res = ccoBarrierAll(m->comm);
  return NULL;
}

/* The liveness monitor between thread-ranks (run under TSan by make test):
 *  - rank 1 of 3 aborts while rank 2 waits in an LSA barrier without a
 *    timeout and rank 0 in a host barrier that waits on rank 2: the device
 *    wait returns ccoDevAborted (rank 2's monitor reads rank 1's ABORT) and
 *    the host barrier ccoRemoteError (rank 2's monitor passes it on), both
 *    naming rank 1, within 1 s;
 *  - ranks that destroy their communicators one after the other are not
 *    taken for dead by the ones still running. */
static void test_liveness_threads(void) {
  ccoComm* c[3];
  if (!create_job(3, c)) {
    MP_CHECK(0, "liveness: create");
    return;
  }
  devcomm_make m[3];
  pthread_t th[3];
  for (int r = 0; r < 3; r++) {
    m[r] = (devcomm_make){c[r], {0}, ccoSuccess};
    pthread_create(&th[r], NULL, devcomm_thread, &m[r]);
  }
  for (int r = 0; r < 3; r++) pthread_join(th[r], NULL);
  MP_CHECK(m[0].res == ccoSuccess && m[1].res == ccoSuccess && m[2].res == ccoSuccess, "liveness: device communicators");
  kernel_wait k = {&m[2].dc, ccoDevSuccess, 0};
  blocked_call b = {c[0], ccoSuccess, 0};
  pthread_t kernel, waiter;
  pthread_create(&kernel, NULL, lsa_barrier_kernel, &k);
  pthread_create(&waiter, NULL, barrier_thread, &b);
  mp_sleep(0.1);
  double t0 = mp_now();
  MP_CHECK(MP_OK(ccoCommAbort(c[1])), "liveness: abort");
  pthread_join(kernel, NULL);
  double kernelAfter = mp_now() - t0;
  pthread_join(waiter, NULL);
  double hostAfter = mp_now() - t0;
  ccoResult_t async = ccoSuccess;
  ccoCommGetAsyncError(c[2], &async);
  MP_CHECK(k.status == ccoDevAborted && kernelAfter < 1.0 && async == ccoRemoteError,
           "liveness: device wait returned %s %.3f s after the abort, async error %s", ccoDevStatusName(k.status),
           kernelAfter, ccoGetErrorString(async));
  MP_CHECK(strstr(ccoGetLastError(c[2]), "rank 1") != NULL, "liveness: rank 2's detail: %s", ccoGetLastError(c[2]));
  MP_CHECK(b.result == ccoRemoteError && hostAfter < 1.0 && strstr(ccoGetLastError(c[0]), "rank 1") != NULL,
           "liveness: host barrier returned %s %.3f s after the abort: %s", ccoGetErrorString(b.result), hostAfter,
           ccoGetLastError(c[0]));
  printf("liveness: a device wait without timeout returned %s %.3f s after a peer aborted; a host barrier "
         "waiting on that rank: %s after %.3f s\n",
         ccoDevStatusName(k.status), kernelAfter, ccoGetErrorString(b.result), hostAfter);
  for (int r = 0; r < 3; r++) MP_CHECK(MP_OK(ccoCommDestroy(c[r])), "liveness: destroy %d", r);

  /* Goodbyes: one rank leaves, the others stay a while; nobody fails. */
  if (!create_job(3, c)) {
    MP_CHECK(0, "liveness: create");
    return;
  }
  MP_CHECK(MP_OK(ccoCommDestroy(c[0])), "goodbye: destroy 0");
  mp_sleep(0.2);
  MP_CHECK(MP_OK(ccoCommDestroy(c[1])), "goodbye: destroy 1");
  mp_sleep(0.2);
  async = ccoSuccess;
  MP_CHECK(MP_OK(ccoCommGetAsyncError(c[2], &async)) && async == ccoSuccess,
           "goodbye: the last rank has async error %s after its peers left: %s", ccoGetErrorString(async),
           ccoGetLastError(c[2]));
  MP_CHECK(MP_OK(ccoCommDestroy(c[2])), "goodbye: destroy 2");
}

/* A job that cannot form (rank 1 never comes) fails at the timeout. */
static void failed_create(double* took, ccoResult_t* res) {
  ccoUniqueId id;
  ccoComm* comm = NULL;
  ccoGetUniqueId(&id);
  double t0 = mp_now();
  *res = ccoCommCreate(id, 2, 0, 0, &comm);
  *took = mp_now() - t0;
  if (*res == ccoSuccess) ccoCommDestroy(comm);
}

static void test_no_leaks(void) {
  /* Warm up once so lazily created process state (log, env, libc) exists. */
  MP_CHECK(run_jobs(1, 4, 2) == 0, "warm-up job");
  /* The warm-up's joined threads may still be listed: settle the baseline
   * too, or it counts one of them and the end count comes out lower. */
  int fds0 = mp_count_fds(), threads0 = mp_count_threads_settled(0.2);
  int failures = 0;
  for (int cycle = 0; cycle < 25; cycle++) failures += run_jobs(2, 4, 3);
  MP_CHECK(failures == 0, "%d failures in create/destroy cycles", failures);

  setenv("CCO_BOOTSTRAP_TIMEOUT", "0.3", 1);
  cco_env_reload_for_test(NULL, NULL);
  for (int cycle = 0; cycle < 5; cycle++) {
    double took;
    ccoResult_t res;
    failed_create(&took, &res);
    MP_CHECK(res == ccoTimeout && took < 2.0, "incomplete job: %s after %.2f s",
             ccoGetErrorString(res), took);
  }
  setenv("CCO_BOOTSTRAP_TIMEOUT", "30", 1);
  cco_env_reload_for_test(NULL, NULL);
  for (int cycle = 0; cycle < 3; cycle++) test_abort_wakes_blocked_barrier();

  /* A joined thread can still be listed in /proc/self/task for a moment
   * (the kernel wakes the joiner before it reaps the task); a leaked one
   * stays. So the count gets up to 2 s to come back. */
  int fds1 = mp_count_fds(), threads1 = mp_count_threads();
  for (double t0 = mp_now(); threads1 != threads0 && mp_now() - t0 < 2.0; threads1 = mp_count_threads())
    mp_sleep(0.01);
  MP_CHECK(fds1 == fds0, "open fds %d before, %d after", fds0, fds1);
  MP_CHECK(threads1 == threads0, "threads %d before, %d after", threads0, threads1);
  printf("leak check: %d fds and %d threads before and after 50 jobs, 5 failed creates, 3 aborts\n",
         fds1, threads1);
}

int main(void) {
  setenv("CCO_BOOTSTRAP_TIMEOUT", "30", 1);
  double t0 = mp_now();
  MP_CHECK(run_jobs(2, 4, 300) == 0, "two communicators of 4 thread-ranks at once");
  MP_CHECK(run_jobs(4, 4, 50) == 0, "four communicators of 4 thread-ranks at once");
  MP_CHECK(run_jobs(1, 16, 20) == 0, "one communicator of 16 thread-ranks");
  printf("concurrent communicators: %.2f s\n", mp_now() - t0);
  test_abort_wakes_blocked_barrier();
  test_liveness_threads();
  test_no_leaks();
  return mp_finish("mp_threads");
}
