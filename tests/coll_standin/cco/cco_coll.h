/*
 * TEMPORARY stand-in for the collectives' device building blocks
 * (include/cco/cco_coll.h), used only until the real header lands; the
 * build adds this folder to the include path only when the real header is
 * absent. Same prototypes, simple bodies: every block is "barrier, check
 * the call signature, pull, barrier", and every all-reduce algorithm is the
 * same chunked pull through the scratch area. Correct, not fast.
 *
 * In place: all-reduce and broadcast with recv == send; all-gather with
 * send == recv meaning this rank's contribution is already block lsaRank of
 * recv; reduce-scatter with recv == send meaning the result goes to block
 * lsaRank of send.
 */
#ifndef CCO_CCO_COLL_H_
#define CCO_CCO_COLL_H_

#include <stddef.h>
#include <stdint.h>

#include "cco/cco_coll_types.h"
#include "cco/cco_device.h"

#define CCO_COLL_LL_MAX_BYTES (64u * 1024u)
#define CCO_COLL_MAX_PARTS 32u
/* Per-part staging of the reductions, and the signature slots before it. */
#define CCO_COLL_STANDIN_CHUNK (256u * 1024u)
#define CCO_COLL_STANDIN_SIG_BYTES (8u * CCO_COLL_MAX_PARTS)

CCO_HOST_DEVICE_INLINE uint64_t ccoDevCollScratchBytes(int lsaSize, uint32_t nParts) {
  (void)lsaSize;
  return CCO_COLL_STANDIN_SIG_BYTES + (uint64_t)nParts * CCO_COLL_STANDIN_CHUNK;
}

/* ------------------------------------------------------------ elements */

typedef union {
  float f;
  uint32_t u;
} cco_standin_bits;

CCO_DEVICE_INLINE float cco_standin_bf16_to_f32(uint16_t h) {
  cco_standin_bits b;
  b.u = (uint32_t)h << 16;
  return b.f;
}

