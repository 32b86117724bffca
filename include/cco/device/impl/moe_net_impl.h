/*
 * Private: the MoE op across hosts (docs/moe.md, "Across hosts"); the op as
 * a whole is cco/device/impl/moe_impl.h, which includes this file. Ranks
 * of this host get stores (LSA); the ranks of other hosts get the rows
 * staged in this rank's arena and put there with GDA, at slots computed
 * from a count matrix; combine gets them back the same way.
 */
#ifndef CCO_DEVICE_IMPL_MOE_NET_IMPL_H_
#define CCO_DEVICE_IMPL_MOE_NET_IMPL_H_

#include "cco/device/impl/moe_common_impl.h"

/* ------------------------------------------------ dispatch across hosts */

/*
 * Across hosts there is no remote fetch-and-add to take slots with, so the
 * slots follow from a count matrix instead (docs/moe.md): M[s][d], the
 * tokens rank s sends rank d, in the arena by dispatch parity. Rank s's
 * tokens land at d in slots from sum_{s' < s} M[s'][d] on, in its parts'
 * order (part p after the tokens of parts before it), so every rank
 * computes every slot it writes without asking. Peers on this host still
 * get direct stores; a peer on another host gets this rank's tokens for it
 * staged in one run of rows (in slot order), which the last part puts there
 * in one piece per region, then a GDA signal (applied after the puts).
 */
#define CCO_IMPL_MOE_M(a, M, s, d) (M)[(uint64_t)(s) * (a)->nRanks + (d)]

CCO_DEVICE_INLINE uint32_t* cco_impl_moe_matrix(const ccoMoeDevArgs* a, uint64_t epoch) {
  return (uint32_t*)(uintptr_t)cco_impl_moe_own(a, a->offCounts) + (epoch & 1u) * a->nRanks * a->nRanks;
}

/* Where this rank's rows for d start at d (its first slot) and in its own
 * staging (rows for the ranks of other hosts before d come first), and
 * how many of them land (the ones past the last slot are dropped). */
CCO_DEVICE_INLINE void cco_impl_moe_run_of(const ccoDevComm* dc, const ccoMoeDevArgs* a, const uint32_t* M, uint32_t d,
                                           uint64_t* slot0, uint64_t* stage0, uint64_t* rows) {
  uint64_t b = 0, st = 0;
  for (uint32_t s = 0; s < a->me; s++) b += CCO_IMPL_MOE_M(a, M, s, d);
  for (uint32_t e = 0; e < d; e++)
    if (cco_impl_moe_lsa(dc, a, e) < 0) st += CCO_IMPL_MOE_M(a, M, a->me, e);
  uint64_t c = CCO_IMPL_MOE_M(a, M, a->me, d);
  *slot0 = b, *stage0 = st;
  *rows = b >= a->maxRecv ? 0 : (c < a->maxRecv - b ? c : a->maxRecv - b);
}

/* The last part's result for the other parts: they wait for `word` to
 * reach the epoch, then learn from failedEpoch whether it failed. */
CCO_DEVICE_INLINE void cco_impl_moe_publish(ccoMoeDevState* me, uint64_t* word, uint64_t epoch, ccoDevStatus_t st) {
  if (st != ccoDevSuccess) cco_impl_st_release_u64(&me->failedEpoch, epoch);
  cco_impl_st_release_u64(word, epoch);
}
CCO_DEVICE_INLINE ccoDevStatus_t cco_impl_moe_await(const ccoDevComm* dc, const ccoMoeDevArgs* a, ccoMoeDevState* me,
                                                    uint64_t* word, uint64_t epoch) {
  ccoDevStatus_t st = ccoSignalWaitUntil(dc, word, epoch, a->timeoutNs);
  if (st == ccoDevSuccess && cco_impl_ld_acquire_u64(&me->failedEpoch) == epoch) st = ccoDevAborted;
  return st;
}

/* The last part to count: this rank's row of the matrix, to every rank
 * (stores and a signal word on this host, a put with its signal to each
 * rank elsewhere), then every rank's row. */
