/*
 * Private: the hierarchical collectives of cco/cco_coll.h (ccoDevAllReduceHier,
 * ccoDevAllGatherHier, ccoDevReduceScatterHier, ccoDevAlltoAllHier,
 * ccoDevBroadcastHier) for communicators that span hosts of equal size: LSA
 * loads and stores inside each host, GDA puts with signals between hosts,
 * mostly over the rail team (the ranks with this rank's LSA rank, one per
 * host). Names start with cco_impl_ and may change in any release.
 *
 * All-reduce, per part and chunk:
 *   1. reduce-scatter inside the host by LSA pull: LSA rank r reduces slice r
 *      of the chunk from every LSA peer's input (LSA rank order) into its own
 *      staging slot, as 32-bit accumulators (fp32 for the half types, which
 *      are rounded only once, at the end);
 *   2. GDA put of that slot into the same slot of every rail peer, each put
 *      carrying +1 on a signal of the receiver; wait for every rail peer's
 *      signal; reduce the slots in rail order;
 *   3. all-gather inside the host by LSA push: the result, converted once,
 *      into slice r of every LSA peer's output.
 * So every element is reduced in the same order (LSA rank order inside each
 * host, then the hosts in rail order) by exactly one rail, and every rank
 * gets the same bits. Only rank r touches slice r of anyone's buffers, and
 * it reads it (step 1) before it writes it (step 3): safe in place. The
 * other blocks are described where they are defined below.
 *
 * Uses and epochs. Every exchange over the rail (the signature header of a
 * call, each chunk) is one "use" of the part; a part's uses are counted in
 * the scratch (a uint64 only this rank's part reads and advances), and use e
 * goes to staging buffer e % 2 and leaves signal (part, sender) at e on the
 * receiver, which waits for exactly that: signals only grow, nothing is
 * reset. Two buffers suffice for the reason LL's do: a sender S puts use
 * e + 2 into receiver R's buffer e % 2 only after S has received R's use
 * e + 1, which R sent after it finished reading use e; and S rewrites its
 * own slot of use e (the source of its put) only after receiving the rail
 * peers' use e + 1, which they sent after S's use e had landed. The argument
 * needs every rank to make the same sequence of hierarchical calls with the
 * same nParts, which the signature header checks across hosts (the LSA
 * barrier's check covers the host).
 *
 * Verdict. After the LSA frame of the one-host blocks (barrier, signature
 * slots of the host), a call puts {signature, or 0} to every rail peer as
 * its first use. A rank sends 0 when its own arguments or its host's LSA
 * check failed, so every rank learns every host's verdict from its rail and
 * all of them proceed or none does; the uses stay in step either way. The
 * blocks that write into the rail peers' buffers make this exchange even
 * without a signature: it says the peer has entered the call.
 */
#include "cco/cco_coll.h"

#ifndef CCO_DEVICE_IMPL_COLL_HIER_IMPL_H_
#define CCO_DEVICE_IMPL_COLL_HIER_IMPL_H_

#include <stdint.h>

#include "cco/cco_coll_types.h"
#include "cco/cco_device.h"
#include "cco/cco_gda.h"
#include "cco/device/impl/coll_reduce_impl.h"

/* ------------------------------------------------------------ layout */
/*
 * After the one-host area (cco_impl_coll_scratch_bytes, rounded up to
 * 4 KiB), a region per part p at hierBase + p x partBytes:
 *
 *   [0, 8)              the part's use counter of the rail (this rank only)
 *   [8, 16)             and of all-to-all's puts to every rank of the other hosts
 *   [64, 64 + 16 x H)   signature headers: [parity 2][sender's rail rank] uint64
 *   [stage, ...)        staging in: [parity 2][sender's rail rank][SLOT bytes]
 *   then                staging out: [parity 2][receiver's rail rank][SLOT bytes]
 *
 * A slot holds one rank's slice of a chunk as 32-bit accumulators. The out
 * slots are reduce-scatter's, which sends each rail peer another partial
 * (its block's). Signal p x H + s of the device communicator counts the
 * uses rail rank s has sent this rank on part p; all-to-all's signal
 * nParts x H + p x worldSize + w those world rank w has sent it.
 */
#define CCO_IMPL_HIER_SLOT_BYTES 65536u
#define CCO_IMPL_HIER_HDR_OFF 64u

CCO_HOST_DEVICE_INLINE uint64_t cco_impl_hier_base(int lsaSize) {
  return (cco_impl_coll_scratch_bytes(lsaSize, 1) + 4095u) & ~(uint64_t)4095u;
}
CCO_HOST_DEVICE_INLINE uint64_t cco_impl_hier_stage_off(int nNodes) {
  return (CCO_IMPL_HIER_HDR_OFF + 16u * (uint64_t)nNodes + 255u) & ~(uint64_t)255u;
}
CCO_HOST_DEVICE_INLINE uint64_t cco_impl_hier_part_bytes(int nNodes) {
  return (cco_impl_hier_stage_off(nNodes) + 4u * (uint64_t)nNodes * CCO_IMPL_HIER_SLOT_BYTES + 4095u) &
         ~(uint64_t)4095u;
}
CCO_HOST_DEVICE_INLINE uint64_t cco_impl_hier_scratch_bytes(int lsaSize, int nNodes, uint32_t nParts) {
  if (lsaSize < 1 || nNodes < 1 || nParts < 1 || nParts > CCO_COLL_MAX_PARTS) return 0;
  return cco_impl_hier_base(lsaSize) + (uint64_t)nParts * cco_impl_hier_part_bytes(nNodes);
}

