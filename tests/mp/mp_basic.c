/*
 * One rank of a job started by ccorun: creates a communicator from the
 * launcher's environment and checks rank queries, allgathers of many sizes,
 * barriers, teams and argument errors.
 *
 *   ccorun -n N mp_basic [--hosts H] [--iters K]
 *
 * --hosts H makes the job play H hosts (blocked: ranks [i*N/H, (i+1)*N/H) on
 * host i) by setting CCO_HOSTID before the first cco call.
 */
#include <stdint.h>

#include "mp_util.h"

static int g_rank, g_size;

static uint8_t pattern(int rank, size_t i, size_t round) {
  return (uint8_t)(rank * 131 + i * 7 + round * 13 + 1);
}

static void check_allgather(ccoComm* comm, size_t bytes, size_t round, int inPlace) {
  uint8_t* recv = malloc((size_t)g_size * bytes + 1);
  uint8_t* send = malloc(bytes + 1);
  for (size_t i = 0; i < (size_t)g_size * bytes; i++) recv[i] = 0xEE;
  uint8_t* mine = inPlace ? recv + (size_t)g_rank * bytes : send;
  for (size_t i = 0; i < bytes; i++) mine[i] = pattern(g_rank, i, round);
  ccoResult_t r = ccoBootstrapAllGather(comm, mine, recv, bytes);
  MP_CHECK(r == ccoSuccess, "allgather %zu bytes: %s", bytes, ccoGetLastError(comm));
  size_t bad = 0;
  for (int p = 0; p < g_size; p++)
    for (size_t i = 0; i < bytes; i++) bad += recv[(size_t)p * bytes + i] != pattern(p, i, round);
  MP_CHECK(bad == 0, "allgather %zu bytes (in place %d): %zu wrong bytes", bytes, inPlace, bad);
  free(recv);
  free(send);
}

static void check_teams(ccoComm* comm, int hosts) {
  int per = g_size / hosts;
  int lsaRank = -1, lsaSize = -1, nNodes = -1, node = -1;
  MP_CHECK(MP_OK(ccoCommLsaRank(comm, &lsaRank)) && lsaRank == g_rank % per, "lsaRank %d", lsaRank);
  MP_CHECK(MP_OK(ccoCommLsaSize(comm, &lsaSize)) && lsaSize == per, "lsaSize %d", lsaSize);
  MP_CHECK(MP_OK(ccoCommNodeCount(comm, &nNodes)) && nNodes == hosts, "nNodes %d", nNodes);
  MP_CHECK(MP_OK(ccoCommNodeIndex(comm, &node)) && node == g_rank / per, "node %d", node);
  ccoTeam t;
  MP_CHECK(MP_OK(ccoCommTeam(comm, ccoTeamWorld, &t)) && t.nRanks == g_size && t.rank == g_rank &&
               t.stride == 1, "world team");
  MP_CHECK(MP_OK(ccoCommTeam(comm, ccoTeamLsa, &t)) && t.nRanks == per && t.rank == g_rank % per &&
               t.stride == 1, "lsa team {%d,%d,%d}", t.nRanks, t.rank, t.stride);
  MP_CHECK(MP_OK(ccoCommTeam(comm, ccoTeamRail, &t)) && t.nRanks == hosts &&
               t.rank == g_rank / per && (hosts == 1 || t.stride == per),
           "rail team {%d,%d,%d}", t.nRanks, t.rank, t.stride);
  MP_CHECK(MP_OK(ccoCommTeam(comm, ccoTeamCrossNode, &t)) && t.nRanks == g_size - per + 1,
           "cross-node team {%d,%d,%d}", t.nRanks, t.rank, t.stride);
  for (int k = 0; k < ccoNumTeams; k++) {
    MP_CHECK(MP_OK(ccoCommTeam(comm, (ccoTeamKind_t)k, &t)), "team %d", k);
    for (int i = 0; i < t.nRanks; i++) {
      int w = -1, back = -1;
      MP_CHECK(MP_OK(ccoTeamRankToWorld(comm, (ccoTeamKind_t)k, i, &w)) &&
                   MP_OK(ccoTeamRankFromWorld(comm, (ccoTeamKind_t)k, w, &back)) && back == i,
               "team %d member %d -> %d -> %d", k, i, w, back);
      if (t.stride) MP_CHECK(w == g_rank + (i - t.rank) * t.stride, "team %d stride", k);
      if (k == ccoTeamLsa) MP_CHECK(w / per == g_rank / per, "lsa member %d on another host", w);
      if (k == ccoTeamRail) MP_CHECK(w % per == g_rank % per, "rail member %d", w);
      if (k == ccoTeamCrossNode)
        MP_CHECK(w == g_rank || w / per != g_rank / per, "cross-node member %d", w);
    }
    int w;
    MP_CHECK(ccoTeamRankToWorld(comm, (ccoTeamKind_t)k, t.nRanks, &w) == ccoInvalidArgument,
             "out-of-range team rank accepted");
  }
}

