/*
 * The MoE op's public calls (cco/cco_moe.h): its life (a window for the
 * arena, a device communicator, the status word, the kernels), the checks
 * of every call, and the report of the failures its parts found.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/env.h"
#include "base/log.h"
#include "ops/moe.h"

/* ------------------------------------------------------------ failures */

/* Why the communicator failed (its async error's detail, which names a
 * dead or failed peer), or "" while it has not. */
static void comm_failure(ccoMoeOp* op, char* out, size_t size) {
  out[0] = '\0';
  if (atomic_load(&op->comm->asyncError) != ccoSuccess) cco_errsink_copy(&op->comm->err, out, size);
}

/* The parts' first failure as a result and a sentence in op->failure.
 * Waits that gave up (a peer failed or made another call) leave the op
 * failed for good: every later call names that failure. A bad expert id
 * or an overflow fail only the call they happened in (the peers went on,
 * so the op stays in step with them): the word is cleared for the next. */
static ccoResult_t note_status(ccoMoeOp* op) {
  if (op->failed != ccoSuccess) return op->failed;
  uint32_t st = __atomic_load_n(&op->status->status, __ATOMIC_ACQUIRE);
  if (st == ccoDevSuccess) return ccoSuccess;
  while (!__atomic_load_n(&op->status->ready, __ATOMIC_ACQUIRE)) {
  }
  uint32_t what = op->status->what, x = op->status->a, y = op->status->b;
  ccoResult_t res = ccoInvalidUsage;
  switch (what) {
    case CCO_IMPL_MOE_BAD_EXPERT:
      snprintf(op->failure, sizeof(op->failure),
               "rank %d: token %u of the dispatch chose expert %d, outside 0..%d (nRanks x expertsPerRank - 1; -1 "
               "drops a choice); that choice was dropped",
               op->rank, x, (int)y, op->nRanks * op->cfg.expertsPerRank - 1);
      break;
    case CCO_IMPL_MOE_OVERFLOW:
      snprintf(op->failure, sizeof(op->failure),
               "rank %d: the dispatch sent it %u tokens for %u slots (maxRecvTokens): the tokens past the last slot "
               "were dropped; raise maxRecvTokens, or leave it 0 (nRanks x maxTokensPerRank never overflows)",
               op->rank, x, y);
      break;
    default: {
      res = st == ccoDevTimeout ? ccoTimeout : ccoRemoteError;
      char why[384]; /* leaves room for the sentence around it in op->failure */
      comm_failure(op, why, sizeof(why));
      snprintf(op->failure, sizeof(op->failure), "rank %d: a %s waited for its peers and gave up (%s): %s%s",
               op->rank, x ? "combine" : "dispatch", ccoDevStatusName((ccoDevStatus_t)st),
               why[0] ? "the communicator failed: " : "",
               why[0] ? why : "a peer failed, did not make the same call, or the communicator was aborted");
      op->failed = res;
      return res;
    }
  }
  __atomic_store_n(&op->status->ready, 0u, __ATOMIC_RELAXED);
  __atomic_store_n(&op->status->status, 0u, __ATOMIC_RELEASE);
  return res;
}

/* Before a call: only a failure that leaves the op out of step with its
 * peers refuses it (refusing for anything less would leave the peers
 * waiting for this rank). */
static ccoResult_t check_healthy(ccoMoeOp* op, const char* api) {
  if (op->failed == ccoSuccess) return ccoSuccess;
  return cco_error(&op->comm->err, op->failed, CCO_SUBSYS_OPS, "%s: the op failed earlier: %s", api, op->failure);
}

ccoResult_t ccoMoeCheck(ccoMoeOp* op) {
  if (!op) return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_OPS, "ccoMoeCheck: op is NULL");
  CCO_VALIDATE_COMM(op->comm);
  pthread_mutex_lock(&op->lock);
  ccoResult_t res = note_status(op);
  if (res != ccoSuccess) res = cco_error(&op->comm->err, res, CCO_SUBSYS_OPS, "ccoMoeCheck: %s", op->failure);
  pthread_mutex_unlock(&op->lock);
  return res;
}

/* After a host-platform run: its own failure, now. Timeouts and aborts
 * fail the communicator so the peers' waits end too. */
static ccoResult_t check_run(ccoMoeOp* op, const char* api) {
  ccoResult_t res = note_status(op);
  if (res == ccoSuccess) return ccoSuccess;
  if (res == ccoTimeout) cco_comm_fail_async(op->comm, res);
  return cco_error(&op->comm->err, res, CCO_SUBSYS_OPS, "%s: %s", api, op->failure);
}

/* ------------------------------------------------------------ life */