/* ------------------------------------------------------------ the loop */

/*
 * n elements from nSrc sources to nDst destinations, like
 * cco_impl_coll_span, where either side may hold 32-bit accumulators
 * (srcAcc, dstAcc) instead of elements of the call's type: the staging
 * slots keep fp32 for the half types. `head` elements come before the
 * first whole group (16 bytes of elements, 16 or 32 bytes of accumulators);
 * the accumulator side is aligned by construction, the element side may
 * not be (dstAlign is computed for stores).
 */
typedef struct {
  uint64_t src, srcStride, dst, dstStride, n, head;
  int32_t nSrc, nDst, dstFirst, srcAcc, dstAcc;
} cco_impl_hier_span;

CCO_DEVICE_INLINE void cco_impl_hier_ld_group(uint64_t addr, int acc, ccoDataType_t dt, uint32_t* w) {
  const int lpw = cco_impl_coll_lanes_per_word(dt);
  cco_impl_v16 x = cco_impl_ld_v16(addr);
  if (acc) {
    w[0] = x.x, w[1] = x.y, w[2] = x.z, w[3] = x.w;
    if (lpw == 2) {
      cco_impl_v16 y = cco_impl_ld_v16(addr + 16u);
      w[4] = y.x, w[5] = y.y, w[6] = y.z, w[7] = y.w;
    }
    return;
  }
  CCO_IMPL_UNROLL_ for (int l = 0; l < 8; l++) {
    if (l < 4 * lpw) w[l] = cco_impl_coll_lane(cco_impl_v16_word(x, l / lpw), l, dt);
  }
}

CCO_DEVICE_INLINE void cco_impl_hier_st_group(uint64_t addr, int acc, ccoDataType_t dt, const uint32_t* w,
                                              uint32_t align) {
  const int lpw = cco_impl_coll_lanes_per_word(dt);
  if (acc) {
    cco_impl_st_v16(addr, cco_impl_v16_make(w), 16);
    if (lpw == 2) cco_impl_st_v16(addr + 16u, cco_impl_v16_make(w + 4), 16);
    return;
  }
  uint32_t p[4];
  CCO_IMPL_UNROLL_ for (int m = 0; m < 4; m++) p[m] = cco_impl_coll_pack(w, m, dt);
  cco_impl_st_v16(addr, cco_impl_v16_make(p), align);
}

CCO_DEVICE_INLINE uint32_t cco_impl_hier_ld_elem(uint64_t addr, int acc, ccoDataType_t dt) {
  return cco_impl_coll_ld_elem(addr, acc ? ccoFloat32 : dt); /* fp32: the raw word */
}

CCO_DEVICE_INLINE void cco_impl_hier_st_elem(uint64_t addr, int acc, ccoDataType_t dt, uint32_t v) {
  cco_impl_coll_st_elem(addr, v, acc ? ccoFloat32 : dt);
}

/* Thread tid of nthr takes groups tid, tid + nthr, ...; sources are reduced
 * in order, the result stored to every destination from dstFirst on. */
CCO_DEVICE_INLINE void cco_impl_hier_reduce(const cco_impl_hier_span* s, ccoDataType_t dt, ccoRedOp_t op,
                                            uint32_t tid, uint32_t nthr) {
  const uint32_t es = cco_impl_coll_es(dt), per = 16u / es;
  const uint32_t ses = s->srcAcc ? 4u : es, des = s->dstAcc ? 4u : es;
  const uint64_t head = s->head < s->n ? s->head : s->n;
  const uint64_t groups = (s->n - head) / per, tailFirst = head + groups * per;
  for (uint64_t i = tid; i < head + (s->n - tailFirst); i += nthr) {
    uint64_t e = i < head ? i : tailFirst + (i - head);
    uint32_t acc = cco_impl_hier_ld_elem(s->src + e * ses, s->srcAcc, dt);
    for (int32_t k = 1; k < s->nSrc; k++)
      acc = cco_impl_coll_op(acc, cco_impl_hier_ld_elem(s->src + (uint64_t)k * s->srcStride + e * ses, s->srcAcc, dt),
                             dt, op);
    for (int32_t j = 0; j < s->nDst; j++) {
      int32_t d = s->dstFirst + j >= s->nDst ? s->dstFirst + j - s->nDst : s->dstFirst + j;
      cco_impl_hier_st_elem(s->dst + (uint64_t)d * s->dstStride + e * des, s->dstAcc, dt, acc);
    }
  }
  const uint64_t src0 = s->src + head * ses, dst0 = s->dst + head * des;
  uint64_t low = dst0 | 16u;
  const uint32_t align = s->dstAcc ? 16u : (uint32_t)(low & (~low + 1u)); /* lowest set bit: 2 .. 16 */
  for (uint64_t v = tid; v < groups; v += nthr) {
    uint32_t acc[8] = {0}, x[8] = {0};
    cco_impl_hier_ld_group(src0 + v * per * ses, s->srcAcc, dt, acc);
    for (int32_t k = 1; k < s->nSrc; k++) {
      cco_impl_hier_ld_group(src0 + (uint64_t)k * s->srcStride + v * per * ses, s->srcAcc, dt, x);
      CCO_IMPL_UNROLL_ for (int l = 0; l < 8; l++) {
        if ((uint32_t)l < per) acc[l] = cco_impl_coll_op(acc[l], x[l], dt, op);
      }
    }
    for (int32_t j = 0; j < s->nDst; j++) {
      int32_t d = s->dstFirst + j >= s->nDst ? s->dstFirst + j - s->nDst : s->dstFirst + j;
      cco_impl_hier_st_group(dst0 + (uint64_t)d * s->dstStride + v * per * des, s->dstAcc, dt, acc, align);
    }
  }
}

