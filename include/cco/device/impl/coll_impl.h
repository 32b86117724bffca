/*
 * Private: the collectives' device building blocks behind cco/cco_coll.h:
 * the scratch layout, argument checks, the barrier frame every block but LL
 * runs in (with the signature check), and each collective's share of work.
 * Names start with cco_impl_ and may change in any release.
 */
#include "cco/cco_coll.h"

#ifndef CCO_DEVICE_IMPL_COLL_IMPL_H_
#define CCO_DEVICE_IMPL_COLL_IMPL_H_

#include <stdint.h>

#include "cco/cco_coll_types.h"
#include "cco/cco_device.h"

/* ---------------------------------------------------------- scratch layout */
/*
 * Each rank's scratch area (ccoCollArgs.scratchWin at scratchOff, 16-byte
 * aligned, zeroed once):
 *
 *   [0, 1024)     signature slots: {signature, ok} (2 x uint64) per part,
 *                 CCO_COLL_MAX_PARTS of them; peers read them after the
 *                 first barrier
 *   [1024, 1536)  LL epochs: a uint32 per LL chunk (128 chunks of 512 bytes)
 *   [4096, ...)   LL staging: [epoch parity 2][source LSA rank][8192 line
 *                 pairs of 16 bytes]: 4 x lsaSize x CCO_COLL_LL_MAX_BYTES
 *   then          one-shot staging (4096-aligned): [epoch parity 2]
 *                 {signature, ok} per part, a uint32 use count per chunk of
 *                 16 KiB (cco_impl_coll_oneshot_staged), then per parity a buffer of
 *                 CCO_COLL_ONESHOT_STAGE_BYTES + 4096 (an input is staged at
 *                 its own address modulo 16, so the copies line up)
 *
 * The layout depends on lsaSize only, so calls with any nParts share it.
 */
#define CCO_IMPL_COLL_SIG_OFF 0u
#define CCO_IMPL_COLL_SIG_BYTES (CCO_COLL_MAX_PARTS * 16u)
#define CCO_IMPL_COLL_LL_CHUNK_PAIRS 64u /* 512 data bytes a chunk */
#define CCO_IMPL_COLL_LL_CHUNKS (CCO_COLL_LL_MAX_BYTES / (8u * CCO_IMPL_COLL_LL_CHUNK_PAIRS))
#define CCO_IMPL_COLL_EPOCH_OFF 1024u
#define CCO_IMPL_COLL_LL_OFF 4096u
#define CCO_IMPL_COLL_STAGE_SLOTS_BYTES 4096u /* slots, then the chunks' use counts */
#define CCO_IMPL_COLL_STAGE_USES_OFF (2u * CCO_COLL_MAX_PARTS * 16u)
#define CCO_IMPL_COLL_STAGE_CHUNK_UNITS 1024u /* 16 KiB */
#define CCO_IMPL_COLL_STAGE_CHUNKS (CCO_COLL_ONESHOT_STAGE_BYTES / (16u * CCO_IMPL_COLL_STAGE_CHUNK_UNITS) + 1u)
#define CCO_IMPL_COLL_STAGE_BUF_BYTES ((uint64_t)CCO_COLL_ONESHOT_STAGE_BYTES + 4096u)

#include "cco/device/impl/coll_reduce_impl.h"
#include "cco/device/impl/coll_ll_impl.h"

#if defined(__cplusplus)
static_assert(CCO_IMPL_COLL_SIG_OFF + CCO_IMPL_COLL_SIG_BYTES <= CCO_IMPL_COLL_EPOCH_OFF, "scratch layout");
static_assert(CCO_IMPL_COLL_EPOCH_OFF + 4u * CCO_IMPL_COLL_LL_CHUNKS <= CCO_IMPL_COLL_LL_OFF, "scratch layout");
static_assert(CCO_IMPL_COLL_STAGE_USES_OFF + 4u * CCO_IMPL_COLL_STAGE_CHUNKS <= CCO_IMPL_COLL_STAGE_SLOTS_BYTES,
              "scratch layout");
#else
_Static_assert(CCO_IMPL_COLL_SIG_OFF + CCO_IMPL_COLL_SIG_BYTES <= CCO_IMPL_COLL_EPOCH_OFF, "scratch layout");
_Static_assert(CCO_IMPL_COLL_EPOCH_OFF + 4u * CCO_IMPL_COLL_LL_CHUNKS <= CCO_IMPL_COLL_LL_OFF, "scratch layout");
_Static_assert(CCO_IMPL_COLL_STAGE_USES_OFF + 4u * CCO_IMPL_COLL_STAGE_CHUNKS <= CCO_IMPL_COLL_STAGE_SLOTS_BYTES,
               "scratch layout");
#endif

/* Where the one-shot staging starts (its signature slots). */
CCO_HOST_DEVICE_INLINE uint64_t cco_impl_coll_stage_off(int lsaSize) {
  return CCO_IMPL_COLL_LL_OFF + 4u * (uint64_t)lsaSize * CCO_COLL_LL_MAX_BYTES;
}

