/*
 * cco-demo: the main job. Start it with `ccorun -n 4 cco-demo`.
 * Every rank creates a communicator from the launcher's environment, takes
 * part in a barrier and an allgather, and rank 0 prints the topology and the
 * measured host barrier latency.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cco/cco.h"

#define CHECK(call)                                                                   \
  do {                                                                                \
    ccoResult_t r_ = (call);                                                          \
    if (r_ != ccoSuccess) {                                                           \
      fprintf(stderr, "cco-demo: %s failed: %s (%s)\n", #call, ccoGetErrorString(r_), \
              ccoGetLastError(comm));                                                 \
      exit(1);                                                                        \
    }                                                                                 \
  } while (0)

typedef struct {
  int rank, lsaRank, node, pid;
  char host[64];
  double barrierUs;
} rank_report;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(void) {
  ccoComm* comm = NULL;
  double t0 = now_s();
  CHECK(ccoCommCreateFromEnv(0, &comm));
  double createMs = (now_s() - t0) * 1e3;
  int rank, size, nNodes;
  CHECK(ccoCommRank(comm, &rank));
  CHECK(ccoCommSize(comm, &size));
  CHECK(ccoCommNodeCount(comm, &nNodes));
  CHECK(ccoBarrierAll(comm));

  enum { warmup = 100, iters = 2000 };
  for (int i = 0; i < warmup; i++) CHECK(ccoBarrierAll(comm));
  double t1 = now_s();
  for (int i = 0; i < iters; i++) CHECK(ccoBarrierAll(comm));
  double barrierUs = (now_s() - t1) * 1e6 / iters;

  rank_report mine = {0};
  mine.rank = rank;
  mine.pid = (int)getpid();
  mine.barrierUs = barrierUs;
  CHECK(ccoCommLsaRank(comm, &mine.lsaRank));
  CHECK(ccoCommNodeIndex(comm, &mine.node));
  gethostname(mine.host, sizeof(mine.host) - 1);
  rank_report* all = calloc((size_t)size, sizeof(*all));
  if (!all) return 1;
  CHECK(ccoBootstrapAllGather(comm, &mine, all, sizeof(mine)));

  if (rank == 0) {
    ccoTeam_t teams[ccoNumTeams];
    for (int k = 0; k < ccoNumTeams; k++) CHECK(ccoCommTeam(comm, (ccoTeamKind_t)k, &teams[k]));
    printf("cco-demo: %d ranks on %d host(s); communicator created in %.1f ms\n", size, nNodes,
           createMs);
    printf("  rank  node  lsa  pid      host              barrier us\n");
    for (int r = 0; r < size; r++)
      printf("  %4d  %4d  %3d  %-7d  %-16s  %6.1f\n", all[r].rank, all[r].node, all[r].lsaRank,
             all[r].pid, all[r].host, all[r].barrierUs);
    const char* names[ccoNumTeams] = {"world", "lsa", "cross-node", "rail"};
    for (int k = 0; k < ccoNumTeams; k++)
      printf("  team %-10s {nRanks %d, rank %d, stride %d}\n", names[k], teams[k].nRanks,
             teams[k].rank, teams[k].stride);
    printf("cco-demo: host barrier latency %.1f us (mean of %d, rank 0)\n", barrierUs, iters);
  }
  CHECK(ccoBarrierAll(comm));
  free(all);
  CHECK(ccoCommDestroy(comm));
  return 0;
}