/* Every rank must pass the same config: compared through the bootstrap. */
static ccoResult_t agree_config(ccoComm* comm, const ccoMoeConfig* c) {
  int n = comm->nRanks;
  ccoMoeConfig* all = calloc((size_t)n, sizeof(*all));
  if (!all) return cco_error(&comm->err, ccoSystemError, CCO_SUBSYS_OPS, "ccoMoeCreate: out of host memory");
  ccoMoeConfig mine;
  memset(&mine, 0, sizeof(mine));
  mine = *c;
  ccoResult_t res = ccoBootstrapAllGather(comm, &mine, all, sizeof(mine));
  int other = -1;
  for (int r = 0; res == ccoSuccess && r < n && other < 0; r++)
    if (memcmp(&all[r], &mine, sizeof(mine)) != 0) other = r;
  free(all);
  CCO_CHECK(res);
  if (other >= 0)
    return cco_error(&comm->err, ccoInvalidUsage, CCO_SUBSYS_OPS,
                     "ccoMoeCreate: rank %d passed another config than rank %d (every rank passes the same)", other,
                     comm->rank);
  return ccoSuccess;
}

static void release(ccoMoeOp* op) {
  ccoComm* comm = op->comm;
  cco_moe_release(op);
  if (op->status) comm->platform.ops->hostmap_free(&comm->platform, op->status);
  if (op->dc.magic == CCO_DEV_COMM_MAGIC) ccoDevCommDestroy(comm, &op->dc);
  if (op->win) ccoWindowDeregister(comm, op->win);
  pthread_mutex_destroy(&op->lock);
  free(op);
}

/* The state region of this rank, zeroed (epochs and counters start at 0). */
static ccoResult_t zero_state(ccoMoeOp* op) {
  void* zeros = calloc(1, op->layout.stateBytes);
  if (!zeros) return cco_error(&op->comm->err, ccoSystemError, CCO_SUBSYS_OPS, "ccoMoeCreate: out of host memory");
  cco_platform* p = &op->comm->platform;
  ccoResult_t res = p->ops->copy_to_device(p, op->arena, zeros, op->layout.stateBytes);
  free(zeros);
  return res;
}

static ccoResult_t create(ccoMoeOp* op) {
  ccoComm* comm = op->comm;
  void* local = NULL;
  CCO_CHECK(ccoWindowRegisterAlloc(comm, op->layout.total, &op->win, &local));
  op->arena = local;
  CCO_CHECK(zero_state(op));
  ccoDevCommRequirements reqs = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.lsaBarrierCount = 0;
  /* Across hosts: endpoints to the ranks of the other hosts, and three
   * signal slots per rank (its counts, its rows, its combine-ready). */
  reqs.gdaConnectionType = ccoGdaConnectionCrossNode;
  reqs.gdaSignalCount = op->net ? 3u * (uint32_t)comm->nRanks : 0;
  reqs.gdaCounterCount = 0;
  CCO_CHECK(ccoDevCommCreate(comm, &reqs, &op->dc));
  op->dcDev = &op->dc;
  if (comm->platform.kind == CCO_PLATFORM_CUDA) {
    ccoDevComm* dev = NULL;
    CCO_CHECK(ccoDevCommCopyToDevice(comm, &op->dc, &dev));
    op->dcDev = dev;
  }
  void* host = NULL;
  CCO_CHECK(comm->platform.ops->hostmap_alloc(&comm->platform, sizeof(ccoMoeDevStatus), &host, &op->statusDev));
  op->status = host;
  ccoResult_t local_res = cco_moe_prepare(op);
  /* Every rank learns whether every rank is ready, so none waits alone. */
  int ok = local_res == ccoSuccess, all = 0;
  int* votes = calloc((size_t)comm->nRanks, sizeof(int));
  if (!votes) return cco_error(&comm->err, ccoSystemError, CCO_SUBSYS_OPS, "ccoMoeCreate: out of host memory");
  ccoResult_t res = ccoBootstrapAllGather(comm, &ok, votes, sizeof(int));
  for (int r = 0; r < comm->nRanks; r++) all += votes[r];
  uint32_t minParts = op->parts;
  free(votes);
  CCO_CHECK(local_res);
  CCO_CHECK(res);
  if (all != comm->nRanks)
    return cco_error(&comm->err, ccoRemoteError, CCO_SUBSYS_OPS, "ccoMoeCreate: another rank could not set up the op");
  /* The parts must agree: the combine's epochs count arrivals of parts. */
  uint32_t* parts = calloc((size_t)comm->nRanks, sizeof(uint32_t));
  if (!parts) return cco_error(&comm->err, ccoSystemError, CCO_SUBSYS_OPS, "ccoMoeCreate: out of host memory");
  res = ccoBootstrapAllGather(comm, &op->parts, parts, sizeof(uint32_t));
  for (int r = 0; r < comm->nRanks; r++)
    if (parts[r] < minParts) minParts = parts[r];
  free(parts);
  CCO_CHECK(res);
  op->parts = minParts;
  /* No peer may signal into this arena before every rank zeroed its own. */
  return ccoBarrierAll(comm);
}

