/*
 * Socket bootstrap: rendezvous at the root (rank 0), then a mesh of links
 * at distances 1, 2, 4, ... used by the ring allgather (distance 1) and the
 * dissemination barrier (all distances).
 *
 * Trust: every connection starts with a HELLO carrying the 128-bit secret of
 * the unique id; the root and every link acceptor refuse (with a REFUSE
 * reply and a log line) anything with a wrong secret, nRanks, rank or link,
 * and carry on with the job.
 *
 * Failure: the first failure on a rank (peer closed, timeout, mismatch,
 * abort) sends ABORT to every link and shuts the links down, so every other
 * rank blocked on this one fails promptly and passes it on.
 */
#ifndef CCO_BOOT_BOOTSTRAP_H_
#define CCO_BOOT_BOOTSTRAP_H_

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "boot/socket.h"
#include "boot/uniqueid.h"
#include "boot/wire.h"
#include "cco/cco.h"

#define CCO_BOOTSTRAP_MAX_LINKS 31


typedef struct {
  int rank;
  int nRanks;
  int nLinks;                          /* ceil(log2(nRanks)) */
  int outFd[CCO_BOOTSTRAP_MAX_LINKS];  /* to (rank + 2^k) % nRanks */
  int inFd[CCO_BOOTSTRAP_MAX_LINKS];   /* from (rank - 2^k) % nRanks */
  int listenFd;
  cco_sockaddr listenAddr;
  uint8_t secret[CCO_WIRE_SECRET_BYTES];
  double timeout; /* seconds; 0 = none */
  int wakeFd;     /* readable once the communicator is aborted (not owned) */
  uint32_t seq;   /* collective sequence number, identical on every rank */
  ccoResult_t failResult;
  char failReason[320];
  /* Why a wake (wakeFd) interrupts a step, when the owner knows the cause
   * (cco_bootstrap_set_wake_reason); 0 = "communicator aborted", -1 while
   * the reason is written. */
  _Atomic int wakeResult;
  char wakeReason[320];
} cco_bootstrap;

/* Collective. On failure everything opened is closed again. `sink` is only
 * used to record error details (may be NULL). */
ccoResult_t cco_bootstrap_init(cco_bootstrap* bs, cco_errsink* sink, const cco_id_info* id, int nRanks,
                               int rank, double timeout, int wakeFd);

/* In place: buf holds nRanks blocks; this rank's block must be filled. */
ccoResult_t cco_bootstrap_allgather(cco_bootstrap* bs, cco_errsink* sink, void* buf,
                                    size_t bytesPerRank);
ccoResult_t cco_bootstrap_barrier(cco_bootstrap* bs, cco_errsink* sink);

/* Tells every linked peer that this rank failed (best effort, never
 * blocks) and shuts the links down. Idempotent. */
void cco_bootstrap_fail(cco_bootstrap* bs, ccoResult_t result, const char* reason);

/* The cause a step reports, and passes on to the peers, when the wake fd
 * interrupts it from now on (instead of "communicator aborted"): for an
 * owner that wakes a blocked step because it learned of a failure of the
 * job elsewhere. Any thread; the first caller's cause stays. */
void cco_bootstrap_set_wake_reason(cco_bootstrap* bs, ccoResult_t result, const char* reason);
/* That cause, with its reason copied out, or ccoSuccess when none was set:
 * for other waits on the same wake fd (passing memory fds). Any thread. */
ccoResult_t cco_bootstrap_wake_cause(cco_bootstrap* bs, char* reason, size_t size);

/* Closes every socket. */
void cco_bootstrap_destroy(cco_bootstrap* bs);

#endif /* CCO_BOOT_BOOTSTRAP_H_ */
