/*
 * Socket bootstrap: rendezvous at the root (rank 0), then a mesh of links
 * at distances 1, 2, 4, ... used by the ring allgather (distance 1) and the
 * dissemination barrier (all distances).
 *
 * Trust: every connection starts with a HELLO carrying the 128-bit secret of
 * the unique id. The root and every link acceptor refuse (with a REFUSE
 * reply and a log line) anything without the secret and carry on; a silent
 * or slow stranger is evicted when room is needed, so any number of them
 * cannot keep a rank out. A HELLO that has the secret but cannot be
 * accepted (wrong nRanks, rank out of range or taken) comes from a
 * misconfigured member of this job: it is refused and the whole job fails.
 *
 * Creation: joiners keep their connection to the root until their links
 * are formed, and the root watches every joined rank until then, so a rank
 * that dies or fails during creation fails every other rank at once, with
 * its reason.
 *
 * Failure: the first failure on a rank (peer closed, timeout, mismatch,
 * abort) sends ABORT to every link and shuts the links down, so every other
 * rank blocked on this one fails promptly and passes it on. ABORT is never
 * written into a half-sent message: the message is finished first, or the
 * link is only shut down.
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


/* The message being sent, while it is incomplete: `head` (the header, and
 * the payload of a small message), then `body` (a large payload, the
 * caller's buffer). */
typedef struct {
  int fd; /* -1: none */
  uint8_t head[CCO_WIRE_HEADER_BYTES + CCO_WIRE_HELLO_BYTES];
  size_t headLen;
  const void* body;
  size_t bodyLen;
  size_t sent; /* bytes of head + body sent so far */
} cco_bootstrap_tx;

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
  /* During creation only: the root's connections to the joiners (nRanks
   * entries, -1 when closed), or a joiner's connection to the root. */
  int* joinFds;
  int rootFd;
  cco_bootstrap_tx tx;
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

/* Tells every linked peer (and, during creation, the root or the joiners)
 * that this rank failed, and shuts the links down. Best effort: it blocks
 * only to finish a message it was in the middle of sending (at most a
 * fraction of a second). Idempotent. */
void cco_bootstrap_fail(cco_bootstrap* bs, ccoResult_t result, const char* reason);

/* The cause a step reports, and passes on to the peers, when the wake fd
 * interrupts it from now on (instead of "communicator aborted"): for an
 * owner that wakes a blocked step because it learned of a failure of the
 * job elsewhere. Any thread; the first caller's cause stays. */
void cco_bootstrap_set_wake_reason(cco_bootstrap* bs, ccoResult_t result, const char* reason);
/* That cause, with its reason copied out, or ccoSuccess when none was set:
 * for other waits on the same wake fd (passing memory fds). Any thread. */
ccoResult_t cco_bootstrap_wake_cause(cco_bootstrap* bs, char* reason, size_t size);

/* Closes every socket. After a clean run the accepted side resets its
 * connections, so no TIME_WAIT holds a listening port. */
void cco_bootstrap_destroy(cco_bootstrap* bs);

#endif /* CCO_BOOT_BOOTSTRAP_H_ */
