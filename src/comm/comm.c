/* Communicator lifecycle, host collectives, and the calls transports make back into it. */
#include "comm/comm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "base/env.h"
#include "base/error.h"
#include "base/log.h"
#include "boot/affinity.h"

#define CCO_GIB (1ull << 30)
/* Slots of the flat VA are whole multiples of 4 GiB so that a window can
 * store its stride as `stride4G` (a peer is base + peer * (stride4G << 32)). */
#define CCO_SLOT_GRANULE (4ull * CCO_GIB)
#define CCO_DEFAULT_PER_RANK_VMM (4ull * CCO_GIB)
#define CCO_MAX_PER_RANK_VMM (1ull << 40)
#define CCO_MAX_RANKS (1 << 20)

ccoResult_t cco_comm_keep_error(ccoComm* comm, ccoResult_t res) {
  if (res != ccoSuccess) cco_errsink_set(&comm->err, cco_thread_last_error());
  return res;
}

/* A copy, in one of a few buffers of the calling thread taken in turn: the
 * communicator's text may be replaced at any time by a background thread
 * (the liveness monitor, an engine), and a caller may hold a few results
 * at once (one expression naming two communicators). */
#define LAST_ERROR_COPIES 4

const char* ccoGetLastError(const ccoComm* comm) {
  static _Thread_local char copies[LAST_ERROR_COPIES][CCO_ERROR_TEXT_BYTES];
  static _Thread_local unsigned next;
  if (!comm) return cco_thread_last_error();
  if (!cco_comm_is_valid(comm)) return "invalid communicator handle";
  char* out = copies[next++ % LAST_ERROR_COPIES];
  cco_errsink_copy((cco_errsink*)&comm->err, out, CCO_ERROR_TEXT_BYTES);
  return out;
}

/* Binds the creating thread near the communicator's GPU once the platform
 * has chosen it (the thread's device, or CCO_LOCAL_RANK's), and before the
 * bootstrap and worker threads start, so they inherit it. No GPU: nothing
 * to do. */
static void bind_near_gpu(cco_platform* platform, int rank) {
  if (cco_env_bool(CCO_ENV_ID_CCO_IGNORE_CPU_AFFINITY)) {
    CCO_INFO(AFFINITY, "rank %d: CCO_IGNORE_CPU_AFFINITY set; placement left as it is", rank);
    return;
  }
  const char* current = platform->identity.busId;
  char visible[CCO_MAX_GPUS][CCO_BUS_ID_BYTES];
  const char* visiblePtrs[CCO_MAX_GPUS];
  int n = 0;
  if (platform->ops->visible_gpus(platform, visible, CCO_MAX_GPUS, &n) != ccoSuccess || n == 0) return;
  for (int i = 0; i < n; i++) visiblePtrs[i] = visible[i];
  cco_affinity_query q = {"", current, visiblePtrs, n,
                          cco_env_bool(CCO_ENV_ID_CCO_CPU_AFFINITY_NO_SPLIT)};
  cco_affinity_kind kind;
  /* A failed bind is not fatal: the job runs, only slower. */
  if (cco_affinity_bind_calling_thread(&q, &kind) != ccoSuccess)
    CCO_WARN(AFFINITY, "rank %d: could not bind near gpu %s: %s", rank, current,
             cco_thread_last_error());
}

static ccoResult_t round_vmm_size(size_t requested, size_t* out) {
  uint64_t size = requested ? (uint64_t)requested : CCO_DEFAULT_PER_RANK_VMM;
  if (size > CCO_MAX_PER_RANK_VMM)
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_INIT,
                     "perRankVmmSize %zu is over the 1 TiB limit", requested);
  *out = (size_t)((size + CCO_SLOT_GRANULE - 1) / CCO_SLOT_GRANULE * CCO_SLOT_GRANULE);
  return ccoSuccess;
}

/* Every rank decides the same: one platform for the whole job. */
static ccoResult_t check_platforms(ccoComm* comm, const cco_rank_info* infos) {
  for (int r = 0; r < comm->nRanks; r++)
    if (infos[r].device.platform != infos[0].device.platform)
      return cco_error(&comm->err, ccoInvalidUsage, CCO_SUBSYS_INIT,
                       "rank %d: rank 0 uses the %s platform but rank %d the %s platform; set "
                       "CCO_PLATFORM the same on every rank",
                       comm->rank, infos[0].device.platform ? "cuda" : "host", r,
                       infos[r].device.platform ? "cuda" : "host");
  return ccoSuccess;
}

