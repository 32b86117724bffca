/*
 * SDMA ring ABI, shared by kernels (producers) and the engine thread
 * (consumer). Fixed-width fields only; layouts asserted.
 *
 * One ring per (device communicator, LSA peer, queue):
 * - slots live in host memory mapped for the device: kernels write
 *   descriptors, the engine thread reads them without touching the GPU;
 * - `tail` (device memory) hands out tickets with one atomic add;
 * - a slot is valid when each of its words carries the tag of its ticket
 *   (ticket + 1, low 32 bits), so a reused slot can never look valid with
 *   an old descriptor;
 * - `head` (host memory mapped for the device) is how far the engine has
 *   read: a producer whose ticket is depth ahead of it waits (credits,
 *   returned in batches); producers keep a copy of it in device memory,
 *   next to `tail`, and read the host word only when the copy says full;
 * - `completed` (device memory) counts finished operations; the engine
 *   advances it with a stream write after the copies, so it never overtakes
 *   its data, when a waiter asks for it in `quietRequest`.
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

/* A slot is eight 64-bit words, each carrying 32 bits of the descriptor
 * (low half) and a tag, the low 32 bits of ticket + 1 (high half). The
 * engine takes the slot once every used word carries its ticket's tag, so
 * a reused slot never looks valid with an old descriptor, and a producer
 * publishes it with plain stores: no release store after the descriptor,
 * whose fence would wait for the descriptor's own writes to cross the bus
 * (docs/sdma.md). An aligned 64-bit store is one bus write and an aligned
 * 64-bit load one read on both sides, so no word is seen torn. */
#define CCO_SDMA_SLOT_WORDS 8
enum {
  CCO_SDMA_WORD_DST_LO = 0,
  CCO_SDMA_WORD_DST_HI = 1,
  CCO_SDMA_WORD_SRC_LO = 2,
  CCO_SDMA_WORD_SRC_HI = 3,
  CCO_SDMA_WORD_BYTES_LO = 4,
  CCO_SDMA_WORD_BYTES_HI = 5,
  CCO_SDMA_WORD_OP_FLAGS = 6, /* op in bits 0-15, flags in bits 16-31 */
  CCO_SDMA_WORDS_USED = 7     /* word 7 is reserved, never written */
};

/* The packing both sides share, so the producer's stores and the engine's
 * reads cannot drift apart: the tag of a ticket's slot, a tagged word, and
 * the op/flags payload. */
#define CCO_SDMA_TAG(ticket) ((uint32_t)((ticket) + 1))
#define CCO_SDMA_TAGGED_WORD(ticket, payload) (((uint64_t)CCO_SDMA_TAG(ticket) << 32) | (uint32_t)(payload))
#define CCO_SDMA_WORD_TAG(word) ((uint32_t)((word) >> 32))
#define CCO_SDMA_PACK_OP_FLAGS(op, flags) (((uint32_t)(op) & 0xffffu) | ((uint32_t)(flags) << 16))
#define CCO_SDMA_UNPACK_OP(payload) ((uint32_t)(payload) & 0xffffu)
#define CCO_SDMA_UNPACK_FLAGS(payload) ((uint32_t)(payload) >> 16)

typedef struct {
  uint64_t word[CCO_SDMA_SLOT_WORDS];
} ccoSdmaSlot;

typedef struct {
  uint64_t slots;     /* device address of ccoSdmaSlot[CCO_SDMA_DEPTH] */
  uint64_t tail;      /* device address of uint64_t: tickets handed out */
  uint64_t head;      /* device address of uint64_t: slots the engine has read */
  uint64_t completed; /* device address of uint64_t: operations finished */
  /* device address of uint64_t in host memory: the ticket count a waiter in
   * ccoSdmaQuiet needs completed. The engine writes `completed` after a pass
   * only when a waiter asked for it (or the pass signals a peer): a stream
   * write between two copies stalls the copy engine between them. */
  uint64_t quietRequest;
  uint64_t reserved[3];
} ccoSdmaQueueDev;

/* What dc.sdma points to (device memory). */
typedef struct {
  uint32_t queueCount;
  uint32_t lsaSize;
  uint64_t queues;        /* device address of ccoSdmaQueueDev[lsaSize][queueCount] */
  uint64_t signalsOffset; /* in the resource window: uint64_t[lsaSize (source)][queueCount] */
  /* 1: a post orders the data before its descriptor with a GPU-scope fence
   * instead of a system-scope one (CCO_SDMA_POST_FENCE, docs/sdma.md). */
  uint32_t postFenceGpu;
  uint32_t pad;
  uint64_t reserved[4];
} ccoSdmaDev;

#ifdef __cplusplus
#define CCO_SDMA_ASSERT_ static_assert
#else
#define CCO_SDMA_ASSERT_ _Static_assert
#endif
CCO_SDMA_ASSERT_(sizeof(ccoSdmaSlot) == 64, "ccoSdmaSlot layout");
CCO_SDMA_ASSERT_(sizeof(ccoSdmaQueueDev) == 64, "ccoSdmaQueueDev layout");
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
