/* The communicator object (internal layout). */
#ifndef CCO_CORE_COMM_H_
#define CCO_CORE_COMM_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "bootstrap.h"
#include "error.h"
#include "cco/cco.h"
#include "mem/symm.h"
#include "topology.h"

#define CCO_COMM_MAGIC 0x636f6d6d5f636f63ull /* "coc_mmoc" */

struct ccoComm {
  uint64_t magic; /* CCO_COMM_MAGIC while alive (handles are also checked against the live table) */
  int rank;
  int nRanks;
  size_t perRankVmmSize; /* rounded up to 4 GiB */
  cco_bootstrap boot;
  cco_topology topo;
  pthread_mutex_t opLock;  /* serializes collectives of this communicator */
  pthread_mutex_t errLock; /* guards lastError */
  char lastError[512];
  _Atomic int asyncError; /* ccoResult_t; first failure wins */
  _Atomic bool aborted;
  int wakeFd; /* eventfd: readable once aborted, wakes every blocked wait */
  cco_symm mem; /* platform, flat VA, allocations, windows */
  struct cco_sdma_engine* sdma; /* SDMA engine thread, started by the first device communicator */
  struct cco_gda_proxy* gda;    /* GDA proxy thread, started by the first device communicator using it */
};

bool cco_comm_is_valid(const ccoComm* comm);

/* First line of every public function taking a communicator. */
#define CCO_VALIDATE_COMM(comm)                                                             \
  do {                                                                                      \
    if (!cco_comm_is_valid(comm))                                                           \
      return cco_error(NULL, ccoInvalidArgument, CCO_SUBSYS_INIT,                           \
                       "%s: invalid communicator handle (NULL, destroyed or foreign)", __func__); \
  } while (0)
void cco_comm_set_last_error(ccoComm* comm, const char* msg);

/* Collectives of one communicator run one at a time: begin takes the lock
 * (refusing an aborted communicator), end records a failure of the job as
 * the async error and releases the lock. */
ccoResult_t cco_comm_begin_collective(ccoComm* comm, const char* op);
ccoResult_t cco_comm_end_collective(ccoComm* comm, ccoResult_t res);

/* A failure found in the background (an engine thread): becomes the async
 * error and sets every device communicator's abort word. */
void cco_comm_fail_async(ccoComm* comm, ccoResult_t res);

#endif /* CCO_CORE_COMM_H_ */
