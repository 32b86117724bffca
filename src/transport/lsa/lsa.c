/* The LSA transport: peer access at creation, barriers of device communicators. */
#include "transport/lsa/lsa.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/log.h"

/* Resource window layout (the same offsets in every rank's slot), from the
 * start of LSA's part:
 *   uint32_t inbox[barriers][lsaSize]  written by peers
 *   uint32_t epoch[barriers]           this rank's own */

typedef struct {
  const cco_transport_ctx* ctx;
  bool oneDevice; /* every LSA peer uses this very GPU */
} lsa_transport;

/* Every rank checks its own peers and the verdicts are allgathered, so all
 * ranks fail together or none does. */
static ccoResult_t check_peer_access(lsa_transport* t) {
  const cco_transport_ctx* ctx = t->ctx;
  const cco_topology* topo = ctx->topo;
  cco_platform* p = ctx->platform;
  int32_t mine = -1; /* first LSA peer this rank cannot reach */
  bool oneDevice = p->kind == CCO_PLATFORM_CUDA;
  for (int i = 0; i < topo->lsaSize && mine < 0; i++) {
    int w = topo->members[ccoTeamLsa][i];
    bool ok = true, known = true;
    if (w == ctx->rank) continue;
    oneDevice = oneDevice && strcmp(topo->devices[w].busId, p->identity.busId) == 0;
    ccoResult_t res = p->ops->peer_access(p, &topo->devices[w], &ok, &known);
    if (res != ccoSuccess || !ok) mine = w;
    if (!known)
      CCO_INFO(INIT, "rank %d: gpu %s of rank %d is not visible here; peer access not checked",
               ctx->rank, topo->devices[w].busId, w);
  }
  t->oneDevice = oneDevice;
  int32_t* all = calloc((size_t)ctx->nRanks, sizeof(int32_t));
  if (!all) return cco_error(ctx->err, ccoOutOfMemory, CCO_SUBSYS_INIT, "no memory");
  all[ctx->rank] = mine;
  ccoResult_t res = ctx->allgather(ctx->owner, all, sizeof(int32_t), true);
  for (int r = 0; res == ccoSuccess && r < ctx->nRanks; r++)
    if (all[r] >= ctx->nRanks || all[r] < -1) /* an index: never trusted */
      res = cco_error(ctx->err, ccoRemoteError, CCO_SUBSYS_INIT,
                      "rank %d: rank %d sent a peer-access verdict out of range (%d)", ctx->rank, r,
                      (int)all[r]);
    else if (all[r] >= 0)
      res = cco_error(ctx->err, ccoInvalidUsage, CCO_SUBSYS_INIT,
                      "rank %d: rank %d (gpu %s) cannot access the memory of rank %d (gpu %s) on "
                      "the same host: LSA peers need peer access (NVLink or PCIe P2P)",
                      ctx->rank, r, topo->devices[r].busId, all[r], topo->devices[all[r]].busId);
  free(all);
  return res;
}

static ccoResult_t lsa_start(const cco_transport_ctx* ctx, void** state) {
  lsa_transport* t = calloc(1, sizeof(*t));
  if (!t) return cco_error(ctx->err, ccoOutOfMemory, CCO_SUBSYS_LSA, "no memory");
  t->ctx = ctx;
  ccoResult_t res = check_peer_access(t);
  if (res != ccoSuccess) {
    free(t);
    return res;
  }
  *state = t;
  return ccoSuccess;
}

/* World barriers run an LSA barrier too, so they take inboxes here. */
static uint32_t barriers_of(const ccoDevCommRequirements* reqs) {
  return reqs->lsaBarrierCount + reqs->barrierCount;
}

static size_t inbox_bytes(const lsa_transport* t, const ccoDevCommRequirements* reqs) {
  return (size_t)barriers_of(reqs) * (size_t)t->ctx->topo->lsaSize * sizeof(uint32_t);
}

static size_t lsa_devcomm_bytes(void* state, const ccoDevCommRequirements* reqs) {
  return inbox_bytes(state, reqs) + (size_t)barriers_of(reqs) * sizeof(uint32_t);
}

static ccoResult_t lsa_devcomm_create(void* state, const cco_devcomm_setup* setup, ccoDevComm* dc,
                                      void** devState) {
  lsa_transport* t = state;
  dc->lsaBarrierCount = barriers_of(setup->reqs);
  dc->barrierCount = setup->reqs->barrierCount;
  dc->lsaBarrierOffset = (uint32_t)setup->resourceOffset;
  dc->lsaEpochOffset = (uint32_t)(setup->resourceOffset + inbox_bytes(t, setup->reqs));
  dc->lsaScopeGpu = t->oneDevice;
  *devState = NULL; /* the resource window is all it uses */
  return ccoSuccess;
}

static void lsa_destroy(void* state) { free(state); }

const cco_transport_ops cco_lsa_transport_ops = {
    .name = "lsa",
    .start = lsa_start,
    .devcomm_bytes = lsa_devcomm_bytes,
    .devcomm_create = lsa_devcomm_create,
    .destroy = lsa_destroy,
};
