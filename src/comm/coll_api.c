/*
 * Public entry points of the collectives (cco.h: ccoAllReduce ...): the
 * checks of a call's arguments and buffers, the per-communicator state the
 * first collective makes, and the report of failures the device blocks
 * found. The runs and launches are the engine's (src/coll).
 *
 * The per-communicator state the first call makes is coll_state.c's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/env.h"
#include "base/error.h"
#include "cco/cco_coll.h"
#include "coll/coll.h"
#include "comm/comm.h"

/* One call, as the public function got it. */
typedef struct {
  cco_coll_kind kind;
  const void* send;
  void* recv;
  size_t count;
  ccoDataType_t dtype;
  ccoRedOp_t op;
  int root;
  void* stream;
} coll_call;

/* A buffer found in a window. */
typedef struct {
  ccoWindow_t win;
  uint64_t off;     /* in the window */
  uint64_t slotOff; /* in the slot: the same on every rank for a symmetric call */
} buf_ref;

static cco_coll_engine* engine_of(ccoComm* comm) {
  for (int i = 0; i < comm->nTransports; i++)
    if (comm->transports[i].ops == &cco_coll_transport_ops) return comm->transports[i].state;
  return NULL;
}

cco_coll_engine* cco_comm_coll_engine(ccoComm* comm) { return engine_of(comm); }

static bool is_reduction(cco_coll_kind kind) { return kind == CCO_COLL_ALLREDUCE || kind == CCO_COLL_REDUCESCATTER; }

/* ------------------------------------------------------------ failures */

/* A failure the blocks reported in the status word (an earlier call's on
 * the GPU, this call's on the host platform): noted once, logged, and made
 * the communicator's failure, so that the peers are told and device waits
 * stop. Aborted blocks (and the host platform's timed-out ones, which
 * failed the communicator) only echo a failure of the communicator, whose
 * own detail says more. */
static void note_device_failure(ccoComm* comm, cco_coll_engine* e) {
  cco_coll_status st = cco_coll_engine_status(e);
  if (st.status == ccoDevSuccess || cco_coll_engine_failure(e, NULL)) return;
  ccoDevStatus_t ds = (ccoDevStatus_t)st.status;
  ccoResult_t failed = (ccoResult_t)atomic_load(&comm->asyncError);
  ccoResult_t res = cco_coll_status_result(ds);
  char text[CCO_ERROR_TEXT_BYTES];
  if ((ds == ccoDevAborted || ds == ccoDevTimeout) && failed != ccoSuccess) {
    char detail[CCO_ERROR_TEXT_BYTES];
    cco_errsink_copy(&comm->err, detail, sizeof(detail));
    res = failed;
    snprintf(text, sizeof(text), "%s", detail[0] ? detail : ccoGetErrorString(failed));
  } else if (st.ready && st.kind == CCO_COLL_STREAM_KIND) {
    snprintf(text, sizeof(text), "rank %d: %s failed on the device with %s: %s", comm->rank,
             cco_coll_api_name((cco_coll_kind)st.kind), ccoDevStatusName(ds), cco_coll_status_meaning(ds));
  } else if (st.ready) {
    snprintf(text, sizeof(text), "rank %d: %s (algorithm %s, part %u) failed on the device with %s: %s",
             comm->rank, cco_coll_api_name((cco_coll_kind)st.kind), cco_coll_algo_name((ccoAlgo_t)st.algo),
             st.part, ccoDevStatusName(ds), cco_coll_status_meaning(ds));
  } else {
    snprintf(text, sizeof(text), "rank %d: a collective failed on the device with %s: %s", comm->rank,
             ccoDevStatusName(ds), cco_coll_status_meaning(ds));
  }
  if (cco_coll_engine_note_failure(e, res, text) && failed == ccoSuccess) {
    cco_error(NULL, res, CCO_SUBSYS_COLL, "%s", text); /* the detail fail_async passes on */
    cco_comm_fail_async(comm, res);
  }
}

/* ccoSuccess while the communicator and its collectives are healthy;
 * otherwise the first failure, named (`now`: found by this very call). */
