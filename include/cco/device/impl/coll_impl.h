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
 *   [0, 1024)     frame epochs: a uint32 per part (16 bytes apart),
 *                 CCO_COLL_MAX_PARTS of them
 *   [1024, 1536)  LL epochs: a uint32 per LL chunk (128 chunks of 512 bytes)
 *   [4096, ...)   LL staging: [epoch parity 2][source LSA rank][8192 line
 *                 pairs of 16 bytes]: 4 x lsaSize x CCO_COLL_LL_MAX_BYTES
 *   then          frame flags: [part][source LSA rank] uint64, what each
 *                 peer stored at its last sync of the part
 *
 * The layout depends on lsaSize only, so calls with any nParts share it.
 */
#define CCO_IMPL_COLL_FRAME_EPOCH_OFF 0u
#define CCO_IMPL_COLL_FRAME_EPOCH_BYTES (CCO_COLL_MAX_PARTS * 16u)
#define CCO_IMPL_COLL_LL_CHUNK_PAIRS 64u /* 512 data bytes a chunk */
#define CCO_IMPL_COLL_LL_CHUNKS (CCO_COLL_LL_MAX_BYTES / (8u * CCO_IMPL_COLL_LL_CHUNK_PAIRS))
#define CCO_IMPL_COLL_EPOCH_OFF 1024u
#define CCO_IMPL_COLL_LL_OFF 4096u

#include "cco/device/impl/coll_reduce_impl.h"
#include "cco/device/impl/coll_ll_impl.h"

#if defined(__cplusplus)
static_assert(CCO_IMPL_COLL_FRAME_EPOCH_OFF + CCO_IMPL_COLL_FRAME_EPOCH_BYTES <= CCO_IMPL_COLL_EPOCH_OFF, "scratch layout");
static_assert(CCO_IMPL_COLL_EPOCH_OFF + 4u * CCO_IMPL_COLL_LL_CHUNKS <= CCO_IMPL_COLL_LL_OFF, "scratch layout");
#else
_Static_assert(CCO_IMPL_COLL_FRAME_EPOCH_OFF + CCO_IMPL_COLL_FRAME_EPOCH_BYTES <= CCO_IMPL_COLL_EPOCH_OFF, "scratch layout");
_Static_assert(CCO_IMPL_COLL_EPOCH_OFF + 4u * CCO_IMPL_COLL_LL_CHUNKS <= CCO_IMPL_COLL_LL_OFF, "scratch layout");
#endif

/* Where the frame flags start. */
CCO_HOST_DEVICE_INLINE uint64_t cco_impl_coll_flags_off(int lsaSize) {
  return CCO_IMPL_COLL_LL_OFF + 4u * (uint64_t)lsaSize * CCO_COLL_LL_MAX_BYTES;
}

CCO_HOST_DEVICE_INLINE uint64_t cco_impl_coll_scratch_bytes(int lsaSize, uint32_t nParts) {
  if (lsaSize < 1 || nParts < 1 || nParts > CCO_COLL_MAX_PARTS) return 0;
  return cco_impl_coll_flags_off(lsaSize) + 8u * (uint64_t)CCO_COLL_MAX_PARTS * (uint64_t)lsaSize;
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

/* What the blocks use of a window descriptor, as values; present 0 for a
 * null window. */
typedef struct {
  uint64_t base, stride, size; /* winBase, the slot stride, bytes */
  int32_t lsaRank, present;
} cco_impl_coll_wv;

CCO_DEVICE_INLINE cco_impl_coll_wv cco_impl_coll_wv_of(ccoWindow_t w) {
  cco_impl_coll_wv v;
  v.base = w ? w->winBase : 0;
  v.stride = w ? (uint64_t)w->stride4G << 32 : 0;
  v.size = w ? w->size : 0;
  v.lsaRank = w ? w->lsaRank : 0;
  v.present = w != 0;
  return v;
}

/* LSA rank p's copy of byte off of the window, and this rank's. */
CCO_DEVICE_INLINE uint64_t cco_impl_coll_wv_peer(const cco_impl_coll_wv* v, int32_t p, uint64_t off) {
  return v->base + (uint64_t)p * v->stride + off;
}
CCO_DEVICE_INLINE uint64_t cco_impl_coll_wv_local(const cco_impl_coll_wv* v, uint64_t off) {
  return cco_impl_coll_wv_peer(v, v->lsaRank, off);
}

/* [off, off + bytes) lies in the window and starts on an `align` boundary
 * (of the address: windows themselves are page aligned); align is a power
 * of two (an element size, 8 or 16). */
CCO_DEVICE_INLINE int cco_impl_coll_wv_has(const cco_impl_coll_wv* v, uint64_t off, uint64_t bytes, uint64_t align) {
  return v->present && ((v->base + off) & (align - 1u)) == 0 && off <= v->size && bytes <= v->size - off;
}

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
  /* The call's send, receive and scratch windows as values, loaded
   * together once at the start; the checks and addresses use these. Through
   * the arguments' pointers, each check would wait for its own load behind
   * the branch before it (on the H200 the argument checks cost 0.4 us of a
   * 5.7 us call). Values, not a copied descriptor behind a pointer: a
   * pointer that may be null or the copy keeps the context out of registers. */
  cco_impl_coll_wv sw, rw, xw;
} cco_impl_coll_ctx;

