/*
 * The communicator object (internal layout) and what the files of src/comm
 * share. Only this layer knows ccoComm: the layers below take the pieces
 * they need (the bootstrap, the topology, the platform, the memory, an
 * error sink, a transport context).
 */
#ifndef CCO_COMM_COMM_H_
#define CCO_COMM_COMM_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "boot/bootstrap.h"
#include "boot/liveness.h"
#include "boot/topology.h"
#include "cco/cco.h"
#include "coll/coll.h"
#include "mem/mem.h"
#include "platform/platform.h"
#include "transport/transport.h"

#define CCO_COMM_MAGIC 0x636f6d6d5f636f63ull /* "coc_mmoc" */
#define CCO_MAX_TRANSPORTS 8

/* One registered transport of a communicator. */
typedef struct {
  const cco_transport_ops* ops;
  void* state; /* NULL until started */
} cco_transport;

typedef struct cco_devcomm_rec cco_devcomm_rec; /* src/comm/devcomm.c */

struct ccoComm {
  uint64_t magic; /* CCO_COMM_MAGIC while alive (handles are also checked against the live table) */
  int rank;
  int nRanks;
  size_t perRankVmmSize; /* rounded up to 4 GiB */
  cco_bootstrap boot;
  cco_liveness* liveness; /* watches the links for dead peers; NULL when off or one rank */
  cco_topology topo;
  pthread_mutex_t opLock; /* serializes collectives of this communicator */
  cco_errsink err;        /* the last error's detail (ccoGetLastError) */
  _Atomic int asyncError; /* ccoResult_t; first failure wins */
  _Atomic bool aborted;
  int wakeFd; /* eventfd: readable once aborted, wakes every blocked wait */
  cco_platform platform;
  bool platformOpen;
  cco_mem mem; /* flat VA, allocations, windows */
  cco_transport_ctx transportCtx; /* what every transport is given */
  cco_transport transports[CCO_MAX_TRANSPORTS];
  int nTransports;               /* registered (started ones have a state) */
  cco_devcomm_rec* devcomms;     /* device communicators; guarded by mem.lock */
  uint64_t nextDevCommId;
};

/* Handles (src/comm/handles.c). new: a zeroed object whose address no
 * earlier communicator of this process had; release: its memory goes back
 * and the address is never handed out again. publish / retire: enter it
 * in / remove it from the live table that is_valid consults. */
ccoComm* cco_comm_handle_new(void);
void cco_comm_handle_release(ccoComm* comm);
bool cco_comm_handle_publish(const ccoComm* comm);
void cco_comm_handle_retire(const ccoComm* comm);
bool cco_comm_is_valid(const ccoComm* comm);
/* The address range handles come from (NULL, 0 before the first
 * communicator): it stays reserved for the life of the process, which leak
 * checks of tests must know. */
void cco_comm_handle_arena(const void** base, size_t* bytes);

/* Where a failure's detail goes for ccoGetLastError(comm): also for calls
 * that take the communicator as const (queries), whose failures are still
 * the communicator's last error. */
static inline cco_errsink* cco_comm_errsink(const ccoComm* comm) { return (cco_errsink*)&comm->err; }

/* The detail of a failure that a lower layer recorded only for the calling
 * thread (a platform call, say) becomes the communicator's last error too.
 * Returns res. */
ccoResult_t cco_comm_keep_error(ccoComm* comm, ccoResult_t res);

/* First line of every public function taking a communicator. */
#define CCO_VALIDATE_COMM(comm)                                                             \
  do {                                                                                      \
    if (!cco_comm_is_valid(comm))                                                           \
      return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_INIT,                           \
                       "%s: invalid communicator handle (NULL, destroyed or foreign)", __func__); \
  } while (0)

/* Collectives of one communicator run one at a time: begin takes the lock
 * (refusing an aborted communicator), end records a failure of the job as
 * the async error and releases the lock. */
ccoResult_t cco_comm_begin_collective(ccoComm* comm, const char* op);
ccoResult_t cco_comm_end_collective(ccoComm* comm, ccoResult_t res);

/* A failure found in the background (an engine thread): becomes the async
 * error and sets every device communicator's abort word. */
void cco_comm_fail_async(ccoComm* comm, ccoResult_t res);

/* The transport registry (src/comm/transports.c). Start runs every
 * transport's start in order (collective; on failure the started ones are
 * destroyed again); the others call one op of every started transport that
 * has it. */
ccoResult_t cco_transports_start(ccoComm* comm);
void cco_transports_stop(ccoComm* comm);
void cco_transports_destroy(ccoComm* comm);
ccoResult_t cco_transports_window_added(ccoComm* comm, const cco_window_info* win);
void cco_transports_window_removed(ccoComm* comm, const cco_window_info* win);

/* Device communicators (src/comm/devcomm.c). abort_all sets every abort
 * word, so device waits return; free_all releases every device
 * communicator's transport state and tables (mem lock held; their windows
 * go with the other windows). */
void cco_devcomm_abort_all(ccoComm* comm);
/* The live device communicator whose resource window win is, or NULL (mem
 * lock held); and its id. */
const cco_devcomm_rec* cco_devcomm_using_window(ccoComm* comm, ccoWindow_t win);
uint64_t cco_devcomm_id(const cco_devcomm_rec* d);
void cco_devcomm_free_all(ccoComm* comm);

/* The collectives (src/comm/coll_api.c): a failure their device blocks
 * reported becomes the communicator's (ccoCommGetAsyncError asks first). */
void cco_coll_api_poll(ccoComm* comm);
/* Address of `bytes` at `off` of LSA rank lsa's copy of win, bounds checked
 * (src/comm/sdma_api.c); a signal must be an aligned uint64_t. `what`
 * names the argument in messages. */
ccoResult_t cco_comm_window_addr(ccoComm* comm, ccoWindow_t win, int lsa, size_t off, size_t bytes, bool signal,
                                 const char* what, uint64_t* addr);
/* The collectives' state (src/comm/coll_state.c): made by every rank's
 * first collective call, together; `api` names the call in messages. */
ccoResult_t cco_coll_state_setup(ccoComm* comm, cco_coll_engine* e, const char* api, void* stream);
/* The communicator's collectives engine (the stream calls use it too). */
cco_coll_engine* cco_comm_coll_engine(ccoComm* comm);

#endif /* CCO_COMM_COMM_H_ */
