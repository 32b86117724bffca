/*
 * Private: bf16 and fp16 <-> fp32 conversions of the collectives (public
 * names in cco/cco_coll.h: ccoBfloat16ToFloat ...). Names start with
 * cco_impl_ and may change in any release.
 *
 * Each conversion exists twice: in portable C (the host platform, and the
 * reference the tests check the GPU against), and as the PTX cvt
 * instruction where one exists (sm_80 and later). Narrowing rounds to
 * nearest, ties to even, overflows to infinity, keeps subnormals, and turns
 * every NaN into the canonical NaN 0x7fff, which is what cvt.rn.bf16.f32 and
 * cvt.rn.f16.f32 return, so both versions give the same bits. Widening is
 * exact; it keeps a NaN a NaN (the payload of a widened NaN may differ
 * between the versions, never its narrowing back).
 *
 * A union moves the bits between float and uint32_t: no memcpy (which
 * freestanding NVPTX C lacks), and all three compilers accept it.
 */
#ifndef CCO_DEVICE_IMPL_COLL_CONVERT_IMPL_H_
#define CCO_DEVICE_IMPL_COLL_CONVERT_IMPL_H_

#include <stdint.h>

#include "cco/device/impl/arch_impl.h"

/* The cvt instructions to and from bf16 and f16 pairs need sm_80. */
#if CCO_ARCH_GPU && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define CCO_IMPL_HALF_CVT_ 1
#else
#define CCO_IMPL_HALF_CVT_ 0
#endif

typedef union {
  float f;
  uint32_t u;
} cco_impl_f32_bits;

CCO_HOST_DEVICE_INLINE uint32_t cco_impl_f32_to_bits(float f) {
  cco_impl_f32_bits b;
  b.f = f;
  return b.u;
}

CCO_HOST_DEVICE_INLINE float cco_impl_bits_to_f32(uint32_t u) {
  cco_impl_f32_bits b;
  b.u = u;
  return b.f;
}

/* ----------------------------------------------------------- portable C */

/* bf16 is the top half of an fp32: widening is a shift. */
CCO_HOST_DEVICE_INLINE uint32_t cco_impl_bf16_to_f32_bits(uint16_t h) { return (uint32_t)h << 16; }

/* Adding 0x7fff plus the lowest kept bit rounds the dropped half to
 * nearest, ties to even; a carry moves into the exponent, up to infinity. */
CCO_HOST_DEVICE_INLINE uint16_t cco_impl_f32_bits_to_bf16_c(uint32_t u) {
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fffu; /* NaN */
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

CCO_HOST_DEVICE_INLINE uint32_t cco_impl_f16_to_f32_bits_c(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0x1fu) return sign | 0x7f800000u | (man << 13); /* inf, NaN */
  if (exp == 0) {
    if (man == 0) return sign; /* zero */
    /* Subnormal, man * 2^-24: shift the leading one up to the implicit
     * bit, one exponent step per place. */
    exp = 1;
    while (!(man & 0x400u)) {
      man <<= 1;
      exp--;
    }
    man &= 0x3ffu;
  }
  return sign | ((exp + 112u) << 23) | (man << 13); /* rebias 15 -> 127 */
}

CCO_HOST_DEVICE_INLINE uint16_t cco_impl_f32_bits_to_f16_c(uint32_t u) {
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return 0x7fffu; /* NaN */
  /* 65520 is halfway between 65504 (the largest half, odd mantissa) and
   * 65536: it and everything above round to infinity. */
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
  if (a >= 0x38800000u) { /* a normal half (>= 2^-14): rebias, round 13 bits away */
    a -= 0x38000000u;
    return (uint16_t)(sign | ((a + 0xfffu + ((a >> 13) & 1u)) >> 13));
  }
  /* 2^-25, half the smallest subnormal, is a tie that rounds to even (0). */
  if (a <= 0x33000000u) return sign;
  /* A subnormal half: m * 2^-24 with m = mant >> (126 - exp), rounded. A
   * carry to 0x400 is the smallest normal half, encoded the same way. */
  uint32_t mant = (a & 0x7fffffu) | 0x800000u, shift = 126u - (a >> 23);
  uint32_t m = mant >> shift, rest = mant & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  if (rest > half || (rest == half && (m & 1u))) m++;
  return (uint16_t)(sign | m);
}

/* ------------------------------------------- the GPU's instruction, or C */

CCO_HOST_DEVICE_INLINE uint32_t cco_impl_f16_to_f32_bits(uint16_t h) {
#if CCO_IMPL_HALF_CVT_
  float f;
  __asm__("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return cco_impl_f32_to_bits(f);
#else
  return cco_impl_f16_to_f32_bits_c(h);
#endif
}

CCO_HOST_DEVICE_INLINE uint16_t cco_impl_f32_bits_to_bf16(uint32_t u) {
#if CCO_IMPL_HALF_CVT_
  uint16_t h;
  __asm__("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(cco_impl_bits_to_f32(u)));
  return h;
#else
  return cco_impl_f32_bits_to_bf16_c(u);
#endif
}

CCO_HOST_DEVICE_INLINE uint16_t cco_impl_f32_bits_to_f16(uint32_t u) {
#if CCO_IMPL_HALF_CVT_
  uint16_t h;
  __asm__("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(cco_impl_bits_to_f32(u)));
  return h;
#else
  return cco_impl_f32_bits_to_f16_c(u);
#endif
}

/* Two fp32 values as one word of two halves, lo at the lower address
 * (little endian), as a vector store writes them. bf16 when bf16 != 0,
 * else f16. One packed cvt on the GPU (it puts its first operand in the
 * upper half). */
CCO_HOST_DEVICE_INLINE uint32_t cco_impl_f32_bits_to_half2(uint32_t lo, uint32_t hi, int bf16) {
#if CCO_IMPL_HALF_CVT_
  uint32_t w;
  if (bf16)
    __asm__("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(w) : "f"(cco_impl_bits_to_f32(hi)), "f"(cco_impl_bits_to_f32(lo)));
  else
    __asm__("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(w) : "f"(cco_impl_bits_to_f32(hi)), "f"(cco_impl_bits_to_f32(lo)));
  return w;
#else
  if (bf16) return (uint32_t)cco_impl_f32_bits_to_bf16_c(lo) | ((uint32_t)cco_impl_f32_bits_to_bf16_c(hi) << 16);
  return (uint32_t)cco_impl_f32_bits_to_f16_c(lo) | ((uint32_t)cco_impl_f32_bits_to_f16_c(hi) << 16);
#endif
}

#endif /* CCO_DEVICE_IMPL_COLL_CONVERT_IMPL_H_ */
