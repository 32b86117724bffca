/*
 * Private: the device side of the MoE dispatch and combine op (cco/cco_moe.h,
 * docs/moe.md). Names start with cco_impl_ and may change in any release.
 *
 * One C implementation for both platforms: the op's CUDA kernels
 * (src/ops/kernels/moe_kernels.cu, nvcc) call these functions with a block
 * per part, and the host platform calls them from one CPU thread per part
 * (a block of one thread whose warp is that thread).
 *
 * The arena. Every rank owns one window (the arena) laid out alike on every
 * rank (offsets in ccoMoeDevArgs), so a peer's region is the same offset
 * through ccoGetLsaPeerPtr. Received tokens land in slots: rows of the
 * dispatch output (tokens, scales, weights, expert ids, source) at the same
 * slot, taken by the senders with atomics on the receiver's slot counter.
 *
 * Ordering without resets. Each dispatch has an epoch e (1, 2, ...; kept in
 * the arena's state), each combine one too (derived from its arrival
 * counter). Signals carry the epoch, so nothing is ever cleared:
 *
 * - dispatch e: senders add to slot counter e & 1 of the receiver; when
 *   every part of a rank has sent (arrival counter), its last part zeroes
 *   its own counter (e + 1) & 1, then stores e into dispDone[me] of every
 *   peer (release), waits for dispDone[s] >= e from every s (acquire), and
 *   publishes min(counter, maxRecv) as the received count. A peer adds to
 *   counter (e + 1) & 1 only in dispatch e + 1, after it saw this rank's
 *   dispDone e, which the zeroing precedes.
 * - combine e: each part copies its share of the expert output into the
 *   combine-input region when the caller's buffer is not already that
 *   region; the last part to arrive stores e into combReady[me] of every
 *   peer; every part waits for combReady[s] >= e from every s, then sums,
 *   for each of this rank's tokens, the rows the owning ranks hold for it,
 *   in rank order (the same bits whatever the timing).
 * - a rank overwrites what peers read (its combine input, in its next
 *   expert step) only after its next dispatch completed, which needs every
 *   peer's dispDone of that dispatch, which each peer stores after its own
 *   combine finished reading; dispatch outputs likewise.
 *
 * Across hosts (ccoMoeDevArgs.net) the slots come from a count matrix
 * instead of atomics, and the rows for other hosts go through staging and
 * GDA: cco/device/impl/moe_net_impl.h. The pieces both use are in
 * cco/device/impl/moe_common_impl.h.
 *
 * Co-residency: the parts of a combine wait for each other (through the
 * last part's signal), so all parts of a launch must run at once, as for
 * the collectives.
 */
#ifndef CCO_DEVICE_IMPL_MOE_IMPL_H_
#define CCO_DEVICE_IMPL_MOE_IMPL_H_

#include "cco/device/impl/moe_net_impl.h"

/*
 * Part `part` of nParts of a dispatch takes a contiguous share of the
 * tokens and sends them in three steps, a block sync between each:
 *   1. each thread routes tokens of the share (cco_impl_moe_route): their
 *      index among the share's tokens for each rank they go to, counted
 *      per rank in the part's own counters;
 *   2. thread d takes the share's slots at rank d with one atomic add of
 *      its count (one remote atomic per part and rank, not per token, and
 *      all ranks' at once), and zeroes the count for the next dispatch;
 *   3. each thread turns its tokens' indices into slots (-2 past the last
 *      slot: no room; the receiver reports it), then each warp sends the
 *      tokens of the share, a token at a time, to all its ranks at once
 *      (cco_impl_moe_send).
 * The last part to finish does the exchange.
 */
