/*
 * Types shared by the collectives' host calls (cco/cco.h: ccoAllReduce ...)
 * and their device building blocks (cco/cco_coll.h: ccoDevAllReduceOneShot
 * ...): element types, reduction operators, algorithms, and the argument
 * block every device building block takes.
 *
 * C11, no CUDA headers: it compiles with nvcc, clang NVPTX (Triton bitcode)
 * and gcc (the host platform), like the rest of the device API.
 */
#ifndef CCO_CCO_COLL_TYPES_H_
#define CCO_CCO_COLL_TYPES_H_

#include <stddef.h>
#include <stdint.h>

#include "cco/cco_window.h"

/* Element types. The half types are reduced in fp32 and rounded once (to
 * nearest even) when stored. */
typedef enum {
  ccoFloat32 = 0,
  ccoBfloat16 = 1,
  ccoFloat16 = 2,
  ccoInt32 = 3,
  ccoNumDataTypes
} ccoDataType_t;

/* Reduction operators. Sums add the ranks' values in LSA rank order on every
 * rank, so every rank gets the same bits. */
typedef enum { ccoSum = 0, ccoMax = 1, ccoMin = 2, ccoNumRedOps } ccoRedOp_t;

/* Algorithms (CCO_ALGO=name forces one for the calls that have it):
 * - oneshot: every rank pulls every peer's input and reduces it (all-reduce).
 * - ll:      low-latency push: data and a flag in one 8-byte store into the
 *            peers' staging buffers, no barrier; small all-reduces.
 * - twoshot: reduce-scatter by pull, then all-gather by push (all-reduce).
 * - push / pull: the natural one for all-gather, reduce-scatter, all-to-all,
 *            broadcast (the only one each has today).
 * - hier:    LSA inside each host, GDA between hosts (several hosts). */
typedef enum {
  ccoAlgoAuto = 0,
  ccoAlgoOneShot = 1,
  ccoAlgoLL = 2,
  ccoAlgoTwoShot = 3,
  ccoAlgoPush = 4,
  ccoAlgoPull = 5,
  ccoAlgoHier = 6,
  ccoNumAlgos
} ccoAlgo_t;

#if defined(__CUDACC__)
#define CCO_COLL_TYPES_INLINE_ static __host__ __device__ __forceinline__
#else
#define CCO_COLL_TYPES_INLINE_ static inline
#endif

/* Bytes of one element of `dtype` (0 for an unknown type). */
CCO_COLL_TYPES_INLINE_ size_t ccoDataTypeSize(ccoDataType_t dtype) {
  return dtype == ccoFloat32 || dtype == ccoInt32 ? 4 : dtype == ccoBfloat16 || dtype == ccoFloat16 ? 2 : 0;
}

/*
 * What a device building block works on. Every rank of the LSA team calls the
 * same block function with the same values (offsets are window offsets,
 * equal on every rank, as symmetric memory gives them), each block of the
 * launch with its own part.
 *
 * count means:
 *   all-reduce, broadcast: elements of the whole buffer;
 *   all-gather:            elements each rank contributes (recv holds lsaSize x count);
 *   reduce-scatter:        elements each rank receives (send holds lsaSize x count);
 *   all-to-all:            elements sent to each peer (send and recv hold lsaSize x count).
 */
typedef struct ccoCollArgs {
  ccoWindow_t sendWin; /* the input: sendWin at sendOff (bytes) */
  uint64_t sendOff;
  ccoWindow_t recvWin; /* the output: recvWin at recvOff; may be the input (in place) */
  uint64_t recvOff;
  uint64_t count;
  uint32_t dtype;       /* ccoDataType_t */
  uint32_t op;          /* ccoRedOp_t (reductions only) */
  int32_t root;         /* broadcast: the root's LSA rank */
  uint32_t barrierBase; /* parts use LSA barriers barrierBase .. barrierBase + nParts - 1 */
  /* Staging for the LL algorithm (and anything else that needs it): this
   * window's bytes [scratchOff, scratchOff + scratchBytes) on every rank,
   * zeroed once at setup and never reset afterwards (epochs, see ccoDevAllReduceLL). */
  ccoWindow_t scratchWin;
  uint64_t scratchOff;
  uint64_t scratchBytes;
  /* All-to-allv: byte offset in sendWin of this rank's table of int64
   * element counts and displacements, [3][lsaSize]: sendCounts[peer],
   * sendDispls[peer], recvDispls[peer]. Peers read it over LSA (a sender
   * needs the receiver's recvDispls). */
  uint64_t vTableOff;
  /* Nonzero: a hash of the call (collective, count, type, operator, root,
   * algorithm) that the blocks which start with a barrier publish in the
   * scratch area before it and compare with every peer's after it, returning
   * ccoDevInvalid when ranks disagree instead of reading past a buffer. */
  uint64_t signature;
  uint64_t reserved;
} ccoCollArgs;

#endif /* CCO_CCO_COLL_TYPES_H_ */