ccoResult_t ccoMoeCreate(ccoComm* comm, const ccoMoeConfig* config, ccoMoeOp** out) {
  CCO_VALIDATE_COMM(comm);
  if (!config || !out)
    return cco_error(&comm->err, ccoInvalidArgument, CCO_SUBSYS_OPS, "ccoMoeCreate: %s is NULL",
                     config ? "op" : "config");
  *out = NULL;
  char why[256];
  ccoResult_t res = cco_moe_check_config(config, comm->nRanks, why, sizeof(why));
  if (res != ccoSuccess) return cco_error(&comm->err, res, CCO_SUBSYS_OPS, "ccoMoeCreate: %s", why);
  CCO_CHECK(agree_config(comm, config));
  ccoMoeOp* op = calloc(1, sizeof(*op));
  if (!op) return cco_error(&comm->err, ccoSystemError, CCO_SUBSYS_OPS, "ccoMoeCreate: out of host memory");
  op->comm = comm;
  op->cfg = *config;
  op->rank = comm->rank;
  op->nRanks = comm->nRanks;
  op->net = comm->topo.nNodes > 1;
  cco_moe_layout(config, comm->nRanks, op->net, &op->layout);
  op->timeout = cco_env_double(CCO_ENV_ID_CCO_COLL_TIMEOUT);
  op->combineLoads = 4u * (uint32_t)(cco_env_enum(CCO_ENV_ID_CCO_MOE_COMBINE_LOADS) + 1);
  pthread_mutex_init(&op->lock, NULL);
  res = create(op);
  if (res != ccoSuccess) {
    release(op);
    return res;
  }
  op->stats.parts = op->parts;
  op->stats.maxRecvTokens = (uint32_t)op->layout.maxRecv;
  op->stats.arenaBytes = (size_t)op->layout.total;
  CCO_INFO(OPS, "rank %d: MoE op ready: hidden %d, top-%d, %d experts per rank, %u slots, %u parts, arena %llu bytes%s",
           op->rank, config->hidden, config->topk, config->expertsPerRank, (unsigned)op->layout.maxRecv, op->parts,
           (unsigned long long)op->layout.total, op->net ? " (across hosts: GDA to the other hosts' ranks)" : "");
  *out = op;
  return ccoSuccess;
}

ccoResult_t ccoMoeDestroy(ccoMoeOp* op) {
  if (!op) return ccoSuccess;
  ccoComm* comm = op->comm;
  CCO_VALIDATE_COMM(comm);
  /* Across hosts the GDA endpoints close with the device communicator: no
   * rank may close its own while a peer's last operations to it are still
   * completing (a closed endpoint cancels them, and the peer's proxy fails
   * its communicator). On a failed communicator the barrier fails at once. */
  if (op->net) (void)ccoBarrierAll(comm);
  release(op);
  return ccoSuccess;
}

ccoResult_t ccoMoeRegion(const ccoMoeOp* op, ccoMoeRegion_t region, void** ptr, size_t* bytes) {
  if (!op) return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_OPS, "ccoMoeRegion: op is NULL");
  if ((unsigned)region >= ccoMoeNumRegions)
    return cco_error(cco_comm_errsink(op->comm), ccoInvalidArgument, CCO_SUBSYS_OPS,
                     "ccoMoeRegion: unknown region %d (0..%d)", (int)region, ccoMoeNumRegions - 1);
  if (ptr) *ptr = op->arena + op->layout.offset[region];
  if (bytes) *bytes = (size_t)op->layout.bytes[region];
  return ccoSuccess;
}

ccoResult_t ccoMoeGetStats(const ccoMoeOp* op, ccoMoeStats* stats) {
  if (!op || !stats)
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_OPS, "ccoMoeGetStats: %s is NULL", op ? "stats" : "op");
  pthread_mutex_lock((pthread_mutex_t*)&op->lock);
  *stats = op->stats;
  pthread_mutex_unlock((pthread_mutex_t*)&op->lock);
  return ccoSuccess;
}

/* ------------------------------------------------------------ calls */

