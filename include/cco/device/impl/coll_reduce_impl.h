/*
 * Private: the data movement of the collectives' device blocks: element
 * lanes and reduction operators per type, 16-byte vector accesses, and the
 * two loops everything else is made of, cco_impl_coll_reduce (several
 * sources, reduced in order, stored to one or several destinations) and
 * cco_impl_coll_copy. Names start with cco_impl_ and may change in any
 * release.
 *
 * Type and operator are arguments, not templates: the public functions
 * switch on them once (cco_impl_coll_dispatch) and call these inline
 * functions with constants, so every loop below is compiled per type and
 * operator with the switches folded away.
 *
 * Accumulators are 32-bit words: an fp32 (also the widened bf16/fp16) or an
 * int32, as bits. Half types are summed in fp32 and rounded once, when
 * stored.
 */
#include "cco/cco_device.h"

#ifndef CCO_DEVICE_IMPL_COLL_REDUCE_IMPL_H_
#define CCO_DEVICE_IMPL_COLL_REDUCE_IMPL_H_

#include <stdint.h>

#include "cco/cco_coll_types.h"
#include "cco/device/impl/arch_impl.h"
#include "cco/device/impl/coll_convert_impl.h"

/* Fully unrolled loops keep lanes and in-flight vectors in registers. */
#if defined(__CUDACC__) || defined(__clang__)
#define CCO_IMPL_UNROLL_ _Pragma("unroll")
#elif defined(__GNUC__)
#define CCO_IMPL_UNROLL_ _Pragma("GCC unroll 8")
#else
#define CCO_IMPL_UNROLL_
#endif

/* Vectors each thread keeps in flight per source (16 bytes each). */
#define CCO_IMPL_COLL_UNROLL 4

/* ------------------------------------------------------------ 16 bytes */

/* One 16-byte access: CUDA's uint4 under nvcc and clang's vector type for
 * NVPTX C, both of which compile to one ld.v4 / st.v4; a plain struct
 * moved with memcpy on the host (no aliasing assumptions). */
#if defined(__CUDACC__)
typedef uint4 cco_impl_v16;
#elif defined(__NVPTX__)
typedef uint32_t cco_impl_v16 __attribute__((ext_vector_type(4)));
#else
typedef struct {
  uint32_t x, y, z, w;
} cco_impl_v16;
#endif

CCO_DEVICE_INLINE cco_impl_v16 cco_impl_ld_v16(uint64_t addr) {
#if CCO_ARCH_GPU
  return *(const cco_impl_v16*)(uintptr_t)addr;
#else
  cco_impl_v16 v;
  __builtin_memcpy(&v, (const void*)(uintptr_t)addr, 16);
  return v;
#endif
}

/* Word m (a constant after unrolling) of a vector. */
CCO_DEVICE_INLINE uint32_t cco_impl_v16_word(cco_impl_v16 v, int m) {
  return m == 0 ? v.x : m == 1 ? v.y : m == 2 ? v.z : v.w;
}

CCO_DEVICE_INLINE cco_impl_v16 cco_impl_v16_make(const uint32_t* w) {
  cco_impl_v16 v;
  v.x = w[0];
  v.y = w[1];
  v.z = w[2];
  v.w = w[3];
  return v;
}

/* Stores 16 bytes at an address aligned to `align` (16, 8, 4 or 2: the
 * destination may sit differently from the source; the branch is the same
 * for every vector of a call). */