CCO_DEVICE_INLINE void cco_impl_hier_reduce_typed(const cco_impl_hier_span* s, ccoDataType_t dt, ccoRedOp_t op,
                                                  uint32_t tid, uint32_t nthr) {
#define CCO_IMPL_HIER_BODY_(D, O) cco_impl_hier_reduce(s, D, O, tid, nthr)
  CCO_IMPL_COLL_DISPATCH(dt, op, CCO_IMPL_HIER_BODY_);
#undef CCO_IMPL_HIER_BODY_
}

/* ------------------------------------------------------------ the rail */

/* One call of one part, as the rail sees it. */
typedef struct {
  cco_impl_coll_ctx c;
  ccoGda g;
  int32_t H, hr;     /* rail size (the hosts) and this rank's rail rank */
  uint64_t partOff;  /* the part's region: offset in the scratch window */
  uint64_t partAddr; /* and its local address */
  uint64_t stageOff; /* staging, from the region's start */
  uint64_t use;      /* uses of the part so far */
  uint64_t crossUse; /* all-to-all's uses of the part so far */
} cco_impl_hier;

/* Whether the device communicator and the scratch can carry this call:
 * hosts of equal size (a full rail), GDA to the rail peers with the signals
 * of every part, and the scratch of cco_impl_hier_scratch_bytes. On one
 * host nothing of GDA is needed. */
CCO_DEVICE_INLINE int cco_impl_hier_init(cco_impl_hier* h, const ccoDevComm* dc) {
  ccoTeam rail = dc->teams[ccoTeamRail];
  h->H = rail.nRanks;
  h->hr = rail.rank;
  h->g = ccoGdaHandle(dc, 0, ccoGdaDoorbellImmediate);
  h->stageOff = cco_impl_hier_stage_off(h->H);
  uint64_t need = cco_impl_hier_scratch_bytes(dc->lsaSize, h->H, h->c.nParts);
  if (h->H != dc->nNodes || !cco_impl_coll_scratch_ok(&h->c, need)) return 0;
  if (h->H > 1 && (!h->g.dev || !h->g.ctx || dc->gdaSignalCount < h->c.nParts * (uint32_t)h->H)) return 0;
  h->partOff = h->c.a.scratchOff + cco_impl_hier_base(dc->lsaSize) + (uint64_t)h->c.part * cco_impl_hier_part_bytes(h->H);
  h->partAddr = (uint64_t)(uintptr_t)ccoGetLocalPtr(h->c.a.scratchWin, h->partOff);
  h->use = *(const volatile uint64_t*)(uintptr_t)h->partAddr;
  h->crossUse = *(const volatile uint64_t*)(uintptr_t)(h->partAddr + 8u);
  return 1;
}

/* What this rank sends each rail peer in one use: `bytes` of srcWin at
 * srcOff + j x srcPerPeer (j: the peer's rail rank) into dstWin at dstOff
 * of the peer; or the 8-byte `value` carried in the descriptor (isValue);
 * or, with 0 bytes, the signal alone. Either way the peer's signal (part,
 * this rail rank) gets +1 once the data is there. */
typedef struct {
  ccoWindow_t dstWin, srcWin;
  uint64_t dstOff, srcOff, srcPerPeer, bytes, value;
  int32_t isValue;
} cco_impl_hier_send;

CCO_DEVICE_INLINE cco_impl_hier_send cco_impl_hier_send_of(ccoWindow_t dstWin, uint64_t dstOff, ccoWindow_t srcWin,
                                                           uint64_t srcOff, uint64_t bytes) {
  cco_impl_hier_send m;
  m.dstWin = dstWin, m.dstOff = dstOff, m.srcWin = srcWin, m.srcOff = srcOff;
  m.srcPerPeer = 0, m.bytes = bytes, m.value = 0, m.isValue = 0;
  return m;
}

/* Thread 0 posts the use to every rail peer (the next one first), after a
 * block sync that orders every thread's stores to the sources before the
 * puts. Returns thread 0's status (the others' is success). */
