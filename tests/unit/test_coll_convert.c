/* The collectives' bf16 and fp16 <-> fp32 conversions (cco/cco_coll.h):
 * known bit patterns (ties, overflow, infinities, NaN, subnormals, signed
 * zero), exhaustive widening and round trips, and narrowing checked against
 * references computed another way over a sweep of fp32 patterns. */
#include <math.h>
#include <stdint.h>

#include "cco/cco_coll.h"
#include "test.h"

static float f32_of(uint32_t u) { return cco_impl_bits_to_f32(u); }
static uint32_t bits_of(float f) { return cco_impl_f32_to_bits(f); }

typedef struct {
  uint32_t in;
  uint16_t want;
} narrow_case;

TEST(bf16_known_patterns) {
  static const narrow_case cases[] = {
      {0x3f800000u, 0x3f80}, /* 1.0 */
      {0x3f808000u, 0x3f80}, /* tie, even stays */
      {0x3f818000u, 0x3f82}, /* tie, odd rounds up */
      {0x3f808001u, 0x3f81}, /* just above the tie */
      {0x3f807fffu, 0x3f80}, /* just below */
      {0xc0490fdbu, 0xc049}, /* -pi */
      {0x7f7fffffu, 0x7f80}, /* the largest float rounds up to infinity */
      {0x7f7f8000u, 0x7f80}, /* tie below infinity, odd: infinity */
      {0x7f7f7fffu, 0x7f7f}, /* the largest bf16 */
      {0xff7fffffu, 0xff80}, /* negative overflow */
      {0x7f800000u, 0x7f80}, /* inf */
      {0xff800000u, 0xff80}, /* -inf */
      {0x7fc00000u, 0x7fff}, /* NaN: canonical, like cvt.rn.bf16.f32 */
      {0x7f800001u, 0x7fff}, /* signalling NaN */
      {0xffc00001u, 0x7fff}, /* negative NaN */
      {0x00000000u, 0x0000}, /* +0 */
      {0x80000000u, 0x8000}, /* -0 */
      {0x00010000u, 0x0001}, /* a bf16 subnormal, exact */
      {0x00008000u, 0x0000}, /* tie at the smallest subnormal: even (0) */
      {0x00018000u, 0x0002}, /* tie, odd: up */
      {0x00000001u, 0x0000}, /* the smallest float subnormal */
      {0x807fffffu, 0x8080}, /* the largest negative subnormal rounds to -2^-126 */
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    uint16_t got = ccoFloatToBfloat16(f32_of(cases[i].in));
    if (got != cases[i].want) fprintf(stderr, "  bf16(%#010x) = %#06x, want %#06x\n", cases[i].in, got, cases[i].want);
    CHECK_EQ(got, cases[i].want);
    CHECK_EQ(cco_impl_f32_bits_to_bf16_c(cases[i].in), cases[i].want);
  }
  CHECK(ccoBfloat16ToFloat(0x3f80) == 1.0f);
  CHECK(ccoBfloat16ToFloat(0xc049) == -3.140625f);
  CHECK(isinf(ccoBfloat16ToFloat(0xff80)) && ccoBfloat16ToFloat(0xff80) < 0);
  CHECK(isnan(ccoBfloat16ToFloat(0x7fff)));
  CHECK_EQ(bits_of(ccoBfloat16ToFloat(0x8000)), 0x80000000u);
}