static ccoResult_t check_health(ccoComm* comm, cco_coll_engine* e, const char* api, bool now) {
  if (cco_coll_engine_ready(e)) note_device_failure(comm, e);
  ccoResult_t failed = (ccoResult_t)atomic_load(&comm->asyncError);
  if (failed == ccoSuccess && !cco_coll_engine_failure(e, NULL)) return ccoSuccess;
  if (!cco_coll_engine_failure(e, NULL)) {
    char detail[CCO_ERROR_TEXT_BYTES];
    cco_errsink_copy(&comm->err, detail, sizeof(detail));
    cco_coll_engine_note_failure(e, failed, detail[0] ? detail : ccoGetErrorString(failed));
  }
  ccoResult_t res = ccoInternalError;
  const char* text = cco_coll_engine_failure(e, &res);
  return cco_error_quiet(&comm->err, res, "%s: %s%s", api, now ? "" : "the communicator failed earlier: ",
                         text ? text : "");
}

void cco_coll_api_poll(ccoComm* comm) {
  cco_coll_engine* e = engine_of(comm);
  if (e && cco_coll_engine_ready(e)) note_device_failure(comm, e);
}

/* ------------------------------------------------------------ arguments */

/* The window holding `bytes` at ptr, named `name` in messages. */
static ccoResult_t find_buffer(ccoComm* comm, const char* api, const char* name, const void* ptr, uint64_t bytes,
                               size_t esize, buf_ref* out) {
  if ((uintptr_t)ptr % esize)
    return cco_error(&comm->err, ccoInvalidArgument, CCO_SUBSYS_COLL,
                     "%s: %s %p is not aligned to its %zu-byte elements", api, name, ptr, esize);
  cco_mem* m = &comm->mem;
  pthread_mutex_lock(&m->lock);
  cco_window_rec* start = NULL;
  cco_window_rec* w = cco_mem_window_covering(m, ptr, bytes, &start);
  if (w) {
    out->win = w->dev;
    out->off = (uint64_t)((const char*)ptr - w->localPtr);
    out->slotOff = w->desc.offset + out->off;
  }
  uint64_t startSize = start ? start->desc.size : 0;
  uint64_t startOff = start ? (uint64_t)((const char*)ptr - start->localPtr) : 0;
  bool inSlot = cco_mem_in_own_slot(m, ptr);
  pthread_mutex_unlock(&m->lock);
  if (w) return ccoSuccess;
  if (start)
    return cco_error(&comm->err, ccoInvalidArgument, CCO_SUBSYS_COLL,
                     "%s: %s %p: %llu bytes at offset %llu run past the end of its window (%llu bytes)", api, name,
                     ptr, (unsigned long long)bytes, (unsigned long long)startOff,
                     (unsigned long long)startSize);
  return cco_error(&comm->err, ccoInvalidArgument, CCO_SUBSYS_COLL,
                   inSlot ? "%s: %s %p lies in this communicator's symmetric memory but in no registered window "
                            "(register it with ccoWindowRegister)"
                          : "%s: %s %p is not inside a window registered on this communicator (collectives take "
                            "buffers of ccoWindowRegisterAlloc or ccoWindowRegister)",
                   api, name, ptr);
}

/* Bytes of the send and receive buffers, or an overflow. */
static ccoResult_t buffer_sizes(ccoComm* comm, const char* api, const coll_call* c, size_t esize, uint64_t* sendBytes,
                                uint64_t* recvBytes) {
  uint64_t n = (uint64_t)comm->nRanks;
  if ((uint64_t)c->count > UINT64_MAX / esize / n || (uint64_t)c->count * esize * n > (uint64_t)SIZE_MAX)
    return cco_error(&comm->err, ccoInvalidArgument, CCO_SUBSYS_COLL,
                     "%s: count %zu x %zu-byte elements x %d ranks overflows", api, c->count, esize, comm->nRanks);
  uint64_t unit = (uint64_t)c->count * esize;
  *sendBytes = c->kind == CCO_COLL_REDUCESCATTER || c->kind == CCO_COLL_ALLTOALL ? unit * n : unit;
  *recvBytes = c->kind == CCO_COLL_ALLGATHER || c->kind == CCO_COLL_ALLTOALL ? unit * n : unit;
  return ccoSuccess;
}

