/*
 * The window descriptor shared by host code, CUDA kernels and bitcode.
 * Fixed-width fields only; the layout is part of the ABI and asserted.
 *
 * A window is the same range [offset, offset + size) of every rank's slot of
 * the communicator's flat virtual-address space. LSA peer p's copy of byte
 * `off` of the window is at
 *
 *     winBase + p * (stride4G << 32) + off
 *
 * where winBase is the window's address in LSA rank 0's slot.
 */
#ifndef CCO_CCO_WINDOW_H_
#define CCO_CCO_WINDOW_H_

#include <stddef.h>
#include <stdint.h>

#define CCO_WINDOW_MAGIC 0x57494e44u /* "WIND" */

typedef struct ccoWindowDevice {
  uint64_t winBase;  /* window start in LSA rank 0's slot */
  uint32_t stride4G; /* slot stride in units of 4 GiB */
  int32_t lsaRank;   /* this rank's LSA rank */
  int32_t lsaSize;
  uint32_t magic;    /* CCO_WINDOW_MAGIC while registered */
  uint64_t size;     /* bytes of the window */
  uint64_t offset;   /* offset of the window in each slot */
  int32_t rank;      /* this rank's world rank */
  uint32_t flags;    /* reserved, 0 */
  uint64_t netInfo;  /* device address of network registration (GDA), 0 when none */
  uint64_t reserved;
} ccoWindowDevice;

/* What kernels take: the address of a device-visible descriptor. */
typedef ccoWindowDevice* ccoWindow_t;

#ifdef __cplusplus
static_assert(sizeof(ccoWindowDevice) == 64, "ccoWindowDevice layout");
static_assert(offsetof(ccoWindowDevice, stride4G) == 8, "ccoWindowDevice layout");
static_assert(offsetof(ccoWindowDevice, size) == 24, "ccoWindowDevice layout");
static_assert(offsetof(ccoWindowDevice, netInfo) == 48, "ccoWindowDevice layout");
#else
_Static_assert(sizeof(ccoWindowDevice) == 64, "ccoWindowDevice layout");
_Static_assert(offsetof(ccoWindowDevice, stride4G) == 8, "ccoWindowDevice layout");
_Static_assert(offsetof(ccoWindowDevice, size) == 24, "ccoWindowDevice layout");
_Static_assert(offsetof(ccoWindowDevice, netInfo) == 48, "ccoWindowDevice layout");
#endif

#endif /* CCO_CCO_WINDOW_H_ */
