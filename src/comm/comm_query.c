/* Communicator queries: ranks, teams, the platform and the flat VA. */
#include "base/error.h"
#include "comm/comm.h"

ccoResult_t ccoGetVersion(int* version) {
  if (!version) return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_INIT, "version is NULL");
  *version = CCO_VERSION;
  return ccoSuccess;
}

/* A caller's mistake on a valid communicator: its last error, too. */
#define BAD_ARGUMENT(...) cco_error(cco_comm_errsink(comm), ccoInvalidArgument, __VA_ARGS__)

#define CCO_QUERY(fn, type, out, expr)                                       \
  ccoResult_t fn(const ccoComm* comm, type* out) {                           \
    CCO_VALIDATE_COMM(comm);                                                 \
    if (!out) return BAD_ARGUMENT(CCO_SUBSYS_INIT, #fn ": " #out " is NULL"); \
    *out = (expr);                                                           \
    return ccoSuccess;                                                       \
  }

CCO_QUERY(ccoCommRank, int, rank, comm->rank)
CCO_QUERY(ccoCommSize, int, nRanks, comm->nRanks)
CCO_QUERY(ccoCommLsaRank, int, lsaRank, comm->topo.lsaRank)
CCO_QUERY(ccoCommLsaSize, int, lsaSize, comm->topo.lsaSize)
CCO_QUERY(ccoCommNodeCount, int, nNodes, comm->topo.nNodes)
CCO_QUERY(ccoCommNodeIndex, int, node, comm->topo.node)

static ccoResult_t check_team_kind(const ccoComm* comm, ccoTeamKind_t kind) {
  if ((int)kind < 0 || kind >= ccoNumTeams)
    return BAD_ARGUMENT(CCO_SUBSYS_INIT, "unknown team kind %d", (int)kind);
  return ccoSuccess;
}

ccoResult_t ccoCommTeam(const ccoComm* comm, ccoTeamKind_t kind, ccoTeam* team) {
  CCO_VALIDATE_COMM(comm);
  CCO_CHECK(check_team_kind(comm, kind));
  if (!team) return BAD_ARGUMENT(CCO_SUBSYS_INIT, "team is NULL");
  *team = comm->topo.teams[kind];
  return ccoSuccess;
}

ccoResult_t ccoTeamRankToWorld(const ccoComm* comm, ccoTeamKind_t kind, int teamRank,
                               int* worldRank) {
  CCO_VALIDATE_COMM(comm);
  CCO_CHECK(check_team_kind(comm, kind));
  if (!worldRank) return BAD_ARGUMENT(CCO_SUBSYS_INIT, "worldRank is NULL");
  int w = cco_topology_team_to_world(&comm->topo, kind, teamRank);
  if (w < 0)
    return BAD_ARGUMENT(CCO_SUBSYS_INIT, "team rank %d out of range 0..%d", teamRank,
                        comm->topo.teams[kind].nRanks - 1);
  *worldRank = w;
  return ccoSuccess;
}

ccoResult_t ccoTeamRankFromWorld(const ccoComm* comm, ccoTeamKind_t kind, int worldRank,
                                 int* teamRank) {
  CCO_VALIDATE_COMM(comm);
  CCO_CHECK(check_team_kind(comm, kind));
  if (!teamRank) return BAD_ARGUMENT(CCO_SUBSYS_INIT, "teamRank is NULL");
  int t = cco_topology_world_to_team(&comm->topo, kind, worldRank);
  if (t < 0)
    return BAD_ARGUMENT(CCO_SUBSYS_INIT, "world rank %d is not a member of team %d", worldRank,
                        (int)kind);
  *teamRank = t;
  return ccoSuccess;
}

ccoResult_t ccoCommPlatform(const ccoComm* comm, ccoPlatform_t* platform) {
  CCO_VALIDATE_COMM(comm);
  if (!platform) return BAD_ARGUMENT(CCO_SUBSYS_MEM, "platform is NULL");
  *platform = comm->platform.kind == CCO_PLATFORM_CUDA ? ccoPlatformCuda : ccoPlatformHost;
  return ccoSuccess;
}

ccoResult_t ccoCommCudaDevice(const ccoComm* comm, int* device) {
  CCO_VALIDATE_COMM(comm);
  if (!device) return BAD_ARGUMENT(CCO_SUBSYS_MEM, "device is NULL");
  *device = comm->platform.kind == CCO_PLATFORM_CUDA ? comm->platform.identity.device : -1;
  return ccoSuccess;
}

ccoResult_t ccoCommFlatVa(const ccoComm* comm, void** base, size_t* slotSize) {
  CCO_VALIDATE_COMM(comm);
  if (!base || !slotSize)
    return BAD_ARGUMENT(CCO_SUBSYS_MEM, "base or slotSize is NULL");
  *base = comm->mem.flatBase;
  *slotSize = comm->mem.slotSize;
  return ccoSuccess;
}