CCO_HOST_DEVICE_INLINE uint64_t cco_impl_coll_scratch_bytes(int lsaSize, uint32_t nParts) {
  if (lsaSize < 1 || nParts < 1 || nParts > CCO_COLL_MAX_PARTS) return 0;
  return cco_impl_coll_stage_off(lsaSize) + CCO_IMPL_COLL_STAGE_SLOTS_BYTES + 2u * CCO_IMPL_COLL_STAGE_BUF_BYTES;
}

/* ------------------------------------------------------------ the call */

typedef enum {
  cco_impl_coll_oneshot = 0,
  cco_impl_coll_twoshot,
  cco_impl_coll_allgather,
  cco_impl_coll_reducescatter,
  cco_impl_coll_alltoall,
  cco_impl_coll_alltoallv,
  cco_impl_coll_broadcast,
} cco_impl_coll_kind;

/* One call as one block sees it. Addresses are byte addresses; LSA rank
 * p's copy of a buffer is at its *Peer0 address + p * its window's stride. */
typedef struct {
  const ccoDevComm* dc;
  ccoCollArgs a;
  ccoDataType_t dt;
  ccoRedOp_t op;
  uint32_t es, part, nParts, tid, nthr;
  int32_t me, n;
  uint64_t bytes;                /* count x es: one rank's block, or the whole buffer */
  uint64_t send, sendPeer0, sendStride;
  uint64_t recv, recvPeer0, recvStride;
} cco_impl_coll_ctx;

CCO_DEVICE_INLINE uint64_t cco_impl_coll_stride(ccoWindow_t w) { return (uint64_t)w->stride4G << 32; }

/* The parts of a call that need no peer and no check beyond null
 * pointers; 0 when the call cannot even run its barriers (every rank sees
 * the same, so all return at once). */
CCO_DEVICE_INLINE int cco_impl_coll_ctx_init(cco_impl_coll_ctx* c, const ccoDevComm* dc, const ccoCollArgs* a,
                                             uint32_t part, uint32_t nParts) {
  if (!dc || !a || nParts < 1 || nParts > CCO_COLL_MAX_PARTS || part >= nParts || dc->lsaSize < 1) return 0;
  c->dc = dc;
  c->a = *a;
  c->dt = (ccoDataType_t)c->a.dtype;
  c->op = (ccoRedOp_t)c->a.op;
  c->es = c->a.dtype < (uint32_t)ccoNumDataTypes ? cco_impl_coll_es(c->dt) : 0;
  c->part = part;
  c->nParts = nParts;
  c->tid = ccoCoopRank(ccoCoopBlock);
  c->nthr = ccoCoopSize(ccoCoopBlock);
  c->me = dc->lsaRank;
  c->n = dc->lsaSize;
  c->bytes = 0;
  c->send = c->sendPeer0 = c->sendStride = 0;
  c->recv = c->recvPeer0 = c->recvStride = 0;
  if (c->a.sendWin) {
    c->sendStride = cco_impl_coll_stride(c->a.sendWin);
    c->sendPeer0 = (uint64_t)(uintptr_t)ccoGetLsaPeerPtr(c->a.sendWin, 0, c->a.sendOff);
    c->send = c->sendPeer0 + (uint64_t)c->me * c->sendStride;
  }
  if (c->a.recvWin) {
    c->recvStride = cco_impl_coll_stride(c->a.recvWin);
    c->recvPeer0 = (uint64_t)(uintptr_t)ccoGetLsaPeerPtr(c->a.recvWin, 0, c->a.recvOff);
    c->recv = c->recvPeer0 + (uint64_t)c->me * c->recvStride;
  }
  return 1;
}

/* --------------------------------------------------------------- checks */

/* *out = x * y, 0 when it overflows. */
CCO_HOST_DEVICE_INLINE int cco_impl_coll_mul(uint64_t x, uint64_t y, uint64_t* out) {
  if (((x | y) >> 32) != 0 && y && x > UINT64_MAX / y) return 0; /* no division when both fit */
  *out = x * y;
  return 1;
}

/* [off, off + bytes) lies in the window and starts on an `align` boundary
 * (of the address: windows themselves are page aligned); align is a power
 * of two (an element size, 8 or 16). */
CCO_DEVICE_INLINE int cco_impl_coll_in_window(ccoWindow_t w, uint64_t off, uint64_t bytes, uint64_t align) {
  return w && ((w->winBase + off) & (align - 1u)) == 0 && cco_impl_window_has_range(w, (size_t)off, (size_t)bytes);
}

CCO_HOST_DEVICE_INLINE int cco_impl_coll_overlap(uint64_t x, uint64_t xn, uint64_t y, uint64_t yn) {
  return xn && yn && x < y + yn && y < x + xn;
}

/* The scratch area holds the signature slots (every block with a barrier
 * that checks signatures) or everything (LL). */
CCO_DEVICE_INLINE int cco_impl_coll_scratch_ok(const cco_impl_coll_ctx* c, uint64_t need) {
  return need && c->a.scratchBytes >= need && cco_impl_coll_in_window(c->a.scratchWin, c->a.scratchOff, c->a.scratchBytes, 16);
}

