/*
 * Host-side SDMA: copies and signal waits enqueued on the caller's stream,
 * for host code that overlaps transfers with its own kernels (GEMM +
 * collective). The copy runs on the copy engines through the flat VA; the
 * signal is a uint64_t in a window, stored after the data in stream order.
 */
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "comm/comm.h"
#include "transport/sdma/sdma.h"

/* A signal (signal != 0) must also be 8-byte aligned: the copy engine and
 * the device store it as one uint64_t. */
ccoResult_t cco_comm_window_addr(ccoComm* comm, ccoWindow_t win, int lsa, size_t off, size_t bytes, bool signal,
                                 const char* what, uint64_t* addr) {
  ccoWindowDevice d;
  if (ccoWindowGetInfo(comm, win, &d, NULL) != ccoSuccess)
    return cco_error(&comm->err, ccoInvalidArgument, CCO_SUBSYS_SDMA,
                     "%s: %p is not a window of this communicator", what, (void*)win);
  if (signal && off % sizeof(uint64_t))
    return cco_error(&comm->err, ccoInvalidArgument, CCO_SUBSYS_SDMA,
                     "%s: offset %zu is not a multiple of 8 (a signal is a uint64_t)", what, off);
  if (off > d.size || bytes > d.size - off)
    return cco_error(&comm->err, ccoInvalidArgument, CCO_SUBSYS_SDMA,
                     "%s: [%zu, +%zu) is outside the window's %llu bytes", what, off, bytes,
                     (unsigned long long)d.size);
  *addr = d.winBase + (uint64_t)lsa * ((uint64_t)d.stride4G << 32) + off;
  return ccoSuccess;
}

/* The communicator failed (async error `failed`): that failure's result,
 * with its detail (a dead peer names the peer). */
static ccoResult_t failed_earlier(ccoComm* comm, ccoResult_t failed, const char* what, const char* when) {
  char detail[CCO_ERROR_TEXT_BYTES];
  cco_errsink_copy(&comm->err, detail, sizeof(detail));
  return cco_error_quiet(&comm->err, failed, "%s: the communicator failed %s: %s", what, when,
                         detail[0] ? detail : ccoGetErrorString(failed));
}

/* SDMA is on and the communicator has not failed (an engine error, a dead
 * peer, an abort): the host calls fail the same way device waits do. */
static ccoResult_t check_usable(ccoComm* comm, const char* what) {
  if (!cco_sdma_enabled())
    return cco_error(&comm->err, ccoUnsupported, CCO_SUBSYS_SDMA,
                     "%s: SDMA is off (CCO_ENABLE_SDMA=0)", what);
  ccoResult_t failed = ccoSuccess;
  ccoCommGetAsyncError(comm, &failed);
  if (failed != ccoSuccess) return failed_earlier(comm, failed, what, "earlier");
  return ccoSuccess;
}

ccoResult_t ccoSdmaPutAsync(ccoComm* comm, int peer, ccoWindow_t dstWin, size_t dstOff, ccoWindow_t srcWin,
                            size_t srcOff, size_t bytes, ccoWindow_t sigWin, size_t sigOff, uint64_t sigValue,
                            void* stream) {
  CCO_VALIDATE_COMM(comm);
  CCO_CHECK(check_usable(comm, "ccoSdmaPutAsync"));
  int peerLsa = cco_topology_world_to_team(&comm->topo, ccoTeamLsa, peer);
  if (peerLsa < 0)
    return cco_error(&comm->err, ccoInvalidArgument, CCO_SUBSYS_SDMA,
                     "ccoSdmaPutAsync: rank %d is not on this rank's host", peer);
  uint64_t dst, src, sig = 0;
  CCO_CHECK(cco_comm_window_addr(comm, dstWin, peerLsa, dstOff, bytes, false, "ccoSdmaPutAsync destination",
                        &dst));
  CCO_CHECK(cco_comm_window_addr(comm, srcWin, comm->topo.lsaRank, srcOff, bytes, false,
                        "ccoSdmaPutAsync source", &src));
  if (sigWin)
    CCO_CHECK(cco_comm_window_addr(comm, sigWin, peerLsa, sigOff, sizeof(uint64_t), true,
                          "ccoSdmaPutAsync signal", &sig));
  cco_platform* p = &comm->platform;
  if (bytes) CCO_CHECK(cco_comm_keep_error(comm, p->ops->copy_async(p, stream, dst, src, bytes)));
  if (sigWin) CCO_CHECK(cco_comm_keep_error(comm, p->ops->write_value_async(p, stream, sig, sigValue)));
  return ccoSuccess;
}

ccoResult_t ccoStreamWaitSignal(ccoComm* comm, ccoWindow_t sigWin, size_t sigOff, uint64_t value, void* stream) {
  CCO_VALIDATE_COMM(comm);
  CCO_CHECK(check_usable(comm, "ccoStreamWaitSignal"));
  uint64_t sig;
  CCO_CHECK(cco_comm_window_addr(comm, sigWin, comm->topo.lsaRank, sigOff, sizeof(uint64_t), true,
                        "ccoStreamWaitSignal", &sig));
  cco_platform* p = &comm->platform;
  ccoResult_t res = p->ops->wait_value_async(p, stream, sig, value, comm->boot.timeout, &comm->asyncError);
  /* Stopped by the communicator's failure: its detail (a dead peer, say). */
  if (res != ccoSuccess && res == (ccoResult_t)atomic_load(&comm->asyncError))
    return failed_earlier(comm, res, "ccoStreamWaitSignal", "during the wait");
  return cco_comm_keep_error(comm, res);
}
