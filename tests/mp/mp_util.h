/*
 * Helpers for the multi-process tests that launch their own ranks with
 * fork(): checks that count passes and failures, a fork/wait harness with a
 * time limit, and resource counters for leak checks.
 */
#ifndef CCO_TESTS_MP_UTIL_H_
#define CCO_TESTS_MP_UTIL_H_

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cco/cco.h"

/* A program of several files counts its checks once: each file defines
 * MP_UTIL_SHARED_COUNTS before including this header, and one of them
 * defines mp_passed, mp_failed and mp_check_lock. */
#ifdef MP_UTIL_SHARED_COUNTS
extern int mp_passed, mp_failed;
extern pthread_mutex_t mp_check_lock;
#else
static int mp_passed, mp_failed;
#endif

#define MP_CHECK(cond, ...)                                   \
  do {                                                        \
    if (cond) {                                               \
      mp_passed++;                                            \
    } else {                                                  \
      mp_failed++;                                            \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                           \
      fprintf(stderr, "\n");                                  \
    }                                                         \
  } while (0)

/* MP_CHECK for tests whose threads (ranks as threads, helper threads)
 * check at once: the counters are plain ints, so checks take turns. */
#ifndef MP_UTIL_SHARED_COUNTS
static pthread_mutex_t mp_check_lock __attribute__((unused)) = PTHREAD_MUTEX_INITIALIZER;
#endif
#define MP_CHECK_MT(cond, ...)          \
  do {                                  \
    pthread_mutex_lock(&mp_check_lock); \
    MP_CHECK(cond, __VA_ARGS__);        \
    pthread_mutex_unlock(&mp_check_lock); \
  } while (0)

/* Flushes: forked ranks leave with _exit (mp_spawn), which does not. */
static inline int mp_finish(const char* name) {
  printf("%s: %d passed, %d failed\n", name, mp_passed, mp_failed);
  fflush(stdout);
  return mp_failed ? 1 : 0;
}

/* Whether `name` is one of the comma-separated names of `list`. */
static inline int mp_has_phase(const char* list, const char* name) {
  size_t n = strlen(name);
  for (const char* p = list; (p = strstr(p, name)) != NULL; p += n)
    if ((p == list || p[-1] == ',') && (p[n] == '\0' || p[n] == ',')) return 1;
  return 0;
}

static inline double mp_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline void mp_sleep(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
}

typedef int (*mp_rank_fn)(int rank, int nRanks, ccoUniqueId id, void* arg);

/* Forks one child per rank; returns their pids. The child exits with fn's
 * return value. */
static inline void mp_spawn(pid_t* pids, int first, int count, int nRanks, ccoUniqueId id,
                            mp_rank_fn fn, void* arg) {
  fflush(stdout);
  fflush(stderr);
  for (int i = 0; i < count; i++) {
    pid_t pid = fork();
    if (pid == 0) _exit(fn(first + i, nRanks, id, arg));
    pids[i] = pid;
  }
}

/* Waits for the children until the time limit; kills leftovers. Writes each
 * exit code (128+signal when killed, -1 when it had to be killed) and, when
 * reapedAt is not NULL, the mp_now() at which each was reaped (within the
 * 5 ms of a poll; the kernel closes a process's sockets before it can be
 * reaped, so this bounds when its peers could see it gone). */
static inline void mp_wait_timed(pid_t* pids, int count, double limit, int* codes, double* reapedAt) {
  double end = mp_now() + limit;
  int left = count;
  for (int i = 0; i < count; i++) codes[i] = -2;
  while (left > 0 && mp_now() < end) {
    for (int i = 0; i < count; i++) {
      if (codes[i] != -2) continue;
      int st;
      pid_t r = waitpid(pids[i], &st, WNOHANG);
      if (r == pids[i]) {
        codes[i] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (reapedAt) reapedAt[i] = mp_now();
        left--;
      }
    }
    if (left) mp_sleep(0.005);
  }
  for (int i = 0; i < count; i++) {
    if (codes[i] != -2) continue;
    kill(pids[i], SIGKILL);
    waitpid(pids[i], NULL, 0);
    codes[i] = -1;
    if (reapedAt) reapedAt[i] = mp_now();
  }
}

static inline void mp_wait(pid_t* pids, int count, double limit, int* codes) {
  mp_wait_timed(pids, count, limit, codes, NULL);
}

static inline int mp_count_dir(const char* path) {
  DIR* d = opendir(path);
  if (!d) return -1;
  int n = 0;
  struct dirent* e;
  while ((e = readdir(d)))
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}
/* Minus the fd opendir itself holds while counting. */
static inline int mp_count_fds(void) { return mp_count_dir("/proc/self/fd") - 1; }
static inline int mp_count_threads(void) { return mp_count_dir("/proc/self/task"); }
/* The thread count once threads that were already joined have left
 * /proc/self/task: the kernel wakes a joiner before it reaps the task, so a
 * count taken right after a join can include it. The lowest count seen over
 * a short window is the settled one; a leaked thread never leaves. */
static inline int mp_count_threads_settled(double window) {
  int low = mp_count_threads();
  for (double t0 = mp_now(); mp_now() - t0 < window;) {
    mp_sleep(0.005);
    int n = mp_count_threads();
    if (n < low) low = n;
  }
  return low;
}

#define MP_OK(call) ((call) == ccoSuccess)

/* Ranks as threads of this process: fn runs once per rank in a thread of
 * its own, with a communicator of one fresh id created for it (fn owns it).
 * Returns how many ranks could not create theirs (each failure printed), or
 * -1 when no id could be minted. */
typedef void (*mp_thread_rank_fn)(ccoComm* comm, int rank, int nRanks);

typedef struct {
  ccoUniqueId id;
  int rank, nRanks, failed;
  mp_thread_rank_fn fn;
} mp_thread_rank_;

static inline void* mp_thread_rank_main_(void* arg) {
  mp_thread_rank_* t = (mp_thread_rank_*)arg;
  ccoComm* comm = NULL;
  if (ccoCommCreate(t->id, t->nRanks, t->rank, 0, &comm) != ccoSuccess) {
    fprintf(stderr, "thread rank %d: create: %s\n", t->rank, ccoGetLastError(NULL));
    t->failed = 1;
    return NULL;
  }
  t->fn(comm, t->rank, t->nRanks);
  return NULL;
}

static inline int mp_run_thread_ranks(int nRanks, mp_thread_rank_fn fn) {
  ccoUniqueId id;
  if (ccoGetUniqueId(&id) != ccoSuccess) {
    fprintf(stderr, "ccoGetUniqueId: %s\n", ccoGetLastError(NULL));
    return -1;
  }
  mp_thread_rank_* ts = (mp_thread_rank_*)calloc((size_t)nRanks, sizeof(*ts));
  pthread_t* th = (pthread_t*)calloc((size_t)nRanks, sizeof(*th));
  if (!ts || !th) {
    free(ts);
    free(th);
    return nRanks;
  }
  for (int r = 0; r < nRanks; r++) {
    ts[r] = (mp_thread_rank_){id, r, nRanks, 0, fn};
    pthread_create(&th[r], NULL, mp_thread_rank_main_, &ts[r]);
  }
  int failed = 0;
  for (int r = 0; r < nRanks; r++) {
    pthread_join(th[r], NULL);
    failed += ts[r].failed;
  }
  free(ts);
  free(th);
  return failed;
}

#endif /* CCO_TESTS_MP_UTIL_H_ */