static ccoResult_t exchange_topology(ccoComm* comm) {
  cco_rank_info* infos = calloc((size_t)comm->nRanks, sizeof(cco_rank_info));
  if (!infos) return cco_error(&comm->err, ccoOutOfMemory, CCO_SUBSYS_INIT, "no memory for rank info");
  ccoResult_t res = cco_rank_info_local(&infos[comm->rank]);
  infos[comm->rank].device = comm->platform.identity;
  if (res == ccoSuccess)
    res = cco_bootstrap_allgather(&comm->boot, &comm->err, infos, sizeof(cco_rank_info));
  if (res == ccoSuccess) res = cco_topology_build(infos, comm->nRanks, comm->rank, &comm->topo);
  if (res == ccoSuccess) res = check_platforms(comm, infos);
  if (res == ccoSuccess)
    CCO_INFO(INIT, "rank %d/%d: host %s, node %d of %d, lsa rank %d of %d", comm->rank,
             comm->nRanks, infos[comm->rank].hostname, comm->topo.node, comm->topo.nNodes,
             comm->topo.lsaRank, comm->topo.lsaSize);
  free(infos);
  return res;
}

/* ------------------------------------------ calls of the transports */

static ccoResult_t transport_allgather(void* owner, void* buf, size_t bytesPerRank,
                                       bool inCollective) {
  ccoComm* comm = owner;
  if (inCollective) return cco_bootstrap_allgather(&comm->boot, &comm->err, buf, bytesPerRank);
  CCO_CHECK(cco_comm_begin_collective(comm, "allgather"));
  return cco_comm_end_collective(comm,
                                 cco_bootstrap_allgather(&comm->boot, &comm->err, buf, bytesPerRank));
}

static void transport_fail(void* owner, ccoResult_t res) { cco_comm_fail_async(owner, res); }

static void peer_lost(void* owner, ccoResult_t res, int peer, const char* reason);

ccoResult_t ccoCommCreate(ccoUniqueId id, int nRanks, int rank, size_t perRankVmmSize,
                          ccoComm** commOut) {
  const char* detail = NULL;
  if (!commOut) return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_INIT, "comm is NULL");
  if (nRanks < 1 || nRanks > CCO_MAX_RANKS)
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_INIT, "nRanks %d out of range 1..%d",
                     nRanks, CCO_MAX_RANKS);
  if (rank < 0 || rank >= nRanks)
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_INIT, "rank %d out of range 0..%d",
                     rank, nRanks - 1);
  if (cco_env_status(&detail) != ccoSuccess)
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_ENV, "%s", detail);
  cco_id_info info;
  int err = cco_uniqueid_decode(&id, &info);
  if (err != CCO_WIRE_OK)
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_INIT, "not a valid cco unique id: %s",
                     cco_wire_strerror(err));
  size_t slot = 0;
  CCO_CHECK(round_vmm_size(perRankVmmSize, &slot));

  ccoResult_t res = ccoSuccess;
  ccoComm* comm = cco_comm_handle_new();
  if (!comm) return cco_error(NULL, ccoOutOfMemory, CCO_SUBSYS_INIT, "no memory for comm");
  comm->magic = CCO_COMM_MAGIC;
  comm->rank = rank;
  comm->nRanks = nRanks;
  comm->perRankVmmSize = slot;
  atomic_init(&comm->asyncError, ccoSuccess);
  atomic_init(&comm->aborted, false);
  pthread_mutex_init(&comm->opLock, NULL);
  cco_errsink_init(&comm->err);
  comm->wakeFd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (comm->wakeFd < 0) {
    res = cco_error(NULL, ccoSystemError, CCO_SUBSYS_INIT, "eventfd failed: %s", strerror(errno));
    goto err_comm;
  }
  CCO_CHECK_GOTO(cco_platform_open(&comm->platform), res, err_wake);
  comm->platformOpen = true;
  bind_near_gpu(&comm->platform, rank);
  double timeout = cco_env_double(CCO_ENV_ID_CCO_BOOTSTRAP_TIMEOUT);
  CCO_CHECK_GOTO(cco_bootstrap_init(&comm->boot, &comm->err, &info, nRanks, rank, timeout, comm->wakeFd),
                 res, err_platform);
  CCO_CHECK_GOTO(exchange_topology(comm), res, err_boot);
  cco_mem_config memConfig = {&comm->platform, &comm->boot, &comm->err, &comm->topo, slot,
                              comm->wakeFd};
  CCO_CHECK_GOTO(cco_mem_init(&comm->mem, &memConfig), res, err_mem);
  comm->transportCtx = (cco_transport_ctx){
      .rank = rank,
      .nRanks = nRanks,
      .topo = &comm->topo,
      .platform = &comm->platform,
      .mem = &comm->mem,
      .err = &comm->err,
      .timeout = timeout,
      .owner = comm,
      .allgather = transport_allgather,
      .fail = transport_fail,
      .failed = &comm->asyncError,
  };
  CCO_CHECK_GOTO(cco_transports_start(comm), res, err_mem);
  if (!cco_comm_handle_publish(comm)) {
    res = cco_error(NULL, ccoOutOfMemory, CCO_SUBSYS_INIT, "no memory for the handle table");
    goto err_transports;
  }
  /* Last: its callback may use every part of the communicator. */
  if (cco_env_bool(CCO_ENV_ID_CCO_LIVENESS)) {
    res = cco_liveness_start(&comm->boot, &comm->err, peer_lost, comm, &comm->liveness);
    if (res != ccoSuccess) {
      cco_comm_handle_retire(comm);
      goto err_transports;
    }
  }
  CCO_INFO(INIT, "rank %d/%d: communicator %p ready", rank, nRanks, (void*)comm);
  *commOut = comm;
  return ccoSuccess;