static void base_args(const ccoMoeOp* op, ccoMoeDevArgs* a) {
  memset(a, 0, sizeof(*a));
  const cco_moe_layout_t* l = &op->layout;
  a->win = op->win;
  a->offState = 0;
  a->offRecvX = l->offset[ccoMoeRecvTokens];
  a->offRecvS = l->offset[ccoMoeRecvScales];
  a->offRecvW = l->offset[ccoMoeRecvWeights];
  a->offRecvI = l->offset[ccoMoeRecvIndices];
  a->offRecvSrc = l->offset[ccoMoeRecvSources];
  a->offRecvCount = l->offset[ccoMoeRecvCount];
  a->offCombIn = l->offset[ccoMoeCombineInput];
  a->offCombW = l->offset[ccoMoeCombineWeights];
  a->offRouting = l->offset[ccoMoeRouting];
  a->offRoutingIdx = l->offset[ccoMoeRoutingIndices];
  a->offRoutingW = l->offset[ccoMoeRoutingWeights];
  a->status = op->statusDev;
  a->timeoutNs = op->timeout > 0 ? (uint64_t)(op->timeout * 1e9) : 0;
  a->combineLoads = op->combineLoads;
  a->hidden = (uint32_t)op->cfg.hidden;
  a->tokenBytes = (uint32_t)l->tokenBytes;
  a->scaleCount = (uint32_t)l->scaleCount;
  a->topk = (uint32_t)op->cfg.topk;
  a->expertsPerRank = (uint32_t)op->cfg.expertsPerRank;
  a->nRanks = (uint32_t)op->nRanks;
  a->maxRecv = (uint32_t)l->maxRecv;
  a->me = (uint32_t)op->rank;
  a->net = (uint32_t)op->net;
  a->selfLsa = (uint32_t)op->dc.lsaRank;
  a->sigCounts = 0;
  a->sigData = (uint32_t)op->nRanks;
  a->sigComb = 2u * (uint32_t)op->nRanks;
  a->stageSlots = (uint32_t)l->stageSlots;
  a->offCounts = l->netOffset[CCO_MOE_NET_COUNTS];
  a->offStageX = l->netOffset[CCO_MOE_NET_STAGE_X];
  a->offStageS = l->netOffset[CCO_MOE_NET_STAGE_S];
  a->offStageW = l->netOffset[CCO_MOE_NET_STAGE_W];
  a->offStageI = l->netOffset[CCO_MOE_NET_STAGE_I];
  a->offStageSrc = l->netOffset[CCO_MOE_NET_STAGE_SRC];
  a->offCombStage = l->netOffset[CCO_MOE_NET_COMB_STAGE];
  a->offCombStageW = l->netOffset[CCO_MOE_NET_COMB_STAGE_W];
  a->offRouteStage = l->netOffset[CCO_MOE_NET_ROUTE_STAGE];
}

static ccoResult_t begin(ccoMoeOp* op, const char* api, cco_moe_phase want) {
  if (!op) return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_OPS, "%s: op is NULL", api);
  CCO_VALIDATE_COMM(op->comm);
  ccoResult_t failed = (ccoResult_t)atomic_load(&op->comm->asyncError);
  if (failed != ccoSuccess) {
    char why[CCO_ERROR_TEXT_BYTES];
    comm_failure(op, why, sizeof(why));
    return cco_error(&op->comm->err, failed, CCO_SUBSYS_OPS, "%s: the communicator failed earlier (%s): %s", api,
                     ccoGetErrorString(failed), why);
  }
  CCO_CHECK(check_healthy(op, api));
  if (op->phase != want)
    return cco_error(&op->comm->err, ccoInvalidUsage, CCO_SUBSYS_OPS,
                     want == CCO_MOE_IDLE ? "%s: the last dispatch has not been combined yet (calls alternate: "
                                            "dispatch, combine, dispatch, ...)"
                                          : "%s: no dispatch to combine (calls alternate: dispatch, combine, ...)",
                     api);
  return ccoSuccess;
}

static bool aligned(const void* p, uintptr_t a) { return ((uintptr_t)p % a) == 0; }