CCO_DEVICE_INLINE ccoDevStatus_t cco_impl_moe_counts_exchange(const ccoDevComm* dc, const ccoMoeDevArgs* a,
                                                              uint32_t nParts, uint64_t epoch) {
  uint32_t* M = cco_impl_moe_matrix(a, epoch);
  uint32_t* row = &CCO_IMPL_MOE_M(a, M, a->me, 0);
  for (uint32_t d = 0; d < a->nRanks; d++) {
    uint32_t sum = 0;
    for (uint32_t p = 0; p < nParts; p++) sum += cco_impl_moe_part_counts(a, p)[d];
    row[d] = sum;
  }
  cco_impl_fence_acq_rel_sys(); /* the row before its signals and puts */
  uint64_t rowOff = a->offCounts + ((epoch & 1u) * a->nRanks * a->nRanks + (uint64_t)a->me * a->nRanks) * 4u;
  ccoGda g = ccoGdaHandle(dc, 0, ccoGdaDoorbellImmediate);
  for (uint32_t d = 0; d < a->nRanks; d++) {
    int lsa = cco_impl_moe_lsa(dc, a, d);
    if (lsa < 0) {
      ccoDevStatus_t st = ccoGdaPut(&g, (int)d, a->win, rowOff, a->win, rowOff, (size_t)a->nRanks * 4u,
                                    ccoGdaSigInc(a->sigCounts + a->me), CCO_GDA_NO_COUNTER, ccoCoopThread,
                                    ccoGdaThreadAggregate);
      if (st != ccoDevSuccess) return st;
    } else {
      if (lsa != (int)a->selfLsa) {
        uint32_t* there = (uint32_t*)(uintptr_t)cco_impl_moe_peer(a, lsa, rowOff);
        for (uint32_t e = 0; e < a->nRanks; e++) there[e] = row[e];
      }
      /* A release store: the row before the word. (A rank elsewhere counts
       * its put's signal: one increment per dispatch, no second one.) */
      ccoLsaSignalStore(dc, &cco_impl_moe_signals(a, lsa, 2)[a->me], epoch);
    }
  }
  return cco_impl_moe_wait_all(dc, a, 2, epoch);
}

