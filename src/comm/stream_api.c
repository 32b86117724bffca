/*
 * One-sided calls ordered on a stream (cco.h: ccoPutOnStream ...). To a
 * peer on this host (LSA): the copy engines for data, stream memory
 * operations for signals (a store, or the platform's atomic add). To a peer
 * on another host: one block of the collectives' engine that posts the put
 * and the signal on its device communicator's GDA ring and flushes them
 * (coll_stream.h), so those calls need the collectives' state, which the
 * first collective or ccoBarrierOnStream makes on every rank. The host
 * platform does each step at once, on the calling thread.
 */
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "coll/coll.h"
#include "comm/comm.h"

/* A healthy communicator and a valid peer: its LSA rank, or -1 when it is
 * on another host (then *gda: the engine that reaches it). */
static ccoResult_t check_call(ccoComm* comm, const char* api, int peer, int* peerLsa, cco_coll_engine** gda) {
  ccoResult_t failed = (ccoResult_t)atomic_load(&comm->asyncError);
  if (failed != ccoSuccess) {
    char detail[CCO_ERROR_TEXT_BYTES];
    cco_errsink_copy(&comm->err, detail, sizeof(detail));
    return cco_error_quiet(&comm->err, failed, "%s: the communicator failed earlier: %s", api,
                           detail[0] ? detail : ccoGetErrorString(failed));
  }
  if (peer < 0 || peer >= comm->nRanks)
    return cco_error(&comm->err, ccoInvalidArgument, CCO_SUBSYS_COLL, "%s: rank %d is not in [0, %d)", api, peer,
                     comm->nRanks);
  *peerLsa = cco_topology_world_to_team(&comm->topo, ccoTeamLsa, peer);
  *gda = NULL;
  if (*peerLsa >= 0) return ccoSuccess;
  cco_coll_engine* e = cco_comm_coll_engine(comm);
  if (!e || !cco_coll_engine_ready(e))
    return cco_error(&comm->err, ccoInvalidUsage, CCO_SUBSYS_COLL,
                     "%s: rank %d is on another host; stream calls reach it through the collectives' state, which "
                     "is made collectively: call ccoBarrierOnStream (or any collective) on every rank first",
                     api, peer);
  *gda = e;
  return ccoSuccess;
}

static ccoResult_t run_gda(ccoComm* comm, cco_coll_engine* e, const char* api, const cco_stream_gda_args* a,
                           void* stream) {
  ccoResult_t res = cco_coll_engine_stream_gda(e, a, stream);
  if (res == ccoSuccess) return ccoSuccess;
  cco_coll_status st = cco_coll_engine_status(e);
  return cco_error(&comm->err, res, CCO_SUBSYS_COLL, "%s to rank %d (another host): %s", api, a->peer,
                   st.status ? cco_coll_status_meaning((ccoDevStatus_t)st.status) : ccoGetErrorString(res));
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
  return cco_comm_keep_error(comm, p->ops->add_value_async(p, stream, addr, value));
}

/* The put's addresses, both checked before anything is enqueued. */
static ccoResult_t put_addrs(ccoComm* comm, const char* api, int peerLsa, ccoWindow_t dstWin, size_t dstOff,
                             ccoWindow_t srcWin, size_t srcOff, size_t bytes, uint64_t* dst, uint64_t* src) {
  char what[64];
  snprintf(what, sizeof(what), "%s destination", api);
  CCO_CHECK(cco_comm_window_addr(comm, dstWin, peerLsa < 0 ? comm->topo.lsaRank : peerLsa, dstOff, bytes, false,
                                 what, dst));
  snprintf(what, sizeof(what), "%s source", api);
  return cco_comm_window_addr(comm, srcWin, comm->topo.lsaRank, srcOff, bytes, false, what, src);
}

static cco_stream_gda_args gda_args(int peer, ccoWindow_t dstWin, size_t dstOff, ccoWindow_t srcWin, size_t srcOff,
                                    size_t bytes) {
  cco_stream_gda_args a;
  memset(&a, 0, sizeof(a));
  a.peer = peer;
  a.dstWin = a.srcWin = a.sigWin = dstWin;
  if (srcWin) a.srcWin = srcWin;
  a.dstOff = dstOff, a.srcOff = srcOff, a.bytes = bytes;
  a.sigOp = CCO_STREAM_SIG_NONE;
  return a;
}

