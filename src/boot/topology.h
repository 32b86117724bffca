/*
 * Topology and teams, computed from what every rank says about itself.
 *
 * A host is the set of ranks with the same host identity (CCO_HOSTID, else
 * hostname + kernel boot id). Hosts are numbered by their lowest world rank;
 * a rank's LSA rank is its index among its host's ranks in world-rank order,
 * whether or not those ranks are contiguous.
 */
#ifndef CCO_BOOT_TOPOLOGY_H_
#define CCO_BOOT_TOPOLOGY_H_

#include <stdint.h>

#include "cco/cco.h"

#define CCO_HOSTID_BYTES 128
#define CCO_BUS_ID_BYTES 32

/* Which platform a rank runs on and which GPU it uses: allgathered at
 * creation so that every rank checks the same things of its LSA peers. */
typedef enum { CCO_PLATFORM_HOST = 0, CCO_PLATFORM_CUDA = 1 } cco_platform_kind;

typedef struct {
  char busId[CCO_BUS_ID_BYTES]; /* "" on the host platform */
  int32_t device;               /* ordinal in this process; -1 on the host platform */
  int32_t platform;             /* cco_platform_kind */
} cco_device_identity;

/* What one rank tells the others at creation (fixed size, allgathered). */
typedef struct {
  char hostId[CCO_HOSTID_BYTES]; /* NUL-terminated */
  char hostname[64];
  int32_t pid;
  cco_device_identity device; /* platform and GPU: LSA peers must map each other's memory */
  uint32_t reserved[5];
} cco_rank_info;

typedef struct {
  int nRanks, rank;
  int nNodes, node;
  int lsaSize, lsaRank;
  int* nodeOf;    /* [nRanks] host index of each world rank */
  int* lsaRankOf; /* [nRanks] LSA rank of each world rank */
  ccoTeam teams[ccoNumTeams];
  int* members[ccoNumTeams]; /* world ranks of each team, in team-rank order */
  cco_device_identity* devices; /* [nRanks] each rank's platform and GPU */
} cco_topology;

/* Fills this rank's info: host identity from CCO_HOSTID or hostname + boot id. */
ccoResult_t cco_rank_info_local(cco_rank_info* info);

/* Pure: builds the topology seen by `rank` from every rank's info. */
ccoResult_t cco_topology_build(const cco_rank_info* infos, int nRanks, int rank, cco_topology* topo);
void cco_topology_free(cco_topology* topo);

/* -1 when teamRank is out of range / worldRank is not a member. */
int cco_topology_team_to_world(const cco_topology* topo, ccoTeamKind_t kind, int teamRank);
int cco_topology_world_to_team(const cco_topology* topo, ccoTeamKind_t kind, int worldRank);
/* Ranks of this rank's LSA team on the GPU with PCI bus id `busId` (at
 * least 1): the ranks whose grids must fit on it at once (MPS). */
int cco_topology_lsa_sharing_gpu(const cco_topology* topo, const char* busId);

#endif /* CCO_BOOT_TOPOLOGY_H_ */