CCO_DEVICE_INLINE void cco_impl_st_v16(uint64_t addr, cco_impl_v16 v, uint32_t align) {
#if CCO_ARCH_GPU
  if (align == 16) {
    *(cco_impl_v16*)(uintptr_t)addr = v;
    return;
  }
  uint32_t w[4] = {v.x, v.y, v.z, v.w};
  if (align == 8) {
    uint64_t* p = (uint64_t*)(uintptr_t)addr;
    p[0] = (uint64_t)w[0] | ((uint64_t)w[1] << 32);
    p[1] = (uint64_t)w[2] | ((uint64_t)w[3] << 32);
  } else if (align == 4) {
    uint32_t* p = (uint32_t*)(uintptr_t)addr;
    CCO_IMPL_UNROLL_ for (int m = 0; m < 4; m++) p[m] = w[m];
  } else {
    uint16_t* p = (uint16_t*)(uintptr_t)addr;
    CCO_IMPL_UNROLL_ for (int m = 0; m < 4; m++) {
      p[2 * m] = (uint16_t)w[m];
      p[2 * m + 1] = (uint16_t)(w[m] >> 16);
    }
  }
#else
  (void)align;
  __builtin_memcpy((void*)(uintptr_t)addr, &v, 16);
#endif
}

/* ------------------------------------------------------ elements, lanes */

CCO_HOST_DEVICE_INLINE uint32_t cco_impl_coll_es(ccoDataType_t dt) { return (uint32_t)ccoDataTypeSize(dt); }

/* One element at addr (aligned to its size) as an accumulator word. */
CCO_DEVICE_INLINE uint32_t cco_impl_coll_ld_elem(uint64_t addr, ccoDataType_t dt) {
#if CCO_ARCH_GPU
  if (dt == ccoBfloat16) return cco_impl_bf16_to_f32_bits(*(const uint16_t*)(uintptr_t)addr);
  if (dt == ccoFloat16) return cco_impl_f16_to_f32_bits(*(const uint16_t*)(uintptr_t)addr);
  return *(const uint32_t*)(uintptr_t)addr;
#else
  if (dt == ccoBfloat16 || dt == ccoFloat16) {
    uint16_t h;
    __builtin_memcpy(&h, (const void*)(uintptr_t)addr, 2);
    return dt == ccoBfloat16 ? cco_impl_bf16_to_f32_bits(h) : cco_impl_f16_to_f32_bits(h);
  }
  uint32_t w;
  __builtin_memcpy(&w, (const void*)(uintptr_t)addr, 4);
  return w;
#endif
}

/* Stores an accumulator word as one element (half types rounded here). */
CCO_DEVICE_INLINE void cco_impl_coll_st_elem(uint64_t addr, uint32_t acc, ccoDataType_t dt) {
  if (dt == ccoBfloat16 || dt == ccoFloat16) {
    uint16_t h = dt == ccoBfloat16 ? cco_impl_f32_bits_to_bf16(acc) : cco_impl_f32_bits_to_f16(acc);
#if CCO_ARCH_GPU
    *(uint16_t*)(uintptr_t)addr = h;
#else
    __builtin_memcpy((void*)(uintptr_t)addr, &h, 2);
#endif
    return;
  }
#if CCO_ARCH_GPU
  *(uint32_t*)(uintptr_t)addr = acc;
#else
  __builtin_memcpy((void*)(uintptr_t)addr, &acc, 4);
#endif
}

/* Raw element copy (no conversion): es is 2 or 4. */
CCO_DEVICE_INLINE void cco_impl_coll_copy_elem(uint64_t dst, uint64_t src, uint32_t es) {
#if CCO_ARCH_GPU
  if (es == 2) *(uint16_t*)(uintptr_t)dst = *(const uint16_t*)(uintptr_t)src;
  else *(uint32_t*)(uintptr_t)dst = *(const uint32_t*)(uintptr_t)src;
#else
  __builtin_memcpy((void*)(uintptr_t)dst, (const void*)(uintptr_t)src, es == 2 ? 2 : 4);
#endif
}

/* Lane l of the words w[] (two per word for the half types) as an
 * accumulator word. */