/* Dispatch across hosts, after the route step (the block synced). */
CCO_DEVICE_INLINE ccoDevStatus_t cco_impl_moe_dispatch_net(const ccoDevComm* dc, const ccoMoeDevArgs* a, uint32_t part,
                                                           uint32_t nParts, uint64_t epoch, uint32_t t0, uint32_t t1) {
  uint32_t lanes = ccoCoopSize(ccoCoopWarp), lane = ccoCoopRank(ccoCoopWarp);
  uint32_t tid = ccoCoopRank(ccoCoopBlock), nthr = ccoCoopSize(ccoCoopBlock);
  uint32_t warps = nthr / lanes, warp = tid / lanes;
  const uint32_t n = a->nRanks;
  ccoMoeDevState* me = cco_impl_moe_state(a, (int)a->selfLsa);
  uint32_t* count = cco_impl_moe_part_counts(a, part);
  uint32_t* base = count + n;
  uint32_t* stage = count + 2u * n;
  int32_t* route = (int32_t*)(uintptr_t)cco_impl_moe_own(a, a->offRouting);
  int32_t* routeStage = (int32_t*)(uintptr_t)cco_impl_moe_own(a, a->offRouteStage);
  const uint32_t* M = cco_impl_moe_matrix(a, epoch);
  /* 1. Every part's counts, then the matrix (the last part exchanges it). */
  ccoDevStatus_t st = ccoDevSuccess;
  if (tid == 0) {
    cco_impl_fence_acq_rel_sys();
    uint64_t old = cco_impl_atomic_add_release_u64(&me->countArrive, 1u);
    if (old % nParts == nParts - 1u) {
      cco_impl_fence_acq_rel_sys(); /* every part's counts */
      st = cco_impl_moe_counts_exchange(dc, a, nParts, epoch);
      if (st != ccoDevSuccess) cco_impl_moe_report(a, st, CCO_IMPL_MOE_WAIT, 0, 0);
      cco_impl_moe_publish(me, &me->matrixEpoch, epoch, st);
    } else {
      st = cco_impl_moe_await(dc, a, me, &me->matrixEpoch, epoch);
    }
  }
  if (cco_impl_block_any(st != ccoDevSuccess)) return st == ccoDevSuccess ? ccoDevAborted : st;
  /* 2. This part's first slot at each rank and first staging row. */
  for (uint32_t d = tid; d < n; d += nthr) {
    uint64_t slot0, stage0, rows, within = 0;
    cco_impl_moe_run_of(dc, a, M, d, &slot0, &stage0, &rows);
    for (uint32_t p = 0; p < part; p++) within += cco_impl_moe_part_counts(a, p)[d];
    uint64_t b = slot0 + within;
    base[d] = b > 0xffffffffu ? 0xffffffffu : (uint32_t)b;
    stage[d] = (uint32_t)(stage0 + within);
  }
  ccoCoopSync(ccoCoopBlock);
  /* 3. Slots (-2 past the last: dropped) and staging rows (-1: none). */
  for (uint32_t t = t0 + tid; t < t1; t += nthr) {
    for (uint32_t d = 0; d < n; d++) {
      int32_t* r = &route[(uint64_t)t * n + d];
      int32_t* q = &routeStage[(uint64_t)t * n + d];
      *q = -1;
      if (*r < 0) continue;
      uint64_t slot = (uint64_t)base[d] + (uint64_t)*r;
      if (slot < a->maxRecv && cco_impl_moe_lsa(dc, a, d) < 0) *q = (int32_t)(stage[d] + (uint32_t)*r);
      *r = slot < a->maxRecv ? (int32_t)slot : -2;
    }
  }
  ccoCoopSync(ccoCoopBlock);
  /* 4. Rows to this host's ranks, and into the staging for the others. */
  for (uint32_t t = t0 + warp; t < t1; t += warps) cco_impl_moe_send(dc, a, t, lane, lanes, 1);
  ccoCoopSync(ccoCoopBlock);
  /* 5. The last part puts each staged run, signals every rank, waits. */
  if (tid == 0) {
    cco_impl_fence_acq_rel_sys();
    uint64_t old = cco_impl_atomic_add_release_u64(&me->dispArrive, 1u);
    if (old % nParts == nParts - 1u) {
      cco_impl_fence_acq_rel_sys(); /* every part's rows before the puts and signals */
      ccoGda g = ccoGdaHandle(dc, 0, ccoGdaDoorbellImmediate);
      uint64_t tb = a->tokenBytes, sc = a->scaleCount, k = a->topk;
      for (uint32_t d = 0; d < n && st == ccoDevSuccess; d++) {
        if (cco_impl_moe_lsa(dc, a, d) >= 0) continue;
        uint64_t slot0, stage0, rows;
        cco_impl_moe_run_of(dc, a, M, d, &slot0, &stage0, &rows);
        if (!rows) continue;
        const uint64_t region[5][3] = {{a->offRecvX, a->offStageX, tb},
                                       {a->offRecvS, a->offStageS, sc * 4u},
                                       {a->offRecvW, a->offStageW, k * 4u},
                                       {a->offRecvI, a->offStageI, k * 4u},
                                       {a->offRecvSrc, a->offStageSrc, 8u}};
        for (int i = 0; i < 5 && st == ccoDevSuccess; i++) {
          if (!region[i][2]) continue; /* bf16: no scales */
          st = ccoGdaPut(&g, (int)d, a->win, region[i][0] + slot0 * region[i][2], a->win,
                         region[i][1] + stage0 * region[i][2], rows * region[i][2], ccoGdaSigNone(),
                         CCO_GDA_NO_COUNTER, ccoCoopThread, ccoGdaThreadAggregate);
        }
      }
      if (st == ccoDevSuccess) st = cco_impl_moe_exchange(dc, a, 0, epoch, 1);
      if (st == ccoDevSuccess) {
        uint64_t got = 0;
        for (uint32_t s = 0; s < n; s++) got += CCO_IMPL_MOE_M(a, M, s, a->me);
        int32_t* recvCount = (int32_t*)(uintptr_t)cco_impl_moe_own(a, a->offRecvCount);
        *recvCount = (int32_t)(got < a->maxRecv ? got : a->maxRecv);
        if (got > a->maxRecv)
          cco_impl_moe_report(a, ccoDevInvalid, CCO_IMPL_MOE_OVERFLOW, (uint32_t)(got > 0xffffffffu ? 0xffffffffu : got),
                              a->maxRecv);
      } else {
        cco_impl_moe_report(a, st, CCO_IMPL_MOE_WAIT, 0, 0);
      }
      /* Every part is past reading the counts: zero them for the next dispatch. */
      for (uint32_t p = 0; p < nParts; p++)
        for (uint32_t d = 0; d < n; d++) cco_impl_moe_part_counts(a, p)[d] = 0;
      cco_impl_st_release_u64(&me->dispEpoch, epoch);
    }
  }
  ccoCoopSync(ccoCoopBlock);
  return st;
}

