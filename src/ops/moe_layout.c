/*
 * The MoE op's configuration checks and arena layout: pure functions of the
 * config and the rank count, so every rank computes the same offsets and
 * the unit test checks them.
 */
#include <stdio.h>
#include <string.h>

#include "ops/moe.h"

ccoMoeConfig ccoMoeConfigDefault(void) {
  ccoMoeConfig c;
  memset(&c, 0, sizeof(c));
  c.dispatchType = ccoMoeBfloat16;
  c.mode = ccoMoeThroughput;
  return c;
}

static uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

ccoResult_t cco_moe_check_config(const ccoMoeConfig* c, int nRanks, char* why, size_t whySize) {
#define REFUSE(...)                          \
  do {                                       \
    snprintf(why, whySize, __VA_ARGS__);     \
    return ccoInvalidArgument;               \
  } while (0)
  if (c->dispatchType != ccoMoeBfloat16 && c->dispatchType != ccoMoeFp8E4M3)
    REFUSE("unknown dispatchType %d (ccoMoeBfloat16 or ccoMoeFp8E4M3)", (int)c->dispatchType);
  if (c->mode != ccoMoeThroughput && c->mode != ccoMoeLowLatency)
    REFUSE("unknown mode %d (ccoMoeThroughput or ccoMoeLowLatency)", (int)c->mode);
  int unit = c->dispatchType == ccoMoeFp8E4M3 ? CCO_MOE_SCALE_BLOCK : 16;
  if (c->hidden <= 0 || c->hidden % unit || c->hidden > (1 << 20))
    REFUSE("hidden %d must be a positive multiple of %d (%s rows are moved in 16-byte pieces%s), at most 1048576",
           c->hidden, unit, c->dispatchType == ccoMoeFp8E4M3 ? "fp8" : "bf16",
           c->dispatchType == ccoMoeFp8E4M3 ? ", with one scale per 128 elements" : "");
  if (c->maxTokensPerRank <= 0 || c->maxTokensPerRank > (1 << 24))
    REFUSE("maxTokensPerRank %d must be 1..16777216", c->maxTokensPerRank);
  if (c->mode == ccoMoeLowLatency && c->maxTokensPerRank > CCO_MOE_LOW_LATENCY_MAX_TOKENS)
    REFUSE("maxTokensPerRank %d is more than the low-latency mode takes (%d); use ccoMoeThroughput",
           c->maxTokensPerRank, CCO_MOE_LOW_LATENCY_MAX_TOKENS);
  if (c->expertsPerRank <= 0 || (int64_t)c->expertsPerRank * nRanks > (1 << 30))
    REFUSE("expertsPerRank %d must be positive (and nRanks x expertsPerRank fit an int32 id)", c->expertsPerRank);
  if (c->topk <= 0 || c->topk > CCO_MOE_MAX_TOPK) REFUSE("topk %d must be 1..%d", c->topk, CCO_MOE_MAX_TOPK);
  if (c->maxRecvTokens < 0 || c->maxRecvTokens > (1 << 30))
    REFUSE("maxRecvTokens %d must be 0 (nRanks x maxTokensPerRank) or 1..2^30", c->maxRecvTokens);
  if (c->parts < 0 || c->parts > CCO_MOE_MAX_PARTS) REFUSE("parts %d must be 0 (the default) or 1..%d", c->parts, CCO_MOE_MAX_PARTS);
  return ccoSuccess;
#undef REFUSE
}

uint32_t cco_moe_max_recv(const ccoMoeConfig* c, int nRanks) {
  if (c->maxRecvTokens > 0) return (uint32_t)c->maxRecvTokens;
  uint64_t all = (uint64_t)c->maxTokensPerRank * (uint64_t)nRanks;
  return all > (1u << 30) ? (1u << 30) : (uint32_t)all;
}

/* Regions in enum order after the state, each 256-byte aligned (rows of
 * 16-byte pieces, and room for wider accesses later). */