CCO_DEVICE_INLINE ccoDevStatus_t cco_impl_moe_dispatch_part(const ccoDevComm* dc, const ccoMoeDevArgs* a,
                                                            uint32_t part, uint32_t nParts) {
  uint32_t lanes = ccoCoopSize(ccoCoopWarp), lane = ccoCoopRank(ccoCoopWarp);
  uint32_t tid = ccoCoopRank(ccoCoopBlock), nthr = ccoCoopSize(ccoCoopBlock);
  uint32_t warps = nthr / lanes, warp = tid / lanes;
  ccoMoeDevState* me = cco_impl_moe_state(a, (int)a->selfLsa);
  uint64_t epoch = cco_impl_ld_acquire_u64(&me->dispEpoch) + 1u;
  uint64_t parity = epoch & 1u;
  const uint32_t t0 = (uint32_t)((uint64_t)a->numTokens * part / nParts);
  const uint32_t t1 = (uint32_t)((uint64_t)a->numTokens * (part + 1u) / nParts);
  uint32_t* perRank = cco_impl_moe_part_counts(a, part);
  uint32_t* base = perRank + a->nRanks;
  int32_t* route = (int32_t*)ccoGetLsaPeerPtr(a->win, (int)a->selfLsa, a->offRouting);
  for (uint32_t t = t0 + tid; t < t1; t += nthr) cco_impl_moe_route(a, t, perRank);
  ccoCoopSync(ccoCoopBlock);
  if (a->net) return cco_impl_moe_dispatch_net(dc, a, part, nParts, epoch, t0, t1);
  for (uint32_t d = tid; d < a->nRanks; d += nthr) {
    uint32_t n = perRank[d];
    base[d] = n ? (uint32_t)ccoLsaSignalAdd(dc, &cco_impl_moe_state(a, (int)d)->slotCounter[parity], n) : 0u;
    perRank[d] = 0;
  }
  ccoCoopSync(ccoCoopBlock);
  for (uint32_t t = t0 + tid; t < t1; t += nthr) {
    for (uint32_t d = 0; d < a->nRanks; d++) {
      int32_t* r = &route[(uint64_t)t * a->nRanks + d];
      if (*r < 0) continue;
      uint64_t slot = (uint64_t)base[d] + (uint64_t)*r;
      *r = slot < a->maxRecv ? (int32_t)slot : -2;
    }
  }
  ccoCoopSync(ccoCoopBlock);
  for (uint32_t t = t0 + warp; t < t1; t += warps) cco_impl_moe_send(dc, a, t, lane, lanes, 0);
  /* Arrive: the block's stores are ordered before the count (the barrier
   * orders the block, the fence makes it system wide). */
  ccoCoopSync(ccoCoopBlock);
  ccoDevStatus_t st = ccoDevSuccess;
  if (ccoCoopRank(ccoCoopBlock) == 0) {
    cco_impl_fence_acq_rel_sys();
    uint64_t old = cco_impl_atomic_add_release_u64(&me->dispArrive, 1u);
    if (old % nParts == nParts - 1u) {
      cco_impl_fence_acq_rel_sys(); /* every part's stores before the signals */
      me->slotCounter[parity ^ 1u] = 0;
      st = cco_impl_moe_exchange(dc, a, 0, epoch, 1);
      if (st == ccoDevSuccess) {
        uint64_t got = cco_impl_ld_acquire_u64(&me->slotCounter[parity]);
        int32_t* count = (int32_t*)ccoGetLsaPeerPtr(a->win, (int)a->selfLsa, a->offRecvCount);
        *count = (int32_t)(got < a->maxRecv ? got : a->maxRecv);
        if (got > a->maxRecv)
          cco_impl_moe_report(a, ccoDevInvalid, CCO_IMPL_MOE_OVERFLOW, (uint32_t)(got > 0xffffffffu ? 0xffffffffu : got),
                              a->maxRecv);
      } else {
        cco_impl_moe_report(a, st, CCO_IMPL_MOE_WAIT, 0, 0);
      }
      cco_impl_st_release_u64(&me->dispEpoch, epoch);
    }
  }
  ccoCoopSync(ccoCoopBlock);
  return st;
}

/* ------------------------------------------------------------ combine */

/* Token t's row: the sum, in rank order and fp32, of the rows the ranks it
 * went to hold for it, rounded once to bf16; and its weights, each from the
 * rank that owns that choice's expert. */
/* Vectors of a row each lane keeps in flight: `ranks` ranks at a time, `vecs`
 * 16-byte vectors of each, a->combineLoads = ranks x vecs in all
 * (CCO_MOE_COMBINE_LOADS, 12 by default: 2 x 6 up to two ranks, 4 x 3 from
 * three on; 4 x 2 for every rank count before, when half of the slots held
 * ranks that do not exist at two ranks, and the combine of 7 KiB bf16 rows
 * waited for memory once per KiB a rank). */
