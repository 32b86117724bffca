/*
 * cco collectives, the device building blocks: all-reduce (one-shot, LL,
 * two-shot), all-gather, reduce-scatter, all-to-all(v) and broadcast over
 * the LSA team (the ranks of one host), and the hierarchical ones (*Hier)
 * across hosts (LSA inside each, GDA between them), as block-scope
 * functions a kernel calls. The host calls of cco/cco.h (ccoAllReduce ...) launch them; a
 * kernel of one's own can call them as well, for example to fuse a
 * collective with compute. docs/collectives_device.md has the details.
 *
 *   __global__ void k(ccoDevComm dc, ccoCollArgs a) {
 *     ccoDevStatus_t st = ccoDevAllReduceTwoShot(&dc, &a, blockIdx.x, gridDim.x);
 *     ...
 *   }
 *
 * Rules shared by every block function:
 * - every thread of the block calls it (ccoCoopBlock scope) with the same
 *   arguments, and gets the same status back; on the host platform a CPU
 *   thread is a block of one;
 * - a launch runs nParts blocks, block `part` of them passing its own part;
 *   all nParts blocks of every LSA rank must run at once (co-resident: a
 *   block waits for its peers' blocks of the same part);
 * - every LSA rank calls the same function with the same ccoCollArgs (see
 *   cco/cco_coll_types.h), each launch with the same nParts;
 * - two syncs per call: on flags in the scratch area when there is one,
 *   else on LSA barrier a->barrierBase + p for part p (the device
 *   communicator needs lsaBarrierCount >= barrierBase + nParts either way);
 *   LL uses none;
 * - nParts <= CCO_COLL_MAX_PARTS; the scratch area (a->scratchWin at
 *   a->scratchOff, 16-byte aligned, ccoDevCollScratchBytes bytes, zeroed
 *   once and then left to these functions) is needed by LL, and by every
 *   call whose a->signature is not 0;
 * - statuses: ccoDevSuccess; ccoDevInvalid for arguments out of range, an
 *   overlap the block cannot handle, or ranks whose signatures differ (then
 *   no buffer is written); ccoDevAborted when the abort word is set;
 *   ccoDevTimeout after CCO_COLL_TIMEOUT_NS. After ccoDevAborted or
 *   ccoDevTimeout the barriers and the LL epochs of the calls involved are
 *   out of step: the communicator is done.
 *
 * C11 without CUDA headers, like the rest of the device API: it compiles
 * with nvcc, clang for NVPTX (the Triton bitcode) and gcc (the host
 * platform).
 */
#ifndef CCO_CCO_COLL_H_
#define CCO_CCO_COLL_H_

#include <stdint.h>

#include "cco/cco_coll_types.h"
#include "cco/cco_device.h"

/* The largest nParts the scratch layout has room for (one signature slot
 * per part). */
#define CCO_COLL_MAX_PARTS 64u

/* The largest all-reduce, in bytes, that ccoDevAllReduceLL takes. LL moves
 * twice the data (a flag beside every 4 bytes), and each rank pushes its
 * whole input to every peer: it pays off only for small messages. */
#define CCO_COLL_LL_MAX_BYTES 65536u

/* How long a block waits for its peers, in nanoseconds, before it returns
 * ccoDevTimeout; 0 (the default) waits until the abort word is set, as
 * ccoLsaBarrierSync does: a rank may legitimately reach a collective long
 * after its peers. Define it before including this header to change it; it
 * is evaluated at each wait, so it may name a variable. */
#ifndef CCO_COLL_TIMEOUT_NS
#define CCO_COLL_TIMEOUT_NS 0u
#endif

#include "cco/device/impl/coll_impl.h"
#include "cco/device/impl/coll_hier_impl.h"

/* ------------------------------------------------------------ all-reduce */