CCO_DEVICE_INLINE uint64_t cco_impl_coll_scratch_local(const cco_impl_coll_ctx* c, uint64_t off) {
  return (uint64_t)(uintptr_t)ccoGetLocalPtr(c->a.scratchWin, c->a.scratchOff + off);
}

/* Whether this rank's arguments are good for `kind`, from what it can see
 * before the first barrier. Everything but all-gather's input, reduce-
 * scatter's output and the all-to-allv tables is the same on every rank
 * (offsets, counts, windows of the same size), so the verdict usually is
 * too; where it is not, the signature check spreads it. Sets c->bytes. */
CCO_DEVICE_INLINE int cco_impl_coll_args_ok(cco_impl_coll_ctx* c, cco_impl_coll_kind kind) {
  const ccoCollArgs* a = &c->a;
  uint64_t n = (uint64_t)c->n, total;
  if (!c->es || !a->sendWin || !a->recvWin) return 0;
  if ((kind == cco_impl_coll_oneshot || kind == cco_impl_coll_twoshot || kind == cco_impl_coll_reducescatter) &&
      a->op >= (uint32_t)ccoNumRedOps)
    return 0;
  if (kind == cco_impl_coll_alltoallv) { /* the table; counts are checked when read */
    c->bytes = 0;
    return cco_impl_coll_in_window(a->sendWin, a->vTableOff, 3u * 8u * n, 8);
  }
  if (!cco_impl_coll_mul(a->count, c->es, &c->bytes) || !cco_impl_coll_mul(c->bytes, n, &total)) return 0;
  switch (kind) {
    case cco_impl_coll_oneshot:
    case cco_impl_coll_twoshot:
      /* In place is the same buffer; a partial overlap is refused. */
      return cco_impl_coll_in_window(a->sendWin, a->sendOff, c->bytes, c->es) &&
             cco_impl_coll_in_window(a->recvWin, a->recvOff, c->bytes, c->es) &&
             (c->send == c->recv || !cco_impl_coll_overlap(c->send, c->bytes, c->recv, c->bytes));
    case cco_impl_coll_allgather:
      /* The input may be this rank's own block of the output (NCCL's in
       * place), or the output itself, which means the same. */
      return cco_impl_coll_in_window(a->sendWin, a->sendOff, c->bytes, c->es) &&
             cco_impl_coll_in_window(a->recvWin, a->recvOff, total, c->es) &&
             (c->send == c->recv || c->send == c->recv + (uint64_t)c->me * c->bytes ||
              !cco_impl_coll_overlap(c->send, c->bytes, c->recv, total));
    case cco_impl_coll_reducescatter:
      /* The output may be this rank's own block of the input, or the input
       * itself, which means that block. */
      return cco_impl_coll_in_window(a->sendWin, a->sendOff, total, c->es) &&
             cco_impl_coll_in_window(a->recvWin, a->recvOff, c->bytes, c->es) &&
             (c->send == c->recv || c->recv == c->send + (uint64_t)c->me * c->bytes ||
              !cco_impl_coll_overlap(c->send, total, c->recv, c->bytes));
    case cco_impl_coll_alltoall: /* pushes into blocks peers still send from: never in place */
      return cco_impl_coll_in_window(a->sendWin, a->sendOff, total, c->es) &&
             cco_impl_coll_in_window(a->recvWin, a->recvOff, total, c->es) &&
             !cco_impl_coll_overlap(c->send, total, c->recv, total);
    case cco_impl_coll_broadcast:
      return a->root >= 0 && a->root < c->n && cco_impl_coll_in_window(a->sendWin, a->sendOff, c->bytes, c->es) &&
             cco_impl_coll_in_window(a->recvWin, a->recvOff, c->bytes, c->es) &&
             (c->me != a->root || c->send == c->recv || !cco_impl_coll_overlap(c->send, c->bytes, c->recv, c->bytes));
    default: return 0;
  }
}

/* ---------------------------------------------------------- the frame */

/*
 * Every block but LL runs between two syncs of LSA barrier
 * barrierBase + part: the first says that every peer's inputs are written
 * and its outputs free (its previous work on them is over), the second that
 * every peer is done reading this rank's inputs and writing its outputs.
 * Exactly two syncs whatever the arguments say, so that ranks which
 * disagree (or see bad arguments) still pass the same barriers and never
 * hang; only a first sync that fails (abort word, timeout) skips the second.
 *
 * With a signature, thread 0 publishes {signature, ok} in this rank's slot
 * for the part before the first barrier (the barrier's arrival publishes
 * it), and after it thread p compares LSA rank p's slot, the peer whose
 * arrival it waited for. Every rank reads every slot, so all of them see
 * the same mismatch; a peer rewrites its slot only in its next call, after
 * the second barrier, by which time every rank has read it.
 */
typedef struct {
  ccoLsaBarrierSession bar;
  ccoDevStatus_t st; /* of the first barrier */
  int proceed;       /* 1: the barrier passed and every rank agrees */
} cco_impl_coll_frame;