CCO_DEVICE_INLINE ccoDevStatus_t cco_impl_hier_post(const cco_impl_hier* h, const cco_impl_hier_send* m) {
  ccoCoopSync(ccoCoopBlock);
  ccoDevStatus_t st = ccoDevSuccess;
  if (h->c.tid != 0) return st;
  ccoGdaSignalSpec sig = ccoGdaSigInc(h->c.part * (uint32_t)h->H + (uint32_t)h->hr);
  for (int32_t i = 1; i < h->H && st == ccoDevSuccess; i++) {
    int32_t j = (h->hr + i) % h->H;
    int peer = ccoDevTeamRankToWorld(h->c.dc, ccoTeamRail, j);
    if (m->isValue)
      st = ccoGdaPutValue(&h->g, peer, m->dstWin, m->dstOff, m->value, 8, sig, CCO_GDA_NO_COUNTER, ccoCoopThread,
                          ccoGdaThreadAggregate);
    else if (m->bytes)
      st = ccoGdaPut(&h->g, peer, m->dstWin, m->dstOff, m->srcWin, m->srcOff + (uint64_t)j * m->srcPerPeer,
                     m->bytes, sig, CCO_GDA_NO_COUNTER, ccoCoopThread, ccoGdaThreadAggregate);
    else
      st = ccoGdaSignal(&h->g, peer, sig, ccoCoopThread);
  }
  return st;
}

/* Thread 0 waits until every rail peer's signal reached use e; every
 * thread gets the status (`st`: thread 0's post, which skips the wait when
 * it failed). */
CCO_DEVICE_INLINE ccoDevStatus_t cco_impl_hier_wait(const cco_impl_hier* h, uint64_t e, ccoDevStatus_t st) {
  if (h->c.tid == 0) {
    uint32_t sig0 = h->c.part * (uint32_t)h->H;
    for (int32_t j = 0; j < h->H && st == ccoDevSuccess; j++)
      if (j != h->hr) st = ccoGdaWaitSignal(&h->g, sig0 + (uint32_t)j, e, CCO_COLL_TIMEOUT_NS, ccoCoopThread);
  }
  return (ccoDevStatus_t)cco_impl_coop_broadcast3((int)ccoCoopBlock, h->c.tid, (uint32_t)st);
}

/* Use e: post, then wait for the rail. */
CCO_DEVICE_INLINE ccoDevStatus_t cco_impl_hier_exchange(const cco_impl_hier* h, uint64_t e,
                                                        const cco_impl_hier_send* m) {
  return cco_impl_hier_wait(h, e, cco_impl_hier_post(h, m));
}

/* The signature header: use 1 of a call that has one (and of every call of
 * the blocks that write into the rail peers' buffers: receiving it says the
 * peer has entered the call, so its outputs are free). *agree: every rail
 * peer sent this rank's signature (when there is one), and this rank is ok. */
CCO_DEVICE_INLINE ccoDevStatus_t cco_impl_hier_verdict(cco_impl_hier* h, int ok, int* agree) {
  uint64_t sig = h->c.a.signature, e = ++h->use;
  uint64_t hdr = CCO_IMPL_HIER_HDR_OFF + ((e & 1u) * (uint64_t)h->H) * 8u;
  cco_impl_hier_send m = cco_impl_hier_send_of(h->c.a.scratchWin, h->partOff + hdr + (uint64_t)h->hr * 8u,
                                               h->c.a.scratchWin, 0, 8);
  m.isValue = 1, m.value = ok ? sig : 0;
  ccoDevStatus_t st = cco_impl_hier_exchange(h, e, &m);
  int bad = !ok;
  if (st == ccoDevSuccess) {
    for (int32_t j = (int32_t)h->c.tid; j < h->H; j += (int32_t)h->c.nthr)
      if (j != h->hr && sig) bad |= *(const volatile uint64_t*)(uintptr_t)(h->partAddr + hdr + (uint64_t)j * 8u) != sig;
    bad = cco_impl_block_any((uint32_t)bad);
  }
  *agree = !bad;
  return st;
}

/* Stores the use counter back: the next call of this part reads it (after
 * the closing LSA barrier in a persistent kernel, the kernel boundary
 * otherwise). */
CCO_DEVICE_INLINE void cco_impl_hier_save(const cco_impl_hier* h) {
  ccoCoopSync(ccoCoopBlock);
  if (h->c.tid == 0) {
    *(volatile uint64_t*)(uintptr_t)h->partAddr = h->use;
    *(volatile uint64_t*)(uintptr_t)(h->partAddr + 8u) = h->crossUse;
  }
}

/* ------------------------------------------------------------ all-reduce */

/* The chunks of this part: its share of the buffer's 16-byte units, cut
 * into chunks of lsaSize slices that each fit a staging slot. */