ccoResult_t ccoPutOnStream(ccoComm* comm, int peer, ccoWindow_t dstWin, size_t dstOff, ccoWindow_t srcWin,
                           size_t srcOff, size_t bytes, void* stream) {
  CCO_VALIDATE_COMM(comm);
  const char* api = "ccoPutOnStream";
  int peerLsa = -1;
  cco_coll_engine* gda = NULL;
  uint64_t dst = 0, src = 0;
  CCO_CHECK(check_call(comm, api, peer, &peerLsa, &gda));
  CCO_CHECK(put_addrs(comm, api, peerLsa, dstWin, dstOff, srcWin, srcOff, bytes, &dst, &src));
  if (!bytes) return ccoSuccess;
  if (gda) {
    cco_stream_gda_args a = gda_args(peer, dstWin, dstOff, srcWin, srcOff, bytes);
    return run_gda(comm, gda, api, &a, stream);
  }
  cco_platform* p = &comm->platform;
  return cco_comm_keep_error(comm, p->ops->copy_async(p, stream, dst, src, bytes));
}

ccoResult_t ccoPutSignalOnStream(ccoComm* comm, int peer, ccoWindow_t dstWin, size_t dstOff, ccoWindow_t srcWin,
                                 size_t srcOff, size_t bytes, ccoWindow_t sigWin, size_t sigOff, uint64_t value,
                                 ccoStreamSignalOp_t op, void* stream) {
  CCO_VALIDATE_COMM(comm);
  const char* api = "ccoPutSignalOnStream";
  int peerLsa = -1;
  cco_coll_engine* gda = NULL;
  uint64_t dst = 0, src = 0, sig = 0;
  CCO_CHECK(check_call(comm, api, peer, &peerLsa, &gda));
  CCO_CHECK(check_op(comm, api, op));
  CCO_CHECK(put_addrs(comm, api, peerLsa, dstWin, dstOff, srcWin, srcOff, bytes, &dst, &src));
  CCO_CHECK(cco_comm_window_addr(comm, sigWin, peerLsa < 0 ? comm->topo.lsaRank : peerLsa, sigOff, sizeof(uint64_t),
                                 true, "ccoPutSignalOnStream signal", &sig));
  if (gda) {
    cco_stream_gda_args a = gda_args(peer, dstWin, dstOff, srcWin, srcOff, bytes);
    a.sigWin = sigWin, a.sigOff = sigOff, a.value = value;
    a.sigOp = op == ccoStreamSignalSet ? CCO_STREAM_SIG_SET : CCO_STREAM_SIG_ADD;
    return run_gda(comm, gda, api, &a, stream);
  }
  cco_platform* p = &comm->platform;
  if (bytes) CCO_CHECK(cco_comm_keep_error(comm, p->ops->copy_async(p, stream, dst, src, bytes)));
  return signal(comm, sig, value, op, stream);
}

ccoResult_t ccoSignalOnStream(ccoComm* comm, int peer, ccoWindow_t sigWin, size_t sigOff, uint64_t value,
                              ccoStreamSignalOp_t op, void* stream) {
  CCO_VALIDATE_COMM(comm);
  const char* api = "ccoSignalOnStream";
  int peerLsa = -1;
  cco_coll_engine* gda = NULL;
  uint64_t sig = 0;
  CCO_CHECK(check_call(comm, api, peer, &peerLsa, &gda));
  CCO_CHECK(check_op(comm, api, op));
  CCO_CHECK(cco_comm_window_addr(comm, sigWin, peerLsa < 0 ? comm->topo.lsaRank : peerLsa, sigOff, sizeof(uint64_t),
                                 true, api, &sig));
  if (gda) {
    cco_stream_gda_args a = gda_args(peer, sigWin, 0, NULL, 0, 0);
    a.sigWin = sigWin, a.sigOff = sigOff, a.value = value;
    a.sigOp = op == ccoStreamSignalSet ? CCO_STREAM_SIG_SET : CCO_STREAM_SIG_ADD;
    return run_gda(comm, gda, api, &a, stream);
  }
  return signal(comm, sig, value, op, stream);
}

ccoResult_t ccoQuietOnStream(ccoComm* comm, void* stream) {
  CCO_VALIDATE_COMM(comm);
  (void)stream;
  int self = -1;
  cco_coll_engine* gda = NULL;
  return check_call(comm, "ccoQuietOnStream", comm->rank, &self, &gda);
}
