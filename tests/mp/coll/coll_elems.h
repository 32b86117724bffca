/*
 * Element access shared by the collectives' host-platform tests
 * (mp_coll_api.c, mp_coll_hier.c): names of the types and operators, and
 * each element as the uint32_t of its bits (2-byte types in the low half).
 */
#ifndef CCO_TESTS_MP_COLL_COLL_ELEMS_H_
#define CCO_TESTS_MP_COLL_COLL_ELEMS_H_

#include <stddef.h>
#include <stdint.h>

#include "cco/cco.h"

static const char* const k_dtype_names[] = {"fp32", "bf16", "fp16", "int32"};
static const char* const k_op_names[] = {"sum", "max", "min"};

typedef union {
  float f;
  uint32_t u;
} bits32;

static inline size_t esize_of(int dtype) { return dtype == ccoBfloat16 || dtype == ccoFloat16 ? 2 : 4; }

static inline void put(void* buf, int dtype, uint64_t i, uint32_t v) {
  if (esize_of(dtype) == 2) ((uint16_t*)buf)[i] = (uint16_t)v;
  else ((uint32_t*)buf)[i] = v;
}

static inline uint32_t get(const void* buf, int dtype, uint64_t i) {
  return esize_of(dtype) == 2 ? ((const uint16_t*)buf)[i] : ((const uint32_t*)buf)[i];
}

#endif /* CCO_TESTS_MP_COLL_COLL_ELEMS_H_ */
