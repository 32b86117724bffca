/*
 * Private: the LL ("low latency") all-reduce of cco/cco_coll.h
 * (ccoDevAllReduceLL). Names start with cco_impl_ and may change in any
 * release.
 *
 * No barrier: every rank pushes its input into every peer's staging area
 * in 8-byte lines, 4 data bytes and a 4-byte flag stored by one access, so a
 * reader that sees the flag it expects also sees the data beside it, with no
 * fence in between. The reader polls its own staging until every line of
 * every peer carries this call's epoch, and reduces in LSA rank order, so
 * every rank gets the same bits.
 *
 * Chunks and epochs. The message is cut into chunks of
 * CCO_IMPL_COLL_LL_CHUNK_PAIRS 16-byte line pairs (8 data bytes each);
 * chunk c belongs to part c % nParts, and has its own epoch, a uint32 in
 * this rank's scratch that only the part owning the chunk reads and
 * advances, once per call that uses the chunk. Epochs live in device
 * memory, so a CUDA graph replaying the same arguments still moves on; they
 * are per chunk rather than per part so that calls with other counts or
 * another nParts never find a line written under another chunk's epoch: a
 * line's position belongs to one chunk, and that chunk's epochs only grow.
 *
 * Why two staging buffers (epoch parity) suffice, chunk by chunk: a rank W
 * writes use k+2 of a chunk into reader R's buffer k % 2 only after W
 * finished use k+1 of that chunk, which needed R's data of use k+1, which R
 * sends only after it finished reading use k (the same block in program
 * order, or the previous kernel on R's stream). So nothing R still has to
 * read is ever overwritten, and a line of the other parity holds an older
 * epoch, never the expected one: nothing is ever reset. The argument needs
 * every rank to make the same sequence of LL calls on the scratch area, and
 * consecutive calls in one kernel to keep nParts (chunk c's owner); a line
 * could only match a stale flag after 2^32 uses of its chunk with no write
 * to that line in between.
 */
#include "cco/cco_coll.h"

#ifndef CCO_DEVICE_IMPL_COLL_LL_IMPL_H_
#define CCO_DEVICE_IMPL_COLL_LL_IMPL_H_

#include <stdint.h>

#include "cco/cco_coll_types.h"
#include "cco/cco_device.h"
#include "cco/device/impl/coll_reduce_impl.h"

/* ------------------------------------------------------------ lines */

/* Stores two lines (16 bytes) as two 8-byte elements of one vector access:
 * each element is single-copy atomic, which is all a line needs. */
CCO_DEVICE_INLINE void cco_impl_ll_store(uint64_t addr, uint64_t l0, uint64_t l1) {
#if CCO_ARCH_GPU
  __asm__ volatile("st.volatile.v2.u64 [%0], {%1, %2};" ::"l"(addr), "l"(l0), "l"(l1) : "memory");
#else
  __atomic_store_n((uint64_t*)(uintptr_t)addr, l0, __ATOMIC_RELAXED);
  __atomic_store_n((uint64_t*)(uintptr_t)addr + 1, l1, __ATOMIC_RELAXED);
#endif
}

CCO_DEVICE_INLINE void cco_impl_ll_load(uint64_t addr, uint64_t* l0, uint64_t* l1) {
#if CCO_ARCH_GPU
  uint64_t a, b;
  __asm__ volatile("ld.volatile.v2.u64 {%0, %1}, [%2];" : "=l"(a), "=l"(b) : "l"(addr));
  *l0 = a;
  *l1 = b;
#else
  *l0 = __atomic_load_n((const uint64_t*)(uintptr_t)addr, __ATOMIC_RELAXED);
  *l1 = __atomic_load_n((const uint64_t*)(uintptr_t)addr + 1, __ATOMIC_RELAXED);
#endif
}

/* Waits until both lines at addr carry `epoch`; returns their 8 data bytes.
 * Like ccoSignalWaitUntil, it looks at the abort word and the clock every
 * 256 polls (timeoutNs 0: no timeout; start: when the wait began). */
CCO_DEVICE_INLINE ccoDevStatus_t cco_impl_ll_wait(const ccoDevComm* dc, uint64_t addr, uint32_t epoch,
                                                  uint64_t start, uint64_t timeoutNs, uint64_t* data) {
  for (uint32_t spins = 0;; spins++) {
    uint64_t l0, l1;
    cco_impl_ll_load(addr, &l0, &l1);
    if ((uint32_t)(l0 >> 32) == epoch && (uint32_t)(l1 >> 32) == epoch) {
      *data = (l0 & 0xffffffffu) | (l1 << 32);
      return ccoDevSuccess;
    }
    if ((spins & 255) == 255) {
      if (ccoDevCommAborted(dc)) return ccoDevAborted;
      if (timeoutNs && cco_impl_clock_ns() - start > timeoutNs) return ccoDevTimeout;
    }
    cco_impl_spin_pause(spins);
  }
}

