/*
 * The collectives' per-communicator state, made by every rank's first
 * collective call (or ccoBarrierOnStream), together: a collective step
 * over the bootstrap, so it may not be captured in a CUDA graph. It is an
 * internal device communicator with one LSA barrier per part (and one for
 * ccoBarrierOnStream), and GDA to the other hosts when there are any, a
 * scratch window zeroed once, and the engine's part
 * (its status word, CPU workers or kernel module). The communicator owns
 * the first two like any device communicator and window (ccoCommDestroy
 * releases them); the engine releases its own part.
 */
#include <stdlib.h>
#include <string.h>

#include "base/env.h"
#include "base/error.h"
#include "cco/cco_coll.h"
#include "coll/coll.h"
#include "comm/comm.h"

typedef struct {
  int32_t status;  /* this rank's local verdict (ccoResult_t) */
  uint32_t nParts; /* the most parts it can run */
  uint64_t config; /* hash of CCO_ALGO and CCO_COLL_PARTS, which must agree */
} setup_vote;

static uint64_t config_hash(const cco_coll_config* cfg, int64_t envParts) {
  uint64_t h = 1469598103934665603ull;
  for (int k = 0; k < CCO_COLL_KINDS; k++)
    h = (h ^ ((uint64_t)cfg->forced[k] << 1 | (uint64_t)cfg->demanded[k])) * 1099511628211ull;
  return (h ^ (uint64_t)envParts) * 1099511628211ull;
}

/* Every rank's verdict, the parts they agree on (the fewest any can run),
 * and whether their configurations match. */
static ccoResult_t vote(ccoComm* comm, ccoResult_t local, uint32_t nParts, uint64_t config, uint32_t* agreed) {
  setup_vote* votes = calloc((size_t)comm->nRanks, sizeof(setup_vote));
  if (!votes) return cco_error(&comm->err, ccoOutOfMemory, CCO_SUBSYS_COLL, "no memory");
  votes[comm->rank] = (setup_vote){(int32_t)local, nParts, config};
  ccoResult_t res = ccoBootstrapAllGather(comm, &votes[comm->rank], votes, sizeof(setup_vote));
  if (res == ccoSuccess) res = local;
  *agreed = nParts;
  for (int r = 0; res == ccoSuccess && r < comm->nRanks; r++) {
    if (votes[r].status != ccoSuccess)
      res = cco_error(&comm->err, ccoRemoteError, CCO_SUBSYS_COLL,
                      "rank %d: the collectives could not be set up on rank %d (%s there)", comm->rank, r,
                      ccoGetErrorString((ccoResult_t)votes[r].status));
    else if (votes[r].config != config)
      res = cco_error(&comm->err, ccoInvalidUsage, CCO_SUBSYS_COLL,
                      "rank %d: CCO_ALGO or CCO_COLL_PARTS differ between rank %d and rank %d; set them alike "
                      "on every rank",
                      comm->rank, comm->rank, r);
    else if (votes[r].nParts < *agreed)
      *agreed = votes[r].nParts;
  }
  free(votes);
  return res;
}

/* What only this rank can check before the collective steps: CCO_ALGO, no
 * capture (setup synchronizes), and how many parts it can run. The detail
 * of a failure is in the communicator's last error. */
static ccoResult_t setup_local(ccoComm* comm, cco_coll_engine* e, const char* api, void* stream,
                               cco_coll_config* cfg, uint32_t* nParts) {
  char why[256];
  ccoResult_t res = cco_coll_config_parse(cco_env_str(CCO_ENV_ID_CCO_ALGO), cfg, why, sizeof(why));
  if (res != ccoSuccess) return cco_error(&comm->err, res, CCO_SUBSYS_COLL, "%s: %s", api, why);
  bool capturing = false;
  CCO_CHECK(cco_comm_keep_error(comm, cco_coll_engine_capturing(e, stream, &capturing)));
  if (capturing)
    return cco_error(&comm->err, ccoInvalidUsage, CCO_SUBSYS_COLL,
                     "%s: the first collective of a communicator sets its state up, which cannot be captured "
                     "in a CUDA graph; make one collective on this communicator before capturing",
                     api);
  uint32_t wanted = cco_coll_default_parts(comm->platform.kind, cco_env_int(CCO_ENV_ID_CCO_COLL_PARTS));
  return cco_comm_keep_error(comm, cco_coll_engine_prepare(e, wanted, nParts));
}

/* The scratch window zeroed, the device communicator's device copy, and
 * the engine's part; local. */