CCO_DEVICE_INLINE uint32_t cco_impl_coll_lane(uint32_t word, int l, ccoDataType_t dt) {
  if (dt == ccoBfloat16 || dt == ccoFloat16) {
    uint16_t h = (uint16_t)((l & 1) ? word >> 16 : word);
    return dt == ccoBfloat16 ? cco_impl_bf16_to_f32_bits(h) : cco_impl_f16_to_f32_bits(h);
  }
  return word;
}

/* Lanes per 32-bit word. */
CCO_HOST_DEVICE_INLINE int cco_impl_coll_lanes_per_word(ccoDataType_t dt) {
  return dt == ccoBfloat16 || dt == ccoFloat16 ? 2 : 1;
}

/* Accumulator words acc[2m], acc[2m+1] (half types) or acc[m] as word m. */
CCO_DEVICE_INLINE uint32_t cco_impl_coll_pack(const uint32_t* acc, int m, ccoDataType_t dt) {
  if (dt == ccoBfloat16 || dt == ccoFloat16) return cco_impl_f32_bits_to_half2(acc[2 * m], acc[2 * m + 1], dt == ccoBfloat16);
  return acc[m];
}

/* acc op x. Sums wrap for int32. max and min of floats ignore a NaN operand
 * (IEEE maxNum, like fmaxf); a NaN sum stays NaN. */
CCO_DEVICE_INLINE uint32_t cco_impl_coll_op(uint32_t acc, uint32_t x, ccoDataType_t dt, ccoRedOp_t op) {
  if (dt == ccoInt32) {
    int32_t a = (int32_t)acc, b = (int32_t)x;
    if (op == ccoSum) return acc + x;
    if (op == ccoMax) return b > a ? x : acc;
    return b < a ? x : acc;
  }
  float a = cco_impl_bits_to_f32(acc), b = cco_impl_bits_to_f32(x);
  if (op == ccoSum) return cco_impl_f32_to_bits(a + b);
  if (op == ccoMax) return (b > a || a != a) ? x : acc;
  return (b < a || a != a) ? x : acc;
}

/* a / b on 64-bit operands through the 32-bit division when both fit: GPUs
 * have no 64-bit divide and emulate it in a long instruction sequence;
 * the operands here are counts that almost always fit. */
CCO_HOST_DEVICE_INLINE uint64_t cco_impl_div_u64(uint64_t a, uint64_t b) {
  return ((a | b) >> 32) == 0 ? (uint64_t)((uint32_t)a / (uint32_t)b) : a / b;
}

/* ------------------------------------------------------------- splitting */

/*
 * Pieces of n elements whose first one is at byte address `addr`, cut at
 * 16-byte boundaries of the address space: every piece but the first starts
 * on one, so its vectors are aligned. "Units" are the 16-byte spans that
 * the elements touch; unit u starts at element u * (16 / es) - shift.
 */
typedef struct {
  uint64_t n;     /* elements */
  uint64_t units; /* 16-byte spans */
  uint64_t shift; /* elements of unit 0 before the first one */
  uint32_t per;   /* elements per unit */
} cco_impl_coll_grid;

CCO_HOST_DEVICE_INLINE cco_impl_coll_grid cco_impl_coll_grid_of(uint64_t addr, uint64_t n, uint32_t es) {
  cco_impl_coll_grid g;
  g.n = n;
  g.per = 16u / es;
  g.shift = (addr & 15u) / es;
  g.units = cco_impl_div_u64(n + g.shift + g.per - 1u, g.per);
  return g;
}

/* First element of unit u, clamped to [0, n]. */
CCO_HOST_DEVICE_INLINE uint64_t cco_impl_coll_grid_elem(const cco_impl_coll_grid* g, uint64_t u) {
  if (u == 0) return 0;
  uint64_t e = u * g->per - g->shift;
  return e < g->n ? e : g->n;
}

