/*
 * Data patterns shared by the multi-process transport tests (mp_sdma,
 * mp_gda): a block is named by a seed, any length and alignment, and a
 * check names the first byte that differs, so a torn or shifted transfer
 * shows where it went wrong.
 */
#ifndef CCO_TESTS_MP_PATTERN_H_
#define CCO_TESTS_MP_PATTERN_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static inline uint64_t key4(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
  return mix64(mix64(mix64(mix64(a) ^ b) ^ c) ^ d);
}

/* `bytes` bytes of the sequence named by seed: word i is mix64(seed + i),
 * so the slice at byte offset 8k of fill(seed) is fill(seed + k). */
static inline void fill(void* dst, size_t bytes, uint64_t seed) {
  uint8_t* p = (uint8_t*)dst;
  size_t words = bytes / 8;
  for (size_t i = 0; i < words; i++) {
    uint64_t v = mix64(seed + i);
    memcpy(p + 8 * i, &v, 8);
  }
  if (bytes % 8) {
    uint64_t v = mix64(seed + words);
    memcpy(p + 8 * words, &v, bytes % 8);
  }
}

/* Index of the first byte that differs from fill(seed), or `bytes`. */
static inline size_t first_diff(const void* got, size_t bytes, uint64_t seed) {
  const uint8_t* p = (const uint8_t*)got;
  size_t words = bytes / 8;
  for (size_t i = 0; i < words; i++) {
    uint64_t v = mix64(seed + i), g;
    memcpy(&g, p + 8 * i, 8);
    if (g != v)
      for (size_t k = 0; k < 8; k++)
        if (p[8 * i + k] != (uint8_t)(v >> (8 * k))) return 8 * i + k;
  }
  if (bytes % 8) {
    uint64_t v = mix64(seed + words);
    for (size_t k = 0; k < bytes % 8; k++)
      if (p[8 * words + k] != (uint8_t)(v >> (8 * k))) return 8 * words + k;
  }
  return bytes;
}

#endif /* CCO_TESTS_MP_PATTERN_H_ */
