/* Hosts, LSA ranks and the world / LSA / cross-node / rail teams. */
#include "boot/topology.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/env.h"
#include "base/error.h"

static void read_boot_id(char* out, size_t size) {
  out[0] = '\0';
  int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t n = read(fd, out, size - 1);
  close(fd);
  if (n <= 0) {
    out[0] = '\0';
    return;
  }
  out[n] = '\0';
  out[strcspn(out, "\r\n")] = '\0';
}

ccoResult_t cco_rank_info_local(cco_rank_info* info) {
  memset(info, 0, sizeof(*info));
  if (gethostname(info->hostname, sizeof(info->hostname) - 1) != 0)
    snprintf(info->hostname, sizeof(info->hostname), "unknown");
  info->pid = (int32_t)getpid();
  const char* forced = cco_env_str(CCO_ENV_ID_CCO_HOSTID);
  if (forced[0]) {
    snprintf(info->hostId, sizeof(info->hostId), "%s", forced);
  } else {
    char boot[64];
    read_boot_id(boot, sizeof(boot));
    /* Two containers may share a hostname but not a boot id, and the other
     * way round; the pair names one kernel. */
    snprintf(info->hostId, sizeof(info->hostId), "%s|%s", info->hostname, boot);
  }
  return ccoSuccess;
}

/* {n, index of rank, stride} of a sorted member list; stride 0 when the
 * members are not evenly spaced in world ranks. */
static ccoTeam describe(const int* members, int n, int rank) {
  ccoTeam t = {n, -1, 1};
  for (int i = 0; i < n; i++)
    if (members[i] == rank) t.rank = i;
  if (n >= 2) {
    t.stride = members[1] - members[0];
    for (int i = 2; i < n && t.stride; i++)
      if (members[i] - members[i - 1] != t.stride) t.stride = 0;
  }
  return t;
}

ccoResult_t cco_topology_build(const cco_rank_info* infos, int nRanks, int rank,
                               cco_topology* topo) {
  if (!infos || !topo || nRanks < 1 || rank < 0 || rank >= nRanks)
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_INIT, "bad topology arguments");
  memset(topo, 0, sizeof(*topo));
  topo->nRanks = nRanks;
  topo->rank = rank;
  topo->nodeOf = malloc(sizeof(int) * (size_t)nRanks);
  topo->lsaRankOf = malloc(sizeof(int) * (size_t)nRanks);
  topo->devices = malloc(sizeof(cco_device_identity) * (size_t)nRanks);
  int* hostSize = calloc((size_t)nRanks, sizeof(int));
  for (int k = 0; k < ccoNumTeams; k++) topo->members[k] = malloc(sizeof(int) * (size_t)nRanks);
  bool ok = topo->nodeOf && topo->lsaRankOf && topo->devices && hostSize;
  for (int k = 0; k < ccoNumTeams; k++) ok = ok && topo->members[k];
  if (!ok) {
    free(hostSize);
    cco_topology_free(topo);
    return cco_error(NULL, ccoOutOfMemory, CCO_SUBSYS_INIT, "no memory for the topology");
  }
  /* Hosts in order of their lowest world rank; O(n * hosts). */
  for (int r = 0; r < nRanks; r++) {
    int node = -1;
    for (int q = 0; q < r && node < 0; q++)
      if (strncmp(infos[q].hostId, infos[r].hostId, CCO_HOSTID_BYTES) == 0) node = topo->nodeOf[q];
    if (node < 0) node = topo->nNodes++;
    topo->nodeOf[r] = node;
    topo->lsaRankOf[r] = hostSize[node]++;
    topo->devices[r] = infos[r].device;
  }
  topo->node = topo->nodeOf[rank];
  topo->lsaRank = topo->lsaRankOf[rank];
  topo->lsaSize = hostSize[topo->node];

  int count[ccoNumTeams] = {0};
  for (int r = 0; r < nRanks; r++) {
    bool sameNode = topo->nodeOf[r] == topo->node;
    topo->members[ccoTeamWorld][count[ccoTeamWorld]++] = r;
    if (sameNode) topo->members[ccoTeamLsa][count[ccoTeamLsa]++] = r;
    if (!sameNode || r == rank) topo->members[ccoTeamCrossNode][count[ccoTeamCrossNode]++] = r;
    if (topo->lsaRankOf[r] == topo->lsaRank) topo->members[ccoTeamRail][count[ccoTeamRail]++] = r;
  }
  for (int k = 0; k < ccoNumTeams; k++)
    topo->teams[k] = describe(topo->members[k], count[k], rank);
  free(hostSize);
  return ccoSuccess;
}

void cco_topology_free(cco_topology* topo) {
  if (!topo) return;
  free(topo->nodeOf);
  free(topo->lsaRankOf);
  free(topo->devices);
  for (int k = 0; k < ccoNumTeams; k++) free(topo->members[k]);
  memset(topo, 0, sizeof(*topo));
}

int cco_topology_team_to_world(const cco_topology* topo, ccoTeamKind_t kind, int teamRank) {
  if ((int)kind < 0 || kind >= ccoNumTeams) return -1;
  if (teamRank < 0 || teamRank >= topo->teams[kind].nRanks) return -1;
  return topo->members[kind][teamRank];
}

int cco_topology_world_to_team(const cco_topology* topo, ccoTeamKind_t kind, int worldRank) {
  if ((int)kind < 0 || kind >= ccoNumTeams) return -1;
  const int* m = topo->members[kind];
  int lo = 0, hi = topo->teams[kind].nRanks - 1;
  while (lo <= hi) { /* members are sorted by world rank */
    int mid = (lo + hi) / 2;
    if (m[mid] == worldRank) return mid;
    if (m[mid] < worldRank) lo = mid + 1;
    else hi = mid - 1;
  }
  return -1;
}

int cco_topology_lsa_sharing_gpu(const cco_topology* topo, const char* busId) {
  int sharing = 0;
  for (int i = 0; i < topo->lsaSize; i++)
    sharing += strcmp(topo->devices[topo->members[ccoTeamLsa][i]].busId, busId) == 0;
  return sharing < 1 ? 1 : sharing;
}