CCO_DEVICE_INLINE ccoDevStatus_t cco_impl_hier_allreduce_work(cco_impl_hier* h) {
  const cco_impl_coll_ctx* c = &h->c;
  cco_impl_coll_grid g = cco_impl_coll_grid_of(c->send, c->a.count, c->es);
  const uint64_t per = g.per, L = (uint64_t)c->n;
  const uint64_t chunkUnits = CCO_IMPL_HIER_SLOT_BYTES / (4u * per) * L;
  const uint64_t pu0 = g.units * c->part / c->nParts, pu1 = g.units * (c->part + 1u) / c->nParts;
  ccoDevStatus_t st = ccoDevSuccess;
  for (uint64_t cu0 = pu0; cu0 < pu1 && st == ccoDevSuccess; cu0 += chunkUnits) {
    uint64_t cu1 = cu0 + chunkUnits < pu1 ? cu0 + chunkUnits : pu1, nu = cu1 - cu0;
    uint64_t su0 = cu0 + nu * (uint64_t)c->me / L, su1 = cu0 + nu * ((uint64_t)c->me + 1u) / L;
    uint64_t first = cco_impl_coll_grid_elem(&g, su0), last = su1 == g.units ? g.n : cco_impl_coll_grid_elem(&g, su1);
    uint64_t n = last - first, idx0 = first + g.shift - su0 * per; /* first's place in the slot */
    uint64_t e = ++h->use, row = h->stageOff + (e & 1u) * (uint64_t)h->H * CCO_IMPL_HIER_SLOT_BYTES;
    uint64_t mine = row + (uint64_t)h->hr * CCO_IMPL_HIER_SLOT_BYTES;
    cco_impl_hier_span s;
    s.n = n;
    s.head = (per - idx0 % per) % per;
    /* 1: slice `me` of every LSA peer's input into this rank's slot. */
    s.src = c->sendPeer0 + first * c->es, s.srcStride = c->sendStride, s.nSrc = c->n, s.srcAcc = 0;
    s.dst = h->partAddr + mine + idx0 * 4u, s.dstStride = 0, s.nDst = 1, s.dstFirst = 0, s.dstAcc = 1;
    cco_impl_hier_reduce_typed(&s, c->dt, c->op, c->tid, c->nthr);
    /* 2: the slot to the rail (an empty slice sends its signal alone),
     * then the rail's slots in rail order. */
    uint64_t off = h->partOff + mine + (n ? idx0 * 4u : 0u);
    cco_impl_hier_send m = cco_impl_hier_send_of(c->a.scratchWin, off, c->a.scratchWin, off, n * 4u);
    st = cco_impl_hier_exchange(h, e, &m);
    if (st != ccoDevSuccess) break;
    /* 3: into slice `me` of every LSA peer's output, the next rank first. */
    s.src = h->partAddr + row + idx0 * 4u, s.srcStride = CCO_IMPL_HIER_SLOT_BYTES, s.nSrc = h->H, s.srcAcc = 1;
    s.dst = c->recvPeer0 + first * c->es, s.dstStride = c->recvStride, s.nDst = c->n;
    s.dstFirst = (c->me + 1) % c->n, s.dstAcc = 0;
    cco_impl_hier_reduce_typed(&s, c->dt, c->op, c->tid, c->nthr);
  }
  return st;
}

/* ---------------------------------------------------------- reduce-scatter */

/* Elements [*f0, *f1) of n: part p's piece (the same on every rank, so a
 * receiver knows what the sender's part sent). */
CCO_DEVICE_INLINE void cco_impl_hier_piece(const cco_impl_coll_ctx* c, uint64_t n, uint64_t* f0, uint64_t* f1) {
  *f0 = n * c->part / c->nParts;
  *f1 = n * (c->part + 1u) / c->nParts;
}


/*
 * Reduce-scatter: every rank's output is block `rank` (world rank) of the
 * inputs, reduced. Per part and chunk (element ranges, the same in every
 * block), this rank reduces, over its host's inputs (LSA pull), the chunk
 * of block w for every member w of its rail: its own into its in slot, the
 * others' into out slot j, which goes to rail peer j's in slot for this
 * rank. Then it reduces its in slots in rail order into its output. Only
 * this rank reads block `rank` of its host's inputs, before it writes its
 * output, so the in place form (the output is that block) is safe.
 *
 * A slot's element e of the chunk sits at index e + pad, pad being the
 * block's 16-byte misalignment there, so the accumulators of whole groups
 * are aligned; a put covers the slot from index 0, up to per - 1 words
 * nobody reads included, since each peer's block has its own pad.
 */