/* In place, as the device blocks see it: recv == send (cco_coll_types.h).
 * The public forms: all-reduce and broadcast recvbuf == sendbuf; all-gather
 * sendbuf == recvbuf + rank x sendcount, reduce-scatter recvbuf == sendbuf +
 * rank x recvcount (NCCL's); all-to-all never. Any other overlap is refused. */
static ccoResult_t check_overlap(ccoComm* comm, const char* api, const coll_call* c, uint64_t sendBytes,
                                 uint64_t recvBytes, size_t esize, bool* inPlace) {
  uintptr_t s = (uintptr_t)c->send, r = (uintptr_t)c->recv;
  uint64_t block = (uint64_t)c->count * esize * (uint64_t)comm->rank;
  *inPlace = false;
  if (c->kind == CCO_COLL_ALLREDUCE || c->kind == CCO_COLL_BROADCAST) *inPlace = s == r;
  if (c->kind == CCO_COLL_ALLGATHER) *inPlace = s == r + block;
  if (c->kind == CCO_COLL_REDUCESCATTER) *inPlace = r == s + block;
  if (*inPlace || !sendBytes || !recvBytes || s + sendBytes <= r || r + recvBytes <= s) return ccoSuccess;
  const char* how = c->kind == CCO_COLL_ALLGATHER      ? " (in place, sendbuf is recvbuf + rank x sendcount)"
                    : c->kind == CCO_COLL_REDUCESCATTER ? " (in place, recvbuf is sendbuf + rank x recvcount)"
                    : c->kind == CCO_COLL_ALLTOALL      ? " (all-to-all is never in place)"
                                                        : " (in place, recvbuf is sendbuf)";
  return cco_error(&comm->err, ccoInvalidArgument, CCO_SUBSYS_COLL, "%s: sendbuf %p and recvbuf %p overlap%s", api,
                   c->send, c->recv, how);
}

/* A buffer of the call: found in its window; a NULL one of an empty call
 * stands for the scratch window (every rank then passes the same). */
static ccoResult_t resolve(ccoComm* comm, cco_coll_engine* e, const char* api, const char* name, const void* ptr,
                           uint64_t bytes, size_t esize, buf_ref* out) {
  if (!ptr && !bytes) {
    ccoWindowDevice d;
    CCO_CHECK(ccoWindowGetInfo(comm, cco_coll_engine_config(e)->scratchWin, &d, NULL));
    *out = (buf_ref){cco_coll_engine_config(e)->scratchWin, 0, d.offset};
    return ccoSuccess;
  }
  if (!ptr) return cco_error(&comm->err, ccoInvalidArgument, CCO_SUBSYS_COLL, "%s: %s is NULL", api, name);
  return find_buffer(comm, api, name, ptr, bytes, esize, out);
}

