/*
 * GDA ring ABI, shared by kernels (producers) and the proxy thread
 * (consumer). Fixed-width fields only; layouts asserted.
 *
 * One ring per (device communicator, context), shared by every peer:
 * - slots live in host memory mapped for the device: kernels write
 *   descriptors, the proxy reads them without touching the GPU;
 * - `tail` (device memory) hands out tickets with one atomic add; the
 *   producers' cached copy of `head` sits next to it;
 * - a slot is written when its `seq` equals its ticket + 1 (a reused slot
 *   never looks written with an old descriptor);
 * - a slot whose flags carry CCO_GDA_FLAG_RING is a doorbell: the proxy
 *   takes the written slots up to the last doorbell it sees, so a post
 *   without one (Deferred, CallerOrdered) waits for a later doorbell;
 * - a flush's fence is its seq word alone, with CCO_GDA_SEQ_FENCE set: no
 *   descriptor to order before it, so a relaxed store (on Hopper a release
 *   is a MEMBAR.SYS); it is a doorbell, and the proxy reads none of the
 *   slot's other words, which still hold an earlier descriptor;
 * - `head` (host memory mapped for the device) counts the operations that
 *   are complete, in ticket order: it is both the producers' credits and
 *   what flush waits on (a slot is reused only once its operation is done).
 *
 * Addresses are slot offsets: byte `o` of a window of this communicator is
 * at offset window.offset + o of every rank's slot, so one number names it
 * at every peer, on any host.
 */
#ifndef CCO_DEVICE_CCO_GDA_TYPES_H_
#define CCO_DEVICE_CCO_GDA_TYPES_H_

#include <stdint.h>

#define CCO_GDA_MAX_CONTEXTS 64
/* Offset from `tail` of the producers' cached copy of `head` (same line). */
#define CCO_GDA_CACHED_HEAD_OFFSET 8

typedef enum {
  ccoGdaOpPut = 1,      /* local -> remote, bytes */
  ccoGdaOpGet = 2,      /* remote -> local, bytes */
  ccoGdaOpPutValue = 3, /* an inline value of `bytes` (1, 2, 4 or 8) bytes */
  ccoGdaOpSignal = 4,   /* only the remote signal, after every earlier op of the ring */
  ccoGdaOpCounter = 5,  /* only the local counter, after every earlier op of the ring */
  ccoGdaOpFence = 6,    /* completes after every earlier op of the ring (flush) */
  ccoGdaOpAddValue = 7, /* an atomic add of `local` to the uint64_t at `remote` (bytes = 8) */
} ccoGdaOp_t;

/* Signal operations (applied at the target, after the data). */
typedef enum {
  ccoGdaSignalOpNone = 0,
  ccoGdaSignalOpInc = 1, /* add 1 */
  ccoGdaSignalOpAdd = 2, /* add signalValue */
} ccoGdaSignalOp_t;

#define CCO_GDA_FLAG_RING 1u /* this post rings the doorbell */
/* In a slot's seq: the slot is a fence over every peer, nothing else set. */
#define CCO_GDA_SEQ_FENCE (1ull << 63)
/* Whether a slot's seq says it holds the post of `ticket`. */
#define CCO_GDA_SLOT_WRITTEN(seq, ticket) (((seq) & ~CCO_GDA_SEQ_FENCE) == (ticket) + 1u)

typedef struct {
  uint64_t remote;      /* slot offset at the peer: put destination, get source */
  uint64_t local;       /* slot offset here: put source, get destination; put-value, add-value: the value */
  uint64_t bytes;       /* put/get size; put-value: 1, 2, 4 or 8 */
  uint64_t signalValue; /* ccoGdaSignalOpAdd amount */
  int32_t peer;         /* world rank (-1 for a fence over every peer) */
  uint16_t op;          /* ccoGdaOp_t */
  uint8_t signalOp;     /* ccoGdaSignalOp_t */
  uint8_t flags;        /* CCO_GDA_FLAG_* */
  uint32_t signal;      /* signal slot at the peer */
  uint32_t counter;     /* local counter + 1; 0: none */
  uint64_t reserved;
  uint64_t seq; /* ticket + 1 once the descriptor above is complete */
} ccoGdaSlot;

typedef struct {
  uint64_t slots; /* device address of ccoGdaSlot[depth] (host-mapped) */
  uint64_t tail;  /* device address of uint64_t (device memory): tickets handed out */
  uint64_t head;  /* device address of uint64_t (host-mapped): operations complete */
  uint64_t reserved;
} ccoGdaContextDev;

/* What dc.gda points to (device memory). */
typedef struct {
  uint32_t contextCount;
  uint32_t queueDepth;  /* slots per ring, a power of two */
  uint32_t signalCount; /* user signal slots; GDA barrier inboxes follow them */
  uint32_t counterCount;
  int32_t worldSize;
  uint32_t connectionType; /* ccoGdaConnectionType_t */
  uint32_t teamKind;       /* ccoTeamKind_t of the GDA team (the peers with endpoints, and self) */
  uint32_t barrierCount;   /* GDA barriers over the rail team */
  uint64_t contexts;       /* device address of ccoGdaContextDev[contextCount] */
  uint64_t peers;          /* device address of uint8_t[worldSize]: 1 = has an endpoint */
  uint64_t signals;        /* device address of uint64_t[signalCount + barriers * railSize] */
  uint64_t counters;       /* device address of uint64_t[counterCount] (host-mapped) */
  uint64_t barrierEpochs;  /* device address of uint64_t[barrierCount] (device memory) */
  uint64_t reserved[5];
} ccoGdaDev;

#ifdef __cplusplus
#define CCO_GDA_ASSERT_ static_assert
#else
#define CCO_GDA_ASSERT_ _Static_assert
#endif
CCO_GDA_ASSERT_(sizeof(ccoGdaSlot) == 64, "ccoGdaSlot layout");
CCO_GDA_ASSERT_(sizeof(ccoGdaContextDev) == 32, "ccoGdaContextDev layout");
CCO_GDA_ASSERT_(sizeof(ccoGdaDev) == 112, "ccoGdaDev layout");

/* ------------------------------------------------------ names before 0.2 */
/* Kept so code written against 0.1 still compiles; hidden when
 * CCO_NO_COMPAT_NAMES is defined. */
#ifndef CCO_NO_COMPAT_NAMES
#define CCO_GDA_OP_PUT ccoGdaOpPut
#define CCO_GDA_OP_GET ccoGdaOpGet
#define CCO_GDA_OP_PUT_VALUE ccoGdaOpPutValue
#define CCO_GDA_OP_SIGNAL ccoGdaOpSignal
#define CCO_GDA_OP_COUNTER ccoGdaOpCounter
#define CCO_GDA_OP_FENCE ccoGdaOpFence
#endif /* CCO_NO_COMPAT_NAMES */

#endif /* CCO_DEVICE_CCO_GDA_TYPES_H_ */