/* One-shot (pull): after the first barrier, part p reduces its piece of
 * every peer's input, in LSA rank order, into this rank's output; the
 * second barrier keeps inputs until every peer has read them. Lowest
 * latency with barriers. In place (recv == send) it runs the two-shot
 * schedule instead, which gives the same bits: peers would still read an
 * input that one-shot overwrites. */
CCO_DEVICE_INLINE ccoDevStatus_t ccoDevAllReduceOneShot(const ccoDevComm* dc, const ccoCollArgs* a, uint32_t part,
                                                        uint32_t nParts) {
  return cco_impl_coll_run(dc, a, part, nParts, cco_impl_coll_oneshot);
}

/* LL (push, no barrier): data and flag in 8-byte lines into every peer's
 * staging area in the scratch, polled and reduced in LSA rank order. At
 * most CCO_COLL_LL_MAX_BYTES; in place allowed. The epochs live in the
 * scratch area, so every rank must make the same sequence of LL calls on
 * it, and calls inside one kernel must keep nParts. The input is reusable
 * and the output complete when the blocks return. No signature check (there
 * is no barrier to carry it): ranks that disagree time out or wait for the
 * abort word. */
CCO_DEVICE_INLINE ccoDevStatus_t ccoDevAllReduceLL(const ccoDevComm* dc, const ccoCollArgs* a, uint32_t part,
                                                   uint32_t nParts) {
  return cco_impl_coll_ll(dc, a, part, nParts);
}

/* Two-shot: rank r reduces slice r of every peer's input (pull, rank
 * order) and stores the result into slice r of every peer's output (push),
 * between the two barriers. Moves 2(n-1)/n of the buffer per rank instead
 * of one-shot's n-1: the one for large messages. Safe in place. */
CCO_DEVICE_INLINE ccoDevStatus_t ccoDevAllReduceTwoShot(const ccoDevComm* dc, const ccoCollArgs* a, uint32_t part,
                                                        uint32_t nParts) {
  return cco_impl_coll_run(dc, a, part, nParts, cco_impl_coll_twoshot);
}

/* Hierarchical, for communicators that span hosts: reduce-scatter inside
 * the host by LSA pull, the slices exchanged with the rail team (this LSA
 * rank on every other host) by GDA puts with signals, reduced in rail
 * order, then all-gather inside the host by LSA push. Chunked through the
 * scratch, so any count works; safe in place. Every rank gets the same bits
 * (LSA rank order inside each host, then the hosts in rail order, which is
 * host order for blocked and round-robin placements). Needs hosts of equal
 * size, a device communicator with GDA to the rail peers (any connection
 * type that reaches them) and at least nParts x nNodes GDA signals (it uses
 * signals part x nNodes + railRank, which only grow), and a scratch area of
 * ccoDevCollHierScratchBytes; ranks that disagree on the call, on this host
 * or another, all get ccoDevInvalid (the signature travels over the rail
 * too). On one host it is a two-shot all-reduce with no GDA. */
CCO_DEVICE_INLINE ccoDevStatus_t ccoDevAllReduceHier(const ccoDevComm* dc, const ccoCollArgs* a, uint32_t part,
                                                     uint32_t nParts) {
  return cco_impl_coll_hier_run(dc, a, part, nParts, cco_impl_hier_allreduce);
}

/* Hierarchical all-gather: count elements from every rank into block
 * `rank` (world rank) of every rank's output of worldSize x count: GDA
 * puts to the rail peers' outputs, LSA pushes inside the host, each rank
 * forwarding its rail's blocks to its LSA peers. In place as
 * ccoDevAllGather, with the world rank's block. The rules of
 * ccoDevAllReduceHier otherwise. */
CCO_DEVICE_INLINE ccoDevStatus_t ccoDevAllGatherHier(const ccoDevComm* dc, const ccoCollArgs* a, uint32_t part,
                                                     uint32_t nParts) {
  return cco_impl_coll_hier_run(dc, a, part, nParts, cco_impl_hier_allgather);
}