#define CCO_IMPL_MOE_GATHER_RANKS 4 /* most ranks at a time */
#define CCO_IMPL_MOE_GATHER_VECS 6  /* most vectors of each */
CCO_DEVICE_INLINE void cco_impl_moe_gather_row(const ccoDevComm* dc, const ccoMoeDevArgs* a, uint32_t t,
                                               const int32_t* route, uint32_t lane, uint32_t lanes, const int net,
                                               const int ranks, const int vecs) {
  uint64_t rowBytes = (uint64_t)a->hidden * 2u;
  uint64_t dst = a->out + (uint64_t)t * rowBytes;
  const uint32_t zero[4] = {0, 0, 0, 0};
  const uint64_t stride = (uint64_t)lanes * 16u;
  for (uint64_t o = (uint64_t)lane * 16u; o < rowBytes; o += (uint64_t)vecs * stride) {
    /* Every entry set, also the ones this shape leaves unused (gcc cannot
     * tell they are; nvcc drops them). */
    float acc[CCO_IMPL_MOE_GATHER_VECS][8];
    CCO_IMPL_UNROLL_ for (int h = 0; h < CCO_IMPL_MOE_GATHER_VECS; h++) CCO_IMPL_UNROLL_ for (int m = 0; m < 8; m++)
        acc[h][m] = 0.0f;
    for (uint32_t d0 = 0; d0 < a->nRanks; d0 += (uint32_t)ranks) {
      cco_impl_v16 v[CCO_IMPL_MOE_GATHER_RANKS][CCO_IMPL_MOE_GATHER_VECS];
      int32_t slot[CCO_IMPL_MOE_GATHER_RANKS] = {-1, -1, -1, -1};
#if !CCO_ARCH_GPU
      __builtin_memset(v, 0, sizeof(v)); /* see cco_impl_moe_copy */
#endif
      CCO_IMPL_UNROLL_ for (int i = 0; i < CCO_IMPL_MOE_GATHER_RANKS; i++) {
        if (i >= ranks) continue;
        slot[i] = d0 + (uint32_t)i < a->nRanks ? route[d0 + (uint32_t)i] : -1;
        uint64_t row = slot[i] < 0 ? 0
                       : net ? cco_impl_moe_comb_at(dc, a, t, d0 + (uint32_t)i, slot[i], 0)
                             : cco_impl_moe_peer(a, (int)(d0 + (uint32_t)i), a->offCombIn + (uint64_t)slot[i] * rowBytes);
        CCO_IMPL_UNROLL_ for (int h = 0; h < CCO_IMPL_MOE_GATHER_VECS; h++) {
          if (h >= vecs) continue;
          uint64_t at = o + (uint64_t)h * stride;
          v[i][h] = slot[i] >= 0 && at < rowBytes ? cco_impl_ld_v16(row + at) : cco_impl_v16_make(zero);
        }
      }
      CCO_IMPL_UNROLL_ for (int i = 0; i < CCO_IMPL_MOE_GATHER_RANKS; i++) {
        if (i >= ranks || slot[i] < 0) continue;
        CCO_IMPL_UNROLL_ for (int h = 0; h < CCO_IMPL_MOE_GATHER_VECS; h++) {
          if (h >= vecs) continue;
          CCO_IMPL_UNROLL_ for (int m = 0; m < 4; m++) {
            uint32_t w = cco_impl_v16_word(v[i][h], m);
            acc[h][2 * m] += ccoBfloat16ToFloat((uint16_t)w);
            acc[h][2 * m + 1] += ccoBfloat16ToFloat((uint16_t)(w >> 16));
          }
        }
      }
    }
    CCO_IMPL_UNROLL_ for (int h = 0; h < CCO_IMPL_MOE_GATHER_VECS; h++) {
      uint64_t at = o + (uint64_t)h * stride;
      if (h >= vecs || at >= rowBytes) continue;
      uint32_t w[4];
      CCO_IMPL_UNROLL_ for (int m = 0; m < 4; m++) w[m] =
          (uint32_t)ccoFloatToBfloat16(acc[h][2 * m]) | ((uint32_t)ccoFloatToBfloat16(acc[h][2 * m + 1]) << 16);
      cco_impl_st_v16(dst + at, cco_impl_v16_make(w), 16u);
    }
  }
}

/* `net`: a->net, as a constant at each call (the one-host instance keeps
 * none of the other hosts' branches in its loop). */
CCO_DEVICE_INLINE void cco_impl_moe_gather(const ccoDevComm* dc, const ccoMoeDevArgs* a, uint32_t t, uint32_t lane,
                                           uint32_t lanes, const int net) {
  const int32_t* route = (const int32_t*)ccoGetLsaPeerPtr(a->win, (int)a->selfLsa, a->offRouting) + (uint64_t)t * a->nRanks;
  const uint32_t loads = a->combineLoads;
  if (a->nRanks <= 2u) {
    if (loads <= 4u) cco_impl_moe_gather_row(dc, a, t, route, lane, lanes, net, 2, 2);
    else if (loads <= 8u) cco_impl_moe_gather_row(dc, a, t, route, lane, lanes, net, 2, 4);
    else cco_impl_moe_gather_row(dc, a, t, route, lane, lanes, net, 2, 6);
  } else {
    if (loads <= 4u) cco_impl_moe_gather_row(dc, a, t, route, lane, lanes, net, 4, 1);
    else if (loads <= 8u) cco_impl_moe_gather_row(dc, a, t, route, lane, lanes, net, 4, 2);
    else cco_impl_moe_gather_row(dc, a, t, route, lane, lanes, net, 4, 3);
  }
  if (!a->outWeights) return;
  /* The dispatched weights are this rank's own copy: the owner's copy
   * sits in its dispatch output, which a fast peer's next dispatch may
   * already be overwriting while this combine runs. Weights passed to
   * combine sit in the owner's combine-weights region, which changes only
   * after the next dispatch completed everywhere. */
  const int32_t* ids = (const int32_t*)ccoGetLsaPeerPtr(a->win, (int)a->selfLsa, a->offRoutingIdx) + (uint64_t)t * a->topk;
  const float* mine = (const float*)ccoGetLsaPeerPtr(a->win, (int)a->selfLsa, a->offRoutingW) + (uint64_t)t * a->topk;
  float* ow = (float*)(uintptr_t)a->outWeights + (uint64_t)t * a->topk;
  for (uint32_t j = lane; j < a->topk; j += lanes) {
    int32_t e = ids[j];
    int32_t slot = e >= 0 ? route[(uint32_t)e / a->expertsPerRank] : -1;
    if (slot < 0)
      ow[j] = 0.0f;
    else if (!a->useCombWeights)
      ow[j] = mine[j];
    else
      ow[j] = ((const float*)(uintptr_t)cco_impl_moe_comb_at(dc, a, t, (uint32_t)e / a->expertsPerRank, slot, 1))[j];
  }
}

