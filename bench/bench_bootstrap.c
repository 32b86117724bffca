/*
 * Bootstrap benchmark: communicator create+destroy time, host barrier
 * latency and the latency of a 48-byte allgather (what a torch rendezvous
 * exchanges) for several local rank counts (processes it forks itself),
 * each next to the raw loopback TCP one-way latency measured in the same
 * run (the floor of one barrier round, of one ring step of the allgather).
 *
 *   cco-bench-bootstrap [--ranks 2,4,8,16] [--reps 15] [-n 5000] [-w 500]
 *
 * One JSON line per measurement (bench_json.h); --help lists the options.
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

#include "bench_args.h"
#include "bench_json.h"
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
  double allgatherUs;
} rank_result;

#define AG_BYTES 48

static int rank_main(int rank, int nRanks, const ccoUniqueId* ids, int reps, long long warmup, long long iters,
                     int out) {
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
  for (long long i = 0; i < warmup; i++)
    if (ccoBarrierAll(comm) != ccoSuccess) return 1;
  double t0 = now_s();
  for (long long i = 0; i < iters; i++)
    if (ccoBarrierAll(comm) != ccoSuccess) return 1;
  res.barrierUs = (now_s() - t0) * 1e6 / iters;
  char* ag = calloc((size_t)nRanks, AG_BYTES);
  if (!ag) return 1;
  for (long long i = 0; i < warmup; i++)
    if (ccoBootstrapAllGather(comm, ag + (size_t)rank * AG_BYTES, ag, AG_BYTES) != ccoSuccess) return 1;
  if (ccoBarrierAll(comm) != ccoSuccess) return 1;
  t0 = now_s();
  for (long long i = 0; i < iters; i++)
    if (ccoBootstrapAllGather(comm, ag + (size_t)rank * AG_BYTES, ag, AG_BYTES) != ccoSuccess) return 1;
  res.allgatherUs = (now_s() - t0) * 1e6 / iters;
  free(ag);
  ccoCommDestroy(comm);
  return write(out, &res, sizeof(res)) == (ssize_t)sizeof(res) ? 0 : 1;
}

static int run(int nRanks, int reps, long long warmup, long long iters, double refUs) {
  ccoUniqueId ids[64];
  for (int r = 0; r < reps; r++)
    if (ccoGetUniqueId(&ids[r]) != ccoSuccess) return 1;
  int pipes[64][2];
  pid_t pids[64];
  for (int i = 0; i < nRanks; i++) {
    if (pipe(pipes[i])) return 1;
    pids[i] = fork();
    if (pids[i] == 0) _exit(rank_main(i, nRanks, ids, reps, warmup, iters, pipes[i][1]));
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
  double create[64], destroy[64], barrier = 0, allgather = 0;
  for (int r = 0; r < reps; r++) {
    create[r] = destroy[r] = 0;
    for (int i = 0; i < nRanks; i++) {
      if (all[i].createMs[r] > create[r]) create[r] = all[i].createMs[r];
      if (all[i].destroyMs[r] > destroy[r]) destroy[r] = all[i].destroyMs[r];
    }
  }
  for (int i = 0; i < nRanks; i++) {
    if (all[i].barrierUs > barrier) barrier = all[i].barrierUs;
    if (all[i].allgatherUs > allgather) allgather = all[i].allgatherUs;
  }
  int rounds = 0;
  while ((1 << rounds) < nRanks) rounds++;
  double cmed = median(create, reps), dmed = median(destroy, reps);
  bench_line l;
  bench_line_start(&l, "bootstrap", "comm_create", BENCH_NO_BYTES, nRanks, reps);
  bench_line_emit(&l, "ms", cmed, NULL);
  bench_line_start(&l, "bootstrap", "comm_destroy", BENCH_NO_BYTES, nRanks, reps);
  bench_line_emit(&l, "ms", dmed, NULL);
  /* A dissemination barrier needs `rounds` one-way trips: that is its floor. */
  bench_line_start(&l, "bootstrap", "host_barrier", BENCH_NO_BYTES, nRanks, iters);
  bench_line_int(&l, "warmup", warmup);
  bench_line_int(&l, "rounds", rounds);
  bench_line_emit(&l, "us", barrier, NULL);
  bench_line_emit(&l, "us", rounds * refUs, "tcp_oneway_x_rounds");
  /* A ring allgather takes n - 1 steps, one trip each. */
  bench_line_start(&l, "bootstrap", "host_allgather", AG_BYTES, nRanks, iters);
  bench_line_int(&l, "warmup", warmup);
  bench_line_int(&l, "steps", nRanks - 1);
  bench_line_emit(&l, "us", allgather, NULL);
  bench_line_emit(&l, "us", (nRanks - 1) * refUs, "tcp_oneway_x_steps");
  return 0;
}

int main(int argc, char** argv) {
  bench_opt opts[] = {
      {.name = "ranks", .kind = BENCH_OPT_LIST, .min = 2, .max = 64, .help = "rank counts, each a job of its own"},
      {.name = "reps", .kind = BENCH_OPT_INT, .min = 1, .max = 64, .help = "creations timed per rank count",
       .value = 15},
  };
  bench_args a = {0};
  a.program = "cco-bench-bootstrap";
  a.about = "Communicator create/destroy time and host barrier latency, beside loopback TCP's one-way latency.";
  a.takes = BENCH_TAKES_ITERS | BENCH_TAKES_WARMUP;
  a.opts = opts;
  a.nOpts = 2;
  a.defaults = "--ranks 2,4,8,16, -n 5000 barriers after -w 500; the TCP reference takes 4 x n round trips";
  int rc = bench_args_parse(&a, argc, argv);
  if (rc != BENCH_ARGS_RUN) return bench_args_exit_status(rc);
  static const long long defaultRanks[] = {2, 4, 8, 16};
  const long long* ranks = opts[0].set ? opts[0].list : defaultRanks;
  int nSteps = opts[0].set ? opts[0].count : 4;
  long long iters = bench_args_iters(&a, 5000), warmup = bench_args_warmup(&a, 500);
  /* 20,000 round trips with the defaults: enough for a steady median on a busy machine. */
  long long refIters = 4 * iters < 1000 ? 1000 : 4 * iters > 1000000 ? 1000000 : 4 * iters;
  double refUs = raw_tcp_oneway_us((int)refIters);
  if (refUs < 0) {
    fprintf(stderr, "cco-bench-bootstrap: the loopback TCP reference failed\n");
    return 1;
  }
  bench_line l;
  bench_line_start(&l, "bootstrap", "tcp_oneway", 16, 2, refIters);
  bench_line_int(&l, "cpus", sysconf(_SC_NPROCESSORS_ONLN));
  bench_line_emit(&l, "us", refUs, "tcp_loopback");
  rc = 0;
  for (int i = 0; i < nSteps && !rc; i++) rc = run((int)ranks[i], (int)opts[1].value, warmup, iters, refUs);
  return rc;
}