static ccoResult_t setup_finish(ccoComm* comm, cco_coll_engine* e, cco_coll_setup* s, void* scratchLocal) {
  void* zeros = calloc(1, s->scratchBytes);
  if (!zeros) return cco_error(&comm->err, ccoOutOfMemory, CCO_SUBSYS_COLL, "no memory");
  ccoResult_t res = comm->platform.ops->copy_to_device(&comm->platform, scratchLocal, zeros, s->scratchBytes);
  free(zeros);
  CCO_CHECK(cco_comm_keep_error(comm, res));
  ccoDevComm* dev = NULL;
  CCO_CHECK(ccoDevCommCopyToDevice(comm, &s->dcHost, &dev));
  s->dcDev = dev;
  return cco_comm_keep_error(comm, cco_coll_engine_setup(e, s));
}

/* A rank that fails a local step still takes part in the votes, so every
 * rank fails alike. */
ccoResult_t cco_coll_state_setup(ccoComm* comm, cco_coll_engine* e, const char* api, void* stream) {
  cco_coll_setup s;
  memset(&s, 0, sizeof(s));
  uint32_t nParts = 0;
  ccoResult_t local = setup_local(comm, e, api, stream, &s.config, &nParts);
  uint64_t config = config_hash(&s.config, cco_env_int(CCO_ENV_ID_CCO_COLL_PARTS));
  CCO_CHECK(vote(comm, local, nParts, config, &s.nParts));

  ccoDevCommRequirements reqs = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  /* Part p uses LSA barrier p; the last one is ccoBarrierOnStream's: an LSA
   * barrier on one host, the LSA part of world barrier 0 across hosts. */
  int nNodes = comm->topo.nNodes;
  reqs.lsaBarrierCount = CCO_COLL_MAX_PARTS + (nNodes > 1 ? 0 : 1);
  reqs.barrierCount = nNodes > 1 ? 1 : 0;
  /* GDA only across hosts (one host starts no proxy and no engine): the
   * hierarchical blocks put to the rail peers, which the cross-node
   * connection reaches, with signals part x nNodes + railRank (all-to-all
   * puts to every rank of the other hosts, with one signal per part and
   * sender after those). The stream calls to peers on other hosts use
   * the same connection (every rank of the other hosts). */
  reqs.gdaConnectionType = nNodes > 1 ? ccoGdaConnectionCrossNode : ccoGdaConnectionNone;
  if (nNodes > 1) {
    reqs.gdaSignalCount = s.nParts * (uint32_t)(nNodes + comm->nRanks); /* the rail's, all-to-all's */
    reqs.gdaCounterCount = 0;
  }
  CCO_CHECK(ccoDevCommCreate(comm, &reqs, &s.dcHost));
  /* Room for the most parts any call may use, whatever this rank's count:
   * the layout then never depends on it. Across hosts the hierarchical
   * blocks' regions follow, one per part in use. The window is registered
   * after the device communicator, so GDA registers it with the network
   * engine and the blocks can put into it. */
  int widest = comm->topo.lsaSize; /* every rank registers one size, also on hosts of unequal size */
  for (int node = 0; node < nNodes; node++) {
    int size = 0;
    for (int r = 0; r < comm->nRanks; r++) size += comm->topo.nodeOf[r] == node;
    if (size > widest) widest = size;
  }
  uint64_t bytes = nNodes > 1 ? ccoDevCollHierScratchBytes(widest, nNodes, s.nParts)
                              : ccoDevCollScratchBytes(comm->topo.lsaSize, CCO_COLL_MAX_PARTS);
  s.scratchBytes = bytes ? (bytes + 4095) & ~(uint64_t)4095 : 4096;
  s.timeout = cco_env_double(CCO_ENV_ID_CCO_COLL_TIMEOUT);
  void* scratchLocal = NULL;
  ccoResult_t res = ccoWindowRegisterAlloc(comm, s.scratchBytes, &s.scratchWin, &scratchLocal);
  if (res != ccoSuccess) {
    ccoDevCommDestroy(comm, &s.dcHost);
    return res;
  }
  /* Nobody may start a call before every rank zeroed its scratch. */
  local = setup_finish(comm, e, &s, scratchLocal);
  uint32_t unused = 0;
  res = vote(comm, local, s.nParts, config, &unused);
  if (res != ccoSuccess) {
    cco_coll_engine_reset(e);
    ccoWindowDeregister(comm, s.scratchWin);
    ccoDevCommDestroy(comm, &s.dcHost);
    return res;
  }
  return ccoSuccess;
}