/* -------------------------------------------------- message bytes */

/* 8 message bytes [8q, 8q + 8) at base, the ones past `bytes` read as 0:
 * one 8-byte load when aligned, else element by element (es 2 or 4). */
CCO_DEVICE_INLINE uint64_t cco_impl_ll_ld_msg(uint64_t base, uint64_t q, uint64_t bytes, uint32_t es, int aligned8) {
  uint64_t off = q * 8u;
  if (aligned8 && off + 8u <= bytes) {
#if CCO_ARCH_GPU
    return *(const uint64_t*)(uintptr_t)(base + off);
#else
    uint64_t v;
    __builtin_memcpy(&v, (const void*)(uintptr_t)(base + off), 8);
    return v;
#endif
  }
  uint64_t v = 0;
  for (uint32_t b = 0; b < 8u && off + b < bytes; b += es) {
    uint32_t e = 0;
#if CCO_ARCH_GPU
    e = es == 2 ? *(const uint16_t*)(uintptr_t)(base + off + b) : *(const uint32_t*)(uintptr_t)(base + off + b);
#else
    __builtin_memcpy(&e, (const void*)(uintptr_t)(base + off + b), es); /* little endian */
#endif
    v |= (uint64_t)e << (8u * b);
  }
  return v;
}

/* The store matching cco_impl_ll_ld_msg: bytes past `bytes` are left alone. */
CCO_DEVICE_INLINE void cco_impl_ll_st_msg(uint64_t base, uint64_t q, uint64_t bytes, uint32_t es, int aligned8,
                                          uint64_t v) {
  uint64_t off = q * 8u;
  if (aligned8 && off + 8u <= bytes) {
#if CCO_ARCH_GPU
    *(uint64_t*)(uintptr_t)(base + off) = v;
#else
    __builtin_memcpy((void*)(uintptr_t)(base + off), &v, 8);
#endif
    return;
  }
  for (uint32_t b = 0; b < 8u && off + b < bytes; b += es) {
    uint32_t e = (uint32_t)(v >> (8u * b));
#if CCO_ARCH_GPU
    if (es == 2) *(uint16_t*)(uintptr_t)(base + off + b) = (uint16_t)e;
    else *(uint32_t*)(uintptr_t)(base + off + b) = e;
#else
    __builtin_memcpy((void*)(uintptr_t)(base + off + b), &e, es);
#endif
  }
}

/* ------------------------------------------------------------ the call */

/* One LL call as one block sees it (cco_impl_coll_ll fills it in). */
typedef struct {
  const ccoDevComm* dc;
  uint64_t in, out;     /* this rank's input and output */
  uint64_t bytes;       /* of the message */
  uint64_t stage0;      /* LSA rank 0's staging area; rank p's at stage0 + p * stride */
  uint64_t stride;      /* of the scratch window */
  uint32_t* epochs;     /* this rank's chunk epochs */
  uint64_t timeoutNs;
  int32_t me, n;        /* LSA rank and size */
  uint32_t part, nParts, tid, nthr, es;
  int inAligned8, outAligned8;
} cco_impl_coll_ll_call;

/* Byte offset of line pair `pair` from rank `src` in a staging area. */
CCO_HOST_DEVICE_INLINE uint64_t cco_impl_ll_line_off(uint32_t epoch, int32_t n, int32_t src, uint64_t pair) {
  return (((uint64_t)(epoch & 1u) * (uint64_t)n + (uint64_t)src) * (CCO_COLL_LL_MAX_BYTES / 8u) + pair) * 16u;
}

/* Chunk and message pair of the q-th pair this part owns. */
CCO_DEVICE_INLINE uint64_t cco_impl_ll_chunk(const cco_impl_coll_ll_call* L, uint64_t q) {
  return L->part + (q / CCO_IMPL_COLL_LL_CHUNK_PAIRS) * L->nParts;
}