err_transports:
  cco_transports_stop(comm);
  cco_transports_destroy(comm);
err_mem:
  cco_mem_fini(&comm->mem);
err_boot:
  cco_bootstrap_destroy(&comm->boot);
  cco_topology_free(&comm->topo);
err_platform:
  cco_platform_close(&comm->platform);
err_wake:
  close(comm->wakeFd);
err_comm:
  /* The detail lives in the thread's last error; the comm dies with it. */
  pthread_mutex_destroy(&comm->opLock);
  cco_errsink_fini(&comm->err);
  comm->magic = 0;
  cco_comm_handle_release(comm);
  return res;
}

ccoResult_t ccoCommCreateFromEnv(size_t perRankVmmSize, ccoComm** comm) {
  const char* detail = NULL;
  if (cco_env_status(&detail) != ccoSuccess)
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_ENV, "%s", detail);
  const char* text = cco_env_str(CCO_ENV_ID_CCO_UNIQUE_ID);
  int64_t nRanks = cco_env_int(CCO_ENV_ID_CCO_NRANKS), rank = cco_env_int(CCO_ENV_ID_CCO_RANK);
  if (!text[0] || nRanks < 1 || rank < 0)
    return cco_error(NULL, ccoInvalidUsage, CCO_SUBSYS_INIT,
                     "CCO_UNIQUE_ID, CCO_NRANKS and CCO_RANK must be set (start the program "
                     "with ccorun)");
  if (nRanks > CCO_MAX_RANKS || rank >= nRanks)
    return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_INIT,
                     "CCO_RANK=%lld is out of range for CCO_NRANKS=%lld", (long long)rank,
                     (long long)nRanks);
  ccoUniqueId id;
  CCO_CHECK(ccoUniqueIdFromString(text, &id));
  return ccoCommCreate(id, (int)nRanks, (int)rank, perRankVmmSize, comm);
}

static void wake_waiters(ccoComm* comm) {
  uint64_t one = 1;
  (void)!write(comm->wakeFd, &one, sizeof(one));
}

/* A failure of the job becomes the async error; returns whether it is the
 * first (the caller then sets the abort words). Its detail, when there is
 * one, goes to the communicator's error text first: a thread that sees
 * the async error then reads the detail that goes with it. */
static bool note_failure(ccoComm* comm, ccoResult_t res, const char* detail) {
  if (atomic_load(&comm->asyncError) != ccoSuccess) return false;
  if (detail[0]) cco_errsink_set(&comm->err, detail);
  int expected = ccoSuccess;
  return atomic_compare_exchange_strong(&comm->asyncError, &expected, (int)res);
}

/* As ccoCommAbort, with the background failure as the reason: device waits
 * stop (abort word), blocked host calls wake, and the peers are told. The
 * engine thread that found the failure recorded its detail as the thread's
 * last error just before: it becomes the communicator's detail and goes to
 * the peers, so they learn which peer is gone. A peer that an engine finds
 * gone (or answering oddly) may only have left because another rank died:
 * when the bootstrap links already tell of a death or a failure, that is
 * the cause, and the result is ccoRemoteError. */