/* Hierarchical reduce-scatter: block `rank` (world rank) of every rank's
 * input (worldSize x count), reduced into this rank's count elements: each
 * rank reduces its host's share of its rail members' blocks (LSA pull) and
 * puts each rail peer its partial, then reduces what its rail sent in rail
 * order (the order of ccoDevAllReduceHier). In place as
 * ccoDevReduceScatter, with the world rank's block. The rules of
 * ccoDevAllReduceHier otherwise. */
CCO_DEVICE_INLINE ccoDevStatus_t ccoDevReduceScatterHier(const ccoDevComm* dc, const ccoCollArgs* a, uint32_t part,
                                                         uint32_t nParts) {
  return cco_impl_coll_hier_run(dc, a, part, nParts, cco_impl_hier_reducescatter);
}

/* Hierarchical all-to-all: block d of the input (worldSize x count) into
 * block `rank` of world rank d's output, by LSA push on this host and by a
 * GDA put straight into the output of each rank of the other hosts, after
 * the rail's header says every rank has entered the call. Needs nParts x
 * (nNodes + worldSize) GDA signals and a connection type that reaches every
 * rank of the other hosts (ccoGdaConnectionCrossNode). Not in place. The
 * rules of ccoDevAllReduceHier otherwise. */
CCO_DEVICE_INLINE ccoDevStatus_t ccoDevAlltoAllHier(const ccoDevComm* dc, const ccoCollArgs* a, uint32_t part,
                                                    uint32_t nParts) {
  return cco_impl_coll_hier_run(dc, a, part, nParts, cco_impl_hier_alltoall);
}

/* Hierarchical broadcast from a->root, a world rank here: the root's host
 * pulls from the root over LSA, the root puts into its rail peers' outputs
 * by GDA, and each of those pushes on to its LSA peers. In place allowed.
 * The rules of ccoDevAllReduceHier otherwise. */
CCO_DEVICE_INLINE ccoDevStatus_t ccoDevBroadcastHier(const ccoDevComm* dc, const ccoCollArgs* a, uint32_t part,
                                                     uint32_t nParts) {
  return cco_impl_coll_hier_run(dc, a, part, nParts, cco_impl_hier_broadcast);
}

/* ---------------------------------------------------------------- others */

/* All-gather (push): this rank's count elements into block lsaRank of
 * every peer's output (lsaSize x count elements). In place: the input is
 * block lsaRank of the output (NCCL's layout; sendOff may then differ
 * between ranks, since only this rank reads its input), or sendOff ==
 * recvOff, which means the same. */
CCO_DEVICE_INLINE ccoDevStatus_t ccoDevAllGather(const ccoDevComm* dc, const ccoCollArgs* a, uint32_t part,
                                                 uint32_t nParts) {
  return cco_impl_coll_run(dc, a, part, nParts, cco_impl_coll_allgather);
}

/* Reduce-scatter (pull): block lsaRank of every peer's input (lsaSize x
 * count elements), reduced in LSA rank order into this rank's count
 * elements of output. In place: the output is block lsaRank of the input
 * (recvOff may then differ between ranks), or recvOff == sendOff, which
 * writes the result into that block. */
CCO_DEVICE_INLINE ccoDevStatus_t ccoDevReduceScatter(const ccoDevComm* dc, const ccoCollArgs* a, uint32_t part,
                                                     uint32_t nParts) {
  return cco_impl_coll_run(dc, a, part, nParts, cco_impl_coll_reducescatter);
}

/* All-to-all (push): block p of the input (count elements) into block
 * lsaRank of peer p's output. Not in place (input and output must not
 * overlap). */
CCO_DEVICE_INLINE ccoDevStatus_t ccoDevAlltoAll(const ccoDevComm* dc, const ccoCollArgs* a, uint32_t part,
                                                uint32_t nParts) {
  return cco_impl_coll_run(dc, a, part, nParts, cco_impl_coll_alltoall);
}