CCO_DEVICE_INLINE uint16_t cco_standin_f32_to_bf16(float f) {
  cco_standin_bits b;
  b.f = f;
  if ((b.u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((b.u >> 16) | 0x40u);
  return (uint16_t)((b.u + 0x7fffu + ((b.u >> 16) & 1u)) >> 16);
}

CCO_DEVICE_INLINE float cco_standin_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  cco_standin_bits b;
  if (exp == 0x1fu) {
    b.u = sign | 0x7f800000u | (man << 13);
  } else if (exp) {
    b.u = sign | ((exp + 112u) << 23) | (man << 13);
  } else { /* zero or subnormal: man x 2^-24, exact in fp32 */
    b.f = (float)man * (1.0f / 16777216.0f);
    b.u |= sign;
  }
  return b.f;
}

CCO_DEVICE_INLINE uint16_t cco_standin_f32_to_f16(float f) {
  cco_standin_bits b;
  b.f = f;
  uint32_t sign = (b.u >> 16) & 0x8000u, a = b.u & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to infinity */
  if (a < 0x38800000u) {                                   /* subnormal or zero in fp16 */
    uint32_t shift = 126u - (a >> 23);
    if (shift > 24u) return (uint16_t)sign;
    uint32_t man = (a & 0x7fffffu) | 0x800000u;
    uint32_t q = man >> shift, rem = man & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    q += rem > half || (rem == half && (q & 1u));
    return (uint16_t)(sign | q);
  }
  uint32_t r = a + 0xfffu + ((a >> 13) & 1u) - 0x38000000u;
  return (uint16_t)(sign | (r >> 13));
}

CCO_DEVICE_INLINE float cco_standin_load(const void* p, uint64_t i, uint32_t dtype) {
  switch (dtype) {
    case ccoBfloat16: return cco_standin_bf16_to_f32(((const uint16_t*)p)[i]);
    case ccoFloat16: return cco_standin_f16_to_f32(((const uint16_t*)p)[i]);
    default: return ((const float*)p)[i];
  }
}

CCO_DEVICE_INLINE void cco_standin_store(void* p, uint64_t i, uint32_t dtype, float v) {
  if (dtype == ccoBfloat16) ((uint16_t*)p)[i] = cco_standin_f32_to_bf16(v);
  else if (dtype == ccoFloat16) ((uint16_t*)p)[i] = cco_standin_f32_to_f16(v);
  else ((float*)p)[i] = v;
}

/* out[i] = op over peers (LSA rank order) of in_p[i], for i in [first, last). */
CCO_DEVICE_INLINE void cco_standin_reduce(ccoWindow_t win, uint64_t off, int lsaSize, uint32_t dtype,
                                         uint32_t op, uint64_t first, uint64_t last, void* out,
                                         uint64_t outFirst) {
  uint32_t t = ccoCoopRank(ccoCoopBlock), nt = ccoCoopSize(ccoCoopBlock);
  for (uint64_t i = first + t; i < last; i += nt) {
    if (dtype == ccoInt32) {
      int32_t acc = 0;
      for (int p = 0; p < lsaSize; p++) {
        int32_t v = ((const int32_t*)ccoGetLsaPeerPtr(win, p, off))[i];
        acc = p == 0 ? v
              : op == ccoSum ? (int32_t)((uint32_t)acc + (uint32_t)v)
              : op == ccoMax ? (v > acc ? v : acc)
                             : (v < acc ? v : acc);
      }
      ((int32_t*)out)[outFirst + (i - first)] = acc;
    } else {
      float acc = 0.0f;
      for (int p = 0; p < lsaSize; p++) {
        float v = cco_standin_load(ccoGetLsaPeerPtr(win, p, off), i, dtype);
        acc = p == 0 ? v : op == ccoSum ? acc + v : op == ccoMax ? (v > acc ? v : acc) : (v < acc ? v : acc);
      }
      if (dtype == ccoFloat32) ((float*)out)[outFirst + (i - first)] = acc;
      else cco_standin_store(out, outFirst + (i - first), dtype, acc);
    }
  }
}

CCO_DEVICE_INLINE void cco_standin_copy(void* dst, const void* src, uint64_t bytes) {
  if (dst == src) return;
  uint32_t t = ccoCoopRank(ccoCoopBlock), nt = ccoCoopSize(ccoCoopBlock);
  for (uint64_t i = t; i < bytes; i += nt) ((uint8_t*)dst)[i] = ((const uint8_t*)src)[i];
}

/* [first, last) of n items split into nParts shares. */
CCO_DEVICE_INLINE uint64_t cco_standin_split(uint64_t n, uint32_t part, uint32_t nParts) {
  return n * part / nParts;
}

/* Publishes the signature, arrives, waits, and compares every peer's. */
CCO_DEVICE_INLINE ccoDevStatus_t cco_standin_enter(const ccoDevComm* dc, const ccoCollArgs* a, uint32_t part,
                                                  ccoLsaBarrierSession* bar) {
  uint64_t* mine = (uint64_t*)ccoGetLocalPtr(a->scratchWin, a->scratchOff + 8u * part);
  if (ccoCoopRank(ccoCoopBlock) == 0) *mine = a->signature;
  ccoDevStatus_t st = ccoLsaBarrierSync(bar);
  if (st != ccoDevSuccess || !a->signature) return st;
  int bad = 0;
  for (int p = 0; p < dc->lsaSize; p++)
    bad |= *(volatile uint64_t*)ccoGetLsaPeerPtr(a->scratchWin, p, a->scratchOff + 8u * part) != a->signature;
  return bad ? ccoDevInvalid : ccoDevSuccess;
}

CCO_DEVICE_INLINE ccoDevStatus_t cco_standin_leave(ccoLsaBarrierSession* bar, ccoDevStatus_t st) {
  if (st == ccoDevSuccess) st = ccoLsaBarrierSync(bar);
  ccoLsaBarrierSessionEnd(bar);
  return st;
}

/* ------------------------------------------------------------ blocks */

CCO_DEVICE_INLINE ccoDevStatus_t cco_standin_allreduce(const ccoDevComm* dc, const ccoCollArgs* a, uint32_t part,
                                                      uint32_t nParts) {
  ccoLsaBarrierSession bar = ccoLsaBarrierSessionInit(dc, a->barrierBase + part, ccoCoopBlock);
  ccoDevStatus_t st = cco_standin_enter(dc, a, part, &bar);
  uint64_t esize = ccoDataTypeSize((ccoDataType_t)a->dtype);
  uint64_t first = cco_standin_split(a->count, part, nParts), last = cco_standin_split(a->count, part + 1, nParts);
  uint64_t chunk = CCO_COLL_STANDIN_CHUNK / esize;
  void* stage = ccoGetLocalPtr(a->scratchWin, a->scratchOff + CCO_COLL_STANDIN_SIG_BYTES +
                                                 (uint64_t)part * CCO_COLL_STANDIN_CHUNK);
  char* out = (char*)ccoGetLocalPtr(a->recvWin, a->recvOff);
  /* Read every peer's chunk into staging, barrier (nobody reads it any
   * more), then write the output: safe in place. */
  for (uint64_t c = first; st == ccoDevSuccess && c < last; c += chunk) {
    uint64_t end = c + chunk < last ? c + chunk : last;
    cco_standin_reduce(a->sendWin, a->sendOff, dc->lsaSize, a->dtype, a->op, c, end, stage, 0);
    st = ccoLsaBarrierSync(&bar);
    if (st == ccoDevSuccess) {
      ccoCoopSync(ccoCoopBlock);
      cco_standin_copy(out + c * esize, stage, (end - c) * esize);
      ccoCoopSync(ccoCoopBlock);
    }
  }
  return cco_standin_leave(&bar, st);
}

CCO_DEVICE_INLINE ccoDevStatus_t ccoDevAllReduceOneShot(const ccoDevComm* dc, const ccoCollArgs* a, uint32_t part,
                                                        uint32_t nParts) {
  return cco_standin_allreduce(dc, a, part, nParts);
}
CCO_DEVICE_INLINE ccoDevStatus_t ccoDevAllReduceLL(const ccoDevComm* dc, const ccoCollArgs* a, uint32_t part,
                                                   uint32_t nParts) {
  return cco_standin_allreduce(dc, a, part, nParts);
}
CCO_DEVICE_INLINE ccoDevStatus_t ccoDevAllReduceTwoShot(const ccoDevComm* dc, const ccoCollArgs* a, uint32_t part,
                                                        uint32_t nParts) {
  return cco_standin_allreduce(dc, a, part, nParts);
}

/* Pulls every peer's block (count elements) into block p of recv. */
CCO_DEVICE_INLINE ccoDevStatus_t ccoDevAllGather(const ccoDevComm* dc, const ccoCollArgs* a, uint32_t part,
                                                 uint32_t nParts) {
  ccoLsaBarrierSession bar = ccoLsaBarrierSessionInit(dc, a->barrierBase + part, ccoCoopBlock);
  ccoDevStatus_t st = cco_standin_enter(dc, a, part, &bar);
  uint64_t bytes = a->count * ccoDataTypeSize((ccoDataType_t)a->dtype);
  uint64_t first = cco_standin_split(bytes, part, nParts), last = cco_standin_split(bytes, part + 1, nParts);
  int inPlace = a->sendWin == a->recvWin && a->sendOff == a->recvOff;
  for (int p = 0; st == ccoDevSuccess && p < dc->lsaSize; p++) {
    uint64_t srcOff = a->sendOff + (inPlace ? (uint64_t)p * bytes : 0);
    const char* src = (const char*)ccoGetLsaPeerPtr(a->sendWin, p, srcOff);
    char* dst = (char*)ccoGetLocalPtr(a->recvWin, a->recvOff + (uint64_t)p * bytes);
    cco_standin_copy(dst + first, src + first, last - first);
  }
  return cco_standin_leave(&bar, st);
}

/* Block lsaRank of every peer's send, reduced, into recv (only this rank
 * reads its own block lsaRank, so in place needs no staging). */
CCO_DEVICE_INLINE ccoDevStatus_t ccoDevReduceScatter(const ccoDevComm* dc, const ccoCollArgs* a, uint32_t part,
                                                     uint32_t nParts) {
  ccoLsaBarrierSession bar = ccoLsaBarrierSessionInit(dc, a->barrierBase + part, ccoCoopBlock);
  ccoDevStatus_t st = cco_standin_enter(dc, a, part, &bar);
  uint64_t bytes = a->count * ccoDataTypeSize((ccoDataType_t)a->dtype);
  uint64_t first = cco_standin_split(a->count, part, nParts), last = cco_standin_split(a->count, part + 1, nParts);
  int inPlace = a->sendWin == a->recvWin && a->sendOff == a->recvOff;
  uint64_t blockOff = a->sendOff + (uint64_t)dc->lsaRank * bytes;
  void* out = ccoGetLocalPtr(a->recvWin, a->recvOff + (inPlace ? (uint64_t)dc->lsaRank * bytes : 0));
  if (st == ccoDevSuccess)
    cco_standin_reduce(a->sendWin, blockOff, dc->lsaSize, a->dtype, a->op, first, last, out, first);
  return cco_standin_leave(&bar, st);
}

/* Block lsaRank of peer p's send into block p of recv. */
CCO_DEVICE_INLINE ccoDevStatus_t ccoDevAlltoAll(const ccoDevComm* dc, const ccoCollArgs* a, uint32_t part,
                                                uint32_t nParts) {
  ccoLsaBarrierSession bar = ccoLsaBarrierSessionInit(dc, a->barrierBase + part, ccoCoopBlock);
  ccoDevStatus_t st = cco_standin_enter(dc, a, part, &bar);
  uint64_t bytes = a->count * ccoDataTypeSize((ccoDataType_t)a->dtype);
  uint64_t first = cco_standin_split(bytes, part, nParts), last = cco_standin_split(bytes, part + 1, nParts);
  for (int p = 0; st == ccoDevSuccess && p < dc->lsaSize; p++) {
    const char* src = (const char*)ccoGetLsaPeerPtr(a->sendWin, p, a->sendOff + (uint64_t)dc->lsaRank * bytes);
    char* dst = (char*)ccoGetLocalPtr(a->recvWin, a->recvOff + (uint64_t)p * bytes);
    cco_standin_copy(dst + first, src + first, last - first);
  }
  return cco_standin_leave(&bar, st);
}

CCO_DEVICE_INLINE ccoDevStatus_t ccoDevAlltoAllv(const ccoDevComm* dc, const ccoCollArgs* a, uint32_t part,
                                                 uint32_t nParts) {
  (void)dc, (void)a, (void)part, (void)nParts;
  return ccoDevUnsupported;
}

/* The root's send into every rank's recv. */
CCO_DEVICE_INLINE ccoDevStatus_t ccoDevBroadcast(const ccoDevComm* dc, const ccoCollArgs* a, uint32_t part,
                                                 uint32_t nParts) {
  ccoLsaBarrierSession bar = ccoLsaBarrierSessionInit(dc, a->barrierBase + part, ccoCoopBlock);
  ccoDevStatus_t st = cco_standin_enter(dc, a, part, &bar);
  uint64_t bytes = a->count * ccoDataTypeSize((ccoDataType_t)a->dtype);
  uint64_t first = cco_standin_split(bytes, part, nParts), last = cco_standin_split(bytes, part + 1, nParts);
  if (st == ccoDevSuccess && (a->root < 0 || a->root >= dc->lsaSize)) st = ccoDevInvalid;
  if (st == ccoDevSuccess) {
    const char* src = (const char*)ccoGetLsaPeerPtr(a->sendWin, a->root, a->sendOff);
    char* dst = (char*)ccoGetLocalPtr(a->recvWin, a->recvOff);
    cco_standin_copy(dst + first, src + first, last - first);
  }
  return cco_standin_leave(&bar, st);
}

#endif /* CCO_CCO_COLL_H_ */