CCO_DEVICE_INLINE void cco_impl_coll_open(cco_impl_coll_frame* f, const cco_impl_coll_ctx* c, int ok) {
  uint64_t sig = c->a.signature;
  int sigOk = sig && cco_impl_coll_scratch_ok(c, CCO_IMPL_COLL_SIG_OFF + CCO_IMPL_COLL_SIG_BYTES);
  uint64_t slotOff = CCO_IMPL_COLL_SIG_OFF + (uint64_t)c->part * 16u;
  if (sig && !sigOk) ok = 0; /* nowhere to publish: the same on every rank */
  f->bar = ccoLsaBarrierSessionInit(c->dc, c->a.barrierBase + c->part, ccoCoopBlock);
  if (sigOk && c->tid == 0) {
    volatile uint64_t* slot = (volatile uint64_t*)(uintptr_t)cco_impl_coll_scratch_local(c, slotOff);
    slot[0] = ok ? sig : ~sig;
    slot[1] = (uint64_t)ok;
  }
  f->st = ccoLsaBarrierSyncTimeout(&f->bar, CCO_COLL_TIMEOUT_NS);
  int bad = !ok;
  if (f->st == ccoDevSuccess && sigOk) {
    for (uint32_t p = c->tid; p < (uint32_t)c->n; p += c->nthr) {
      const volatile uint64_t* slot =
          (const volatile uint64_t*)ccoGetLsaPeerPtr(c->a.scratchWin, (int)p, c->a.scratchOff + slotOff);
      bad |= slot[0] != sig || slot[1] != 1u;
    }
    bad = cco_impl_block_any((uint32_t)bad);
  }
  f->proceed = f->st == ccoDevSuccess && !bad;
}

/* The second sync; the call's status: the first failing barrier's, else
 * ccoDevInvalid when the work did not (all) happen. */
CCO_DEVICE_INLINE ccoDevStatus_t cco_impl_coll_close(cco_impl_coll_frame* f, int workOk) {
  ccoDevStatus_t st2 = f->st == ccoDevSuccess ? ccoLsaBarrierSyncTimeout(&f->bar, CCO_COLL_TIMEOUT_NS) : f->st;
  ccoLsaBarrierSessionEnd(&f->bar);
  if (f->st != ccoDevSuccess) return f->st;
  if (st2 != ccoDevSuccess) return st2;
  return f->proceed && workOk ? ccoDevSuccess : ccoDevInvalid;
}

/* ---------------------------------------------------- the work of a part */

/* The switch on type and operator, outside the loops. */
CCO_DEVICE_INLINE void cco_impl_coll_reduce_typed(const cco_impl_coll_span* s, const cco_impl_coll_ctx* c) {
#define CCO_IMPL_REDUCE_BODY_(D, O) cco_impl_coll_reduce(s, D, O, c->tid, c->nthr)
  CCO_IMPL_COLL_DISPATCH(c->dt, c->op, CCO_IMPL_REDUCE_BODY_);
#undef CCO_IMPL_REDUCE_BODY_
}

CCO_DEVICE_INLINE cco_impl_coll_span cco_impl_coll_span_make(uint64_t src, uint64_t srcStride, int32_t nSrc, uint64_t dst,
                                                             uint64_t dstStride, int32_t nDst, int32_t dstFirst,
                                                             int32_t dstSkip, uint64_t n) {
  cco_impl_coll_span s;
  s.src = src;
  s.srcStride = srcStride;
  s.nSrc = nSrc;
  s.dst = dst;
  s.dstStride = dstStride;
  s.nDst = nDst;
  s.dstFirst = dstFirst;
  s.dstSkip = dstSkip;
  s.n = n;
  return s;
}

/* One-shot: this part's piece of every peer's input, reduced into this
 * rank's output. */
CCO_DEVICE_INLINE cco_impl_coll_span cco_impl_coll_oneshot_span(const cco_impl_coll_ctx* c) {
  uint64_t first, last;
  cco_impl_coll_grid g = cco_impl_coll_grid_of(c->send, c->a.count, c->es);
  cco_impl_coll_piece(&g, 0, g.units, c->part, c->nParts, &first, &last);
  return cco_impl_coll_span_make(c->sendPeer0 + first * c->es, c->sendStride, c->n, c->recv + first * c->es, 0, 1, 0,
                                 -1, last - first);
}

/* Two-shot: rank r owns slice r (cut on 16-byte boundaries); this part
 * reduces its piece of the slice from every peer's input and stores the
 * result straight into every peer's output. Only rank r touches slice r,
 * of anyone's buffers, so it is safe in place. */
CCO_DEVICE_INLINE cco_impl_coll_span cco_impl_coll_twoshot_span(const cco_impl_coll_ctx* c) {
  uint64_t first, last, n = (uint64_t)c->n;
  cco_impl_coll_grid g = cco_impl_coll_grid_of(c->send, c->a.count, c->es);
  uint64_t u0 = cco_impl_div_u64(g.units * (uint64_t)c->me, n), u1 = cco_impl_div_u64(g.units * ((uint64_t)c->me + 1u), n);
  cco_impl_coll_piece(&g, u0, u1, c->part, c->nParts, &first, &last);
  return cco_impl_coll_span_make(c->sendPeer0 + first * c->es, c->sendStride, c->n, c->recvPeer0 + first * c->es,
                                 c->recvStride, c->n, (c->me + 1) % c->n, -1, last - first);
}