/* The call's device arguments and algorithm, or why not. */
static ccoResult_t build_args(ccoComm* comm, cco_coll_engine* e, const coll_call* c, ccoCollArgs* a,
                              ccoAlgo_t* algo) {
  const char* api = cco_coll_api_name(c->kind);
  if ((unsigned)c->dtype >= ccoNumDataTypes)
    return cco_error(&comm->err, ccoInvalidArgument, CCO_SUBSYS_COLL,
                     "%s: unknown data type %d (ccoFloat32, ccoBfloat16, ccoFloat16 or ccoInt32)", api, (int)c->dtype);
  if (is_reduction(c->kind) && (unsigned)c->op >= ccoNumRedOps)
    return cco_error(&comm->err, ccoInvalidArgument, CCO_SUBSYS_COLL,
                     "%s: unknown reduction operator %d (ccoSum, ccoMax or ccoMin)", api, (int)c->op);
  if (c->kind == CCO_COLL_BROADCAST && (c->root < 0 || c->root >= comm->nRanks))
    return cco_error(&comm->err, ccoInvalidArgument, CCO_SUBSYS_COLL, "%s: root %d is out of range 0..%d", api,
                     c->root, comm->nRanks - 1);
  size_t esize = ccoDataTypeSize(c->dtype);
  uint64_t sendBytes = 0, recvBytes = 0;
  CCO_CHECK(buffer_sizes(comm, api, c, esize, &sendBytes, &recvBytes));
  bool inPlace = false;
  CCO_CHECK(check_overlap(comm, api, c, sendBytes, recvBytes, esize, &inPlace));
  /* In place, the larger of the two (all-gather's recvbuf, reduce-scatter's
   * sendbuf) is both. */
  buf_ref send, recv;
  if (inPlace && c->kind == CCO_COLL_REDUCESCATTER) {
    CCO_CHECK(resolve(comm, e, api, "sendbuf", c->send, sendBytes, esize, &send));
    recv = send;
  } else {
    CCO_CHECK(resolve(comm, e, api, "recvbuf", c->recv, recvBytes, esize, &recv));
    if (inPlace) send = recv;
    else CCO_CHECK(resolve(comm, e, api, "sendbuf", c->send, sendBytes, esize, &send));
  }
  char why[320];
  ccoResult_t res = cco_coll_select(&cco_coll_engine_config(e)->config, c->kind, (size_t)c->count * esize, comm->topo.lsaSize,
                                    comm->topo.nNodes, algo, why, sizeof(why));
  if (res != ccoSuccess) return cco_error(&comm->err, res, CCO_SUBSYS_COLL, "%s", why);
  memset(a, 0, sizeof(*a));
  a->sendWin = send.win;
  a->sendOff = send.off;
  a->recvWin = recv.win;
  a->recvOff = recv.off;
  a->count = c->count;
  a->dtype = (uint32_t)c->dtype;
  a->op = is_reduction(c->kind) ? (uint32_t)c->op : 0u;
  /* The one-host blocks take the root's LSA rank, the hierarchical ones its
   * world rank (it may be on another host). */
  a->root = c->kind != CCO_COLL_BROADCAST ? 0
            : *algo == ccoAlgoHier     ? c->root
                                       : cco_topology_world_to_team(&comm->topo, ccoTeamLsa, c->root);
  a->barrierBase = 0;
  a->scratchWin = cco_coll_engine_config(e)->scratchWin;
  a->scratchOff = 0;
  a->scratchBytes = cco_coll_engine_config(e)->scratchBytes;
  a->signature = cco_coll_signature(c->kind, *algo, cco_coll_engine_config(e)->nParts, a, send.slotOff, recv.slotOff);
  return ccoSuccess;
}

/* A rank that refused its arguments still takes part, with a call that
 * cannot match: peers that launched fail their signature check instead of
 * waiting for this rank (every rank then fails), and ranks that all
 * refused the same call meet, match and move on, with the communicator
 * still usable. The algorithm is the one the peers most likely chose;
 * except LL, which has no barrier to carry a signature: an LL call of
 * another count would leave the peers' LL epochs out of step (wrong
 * results later) instead of failing them, so then nothing is launched and
 * the peers wait, for CCO_COLL_TIMEOUT on the host platform, for an abort
 * on a GPU. */
static void launch_refused(ccoComm* comm, cco_coll_engine* e, const coll_call* c) {
  size_t esize = ccoDataTypeSize(c->dtype);
  size_t bytes = esize && c->count <= SIZE_MAX / esize ? c->count * esize : 0;
  ccoAlgo_t algo = ccoAlgoAuto;
  char why[320];
  if (cco_coll_select(&cco_coll_engine_config(e)->config, c->kind, bytes, comm->topo.lsaSize, comm->topo.nNodes, &algo, why,
                      sizeof(why)) != ccoSuccess)
    cco_coll_select(NULL, c->kind, bytes, comm->topo.lsaSize, comm->topo.nNodes, &algo, why, sizeof(why));
  if (algo == ccoAlgoLL) return;
  ccoCollArgs a;
  memset(&a, 0, sizeof(a));
  a.sendWin = a.recvWin = a.scratchWin = cco_coll_engine_config(e)->scratchWin;
  a.scratchBytes = cco_coll_engine_config(e)->scratchBytes;
  a.signature = CCO_COLL_SIGNATURE_REFUSED;
  char keep[CCO_ERROR_TEXT_BYTES];
  cco_errsink_copy(&comm->err, keep, sizeof(keep));
  ccoResult_t res = cco_coll_engine_launch(e, c->kind, algo, &a, c->stream);
  /* The refusal's detail is what the caller gets, whatever this run says
   * (a mismatch with the peers is reported by the next call). */
  cco_errsink_set(&comm->err, keep);
  (void)res;
}

