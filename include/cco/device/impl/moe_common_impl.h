/*
 * Private: what both paths of the MoE op's device side use (the types, the
 * arena's state, the copies, the signals, the routing and the sends); see
 * cco/device/impl/moe_impl.h for the op as a whole and docs/moe.md.
 */
#ifndef CCO_DEVICE_IMPL_MOE_COMMON_IMPL_H_
#define CCO_DEVICE_IMPL_MOE_COMMON_IMPL_H_

#include <stdint.h>

#include "cco/cco_coll.h"
#include "cco/cco_device.h"
#include "cco/cco_gda.h"

/* Failures the parts report (ccoMoeDevStatus.what). */
#define CCO_IMPL_MOE_BAD_EXPERT 1u /* an expert id out of range (a = token, b = id) */
#define CCO_IMPL_MOE_OVERFLOW 2u   /* more tokens than slots (a = tokens sent here, b = slots) */
#define CCO_IMPL_MOE_WAIT 3u       /* a wait ended without its signal (status says why) */

/* The first failure of an op: written once (status by compare-and-swap
 * from 0, then the rest, then ready). Mapped host memory on the GPU. */
typedef struct {
  uint32_t status; /* ccoDevStatus_t */
  uint32_t what;   /* CCO_IMPL_MOE_* */
  uint32_t a, b;
  uint32_t ready;
  uint32_t pad[3];
} ccoMoeDevStatus;

/* The arena's state region, per rank (zeroed when the op is made). */
typedef struct {
  uint64_t slotCounter[2]; /* tokens sent here, by dispatch parity */
  uint64_t dispArrive;     /* parts of this rank that finished sending */
  uint64_t combArrive;     /* parts of this rank that finished copying */
  uint64_t dispEpoch;      /* the last dispatch that completed here */
  uint64_t countArrive;    /* across hosts: parts of this rank that counted their tokens */
  uint64_t matrixEpoch;    /* across hosts: the last dispatch whose count matrix is here */
  uint64_t fetchEpoch;     /* across hosts: the last combine whose remote rows are here */
  uint64_t failedEpoch;    /* across hosts: the last call whose last part failed (the others stop too) */
  /* followed by uint64_t dispDone[nRanks], combReady[nRanks],
   * countsDone[nRanks], then per part of a dispatch uint32_t
   * count[nRanks], base[nRanks], stage[nRanks] (its tokens per
   * destination, the slots it took there, and across hosts where they
   * sit in the staging: see the dispatch) */
} ccoMoeDevState;

/* One call's arguments, by value into the kernels. Offsets are bytes in
 * the arena window; addresses are this rank's (inputs and outputs). */
typedef struct {
  ccoWindow_t win;
  uint64_t offState, offRecvX, offRecvS, offRecvW, offRecvI, offRecvSrc, offRecvCount;
  uint64_t offCombIn, offCombW, offRouting, offRoutingIdx, offRoutingW;
  uint64_t tokens, weights, scales, indices;   /* dispatch inputs (scales may be 0) */
  uint64_t expertOut;                          /* combine: 0 when it is the combine-input region */
  uint64_t combWeights;                        /* combine: 0 when the gathered weights are the dispatched ones */
  uint64_t out, outWeights;                    /* combine outputs (outWeights may be 0) */
  uint64_t status;                             /* ccoMoeDevStatus* */
  uint64_t timeoutNs;                          /* per wait, 0: none */
  uint32_t numTokens, hidden, tokenBytes, scaleCount;
  uint32_t topk, expertsPerRank, nRanks, maxRecv;
  uint32_t me;             /* this rank (world) */
  uint32_t useCombWeights; /* combine: gathered weights from the combine-weights region, else the dispatched */
  uint32_t combineLoads;   /* combine: 16-byte loads in flight per lane, 4, 8 or 12 (CCO_MOE_COMBINE_LOADS) */
  uint32_t pad0;
  /* Across hosts (net != 0): peers on this host by LSA, the others by GDA
   * from the staging regions (docs/moe.md). On one host LSA ranks are world
   * ranks and selfLsa is me. */
  uint32_t net, selfLsa;
  uint32_t sigCounts, sigData, sigComb; /* GDA signal slots: + source rank */
  uint32_t stageSlots;                  /* rows of the staging regions */
  uint64_t offCounts;                   /* uint32_t [2][nRanks][nRanks]: tokens from s to d, by dispatch parity */
  uint64_t offStageX, offStageS, offStageW, offStageI, offStageSrc; /* dispatch staging, by destination */
  uint64_t offCombStage, offCombStageW; /* combine: rows and weights fetched from other hosts */
  uint64_t offRouteStage;               /* int32_t [maxTokensPerRank][nRanks]: staging row of (t, d), -1 none */
} ccoMoeDevArgs;