/* Reduce-scatter (pull): this part's piece of block `me` of every peer's
 * input, reduced into this rank's output. */
CCO_DEVICE_INLINE cco_impl_coll_span cco_impl_coll_reducescatter_span(const cco_impl_coll_ctx* c) {
  uint64_t first, last, mine = (uint64_t)c->me * c->bytes;
  uint64_t dst = c->send == c->recv ? c->send + mine : c->recv;
  cco_impl_coll_grid g = cco_impl_coll_grid_of(c->send + mine, c->a.count, c->es);
  cco_impl_coll_piece(&g, 0, g.units, c->part, c->nParts, &first, &last);
  return cco_impl_coll_span_make(c->sendPeer0 + mine + first * c->es, c->sendStride, c->n, dst + first * c->es, 0, 1,
                                 0, -1, last - first);
}

/* All-gather (push): this part's piece of the input into block `me` of
 * every peer's output. */
CCO_DEVICE_INLINE void cco_impl_coll_allgather_work(const cco_impl_coll_ctx* c) {
  uint64_t first, last, mine = (uint64_t)c->me * c->bytes;
  int inPlace = c->send == c->recv || c->send == c->recv + mine;
  uint64_t src = inPlace ? c->recv + mine : c->send;
  cco_impl_coll_grid g = cco_impl_coll_grid_of(src, c->a.count, c->es);
  cco_impl_coll_piece(&g, 0, g.units, c->part, c->nParts, &first, &last);
  cco_impl_coll_span s = cco_impl_coll_span_make(src + first * c->es, 0, 1, c->recvPeer0 + mine + first * c->es,
                                                 c->recvStride, c->n, (c->me + 1) % c->n, inPlace ? c->me : -1,
                                                 last - first);
  cco_impl_coll_copy(&s, c->es, c->tid, c->nthr);
}

/* this part's piece of `count` elements at src into peer `peer`'s output at
 * byte offset dstByte of its recv buffer. */
CCO_DEVICE_INLINE void cco_impl_coll_send_piece(const cco_impl_coll_ctx* c, uint64_t src, uint64_t count, int32_t peer,
                                                uint64_t dstByte) {
  uint64_t first, last;
  cco_impl_coll_grid g = cco_impl_coll_grid_of(src, count, c->es);
  cco_impl_coll_piece(&g, 0, g.units, c->part, c->nParts, &first, &last);
  cco_impl_coll_span s = cco_impl_coll_span_make(src + first * c->es, 0, 1,
                                                 c->recvPeer0 + (uint64_t)peer * c->recvStride + dstByte + first * c->es,
                                                 0, 1, 0, -1, last - first);
  cco_impl_coll_copy(&s, c->es, c->tid, c->nthr);
}

/* All-to-all (push): block d of the input into block `me` of peer d's
 * output, for every d, starting with the next rank. */
CCO_DEVICE_INLINE void cco_impl_coll_alltoall_work(const cco_impl_coll_ctx* c) {
  for (int32_t j = 1; j <= c->n; j++) {
    int32_t d = (c->me + j) % c->n;
    cco_impl_coll_send_piece(c, c->send + (uint64_t)d * c->bytes, c->a.count, d, (uint64_t)c->me * c->bytes);
  }
}

/* Entry `which` (0 sendCounts, 1 sendDispls, 2 recvDispls) for `peer` of
 * LSA rank `owner`'s all-to-allv table. */
CCO_DEVICE_INLINE int64_t cco_impl_coll_vtable(const cco_impl_coll_ctx* c, int32_t owner, int which, int32_t peer) {
  const int64_t* t = (const int64_t*)ccoGetLsaPeerPtr(c->a.sendWin, owner, c->a.vTableOff);
  return t[which * c->n + peer];
}

/* This rank's own table: counts and displacements not negative, every send
 * range inside the send window. */
CCO_DEVICE_INLINE int cco_impl_coll_vtable_ok(const cco_impl_coll_ctx* c) {
  for (int32_t d = 0; d < c->n; d++) {
    int64_t cnt = cco_impl_coll_vtable(c, c->me, 0, d), displ = cco_impl_coll_vtable(c, c->me, 1, d);
    uint64_t off, bytes;
    if (cnt < 0 || displ < 0 || !cco_impl_coll_mul((uint64_t)displ, c->es, &off) ||
        !cco_impl_coll_mul((uint64_t)cnt, c->es, &bytes) || c->a.sendOff + off < off ||
        !cco_impl_coll_in_window(c->a.sendWin, c->a.sendOff + off, bytes, c->es))
      return 0;
  }
  return 1;
}

/* All-to-allv (push): sendCounts[d] elements from sendDispls[d] to peer d,
 * at the displacement peer d's own table gives this rank (read over LSA
 * after the first barrier). Returns 0 when a peer's displacement puts the
 * data outside its window (that block is skipped). */