/* Piece j of k of the units [u0, u1), as elements [*first, *last). */
CCO_HOST_DEVICE_INLINE void cco_impl_coll_piece(const cco_impl_coll_grid* g, uint64_t u0, uint64_t u1, uint64_t j,
                                                uint64_t k, uint64_t* first, uint64_t* last) {
  uint64_t span = u1 - u0;
  uint64_t a = u0 + cco_impl_div_u64(span * j, k), b = u0 + cco_impl_div_u64(span * (j + 1u), k);
  *first = cco_impl_coll_grid_elem(g, a);
  *last = b == g->units ? g->n : cco_impl_coll_grid_elem(g, b);
}

/* ------------------------------------------------------ the two loops */

/*
 * What a loop moves: n elements from nSrc sources (source k at
 * src + k * srcStride bytes) to nDst destinations (destination d at
 * dst + d * dstStride), visited from dstFirst on, round the ring, so that
 * ranks start on different peers; destination dstSkip (-1: none) is left
 * out. Sources are congruent modulo 16 (strides are multiples of 4 GiB),
 * and so are destinations.
 */
typedef struct {
  uint64_t src, srcStride, dst, dstStride, n;
  int32_t nSrc, nDst, dstFirst, dstSkip;
} cco_impl_coll_span;

/* Elements before the sources' first 16-byte boundary (head), whole
 * vectors, and the alignment of the destinations' vectors. */
typedef struct {
  uint64_t head, vecs, tailFirst;
  uint32_t dstAlign;
} cco_impl_coll_shape;

CCO_DEVICE_INLINE cco_impl_coll_shape cco_impl_coll_shape_of(const cco_impl_coll_span* s, uint32_t es) {
  cco_impl_coll_shape sh;
  uint64_t head = ((16u - (s->src & 15u)) & 15u) / es;
  sh.head = head < s->n ? head : s->n;
  sh.vecs = cco_impl_div_u64(s->n - sh.head, 16u / es);
  sh.tailFirst = sh.head + sh.vecs * (16u / es);
  uint64_t d = (s->dst + sh.head * es) | 16u;
  sh.dstAlign = (uint32_t)(d & (~d + 1u)); /* lowest set bit: 2, 4, 8 or 16 */
  return sh;
}

/* Destination visit order: d for step j of nDst. */
CCO_DEVICE_INLINE int32_t cco_impl_coll_dst_at(const cco_impl_coll_span* s, int32_t j) {
  int32_t d = s->dstFirst + j;
  return d >= s->nDst ? d - s->nDst : d;
}

/* Element e of every source, reduced in source order, to every destination. */
CCO_DEVICE_INLINE void cco_impl_coll_reduce_elem(const cco_impl_coll_span* s, uint64_t e, ccoDataType_t dt,
                                                 ccoRedOp_t op) {
  uint64_t off = e * cco_impl_coll_es(dt);
  uint32_t acc = cco_impl_coll_ld_elem(s->src + off, dt);
  for (int32_t k = 1; k < s->nSrc; k++)
    acc = cco_impl_coll_op(acc, cco_impl_coll_ld_elem(s->src + (uint64_t)k * s->srcStride + off, dt), dt, op);
  for (int32_t j = 0; j < s->nDst; j++) {
    int32_t d = cco_impl_coll_dst_at(s, j);
    if (d != s->dstSkip) cco_impl_coll_st_elem(s->dst + (uint64_t)d * s->dstStride + off, acc, dt);
  }
}

/* The elements outside whole vectors (at most 2 x 7): one per thread. */
CCO_DEVICE_INLINE void cco_impl_coll_reduce_edges(const cco_impl_coll_span* s, const cco_impl_coll_shape* sh,
                                                  ccoDataType_t dt, ccoRedOp_t op, uint32_t tid, uint32_t nthr) {
  uint64_t nTail = s->n - sh->tailFirst;
  for (uint64_t i = tid; i < sh->head + nTail; i += nthr)
    cco_impl_coll_reduce_elem(s, i < sh->head ? i : sh->tailFirst + (i - sh->head), dt, op);
}