void cco_comm_fail_async(ccoComm* comm, ccoResult_t res) {
  const char* detail = cco_thread_last_error();
  char linked[CCO_ERROR_TEXT_BYTES];
  if (cco_liveness_probe(comm->liveness, linked, sizeof(linked))) {
    detail = linked;
    res = ccoRemoteError;
  }
  char reason[CCO_ERROR_TEXT_BYTES + 64];
  snprintf(reason, sizeof(reason), "rank %d failed in the background: %s", comm->rank,
           detail[0] ? detail : ccoGetErrorString(res));
  if (note_failure(comm, res, detail)) cco_devcomm_abort_all(comm);
  atomic_store(&comm->aborted, true);
  cco_bootstrap_set_wake_reason(&comm->boot, res, reason);
  wake_waiters(comm);
  pthread_mutex_lock(&comm->opLock);
  cco_bootstrap_fail(&comm->boot, res, reason);
  pthread_mutex_unlock(&comm->opLock);
}

/* How long a running collective may keep the collective lock from the
 * liveness monitor before it is woken up. A collective that reads from the
 * dead rank, or from a rank that failed because of it, fails by itself
 * within milliseconds with the same cause; one blocked elsewhere (passing
 * memory fds to the dead rank, or waiting on a live rank that sits in a
 * device wait) would otherwise wait out its timeout. */
#define PEER_LOST_GRACE_NS 100000000L

/* The liveness monitor's report (src/boot/liveness.c): a peer died or
 * failed. Under the collective lock, so the links carry whole messages: if
 * the bootstrap has failed already (a collective found it, or the hang-up
 * the monitor saw was this rank's own), that path has recorded and told
 * everything. Otherwise record it (logged once, here), stop device waits
 * and tell the peers (ABORT on every link), so the failure spreads over
 * the link mesh. */
static void peer_lost(void* owner, ccoResult_t res, int peer, const char* reason) {
  ccoComm* comm = owner;
  (void)peer;
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_nsec += PEER_LOST_GRACE_NS;
  if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
  if (pthread_mutex_timedlock(&comm->opLock, &until) != 0) {
    /* A collective is blocked: record the cause, then wake it; it fails
     * with this cause and tells the peers. The abort words come after the
     * wake: the collective may hold the memory lock they need. */
    bool first = note_failure(comm, res, reason);
    if (first) CCO_WARN(BOOT, "%s: %s", ccoGetErrorString(res), reason);
    cco_bootstrap_set_wake_reason(&comm->boot, res, reason);
    wake_waiters(comm);
    if (first) cco_devcomm_abort_all(comm);
    pthread_mutex_lock(&comm->opLock);
  }
  if (comm->boot.failResult == ccoSuccess) {
    if (note_failure(comm, res, reason)) {
      CCO_WARN(BOOT, "%s: %s", ccoGetErrorString(res), reason);
      cco_devcomm_abort_all(comm);
    }
    cco_bootstrap_fail(&comm->boot, res, reason);
  }
  pthread_mutex_unlock(&comm->opLock);
}

ccoResult_t ccoCommAbort(ccoComm* comm) {
  CCO_VALIDATE_COMM(comm);
  atomic_store(&comm->aborted, true);
  wake_waiters(comm);
  /* A thread blocked in a collective wakes up and releases the lock. */
  pthread_mutex_lock(&comm->opLock);
  char reason[96];
  snprintf(reason, sizeof(reason), "rank %d aborted its communicator", comm->rank);
  cco_bootstrap_fail(&comm->boot, ccoInvalidUsage, reason);
  if (note_failure(comm, ccoInvalidUsage, "")) cco_devcomm_abort_all(comm);
  pthread_mutex_unlock(&comm->opLock);
  cco_errsink_set(&comm->err, "communicator aborted with ccoCommAbort");
  CCO_INFO(INIT, "rank %d: communicator %p aborted", comm->rank, (void*)comm);
  return ccoSuccess;
}