/* All-to-allv (push): the int64 table at a->vTableOff of the send window,
 * [3][lsaSize] element counts and displacements (sendCounts[p],
 * sendDispls[p], recvDispls[p]), says what goes where: sendCounts[p]
 * elements from input element sendDispls[p] go to peer p's output at the
 * recvDispls[lsaRank] of peer p's own table. count is not used. This rank's
 * table is checked before the first barrier (and with a signature, a bad
 * one fails the call on every rank); a peer's displacement that falls
 * outside the output window skips that block and fails the call here. Not
 * in place; output ranges of different senders must not overlap. */
CCO_DEVICE_INLINE ccoDevStatus_t ccoDevAlltoAllv(const ccoDevComm* dc, const ccoCollArgs* a, uint32_t part,
                                                 uint32_t nParts) {
  return cco_impl_coll_run(dc, a, part, nParts, cco_impl_coll_alltoallv);
}

/* Broadcast (pull): every rank copies its piece of the root's input
 * (a->root, an LSA rank) into its own output, so every rank's SMs move its
 * own data and the root's kernel is not the one bottleneck; the root only
 * copies its own input to its output, or nothing in place. */
CCO_DEVICE_INLINE ccoDevStatus_t ccoDevBroadcast(const ccoDevComm* dc, const ccoCollArgs* a, uint32_t part,
                                                 uint32_t nParts) {
  return cco_impl_coll_run(dc, a, part, nParts, cco_impl_coll_broadcast);
}

/* ------------------------------------------------------------ scratch */

/* Bytes of the scratch area per rank (the syncs' epochs and flags, LL
 * epochs, LL staging) for lsaSize ranks and up to nParts parts; 0 when nParts is 0 or
 * more than CCO_COLL_MAX_PARTS. The layout depends on lsaSize only, so one
 * area serves calls with any nParts. */
CCO_HOST_DEVICE_INLINE uint64_t ccoDevCollScratchBytes(int lsaSize, uint32_t nParts) {
  return cco_impl_coll_scratch_bytes(lsaSize, nParts);
}

/* Bytes of the scratch area the hierarchical blocks need per rank: the
 * one-host area of ccoDevCollScratchBytes, then per part a use counter,
 * signature headers and staging for 2 x nNodes slices of 64 KiB; 0 when an
 * argument is out of range. Unlike the one-host layout it grows with
 * nParts (part p's region does not move when nParts changes). */
CCO_HOST_DEVICE_INLINE uint64_t ccoDevCollHierScratchBytes(int lsaSize, int nNodes, uint32_t nParts) {
  return cco_impl_hier_scratch_bytes(lsaSize, nNodes, nParts);
}

/* --------------------------------------------------------- conversions */

/* bf16 / fp16 <-> fp32 as the blocks do them, on the host too: exact
 * widening; narrowing to nearest even with overflow to infinity,
 * subnormals kept and any NaN as 0x7fff. The PTX cvt instructions on the
 * GPU, portable C elsewhere, with the same results. */
CCO_HOST_DEVICE_INLINE float ccoBfloat16ToFloat(uint16_t h) {
  return cco_impl_bits_to_f32(cco_impl_bf16_to_f32_bits(h));
}
CCO_HOST_DEVICE_INLINE uint16_t ccoFloatToBfloat16(float f) {
  return cco_impl_f32_bits_to_bf16(cco_impl_f32_to_bits(f));
}
CCO_HOST_DEVICE_INLINE float ccoFloat16ToFloat(uint16_t h) {
  return cco_impl_bits_to_f32(cco_impl_f16_to_f32_bits(h));
}
CCO_HOST_DEVICE_INLINE uint16_t ccoFloatToFloat16(float f) {
  return cco_impl_f32_bits_to_f16(cco_impl_f32_to_bits(f));
}

#endif /* CCO_CCO_COLL_H_ */