/* ------------------------------------------------- combine across hosts */

/* Where combine reads token t's row of rank d (slot: its slot there): the
 * owner's combine input on this host, this rank's fetched copy (the
 * staging row of the dispatch) for an owner on another host. Likewise its
 * gathered weights. */
CCO_DEVICE_INLINE uint64_t cco_impl_moe_comb_at(const ccoDevComm* dc, const ccoMoeDevArgs* a, uint32_t t, uint32_t d,
                                                int32_t slot, int weights) {
  uint64_t each = weights ? (uint64_t)a->topk * 4u : (uint64_t)a->hidden * 2u;
  int lsa = cco_impl_moe_lsa(dc, a, d);
  if (lsa >= 0) return cco_impl_moe_peer(a, lsa, (weights ? a->offCombW : a->offCombIn) + (uint64_t)slot * each);
  const int32_t* stage = (const int32_t*)(uintptr_t)cco_impl_moe_own(a, a->offRouteStage);
  return cco_impl_moe_own(a, (weights ? a->offCombStageW : a->offCombStage) +
                                 (uint64_t)stage[(uint64_t)t * a->nRanks + d] * each);
}

/* Combine e across hosts: for each owner d on another host, the rows it
 * holds for this rank (its slots of dispatch e, one run) into this rank's
 * combine staging at the dispatch's staging rows, with one get per region;
 * done once the gets are complete (flush). */
CCO_DEVICE_INLINE ccoDevStatus_t cco_impl_moe_fetch(const ccoDevComm* dc, const ccoMoeDevArgs* a, uint64_t epoch) {
  const uint32_t* M = cco_impl_moe_matrix(a, epoch); /* combine e reads the counts of dispatch e */
  ccoGda g = ccoGdaHandle(dc, 0, ccoGdaDoorbellImmediate);
  uint64_t rowBytes = (uint64_t)a->hidden * 2u, wBytes = (uint64_t)a->topk * 4u;
  ccoDevStatus_t st = ccoDevSuccess;
  for (uint32_t d = 0; d < a->nRanks && st == ccoDevSuccess; d++) {
    if (cco_impl_moe_lsa(dc, a, d) >= 0) continue;
    uint64_t slot0, stage0, rows;
    cco_impl_moe_run_of(dc, a, M, d, &slot0, &stage0, &rows);
    if (!rows) continue;
    st = ccoGdaGet(&g, (int)d, a->win, a->offCombStage + stage0 * rowBytes, a->win, a->offCombIn + slot0 * rowBytes,
                   rows * rowBytes, CCO_GDA_NO_COUNTER, ccoCoopThread, ccoGdaThreadAggregate);
    if (st == ccoDevSuccess && a->useCombWeights && a->outWeights)
      st = ccoGdaGet(&g, (int)d, a->win, a->offCombStageW + stage0 * wBytes, a->win, a->offCombW + slot0 * wBytes,
                     rows * wBytes, CCO_GDA_NO_COUNTER, ccoCoopThread, ccoGdaThreadAggregate);
  }
  if (st == ccoDevSuccess) st = ccoGdaFlush(&g, ccoCoopThread);
  return st;
}

#endif /* CCO_DEVICE_IMPL_MOE_NET_IMPL_H_ */