CCO_DEVICE_INLINE ccoDevStatus_t cco_impl_coll_ll_run(const cco_impl_coll_ll_call* L, ccoDataType_t dt, ccoRedOp_t op) {
  const uint64_t pairs = (L->bytes + 7u) / 8u;
  const uint64_t chunks = (pairs + CCO_IMPL_COLL_LL_CHUNK_PAIRS - 1u) / CCO_IMPL_COLL_LL_CHUNK_PAIRS;
  const uint64_t myChunks = chunks > L->part ? cco_impl_div_u64(chunks - L->part + L->nParts - 1u, L->nParts) : 0;
  const uint64_t owned = myChunks * CCO_IMPL_COLL_LL_CHUNK_PAIRS;
  const int lpw = cco_impl_coll_lanes_per_word(dt), lanes = 2 * lpw;
  uint64_t myStage = L->stage0 + (uint64_t)L->me * L->stride;

  /* Push: this rank's pairs, with the chunk's next epoch, to every peer,
   * starting with the next rank so that ranks do not all hit one peer. */
  for (uint64_t q = L->tid; q < owned; q += L->nthr) {
    uint64_t c = cco_impl_ll_chunk(L, q), pair = c * CCO_IMPL_COLL_LL_CHUNK_PAIRS + q % CCO_IMPL_COLL_LL_CHUNK_PAIRS;
    if (pair >= pairs) continue;
    uint32_t epoch = L->epochs[c] + 1u;
    uint64_t v = cco_impl_ll_ld_msg(L->in, pair, L->bytes, L->es, L->inAligned8);
    uint64_t l0 = (v & 0xffffffffu) | ((uint64_t)epoch << 32), l1 = (v >> 32) | ((uint64_t)epoch << 32);
    uint64_t off = cco_impl_ll_line_off(epoch, L->n, L->me, pair);
    for (int32_t j = 1; j < L->n; j++) {
      int32_t d = L->me + j < L->n ? L->me + j : L->me + j - L->n;
      cco_impl_ll_store(L->stage0 + (uint64_t)d * L->stride + off, l0, l1);
    }
  }

  /* Pull from this rank's own staging, in rank order; this rank's own
   * input is read again here, before the same thread writes the same
   * output pair, which makes the call safe in place. */
  ccoDevStatus_t st = ccoDevSuccess;
  uint64_t start = L->timeoutNs ? cco_impl_clock_ns() : 0;
  for (uint64_t q = L->tid; q < owned && st == ccoDevSuccess; q += L->nthr) {
    uint64_t c = cco_impl_ll_chunk(L, q), pair = c * CCO_IMPL_COLL_LL_CHUNK_PAIRS + q % CCO_IMPL_COLL_LL_CHUNK_PAIRS;
    if (pair >= pairs) continue;
    uint32_t epoch = L->epochs[c] + 1u;
    uint32_t acc[4] = {0, 0, 0, 0};
    for (int32_t src = 0; src < L->n && st == ccoDevSuccess; src++) {
      uint64_t v = 0;
      if (src == L->me) v = cco_impl_ll_ld_msg(L->in, pair, L->bytes, L->es, L->inAligned8);
      else st = cco_impl_ll_wait(L->dc, myStage + cco_impl_ll_line_off(epoch, L->n, src, pair), epoch, start,
                                 L->timeoutNs, &v);
      uint32_t w[2] = {(uint32_t)v, (uint32_t)(v >> 32)};
      CCO_IMPL_UNROLL_ for (int l = 0; l < 4; l++) {
        if (l >= lanes) continue;
        uint32_t x = cco_impl_coll_lane(w[l / lpw], l, dt);
        acc[l] = src == 0 ? x : cco_impl_coll_op(acc[l], x, dt, op);
      }
    }
    if (st != ccoDevSuccess) break;
    /* Lanes past the message were zeros and are not stored. */
    uint64_t out = (uint64_t)cco_impl_coll_pack(acc, 0, dt) | ((uint64_t)cco_impl_coll_pack(acc, 1, dt) << 32);
    cco_impl_ll_st_msg(L->out, pair, L->bytes, L->es, L->outAligned8, out);
  }
  /* One verdict for the block (also a sync: every thread has read the
   * epochs before they move on). */
  st = cco_impl_lsa_scope_status(ccoCoopBlock, st);
  for (uint64_t i = L->tid; i < myChunks; i += L->nthr) L->epochs[L->part + i * L->nParts] += 1u;
  ccoCoopSync(ccoCoopBlock); /* the next call of this block reads the new epochs */
  return st;
}

/* The switch on type and operator, outside the loops. */
CCO_DEVICE_INLINE ccoDevStatus_t cco_impl_coll_ll_typed(const cco_impl_coll_ll_call* L, ccoDataType_t dt, ccoRedOp_t op) {
  ccoDevStatus_t st = ccoDevInvalid;
#define CCO_IMPL_LL_BODY_(D, O) st = cco_impl_coll_ll_run(L, D, O)
  CCO_IMPL_COLL_DISPATCH(dt, op, CCO_IMPL_LL_BODY_);
#undef CCO_IMPL_LL_BODY_
  return st;
}

#endif /* CCO_DEVICE_IMPL_COLL_LL_IMPL_H_ */
