/*
 * One-sided calls to LSA peers ordered on a stream (cco.h: ccoPutOnStream
 * ...): the copy engines for data, stream memory operations for signals
 * that are set, a one-thread kernel of the collectives' engine for signals
 * that are added, and its LSA barrier kernel for ccoBarrierOnStream
 * (src/comm/coll_api.c). The host platform does each step at once.
 */
#include <stdio.h>

#include "base/error.h"
#include "coll/coll.h"
#include "comm/comm.h"

/* A healthy communicator and a peer on this host; its LSA rank. */
static ccoResult_t check_call(ccoComm* comm, const char* api, int peer, int* peerLsa) {
  ccoResult_t failed = (ccoResult_t)atomic_load(&comm->asyncError);
  if (failed != ccoSuccess) {
    char detail[CCO_ERROR_TEXT_BYTES];
    cco_errsink_copy(&comm->err, detail, sizeof(detail));
    return cco_error_quiet(&comm->err, failed, "%s: the communicator failed earlier: %s", api,
                           detail[0] ? detail : ccoGetErrorString(failed));
  }
  *peerLsa = cco_topology_world_to_team(&comm->topo, ccoTeamLsa, peer);
  if (*peerLsa < 0)
    return cco_error(&comm->err, ccoInvalidArgument, CCO_SUBSYS_COLL,
                     "%s: rank %d is not on this rank's host (not in the LSA team of %d ranks)", api, peer,
                     comm->topo.lsaSize);
  return ccoSuccess;
}

static ccoResult_t check_op(ccoComm* comm, const char* api, ccoStreamSignalOp_t op) {
  if (op != ccoStreamSignalSet && op != ccoStreamSignalAdd)
    return cco_error(&comm->err, ccoInvalidArgument, CCO_SUBSYS_COLL,
                     "%s: unknown signal operation %d (ccoStreamSignalSet or ccoStreamSignalAdd)", api, (int)op);
  return ccoSuccess;
}

static ccoResult_t signal(ccoComm* comm, uint64_t addr, uint64_t value, ccoStreamSignalOp_t op, void* stream) {
  cco_platform* p = &comm->platform;
  if (op == ccoStreamSignalSet) return cco_comm_keep_error(comm, p->ops->write_value_async(p, stream, addr, value));
  return cco_comm_keep_error(comm, cco_coll_engine_signal_add(cco_comm_coll_engine(comm), addr, value, stream));
}

/* The put's addresses, both checked before anything is enqueued. */
static ccoResult_t put_addrs(ccoComm* comm, const char* api, int peerLsa, ccoWindow_t dstWin, size_t dstOff,
                             ccoWindow_t srcWin, size_t srcOff, size_t bytes, uint64_t* dst, uint64_t* src) {
  char what[64];
  snprintf(what, sizeof(what), "%s destination", api);
  CCO_CHECK(cco_comm_window_addr(comm, dstWin, peerLsa, dstOff, bytes, false, what, dst));
  snprintf(what, sizeof(what), "%s source", api);
  return cco_comm_window_addr(comm, srcWin, comm->topo.lsaRank, srcOff, bytes, false, what, src);
}

ccoResult_t ccoPutOnStream(ccoComm* comm, int peer, ccoWindow_t dstWin, size_t dstOff, ccoWindow_t srcWin,
                           size_t srcOff, size_t bytes, void* stream) {
  CCO_VALIDATE_COMM(comm);
  int peerLsa = -1;
  uint64_t dst = 0, src = 0;
  CCO_CHECK(check_call(comm, "ccoPutOnStream", peer, &peerLsa));
  CCO_CHECK(put_addrs(comm, "ccoPutOnStream", peerLsa, dstWin, dstOff, srcWin, srcOff, bytes, &dst, &src));
  if (!bytes) return ccoSuccess;
  cco_platform* p = &comm->platform;
  return cco_comm_keep_error(comm, p->ops->copy_async(p, stream, dst, src, bytes));
}

ccoResult_t ccoPutSignalOnStream(ccoComm* comm, int peer, ccoWindow_t dstWin, size_t dstOff, ccoWindow_t srcWin,
                                 size_t srcOff, size_t bytes, ccoWindow_t sigWin, size_t sigOff, uint64_t value,
                                 ccoStreamSignalOp_t op, void* stream) {
  CCO_VALIDATE_COMM(comm);
  const char* api = "ccoPutSignalOnStream";
  int peerLsa = -1;
  uint64_t dst = 0, src = 0, sig = 0;
  CCO_CHECK(check_call(comm, api, peer, &peerLsa));
  CCO_CHECK(check_op(comm, api, op));
  CCO_CHECK(put_addrs(comm, api, peerLsa, dstWin, dstOff, srcWin, srcOff, bytes, &dst, &src));
  CCO_CHECK(cco_comm_window_addr(comm, sigWin, peerLsa, sigOff, sizeof(uint64_t), true, "ccoPutSignalOnStream signal",
                                 &sig));
  cco_platform* p = &comm->platform;
  if (bytes) CCO_CHECK(cco_comm_keep_error(comm, p->ops->copy_async(p, stream, dst, src, bytes)));
  return signal(comm, sig, value, op, stream);
}

ccoResult_t ccoSignalOnStream(ccoComm* comm, int peer, ccoWindow_t sigWin, size_t sigOff, uint64_t value,
                              ccoStreamSignalOp_t op, void* stream) {
  CCO_VALIDATE_COMM(comm);
  int peerLsa = -1;
  uint64_t sig = 0;
  CCO_CHECK(check_call(comm, "ccoSignalOnStream", peer, &peerLsa));
  CCO_CHECK(check_op(comm, "ccoSignalOnStream", op));
  CCO_CHECK(cco_comm_window_addr(comm, sigWin, peerLsa, sigOff, sizeof(uint64_t), true, "ccoSignalOnStream", &sig));
  return signal(comm, sig, value, op, stream);
}

ccoResult_t ccoQuietOnStream(ccoComm* comm, void* stream) {
  CCO_VALIDATE_COMM(comm);
  (void)stream;
  int self = -1;
  return check_call(comm, "ccoQuietOnStream", comm->rank, &self);
}
