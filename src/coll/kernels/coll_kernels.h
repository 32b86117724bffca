/*
 * What the collectives' kernels (coll_kernels.cu, compiled by nvcc into the
 * embedded fatbin) and the host engine that launches them (coll_cuda.c)
 * agree on: the block size, the status word, and the kernels' names and
 * parameters. C, no CUDA headers: both compilers read it.
 *
 * Every kernel is
 *
 *   extern "C" __global__ void <name>(const ccoDevComm* dc, ccoCollArgs args,
 *                                     cco_coll_status* status)
 *
 * launched with nParts blocks of CCO_COLL_THREADS threads; block b runs
 * part b of nParts of its building block (cco/cco_coll.h) and the first
 * block that fails writes its status into *status (once: the first failure
 * of the communicator stays).
 */
#ifndef CCO_COLL_KERNELS_COLL_KERNELS_H_
#define CCO_COLL_KERNELS_COLL_KERNELS_H_

#include <stdint.h>

/* Threads per block: 512 keeps enough loads in flight for NVLink
 * bandwidth per block (the one-shot all-reduce of bench/RESULTS.md ran 512)
 * while leaving room for several blocks per SM, which ranks sharing a GPU
 * under MPS need (their grids must fit at once). */
#define CCO_COLL_THREADS 512

/* Where blocks report the first failure of any call: mapped host memory on
 * the GPU (the host reads it without synchronizing), plain memory on the
 * host platform. Written once: status first (compare-and-swap from 0), then
 * the rest. */
typedef struct {
  uint32_t status; /* ccoDevStatus_t; 0 while every call succeeded */
  uint32_t kind;   /* the failing call's collective (cco_coll_kind) */
  uint32_t algo;   /* its ccoAlgo_t */
  uint32_t part;   /* the block that failed first */
  uint32_t ready;  /* 1 once kind, algo and part are written */
  uint32_t pad[3];
} cco_coll_status;

/* Kernel names, one per building block, in cco_coll_block order. */
#define CCO_COLL_KERNEL_NAMES(X)                                       \
  X(ccoCollAllReduceOneShot, ccoDevAllReduceOneShot, 0, ccoAlgoOneShot) \
  X(ccoCollAllReduceLL, ccoDevAllReduceLL, 0, ccoAlgoLL)                \
  X(ccoCollAllReduceTwoShot, ccoDevAllReduceTwoShot, 0, ccoAlgoTwoShot) \
  X(ccoCollAllGather, ccoDevAllGather, 1, ccoAlgoPush)                  \
  X(ccoCollReduceScatter, ccoDevReduceScatter, 2, ccoAlgoPull)          \
  X(ccoCollAlltoAll, ccoDevAlltoAll, 3, ccoAlgoPush)                    \
  X(ccoCollBroadcast, ccoDevBroadcast, 4, ccoAlgoPull)                  \
  X(ccoCollAllReduceHier, ccoDevAllReduceHier, 0, ccoAlgoHier)         \
  X(ccoCollAllGatherHier, ccoDevAllGatherHier, 1, ccoAlgoHier)          \
  X(ccoCollReduceScatterHier, ccoDevReduceScatterHier, 2, ccoAlgoHier)  \
  X(ccoCollAlltoAllHier, ccoDevAlltoAllHier, 3, ccoAlgoHier)            \
  X(ccoCollBroadcastHier, ccoDevBroadcastHier, 4, ccoAlgoHier)

/* The reducing blocks also come as one kernel per (type, operator),
 * <name>_<type>_<op> (ccoCollAllReduceLL_bf16_sum), in which both are
 * constants, so the loops of the other eleven pairs drop out of the kernel.
 * On the H200 that took 1.1 us off a 1 KiB LL all-reduce (4.2 -> 3.1 us,
 * 2 ranks) and 1.5 us off a one-shot one (bench/RESULTS.md). The engine
 * launches these; the generic kernel of such a block is what a call with a
 * type or operator outside the list would get. Types and operators in enum
 * order (cco/cco_coll_types.h). */
#define CCO_COLL_TYPED_KERNEL_NAMES(X)                                 \
  X(ccoCollAllReduceOneShot, ccoDevAllReduceOneShot, 0, ccoAlgoOneShot) \
  X(ccoCollAllReduceLL, ccoDevAllReduceLL, 0, ccoAlgoLL)                \
  X(ccoCollAllReduceTwoShot, ccoDevAllReduceTwoShot, 0, ccoAlgoTwoShot) \
  X(ccoCollReduceScatter, ccoDevReduceScatter, 2, ccoAlgoPull)
#define CCO_COLL_TYPED_DTYPES(X) X(0, f32) X(1, bf16) X(2, f16) X(3, i32)
#define CCO_COLL_TYPED_OPS(X) X(0, sum) X(1, max) X(2, min)
#define CCO_COLL_TYPED_NDTYPES 4
#define CCO_COLL_TYPED_NOPS 3

/* The stream calls' kernels, one block of CCO_COLL_STREAM_THREADS each,
 * their failure reported like a collective's with kind CCO_COLL_STREAM_KIND
 * (the work itself: coll_stream.h):
 *
 *   ccoCollStreamBarrier(const ccoDevComm* dc, cco_coll_status* status)
 *   ccoCollStreamGda(const ccoDevComm* dc, cco_stream_gda_args args, cco_coll_status* status) */
#define CCO_COLL_STREAM_THREADS 32
#define CCO_COLL_STREAM_KIND 5 /* after the collectives' kinds */
#define CCO_COLL_STREAM_BARRIER_KERNEL "ccoCollStreamBarrier"
#define CCO_COLL_STREAM_GDA_KERNEL "ccoCollStreamGda"

#endif /* CCO_COLL_KERNELS_COLL_KERNELS_H_ */