CCO_DEVICE_INLINE ccoDevStatus_t cco_impl_hier_reducescatter_work(cco_impl_hier* h) {
  const cco_impl_coll_ctx* c = &h->c;
  const uint64_t es = c->es, per = 16u / es, bytes = c->bytes, slot = CCO_IMPL_HIER_SLOT_BYTES;
  const uint64_t chunk = slot / 4u - per, mine = (uint64_t)c->dc->rank * bytes;
  const uint64_t out = c->send == c->recv ? c->send + mine : c->recv;
  uint64_t f0, f1;
  cco_impl_hier_piece(c, c->a.count, &f0, &f1);
  ccoDevStatus_t st = ccoDevSuccess;
  for (uint64_t c0 = f0; c0 < f1 && st == ccoDevSuccess; c0 += chunk) {
    uint64_t n = f1 - c0 < chunk ? f1 - c0 : chunk, e = ++h->use;
    uint64_t in = h->stageOff + (e & 1u) * (uint64_t)h->H * slot, outs = in + 2u * (uint64_t)h->H * slot;
    cco_impl_hier_span s;
    s.n = n, s.srcStride = c->sendStride, s.nSrc = c->n, s.srcAcc = 0;
    s.dstStride = 0, s.nDst = 1, s.dstFirst = 0, s.dstAcc = 1;
    for (int32_t j = 0; j < h->H; j++) {
      uint64_t blk = (uint64_t)ccoDevTeamRankToWorld(c->dc, ccoTeamRail, j) * bytes + c0 * es;
      uint64_t pad = ((c->send + blk) & 15u) / es;
      s.src = c->sendPeer0 + blk;
      s.dst = h->partAddr + (j == h->hr ? in + (uint64_t)j * slot : outs + (uint64_t)j * slot) + pad * 4u;
      s.head = (per - pad) % per;
      cco_impl_hier_reduce_typed(&s, c->dt, c->op, c->tid, c->nthr);
    }
    cco_impl_hier_send m = cco_impl_hier_send_of(c->a.scratchWin, h->partOff + in + (uint64_t)h->hr * slot,
                                                 c->a.scratchWin, h->partOff + outs, n ? (n + per - 1u) * 4u : 0);
    m.srcPerPeer = slot;
    st = cco_impl_hier_exchange(h, e, &m);
    if (st != ccoDevSuccess) break;
    uint64_t pad = ((c->send + mine + c0 * es) & 15u) / es;
    s.src = h->partAddr + in + pad * 4u, s.srcStride = slot, s.nSrc = h->H, s.srcAcc = 1;
    s.dst = out + c0 * es, s.dstAcc = 0, s.head = (per - pad) % per;
    cco_impl_hier_reduce_typed(&s, c->dt, c->op, c->tid, c->nthr);
  }
  return st;
}

/* ------------------------------------------------- all-gather, broadcast */

/* All-gather: this part's piece of the input goes to block `rank` (world
 * rank) of every rail peer's output by GDA and of every LSA peer's by LSA
 * push; once the rail's pieces are here, this rank pushes each of them on
 * to its LSA peers. Every block of every output is written by one rank. */
CCO_DEVICE_INLINE ccoDevStatus_t cco_impl_hier_allgather_work(cco_impl_hier* h) {
  const cco_impl_coll_ctx* c = &h->c;
  const uint64_t es = c->es, bytes = c->bytes, mine = (uint64_t)c->dc->rank * bytes;
  int inPlace = c->send == c->recv || c->send == c->recv + mine;
  uint64_t f0, f1;
  cco_impl_hier_piece(c, c->a.count, &f0, &f1);
  uint64_t pb = f0 * es, pn = f1 - f0, src = (inPlace ? c->recv + mine : c->send) + pb;
  uint64_t e = ++h->use;
  cco_impl_hier_send m =
      cco_impl_hier_send_of(c->a.recvWin, c->a.recvOff + mine + pb, inPlace ? c->a.recvWin : c->a.sendWin,
                            (inPlace ? c->a.recvOff + mine : c->a.sendOff) + pb, pn * es);
  ccoDevStatus_t st = cco_impl_hier_post(h, &m);
  cco_impl_coll_span s = cco_impl_coll_span_make(src, 0, 1, c->recvPeer0 + mine + pb, c->recvStride, c->n,
                                                 (c->me + 1) % c->n, inPlace ? c->me : -1, pn);
  cco_impl_coll_copy(&s, c->es, c->tid, c->nthr);
  st = cco_impl_hier_wait(h, e, st);
  for (int32_t i = 1; i < h->H && st == ccoDevSuccess; i++) {
    uint64_t blk = (uint64_t)ccoDevTeamRankToWorld(c->dc, ccoTeamRail, (h->hr + i) % h->H) * bytes + pb;
    s = cco_impl_coll_span_make(c->recv + blk, 0, 1, c->recvPeer0 + blk, c->recvStride, c->n, (c->me + 1) % c->n,
                                c->me, pn);
    cco_impl_coll_copy(&s, c->es, c->tid, c->nthr);
  }
  return st;
}

/* Broadcast from world rank `root`: on the root's host every rank pulls
 * from the root's input (as on one host); the root puts it into its rail
 * peers' outputs, and each of them pushes it on to its LSA peers. The
 * other members of the root's rail send their signals alone, so that every
 * rail member's uses stay in step; the other rails skip the use. */