CCO_DEVICE_INLINE int cco_impl_coll_alltoallv_work(const cco_impl_coll_ctx* c) {
  int ok = 1;
  for (int32_t j = 1; j <= c->n; j++) {
    int32_t d = (c->me + j) % c->n;
    int64_t cnt = cco_impl_coll_vtable(c, c->me, 0, d), sdispl = cco_impl_coll_vtable(c, c->me, 1, d);
    int64_t rdispl = cco_impl_coll_vtable(c, d, 2, c->me);
    uint64_t roff, bytes;
    if (rdispl < 0 || !cco_impl_coll_mul((uint64_t)rdispl, c->es, &roff) ||
        !cco_impl_coll_mul((uint64_t)cnt, c->es, &bytes) || c->a.recvOff + roff < roff ||
        !cco_impl_coll_in_window(c->a.recvWin, c->a.recvOff + roff, bytes, c->es)) {
      ok = 0;
      continue;
    }
    cco_impl_coll_send_piece(c, c->send + (uint64_t)sdispl * c->es, (uint64_t)cnt, d, roff);
  }
  return ok;
}

/* Broadcast (pull): this part's piece of the root's input into this rank's
 * output; the root copies its own unless in place. */
CCO_DEVICE_INLINE void cco_impl_coll_broadcast_work(const cco_impl_coll_ctx* c) {
  if (c->me == c->a.root && c->send == c->recv) return;
  uint64_t src = c->sendPeer0 + (uint64_t)c->a.root * c->sendStride, first, last;
  cco_impl_coll_grid g = cco_impl_coll_grid_of(src, c->a.count, c->es);
  cco_impl_coll_piece(&g, 0, g.units, c->part, c->nParts, &first, &last);
  cco_impl_coll_span s =
      cco_impl_coll_span_make(src + first * c->es, 0, 1, c->recv + first * c->es, 0, 1, 0, -1, last - first);
  cco_impl_coll_copy(&s, c->es, c->tid, c->nthr);
}

/* ------------------------------------------------- one-shot, staged */

/* Whether a one-shot call stages its input (ccoDevAllReduceOneShot): a
 * function of the count and the scratch only, the same on every rank that
 * makes the same call, since the two ways sync a different number of
 * times. */
CCO_DEVICE_INLINE int cco_impl_coll_oneshot_stages(const cco_impl_coll_ctx* c) {
  uint64_t bytes;
  return c->es && cco_impl_coll_mul(c->a.count, c->es, &bytes) && bytes <= CCO_COLL_ONESHOT_STAGE_BYTES &&
         cco_impl_coll_scratch_ok(c, cco_impl_coll_scratch_bytes(c->n, c->nParts));
}

/*
 * One sync. The input is cut into chunks of CCO_IMPL_COLL_STAGE_CHUNK_UNITS
 * 16-byte units, each part owning a contiguous run of them. Before the
 * sync, the part copies its chunks into this rank's staging buffer of each
 * chunk's parity and publishes {signature, ok} in its slot of its barrier's
 * parity; after it, thread p compares LSA rank p's slot while the first
 * loads of the peers' staging are in flight, and the part reduces its
 * chunks of every peer's staging, in LSA rank order, into this rank's
 * output, storing nothing when any rank disagrees. Chunks of one parity
 * side by side move as one span (all of a part's, once the calls repeat).
 *
 * Parities. A chunk's is its use count & 1, a word in this rank's scratch
 * that only the chunk's owner reads and advances, the same on every rank
 * that made the same calls. Why two buffers suffice: a rank W writes use
 * u+2 of a chunk only after its owner's sync in the call of use u+1, which
 * the reader R's owner of the chunk reached after reading use u (the same
 * block in program order when the calls share a kernel, which must then
 * keep nParts, or R's previous kernel on its stream). The slots go by the
 * parity of the part's barrier epoch, which moves once per sync: a rank
 * writes a slot again two syncs of that barrier later, after every peer
 * has read it.
 */
typedef struct {
  cco_impl_coll_grid g;
  uint64_t k0, k1, kData; /* this part's chunks [k0, k1); those with data end at kData */
  const uint32_t* uses;
} cco_impl_coll_stage_runs;

/* The next run of chunks [*k, *e) of one parity with data, from *k on;
 * 0 when there is none. Sets the run's elements and parity. */
CCO_DEVICE_INLINE int cco_impl_coll_stage_run(const cco_impl_coll_stage_runs* r, uint64_t k, uint64_t* e,
                                              uint64_t* first, uint64_t* last, uint64_t* parity) {
  const uint64_t end = r->k1 < r->kData ? r->k1 : r->kData;
  if (k >= end) return 0;
  const uint32_t par = r->uses[k] & 1u;
  uint64_t j = k + 1u;
  while (j < end && (r->uses[j] & 1u) == par) j++;
  *e = j;
  *parity = par;
  *first = cco_impl_coll_grid_elem(&r->g, k * CCO_IMPL_COLL_STAGE_CHUNK_UNITS);
  *last = j * CCO_IMPL_COLL_STAGE_CHUNK_UNITS >= r->g.units ? r->g.n
                                                             : cco_impl_coll_grid_elem(&r->g, j * CCO_IMPL_COLL_STAGE_CHUNK_UNITS);
  return 1;
}