/* ------------------------------------------------------------ calls */

/* Across hosts: whether `kind` can run on this communicator. Every rank
 * shares the topology, so every rank answers alike, before any collective
 * step. */
static ccoResult_t check_hosts(ccoComm* comm, cco_coll_kind kind, const char* api) {
  const cco_topology* t = &comm->topo;
  if ((int)kind == CCO_COLL_STREAM_KIND) return ccoSuccess; /* the world barrier: any host sizes */
  char why[320];
  ccoAlgo_t algo;
  ccoResult_t res = cco_coll_select(NULL, kind, 0, t->lsaSize, t->nNodes, &algo, why, sizeof(why));
  if (res != ccoSuccess) return cco_error(&comm->err, res, CCO_SUBSYS_COLL, "rank %d: %s", comm->rank, why);
  /* A rail team per LSA rank that reaches every host. */
  for (int node = 0; node < t->nNodes; node++) {
    int size = 0;
    for (int r = 0; r < t->nRanks; r++) size += t->nodeOf[r] == node;
    if (size != t->lsaSize)
      return cco_error(&comm->err, ccoUnsupported, CCO_SUBSYS_COLL,
                       "rank %d: %s over %d hosts: host %d has %d ranks and host %d has %d; the hierarchical "
                       "collectives need the same number of ranks on every host",
                       comm->rank, api, t->nNodes, t->node, t->lsaSize, node, size);
  }
  return ccoSuccess;
}

/* What every call does first: the communicator is healthy, the call can
 * run on its hosts (refused alike by every rank before any collective
 * step), and the state is made (the first call, collective). */
static ccoResult_t prologue(ccoComm* comm, cco_coll_kind kind, const char* api, void* stream, cco_coll_engine** out) {
  cco_coll_engine* e = engine_of(comm);
  if (!e) return cco_error(&comm->err, ccoInternalError, CCO_SUBSYS_COLL, "%s: no collectives engine", api);
  CCO_CHECK(check_health(comm, e, api, false));
  if (comm->topo.nNodes > 1) CCO_CHECK(check_hosts(comm, kind, api));
  if (!cco_coll_engine_ready(e)) CCO_CHECK(cco_coll_state_setup(comm, e, api, stream));
  *out = e;
  return ccoSuccess;
}

static ccoResult_t coll_run(ccoComm* comm, const coll_call* c) {
  const char* api = cco_coll_api_name(c->kind);
  cco_coll_engine* e = NULL;
  CCO_CHECK(prologue(comm, c->kind, api, c->stream, &e));
  ccoCollArgs a;
  ccoAlgo_t algo = ccoAlgoAuto;
  ccoResult_t res = build_args(comm, e, c, &a, &algo);
  if (res != ccoSuccess) {
    launch_refused(comm, e, c);
    return res;
  }
  res = cco_coll_engine_launch(e, c->kind, algo, &a, c->stream);
  if (res == ccoSuccess) return ccoSuccess;
  /* The blocks failed (host platform) or the launch did (CUDA). */
  if (cco_coll_engine_status(e).status != ccoDevSuccess) return check_health(comm, e, api, true);
  return cco_comm_keep_error(comm, res);
}

ccoResult_t ccoAllReduce(ccoComm* comm, const void* sendbuf, void* recvbuf, size_t count, ccoDataType_t dtype,
                         ccoRedOp_t op, void* stream) {
  CCO_VALIDATE_COMM(comm);
  coll_call c = {CCO_COLL_ALLREDUCE, sendbuf, recvbuf, count, dtype, op, 0, stream};
  return coll_run(comm, &c);
}