void cco_moe_layout(const ccoMoeConfig* c, int nRanks, int net, cco_moe_layout_t* l) {
  memset(l, 0, sizeof(*l));
  uint64_t maxRecv = cco_moe_max_recv(c, nRanks), k = (uint64_t)c->topk, h = (uint64_t)c->hidden;
  uint64_t tokenBytes = h * (c->dispatchType == ccoMoeFp8E4M3 ? 1u : 2u);
  uint64_t scales = c->dispatchType == ccoMoeFp8E4M3 ? h / CCO_MOE_SCALE_BLOCK : 0;
  uint64_t sizes[ccoMoeNumRegions];
  sizes[ccoMoeRecvTokens] = maxRecv * tokenBytes;
  sizes[ccoMoeRecvScales] = maxRecv * scales * 4u;
  sizes[ccoMoeRecvWeights] = maxRecv * k * 4u;
  sizes[ccoMoeRecvIndices] = maxRecv * k * 4u;
  sizes[ccoMoeRecvSources] = maxRecv * 8u;
  sizes[ccoMoeRecvCount] = 4u;
  sizes[ccoMoeCombineInput] = maxRecv * h * 2u;
  sizes[ccoMoeCombineWeights] = maxRecv * k * 4u;
  sizes[ccoMoeRouting] = (uint64_t)c->maxTokensPerRank * (uint64_t)nRanks * 4u;
  sizes[ccoMoeRoutingIndices] = (uint64_t)c->maxTokensPerRank * k * 4u;
  sizes[ccoMoeRoutingWeights] = (uint64_t)c->maxTokensPerRank * k * 4u;
  /* The state, the three signal arrays, then the dispatch parts' counters
   * (ccoMoeDevState). */
  l->stateBytes = sizeof(ccoMoeDevState) + 3u * (uint64_t)nRanks * 8u +
                  (uint64_t)CCO_MOE_MAX_PARTS * CCO_IMPL_MOE_PART_ARRAYS * (uint64_t)nRanks * 4u;
  uint64_t off = align_up(l->stateBytes, 256);
  for (int r = 0; r < ccoMoeNumRegions; r++) {
    l->offset[r] = off;
    l->bytes[r] = sizes[r];
    off = align_up(off + sizes[r], 256);
  }
  /* Across hosts: a token goes to at most min(topk, nRanks - 1) ranks of
   * other hosts, so that many staging rows per token always suffice. */
  uint64_t n = (uint64_t)nRanks, others = n > 1 ? n - 1 : 0;
  uint64_t stage = net ? (uint64_t)c->maxTokensPerRank * (k < others ? k : others) : 0;
  uint64_t netSizes[CCO_MOE_NET_REGIONS];
  netSizes[CCO_MOE_NET_COUNTS] = net ? 2u * n * n * 4u : 0;
  netSizes[CCO_MOE_NET_STAGE_X] = stage * tokenBytes;
  netSizes[CCO_MOE_NET_STAGE_S] = stage * scales * 4u;
  netSizes[CCO_MOE_NET_STAGE_W] = stage * k * 4u;
  netSizes[CCO_MOE_NET_STAGE_I] = stage * k * 4u;
  netSizes[CCO_MOE_NET_STAGE_SRC] = stage * 8u;
  netSizes[CCO_MOE_NET_COMB_STAGE] = stage * h * 2u;
  netSizes[CCO_MOE_NET_COMB_STAGE_W] = stage * k * 4u;
  netSizes[CCO_MOE_NET_ROUTE_STAGE] = net ? (uint64_t)c->maxTokensPerRank * n * 4u : 0;
  for (int r = 0; r < CCO_MOE_NET_REGIONS; r++) {
    l->netOffset[r] = off;
    l->netBytes[r] = netSizes[r];
    off = align_up(off + netSizes[r], 256);
  }
  l->stageSlots = stage;
  l->total = off;
  l->tokenBytes = tokenBytes;
  l->scaleCount = scales;
  l->maxRecv = maxRecv;
}

ccoResult_t ccoMoeArenaBytes(const ccoMoeConfig* config, int nRanks, size_t* bytes) {
  char why[256];
  if (!config || !bytes)
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_OPS, "ccoMoeArenaBytes: %s is NULL",
                     config ? "bytes" : "config");
  if (nRanks < 1) return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_OPS, "ccoMoeArenaBytes: nRanks %d", nRanks);
  ccoResult_t res = cco_moe_check_config(config, nRanks, why, sizeof(why));
  if (res != ccoSuccess) return cco_error(NULL, res, CCO_SUBSYS_OPS, "ccoMoeArenaBytes: %s", why);
  cco_moe_layout_t l;
  cco_moe_layout(config, nRanks, 0, &l);
  *bytes = (size_t)l.total;
  return ccoSuccess;
}