ccoResult_t ccoCommDestroy(ccoComm* comm) {
  CCO_VALIDATE_COMM(comm);
  wake_waiters(comm); /* nothing may stay blocked on a communicator being destroyed */
  /* Background threads first, and outside the lock: a failing engine and
   * the liveness monitor take it. The engines first: a failing one asks
   * the monitor's links for the cause. */
  cco_transports_stop(comm);
  cco_liveness_stop(comm->liveness);
  comm->liveness = NULL;
  pthread_mutex_lock(&comm->opLock);
  cco_comm_handle_retire(comm);
  comm->magic = 0;
  /* Device communicators, then the transports (the platform still open),
   * then windows and memory (they may name peers), then the links. */
  pthread_mutex_lock(&comm->mem.lock);
  cco_devcomm_free_all(comm);
  pthread_mutex_unlock(&comm->mem.lock);
  cco_transports_destroy(comm);
  cco_mem_fini(&comm->mem);
  cco_platform_close(&comm->platform);
  /* After every collective message, so the peers' monitors do not take
   * this rank for dead. */
  cco_liveness_goodbye(&comm->boot);
  cco_bootstrap_destroy(&comm->boot);
  cco_topology_free(&comm->topo);
  close(comm->wakeFd);
  pthread_mutex_unlock(&comm->opLock);
  pthread_mutex_destroy(&comm->opLock);
  cco_errsink_fini(&comm->err);
  cco_comm_handle_release(comm);
  return ccoSuccess;
}

ccoResult_t ccoCommGetAsyncError(ccoComm* comm, ccoResult_t* asyncError) {
  CCO_VALIDATE_COMM(comm);
  if (!asyncError)
    return cco_error(&comm->err, ccoInvalidArgument, CCO_SUBSYS_INIT, "asyncError is NULL");
  cco_coll_api_poll(comm); /* the collectives' kernels report in a word of their own */
  *asyncError = (ccoResult_t)atomic_load(&comm->asyncError);
  return ccoSuccess;
}

ccoResult_t cco_comm_begin_collective(ccoComm* comm, const char* op) {
  if (atomic_load(&comm->aborted))
    return cco_error(&comm->err, ccoInvalidUsage, CCO_SUBSYS_BOOT, "rank %d: %s on an aborted communicator",
                     comm->rank, op);
  pthread_mutex_lock(&comm->opLock);
  return ccoSuccess;
}

ccoResult_t cco_comm_end_collective(ccoComm* comm, ccoResult_t res) {
  if (res != ccoSuccess && comm->boot.failResult != ccoSuccess)
    if (note_failure(comm, comm->boot.failResult, "")) cco_devcomm_abort_all(comm);
  pthread_mutex_unlock(&comm->opLock);
  return res;
}

ccoResult_t ccoBarrierAll(ccoComm* comm) {
  CCO_VALIDATE_COMM(comm);
  CCO_CHECK(cco_comm_begin_collective(comm, "barrier"));
  return cco_comm_end_collective(comm, cco_bootstrap_barrier(&comm->boot, &comm->err));
}

ccoResult_t ccoBootstrapAllGather(ccoComm* comm, const void* sendbuf, void* recvbuf,
                                  size_t bytesPerRank) {
  CCO_VALIDATE_COMM(comm);
  if (!recvbuf || (!sendbuf && bytesPerRank))
    return cco_error(&comm->err, ccoInvalidArgument, CCO_SUBSYS_BOOT, "allgather: NULL buffer");
  /* Sizes first: the overlap check below would wrap around with them. */
  if (bytesPerRank > UINT32_MAX)
    return cco_error(&comm->err, ccoInvalidArgument, CCO_SUBSYS_BOOT,
                     "allgather: %zu bytes per rank is over the 4 GiB limit", bytesPerRank);
  if (bytesPerRank > (SIZE_MAX - (uintptr_t)recvbuf) / (size_t)comm->nRanks ||
      (sendbuf && bytesPerRank > SIZE_MAX - (uintptr_t)sendbuf))
    return cco_error(&comm->err, ccoInvalidArgument, CCO_SUBSYS_BOOT,
                     "allgather: %d ranks times %zu bytes do not fit in the address space",
                     comm->nRanks, bytesPerRank);
  char* mine = (char*)recvbuf + (size_t)comm->rank * bytesPerRank;
  if (sendbuf && sendbuf != mine) {
    uintptr_t s = (uintptr_t)sendbuf, r = (uintptr_t)recvbuf;
    size_t total = (size_t)comm->nRanks * bytesPerRank;
    if (s < r + total && r < s + bytesPerRank)
      return cco_error(&comm->err, ccoInvalidArgument, CCO_SUBSYS_BOOT,
                       "allgather: sendbuf overlaps recvbuf other than at this rank's block");
    memcpy(mine, sendbuf, bytesPerRank);
  }
  CCO_CHECK(cco_comm_begin_collective(comm, "allgather"));
  return cco_comm_end_collective(comm, cco_bootstrap_allgather(&comm->boot, &comm->err, recvbuf, bytesPerRank));
}