ccoResult_t ccoMoeDispatch(ccoMoeOp* op, const void* tokens, const float* weights, const float* scales,
                           const int32_t* indices, int numTokens, void* stream) {
  const char* api = "ccoMoeDispatch";
  if (!op) return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_OPS, "%s: op is NULL", api);
  pthread_mutex_lock(&op->lock);
  ccoResult_t res = begin(op, api, CCO_MOE_IDLE);
  cco_errsink* err = &op->comm->err;
  bool fp8 = op->cfg.dispatchType == ccoMoeFp8E4M3;
  if (res == ccoSuccess && (numTokens < 0 || numTokens > op->cfg.maxTokensPerRank))
    res = cco_error(err, ccoInvalidArgument, CCO_SUBSYS_OPS, "%s: numTokens %d is outside 0..%d (maxTokensPerRank)",
                    api, numTokens, op->cfg.maxTokensPerRank);
  if (res == ccoSuccess && numTokens > 0 && (!tokens || !weights || !indices || (fp8 && !scales)))
    res = cco_error(err, ccoInvalidArgument, CCO_SUBSYS_OPS, "%s: %s is NULL", api,
                    !tokens ? "tokens" : !weights ? "weights" : !indices ? "indices" : "scales (fp8 tokens need them)");
  if (res == ccoSuccess && numTokens > 0 && (!aligned(tokens, 16) || !aligned(weights, 4) || !aligned(indices, 4) ||
                                             (scales && !aligned(scales, 4))))
    res = cco_error(err, ccoInvalidArgument, CCO_SUBSYS_OPS,
                    "%s: tokens must be 16-byte aligned, weights, scales and indices 4-byte aligned", api);
  if (res == ccoSuccess) {
    ccoMoeDevArgs a;
    base_args(op, &a);
    a.tokens = (uint64_t)(uintptr_t)tokens;
    a.weights = (uint64_t)(uintptr_t)weights;
    a.scales = fp8 ? (uint64_t)(uintptr_t)scales : 0;
    a.indices = (uint64_t)(uintptr_t)indices;
    a.numTokens = (uint32_t)numTokens;
    res = cco_moe_run(op, 0, &a, stream);
    /* A dispatch that ran, even one that reported a failure, moved the
     * epochs with the peers: the op expects its combine next. */
    if (res == ccoSuccess) {
      op->phase = CCO_MOE_DISPATCHED;
      op->numTokens = numTokens;
      op->stats.dispatches++;
      if (op->comm->platform.kind != CCO_PLATFORM_CUDA) res = check_run(op, api);
    }
  }
  pthread_mutex_unlock(&op->lock);
  return res;
}

ccoResult_t ccoMoeCombine(ccoMoeOp* op, const void* expertOut, const float* weights, void* out, float* outWeights,
                          void* stream) {
  const char* api = "ccoMoeCombine";
  if (!op) return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_OPS, "%s: op is NULL", api);
  pthread_mutex_lock(&op->lock);
  ccoResult_t res = begin(op, api, CCO_MOE_DISPATCHED);
  cco_errsink* err = &op->comm->err;
  const char* combIn = op->arena + op->layout.offset[ccoMoeCombineInput];
  const char* combW = op->arena + op->layout.offset[ccoMoeCombineWeights];
  if (res == ccoSuccess && (!expertOut || (op->numTokens > 0 && !out)))
    res = cco_error(err, ccoInvalidArgument, CCO_SUBSYS_OPS, "%s: %s is NULL (pass the combine-input region for no copy)",
                    api, !expertOut ? "expertOut" : "out");
  if (res == ccoSuccess && (!aligned(expertOut, 16) || (out && !aligned(out, 16)) ||
                            (weights && !aligned(weights, 4)) || (outWeights && !aligned(outWeights, 4))))
    res = cco_error(err, ccoInvalidArgument, CCO_SUBSYS_OPS,
                    "%s: expertOut and out must be 16-byte aligned, weights and outWeights 4-byte aligned", api);
  if (res == ccoSuccess) {
    ccoMoeDevArgs a;
    base_args(op, &a);
    bool copy = (const char*)expertOut != combIn;
    a.expertOut = copy ? (uint64_t)(uintptr_t)expertOut : 0;
    a.combWeights = weights && (const char*)weights != combW ? (uint64_t)(uintptr_t)weights : 0;
    a.useCombWeights = weights != NULL;
    a.out = (uint64_t)(uintptr_t)out;
    a.outWeights = (uint64_t)(uintptr_t)outWeights;
    a.numTokens = (uint32_t)op->numTokens;
    if (copy) {
      op->stats.combineCopies++;
      CCO_INFO(OPS,
               "rank %d: ccoMoeCombine copies the expert output %p into the combine-input region %p (pass the "
               "region itself to skip the copy); %llu copies so far",
               op->rank, expertOut, (const void*)combIn, (unsigned long long)op->stats.combineCopies);
    }
    res = cco_moe_run(op, 1, &a, stream);
    if (res == ccoSuccess) {
      op->phase = CCO_MOE_IDLE;
      op->stats.combines++;
      if (op->comm->platform.kind != CCO_PLATFORM_CUDA) res = check_run(op, api);
    }
  }
  pthread_mutex_unlock(&op->lock);
  return res;
}