CCO_DEVICE_INLINE ccoDevStatus_t cco_impl_coll_oneshot_staged(const cco_impl_coll_ctx* c, int ok) {
  ccoLsaBarrierSession bar = ccoLsaBarrierSessionInit(c->dc, c->a.barrierBase + c->part, ccoCoopBlock);
  const uint64_t sig = c->a.signature, stage = c->a.scratchOff + cco_impl_coll_stage_off(c->n);
  const uint64_t slotOff = stage + ((uint64_t)(bar.epoch & 1u) * CCO_COLL_MAX_PARTS + c->part) * 16u;
  const uint64_t bufOff = stage + CCO_IMPL_COLL_STAGE_SLOTS_BYTES + (c->send & 15u);
  const uint64_t stride = cco_impl_coll_stride(c->a.scratchWin);
  const uint64_t buf0 = (uint64_t)(uintptr_t)ccoGetLsaPeerPtr(c->a.scratchWin, 0, bufOff);
  uint32_t* uses = (uint32_t*)(uintptr_t)cco_impl_coll_scratch_local(c, cco_impl_coll_stage_off(c->n) +
                                                                            CCO_IMPL_COLL_STAGE_USES_OFF);
  /* Ownership and the use counts go by the count alone (every chunk a
   * call of it could touch, whatever the alignment), so that they stay in
   * step also on a rank whose arguments are bad, which stages and reduces
   * nothing (with a signature its peers learn it; without, they go on); a
   * use that moves no data only flips the parity. The count fits:
   * cco_impl_coll_oneshot_stages. */
  const uint64_t counted = ((c->a.count * c->es + 30u) / 16u + CCO_IMPL_COLL_STAGE_CHUNK_UNITS - 1u) /
                           CCO_IMPL_COLL_STAGE_CHUNK_UNITS;
  cco_impl_coll_stage_runs r;
  r.g = cco_impl_coll_grid_of(c->send, ok ? c->a.count : 0, c->es);
  r.k0 = (uint32_t)counted * c->part / c->nParts;
  r.k1 = (uint32_t)counted * (c->part + 1u) / c->nParts;
  r.kData = (r.g.units + CCO_IMPL_COLL_STAGE_CHUNK_UNITS - 1u) / CCO_IMPL_COLL_STAGE_CHUNK_UNITS;
  r.uses = uses;
  uint64_t first = 0, last = 0, par = 0, e = 0;
  for (uint64_t k = r.k0; cco_impl_coll_stage_run(&r, k, &e, &first, &last, &par); k = e) {
    uint64_t dst = buf0 + (uint64_t)c->me * stride + par * CCO_IMPL_COLL_STAGE_BUF_BYTES + first * c->es;
    cco_impl_coll_span in = cco_impl_coll_span_make(c->send + first * c->es, 0, 1, dst, 0, 1, 0, -1, last - first);
    cco_impl_coll_copy(&in, c->es, c->tid, c->nthr);
  }
  if (sig && c->tid == 0) {
    volatile uint64_t* slot = (volatile uint64_t*)ccoGetLocalPtr(c->a.scratchWin, slotOff);
    slot[0] = ok ? sig : ~sig;
    slot[1] = (uint64_t)ok;
  }
  ccoDevStatus_t st = ccoLsaBarrierSyncTimeout(&bar, CCO_COLL_TIMEOUT_NS);
  ccoLsaBarrierSessionEnd(&bar);
  if (st != ccoDevSuccess) return st;
  uint32_t bad = !ok;
  if (sig)
    for (uint32_t p = c->tid; p < (uint32_t)c->n; p += c->nthr) {
      const volatile uint64_t* slot = (const volatile uint64_t*)ccoGetLsaPeerPtr(c->a.scratchWin, (int)p, slotOff);
      bad |= slot[0] != sig || slot[1] != 1u;
    }
  /* Every thread goes through the gate once, with the first run or with
   * nothing when the part has no data. */
  int stored = 1, more = cco_impl_coll_stage_run(&r, r.k0, &e, &first, &last, &par);
  if (!more) first = last = par = 0;
  for (int gated = 0; stored && (more || !gated); gated = 1) {
    cco_impl_coll_span s = cco_impl_coll_span_make(buf0 + par * CCO_IMPL_COLL_STAGE_BUF_BYTES + first * c->es, stride,
                                                   c->n, c->recv + first * c->es, 0, 1, 0, -1, last - first);
    if (!gated) {
#define CCO_IMPL_GATED_BODY_(D, O) stored = cco_impl_coll_reduce_gated(&s, D, O, c->tid, c->nthr, bad)
      CCO_IMPL_COLL_DISPATCH(c->dt, c->op, CCO_IMPL_GATED_BODY_);
#undef CCO_IMPL_GATED_BODY_
    } else {
      cco_impl_coll_reduce_typed(&s, c);
    }
    more = more && cco_impl_coll_stage_run(&r, e, &e, &first, &last, &par);
  }
  /* The chunks' next uses, once every thread is done with this one, and
   * seen by all of them before a next call in the same kernel. */
  ccoCoopSync(ccoCoopBlock);
  if (c->tid == 0)
    for (uint64_t k = r.k0; k < r.k1; k++) uses[k]++;
  ccoCoopSync(ccoCoopBlock);
  return stored ? ccoDevSuccess : ccoDevInvalid;
}