CCO_DEVICE_INLINE ccoDevStatus_t cco_impl_hier_broadcast_work(cco_impl_hier* h) {
  const cco_impl_coll_ctx* c = &h->c;
  const int32_t root = c->a.root, rootLsa = ccoDevTeamRankFromWorld(c->dc, ccoTeamLsa, root);
  uint64_t f0, f1;
  cco_impl_hier_piece(c, c->a.count, &f0, &f1);
  uint64_t pb = f0 * c->es, pn = f1 - f0;
  cco_impl_coll_span s;
  if (rootLsa >= 0 && !(c->dc->rank == root && c->send == c->recv)) {
    s = cco_impl_coll_span_make(c->sendPeer0 + (uint64_t)rootLsa * c->sendStride + pb, 0, 1, c->recv + pb, 0, 1, 0,
                                -1, pn);
    cco_impl_coll_copy(&s, c->es, c->tid, c->nthr);
  }
  if (h->H < 2 || ccoDevTeamRankFromWorld(c->dc, ccoTeamRail, root) < 0) return ccoDevSuccess;
  uint64_t e = ++h->use;
  cco_impl_hier_send m = cco_impl_hier_send_of(c->a.recvWin, c->a.recvOff + pb, c->a.sendWin, c->a.sendOff + pb,
                                               c->dc->rank == root ? pn * c->es : 0);
  ccoDevStatus_t st = cco_impl_hier_exchange(h, e, &m);
  if (st == ccoDevSuccess && rootLsa < 0) {
    s = cco_impl_coll_span_make(c->recv + pb, 0, 1, c->recvPeer0 + pb, c->recvStride, c->n, (c->me + 1) % c->n, c->me,
                                pn);
    cco_impl_coll_copy(&s, c->es, c->tid, c->nthr);
  }
  return st;
}

/* ------------------------------------------------------------- all-to-all */

/*
 * All-to-all: block d of the input goes to block `rank` of world rank d's
 * output, by LSA push when d is on this host, by a GDA put straight into
 * d's output otherwise (the cross-node team, not the rail: every pair of
 * hosts' ranks exchanges its own blocks). The rail header before it says
 * every rank of every host has entered the call: a rail peer sends it only
 * after its host's LSA barrier. Each put adds 1 to the receiver's signal of
 * (part, sender); every pair moves once per call, so the part's own count
 * of all-to-all calls is what each signal must reach.
 */
CCO_DEVICE_INLINE ccoDevStatus_t cco_impl_hier_alltoall_work(cco_impl_hier* h) {
  const cco_impl_coll_ctx* c = &h->c;
  const ccoDevComm* dc = c->dc;
  const int32_t W = dc->worldSize;
  const uint64_t es = c->es, bytes = c->bytes, mine = (uint64_t)dc->rank * bytes;
  const uint32_t sig0 = c->nParts * (uint32_t)h->H + c->part * (uint32_t)W;
  uint64_t f0, f1;
  cco_impl_hier_piece(c, c->a.count, &f0, &f1);
  uint64_t pb = f0 * es, pn = f1 - f0, e = ++h->crossUse;
  ccoDevStatus_t st = ccoDevSuccess;
  ccoCoopSync(ccoCoopBlock);
  if (c->tid == 0 && h->H > 1) {
    ccoGdaSignalSpec sig = ccoGdaSigInc(sig0 + (uint32_t)dc->rank);
    for (int32_t i = 1; i < W && st == ccoDevSuccess; i++) {
      int32_t d = (dc->rank + i) % W;
      if (ccoDevTeamRankFromWorld(dc, ccoTeamLsa, d) >= 0) continue;
      uint64_t blk = (uint64_t)d * bytes + pb;
      st = pn ? ccoGdaPut(&h->g, d, c->a.recvWin, c->a.recvOff + mine + pb, c->a.sendWin, c->a.sendOff + blk,
                          pn * es, sig, CCO_GDA_NO_COUNTER, ccoCoopThread, ccoGdaThreadAggregate)
              : ccoGdaSignal(&h->g, d, sig, ccoCoopThread);
    }
  }
  for (int32_t j = 1; j <= c->n; j++) {
    int32_t l = (c->me + j) % c->n, d = ccoDevTeamRankToWorld(dc, ccoTeamLsa, l);
    cco_impl_coll_span s = cco_impl_coll_span_make(c->send + (uint64_t)d * bytes + pb, 0, 1,
                                                   c->recvPeer0 + (uint64_t)l * c->recvStride + mine + pb, 0, 1, 0,
                                                   -1, pn);
    cco_impl_coll_copy(&s, c->es, c->tid, c->nthr);
  }
  if (c->tid == 0 && h->H > 1) {
    for (int32_t w = 0; w < W && st == ccoDevSuccess; w++)
      if (ccoDevTeamRankFromWorld(dc, ccoTeamLsa, w) < 0)
        st = ccoGdaWaitSignal(&h->g, sig0 + (uint32_t)w, e, CCO_COLL_TIMEOUT_NS, ccoCoopThread);
  }
  return (ccoDevStatus_t)cco_impl_coop_broadcast3((int)ccoCoopBlock, c->tid, (uint32_t)st);
}

/* ------------------------------------------------------------- drivers */

typedef enum {
  cco_impl_hier_allreduce = 0,
  cco_impl_hier_allgather,
  cco_impl_hier_reducescatter,
  cco_impl_hier_broadcast,
  cco_impl_hier_alltoall,
} cco_impl_hier_kind;

/* This rank's arguments, with the world's sizes: all-gather's output and
 * reduce-scatter's input hold worldSize blocks (by world rank), broadcast's
 * root is a world rank. */