/* The parts of a call that need no peer and no check beyond null
 * pointers; 0 when the call cannot even run its barriers (every rank sees
 * the same, so all return at once). */
CCO_DEVICE_INLINE int cco_impl_coll_ctx_init(cco_impl_coll_ctx* c, const ccoDevComm* dc, const ccoCollArgs* a,
                                             uint32_t part, uint32_t nParts) {
  if (!dc || !a || nParts < 1 || nParts > CCO_COLL_MAX_PARTS || part >= nParts || dc->lsaSize < 1) return 0;
  c->dc = dc;
  c->a = *a;
  /* No load waits for another: the three windows' loads in flight at once. */
  c->sw = cco_impl_coll_wv_of(a->sendWin);
  c->rw = cco_impl_coll_wv_of(a->recvWin);
  c->xw = cco_impl_coll_wv_of(a->scratchWin);
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
  if (c->sw.present) {
    c->sendStride = c->sw.stride;
    c->sendPeer0 = cco_impl_coll_wv_peer(&c->sw, 0, c->a.sendOff);
    c->send = c->sendPeer0 + (uint64_t)c->me * c->sendStride;
  }
  if (c->rw.present) {
    c->recvStride = c->rw.stride;
    c->recvPeer0 = cco_impl_coll_wv_peer(&c->rw, 0, c->a.recvOff);
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

/* cco_impl_coll_wv_has for a window given by its descriptor (the blocks
 * that check windows other than the context's). */
CCO_DEVICE_INLINE int cco_impl_coll_in_window(ccoWindow_t w, uint64_t off, uint64_t bytes, uint64_t align) {
  cco_impl_coll_wv v = cco_impl_coll_wv_of(w);
  return cco_impl_coll_wv_has(&v, off, bytes, align);
}

CCO_HOST_DEVICE_INLINE int cco_impl_coll_overlap(uint64_t x, uint64_t xn, uint64_t y, uint64_t yn) {
  return xn && yn && x < y + yn && y < x + xn;
}

/* The scratch area holds the signature slots (every block with a barrier
 * that checks signatures) or everything (LL). */
CCO_DEVICE_INLINE int cco_impl_coll_scratch_ok(const cco_impl_coll_ctx* c, uint64_t need) {
  return need && c->a.scratchBytes >= need && cco_impl_coll_wv_has(&c->xw, c->a.scratchOff, c->a.scratchBytes, 16);
}

CCO_DEVICE_INLINE uint64_t cco_impl_coll_scratch_local(const cco_impl_coll_ctx* c, uint64_t off) {
  return cco_impl_coll_wv_local(&c->xw, c->a.scratchOff + off);
}

/* Whether this rank's arguments are good for `kind`, from what it can see
 * before the first barrier. Everything but all-gather's input, reduce-
 * scatter's output and the all-to-allv tables is the same on every rank
 * (offsets, counts, windows of the same size), so the verdict usually is
 * too; where it is not, the signature check spreads it. Sets c->bytes. */
CCO_DEVICE_INLINE int cco_impl_coll_args_ok(cco_impl_coll_ctx* c, cco_impl_coll_kind kind) {
  const ccoCollArgs* a = &c->a;
  const cco_impl_coll_wv *sw = &c->sw, *rw = &c->rw;
  uint64_t n = (uint64_t)c->n, total;
  if (!c->es || !sw->present || !rw->present) return 0;
  if ((kind == cco_impl_coll_oneshot || kind == cco_impl_coll_twoshot || kind == cco_impl_coll_reducescatter) &&
      a->op >= (uint32_t)ccoNumRedOps)
    return 0;
  if (kind == cco_impl_coll_alltoallv) { /* the table; counts are checked when read */
    c->bytes = 0;
    return cco_impl_coll_wv_has(sw, a->vTableOff, 3u * 8u * n, 8);
  }
  if (!cco_impl_coll_mul(a->count, c->es, &c->bytes) || !cco_impl_coll_mul(c->bytes, n, &total)) return 0;
  switch (kind) {
    case cco_impl_coll_oneshot:
    case cco_impl_coll_twoshot:
      /* In place is the same buffer; a partial overlap is refused. */
      return cco_impl_coll_wv_has(sw, a->sendOff, c->bytes, c->es) &&
             cco_impl_coll_wv_has(rw, a->recvOff, c->bytes, c->es) &&
             (c->send == c->recv || !cco_impl_coll_overlap(c->send, c->bytes, c->recv, c->bytes));
    case cco_impl_coll_allgather:
      /* The input may be this rank's own block of the output (NCCL's in
       * place), or the output itself, which means the same. */
      return cco_impl_coll_wv_has(sw, a->sendOff, c->bytes, c->es) &&
             cco_impl_coll_wv_has(rw, a->recvOff, total, c->es) &&
             (c->send == c->recv || c->send == c->recv + (uint64_t)c->me * c->bytes ||
              !cco_impl_coll_overlap(c->send, c->bytes, c->recv, total));
    case cco_impl_coll_reducescatter:
      /* The output may be this rank's own block of the input, or the input
       * itself, which means that block. */
      return cco_impl_coll_wv_has(sw, a->sendOff, total, c->es) &&
             cco_impl_coll_wv_has(rw, a->recvOff, c->bytes, c->es) &&
             (c->send == c->recv || c->recv == c->send + (uint64_t)c->me * c->bytes ||
              !cco_impl_coll_overlap(c->send, total, c->recv, c->bytes));
    case cco_impl_coll_alltoall: /* pushes into blocks peers still send from: never in place */
      return cco_impl_coll_wv_has(sw, a->sendOff, total, c->es) &&
             cco_impl_coll_wv_has(rw, a->recvOff, total, c->es) &&
             !cco_impl_coll_overlap(c->send, total, c->recv, total);
    case cco_impl_coll_broadcast:
      return a->root >= 0 && a->root < c->n && cco_impl_coll_wv_has(sw, a->sendOff, c->bytes, c->es) &&
             cco_impl_coll_wv_has(rw, a->recvOff, c->bytes, c->es) &&
             (c->me != a->root || c->send == c->recv || !cco_impl_coll_overlap(c->send, c->bytes, c->recv, c->bytes));
    default: return 0;
  }
}

/* ---------------------------------------------------------- the frame */

/*
 * Every block but LL runs between two syncs: the first says that every
 * peer's inputs are written and its outputs free (its previous work on them
 * is over), the second that every peer is done reading this rank's inputs
 * and writing its outputs. Exactly two syncs whatever the arguments say, so
 * that ranks which disagree (or see bad arguments) still pass the same
 * syncs and never hang; only a first sync that fails (abort word, timeout)
 * skips the second.
 *
 * With the scratch area (the engine's calls, and any call with a
 * signature), a sync is a flag per peer in the scratch: thread p stores
 * {epoch, tag} in one 8-byte release store into LSA rank p's flag of this
 * rank and part, and waits for rank p's flag to reach the epoch with an
 * acquire load. The tag is the signature folded to 32 bits, inverted when
 * this rank's arguments are bad, so the wait that sees a peer arrive also
 * sees whether it agrees: no slot to publish, no load after the sync, one
 * block reduction for both verdicts (the signature check of the first
 * version cost 0.7 us of a 7 us call on the H200). A flag a waiter reads
 * may already hold the peer's next sync, never one of its next call: the
 * peer passes this call's second sync only after this rank arrived there,
 * and both syncs of a call carry its tag. The part's epoch lives in this
 * rank's scratch and moves by two a call, the same on every rank.
 *
 * Without scratch (and so without a signature), the syncs are LSA barrier
 * barrierBase + part of the device communicator, and ranks cannot learn of
 * each other's bad arguments.
 */
typedef struct {
  ccoLsaBarrierSession bar; /* without scratch */
  uint64_t* flags;          /* with: this rank's flags of the part, one per source */
  uint64_t peerFlag0;       /* this rank's flag of the part at LSA rank 0; + p x stride at rank p */
  uint64_t stride;
  uint32_t* epochHome;
  const uint32_t* abortFlag;
  uint32_t epoch, tag, expect;
  int useFlags, gpuScope;
  ccoDevStatus_t st; /* of the first sync */
  int proceed;       /* 1: the sync passed and every rank agrees */
} cco_impl_coll_frame;

CCO_DEVICE_INLINE uint32_t cco_impl_coll_fold(uint64_t sig) { return (uint32_t)(sig ^ (sig >> 32)); }

/* A sync on the flags: arrive with the tag, wait for every peer, and tell
 * whether any peer's tag differs from the expected one. One reduction of
 * the block when all is well. */
CCO_DEVICE_INLINE ccoDevStatus_t cco_impl_coll_flag_sync(cco_impl_coll_frame* f, const cco_impl_coll_ctx* c,
                                                         int* disagree) {
  const uint32_t next = f->epoch + 1u;
  const uint64_t word = ((uint64_t)f->tag << 32) | next;
  ccoCoopSync(ccoCoopBlock); /* the block's writes happen before the release stores */
  for (uint32_t p = c->tid; p < (uint32_t)c->n; p += c->nthr)
    cco_impl_st_release_scoped_u64((uint64_t*)(uintptr_t)(f->peerFlag0 + p * f->stride), word, f->gpuScope);
  f->epoch = next;
  ccoDevStatus_t st = ccoDevSuccess;
  uint32_t bad = 0;
  uint64_t start = CCO_COLL_TIMEOUT_NS ? cco_impl_clock_ns() : 0;
  for (uint32_t p = c->tid; p < (uint32_t)c->n && st == ccoDevSuccess; p += c->nthr) {
    for (uint32_t spins = 0;; spins++) {
      uint64_t v = cco_impl_ld_acquire_scoped_u64(&f->flags[p], f->gpuScope);
      if ((int32_t)((uint32_t)v - next) >= 0) {
        bad |= (uint32_t)(v >> 32) != f->expect;
        break;
      }
      if ((spins & 255) == 255) {
        if (f->abortFlag && cco_impl_ld_relaxed_u32(f->abortFlag)) {
          st = ccoDevAborted;
          break;
        }
        if (CCO_COLL_TIMEOUT_NS && cco_impl_clock_ns() - start > CCO_COLL_TIMEOUT_NS) {
          st = ccoDevTimeout;
          break;
        }
      }
      cco_impl_spin_pause(spins);
    }
  }
  if (!cco_impl_block_any(st != ccoDevSuccess || bad)) {
    *disagree = 0;
    return ccoDevSuccess;
  }
  *disagree = cco_impl_block_any(bad);
  return cco_impl_lsa_scope_status(ccoCoopBlock, st);
}

CCO_DEVICE_INLINE void cco_impl_coll_open(cco_impl_coll_frame* f, const cco_impl_coll_ctx* c, int ok) {
  const uint64_t sig = c->a.signature;
  f->useFlags = cco_impl_coll_scratch_ok(c, cco_impl_coll_scratch_bytes(c->n, c->nParts));
  if (sig && !f->useFlags) ok = 0; /* nowhere to compare: the same on every rank */
  int bad = !ok;
  if (f->useFlags) {
    const uint64_t flagsOff = c->a.scratchOff + cco_impl_coll_flags_off(c->n) + (uint64_t)c->part * 8u * (uint64_t)c->n;
    f->flags = (uint64_t*)(uintptr_t)cco_impl_coll_wv_local(&c->xw, flagsOff);
    f->peerFlag0 = cco_impl_coll_wv_peer(&c->xw, 0, flagsOff + 8u * (uint64_t)c->me);
    f->stride = c->xw.stride;
    f->epochHome = (uint32_t*)(uintptr_t)cco_impl_coll_scratch_local(
        c, CCO_IMPL_COLL_FRAME_EPOCH_OFF + (uint64_t)c->part * 16u);
    f->abortFlag = (const uint32_t*)(uintptr_t)c->dc->abortFlag;
    f->gpuScope = (int)c->dc->lsaScopeGpu;
    f->epoch = cco_impl_ld_relaxed_u32(f->epochHome);
    f->expect = cco_impl_coll_fold(sig);
    f->tag = ok ? f->expect : ~f->expect;
    int disagree = 0;
    f->st = cco_impl_coll_flag_sync(f, c, &disagree);
    bad |= disagree;
  } else {
    f->bar = ccoLsaBarrierSessionInit(c->dc, c->a.barrierBase + c->part, ccoCoopBlock);
    f->st = ccoLsaBarrierSyncTimeout(&f->bar, CCO_COLL_TIMEOUT_NS);
  }
  f->proceed = f->st == ccoDevSuccess && !bad;
}

/* The second sync; the call's status: the first failing sync's, else
 * ccoDevInvalid when the work did not (all) happen. */
CCO_DEVICE_INLINE ccoDevStatus_t cco_impl_coll_close(cco_impl_coll_frame* f, const cco_impl_coll_ctx* c, int workOk) {
  ccoDevStatus_t st2 = f->st;
  if (f->useFlags) {
    int ignored = 0;
    if (f->st == ccoDevSuccess) st2 = cco_impl_coll_flag_sync(f, c, &ignored);
    /* The epoch for the part's next call, stored after the last sync and
     * seen by every thread of the block (the sync below) before any of them
     * can open that call. */
    if (c->tid == 0) cco_impl_st_relaxed_u32(f->epochHome, f->epoch);
    ccoCoopSync(ccoCoopBlock);
  } else {
    if (f->st == ccoDevSuccess) st2 = ccoLsaBarrierSyncTimeout(&f->bar, CCO_COLL_TIMEOUT_NS);
    ccoLsaBarrierSessionEnd(&f->bar);
  }
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
  cco_impl_coll_frame f;
  cco_impl_coll_open(&f, &c, ok);
  int workOk = 1;
  if (f.proceed) {
    cco_impl_coll_span s;
    switch (kind) {
      case cco_impl_coll_oneshot:
        /* In place, peers would still read this rank's input while it is
         * overwritten: the two-shot schedule gives the same bits safely.
         * Two calls, so that the usual case keeps its one destination a
         * constant (the H200 probe put up to 0.5 us of a 6 us call in the
         * run-time choice, by difference between its variants). */
        if (c.send == c.recv) {
          s = cco_impl_coll_twoshot_span(&c);
          cco_impl_coll_reduce_typed(&s, &c);
        } else {
          s = cco_impl_coll_oneshot_span(&c);
          cco_impl_coll_reduce_typed(&s, &c);
        }
        break;
      case cco_impl_coll_twoshot:
      case cco_impl_coll_reducescatter:
        s = kind == cco_impl_coll_reducescatter ? cco_impl_coll_reducescatter_span(&c) : cco_impl_coll_twoshot_span(&c);
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
  return cco_impl_coll_close(&f, &c, workOk);
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
  L.stride = c.xw.stride;
  L.stage0 = cco_impl_coll_wv_peer(&c.xw, 0, c.a.scratchOff + CCO_IMPL_COLL_LL_OFF);
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