static void check_errors(ccoComm* comm) {
  int x = 0;
  ccoTeam t;
  char buf[16];
  MP_CHECK(ccoCommRank(comm, NULL) == ccoInvalidArgument, "NULL rank out");
  MP_CHECK(ccoCommRank(NULL, &x) == ccoInvalidArgument, "NULL comm");
  MP_CHECK(ccoCommTeam(comm, ccoNumTeams, &t) == ccoInvalidArgument, "bad team kind");
  MP_CHECK(ccoBootstrapAllGather(comm, buf, NULL, 4) == ccoInvalidArgument, "NULL recvbuf");
  MP_CHECK(ccoBootstrapAllGather(comm, NULL, buf, 4) == ccoInvalidArgument, "NULL sendbuf");
  /* A huge size is refused as such (not as buffers that "overlap"). */
  char other[16];
  const size_t sizes[] = {(size_t)1 << 40, (size_t)UINT32_MAX + 1, SIZE_MAX / 2, SIZE_MAX};
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    MP_CHECK(ccoBootstrapAllGather(comm, other, buf, sizes[i]) == ccoInvalidArgument,
             "allgather of %zu bytes per rank accepted", sizes[i]);
    const char* e = ccoGetLastError(comm);
    MP_CHECK(strstr(e, "bytes per rank") && !strstr(e, "overlap"), "size %zu: %s", sizes[i], e);
  }
  MP_CHECK(ccoBarrierAll(comm) == ccoSuccess, "barrier after refused allgathers: %s",
           ccoGetLastError(comm));
  MP_CHECK(strlen(ccoGetLastError(comm)) > 0, "no detail after an error");
}

int main(int argc, char** argv) {
  int hosts = 1, iters = 1000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--hosts")) hosts = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--iters")) iters = atoi(argv[i + 1]);
  }
  const char* r = getenv("CCO_RANK");
  const char* n = getenv("CCO_NRANKS");
  if (!r || !n) {
    fprintf(stderr, "mp_basic: start me with ccorun\n");
    return 2;
  }
  int envRank = atoi(r), envSize = atoi(n);
  if (hosts < 1 || envSize % hosts) {
    fprintf(stderr, "mp_basic: --hosts must divide the rank count\n");
    return 2;
  }
  char hostId[32];
  snprintf(hostId, sizeof(hostId), "vhost%d", envRank / (envSize / hosts));
  if (hosts > 1) setenv("CCO_HOSTID", hostId, 1);

  ccoComm* comm = NULL;
  ccoResult_t res = ccoCommCreateFromEnv(0, &comm);
  MP_CHECK(res == ccoSuccess, "create: %s", ccoGetLastError(NULL));
  if (res != ccoSuccess) return mp_finish("mp_basic");
  MP_CHECK(MP_OK(ccoCommRank(comm, &g_rank)) && g_rank == envRank, "rank %d", g_rank);
  MP_CHECK(MP_OK(ccoCommSize(comm, &g_size)) && g_size == envSize, "size %d", g_size);

  const size_t sizes[] = {0, 1, 7, 4096, 65537, 1 << 20};
  for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
    check_allgather(comm, sizes[s], s, 0);
    check_allgather(comm, sizes[s], s + 100, 1);
  }
  int done = 0;
  while (done < iters && ccoBarrierAll(comm) == ccoSuccess) done++;
  MP_CHECK(done == iters, "barrier %d of %d failed: %s", done, iters, ccoGetLastError(comm));
  check_teams(comm, hosts);
  check_errors(comm);
  ccoResult_t async = ccoInternalError;
  MP_CHECK(MP_OK(ccoCommGetAsyncError(comm, &async)) && async == ccoSuccess, "async error %d", async);
  MP_CHECK(MP_OK(ccoBarrierAll(comm)), "final barrier");
  MP_CHECK(MP_OK(ccoCommDestroy(comm)), "destroy");
  char name[32];
  snprintf(name, sizeof(name), "mp_basic rank %d", envRank);
  return mp_finish(name);
}
