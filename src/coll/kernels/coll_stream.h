/*
 * The stream calls' device work (cco.h: ccoBarrierOnStream, and
 * ccoPutOnStream / ccoPutSignalOnStream / ccoSignalOnStream to peers on
 * other hosts), written once for both places it runs: the kernels of
 * coll_kernels.cu (one block of CCO_COLL_STREAM_THREADS on the caller's
 * stream) and the host platform's calling thread (a block of one,
 * coll_engine.c). Both run it on the collectives' device communicator.
 */
#ifndef CCO_COLL_KERNELS_COLL_STREAM_H_
#define CCO_COLL_KERNELS_COLL_STREAM_H_

#include <stdint.h>

#include "cco/cco_gda.h"

typedef enum {
  CCO_STREAM_SIG_NONE = 0,
  CCO_STREAM_SIG_SET = 1, /* an 8-byte value written after the data */
  CCO_STREAM_SIG_ADD = 2, /* an atomic add after the data */
} cco_stream_sig_op;

/* One put and/or signal to a peer on another host, by value into the
 * kernel. Windows are the handles the host calls took (device-visible
 * descriptors), offsets already checked against them. */
typedef struct {
  ccoWindow_t dstWin, srcWin, sigWin;
  uint64_t dstOff, srcOff, bytes, sigOff, value;
  int32_t peer;
  uint32_t sigOp; /* cco_stream_sig_op */
} cco_stream_gda_args;

/* Put, signal, done: the kernel ends once the data and the signal are at
 * the peer, so the stream's next work (another put, a barrier) finds them
 * there, as it finds an LSA peer's copy. The data is flushed before the
 * signal because the ring does not order a value after a put. Context 0,
 * Immediate: the collectives' own GDA traffic shares the ring in ticket
 * order, which the flush also waits for. */
CCO_DEVICE_INLINE ccoDevStatus_t cco_stream_gda_run(const ccoDevComm* dc, const cco_stream_gda_args* a) {
  ccoGda g = ccoGdaHandle(dc, 0, ccoGdaDoorbellImmediate);
  ccoDevStatus_t st = ccoDevSuccess;
  if (a->bytes)
    st = ccoGdaPut(&g, a->peer, a->dstWin, a->dstOff, a->srcWin, a->srcOff, a->bytes, ccoGdaSigNone(),
                   CCO_GDA_NO_COUNTER, ccoCoopBlock, ccoGdaThreadAggregate);
  if (st == ccoDevSuccess && a->bytes && a->sigOp != CCO_STREAM_SIG_NONE) st = ccoGdaFlush(&g, ccoCoopBlock);
  if (st == ccoDevSuccess && a->sigOp == CCO_STREAM_SIG_SET)
    st = ccoGdaPutValue(&g, a->peer, a->sigWin, a->sigOff, a->value, 8, ccoGdaSigNone(), CCO_GDA_NO_COUNTER,
                        ccoCoopBlock, ccoGdaThreadAggregate);
  else if (st == ccoDevSuccess && a->sigOp == CCO_STREAM_SIG_ADD)
    st = ccoGdaAtomicAdd(&g, a->peer, a->sigWin, a->sigOff, a->value, ccoGdaSigNone(), CCO_GDA_NO_COUNTER,
                         ccoCoopBlock, ccoGdaThreadAggregate);
  if (st == ccoDevSuccess) st = ccoGdaFlush(&g, ccoCoopBlock);
  return st;
}

/* ccoBarrierOnStream: on one host the last LSA barrier of the device
 * communicator; across hosts its world barrier 0 (LSA, rail GDA, LSA), whose
 * LSA part is that same last barrier. Each GDA stream call flushed its own
 * traffic, so arriving here means it is at its peers. timeoutNs 0: no
 * limit. */
CCO_DEVICE_INLINE ccoDevStatus_t cco_stream_barrier_run(const ccoDevComm* dc, uint64_t timeoutNs) {
  ccoDevStatus_t st;
  if (dc->nNodes > 1) {
    ccoGda g = ccoGdaHandle(dc, 0, ccoGdaDoorbellImmediate);
    ccoBarrierSession b = ccoBarrierSessionInit(dc, &g, 0, ccoCoopBlock);
    st = ccoBarrierSyncTimeout(&b, timeoutNs);
    ccoBarrierSessionEnd(&b);
  } else {
    ccoLsaBarrierSession b = ccoLsaBarrierSessionInit(dc, dc->lsaBarrierCount - 1, ccoCoopBlock);
    st = ccoLsaBarrierSyncTimeout(&b, timeoutNs);
    ccoLsaBarrierSessionEnd(&b);
  }
  return st;
}

#endif /* CCO_COLL_KERNELS_COLL_STREAM_H_ */