TEST(f16_known_patterns) {
  static const narrow_case cases[] = {
      {0x3f800000u, 0x3c00}, /* 1.0 */
      {0xc0000000u, 0xc000}, /* -2.0 */
      {0x3f801000u, 0x3c00}, /* 1 + 2^-11: tie, even stays */
      {0x3f803000u, 0x3c02}, /* 1 + 3 x 2^-11: tie, odd rounds up */
      {0x3f801001u, 0x3c01}, /* just above the tie */
      {0x477fe000u, 0x7bff}, /* 65504, the largest half */
      {0x477fefffu, 0x7bff}, /* just below 65520 */
      {0x477ff000u, 0x7c00}, /* 65520: tie with an odd mantissa, infinity */
      {0xc77ff000u, 0xfc00}, /* negative */
      {0x7f7fffffu, 0x7c00}, /* far past it */
      {0x7f800000u, 0x7c00}, /* inf */
      {0xff800000u, 0xfc00}, /* -inf */
      {0x7fc00000u, 0x7fff}, /* NaN: canonical, like cvt.rn.f16.f32 */
      {0xff800001u, 0x7fff}, /* negative signalling NaN */
      {0x38800000u, 0x0400}, /* 2^-14, the smallest normal */
      {0x387fc000u, 0x03ff}, /* 1023 x 2^-24, the largest subnormal */
      {0x387fe000u, 0x0400}, /* 1023.5 x 2^-24: tie, odd: up into the normals */
      {0x387fdfffu, 0x03ff}, /* just below that tie */
      {0x33800000u, 0x0001}, /* 2^-24, the smallest subnormal */
      {0x33000000u, 0x0000}, /* 2^-25: tie, even (0) */
      {0x33000001u, 0x0001}, /* just above it */
      {0x33c00000u, 0x0002}, /* 3 x 2^-25: tie between 1 and 2, even (2) */
      {0x34200000u, 0x0002}, /* 5 x 2^-25: tie between 2 and 3, even (2) */
      {0x32ffffffu, 0x0000}, /* below half the smallest subnormal */
      {0xb3800000u, 0x8001}, /* -2^-24 */
      {0xb2000000u, 0x8000}, /* a tiny negative: -0 */
      {0x00000001u, 0x0000}, /* a float subnormal */
      {0x80000000u, 0x8000}, /* -0 */
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    uint16_t got = ccoFloatToFloat16(f32_of(cases[i].in));
    if (got != cases[i].want) fprintf(stderr, "  f16(%#010x) = %#06x, want %#06x\n", cases[i].in, got, cases[i].want);
    CHECK_EQ(got, cases[i].want);
  }
  CHECK(ccoFloat16ToFloat(0x3c00) == 1.0f);
  CHECK(ccoFloat16ToFloat(0x7bff) == 65504.0f);
  CHECK(ccoFloat16ToFloat(0x0001) == ldexpf(1.0f, -24));
  CHECK(ccoFloat16ToFloat(0x03ff) == ldexpf(1023.0f, -24));
  CHECK(ccoFloat16ToFloat(0x8001) == -ldexpf(1.0f, -24));
  CHECK(isinf(ccoFloat16ToFloat(0x7c00)) && isinf(ccoFloat16ToFloat(0xfc00)) && ccoFloat16ToFloat(0xfc00) < 0);
  CHECK(isnan(ccoFloat16ToFloat(0x7e00)) && isnan(ccoFloat16ToFloat(0x7c01)) && isnan(ccoFloat16ToFloat(0xfc01)));
  CHECK_EQ(bits_of(ccoFloat16ToFloat(0x8000)), 0x80000000u);
}

/* Every half pattern: widening is exact (checked against its value built
 * with ldexp) and narrowing gives the pattern back. */