ccoResult_t ccoAllGather(ccoComm* comm, const void* sendbuf, void* recvbuf, size_t sendcount, ccoDataType_t dtype,
                         void* stream) {
  CCO_VALIDATE_COMM(comm);
  coll_call c = {CCO_COLL_ALLGATHER, sendbuf, recvbuf, sendcount, dtype, ccoSum, 0, stream};
  return coll_run(comm, &c);
}

ccoResult_t ccoReduceScatter(ccoComm* comm, const void* sendbuf, void* recvbuf, size_t recvcount,
                             ccoDataType_t dtype, ccoRedOp_t op, void* stream) {
  CCO_VALIDATE_COMM(comm);
  coll_call c = {CCO_COLL_REDUCESCATTER, sendbuf, recvbuf, recvcount, dtype, op, 0, stream};
  return coll_run(comm, &c);
}

ccoResult_t ccoAlltoAll(ccoComm* comm, const void* sendbuf, void* recvbuf, size_t count, ccoDataType_t dtype,
                        void* stream) {
  CCO_VALIDATE_COMM(comm);
  coll_call c = {CCO_COLL_ALLTOALL, sendbuf, recvbuf, count, dtype, ccoSum, 0, stream};
  return coll_run(comm, &c);
}

ccoResult_t ccoBroadcast(ccoComm* comm, const void* sendbuf, void* recvbuf, size_t count, ccoDataType_t dtype,
                         int root, void* stream) {
  CCO_VALIDATE_COMM(comm);
  coll_call c = {CCO_COLL_BROADCAST, sendbuf, recvbuf, count, dtype, ccoSum, root, stream};
  return coll_run(comm, &c);
}

/* A barrier ordered on the stream, on the engine's device communicator
 * (an LSA barrier on one host, its world barrier across hosts), so it needs
 * the collectives' state. */
ccoResult_t ccoBarrierOnStream(ccoComm* comm, void* stream) {
  CCO_VALIDATE_COMM(comm);
  cco_coll_engine* e = NULL;
  CCO_CHECK(prologue(comm, (cco_coll_kind)CCO_COLL_STREAM_KIND, "ccoBarrierOnStream", stream, &e));
  ccoResult_t res = cco_coll_engine_stream_barrier(e, stream);
  if (res == ccoSuccess) return ccoSuccess;
  if (cco_coll_engine_status(e).status != ccoDevSuccess) return check_health(comm, e, "ccoBarrierOnStream", true);
  return cco_comm_keep_error(comm, res);
}

ccoResult_t ccoCollAlgorithm(const ccoComm* comm, const char* coll, size_t bytes, ccoAlgo_t* algo) {
  CCO_VALIDATE_COMM(comm);
  cco_errsink* err = cco_comm_errsink(comm);
  if (!coll || !algo)
    return cco_error(err, ccoInvalidArgument, CCO_SUBSYS_COLL, "ccoCollAlgorithm: %s is NULL", coll ? "algo" : "coll");
  int kind = cco_coll_kind_from_name(coll);
  if (kind < 0)
    return cco_error(err, ccoInvalidArgument, CCO_SUBSYS_COLL,
                     "ccoCollAlgorithm: unknown collective '%s' (allreduce, allgather, reducescatter, alltoall or "
                     "broadcast)",
                     coll);
  cco_coll_config cfg;
  char why[320];
  ccoResult_t res = cco_coll_config_parse(cco_env_str(CCO_ENV_ID_CCO_ALGO), &cfg, why, sizeof(why));
  if (res == ccoSuccess)
    res = cco_coll_select(&cfg, (cco_coll_kind)kind, bytes, comm->topo.lsaSize, comm->topo.nNodes, algo, why,
                          sizeof(why));
  if (res != ccoSuccess) return cco_error(err, res, CCO_SUBSYS_COLL, "ccoCollAlgorithm: %s", why);
  return ccoSuccess;
}