/*
 * The reduction: thread tid of nthr takes vectors tid, tid + nthr, ...,
 * CCO_IMPL_COLL_UNROLL of them at a time, so that many loads are in flight;
 * for each it loads every source (in source order: every rank computes the
 * same bits), combines lane by lane, converts once and stores the same 16
 * bytes to every destination.
 */
CCO_DEVICE_INLINE void cco_impl_coll_reduce(const cco_impl_coll_span* s, ccoDataType_t dt, ccoRedOp_t op,
                                            uint32_t tid, uint32_t nthr) {
  const uint32_t es = cco_impl_coll_es(dt);
  const int lpw = cco_impl_coll_lanes_per_word(dt), lanes = 4 * lpw;
  cco_impl_coll_shape sh = cco_impl_coll_shape_of(s, es);
  cco_impl_coll_reduce_edges(s, &sh, dt, op, tid, nthr);
  const uint64_t src0 = s->src + sh.head * es, dst0 = s->dst + sh.head * es;
  const uint64_t step = (uint64_t)nthr * CCO_IMPL_COLL_UNROLL;
  for (uint64_t base = tid; base < sh.vecs; base += step) {
    /* Zeros keep the unused lanes and vectors defined (and fold away). */
    uint32_t acc[CCO_IMPL_COLL_UNROLL][8] = {{0}};
    cco_impl_v16 x[CCO_IMPL_COLL_UNROLL];
    /* Source 0 starts the accumulators. */
    CCO_IMPL_UNROLL_ for (int u = 0; u < CCO_IMPL_COLL_UNROLL; u++) {
      uint64_t v = base + (uint64_t)u * nthr;
      x[u] = v < sh.vecs ? cco_impl_ld_v16(src0 + v * 16u) : cco_impl_v16_make(acc[u]);
    }
    CCO_IMPL_UNROLL_ for (int u = 0; u < CCO_IMPL_COLL_UNROLL; u++) {
      CCO_IMPL_UNROLL_ for (int l = 0; l < 8; l++) {
        if (l < lanes) acc[u][l] = cco_impl_coll_lane(cco_impl_v16_word(x[u], l / lpw), l, dt);
      }
    }
    for (int32_t k = 1; k < s->nSrc; k++) {
      uint64_t srck = src0 + (uint64_t)k * s->srcStride;
      CCO_IMPL_UNROLL_ for (int u = 0; u < CCO_IMPL_COLL_UNROLL; u++) {
        uint64_t v = base + (uint64_t)u * nthr;
        if (v < sh.vecs) x[u] = cco_impl_ld_v16(srck + v * 16u);
      }
      CCO_IMPL_UNROLL_ for (int u = 0; u < CCO_IMPL_COLL_UNROLL; u++) {
        CCO_IMPL_UNROLL_ for (int l = 0; l < 8; l++) {
          if (l < lanes)
            acc[u][l] = cco_impl_coll_op(acc[u][l], cco_impl_coll_lane(cco_impl_v16_word(x[u], l / lpw), l, dt), dt, op);
        }
      }
    }
    CCO_IMPL_UNROLL_ for (int u = 0; u < CCO_IMPL_COLL_UNROLL; u++) {
      uint64_t v = base + (uint64_t)u * nthr;
      if (v >= sh.vecs) continue;
      uint32_t w[4];
      CCO_IMPL_UNROLL_ for (int m = 0; m < 4; m++) w[m] = cco_impl_coll_pack(acc[u], m, dt);
      cco_impl_v16 out = cco_impl_v16_make(w);
      for (int32_t j = 0; j < s->nDst; j++) {
        int32_t d = cco_impl_coll_dst_at(s, j);
        if (d != s->dstSkip) cco_impl_st_v16(dst0 + (uint64_t)d * s->dstStride + v * 16u, out, sh.dstAlign);
      }
    }
  }
}

/* The copy: source 0 only, the same vectors stored unchanged to every
 * destination (es: element size, 2 or 4, for the edges). */
