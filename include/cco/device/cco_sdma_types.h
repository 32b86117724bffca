/*
 * SDMA ring ABI, shared by kernels (producers) and the engine thread
 * (consumer). Fixed-width fields only; layouts asserted.
 *
 * One ring per (device communicator, LSA peer, queue):
 * - slots live in host memory mapped for the device: kernels write
 *   descriptors, the engine thread reads them without touching the GPU;
 * - `tail` (device memory) hands out tickets with one atomic add;
 * - a slot is valid when its `seq` equals its ticket + 1 (so a reused slot
 *   can never look valid with an old descriptor);
 * - `head` (host memory mapped for the device) is how far the engine has
 *   read: a producer whose ticket is depth ahead of it waits (credits,
 *   returned in batches); producers keep a copy of it in device memory,
 *   next to `tail`, and read the host word only when the copy says full;
 * - `completed` (device memory) counts finished operations; the engine
 *   advances it with a stream write after the copy, so it never overtakes
 *   its data.
 */
#ifndef CCO_DEVICE_CCO_SDMA_TYPES_H_
#define CCO_DEVICE_CCO_SDMA_TYPES_H_

#include <stdint.h>

#define CCO_SDMA_MAX_QUEUES 8
#define CCO_SDMA_DEPTH 256 /* slots per ring, a power of two */
/* Offset from `tail` of the producers' cached copy of `head` (same line). */
#define CCO_SDMA_CACHED_HEAD_OFFSET 8

typedef enum {
  ccoSdmaOpPut = 1,
  ccoSdmaOpGet = 2,
  ccoSdmaOpSignal = 3, /* no data: only the remote signal (ccoSdmaCommit) */
} ccoSdmaOp_t;

#define CCO_SDMA_FLAG_REMOTE_SIGNAL 1u /* bump the peer's signal slot after the data */

typedef struct {
  uint64_t dst;   /* flat VA address */
  uint64_t src;   /* flat VA address */
  uint64_t bytes; /* 0 allowed */
  uint32_t op;    /* ccoSdmaOp_t */
  uint32_t flags; /* CCO_SDMA_FLAG_* */
  uint64_t seq;   /* ticket + 1 once the descriptor above is complete */
  uint64_t reserved[3];
} ccoSdmaSlot;

typedef struct {
  uint64_t slots;     /* device address of ccoSdmaSlot[CCO_SDMA_DEPTH] */
  uint64_t tail;      /* device address of uint64_t: tickets handed out */
  uint64_t head;      /* device address of uint64_t: slots the engine has read */
  uint64_t completed; /* device address of uint64_t: operations finished */
} ccoSdmaQueueDev;

/* What dc.sdma points to (device memory). */
typedef struct {
  uint32_t queueCount;
  uint32_t lsaSize;
  uint64_t queues;        /* device address of ccoSdmaQueueDev[lsaSize][queueCount] */
  uint64_t signalsOffset; /* in the resource window: uint64_t[lsaSize (source)][queueCount] */
  uint64_t reserved[5];
} ccoSdmaDev;

#ifdef __cplusplus
#define CCO_SDMA_ASSERT_ static_assert
#else
#define CCO_SDMA_ASSERT_ _Static_assert
#endif
CCO_SDMA_ASSERT_(sizeof(ccoSdmaSlot) == 64, "ccoSdmaSlot layout");
CCO_SDMA_ASSERT_(sizeof(ccoSdmaQueueDev) == 32, "ccoSdmaQueueDev layout");
CCO_SDMA_ASSERT_(sizeof(ccoSdmaDev) == 64, "ccoSdmaDev layout");

/* ------------------------------------------------------ names before 0.2 */
/* Kept so code written against 0.1 still compiles; hidden when
 * CCO_NO_COMPAT_NAMES is defined. */
#ifndef CCO_NO_COMPAT_NAMES
#define CCO_SDMA_OP_PUT ccoSdmaOpPut
#define CCO_SDMA_OP_GET ccoSdmaOpGet
#define CCO_SDMA_OP_SIGNAL ccoSdmaOpSignal
#endif /* CCO_NO_COMPAT_NAMES */

#endif /* CCO_DEVICE_CCO_SDMA_TYPES_H_ */