CCO_DEVICE_INLINE ccoDevStatus_t cco_impl_moe_combine_part(const ccoDevComm* dc, const ccoMoeDevArgs* a,
                                                           uint32_t part, uint32_t nParts) {
  uint32_t lanes = ccoCoopSize(ccoCoopWarp), lane = ccoCoopRank(ccoCoopWarp);
  uint32_t warps = ccoCoopSize(ccoCoopBlock) / lanes, warp = ccoCoopRank(ccoCoopBlock) / lanes;
  ccoMoeDevState* me = cco_impl_moe_state(a, (int)a->selfLsa);
  /* The fallback: the caller's rows (and weights) into the arena. */
  if (a->expertOut || a->combWeights) {
    uint32_t rows = (uint32_t)*(const int32_t*)ccoGetLsaPeerPtr(a->win, (int)a->selfLsa, a->offRecvCount);
    uint64_t rowBytes = (uint64_t)a->hidden * 2u, k = a->topk;
    for (uint32_t r = part * warps + warp; r < rows; r += nParts * warps) {
      if (a->expertOut)
        cco_impl_moe_copy(cco_impl_moe_peer(a, (int)a->selfLsa, a->offCombIn + r * rowBytes), a->expertOut + r * rowBytes,
                          rowBytes, lane, lanes);
      if (a->combWeights)
        cco_impl_moe_copy_words(cco_impl_moe_peer(a, (int)a->selfLsa, a->offCombW + r * k * 4u), a->combWeights + r * k * 4u,
                                (uint32_t)k, lane, lanes);
    }
  }
  ccoCoopSync(ccoCoopBlock);
  ccoDevStatus_t st = ccoDevSuccess;
  if (ccoCoopRank(ccoCoopBlock) == 0) {
    cco_impl_fence_acq_rel_sys();
    uint64_t old = cco_impl_atomic_add_release_u64(&me->combArrive, 1u);
    uint64_t epoch = old / nParts + 1u;
    int last = old % nParts == nParts - 1u;
    if (last) cco_impl_fence_acq_rel_sys();
    if (!a->net) {
      st = cco_impl_moe_exchange(dc, a, 1, epoch, last);
      if (st != ccoDevSuccess) cco_impl_moe_report(a, st, CCO_IMPL_MOE_WAIT, 1, 0);
    } else if (last) {
      /* Across hosts the last part also fetches the rows (and weights)
       * that owners on other hosts hold for this rank's tokens, into the
       * staging rows of the dispatch; the other parts wait for it. */
      st = cco_impl_moe_exchange(dc, a, 1, epoch, 1);
      if (st == ccoDevSuccess) st = cco_impl_moe_fetch(dc, a, epoch);
      if (st != ccoDevSuccess) cco_impl_moe_report(a, st, CCO_IMPL_MOE_WAIT, 1, 0);
      cco_impl_moe_publish(me, &me->fetchEpoch, epoch, st);
    } else {
      st = cco_impl_moe_await(dc, a, me, &me->fetchEpoch, epoch);
    }
  }
  if (cco_impl_block_any(st != ccoDevSuccess)) return st == ccoDevSuccess ? ccoDevAborted : st;
  if (a->net)
    for (uint32_t t = part * warps + warp; t < a->numTokens; t += nParts * warps) cco_impl_moe_gather(dc, a, t, lane, lanes, 1);
  else
    for (uint32_t t = part * warps + warp; t < a->numTokens; t += nParts * warps) cco_impl_moe_gather(dc, a, t, lane, lanes, 0);
  return ccoDevSuccess;
}

#endif /* CCO_DEVICE_IMPL_MOE_IMPL_H_ */