TEST(exhaustive_widening_and_round_trip) {
  int bad = 0;
  for (uint32_t h = 0; h < 0x10000u && bad < 10; h++) {
    uint16_t x = (uint16_t)h;
    /* bf16 */
    float b = ccoBfloat16ToFloat(x);
    if (bits_of(b) != h << 16) bad++;
    if ((h & 0x7fffu) <= 0x7f80u && ccoFloatToBfloat16(b) != x) bad++;
    if ((h & 0x7fffu) > 0x7f80u && (!isnan(b) || ccoFloatToBfloat16(b) != 0x7fff)) bad++;
    /* f16 */
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    float f = ccoFloat16ToFloat(x), want;
    if (exp == 0x1f) want = man ? NAN : INFINITY;
    else if (exp == 0) want = ldexpf((float)man, -24);
    else want = ldexpf((float)(1024 + man), (int)exp - 25);
    if (h & 0x8000u) want = -want;
    if (exp == 0x1f && man) {
      if (!isnan(f) || ccoFloatToFloat16(f) != 0x7fff) bad++;
    } else if (bits_of(f) != bits_of(want) || ccoFloatToFloat16(f) != x) {
      if (bad < 3) fprintf(stderr, "  f16 %#06x widened to %#010x, want %#010x\n", h, bits_of(f), bits_of(want));
      bad++;
    }
  }
  CHECK_EQ(bad, 0);
}

/* Round to nearest even to a format with `mbits` mantissa bits, computed
 * in double with the value's neighbours: a reference written unlike the
 * conversions under test. Finite, non-NaN input; min_exp is the format's
 * smallest normal exponent, max the largest finite value. */
static double round_ref(double x, int mbits, int minExp, double max) {
  double a = fabs(x);
  if (a == 0) return x;
  int e;
  frexp(a, &e); /* a = m * 2^e, m in [0.5, 1) */
  int q = (e - 1 < minExp ? minExp : e - 1) - mbits; /* exponent of one ulp */
  double ulp = ldexp(1.0, q);
  double lo = floor(a / ulp) * ulp, hi = lo + ulp;
  double r;
  if (a - lo < hi - a) r = lo;
  else if (hi - a < a - lo) r = hi;
  else r = fmod(lo / ulp, 2.0) == 0.0 ? lo : hi;
  /* Past the largest finite value by half an ulp of it or more: infinity. */
  if (r > max) r = INFINITY;
  return x < 0 ? -r : r;
}

TEST(narrowing_matches_a_reference) {
  int bad = 0;
  long checked = 0;
  const double bfMax = ldexp(255.0 / 128.0, 127), hMax = 65504.0;
  /* A prime stride over all fp32 patterns, plus every pattern near the
   * halves' ties and limits (the low 16 bits around the bf16 rounding
   * point, and all of them around the f16 range's edges). */
  for (uint64_t u = 0; u <= 0xffffffffu && bad < 10; u += 65521u) {
    for (uint32_t d = 0; d < 8; d++) {
      uint32_t v = (uint32_t)u ^ (d < 4 ? d << 14 : (d - 4u) << 12) ^ 0x8000u * (d & 1u);
      float x = f32_of(v);
      if (isnan(x)) continue;
      checked++;
      double rb = round_ref(x, 7, -126, bfMax), rh = round_ref(x, 10, -14, hMax);
      uint16_t b = ccoFloatToBfloat16(x), h = ccoFloatToFloat16(x);
      if ((double)ccoBfloat16ToFloat(b) != rb || (rb == 0 && !signbit(rb) != !signbit(ccoBfloat16ToFloat(b)))) {
        if (bad < 3) fprintf(stderr, "  bf16(%#010x) = %#06x, want %g\n", v, b, rb);
        bad++;
      }
      if ((double)ccoFloat16ToFloat(h) != rh || (rh == 0 && !signbit(rh) != !signbit(ccoFloat16ToFloat(h)))) {
        if (bad < 3) fprintf(stderr, "  f16(%#010x) = %#06x, want %g\n", v, h, rh);
        bad++;
      }
    }
  }
  CHECK_EQ(bad, 0);
  CHECK(checked > 500000);
}

/* The packed narrowing the vector stores use: the lower element first. */
TEST(packed_pairs) {
  CHECK_EQ(cco_impl_f32_bits_to_half2(0x3f800000u, 0xc0000000u, 1), 0xc0003f80u);
  CHECK_EQ(cco_impl_f32_bits_to_half2(0x3f800000u, 0xc0000000u, 0), 0xc0003c00u);
}

int main(void) { return RUN_TESTS(); }