/* ------------------------------------------------------------- drivers */

/* Every block but LL: checks, the frame, the work of `kind` (a constant in
 * each public function, so the switch folds). */
CCO_DEVICE_INLINE ccoDevStatus_t cco_impl_coll_run(const ccoDevComm* dc, const ccoCollArgs* a, uint32_t part,
                                                   uint32_t nParts, cco_impl_coll_kind kind) {
  cco_impl_coll_ctx c;
  if (!cco_impl_coll_ctx_init(&c, dc, a, part, nParts)) return ccoDevInvalid;
  if (c.a.barrierBase >= dc->lsaBarrierCount || nParts > dc->lsaBarrierCount - c.a.barrierBase) return ccoDevInvalid;
  int ok = cco_impl_coll_args_ok(&c, kind);
  if (ok && kind == cco_impl_coll_alltoallv) ok = cco_impl_coll_vtable_ok(&c);
  /* Nothing to move and nothing to compare: no barrier either (the same
   * on every rank, since count is). */
  if (c.a.signature == 0 && c.a.count == 0 && kind != cco_impl_coll_alltoallv)
    return ok ? ccoDevSuccess : ccoDevInvalid;
  if (kind == cco_impl_coll_oneshot && cco_impl_coll_oneshot_stages(&c)) return cco_impl_coll_oneshot_staged(&c, ok);
  cco_impl_coll_frame f;
  cco_impl_coll_open(&f, &c, ok);
  int workOk = 1;
  if (f.proceed) {
    cco_impl_coll_span s;
    switch (kind) {
      case cco_impl_coll_oneshot:
      case cco_impl_coll_twoshot:
      case cco_impl_coll_reducescatter:
        /* One-shot in place: peers would still read this rank's input
         * while it is overwritten; the two-shot schedule gives the same
         * bits safely. */
        s = kind == cco_impl_coll_reducescatter ? cco_impl_coll_reducescatter_span(&c)
            : kind == cco_impl_coll_twoshot || c.send == c.recv ? cco_impl_coll_twoshot_span(&c)
                                                                 : cco_impl_coll_oneshot_span(&c);
        cco_impl_coll_reduce_typed(&s, &c); /* one copy of the loops per type and operator */
        break;
      case cco_impl_coll_allgather: cco_impl_coll_allgather_work(&c); break;
      case cco_impl_coll_alltoall: cco_impl_coll_alltoall_work(&c); break;
      case cco_impl_coll_alltoallv:
        /* Every part checks every block, so the parts agree; the threads
         * of this one agree through the reduction. */
        workOk = !cco_impl_block_any((uint32_t)!cco_impl_coll_alltoallv_work(&c));
        break;
      case cco_impl_coll_broadcast: cco_impl_coll_broadcast_work(&c); break;
    }
  }
  return cco_impl_coll_close(&f, workOk);
}

/* LL: checks that need no peer (all the same on every rank), then the
 * push and the polls. */
CCO_DEVICE_INLINE ccoDevStatus_t cco_impl_coll_ll(const ccoDevComm* dc, const ccoCollArgs* a, uint32_t part,
                                                  uint32_t nParts) {
  cco_impl_coll_ctx c;
  if (!cco_impl_coll_ctx_init(&c, dc, a, part, nParts)) return ccoDevInvalid;
  if (!cco_impl_coll_args_ok(&c, cco_impl_coll_oneshot) || c.bytes > CCO_COLL_LL_MAX_BYTES ||
      !cco_impl_coll_scratch_ok(&c, cco_impl_coll_scratch_bytes(c.n, nParts)))
    return ccoDevInvalid;
  if (c.a.count == 0) return ccoDevSuccess;
  cco_impl_coll_ll_call L;
  L.dc = dc;
  L.in = c.send;
  L.out = c.recv;
  L.bytes = c.bytes;
  L.stride = cco_impl_coll_stride(c.a.scratchWin);
  L.stage0 = (uint64_t)(uintptr_t)ccoGetLsaPeerPtr(c.a.scratchWin, 0, c.a.scratchOff + CCO_IMPL_COLL_LL_OFF);
  L.epochs = (uint32_t*)(uintptr_t)cco_impl_coll_scratch_local(&c, CCO_IMPL_COLL_EPOCH_OFF);
  L.timeoutNs = CCO_COLL_TIMEOUT_NS;
  L.me = c.me;
  L.n = c.n;
  L.part = part;
  L.nParts = nParts;
  L.tid = c.tid;
  L.nthr = c.nthr;
  L.es = c.es;
  L.inAligned8 = (c.send & 7u) == 0;
  L.outAligned8 = (c.recv & 7u) == 0;
  return cco_impl_coll_ll_typed(&L, c.dt, c.op);
}

#endif /* CCO_DEVICE_IMPL_COLL_IMPL_H_ */
