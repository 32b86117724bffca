/*
 * cco MoE dispatch and combine (expert parallelism), zero copy: the op owns
 * one symmetric arena per rank, and every intermediate tensor of the
 * dispatch -> expert -> combine pipeline is a region of it (docs/moe.md).
 *
 *   ccoMoeConfig cfg = ccoMoeConfigDefault();
 *   cfg.hidden = 7168; cfg.maxTokensPerRank = 4096; cfg.expertsPerRank = 32; cfg.topk = 8;
 *   ccoMoeOp* op;  ccoMoeCreate(comm, &cfg, &op);                       // collective
 *   ccoMoeDispatch(op, x, w, scales, ids, nTokens, stream);             // tokens land in peers' arenas
 *   void* in;  ccoMoeRegion(op, ccoMoeRecvTokens, &in, NULL);           // [maxRecv, hidden], count in ccoMoeRecvCount
 *   void* y;   ccoMoeRegion(op, ccoMoeCombineInput, &y, NULL);          // the expert writes its rows here
 *   ccoMoeCombine(op, y, NULL, out, outWeights, stream);                // y is the region: no copy
 *   ccoMoeDestroy(op);                                                  // collective
 *
 * Dispatch sends token t once to every rank that owns one of its top-k
 * experts (expert e lives on rank e / expertsPerRank; an id of -1 is a
 * dropped choice), straight into that rank's dispatch-output regions at a
 * slot taken with an atomic on the receiver: the token's row, its scales,
 * its k weights and k expert ids (all of them; the receiver picks its own),
 * and its source (rank, token). Slots fill in arrival order; the received
 * count is in ccoMoeRecvCount once the dispatch is complete on the stream.
 *
 * Combine: the expert writes, for every received slot r < count, one bf16
 * row into the combine-input region (already weighted: it has the weights
 * and ids of the slot); combine gives each rank, for each of its tokens,
 * the sum of the rows the ranks it went to hold for it (fp32, in rank
 * order, rounded once: the same bits every time) and, for each choice j
 * whose rank got the token, its weight: the dispatched one (kept in this
 * rank's routing), or the one passed to combine for that slot by the rank
 * that owns the choice's expert; 0 for a dropped choice. A combine input that is not the region is copied
 * into it first: counted in ccoMoeStats.combineCopies and logged at debug
 * level, never silent.
 *
 * Calls alternate, dispatch then combine, on one stream per op; no host
 * synchronisation and no allocation per call, so both can be captured in
 * CUDA graphs (numTokens is then fixed by the capture). Peers on this host
 * by LSA; across hosts the ranks of other hosts by GDA, with slots computed
 * from a count matrix and staging for the rows that cross (docs/moe.md).
 */
#ifndef CCO_CCO_MOE_H_
#define CCO_CCO_MOE_H_

#include <stddef.h>
#include <stdint.h>

#include "cco/cco.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  ccoMoeBfloat16 = 0, /* 2-byte tokens, no scales */
  ccoMoeFp8E4M3 = 1,  /* 1-byte tokens with one fp32 scale per 128 elements (1x128 blocks) */
} ccoMoeDataType_t;

typedef enum {
  ccoMoeThroughput = 0, /* thousands of tokens per rank: more blocks */
  ccoMoeLowLatency = 1, /* up to 128 tokens per rank: few blocks, one launch each way */
} ccoMoeMode_t;

#define CCO_MOE_SCALE_BLOCK 128
#define CCO_MOE_LOW_LATENCY_MAX_TOKENS 128

typedef struct {
  int hidden;           /* elements per token: a multiple of 16 (bf16) or of 128 (fp8) */
  int maxTokensPerRank; /* the most tokens one rank dispatches in a call */
  int expertsPerRank;   /* experts on every rank; expert ids run to nRanks x expertsPerRank - 1 */
  int topk;             /* experts chosen per token, 1..64 */
  ccoMoeDataType_t dispatchType;
  ccoMoeMode_t mode;
  int maxRecvTokens; /* slots per rank; 0: nRanks x maxTokensPerRank, which never overflows */
  int parts;         /* blocks (CPU threads) per call; 0: the mode's default */
} ccoMoeConfig;

/* The defaults: bf16, throughput, every other field 0 (to be set). */
ccoMoeConfig ccoMoeConfigDefault(void);

typedef struct ccoMoeOp ccoMoeOp;

/* Collective over the communicator: every rank passes the same config.
 * Allocates and registers the arena (ccoMoeArenaBytes) and a device
 * communicator. */
