/*
 * Bootstrap benchmark: communicator create+destroy time and host barrier
 * latency for 2..16 local ranks (processes), each next to the raw loopback
 * TCP one-way latency measured in the same run (the floor of one barrier
 * round).
 *
 *   cco-bench-bootstrap [maxRanks] [createReps] [barrierIters]
 *
 * Prints one JSON line per measurement.
 */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cco/cco.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static double median(double* v, int n) {
  qsort(v, (size_t)n, sizeof(double), cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Raw reference: ping-pong of 16-byte messages between two processes over
 * loopback TCP (blocking sockets, TCP_NODELAY); returns one-way us. */
static double raw_tcp_oneway_us(int iters) {
  int lfd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (lfd < 0 || bind(lfd, (struct sockaddr*)&a, sizeof(a)) || listen(lfd, 1) ||
      getsockname(lfd, (struct sockaddr*)&a, &len))
    return -1;
  pid_t pid = fork();
  if (pid == 0) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, (struct sockaddr*)&a, sizeof(a))) _exit(1);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    char buf[16];
    for (int i = 0; i < iters + 100; i++) {
      if (recv(fd, buf, sizeof(buf), MSG_WAITALL) != (ssize_t)sizeof(buf)) _exit(1);
      if (send(fd, buf, sizeof(buf), 0) != (ssize_t)sizeof(buf)) _exit(1);
    }
    _exit(0);
  }
  int fd = accept(lfd, NULL, NULL);
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  char buf[16] = {0};
  double t0 = 0;
  for (int i = 0; i < iters + 100; i++) {
    if (i == 100) t0 = now_s();
    if (send(fd, buf, sizeof(buf), 0) != (ssize_t)sizeof(buf) ||
        recv(fd, buf, sizeof(buf), MSG_WAITALL) != (ssize_t)sizeof(buf))
      return -1;
  }
  double us = (now_s() - t0) * 1e6 / iters / 2;
  close(fd);
  close(lfd);
  waitpid(pid, NULL, 0);
  return us;
}

typedef struct {
  double createMs[64];
  double destroyMs[64];
  double barrierUs;
} rank_result;

static int rank_main(int rank, int nRanks, const ccoUniqueId* ids, int reps, int iters, int out) {
  rank_result res;
  memset(&res, 0, sizeof(res));
  ccoComm* comm = NULL;
  for (int r = 0; r < reps; r++) {
    double t0 = now_s();
    if (ccoCommCreate(ids[r], nRanks, rank, 0, &comm) != ccoSuccess) return 1;
    double t1 = now_s();
    /* Line the ranks up so the next create starts together. */
    if (ccoBarrierAll(comm) != ccoSuccess) return 1;
    double t2 = now_s();
    if (r < reps - 1 && ccoCommDestroy(comm) != ccoSuccess) return 1;
    res.createMs[r] = (t1 - t0) * 1e3;
    res.destroyMs[r] = (now_s() - t2) * 1e3;
  }
  for (int i = 0; i < 500; i++)
    if (ccoBarrierAll(comm) != ccoSuccess) return 1;
  double t0 = now_s();
  for (int i = 0; i < iters; i++)
    if (ccoBarrierAll(comm) != ccoSuccess) return 1;
  res.barrierUs = (now_s() - t0) * 1e6 / iters;
  ccoCommDestroy(comm);
  return write(out, &res, sizeof(res)) == (ssize_t)sizeof(res) ? 0 : 1;
}

static int run(int nRanks, int reps, int iters, double refUs) {
  ccoUniqueId ids[64];
  for (int r = 0; r < reps; r++)
    if (ccoGetUniqueId(&ids[r]) != ccoSuccess) return 1;
  int pipes[64][2];
  pid_t pids[64];
  for (int i = 0; i < nRanks; i++) {
    if (pipe(pipes[i])) return 1;
    pids[i] = fork();
    if (pids[i] == 0) _exit(rank_main(i, nRanks, ids, reps, iters, pipes[i][1]));
    close(pipes[i][1]);
  }
  rank_result all[64];
  int bad = 0;
  for (int i = 0; i < nRanks; i++) {
    if (read(pipes[i][0], &all[i], sizeof(all[i])) != (ssize_t)sizeof(all[i])) bad = 1;
    close(pipes[i][0]);
    int st;
    waitpid(pids[i], &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st)) bad = 1;
  }
  if (bad) {
    fprintf(stderr, "bench: a rank failed with %d ranks\n", nRanks);
    return 1;
  }
  /* A collective is done when its slowest rank is done. */
  double create[64], destroy[64], barrier = 0;
  for (int r = 0; r < reps; r++) {
    create[r] = destroy[r] = 0;
    for (int i = 0; i < nRanks; i++) {
      if (all[i].createMs[r] > create[r]) create[r] = all[i].createMs[r];
      if (all[i].destroyMs[r] > destroy[r]) destroy[r] = all[i].destroyMs[r];
    }
  }
  for (int i = 0; i < nRanks; i++)
    if (all[i].barrierUs > barrier) barrier = all[i].barrierUs;
  int rounds = 0;
  while ((1 << rounds) < nRanks) rounds++;
  double cmed = median(create, reps), dmed = median(destroy, reps);
  printf("{\"bench\":\"comm_create\",\"ranks\":%d,\"median_ms\":%.3f,\"reps\":%d,"
         "\"destroy_median_ms\":%.3f}\n",
         nRanks, cmed, reps, dmed);
  printf("{\"bench\":\"host_barrier\",\"ranks\":%d,\"us\":%.2f,\"rounds\":%d,"
         "\"ref_tcp_oneway_us\":%.2f,\"ratio_to_rounds_x_ref\":%.2f}\n",
         nRanks, barrier, rounds, refUs, rounds ? barrier / (rounds * refUs) : 0.0);
  fflush(stdout);
  return 0;
}

int main(int argc, char** argv) {
  int maxRanks = argc > 1 ? atoi(argv[1]) : 16;
  int reps = argc > 2 ? atoi(argv[2]) : 15;
  int iters = argc > 3 ? atoi(argv[3]) : 5000;
  if (maxRanks < 2 || maxRanks > 64 || reps < 1 || reps > 64 || iters < 1) {
    fprintf(stderr, "usage: cco-bench-bootstrap [maxRanks 2..64] [createReps 1..64] [iters]\n");
    return 2;
  }
  double refUs = raw_tcp_oneway_us(20000);
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  printf("{\"bench\":\"ref_tcp_loopback\",\"oneway_us\":%.2f,\"cpus\":%ld}\n", refUs, cpus);
  int rc = 0;
  for (int n = 2; n <= maxRanks && !rc; n *= 2) rc = run(n, reps, iters, refUs);
  return rc;
}
