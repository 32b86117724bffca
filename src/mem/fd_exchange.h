/*
 * Passing memory fds between the ranks of one host (LSA peers).
 *
 * Each rank of a communicator binds a datagram socket in the abstract Unix
 * namespace, named from the communicator's secret and the rank, so nothing
 * is left on the filesystem and every communicator has its own names. A
 * message carries one fd (SCM_RIGHTS), the registration sequence number and
 * a token derived from the secret; the receiver also checks the sender's uid
 * through SCM_CREDENTIALS, so no other user can plant memory in a window.
 */
#ifndef CCO_MEM_FD_EXCHANGE_H_
#define CCO_MEM_FD_EXCHANGE_H_

#include <stdbool.h>
#include <stdint.h>

#include "boot/bootstrap.h"
#include "cco/cco.h"

typedef struct {
  int fd;
  int rank;      /* world rank */
  uint64_t tag;  /* names this communicator's sockets */
  uint64_t token; /* proves a message comes from the job */
  double timeout;
  int wakeFd;
  cco_bootstrap* boot; /* why the wake fd fired, when its owner said (may be NULL) */
} cco_fd_exchange;

/* `boot` (may be NULL) gives the cause when the wake fd interrupts a wait
 * (cco_bootstrap_wake_cause): a peer's death, say, rather than "aborted". */
ccoResult_t cco_fd_exchange_open(cco_fd_exchange* x, const uint8_t secret[16], int rank,
                                  double timeout, int wakeFd, cco_bootstrap* boot);
void cco_fd_exchange_close(cco_fd_exchange* x);

/* Sends a copy of fd (the caller keeps its own) and `info` to world rank
 * `peer` on this host. */
ccoResult_t cco_fd_exchange_send(cco_fd_exchange* x, int peer, uint32_t seq, uint64_t info,
                                  int fd);

/* Receives one message of sequence `seq` from each world rank r with
 * expect[r] set (nRanks entries): fds[r] and infos[r] are filled. Stale or
 * foreign messages are dropped (their fds closed). On failure every fd
 * received so far is closed and fds[] is left at -1. */
ccoResult_t cco_fd_exchange_recv(cco_fd_exchange* x, uint32_t seq, const bool* expect, int nRanks,
                                  int* fds, uint64_t* infos);

#endif /* CCO_MEM_FD_EXCHANGE_H_ */