CCO_DEVICE_INLINE int cco_impl_hier_args_ok(cco_impl_coll_ctx* c, cco_impl_hier_kind kind) {
  const ccoCollArgs* a = &c->a;
  if (kind == cco_impl_hier_allreduce) return cco_impl_coll_args_ok(c, cco_impl_coll_oneshot);
  uint64_t total, mine;
  if (!c->es || !a->sendWin || !a->recvWin || !cco_impl_coll_mul(a->count, c->es, &c->bytes) ||
      !cco_impl_coll_mul(c->bytes, (uint64_t)c->dc->worldSize, &total))
    return 0;
  mine = (uint64_t)c->dc->rank * c->bytes;
  if (kind == cco_impl_hier_alltoall) /* pushes into blocks peers still send from: never in place */
    return cco_impl_coll_in_window(a->sendWin, a->sendOff, total, c->es) &&
           cco_impl_coll_in_window(a->recvWin, a->recvOff, total, c->es) &&
           !cco_impl_coll_overlap(c->send, total, c->recv, total);
  if (kind == cco_impl_hier_reducescatter)
    return a->op < (uint32_t)ccoNumRedOps && cco_impl_coll_in_window(a->sendWin, a->sendOff, total, c->es) &&
           cco_impl_coll_in_window(a->recvWin, a->recvOff, c->bytes, c->es) &&
           (c->send == c->recv || c->recv == c->send + mine || !cco_impl_coll_overlap(c->send, total, c->recv, c->bytes));
  if (!cco_impl_coll_in_window(a->sendWin, a->sendOff, c->bytes, c->es)) return 0;
  if (kind == cco_impl_hier_allgather)
    return cco_impl_coll_in_window(a->recvWin, a->recvOff, total, c->es) &&
           (c->send == c->recv || c->send == c->recv + mine || !cco_impl_coll_overlap(c->send, c->bytes, c->recv, total));
  return a->root >= 0 && a->root < c->dc->worldSize && cco_impl_coll_in_window(a->recvWin, a->recvOff, c->bytes, c->es) &&
         (c->dc->rank != a->root || c->send == c->recv || !cco_impl_coll_overlap(c->send, c->bytes, c->recv, c->bytes));
}

/* Every hierarchical block: the LSA frame (barrier and the host's signature
 * check), the rail's verdict, the work of `kind` (a constant in each public
 * function), a flush (this rank's puts have landed, so no peer reads its
 * buffers once the call returns and the communicator may go), the closing
 * LSA barrier. The all-reduce writes only into the scratch over the rail,
 * so without a signature it skips the verdict; the others write into the
 * rail peers' outputs and always wait for it: the peers have then entered
 * the call (reduce-scatter too, so as not to depend on which it is). */
CCO_DEVICE_INLINE ccoDevStatus_t cco_impl_coll_hier_run(const ccoDevComm* dc, const ccoCollArgs* a, uint32_t part,
                                                        uint32_t nParts, cco_impl_hier_kind kind) {
  cco_impl_hier h;
  if (!cco_impl_coll_ctx_init(&h.c, dc, a, part, nParts)) return ccoDevInvalid;
  if (h.c.a.barrierBase >= dc->lsaBarrierCount || nParts > dc->lsaBarrierCount - h.c.a.barrierBase)
    return ccoDevInvalid;
  int ok = cco_impl_hier_args_ok(&h.c, kind);
  int ready = cco_impl_hier_init(&h, dc); /* the same on every rank of a well-formed communicator */
  /* All-to-all's signals follow the rail's. */
  if (kind == cco_impl_hier_alltoall && h.H > 1 &&
      dc->gdaSignalCount < nParts * (uint32_t)(h.H + dc->worldSize))
    ready = 0;
  if (h.c.a.signature == 0 && h.c.a.count == 0) return ok && ready ? ccoDevSuccess : ccoDevInvalid;
  cco_impl_coll_frame f;
  cco_impl_coll_open(&f, &h.c, ok && ready);
  int workOk = 1;
  ccoDevStatus_t st = ccoDevSuccess;
  if (f.st == ccoDevSuccess && ready) {
    int agree = f.proceed;
    if (h.c.a.signature != 0 || kind != cco_impl_hier_allreduce) st = cco_impl_hier_verdict(&h, f.proceed, &agree);
    if (st == ccoDevSuccess && agree) {
      switch (kind) {
        case cco_impl_hier_allreduce: st = cco_impl_hier_allreduce_work(&h); break;
        case cco_impl_hier_allgather: st = cco_impl_hier_allgather_work(&h); break;
        case cco_impl_hier_reducescatter: st = cco_impl_hier_reducescatter_work(&h); break;
        case cco_impl_hier_broadcast: st = cco_impl_hier_broadcast_work(&h); break;
        case cco_impl_hier_alltoall: st = cco_impl_hier_alltoall_work(&h); break;
      }
    }
    if (st == ccoDevSuccess && h.H > 1) st = ccoGdaFlush(&h.g, ccoCoopBlock);
    cco_impl_hier_save(&h);
    workOk = agree;
  }
  ccoDevStatus_t closed = cco_impl_coll_close(&f, &h.c, workOk);
  return st != ccoDevSuccess ? st : closed;
}

#endif /* CCO_DEVICE_IMPL_COLL_HIER_IMPL_H_ */