ccoResult_t ccoMoeCreate(ccoComm* comm, const ccoMoeConfig* config, ccoMoeOp** op);
/* Collective; also after a failed call. NULL is a no-op. */
ccoResult_t ccoMoeDestroy(ccoMoeOp* op);

/* Bytes of the arena a config needs on nRanks ranks of one host (what
 * ccoMoeCreate allocates per rank). A communicator spanning hosts adds
 * staging for the rows that cross hosts: maxTokensPerRank x min(topk,
 * nRanks - 1) rows of the dispatch type with their scales, weights and ids,
 * as many bf16 combine rows, and the count matrix (docs/moe.md). */
ccoResult_t ccoMoeArenaBytes(const ccoMoeConfig* config, int nRanks, size_t* bytes);

typedef enum {
  ccoMoeRecvTokens = 0,   /* [maxRecv, hidden] tokens in the dispatch type */
  ccoMoeRecvScales = 1,   /* [maxRecv, hidden / 128] fp32 (fp8 only; 0 bytes for bf16) */
  ccoMoeRecvWeights = 2,  /* [maxRecv, topk] fp32 */
  ccoMoeRecvIndices = 3,  /* [maxRecv, topk] int32 expert ids (global) */
  ccoMoeRecvSources = 4,  /* [maxRecv, 2] int32: source rank, source token */
  ccoMoeRecvCount = 5,    /* [1] int32: slots filled by the last dispatch */
  ccoMoeCombineInput = 6, /* [maxRecv, hidden] bf16: the expert's output rows */
  ccoMoeCombineWeights = 7, /* [maxRecv, topk] fp32: weights passed to combine land here */
  ccoMoeRouting = 8,      /* [maxTokensPerRank, nRanks] int32: slot of token t at rank d, -1 none */
  ccoMoeRoutingIndices = 9, /* [maxTokensPerRank, topk] int32: the last dispatch's expert ids */
  ccoMoeRoutingWeights = 10, /* [maxTokensPerRank, topk] fp32: the last dispatch's weights */
  ccoMoeNumRegions
} ccoMoeRegion_t;

/* This rank's copy of a region: its address (device memory on a GPU) and
 * size in bytes; either output may be NULL. */
ccoResult_t ccoMoeRegion(const ccoMoeOp* op, ccoMoeRegion_t region, void** ptr, size_t* bytes);

/* Sends numTokens (0..maxTokensPerRank) tokens: tokens [numTokens, hidden]
 * in the dispatch type, weights [numTokens, topk] fp32, scales [numTokens,
 * hidden / 128] fp32 (fp8; NULL for bf16), indices [numTokens, topk] int32,
 * all rows contiguous, tokens 16-byte aligned. Every rank calls it. */
ccoResult_t ccoMoeDispatch(ccoMoeOp* op, const void* tokens, const float* weights, const float* scales,
                           const int32_t* indices, int numTokens, void* stream);

/* Gathers the expert outputs back (after a dispatch, every rank):
 * expertOut [count, hidden] bf16, the combine-input region for no copy;
 * weights [count, topk] fp32 or NULL (the dispatched weights); out
 * [numTokens, hidden] bf16 and outWeights [numTokens, topk] fp32 (NULL to
 * skip), numTokens being the dispatch's. */
ccoResult_t ccoMoeCombine(ccoMoeOp* op, const void* expertOut, const float* weights, void* out, float* outWeights,
                          void* stream);

/* Failures of the calls: a bad expert id (the choice is dropped) or more
 * tokens than slots (the extra tokens are dropped) fail that call alone
 * and the op stays usable; a wait that gave up (a peer failed or made
 * another call; the host platform waits CCO_COLL_TIMEOUT) fails the op for
 * good. The host platform returns them from the call itself. On a GPU the
 * calls return once their kernel is enqueued: ccoMoeCheck, after the
 * stream ran them, returns (and clears) what they found. */
ccoResult_t ccoMoeCheck(ccoMoeOp* op);

typedef struct {
  uint64_t dispatches;
  uint64_t combines;
  uint64_t combineCopies; /* combines whose input was not the combine-input region */
  uint32_t parts;         /* blocks (CPU threads) per call */
  uint32_t maxRecvTokens;
  size_t arenaBytes;
} ccoMoeStats;

ccoResult_t ccoMoeGetStats(const ccoMoeOp* op, ccoMoeStats* stats);

#ifdef __cplusplus
}
#endif

#endif /* CCO_CCO_MOE_H_ */