CCO_DEVICE_INLINE void cco_impl_moe_report(const ccoMoeDevArgs* a, ccoDevStatus_t st, uint32_t what, uint32_t x,
                                           uint32_t y) {
  ccoMoeDevStatus* s = (ccoMoeDevStatus*)(uintptr_t)a->status;
#if CCO_ARCH_GPU && defined(__CUDACC__)
  if (atomicCAS(&s->status, 0u, (uint32_t)st) != 0u) return;
#else
  uint32_t zero = 0;
  if (!__atomic_compare_exchange_n(&s->status, &zero, (uint32_t)st, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return;
#endif
  s->what = what;
  s->a = x;
  s->b = y;
  cco_impl_st_release_u32(&s->ready, 1u);
}

CCO_DEVICE_INLINE ccoMoeDevState* cco_impl_moe_state(const ccoMoeDevArgs* a, int lsa) {
  return (ccoMoeDevState*)ccoGetLsaPeerPtr(a->win, lsa, a->offState);
}
CCO_DEVICE_INLINE uint64_t* cco_impl_moe_disp_done(const ccoMoeDevArgs* a, int lsa) {
  return (uint64_t*)(cco_impl_moe_state(a, lsa) + 1);
}
CCO_DEVICE_INLINE uint64_t* cco_impl_moe_comb_ready(const ccoMoeDevArgs* a, int lsa) {
  return cco_impl_moe_disp_done(a, lsa) + a->nRanks;
}
CCO_DEVICE_INLINE uint64_t* cco_impl_moe_counts_done(const ccoMoeDevArgs* a, int lsa) {
  return cco_impl_moe_comb_ready(a, lsa) + a->nRanks;
}
/* Part `part`'s counters: count[nRanks], base[nRanks], stage[nRanks]. */
#define CCO_IMPL_MOE_PART_ARRAYS 3u
CCO_DEVICE_INLINE uint32_t* cco_impl_moe_part_counts(const ccoMoeDevArgs* a, uint32_t part) {
  return (uint32_t*)(cco_impl_moe_counts_done(a, (int)a->selfLsa) + a->nRanks) +
         (uint64_t)part * CCO_IMPL_MOE_PART_ARRAYS * a->nRanks;
}
CCO_DEVICE_INLINE uint64_t cco_impl_moe_peer(const ccoMoeDevArgs* a, int lsa, uint64_t off) {
  return (uint64_t)(uintptr_t)ccoGetLsaPeerPtr(a->win, lsa, off);
}
/* This rank's own copy of arena offset `off`. */
CCO_DEVICE_INLINE uint64_t cco_impl_moe_own(const ccoMoeDevArgs* a, uint64_t off) {
  return (uint64_t)(uintptr_t)ccoGetLsaPeerPtr(a->win, (int)a->selfLsa, off);
}
/* The LSA rank of world rank d, -1 when it is on another host. */
CCO_DEVICE_INLINE int cco_impl_moe_lsa(const ccoDevComm* dc, const ccoMoeDevArgs* a, uint32_t d) {
  return a->net ? ccoDevTeamRankFromWorld(dc, ccoTeamLsa, (int)d) : (int)d;
}

/* Loads in flight per lane of a row copy. */
#define CCO_IMPL_MOE_COPY_UNROLL 8

/* Copies `bytes` (a multiple of 16, both ends 16-byte aligned) with the
 * lanes of a warp, CCO_IMPL_MOE_COPY_UNROLL loads in flight per lane
 * before the first store: a 7 KiB row then waits for memory twice, not
 * fourteen times. */
CCO_DEVICE_INLINE void cco_impl_moe_copy(uint64_t dst, uint64_t src, uint64_t bytes, uint32_t lane, uint32_t lanes) {
  const uint64_t stride = (uint64_t)lanes * 16u;
  for (uint64_t o = (uint64_t)lane * 16u; o < bytes; o += stride * CCO_IMPL_MOE_COPY_UNROLL) {
    cco_impl_v16 v[CCO_IMPL_MOE_COPY_UNROLL];
#if !CCO_ARCH_GPU
    /* Newer gcc than Debian 12's cannot see that every vector stored below was loaded
     * (-Wmaybe-uninitialized); the GPU code stays as measured. */
    __builtin_memset(v, 0, sizeof(v));
#endif
    CCO_IMPL_UNROLL_ for (int u = 0; u < CCO_IMPL_MOE_COPY_UNROLL; u++) {
      if (o + (uint64_t)u * stride < bytes) v[u] = cco_impl_ld_v16(src + o + (uint64_t)u * stride);
    }
    CCO_IMPL_UNROLL_ for (int u = 0; u < CCO_IMPL_MOE_COPY_UNROLL; u++) {
      if (o + (uint64_t)u * stride < bytes) cco_impl_st_v16(dst + o + (uint64_t)u * stride, v[u], 16u);
    }
  }
}

/* 4-byte words, for the small per-token arrays. */
CCO_DEVICE_INLINE void cco_impl_moe_copy_words(uint64_t dst, uint64_t src, uint32_t words, uint32_t lane,
                                               uint32_t lanes) {
  for (uint32_t i = lane; i < words; i += lanes)
    ((uint32_t*)(uintptr_t)dst)[i] = ((const uint32_t*)(uintptr_t)src)[i];
}

/* Signal array `which` (0: dispDone, 1: combReady, 2: countsDone) of the
 * state of LSA rank `lsa`, and its GDA signal slots (+ source rank). */
CCO_DEVICE_INLINE uint64_t* cco_impl_moe_signals(const ccoMoeDevArgs* a, int lsa, int which) {
  return cco_impl_moe_disp_done(a, lsa) + (uint64_t)which * a->nRanks;
}
CCO_DEVICE_INLINE uint32_t cco_impl_moe_gda_sig(const ccoMoeDevArgs* a, int which) {
  return which == 0 ? a->sigData : which == 1 ? a->sigComb : a->sigCounts;
}

/* Waits until every rank's signal of array `which` reached `epoch`: a word
 * of this rank's state for a rank of this host, a GDA signal slot (one
 * increment a call, so its count is the epoch) for one on another. */
CCO_DEVICE_INLINE ccoDevStatus_t cco_impl_moe_wait_all(const ccoDevComm* dc, const ccoMoeDevArgs* a, int which,
                                                       uint64_t epoch) {
  const uint64_t* mine = cco_impl_moe_signals(a, (int)a->selfLsa, which);
  ccoGda g = ccoGdaHandle(dc, 0, ccoGdaDoorbellImmediate);
  for (uint32_t s = 0; s < a->nRanks; s++) {
    ccoDevStatus_t st = cco_impl_moe_lsa(dc, a, s) >= 0
                            ? ccoSignalWaitUntil(dc, &mine[s], epoch, a->timeoutNs)
                            : ccoGdaWaitSignal(&g, cco_impl_moe_gda_sig(a, which) + s, epoch, a->timeoutNs, ccoCoopThread);
    if (st != ccoDevSuccess) return st;
  }
  return ccoDevSuccess;
}

/* Every rank's signal slot of this rank in array `which` gets `epoch`
 * (when `signal`); then this rank's slots of every rank reach it. A rank
 * on another host gets a GDA signal, applied there after everything this
 * rank posted before it on the context (the staged puts). */
CCO_DEVICE_INLINE ccoDevStatus_t cco_impl_moe_exchange(const ccoDevComm* dc, const ccoMoeDevArgs* a, int which,
                                                       uint64_t epoch, int signal) {
  if (signal) {
    ccoGda g = ccoGdaHandle(dc, 0, ccoGdaDoorbellImmediate);
    for (uint32_t d = 0; d < a->nRanks; d++) {
      int lsa = cco_impl_moe_lsa(dc, a, d);
      if (lsa >= 0) {
        ccoLsaSignalStore(dc, &cco_impl_moe_signals(a, lsa, which)[a->me], epoch);
        continue;
      }
      ccoDevStatus_t st = ccoGdaSignal(&g, (int)d, ccoGdaSigInc(cco_impl_moe_gda_sig(a, which) + a->me), ccoCoopThread);
      if (st != ccoDevSuccess) return st;
    }
  }
  return cco_impl_moe_wait_all(dc, a, which, epoch);
}

/* ------------------------------------------------------------ dispatch */

/* Token t's routing (one thread): its expert ids and weights into the
 * routing's rows (combine reads them all), and for every rank it goes to
 * (once, however many of its experts that rank owns) its index among this
 * part's tokens for that rank, counted in `count`; -1 in the routing row
 * for the other ranks. */
CCO_DEVICE_INLINE void cco_impl_moe_route(const ccoMoeDevArgs* a, uint32_t t, uint32_t* count) {
  int32_t* route = (int32_t*)ccoGetLsaPeerPtr(a->win, (int)a->selfLsa, a->offRouting) + (uint64_t)t * a->nRanks;
  int32_t* ids = (int32_t*)ccoGetLsaPeerPtr(a->win, (int)a->selfLsa, a->offRoutingIdx) + (uint64_t)t * a->topk;
  const int32_t* idx = (const int32_t*)(uintptr_t)a->indices + (uint64_t)t * a->topk;
  float* wts = (float*)ccoGetLsaPeerPtr(a->win, (int)a->selfLsa, a->offRoutingW) + (uint64_t)t * a->topk;
  const float* w = (const float*)(uintptr_t)a->weights + (uint64_t)t * a->topk;
  for (uint32_t j = 0; j < a->topk; j++) wts[j] = w[j];
  for (uint32_t d = 0; d < a->nRanks; d++) route[d] = -1;
  uint32_t nExperts = a->expertsPerRank * a->nRanks;
  for (uint32_t j = 0; j < a->topk; j++) {
    int32_t e = idx[j];
    ids[j] = e;
    if (e < 0) continue; /* a dropped choice */
    if ((uint32_t)e >= nExperts) {
      cco_impl_moe_report(a, ccoDevInvalid, CCO_IMPL_MOE_BAD_EXPERT, t, (uint32_t)e);
      ids[j] = -1;
      continue;
    }
    uint32_t d = (uint32_t)e / a->expertsPerRank;
    if (route[d] != -1) continue; /* this rank gets the token once */
    route[d] = (int32_t)cco_impl_atomic_add_block_u32(&count[d], 1u);
  }
}

/* Vectors in flight per lane of a dispatched row: a 7 KiB fp8 row is one
 * chunk (one wait for memory), a 14 KiB bf16 row two. */
#define CCO_IMPL_MOE_SEND_UNROLL 16
/* Per-token words (scales, weights, expert ids) each lane holds at once. */
#define CCO_IMPL_MOE_META_WORDS 3

/* Word m of token t's per-token words: its scales, then its weights, then
 * its expert ids (the routing's copy, with bad ids dropped): where it comes
 * from, and where it goes in a receiver's arena for slot `slot`. */
CCO_DEVICE_INLINE uint64_t cco_impl_moe_meta_src(const ccoMoeDevArgs* a, uint32_t t, uint32_t m) {
  uint64_t sc = a->scaleCount, k = a->topk;
  if (m < sc) return a->scales + (t * sc + m) * 4u;
  m -= (uint32_t)sc;
  if (m < k) return a->weights + (t * k + m) * 4u;
  m -= (uint32_t)k;
  return (uint64_t)(uintptr_t)ccoGetLsaPeerPtr(a->win, (int)a->selfLsa, a->offRoutingIdx) + (t * k + m) * 4u;
}
/* Where token t's copy for rank d goes: a slot of the dispatch output of
 * LSA rank `lsa`, or (d on another host) a row of this rank's staging,
 * which the last part puts to d in one piece per region. */
typedef struct {
  int lsa;
  uint64_t row, offX, offS, offW, offI, offSrc;
} cco_impl_moe_dest;

/* `net` is a->net, a constant at every call (as for the gather). */
CCO_DEVICE_INLINE int cco_impl_moe_dest_of(const ccoDevComm* dc, const ccoMoeDevArgs* a, const int32_t* route,
                                           uint32_t t, uint32_t d, cco_impl_moe_dest* o, const int net) {
  int32_t slot = route[d];
  if (slot < 0) return 0;
  int lsa = net ? ccoDevTeamRankFromWorld(dc, ccoTeamLsa, (int)d) : (int)d;
  if (lsa >= 0) {
    o->lsa = lsa, o->row = (uint64_t)slot;
    o->offX = a->offRecvX, o->offS = a->offRecvS, o->offW = a->offRecvW, o->offI = a->offRecvI;
    o->offSrc = a->offRecvSrc;
    return 1;
  }
  const int32_t* stage = (const int32_t*)(uintptr_t)cco_impl_moe_own(a, a->offRouteStage);
  o->lsa = (int)a->selfLsa, o->row = (uint64_t)stage[(uint64_t)t * a->nRanks + d];
  o->offX = a->offStageX, o->offS = a->offStageS, o->offW = a->offStageW, o->offI = a->offStageI;
  o->offSrc = a->offStageSrc;
  return 1;
}

CCO_DEVICE_INLINE uint64_t cco_impl_moe_meta_dst(const ccoMoeDevArgs* a, const cco_impl_moe_dest* o, uint32_t m) {
  uint64_t sc = a->scaleCount, k = a->topk, row = o->row;
  if (m < sc) return o->offS + (row * sc + m) * 4u;
  m -= (uint32_t)sc;
  if (m < k) return o->offW + (row * k + m) * 4u;
  m -= (uint32_t)k;
  return o->offI + (row * k + m) * 4u;
}

/* Per-token words [m0, m0 + lanes * META_WORDS) of token t, to every rank
 * its routing row names (lane 0 also writes the source record when
 * `source`); the words are loaded before `between` runs, stored after. */
CCO_DEVICE_INLINE void cco_impl_moe_meta_load(const ccoMoeDevArgs* a, uint32_t t, uint32_t m0, uint32_t lane,
                                              uint32_t lanes, uint32_t* w) {
  uint32_t meta = a->scaleCount + 2u * a->topk;
  CCO_IMPL_UNROLL_ for (int i = 0; i < CCO_IMPL_MOE_META_WORDS; i++) {
    uint32_t m = m0 + lane + (uint32_t)i * lanes;
    w[i] = m < meta ? *(const uint32_t*)(uintptr_t)cco_impl_moe_meta_src(a, t, m) : 0u;
  }
}
CCO_DEVICE_INLINE void cco_impl_moe_meta_store(const ccoDevComm* dc, const ccoMoeDevArgs* a, uint32_t t,
                                               const int32_t* route, uint32_t m0, uint32_t lane, uint32_t lanes,
                                               const uint32_t* w, int source, const int net) {
  uint32_t meta = a->scaleCount + 2u * a->topk;
  for (uint32_t d = 0; d < a->nRanks; d++) {
    cco_impl_moe_dest o;
    if (!cco_impl_moe_dest_of(dc, a, route, t, d, &o, net)) continue;
    CCO_IMPL_UNROLL_ for (int i = 0; i < CCO_IMPL_MOE_META_WORDS; i++) {
      uint32_t m = m0 + lane + (uint32_t)i * lanes;
      if (m < meta) *(uint32_t*)(uintptr_t)cco_impl_moe_peer(a, o.lsa, cco_impl_moe_meta_dst(a, &o, m)) = w[i];
    }
    if (source && lane == 0) {
      int32_t* src = (int32_t*)(uintptr_t)cco_impl_moe_peer(a, o.lsa, o.offSrc + o.row * 8u);
      src[0] = (int32_t)a->me;
      src[1] = (int32_t)t;
    }
  }
}

/* Token t into its slot at every rank its routing row names (the row, its
 * scales, weights, expert ids and source), by the lanes of one warp. Each
 * lane loads its share once and stores it to every destination; the first
 * chunk of the row and the per-token words are loaded together, so a
 * 7 KiB fp8 token to any number of ranks costs one wait for memory (it
 * was one per piece and destination: the row twice, scales, weights and
 * ids once each, for every rank). */
CCO_DEVICE_INLINE void cco_impl_moe_send(const ccoDevComm* dc, const ccoMoeDevArgs* a, uint32_t t, uint32_t lane,
                                         uint32_t lanes, const int net) {
  const int32_t* route = (const int32_t*)ccoGetLsaPeerPtr(a->win, (int)a->selfLsa, a->offRouting) + (uint64_t)t * a->nRanks;
  const uint64_t tb = a->tokenBytes, stride = (uint64_t)lanes * 16u;
  const uint64_t src = a->tokens + (uint64_t)t * tb;
  uint32_t w[CCO_IMPL_MOE_META_WORDS];
  cco_impl_moe_meta_load(a, t, 0, lane, lanes, w);
  int metaDone = 0;
  for (uint64_t o = (uint64_t)lane * 16u; o < tb; o += stride * CCO_IMPL_MOE_SEND_UNROLL) {
    cco_impl_v16 v[CCO_IMPL_MOE_SEND_UNROLL];
#if !CCO_ARCH_GPU
    __builtin_memset(v, 0, sizeof(v)); /* see cco_impl_moe_copy */
#endif
    CCO_IMPL_UNROLL_ for (int u = 0; u < CCO_IMPL_MOE_SEND_UNROLL; u++) {
      if (o + (uint64_t)u * stride < tb) v[u] = cco_impl_ld_v16(src + o + (uint64_t)u * stride);
    }
    if (!metaDone) {
      cco_impl_moe_meta_store(dc, a, t, route, 0, lane, lanes, w, 1, net);
      metaDone = 1;
    }
    for (uint32_t d = 0; d < a->nRanks; d++) {
      cco_impl_moe_dest q;
      if (!cco_impl_moe_dest_of(dc, a, route, t, d, &q, net)) continue;
      uint64_t dst = cco_impl_moe_peer(a, q.lsa, q.offX + q.row * tb);
      CCO_IMPL_UNROLL_ for (int u = 0; u < CCO_IMPL_MOE_SEND_UNROLL; u++) {
        if (o + (uint64_t)u * stride < tb) cco_impl_st_v16(dst + o + (uint64_t)u * stride, v[u], 16u);
      }
    }
  }
  if (!metaDone) cco_impl_moe_meta_store(dc, a, t, route, 0, lane, lanes, w, 1, net); /* a lane past the row's end */
  /* Long rows of scales (hidden over 128 x (3 x 32 - 2 x topk)): the rest. */
  uint32_t meta = a->scaleCount + 2u * a->topk;
  for (uint32_t m0 = lanes * CCO_IMPL_MOE_META_WORDS; m0 < meta; m0 += lanes * CCO_IMPL_MOE_META_WORDS) {
    cco_impl_moe_meta_load(a, t, m0, lane, lanes, w);
    cco_impl_moe_meta_store(dc, a, t, route, m0, lane, lanes, w, 0, net);
  }
}

#endif /* CCO_DEVICE_IMPL_MOE_COMMON_IMPL_H_ */