CCO_DEVICE_INLINE void cco_impl_coll_copy(const cco_impl_coll_span* s, uint32_t es, uint32_t tid, uint32_t nthr) {
  cco_impl_coll_shape sh = cco_impl_coll_shape_of(s, es);
  uint64_t nTail = s->n - sh.tailFirst;
  for (uint64_t i = tid; i < sh.head + nTail; i += nthr) {
    uint64_t off = (i < sh.head ? i : sh.tailFirst + (i - sh.head)) * es;
    for (int32_t j = 0; j < s->nDst; j++) {
      int32_t d = cco_impl_coll_dst_at(s, j);
      if (d != s->dstSkip) cco_impl_coll_copy_elem(s->dst + (uint64_t)d * s->dstStride + off, s->src + off, es);
    }
  }
  const uint64_t src0 = s->src + sh.head * es, dst0 = s->dst + sh.head * es;
  const uint64_t step = (uint64_t)nthr * CCO_IMPL_COLL_UNROLL;
  for (uint64_t base = tid; base < sh.vecs; base += step) {
    cco_impl_v16 x[CCO_IMPL_COLL_UNROLL];
    CCO_IMPL_UNROLL_ for (int u = 0; u < CCO_IMPL_COLL_UNROLL; u++) {
      uint64_t v = base + (uint64_t)u * nthr;
      if (v < sh.vecs) x[u] = cco_impl_ld_v16(src0 + v * 16u);
    }
    for (int32_t j = 0; j < s->nDst; j++) {
      int32_t d = cco_impl_coll_dst_at(s, j);
      if (d == s->dstSkip) continue;
      CCO_IMPL_UNROLL_ for (int u = 0; u < CCO_IMPL_COLL_UNROLL; u++) {
        uint64_t v = base + (uint64_t)u * nthr;
        if (v < sh.vecs) cco_impl_st_v16(dst0 + (uint64_t)d * s->dstStride + v * 16u, x[u], sh.dstAlign);
      }
    }
  }
}

/* ----------------------------------------------------------- dispatch */

/* Calls body(dt, op) with constants: one copy of the loops per type and
 * operator. `body` is a macro taking the two constants; an unknown pair
 * does nothing (the callers validate first). */
#define CCO_IMPL_COLL_DISPATCH(dt, op, body)                 \
  do {                                                       \
    switch ((uint32_t)(dt) * 4u + (uint32_t)(op)) {          \
      case ccoFloat32 * 4 + ccoSum: body(ccoFloat32, ccoSum); break;   \
      case ccoFloat32 * 4 + ccoMax: body(ccoFloat32, ccoMax); break;   \
      case ccoFloat32 * 4 + ccoMin: body(ccoFloat32, ccoMin); break;   \
      case ccoBfloat16 * 4 + ccoSum: body(ccoBfloat16, ccoSum); break; \
      case ccoBfloat16 * 4 + ccoMax: body(ccoBfloat16, ccoMax); break; \
      case ccoBfloat16 * 4 + ccoMin: body(ccoBfloat16, ccoMin); break; \
      case ccoFloat16 * 4 + ccoSum: body(ccoFloat16, ccoSum); break;   \
      case ccoFloat16 * 4 + ccoMax: body(ccoFloat16, ccoMax); break;   \
      case ccoFloat16 * 4 + ccoMin: body(ccoFloat16, ccoMin); break;   \
      case ccoInt32 * 4 + ccoSum: body(ccoInt32, ccoSum); break;       \
      case ccoInt32 * 4 + ccoMax: body(ccoInt32, ccoMax); break;       \
      case ccoInt32 * 4 + ccoMin: body(ccoInt32, ccoMin); break;       \
      default: break;                                        \
    }                                                        \
  } while (0)

#endif /* CCO_DEVICE_IMPL_COLL_REDUCE_IMPL_H_ */
